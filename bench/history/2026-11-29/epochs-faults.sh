#!/bin/bash
# epochs-faults.sh [mount flags]: three epochs of ds4k on one mount, the page cache dropped
# (drop_caches=1) before each; the daemon's CPU per file, minor faults and RSS per epoch.
# $W/rd is the Go reader of cold-ab-go.sh (16 readers in file_list order).
W=${W:-/tmp/dbcpu}
mkdir -p /tmp/abm
${CASSFS:-cassfs} mount --dataset ds4k "$@" /tmp/abm > /tmp/abm.log 2>&1 &
for i in $(seq 50); do [ -e /tmp/abm/all/epoch-0/file_list.txt ] && break; sleep 0.1; done
pid=$(pgrep -f "mount --dataset ds4k.*/tmp/abm" | head -1)
sleep 0.5
for e in 0 1 2; do
  sync; echo 1 > /proc/sys/vm/drop_caches
  c0=$(awk '{print $14+$15}' /proc/$pid/stat); f0=$(awk '{print $10}' /proc/$pid/stat)
  out=$($W/rd /tmp/abm/all/epoch-$e)
  c1=$(awk '{print $14+$15}' /proc/$pid/stat); f1=$(awk '{print $10}' /proc/$pid/stat)
  echo "epoch $e $(echo $out | awk '{print $3}') files/s daemon $(( (c1-c0)*10000/4000 )) us/file minflt $((f1-f0)) rss $(awk '/VmRSS/{print $2}' /proc/$pid/status) kB"
done
kill -TERM $pid; wait
