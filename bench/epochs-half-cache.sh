#!/bin/bash
# epochs-half-cache.sh BIN DATASET CACHE_BYTES: three epochs of DATASET through a mount of
# BIN with --cache-size CACHE_BYTES (e.g. half the dataset), read by $READER (a program
# that reads DIR/file_list.txt's files with 16 goroutines and prints a summary), the page
# cache dropped before each epoch; prints the database fetches of each epoch. Needs root.
set -euo pipefail
B=$1 DS=$2 CACHE=$3
: "${READER:?set READER to a reader of DIR/file_list.txt}"
M=$(mktemp -d) LOG=$(mktemp)
"$B" mount -d "$DS" --cache-size "$CACHE" --metrics-addr 127.0.0.1:9189 "$M" 2>"$LOG" & P=$!
trap 'kill $P 2>/dev/null; wait $P 2>/dev/null; rmdir "$M"; rm -f "$LOG"' EXIT
for _ in $(seq 100); do [ -f "$M/all/epoch-0/file_list.txt" ] && break; sleep 0.1; done
prev=0
for e in 0 1 2; do
  sync; echo 1 > /proc/sys/vm/drop_caches
  r=$("$READER" "$M/all/epoch-$e")
  f=$(curl -s http://127.0.0.1:9189/metrics | awk '/^cassfs_fetch_seconds_count/ {print $2}')
  echo "epoch $e: $r; fetches $(( ${f%.*} - prev ))"; prev=${f%.*}
done
