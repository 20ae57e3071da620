#!/bin/bash
# own3.sh BIN ROUNDS: local tars read just before and 1 s after each warm epoch of the
# record view's own mount, to see whether the mount's pass (and its next epoch's write)
# slows the local reads after it. (It reads the tars own2.sh copied to /tmp/s60/tars8.)
set -eu
BIN=$1 R=${2:-4} M=/tmp/s60/m W=/tmp/s60/w T=/tmp/s60/tars8
$BIN mount --hosts 127.0.0.1:9042 -d ds4k --record-shard-size 56MB --records-at $W --log-level debug $M > /tmp/s60/m.log 2>&1 &
sleep 3
cd "$(git rev-parse --show-toplevel)/e2e"
PY=../.cache/pyenv/bin/python
rd() { $PY readers/wds_read.py bench-dali --index --batch-size 64 "$@" | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f/s %.0fus" % (d["images"]/d["seconds"], d["cpu_seconds"]/d["images"]*1e6))'; }
rd $W/all/epoch-0.wds/*.tar >/dev/null; sleep 1
rd $W/all/epoch-1.wds/*.tar >/dev/null; sleep 1
rd $T/*.tar >/dev/null
for e in $(seq 2 $((R+1))); do
  l1=$(rd $T/*.tar); o=$(rd $W/all/epoch-$e.wds/*.tar); sleep 1; l2=$(rd $T/*.tar); l3=$(rd $T/*.tar)
  echo "before $l1 own-$e $o after $l2 again $l3"
done
umount $W; umount $M
