#!/bin/bash
# How many files of the mount and of the same local tree are no longer whole in the page
# cache, 0 to 35 s after both were read once, and how much the machine's DAMON pageout
# scheme (if any) took meanwhile. A fresh mount; the local tree is read first, then the
# mount's epoch 0 (cold), then fincore(1) looks at both.
#   BIN=bin/cassfs MNT=DIR DATASET=DS LOCAL=TREE bench/history/2026-11-28/page-losses.sh [mount flags]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}" "${LOCAL:?}"
K=/sys/kernel/mm/damon/admin/kdamonds/0
damon() { [ -d $K/contexts/0/schemes/0 ] || { echo 0; return; }; echo update_schemes_stats > $K/state; echo $(( $(cat $K/contexts/0/schemes/0/stats/sz_applied) >> 20 )); }
short() { fincore -b -n -o RES,SIZE "$@" 2>/dev/null | awk '$1<$2{n++; miss+=$2-$1} END{printf "%d files short (%d KiB)", n, miss/1024}'; }
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" "$@" > /dev/null 2>&1 &
MP=$!
trap 'kill $MP; wait $MP' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cat "$LOCAL"/*/* > /dev/null
d0=$(damon)
"$BIN" bench -d "$DATASET" --mount "$MNT" --samples 1000000 --readers 16 --epoch 0 2>/dev/null | awk '$1=="mount"{print "epoch 0 (cold):", $3, "files/s"}'
for t in 0 5 10 20; do
  sleep $t
  echo "after +${t}s: mount $(short "$MNT"/all/epoch-0/*/*), local $(short "$LOCAL"/*/*); DAMON paged out $(( $(damon) - d0 )) MiB"
done
