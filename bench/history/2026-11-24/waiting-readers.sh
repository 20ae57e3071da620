#!/bin/bash
# The runs of waiting-readers.txt. Usage: waiting-readers.sh cold|coldwarm|dali|warmprof|same
# Env: BIN (cassfs binary), DATA (the tree of `cassfs gen --count 4000 --out DATA`, ingested
# as prof4k), PY (a Python with nvidia-dali), REPO (this repository), MNT (a directory).
set -u
MNT=${MNT:-/tmp/mnt-prof4k}; mkdir -p "$MNT"
mount_fresh() {
  sync; echo 3 > /proc/sys/vm/drop_caches
  $BIN mount -d prof4k "$MNT" > /tmp/mount-prof4k.log 2>&1 &
  MP=$!
  for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
}
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
dali() { $PY "$REPO/e2e/readers/dali_bench.py" "$1" 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(round(d["images"]/d["seconds"]))'; }
local_list() { sed -E 's|^([^/]*)/[0-9]+_|\1/|' "$MNT/all/epoch-$1/file_list.txt" > "$DATA/images/file_list.txt"; }
case $1 in
cold)
  mount_fresh
  $BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch 0 ;;
coldwarm)
  mount_fresh
  $BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch 0 | awk '$1=="mount"{print "cold", $3, $9}'
  H=$(pgrep -P $MP | head -1); c0=$(cpu $MP); h0=$(cpu $H)
  for e in 1 2 3 4 5 6 7 8; do $BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch $e > /dev/null; done
  echo "warm: daemon $(( ($(cpu $MP)-c0)*10000/32000 )) helper $(( ($(cpu $H)-h0)*10000/32000 )) µs/file" ;;
dali|warmprof)
  mount_fresh
  for e in 0 1; do $BIN bench -d prof4k --mount "$MNT" --local "$DATA/images" --samples 4000 --readers 16 --epoch $e; done
  H=$(pgrep -P $MP | head -1)
  if [ $1 = warmprof ]; then perf record -F 5000 -g -o perf.warm -p $MP & PP=$!; sleep 0.5; fi
  c0=$(cpu $MP); h0=$(cpu $H)
  for e in 2 3; do
    local_list $e; a=$(cpu $MP); m=$(dali "$MNT/all/epoch-$e/file_list.txt"); b=$(cpu $MP)
    l=$(dali "$DATA/images/file_list.txt")
    echo "dali$e $m/$l dm$(( (b-a)*10000/4000 ))"
  done
  echo "daemon $(( ($(cpu $MP)-c0)*10000/8000 )) helper $(( ($(cpu $H)-h0)*10000/8000 )) µs/file"
  if [ $1 = warmprof ]; then kill -INT $PP; wait $PP; fi ;;
same)
  mount_fresh
  $BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch 0
  local_list 2
  for i in 1 2 3; do
    a=$(cpu $MP); m=$(dali "$MNT/all/epoch-2/file_list.txt"); b=$(cpu $MP)
    echo "epoch-2 pass $i: $m/$(dali "$DATA/images/file_list.txt") dm$(( (b-a)*10000/4000 ))"
  done ;;
esac
kill $MP; wait $MP
