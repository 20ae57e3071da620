#!/bin/bash
# ab.sh N: BenchmarkRecordView of the build before (6c684e2) and this one, in turn, N times.
# (/tmp/s60/old: a git worktree of 6c684e2, the build before; CASSFS_CASSANDRA_DIR points its
# e2e/cassandra.sh at the node this checkout started.)
for i in $(seq $1); do
  for t in old main; do
    d=/tmp/s60/old; [ $t = main ] && d=$(git rev-parse --show-toplevel)
    (cd $d && CASSFS_CASSANDRA_DIR=$(git rev-parse --show-toplevel)/.cassandra CASSFS_TEST_HOSTS=127.0.0.1:9042 go test -tags e2e -run '^$' -bench RecordView -benchtime 1x -count 1 -timeout 30m ./e2e/ 2>&1 | sed "s/^/$t: /")
  done
done
