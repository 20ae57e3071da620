#!/bin/bash
# A pageout episode on demand: a fresh mount reads epochs 0-3 of DATASET with `cassfs
# bench`; before epoch 2, N files (through epoch 1's names, so that no name of epoch 2 is
# looked up early) lose 32 KiB in their middle from the page cache (posix_fadvise
# DONTNEED), as the machine's proactive reclaim does to a few files now and then.
# Prints per epoch: files/s, read latency, the readers', daemon's and helper's CPU, the
# database fetches, the resident files READ, the looks at files nearing the readers.
# Usage: BIN=bin/cassfs MNT=/mnt/x DATASET=big6k N=72 pageout-episode.sh [mount flags]
set -e
BIN=${BIN:-cassfs}; MNT=${MNT:?mountpoint}; DATASET=${DATASET:?dataset}; N=${N:-72}
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d "$DATASET" "$MNT" --cache-size 128MiB --metrics-addr 127.0.0.1:9109 "$@" > mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
m() { curl -s 127.0.0.1:9109/metrics | awk -v k="$1" '$1==k{print $2}'; }
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
for e in 0 1 2 3; do
  if [ $e = 2 ] && [ "$N" -gt 0 ]; then
    python3 - "$MNT/all/epoch-1" "$N" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
lines = [l.rsplit(" ", 1)[0] for l in open(os.path.join(root, "file_list.txt")).read().split("\n") if l]
for l in random.sample(lines, n):
    fd = os.open(os.path.join(root, l), os.O_RDONLY)
    os.posix_fadvise(fd, 32768, 32768, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
  fi
  H=$(pgrep -P $MP | head -1); h0=$(ticks $H); d0=$(ticks $MP)
  f0=$(m cassfs_fetch_seconds_count); r0=$(m cassfs_page_cache_resident_reads_total); n0=$(m cassfs_page_cache_nearing_checked_total)
  $BIN bench -d "$DATASET" --mount "$MNT" --samples 6000 --readers 16 --epoch $e 2>/dev/null |
    awk -v e=$e '$1=="mount"{printf "e%s %s files/s p50 %s p99 %s reader %s µs/file ", e, $3, $5, $6, $8}'
  echo "daemon $(( $(ticks $MP)-d0 )) helper $(( $(ticks $H)-h0 )) ticks; fetches $(( $(m cassfs_fetch_seconds_count)-f0 )) resident READs $(( $(m cassfs_page_cache_resident_reads_total)-r0 )) looks $(( $(m cassfs_page_cache_nearing_checked_total)-n0 ))"
done
kill $MP; wait $MP || true
