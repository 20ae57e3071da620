#!/bin/bash
# fresh mount, caches dropped; cassfs bench store then mount path, with Cassandra's CPU per file for each
BIN=${BIN:-cassfs}
MNT=${MNT:-/tmp/mnt-prof4k}; mkdir -p $MNT
J=$(pgrep -f CassandraDaemon | head -1)
sync; echo 3 > /proc/sys/vm/drop_caches
$BIN mount -d prof4k $MNT > /tmp/mount-prof4k.log 2>&1 &
MP=$!
for i in $(seq 100); do [ -d $MNT/all ] && break; sleep 0.1; done
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
$BIN bench -d prof4k --mount $MNT --samples 4000 --readers 16 --epoch 0 2>&1 | while IFS= read -r line; do
  case "$line" in
    store:*) s0=$(cpu $J) ;;
    mount:*) s1=$(cpu $J) ;;
    *path*) m1=$(cpu $J); echo "  database CPU: store path $(( (s1-s0)*10000/4000 )) µs/file, mount path $(( (m1-s1)*10000/4000 )) µs/file" ;;
  esac
  echo "$line"
done
kill $MP; wait $MP
