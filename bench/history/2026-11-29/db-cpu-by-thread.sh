#!/bin/bash
# db-cpu-by-thread.sh store SIZE PAR [FILES_PER_S] | mount BIN [flags]: one cold pass over
# dataset $DS (default ds4k) with Cassandra's CPU per file by thread group
# (db-cpu-by-thread.py). store: the store client (db-cpu-store-reader.go.txt, built as
# $W/blk from a main package inside the module) reading every blob in a shuffled order,
# SIZE ids per request (1: Get, else GetBlock), PAR requests at once, paced at FILES_PER_S
# if given. mount: a fresh mount of BIN read by 16 Go readers in file_list order ($W/rd:
# the reader of cold-ab-go.sh); prints the daemon's and the reader's CPU per file and the
# daemon's minor page faults. Page cache dropped before each pass. Needs root.
W=${W:-/tmp/dbcpu}; mkdir -p $W
cpid=$(pgrep -f CassandraDaemon | head -1)
kind=$1; shift
if [ $kind = store ]; then
  coproc P { $W/blk ${DS:-ds4k} $1 $2 $3 2>&1; }
  read -u ${P[0]} l
  sync; echo 3 > /proc/sys/vm/drop_caches
  bp=$(pgrep -f "blk ${DS:-ds4k}" | head -1)
  python3 $(dirname $0)/db-cpu-by-thread.py snap $cpid $W/a
  echo go >&${P[1]}
  read -u ${P[0]} out
  python3 $(dirname $0)/db-cpu-by-thread.py snap $cpid $W/b
  echo "store-$1x$2 $out"
  wait
else
  bin=$1; shift
  mkdir -p /tmp/abm
  $bin mount --dataset ${DS:-ds4k} --metrics-addr 127.0.0.1:9108 "$@" /tmp/abm > /tmp/abm.log 2>&1 &
  for i in $(seq 50); do [ -e /tmp/abm/all/epoch-0/file_list.txt ] && break; sleep 0.1; done
  pid=$(pgrep -f "mount --dataset ${DS:-ds4k}.*/tmp/abm" | head -1)
  sleep 0.5
  sync; echo 3 > /proc/sys/vm/drop_caches
  c0=$(awk "{print \$14+\$15}" /proc/$pid/stat); f0=$(awk "{print \$10}" /proc/$pid/stat)
  python3 $(dirname $0)/db-cpu-by-thread.py snap $cpid $W/a
  out=$(/usr/bin/time -f "rdcpu %U %S" $W/rd /tmp/abm/all/epoch-0 2>&1 | tr '\n' ' ')
  python3 $(dirname $0)/db-cpu-by-thread.py snap $cpid $W/b
  c1=$(awk "{print \$14+\$15}" /proc/$pid/stat); f1=$(awk "{print \$10}" /proc/$pid/stat); echo minflt $(( (f1-f0) ))
  echo "mount $* $(echo $out | awk '{print $3}') files/s daemon $(( (c1-c0)*10000/4000 )) us/file reader $(echo $out | awk '{printf "%.0f", ($(NF-1)+$NF)*1e6/4000}') us/file"
  curl -s 127.0.0.1:9108/metrics > $W/metrics.txt; kill -TERM $pid; wait
fi
python3 $(dirname $0)/db-cpu-by-thread.py diff $W/a $W/b 4000
