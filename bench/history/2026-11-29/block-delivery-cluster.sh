#!/bin/bash
# clu-bench.sh NEW OLD: cold epochs on a local three-node cluster (RF 3, 3,000 ~40 KB images),
# the two builds alternated, 16 Python threads in file_list order, page cache dropped;
# variant "pausing": node 2 stopped for 200 ms in every second (as a GC pause would).
# VARIANTS and ROUNDS choose the passes. Output: block-delivery-cluster.txt
set -u
cd "$(git rev-parse --show-toplevel)/e2e"
export CASSFS_CASSANDRA_DIR=/tmp/clu CASSFS_CASSANDRA_IP_BASE=10
HOSTS=127.0.0.11:9042,127.0.0.12:9042,127.0.0.13:9042
NEW=$1 OLD=$2 M=/tmp/mclu PY=../.cache/pyenv/bin/python
mkdir -p $M
if [ ! -f /tmp/clu-ds/done ]; then
  ./cassandra.sh start 3 || exit 1
  rm -rf /tmp/clu-ds; $NEW gen --out /tmp/clu-ds --count 3000 --classes 4 --mean-size 40000 --seed 21 --progress none
  $NEW ingest -d clu --hosts $HOSTS --replication 3 --progress none --csv /tmp/clu-ds/metadata.csv /tmp/clu-ds/images && touch /tmp/clu-ds/done
fi
pid2=$(./cassandra.sh status | sed -n 's/node 2: running (pid \([0-9]*\)).*/\1/p')
pass() { # bin variant
  $1 mount --hosts $HOSTS -d clu --metrics-addr 127.0.0.1:9119 $M > /tmp/mclu.log 2>&1 &
  local mp=$!
  for i in $(seq 60); do [ -f $M/all/epoch-0/file_list.txt ] && break; sleep 0.5; done
  sync; echo 3 > /proc/sys/vm/drop_caches
  local pauser=
  if [ "$2" = pausing ]; then (while :; do kill -STOP $pid2; sleep 0.2; kill -CONT $pid2; sleep 0.8; done) & pauser=$!; fi
  local c0=$(awk '{print $14+$15}' /proc/$mp/stat)
  local out=$($PY - $M/all/epoch-0 <<'PY'
import sys, os, concurrent.futures as cf, time
root = sys.argv[1]
paths = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
t = time.time()
def rd(p):
    s = time.time()
    with open(os.path.join(root, p), "rb") as f: f.read()
    return time.time() - s
with cf.ThreadPoolExecutor(16) as ex: lat = sorted(ex.map(rd, paths))
el = time.time() - t
print(f"{len(paths)/el:.0f} files/s p50 {lat[len(lat)//2]*1e3:.1f} ms p99 {lat[len(lat)*99//100]*1e3:.1f} ms max {lat[-1]*1e3:.0f} ms")
PY
)
  local c1=$(awk '{print $14+$15}' /proc/$mp/stat)
  [ -n "$pauser" ] && { kill $pauser; wait $pauser 2>/dev/null; kill -CONT $pid2; }
  local bh=$(curl -s 127.0.0.1:9119/metrics | awk '/^cassfs_fetch_block_hedges_total/{h=$2} /^cassfs_fetch_blocks_total/{b=$2} /^cassfs_fetch_block_samples_total/{s=$2} /^cassfs_fetch_seconds_count/{f=$2} /^cassfs_fuse_requests_total{op="read"}/{r=$2} /^cassfs_page_cache_pushes_total{result="pushed"}/{p=$2} END{print "blocks " b ", samples in blocks " s ", fetches " f ", block hedges " h ", READs " r ", pushed " p}')
  echo "$(basename $1) $2: $out; $bh; daemon cpu $(( (c1-c0)*10000/3000 )) us/file"
  kill -TERM $mp; wait $mp
}
for v in ${VARIANTS:-plain pausing}; do
  for r in $(seq ${ROUNDS:-3}); do
    if [ $((r%2)) = 1 ]; then pass $NEW $v; pass $OLD $v; else pass $OLD $v; pass $NEW $v; fi
  done
done
