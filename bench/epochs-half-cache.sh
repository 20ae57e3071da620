#!/bin/bash
# usage: epochs.sh BIN: 3 epochs of prof8k (818 MiB) with --cache-size 410MiB; fetches per epoch
B=$1; M=/tmp/epmnt; mkdir -p $M
$B mount -d prof8k --cache-size 429000000 --metrics-addr 127.0.0.1:9189 $M 2>/tmp/ep.log & P=$!
for i in $(seq 100); do [ -f $M/all/epoch-0/file_list.txt ] && break; sleep 0.1; done
prev=0
for e in 0 1 2; do
  sync; echo 1 > /proc/sys/vm/drop_caches
  r=$(${READER:?a reader: READER=path, reads DIR/file_list.txt with 16 goroutines} $M/all/epoch-$e)
  f=$(curl -s http://127.0.0.1:9189/metrics | awk '/^cassfs_fetch_seconds_count/ {print $2}')
  echo "epoch $e: $r; fetches $(( ${f%.*} - prev ))"; prev=${f%.*}
done
kill $P; wait $P 2>/dev/null
