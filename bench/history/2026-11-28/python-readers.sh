#!/bin/bash
# Warm epochs read by Python: (1) 16 threads walking file_list.txt, open() against
# os.open(); (2) torchvision ImageFolder + DataLoader (4 workers, batch 64, the bytes
# only), open(p, "rb") against open(p, "rb", buffering=0); each beside the same local tree
# read the same way. The mount's requests (ioctl among them) and CPU per file come from
# its metrics and /proc. A fresh mount of the dataset; PY is a Python with torchvision.
#   BIN=bin/cassfs MNT=DIR DATASET=DS LOCAL=TREE PY=/usr/bin/python3 bench/history/2026-11-28/python-readers.sh
set -eu
: "${BIN:?}" "${MNT:?}" "${DATASET:?}" "${LOCAL:?}" "${PY:=/usr/bin/python3}"
W=$(mktemp -d)
cat > "$W/threads.py" <<'PY'
import os, sys, threading, time
root, raw = sys.argv[1], sys.argv[2] == "os.open"
names = [l.split()[0] for l in open(os.path.join(root, "file_list.txt"))]
it = iter(names); lock = threading.Lock()
def work():
    while True:
        with lock:
            name = next(it, None)
        if name is None:
            return
        p = os.path.join(root, name)
        if raw:
            fd = os.open(p, os.O_RDONLY)
            while os.read(fd, 1 << 20):
                pass
            os.close(fd)
        else:
            with open(p, "rb") as f:
                f.read()
t = time.perf_counter()
ts = [threading.Thread(target=work) for _ in range(16)]
[x.start() for x in ts]; [x.join() for x in ts]
print(f"{len(names) / (time.perf_counter() - t):.0f}")
PY
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
# The local tree with a file_list.txt of its own (class order), for the thread reader.
mkdir "$W/local"
for c in "$LOCAL"/*/; do ln -s "$c" "$W/local/$(basename "$c")"; done
(cd "$W/local" && ls -d */* | awk '{print $1, 0}') > "$W/local/file_list.txt"
sync; echo 3 > /proc/sys/vm/drop_caches
"$BIN" mount -d "$DATASET" "$MNT" --metrics-addr 127.0.0.1:9911 > /dev/null 2>&1 &
MP=$!
trap 'kill $MP; wait $MP; rm -rf "$W"' EXIT
for _ in $(seq 100); do [ -d "$MNT/all" ] && break; sleep 0.1; done
cat "$LOCAL"/*/* > /dev/null
"$PY" "$W/threads.py" "$MNT/all/epoch-0" os.open > /dev/null
n=$(wc -l < "$MNT/all/epoch-0/file_list.txt")
metric() { curl -s 127.0.0.1:9911/metrics | awk -v m="$1" 'index($0, m) == 1 {s += $2} END {print s + 0}'; }
e=1
for reader in "threads.py open()" "threads.py os.open" "threads.py open()" "threads.py os.open" \
              "folder.py default" "folder.py buffering=0" "folder.py default" "folder.py buffering=0"; do
  set -- $reader
  i0=$(metric 'cassfs_fuse_requests_total{op="ioctl"}'); r0=$(metric cassfs_fuse_requests_total); c0=$(awk '{print $14+$15}' /proc/$MP/stat)
  rate=$("$PY" "$W/$1" "$MNT/all/epoch-$e" "$2" 2>/dev/null)
  i1=$(metric 'cassfs_fuse_requests_total{op="ioctl"}'); r1=$(metric cassfs_fuse_requests_total); c1=$(awk '{print $14+$15}' /proc/$MP/stat)
  root="$W/local"; [ "$1" = folder.py ] && root="$LOCAL"
  local=$("$PY" "$W/$1" "$root" "$2" 2>/dev/null)
  awk -v r="$reader" -v e=$e -v m=$rate -v l=$local -v i=$((i1-i0)) -v q=$((r1-r0)) -v c=$((c1-c0)) -v n=$n 'BEGIN {
    printf "epoch %d, %-22s mount %6d files/s, local %6d, mount/local %.2f; per file: ioctl %.2f, requests %.2f, daemon %d us\n", e, r, m, l, m/l, i/n, q/n, c*10000/n }'
  e=$((e+1))
done
