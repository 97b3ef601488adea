#!/usr/bin/env bash
# Checks that start.sh and stop.sh do what they say, against the running
# engines (CI runs it after start.sh): the PID recorded for slurmrestd is
# the daemon that answers, stop.sh stops it, a restart brings it back, an
# administrator's drain survives start.sh, Ray is up only once its node has
# registered, and the printed environment lets sinfo find the cluster;
# both sshd admit their owner with the pinned host key, refuse a changed or
# unknown host key and the other owner, and `sshd.sh stop`, `cut` and
# `start` do what they say. `check.sh ssh` checks the sshd only.
# Leaves the engines running. Exit 1 with what failed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
fail() { echo "check.sh: $*"; exit 1; }
ping_rest() { curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SLURM_REST_PORT/slurm/v0.0.38/ping || true; }
# ssh_to a|b [known_hosts] -- command...: as that host's owner, strict host keys.
ssh_to() {
  local h=$1 kh=${2:-$SSH_DIR/known_hosts} u p; u=SSH_USER_$h; p=SSH_PORT_$h; shift 2
  ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$kh" -o ConnectTimeout=5 \
    -i "$SSH_DIR/client_ed25519" -p "${!p}" "${!u}@127.0.0.1" "$@"
}

check_ssh() {
  local h out pid
  for h in a b; do
    out=$(ssh_to $h "" id -un 2>&1) || fail "ssh to host $h failed: $out"
    u=SSH_USER_$h; [ "$out" = "${!u}" ] || fail "host $h runs commands as $out, not ${!u}"
    out=$(ssh_to $h "$SSH_DIR/known_hosts.changed" true 2>&1) && fail "host $h accepted with a changed host key"
    grep -q 'HOST IDENTIFICATION HAS CHANGED' <<<"$out" || fail "host $h, changed key: $out"
    out=$(ssh_to $h "$SSH_DIR/known_hosts.empty" true 2>&1) && fail "host $h accepted an unknown host key"
    grep -q 'No ED25519 host key is known' <<<"$out" || fail "host $h, unknown key: $out"
  done
  ssh -o BatchMode=yes -o UserKnownHostsFile="$SSH_DIR/known_hosts" -i "$SSH_DIR/client_ed25519" \
    -p "$SSH_PORT_a" "$SSH_USER_b@127.0.0.1" true 2>/dev/null && fail "host a admits host b's owner"
  # stop: no new connection; an established session and its work go on.
  local mark=/tmp/canopy-sshd-check.$$
  rm -f $mark.*
  ssh_to a "" "echo \$\$ > $mark.session; setsid sh -c 'echo \$\$ > $mark.pid; exec sleep 300' \
    </dev/null >/dev/null 2>&1 & exec sleep 300" 2>/dev/null &
  local client=$!
  for _ in $(seq 1 100); do [ -s $mark.pid ] && break; sleep 0.05; done
  pid=$(cat $mark.pid 2>/dev/null) || fail "the session on host a did not start its work"
  "$HERE/sshd.sh" stop a >/dev/null
  ssh_to a "" true 2>/dev/null && fail "host a accepts connections after sshd.sh stop a"
  ssh_to b "" true || fail "stopping host a stopped host b"
  alive $client || fail "sshd.sh stop a ended an established session"
  # cut: the session ends, the work it started in its own session stays.
  "$HERE/sshd.sh" cut a >/dev/null
  for _ in $(seq 1 100); do alive $client || break; sleep 0.05; done
  alive $client && fail "sshd.sh cut a left the session up"
  alive "$pid" || fail "sshd.sh cut a killed the user's own work (pid $pid)"
  # The session's own command is not signalled by a cut (as when a network
  # drops): end it here, with the work.
  kill "$pid" "$(cat $mark.session)"; rm -f $mark.*
  "$HERE/sshd.sh" start a >/dev/null
  ssh_to a "" true || fail "host a did not come back after sshd.sh start a"
}

if [ "${1:-all}" = ssh ]; then check_ssh; echo "engine scripts (ssh): ok"; exit 0; fi

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
check_ssh
echo "engine scripts: ok"
