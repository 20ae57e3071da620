#!/bin/bash
# warm epochs with a memory cache half the dataset and a disk tier (TIER=0: none); Go reader (cassfs bench) and DALI
set -u
# Env: BIN (cassfs), MNT, PY (a Python with nvidia-dali), REPO (this repository), DATA (cassfs gen --count 4000 --out DATA, ingested as prof4k), W (a work directory).
mkdir -p $MNT; rm -rf $W/cd; mkdir -p $W/cd
sync; echo 3 > /proc/sys/vm/drop_caches
tier="--cache-dir $W/cd --cache-dir-size 2GB"; [ "${TIER:-1}" = 0 ] && tier=
$BIN mount -d prof4k $MNT --cache-size 215MB $tier > $W/mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
dali() { $PY "$REPO/e2e/readers/dali_bench.py" "$1" 2>/dev/null | $PY -c 'import json,sys; d=json.load(sys.stdin); print(round(d["images"]/d["seconds"]))'; }
local_list() { sed -E 's|^([^/]*)/[0-9]+_|\1/|' "$MNT/all/epoch-$1/file_list.txt" > "$DATA/images/file_list.txt"; }
$BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch 0 | awk '$1=="mount"{print "cold", $3, $9}'
H=$(pgrep -P $MP | head -1)
for e in 1 2 3 4; do
  a=$(cpu $MP); h=$(cpu $H)
  $BIN bench -d prof4k --mount "$MNT" --local $DATA/images --samples 4000 --readers 16 --epoch $e | awk '$1=="mount"||$1=="local"{printf "%s %s %s | ", $1, $3, $7}'
  echo "go$e daemon $(( ($(cpu $MP)-a)*10000/4000 )) helper $(( ($(cpu $H)-h)*10000/4000 ))"
done
if [ "${PROF:-}" = 1 ]; then perf record -F 5000 -g -o $W/perf.data -p $MP 2>/dev/null & PP=$!; sleep 0.5; fi
for e in 5 6 7; do
  local_list $e; a=$(cpu $MP); h=$(cpu $H); m=$(dali "$MNT/all/epoch-$e/file_list.txt"); b=$(cpu $MP); h2=$(cpu $H)
  l=$(dali "$DATA/images/file_list.txt")
  echo "dali$e $m/$l daemon $(( (b-a)*10000/4000 )) helper $(( (h2-h)*10000/4000 ))"
done
if [ "${PROF:-}" = 1 ]; then kill -INT $PP; wait $PP; fi
$BIN stats $MNT 2>/dev/null | head -40 > $W/stats.txt
kill $MP; wait $MP
