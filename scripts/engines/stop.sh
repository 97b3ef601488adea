#!/usr/bin/env bash
# Stops what start.sh started, by the PIDs it recorded (SIGTERM, then
# SIGKILL after 15 s). slurmd stops before slurmctld (a slurmd without its
# controller hangs on SIGTERM). Idempotent. `stop.sh ray`, `stop.sh slurm`
# or `stop.sh ssh` stops one engine (tests use it to take a control plane
# away). Stopping an sshd leaves its established sessions (see sshd.sh).
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
stop_pid() { # name pidfile
  [ -f "$2" ] || return 0
  local pid t0; pid=$(cat "$2"); t0=$(ms)
  if kill -TERM "$pid" 2>/dev/null; then
    for _ in $(seq 1 150); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && { echo "$1 ($pid) still alive after 15 s: SIGKILL"; kill -KILL "$pid"; }
    echo "stopped $1 (pid $pid) in $(( $(ms) - t0 )) ms"
  fi
  rm -f "$2"
}
# start.sh starts each Ray node with setsid, so it leads a process group
# holding its raylet, GCS, dashboard and agents. `ray start --block` exits
# before they have let go of their ports: a head started right after (a
# test's restart) found the dashboard agent's port taken and could accept
# no job. So the whole group is waited for (SIGKILL after 15 s).
stop_group() { # name pidfile
  [ -f "$2" ] || return 0
  local pid; pid=$(cat "$2")
  stop_pid "$1" "$2"
  for _ in $(seq 1 150); do kill -0 -- "-$pid" 2>/dev/null || return 0; sleep 0.1; done
  echo "$1's process group ($pid) still alive after 15 s: SIGKILL"
  kill -KILL -- "-$pid" 2>/dev/null || true
}
# The second raylet first: without its head it retries for a while.
stop_ray() { stop_group ray-worker $RAY_TMP/ray-worker.pid; stop_group ray-head $RAY_TMP/ray-head.pid; }
stop_slurm() { for f in slurmrestd slurmd-n1 slurmd-n2 slurmctld munged; do stop_pid $f $S/run/$f.pid; done; }
stop_ssh() { "$HERE/sshd.sh" stop all; }
case ${1:-all} in
  all) stop_ray; stop_slurm; stop_ssh ;;
  ray) stop_ray ;;
  slurm) stop_slurm ;;
  ssh) stop_ssh ;;
  *) echo "usage: $0 [all|slurm|ray|ssh]"; exit 2 ;;
esac
