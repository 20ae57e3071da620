#!/usr/bin/env bash
# python-env.sh — the real readers for e2e tests, benchmarks and the demo, in one Python:
# Debian's python3 with python3-torchvision (CPU-only and small; PyPI's torch pulls
# gigabytes of CUDA libraries) and a virtualenv on top of it (--system-site-packages) holding
# NVIDIA DALI from PyPI (nvidia-dali-cuda120; CPU-only pipelines need no GPU), the DataStax
# cassandra-driver (the writer of the tables cassfs dataset attach is tested on) and webdataset
# (a reader of the record view's tars). Also getfattr
# (Debian's attr), which the tests use to look at files as a user would.
#
# Prints the path of the Python to use. Idempotent: a second run only checks.
#   CASSFS_PYENV   the virtualenv (default .cache/pyenv in the repository)
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=${CASSFS_PYENV:-$HERE/../.cache/pyenv}
DALI=${DALI_PACKAGE:-nvidia-dali-cuda120}
log() { printf 'python-env.sh: %s\n' "$*" >&2; }

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torchvision, nvidia.dali, PIL, cassandra, webdataset' 2>/dev/null && command -v getfattr >/dev/null; then
  echo "$VENV/bin/python"; exit 0
fi
need=()
/usr/bin/python3 -c 'import torchvision' 2>/dev/null || need+=(python3-torchvision)
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
/usr/bin/python3 -c 'import PIL' 2>/dev/null || need+=(python3-pil)
command -v getfattr >/dev/null || need+=(attr)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then log "need Debian packages ${need[*]}: apt-get install them"; exit 1; fi
  log "installing ${need[*]} (Debian)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating virtualenv $VENV"
  /usr/bin/python3 -m venv --system-site-packages "$VENV"
fi
log "installing $DALI, cassandra-driver and webdataset (PyPI)"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "$DALI" cassandra-driver webdataset >&2
"$VENV/bin/python" -c 'import torchvision, nvidia.dali, cassandra, webdataset' >&2
echo "$VENV/bin/python"
