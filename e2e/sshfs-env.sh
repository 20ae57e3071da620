#!/usr/bin/env bash
# sshfs-env.sh — installs what the sshfs baseline of the latency lab needs (Debian's sshfs
# and openssh-server). Idempotent.
set -euo pipefail
need=()
command -v sshfs >/dev/null || need+=(sshfs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "sshfs-env.sh: need ${need[*]}: apt-get install them" >&2; exit 1; fi
  echo "sshfs-env.sh: installing ${need[*]} (Debian)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p /run/sshd
