#!/usr/bin/env bash
# Installs the test engines: Slurm 22.05 (Debian packages) with slurmrestd and
# JWT, Ray (pinned, in a venv) and OpenSSH's server and client (the ssh
# provider's hosts). Idempotent: quick when already installed.
# `install.sh slurm|ray|ssh` installs one only.
# Needs root and network access to the Debian mirror and PyPI.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
WHAT=${1:-all}
case $WHAT in all|slurm|ray|ssh) ;; *) echo "usage: $0 [all|slurm|ray|ssh]"; exit 2 ;; esac
t0=$(ms)
PKGS=()
case $WHAT in all|slurm) PKGS+=(slurmctld slurmd slurm-client slurmrestd munge slurm-wlm-jwt-plugin curl) ;; esac
case $WHAT in all|ssh) PKGS+=(openssh-server openssh-client) ;; esac
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
t1=$(ms)
mkdir -p "$E"
if [[ $WHAT == all || $WHAT == ray ]] && ! "$RAY_VENV/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  echo "pip: installing ray[default]==$RAY_VERSION into $RAY_VENV"
  python3 -m venv "$RAY_VENV"
  "$RAY_VENV/bin/pip" install -q --disable-pip-version-check "ray[default]==$RAY_VERSION"
fi
t2=$(ms)
echo "engines installed: apt $((t1-t0)) ms, ray $((t2-t1)) ms"
