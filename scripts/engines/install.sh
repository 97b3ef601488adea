#!/usr/bin/env bash
# Installs the test engines: Slurm 22.05 (Debian packages) with slurmrestd and
# JWT, and Ray (pinned, in a venv). Idempotent: quick when already installed.
# Needs root and network access to the Debian mirror and PyPI.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
t0=$(ms)
PKGS=(slurmctld slurmd slurm-client slurmrestd munge slurm-wlm-jwt-plugin curl)
missing=()
for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
t1=$(ms)
mkdir -p "$E"
if ! "$RAY_VENV/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  echo "pip: installing ray[default]==$RAY_VERSION into $RAY_VENV"
  python3 -m venv "$RAY_VENV"
  "$RAY_VENV/bin/pip" install -q --disable-pip-version-check "ray[default]==$RAY_VERSION"
fi
t2=$(ms)
echo "engines installed: apt $((t1-t0)) ms, ray $((t2-t1)) ms"
