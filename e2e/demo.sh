#!/usr/bin/env bash
# demo.sh — the whole path on this machine: a local Cassandra, a generated dataset ingested
# into it, train/val/test splits made by patient, the dataset mounted, an epoch listed, a
# DALI pipeline (CPU) reading the training split, the same epoch read as WebDataset
# shards, and one rank's shard of it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
BIN=$ROOT/bin/cassfs
DATA=${DEMO_DIR:-$ROOT/.cache/demo}
COUNT=${DEMO_COUNT:-500}
MNT=$DATA/mnt
step() { printf '\n== %s\n' "$*"; }

step "Cassandra on 127.0.0.1:9042"
"$HERE/cassandra.sh" start
PY=$("$HERE/python-env.sh")

step "generate $COUNT images and ingest them into dataset 'demo'"
[ -f "$DATA/metadata.csv" ] || "$BIN" gen --out "$DATA" --count "$COUNT"
"$BIN" ingest --dataset demo --csv "$DATA/metadata.csv" "$DATA/images"

step "train/val/test by patient, 7:2:1, stored in the dataset"
"$BIN" split create --dataset demo --group-by patient_id --names train,val,test --ratios 7:2:1 --seed 1 --replace

step "mount it at $MNT"
mkdir -p "$MNT"
"$BIN" mount --dataset demo "$MNT" 2>"$DATA/mount.log" &
MOUNT_PID=$!
trap 'kill -TERM $MOUNT_PID 2>/dev/null; wait $MOUNT_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -d "$MNT/all" ] && break; sleep 0.2; done
[ -d "$MNT/all" ] || { cat "$DATA/mount.log"; exit 1; }

step "ls $MNT/all/epoch-0"
ls -l "$MNT/all/epoch-0"
step "ls $MNT/all/epoch-0/class_000 | head -5   (names sort in epoch order)"
ls "$MNT/all/epoch-0/class_000" | head -5
step "head -3 file_list.txt of epoch 0 and of epoch 1 (a new order every epoch)"
head -3 "$MNT/all/epoch-0/file_list.txt"; echo ...
head -3 "$MNT/all/epoch-1/file_list.txt"

step "ls $MNT: one directory per split"
ls "$MNT"

step "DALI fn.readers.file(file_list=train/epoch-0/file_list.txt) + fn.decoders.image(device='cpu')"
"$PY" "$HERE/readers/dali_read.py" --file-list "$MNT/train/epoch-0/file_list.txt" >"$DATA/dali.json"
"$PY" - "$DATA/dali.json" <<'PY'
import collections, json, sys
s = json.load(open(sys.argv[1]))["samples"]
distinct = len({x["sha256"] for x in s})
print(f"DALI read and decoded {len(s)} images, {distinct} distinct")
print("labels:", dict(sorted(collections.Counter(x["label"] for x in s).items())))
print("first shapes:", [tuple(x["shape"]) for x in s[:3]])
PY

step "train/epoch-0.wds: the same epoch as WebDataset shards, in its order, with DALI index files"
ls -l "$MNT/train/epoch-0.wds"
tar -tvf "$MNT/train/epoch-0.wds/shard-00000.tar" | sed -n 1,3p
"$PY" "$HERE/readers/wds_read.py" dali --index "$MNT"/train/epoch-0.wds/*.tar >"$DATA/wds.json"
"$PY" - "$DATA/wds.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["samples"]
labels = sorted({x["label"] for x in s})
print(f"DALI fn.readers.webdataset read {len(s)} samples, labels {labels}; the first is {s[0]['name']}")
PY

step "4 ranks of a node, one mount: train/shard-R-of-4/ holds rank R's quarter of every epoch"
for r in 0 1 2 3; do
	echo "train/shard-$r-of-4/epoch-0: $(wc -l <"$MNT/train/shard-$r-of-4/epoch-0/file_list.txt") of $(wc -l <"$MNT/train/epoch-0/file_list.txt") samples"
done
echo "resuming epoch 0 at position 100: train/epoch-0@100 holds $(wc -l <"$MNT/train/epoch-0@100/file_list.txt")"

step "done; Cassandra keeps running (make cassandra-stop stops it)"
