#!/bin/bash
# fresh mount; epochs 0-1 (bench), then 3 DALI epochs; per epoch: LOOKUPs, READDIRPLUS, helper and daemon CPU
# Env: BIN (cassfs), PY (a Python with nvidia-dali), REPO (this repository), MNT. Dataset prof4k.
BIN=${BIN:-cassfs}; PY=${PY:-python3}
MNT=${MNT:-/tmp/mnt-prof4k}; mkdir -p $MNT
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d prof4k --metrics-addr 127.0.0.1:9199 $MNT > /tmp/mount-prof4k.log 2>&1 &
MP=$!
for i in $(seq 100); do [ -d $MNT/all ] && break; sleep 0.1; done
op() { curl -s 127.0.0.1:9199/metrics | grep -E "^cassfs_fuse_requests_total\{op=\"$1\"" | awk '{print $2}'; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
for e in 0 1 2 3 4; do
  H=$(pgrep -P $MP | head -1)
  l0=$(op lookup); d0=$(op readdirplus); p0=$(op readdir); c0=$(cpu $MP); h0=$(cpu $H)
  if [ $e -lt 2 ]; then $BIN bench -d prof4k --mount $MNT --samples 4000 --readers 16 --epoch $e >/dev/null 2>&1; w=go
  else $PY $REPO/e2e/readers/dali_bench.py $MNT/all/epoch-$e/file_list.txt >/dev/null 2>&1; w=dali; fi
  echo "e$e $w: lookups $(( $(op lookup)-l0 )) readdirplus $(( $(op readdirplus)-d0 )) readdir $(( $(op readdir)-p0 )) daemon $(( ($(cpu $MP)-c0)*10000/4000 )) helper $(( ($(cpu $H)-h0)*10000/4000 )) µs/file"
done
curl -s 127.0.0.1:9199/metrics | grep -E '^cassfs_fuse_requests_total' | tr '\n' ' '; echo
kill $MP; wait $MP
