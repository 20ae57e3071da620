#!/bin/bash
# ab-cold.sh BIN DS: a fresh mount of DS with BIN (default flags), page cache dropped, one cold
# epoch read by 16 Python threads in file_list order: files/s, daemon+helper CPU µs per file,
# FUSE requests per file
M=/tmp/mab; BIN=$1; DS=$2; cd "$(git rev-parse --show-toplevel)"; mkdir -p $M
$BIN mount --hosts 127.0.0.1:9042 -d $DS --metrics-addr 127.0.0.1:9110 $M > /tmp/mab.log 2>&1 &
MP=$!
for i in $(seq 60); do [ -f $M/all/epoch-0/file_list.txt ] && break; sleep 0.5; done
HP=$(pgrep -f "lookahead-helper $M")
cpu() { awk '{s+=$14+$15} END {print s}' /proc/$MP/stat /proc/$HP/stat; }
req() { curl -s 127.0.0.1:9110/metrics | grep '^cassfs_fuse_requests_total' | grep -v ioctl | awk '{s+=$2} END {print s}'; }
N=$(wc -l < $M/all/epoch-0/file_list.txt)
sync; echo 3 > /proc/sys/vm/drop_caches; sleep 0.5
ops() { curl -s 127.0.0.1:9110/metrics | grep -E '^cassfs_fuse_requests_total|^cassfs_streamed_names_late' | grep -v ioctl | sed 's/cassfs_fuse_requests_total{op="\(.*\)"} /\1 /' | sort; }
ops > /tmp/mab.ops0
c0=$(cpu); r0=$(req); t0=$(date +%s.%N)
.cache/pyenv/bin/python - $M/all/epoch-0 <<'PY'
import sys, os, concurrent.futures as cf
root = sys.argv[1]
paths = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
def rd(p):
    with open(os.path.join(root, p), "rb") as f: return len(f.read())
with cf.ThreadPoolExecutor(16) as ex: sum(ex.map(rd, paths))
PY
t1=$(date +%s.%N); c1=$(cpu); r1=$(req)
echo "$(basename $BIN) $N files: $(echo "$N/($t1-$t0)" | bc -l | xargs printf %.0f) files/s, daemon $(echo "($c1-$c0)*10000/$N" | bc -l | xargs printf %.0f) us/file, requests $(echo "($r1-$r0)/$N" | bc -l | xargs printf %.3f)/file"
ops > /tmp/mab.ops1; join /tmp/mab.ops0 /tmp/mab.ops1 | awk -v n=$N '{d=$3-$2; if (d>0) printf "  %s %.3f", $1, d/n} END {print ""}'
kill -TERM $MP; wait $MP
