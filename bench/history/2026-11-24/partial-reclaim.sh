#!/bin/bash
# Env: BIN (cassfs), PY (a Python with nvidia-dali), REPO (this repository), MNT. Dataset prof4k.
# fresh mount; epoch 0 (bench), DALI epochs 1-2; then 5% of the files paged out (fadvise DONTNEED,
# as a proactive reclaim does), DALI epochs 3-4: per epoch images/s, READs, daemon µs/file
BIN=${BIN:-cassfs}; PY=${PY:-python3}
MNT=${MNT:-/tmp/mnt-prof4k}; mkdir -p $MNT
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d prof4k --metrics-addr 127.0.0.1:9199 $MNT > /tmp/mount-prof4k.log 2>&1 &
MP=$!
for i in $(seq 100); do [ -d $MNT/all ] && break; sleep 0.1; done
m() { curl -s 127.0.0.1:9199/metrics | grep -E "^$1" | awk '{print $2}'; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
$BIN bench -d prof4k --mount $MNT --samples 4000 --readers 16 --epoch 0 >/dev/null 2>&1
out=""
for e in 1 2 3 4; do
  if [ $e = 3 ]; then
    python3 - $MNT/all/epoch-2 <<'PY'
import os, random, sys
root = sys.argv[1]
names = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
random.seed(1)
for n in random.sample(names, len(names) // 20):
    fd = os.open(os.path.join(root, n), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
    out="$out | 5% paged out |"
  fi
  r0=$(m 'cassfs_fuse_requests_total\{op="read"'); c0=$(cpu $MP)
  t=$($PY $REPO/e2e/readers/dali_bench.py $MNT/all/epoch-$e/file_list.txt 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(round(d["images"]/d["seconds"]))')
  out="$out e$e: ${t}/s, $(( $(m 'cassfs_fuse_requests_total\{op="read"') - r0 )) READs, daemon $(( ($(cpu $MP)-c0)*10000/4000 )) µs/file;"
done
echo "$out reclaims $(m cassfs_page_cache_reclaims_total) checks $(m cassfs_page_cache_checks_total) found gone $(m cassfs_page_cache_checked_gone_total)"
kill $MP; wait $MP
