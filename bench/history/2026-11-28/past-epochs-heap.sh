#!/bin/bash
# Epochs 0-12 of a fresh mount read by cassfs bench (16 readers, file_list order); after
# each, the daemon's live heap (after a collection, from --pprof) and the kernel's dentry
# count (/proc/slabinfo). Extra arguments go to cassfs mount.
#   BIN=bin/cassfs MNT=DIR DATASET=DS bench/history/2026-11-28/past-epochs-heap.sh [--cache-size 128MiB]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}"
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" --metrics-addr 127.0.0.1:9109 --pprof "$@" 2>/dev/null &
MP=$!
trap 'kill $MP; wait $MP' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
heap() { curl -s "127.0.0.1:9109/debug/pprof/heap?gc=1&debug=1" | awk '/^# HeapAlloc/{printf "%.1f MiB", $4/1048576}'; }
for e in $(seq 0 12); do
  echo "e$e $("$BIN" bench -d "$DATASET" --mount "$MNT" --samples 1000000 --readers 16 --epoch $e 2>/dev/null | awk '$1=="mount"{print $3}') files/s heap $(heap) slab-dentry $(awk '/^dentry /{print $2}' /proc/slabinfo)"
done
