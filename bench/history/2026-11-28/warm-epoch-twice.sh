#!/bin/bash
# Each warm epoch (2-4) of a fresh mount read twice by cassfs bench (16 readers, file_list
# order), after the same local tree read the same way (cassfs bench --local, which reads
# the store client's path first): the first pass binds the epoch's
# names and follows the readers, the second is the kernel alone (no request reaches the
# daemon). The daemon's and the lookahead helper's CPU per file (/proc/PID/stat) and the
# requests that reached the daemon (from --metrics-addr). Extra arguments go to cassfs mount.
#   BIN=bin/cassfs MNT=DIR DATASET=DS LOCAL=TREE bench/history/2026-11-28/warm-epoch-twice.sh [--cache-size 128MiB]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}" "${LOCAL:?}"
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" --metrics-addr 127.0.0.1:9109 "$@" 2>/dev/null &
MP=$!
trap 'kill $MP; wait $MP' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
st() { awk '{print $14+$15}' "/proc/$1/stat"; }
req() { curl -s 127.0.0.1:9109/metrics | awk '/^cassfs_fuse_requests_total/{s+=$2} END{print s}'; }
bench() { "$BIN" bench -d "$DATASET" --mount "$MNT" --samples 1000000 --readers 16 --epoch "$1" 2>/dev/null; }
local() { "$BIN" bench -d "$DATASET" --local "$LOCAL" --samples 1000000 --readers 16 --epoch "$1" 2>/dev/null | awk '$1=="local"{print $3}'; }
bench 0 > /dev/null
bench 1 > /dev/null
n=$(wc -l < "$MNT/all/epoch-0/file_list.txt")
for e in 2 3 4; do
  echo "epoch $e: local $(local $e) files/s"
  for pass in first second; do
    H=$(pgrep -P $MP | head -1); h0=$(st "$H"); d0=$(st $MP); r0=$(req)
    r=$(bench $e | awk '$1=="mount"{print $3}')
    echo "  $pass pass: $r files/s, daemon $(( ($(st $MP) - d0) * 10000 / n )) µs/file, helper $(( ($(st "$H") - h0) * 10000 / n )) µs/file, $(( $(req) - r0 )) requests"
  done
done
