#!/bin/bash
# warm epochs 2-9 of one mount; before every other one, the pages of N random files of it
# (default 60, 1%) are dropped from the mount and from the local tree alike (drop-pages.py).
# BIN, MNT, R (a Go reader of a directory's file_list.txt, 16 goroutines; a second argument
# maps the names to a local tree), LOCAL (the local tree); dataset big6k (6,000 generated
# images). Extra arguments go to cassfs mount. Prints per epoch: files/s of each tree, CPU
# per file of the daemon, its helper and the local Cassandra node, database fetches, requests.
BIN=${BIN:-bin/cassfs}; MNT=${MNT:-/mnt/cassfs}; R=${R:-./rdr}; N=${N:-60}
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d big6k $MNT --cache-size 128MiB --metrics-addr 127.0.0.1:9109 "$@" > mount.log 2>&1 &
MP=$!
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
st() { awk '{print $14+$15}' /proc/$1/stat; }
met() { curl -s 127.0.0.1:9109/metrics | awk -v m="$1" '$1 ~ "^"m {s+=$2} END{print s+0}'; }
CP=$(pgrep -f CassandraDaemon | head -1)
$R $MNT/all/epoch-0 >/dev/null
$R $MNT/all/epoch-1 >/dev/null
for e in 2 3 4 5 6 7 8 9; do
  n=0; [ $((e % 2)) = 1 ] && n=$N
  python3 $(dirname $0)/drop-pages.py $MNT/all/epoch-$e $LOCAL $n $e
  sleep 0.3
  l=$($R $MNT/all/epoch-$e $LOCAL | awk '{print $1}')
  sleep 0.3
  H=$(pgrep -P $MP | head -1); h0=$(st $H); d0=$(st $MP); c0=$(st $CP); f0=$(met cassfs_fetch_seconds_count); r0=$(met cassfs_fuse_requests_total)
  m=$($R $MNT/all/epoch-$e | awk '{print $1}')
  echo "e$e drop $n local $l mount $m ratio $(echo "scale=3; $m/$l" | bc) daemon $(( ($(st $MP)-d0)*10000/6000 )) helper $(( ($(st $H)-h0)*10000/6000 )) cassandra $(( ($(st $CP)-c0)*10000/6000 )) us/file fetches $(( $(met cassfs_fetch_seconds_count)-f0 )) req $(( $(met cassfs_fuse_requests_total)-r0 ))"
done
kill $MP; wait $MP
