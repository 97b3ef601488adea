#!/usr/bin/env bash
# Starts the test engines on this host, each recorded by PID under
# $CANOPY_ENGINES_DIR: munged, slurmctld, slurmd n1+n2 (4 fake h100 GPUs
# each), slurmrestd with JWT on 127.0.0.1:$SLURM_REST_PORT, and a Ray head
# with 4 fake GPUs (accelerator_type:H100) on 127.0.0.1:$RAY_DASHBOARD_PORT
# joined by a second raylet on 127.0.0.2 with 4 more (a two-node Ray
# cluster on one machine, so a STRICT_SPREAD gang of two can be placed),
# and two sshd acting as two owners' hosts (127.0.0.1:2222 canopy-owner-a,
# 127.0.0.1:2223 canopy-owner-b; see sshd.sh).
# Idempotent: what already runs is left alone. `start.sh slurm`,
# `start.sh ray` or `start.sh ssh` starts one engine only. Prints the
# environment to export.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
WHAT=${1:-all}
mkdir -p "$E/jobs" && chmod 1777 "$E/jobs"
running() { [ -f "$1" ] && alive "$(cat "$1")"; }

start_slurm() {
  local t0; t0=$(ms)
  mkdir -p $S/{etc,run,log,state,spool/n1,spool/n2,munge,dev}
  chmod 700 $S/munge
  [ -f $S/munge/munge.key ] || mungekey --create --keyfile=$S/munge/munge.key
  chmod 600 $S/munge/munge.key
  [ -f $S/etc/jwt_hs256.key ] || dd if=/dev/urandom of=$S/etc/jwt_hs256.key bs=32 count=1 status=none
  chmod 600 $S/etc/jwt_hs256.key
  local host; host=$(hostname -s)
  cat > $S/etc/slurm.conf <<CONF
ClusterName=canopytest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/run/munge.sock
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$S/etc/jwt_hs256.key
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$S/log/jobcomp.txt
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
MailProg=/bin/true
ReturnToService=1
SlurmdParameters=config_overrides
MinJobAge=600
SlurmdTimeout=30
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=16821 CPUs=4 RealMemory=2000 Gres=gpu:h100:4 Features=n1 State=UNKNOWN
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=16822 CPUs=4 RealMemory=2000 Gres=gpu:h100:4 Features=n2 State=UNKNOWN
PartitionName=debug Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
  # Slurm drops file-less GPUs and warns about regular files: fake char devices aliasing /dev/null.
  for i in 0 1 2 3 4 5 6 7; do [ -c $S/dev/nvidia$i ] || mknod -m 666 $S/dev/nvidia$i c 1 3; done
  cat > $S/etc/gres.conf <<CONF
AutoDetect=off
NodeName=n1 Name=gpu Type=h100 File=$S/dev/nvidia[0-3]
NodeName=n2 Name=gpu Type=h100 File=$S/dev/nvidia[4-7]
CONF
  if ! munge -S $S/run/munge.sock -n >/dev/null 2>&1; then
    munged --key-file=$S/munge/munge.key --socket=$S/run/munge.sock \
      --pid-file=$S/run/munged.pid --log-file=$S/log/munged.log --seed-file=$S/munge/munged.seed
  fi
  running $S/run/slurmctld.pid || slurmctld -i
  for _ in $(seq 1 100); do scontrol ping 2>/dev/null | grep -q 'is UP' && break; sleep 0.1; done
  scontrol ping | grep -q 'is UP' || { echo "slurmctld did not come up:"; tail -5 $S/log/slurmctld.log; exit 1; }
  for n in n1 n2; do running $S/run/slurmd-$n.pid || slurmd -N $n; done
  # Resume only what a test left down (reason canopy-test): an
  # administrator's down or drain stays as they set it.
  for n in $(sinfo -h -N -o '%N %E' 2>/dev/null | awk '$2 == "canopy-test" {print $1}' | sort -u); do
    scontrol update nodename=$n state=resume >/dev/null 2>&1 || true
  done
  # Up means every node has registered (no "unk", no "*" = not responding),
  # whatever state an administrator holds it in.
  for _ in $(seq 1 300); do
    sinfo -h -N -o %t 2>/dev/null | grep -qE 'unk|\*' || break; sleep 0.1
  done
  # slurmrestd refuses root; without slurmdbd only openapi/v0.0.38 may load.
  mkdir -p $S/rest && chown slurm:slurm $S/rest
  if ! running $S/run/slurmrestd.pid; then
    # exec: no wrapper shell is left holding the caller's output open.
    (cd $S/rest && SLURM_JWT=daemon exec setsid nohup slurmrestd -u slurm -s openapi/v0.0.38 -a rest_auth/jwt \
       127.0.0.1:$SLURM_REST_PORT < /dev/null > $S/log/slurmrestd.log 2>&1) &
  fi
  local code=000
  for _ in $(seq 1 100); do
    code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$SLURM_REST_PORT/slurm/v0.0.38/ping || true)
    [ "$code" = 401 ] && break; sleep 0.1
  done
  [ "$code" = 401 ] || { echo "slurmrestd did not answer (HTTP $code):"; tail -5 $S/log/slurmrestd.log; exit 1; }
  # The daemon's own PID (not a wrapper's), so stop.sh stops what answers.
  pgrep -n -f "slurmrestd .*127.0.0.1:$SLURM_REST_PORT" > $S/run/slurmrestd.pid
  scontrol token username=root lifespan=86400 | sed 's/^SLURM_JWT=//' > $S/rest/root.jwt
  chmod 600 $S/rest/root.jwt
  echo "slurm up in $(( $(ms) - t0 )) ms: $(sinfo -h -N -o '%N=%t' | tr '\n' ' ')"
}

start_ray() {
  local t0; t0=$(ms)
  mkdir -p $RAY_TMP
  if ! running $RAY_TMP/ray-head.pid; then
    ( export PATH=$RAY_VENV/bin:$PATH RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
        RAY_JOB_START_TIMEOUT_SECONDS=${RAY_JOB_START_TIMEOUT_SECONDS:-30}
      setsid nohup ray start --head --block --node-ip-address=127.0.0.1 --port=6379 \
        --num-cpus=4 --num-gpus=4 --resources='{"accelerator_type:H100": 4}' \
        --object-store-memory=200000000 --dashboard-host=127.0.0.1 --dashboard-port=$RAY_DASHBOARD_PORT \
        --include-dashboard=true --disable-usage-stats --temp-dir=$RAY_TMP > $RAY_TMP/ray-head.log 2>&1 &
      echo $! > $RAY_TMP/ray-head.pid )
  fi
  for _ in $(seq 1 240); do curl -sf http://127.0.0.1:$RAY_DASHBOARD_PORT/api/version >/dev/null && break; sleep 0.25; done
  curl -sf http://127.0.0.1:$RAY_DASHBOARD_PORT/api/version >/dev/null \
    || { echo "ray did not come up:"; tail -20 $RAY_TMP/ray-head.log; exit 1; }
  # Up means the head node has registered its resources: an engine started
  # right after must see Ray's capacity.
  for _ in $(seq 1 240); do
    curl -sf "http://127.0.0.1:$RAY_DASHBOARD_PORT/api/v0/nodes?detail=1" 2>/dev/null | grep -q '"ALIVE"' && break
    sleep 0.25
  done
  curl -sf "http://127.0.0.1:$RAY_DASHBOARD_PORT/api/v0/nodes?detail=1" | grep -q '"ALIVE"' \
    || { echo "ray's node did not register:"; tail -20 $RAY_TMP/ray-head.log; exit 1; }
  # The second raylet: its own address (127.0.0.2, loopback like the
  # head's) and ports. Ray maps a head address of 127.0.0.1 to the NIC's
  # (where nothing listens) and refuses to join a cluster while
  # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which keeps the head on loopback;
  # so the CLI runs with both checks relaxed in its own process only (the
  # raylet's processes keep the head's setting).
  if ! running $RAY_TMP/ray-worker.pid; then
    ( export PATH=$RAY_VENV/bin:$PATH RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
      setsid nohup python -c '
import sys
import ray._private.ray_constants as c, ray._private.services as s
c.ENABLE_RAY_CLUSTER = True
s.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv[0] = "ray"
main()' start --block --address=127.0.0.1:6379 --node-ip-address=127.0.0.2 \
        --num-cpus=4 --num-gpus=4 --resources='{"accelerator_type:H100": 4}' --object-store-memory=200000000 \
        --node-manager-port=20880 --object-manager-port=20881 --dashboard-agent-listen-port=20882 \
        --dashboard-agent-grpc-port=20883 --runtime-env-agent-port=20884 --metrics-export-port=20885 \
        --min-worker-port=20900 --max-worker-port=20999 --disable-usage-stats --temp-dir=$RAY_TMP \
        > $RAY_TMP/ray-worker.log 2>&1 &
      echo $! > $RAY_TMP/ray-worker.pid )
  fi
  local alive=0
  for _ in $(seq 1 240); do
    alive=$(curl -sf "http://127.0.0.1:$RAY_DASHBOARD_PORT/api/v0/nodes?detail=1" 2>/dev/null | grep -o '"ALIVE"' | wc -l)
    [ "$alive" -ge 2 ] && break
    sleep 0.25
  done
  [ "$alive" -ge 2 ] || { echo "ray's second node did not register:"; tail -20 $RAY_TMP/ray-worker.log; exit 1; }
  echo "ray up in $(( $(ms) - t0 )) ms"
}

case $WHAT in
  all) start_slurm; start_ray; "$HERE/sshd.sh" start ;;
  slurm) start_slurm ;;
  ray) start_ray ;;
  ssh) "$HERE/sshd.sh" start ;;
  *) echo "usage: $0 [all|slurm|ray|ssh]"; exit 2 ;;
esac
cat <<ENV
# for Canopy and its tests:
export CANOPY_SLURM_URL=http://127.0.0.1:$SLURM_REST_PORT
export CANOPY_SLURM_JWT=\$(cat $S/rest/root.jwt)
export CANOPY_RAY_URL=http://127.0.0.1:$RAY_DASHBOARD_PORT
export CANOPY_ENGINES_DIR=$E
export CANOPY_SSH_DIR=$SSH_DIR   # client_ed25519, known_hosts for the two sshd
export SLURM_CONF=$SLURM_CONF   # for sinfo, squeue, scontrol
ENV
