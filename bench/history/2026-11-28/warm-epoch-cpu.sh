#!/bin/bash
# Warm epochs 1-12 of a fresh mount read by cassfs bench (16 readers, file_list order)
# after a cold epoch 0: their mean rate, and the daemon's and the lookahead helper's CPU
# per file over them (/proc/PID/stat). Extra arguments go to cassfs mount.
#   BIN=bin/cassfs MNT=DIR DATASET=DS bench/history/2026-11-28/warm-epoch-cpu.sh [--cache-size 128MiB]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}"
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" "$@" 2>/dev/null &
MP=$!
trap 'kill $MP; wait $MP' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
st() { awk '{print $14+$15}' "/proc/$1/stat"; }
rate() { "$BIN" bench -d "$DATASET" --mount "$MNT" --samples 1000000 --readers 16 --epoch "$1" 2>/dev/null | awk '$1=="mount"{print $3}' | tr -d ,; }
rate 0 > /dev/null
n=$(wc -l < "$MNT/all/epoch-0/file_list.txt")
H=$(pgrep -P $MP | head -1); h0=$(st "$H"); d0=$(st $MP)
s=0; for e in $(seq 1 12); do s=$((s + $(rate $e | cut -d. -f1))); done
echo "$(basename "$BIN"): mean $((s / 12)) files/s, daemon $(( ($(st $MP) - d0) * 10000 / (12 * n) )) µs/file, helper $(( ($(st "$H") - h0) * 10000 / (12 * n) )) µs/file"
