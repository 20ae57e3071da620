#!/bin/bash
# record-view-warm-vs-passthrough.sh BIN: DALI fn.readers.webdataset (e2e/readers/wds_read.py
# bench-dali --index --batch-size 64) over epoch 1's record view of ds4k (4,000 ~110 KB
# images, 4 shards) three ways, page cache warm, ten rounds in turn: the tars copied to local
# ext4, the same tars through go-fuse's own loopback example (opens passed through to them:
# FUSE passthrough, Linux 6.9+), and the mount. Output: record-view-warm-vs-passthrough.txt
set -eu
BIN=$1 M=/tmp/mrec T=/tmp/tars L=/tmp/lbmnt
cd "$(git rev-parse --show-toplevel)"
go build -o /tmp/lbfs github.com/hanwen/go-fuse/v2/example/loopback
mkdir -p $M $T $L
$BIN mount --hosts 127.0.0.1:9042 -d ds4k $M > /tmp/mrec.log 2>&1 & sleep 3
cp $M/all/epoch-1.wds/* $T/
/tmp/lbfs -directmount -q $L $T > /tmp/lbfs.log 2>&1 & sleep 1
cd e2e
for d in $M/all/epoch-1.wds $L $T; do ../.cache/pyenv/bin/python readers/wds_read.py bench-dali --index --batch-size 64 $d/*.tar > /dev/null; done
for r in $(seq 10); do for d in $T $L $M/all/epoch-1.wds; do
  echo "$d $(../.cache/pyenv/bin/python readers/wds_read.py bench-dali --index --batch-size 64 $d/*.tar | tail -1)"
done; done
umount $M $L
