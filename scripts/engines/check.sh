#!/usr/bin/env bash
# Checks that start.sh and stop.sh do what they say, against the running
# engines (CI runs it after start.sh): the PID recorded for slurmrestd is
# the daemon that answers, stop.sh stops it, a restart brings it back, an
# administrator's drain survives start.sh, Ray is up only once its node has
# registered, and the printed environment lets sinfo find the cluster.
# Leaves the engines running. Exit 1 with what failed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
fail() { echo "check.sh: $*"; exit 1; }
ping_rest() { curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SLURM_REST_PORT/slurm/v0.0.38/ping || true; }

pid=$(cat $S/run/slurmrestd.pid)
grep -q slurmrestd /proc/$pid/cmdline 2>/dev/null || fail "slurmrestd.pid ($pid) is not slurmrestd"
[ "$(ping_rest)" = 401 ] || fail "slurmrestd does not answer"

"$HERE/stop.sh" >/dev/null
[ "$(ping_rest)" = 000 ] || fail "slurmrestd still answers after stop.sh"

env_out=$("$HERE/start.sh" 2>&1) || fail "start.sh failed after stop.sh: $env_out"
[ "$(ping_rest)" = 401 ] || fail "slurmrestd did not come back"
[ "$(curl -sf "http://127.0.0.1:$RAY_DASHBOARD_PORT/api/v0/nodes?detail=1" | grep -o '"ALIVE"' | wc -l)" -ge 2 ] \
  || fail "start.sh reported Ray up before both its nodes registered"
conf=$(echo "$env_out" | sed -n 's/^export SLURM_CONF=\([^ ]*\).*/\1/p')
[ -n "$conf" ] || fail "start.sh does not print SLURM_CONF"
SLURM_CONF=$conf sinfo -h >/dev/null || fail "sinfo fails with the printed SLURM_CONF"

scontrol update nodename=n2 state=drain reason=admin-check
"$HERE/start.sh" slurm >/dev/null
state=$(sinfo -h -n n2 -o %t)
scontrol update nodename=n2 state=resume >/dev/null
case $state in drain*|drng*) ;; *) fail "start.sh undid an administrator's drain (n2 is $state)";; esac
echo "engine scripts: ok"
