#!/bin/bash
# epochs from the disk tier after every kernel cache dropped; perf of the daemon over epochs 2-3
set -u
# Env: BIN (cassfs), MNT, W (a work directory); the dataset prof4k as in warm-half-memory.sh.
mkdir -p $MNT; rm -rf $W/cd; mkdir -p $W/cd
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d prof4k $MNT --cache-size 215MB --cache-dir $W/cd --cache-dir-size 2GB > $W/mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
$BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch 0 | awk '$1=="mount"{print "cold", $3, $9}'
for e in 1 2 3; do
  sync; echo ${DROP:-3} > /proc/sys/vm/drop_caches
  if [ $e = 2 ] && [ "${PROF:-}" = 1 ]; then perf record -F 5000 -g -o $W/perf-drop.data -p $MP 2>/dev/null & PP=$!; sleep 0.3; fi
  a=$(cpu $MP)
  $BIN bench -d prof4k --mount "$MNT" --samples 4000 --readers 16 --epoch $e 2>/dev/null | awk '$1=="mount"{printf "mount %s files/s reader %s µs | ", $3, $8}'
  echo "epoch$e daemon $(( ($(cpu $MP)-a)*10000/4000 ))"
done
if [ "${PROF:-}" = 1 ]; then kill -INT $PP; wait $PP; fi
kill $MP; wait $MP
