#!/usr/bin/env bash
# Usage: check-skips.sh RUN.json — lists the tests a `go test -json` run skipped, with their
# reasons in the run's own output above. Under CI (CI=true) any skip fails: CI runs as root
# with /dev/fuse and starts its own Cassandra, so no test there has a reason to skip.
set -euo pipefail
json=$1
skips=$(grep '"Action":"skip"' "$json" | grep '"Test":' |
  sed -E 's/.*"Package":"([^"]*)".*"Test":"([^"]*)".*/\1 \2/' || true)
if [ -z "$skips" ]; then
  exit 0
fi
echo "skipped tests:"
echo "$skips" | sed 's/^/  /'
if [ "${CI:-}" = true ]; then
  echo "check-skips: tests were skipped under CI; each must run (see its skip message above)" >&2
  exit 1
fi
