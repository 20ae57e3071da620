#!/bin/bash
# DALI warm epochs 2-5 against the local tree, each DALI run a process of its own
# R: a Go reader of a directory's file_list.txt, 16 goroutines (given a second argument, the
# same names under a local tree without their position prefix). DATA/images: the local tree of
# the dataset big6k (6,000 generated images, 4 classes). PY: a Python with nvidia-dali.
BIN=${BIN:-bin/cassfs}; MNT=${MNT:-/mnt/cassfs}; PY=${PY:-.cache/pyenv/bin/python}; REPO=${REPO:-.}; DATA=${DATA:-data}; R=${R:-./rdr}
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d big6k $MNT --cache-size 128MiB --metrics-addr 127.0.0.1:9109 > mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
req() { curl -s 127.0.0.1:9109/metrics | awk '/^cassfs_fuse_requests_total/{s+=$2} END{print s}'; }
dali() { $PY "$REPO/e2e/readers/dali_bench.py" "$1" 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(round(d["images"]/d["seconds"]))'; }
local_list() { sed -E 's|^([^/]*)/[0-9]+_|\1/|' "$MNT/all/epoch-$1/file_list.txt" > "$DATA/images/file_list.txt"; }
for e in 0 1; do $R $MNT/all/epoch-$e > /dev/null; done
$R $MNT/all/epoch-1 $DATA/images > /dev/null
for e in 2 3 4 5; do
  local_list $e; l=$(dali "$DATA/images/file_list.txt")
  H=$(pgrep -P $MP | head -1); a=$(cpu $MP); h=$(cpu $H); r0=$(req)
  m=$(dali "$MNT/all/epoch-$e/file_list.txt")
  echo "dali e$e mount $m local $l ratio $(echo "scale=2; $m/$l" | bc) daemon $(( ($(cpu $MP)-a)*10000/6000 )) helper $(( ($(cpu $H)-h)*10000/6000 )) req $(( $(req)-r0 ))"
done
kill $MP; wait $MP
