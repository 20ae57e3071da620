#!/bin/bash
# warm epochs with a 0.3 s gap before each pass: local, gap, mount, gap
# R: a Go reader of a directory's file_list.txt, 16 goroutines (given a second argument, the
# same names under a local tree without their position prefix); EP1: a directory holding
# epoch 1's file_list.txt; LOCAL: the local tree. Dataset: 6,000 generated images, 4 classes.
BIN=${BIN:-bin/cassfs}; MNT=${MNT:-/mnt/cassfs}; R=${R:-./rdr}
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d big6k $MNT --cache-size 128MiB --metrics-addr 127.0.0.1:9109 "$@" > mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
st() { awk '{print $14+$15}' /proc/$1/stat; }
req() { curl -s 127.0.0.1:9109/metrics | awk '/^cassfs_fuse_requests_total/{s+=$2} END{print s}'; }
$R $MNT/all/epoch-0 >/dev/null
$R $MNT/all/epoch-1 >/dev/null
for e in 2 3 4 5 6 7; do
  sleep 0.3
  l=$($R ${EP1:-ep1} ${LOCAL:-images} | awk '{print $1}')
  sleep 0.3
  H=$(pgrep -P $MP | head -1); h0=$(st $H); d0=$(st $MP); r0=$(req)
  m=$($R $MNT/all/epoch-$e | awk '{print $1}')
  echo "e$e local $l mount $m ratio $(echo "scale=2; $m/$l" | bc) daemon $(( ($(st $MP)-d0)*10000/6000 )) helper $(( ($(st $H)-h0)*10000/6000 )) req $(( $(req)-r0 ))"
done
kill $MP; wait $MP
