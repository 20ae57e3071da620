#!/bin/bash
# own2.sh BIN ROUNDS PAUSE: like BenchmarkRecordView's records-at passes (8 shards, PAUSE s
# between epochs), local tars read twice before each own epoch; daemon CPU ticks per pass.
set -eu
BIN=$1 R=${2:-5} P=${3:-1} M=/tmp/s60/m W=/tmp/s60/w T=/tmp/s60/tars8
mkdir -p $M $W $T
$BIN mount --hosts 127.0.0.1:9042 -d ds4k --record-shard-size 56MB --records-at $W --log-level debug $M > /tmp/s60/m.log 2>&1 &
sleep 3
PID=$(pgrep -f "cassfs mount --hosts 127.0.0.1:9042 -d ds4k" | head -1)
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
cd "$(git rev-parse --show-toplevel)/e2e"
PY=../.cache/pyenv/bin/python
rd() { $PY readers/wds_read.py bench-dali --index --batch-size 64 "$@" | tail -1 | python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.0f img/s" % (d["images"]/d["seconds"]))'; }
rd $W/all/epoch-0.wds/*.tar; sleep $P
rm -f $T/*; cp $M/all/epoch-1.wds/* $T/
rd $W/all/epoch-1.wds/*.tar; sleep $P
for e in $(seq 2 $((R+1))); do
  rd $T/*.tar >/dev/null; l=$(rd $T/*.tar)
  c0=$(cpu); echo "$(date +%T.%N | cut -c1-12) own-$e start"; o=$(rd $W/all/epoch-$e.wds/*.tar); c1=$(cpu)
  echo "local $l own-$e $o daemon-ticks $((c1-c0))"
  sleep $P
done
grep -E "written to local|not written" /tmp/s60/m.log | sed 's/.*T\([0-9:.]*\)Z.*epoch=\([0-9]*\).*took=\(.*\)/\1 wrote epoch \2 took \3/'
umount $W; umount $M
