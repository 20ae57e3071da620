#!/bin/bash
# What binding a warm epoch's names costs: after epochs 0-1 are read (cassfs bench, 16
# readers), ls -f -R lists epochs 2-9 (READDIRPLUS: every name gets its entry); the
# daemon's CPU (/proc/PID/stat) and ls's own times. Extra arguments go to cassfs mount.
#   BIN=bin/cassfs MNT=DIR DATASET=DS bench/history/2026-11-28/listing-cost.sh [--cache-size 128MiB]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}"
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" "$@" 2>/dev/null &
MP=$!
trap 'kill $MP; wait $MP' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
st() { awk '{print $14+$15}' "/proc/$1/stat"; }
for e in 0 1; do "$BIN" bench -d "$DATASET" --mount "$MNT" --samples 1000000 --readers 16 --epoch $e > /dev/null 2>&1; done
n=$(wc -l < "$MNT/all/epoch-0/file_list.txt")
d0=$(st $MP)
/usr/bin/time -f "ls: %e s, %U s user, %S s system" bash -c "for e in 2 3 4 5 6 7 8 9; do ls -f -R '$MNT'/all/epoch-\$e > /dev/null; done"
echo "$(basename "$BIN"): $((8 * n)) entries, daemon $(( ($(st $MP) - d0) * 10 )) ms"
