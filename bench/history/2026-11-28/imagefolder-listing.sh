#!/bin/bash
# Warm epochs read by torchvision's ImageFolder + DataLoader (4 workers, batch 64, the
# bytes only), opening with buffering=0 (odd epochs) and with open(p, "rb") (even), each
# beside the same local tree read the same way; the mount's requests by op and its CPU per
# file. A fresh mount of the dataset (extra arguments go to cassfs mount); PY is a Python
# with torchvision.
#   BIN=bin/cassfs MNT=DIR DATASET=DS LOCAL=TREE PY=/usr/bin/python3 bench/history/2026-11-28/imagefolder-listing.sh [--cache-size 128MiB]
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}" "${LOCAL:?}" "${PY:=/usr/bin/python3}"
W=$(mktemp -d)
cat > "$W/folder.py" <<'PY'
import sys, time, torch, torchvision
root, raw = sys.argv[1], sys.argv[2] == "buffering=0"
def loader(p):
    with (open(p, "rb", buffering=0) if raw else open(p, "rb")) as f:
        return f.read()
ds = torchvision.datasets.ImageFolder(root, loader=loader)
dl = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=4, collate_fn=len)
t = time.perf_counter(); n = sum(dl)
print(f"{n / (time.perf_counter() - t):.0f}")
PY
cat > "$W/threads.py" <<'PY'
import os, sys, threading
root = sys.argv[1]
names = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
it = iter(names); lock = threading.Lock()
def work():
    while True:
        with lock:
            name = next(it, None)
        if name is None:
            return
        fd = os.open(os.path.join(root, name), os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
ts = [threading.Thread(target=work) for _ in range(16)]
[x.start() for x in ts]; [x.join() for x in ts]
PY
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" --metrics-addr 127.0.0.1:9911 "$@" > /dev/null 2>&1 &
MP=$!
trap 'kill $MP; wait $MP; rm -rf "$W"' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cat "$LOCAL"/*/* > /dev/null
"$PY" "$W/threads.py" "$MNT/all/epoch-0"
n=$(wc -l < "$MNT/all/epoch-0/file_list.txt")
metric() { curl -s 127.0.0.1:9911/metrics | awk -v m="$1" 'index($0, m) == 1 {s += $2} END {print s + 0}'; }
for e in 1 2 3 4; do
  mode=buffering=0; [ $((e % 2)) = 0 ] && mode=default
  l0=$(metric 'cassfs_fuse_requests_total{op="lookup"}'); r0=$(metric cassfs_fuse_requests_total); c0=$(awk '{print $14+$15}' /proc/$MP/stat)
  rate=$("$PY" "$W/folder.py" "$MNT/all/epoch-$e" $mode 2>/dev/null)
  l1=$(metric 'cassfs_fuse_requests_total{op="lookup"}'); r1=$(metric cassfs_fuse_requests_total); c1=$(awk '{print $14+$15}' /proc/$MP/stat)
  local=$("$PY" "$W/folder.py" "$LOCAL" $mode 2>/dev/null)
  awk -v r=$mode -v e=$e -v m=$rate -v l=$local -v k=$((l1-l0)) -v q=$((r1-r0)) -v c=$((c1-c0)) -v n=$n 'BEGIN {
    printf "epoch %d, %-11s mount %6d files/s, local %6d, mount/local %.2f; per file: lookup %.2f, requests %.2f, daemon %d us\n", e, r, m, l, m/l, k/n, q/n, c*10000/n }'
done
