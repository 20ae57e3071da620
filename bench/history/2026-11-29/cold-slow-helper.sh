#!/bin/bash
# cold-slow-helper.sh BIN HOGS: a fresh mount of dataset c1200 with BIN, its lookahead helper
# at nice 19, HOGS busy loops beside; one cold epoch read by 16 threads in file_list order;
# FUSE requests per file (output: cold-slow-helper.txt)
M=/tmp/m1200; BIN=$1; cd "$(git rev-parse --show-toplevel)"
umount $M 2>/dev/null
$BIN mount --hosts 127.0.0.1:9042 -d c1200 --metrics-addr 127.0.0.1:9109 $M > /tmp/m1200.log 2>&1 &
MP=$!
for i in $(seq 60); do [ -f $M/all/epoch-0/file_list.txt ] && break; sleep 0.5; done
renice -n 19 -p $(pgrep -f "lookahead-helper $M") >/dev/null
sync; echo 3 > /proc/sys/vm/drop_caches
for h in $(seq $2); do (while :; do :; done) & done
req() { curl -s 127.0.0.1:9109/metrics | grep -E '^cassfs_fuse_requests_total|^cassfs_streamed_names_late' | sed 's/cassfs_fuse_requests_total{op="\(.*\)"} /\1 /' | sort; }
req > /tmp/req0
.cache/pyenv/bin/python - $M/all/epoch-0 <<'PY'
import sys, os, concurrent.futures as cf, time
root = sys.argv[1]
paths = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
t = time.time()
def rd(p):
    with open(os.path.join(root, p), "rb") as f: return len(f.read())
with cf.ThreadPoolExecutor(16) as ex: n = sum(ex.map(rd, paths))
print(f"{len(paths)} files {n} bytes {time.time()-t:.2f}s")
PY
req > /tmp/req1
kill $(jobs -p | grep -v "^$MP$") 2>/dev/null
join /tmp/req0 /tmp/req1 | awk '{d=$3-$2; if (d>0 && $1 != "ioctl") printf "%s %.3f  ", $1, d/1200} END {print ""}'; grep late /tmp/req1
kill -TERM $MP; wait $MP
