# Shared settings for scripts/engines/*.sh (sourced, not run).
# Everything lives under $CANOPY_ENGINES_DIR (default /tmp/canopy-engines):
#   slurm/   config, state, logs, PID files (run/*.pid), slurmrestd token (rest/root.jwt)
#   rayvenv/ the Ray virtualenv;  raytmp/ Ray's temp dir and ray-head.pid
#   jobs/    working directory for jobs (mode 1777), shared by Canopy and the jobs
#   ssh/     the client side of the two test sshd: client_ed25519 (authorised for
#            both owners), known_hosts (both host keys pinned), known_hosts.changed
#            (the same names with another key), known_hosts.empty
#   ssh-a/, ssh-b/  one sshd each: host key, sshd_config, sshd.pid, sshd.log
E=${CANOPY_ENGINES_DIR:-/tmp/canopy-engines}
S=$E/slurm
RAY_VENV=${RAY_VENV:-$E/rayvenv}
RAY_TMP=$E/raytmp
RAY_VERSION=${RAY_VERSION:-2.60.0}
SLURM_REST_PORT=${SLURM_REST_PORT:-6820}
RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-8265}
# Two owners' hosts on loopback (see sshd.sh): host a and host b.
SSH_DIR=$E/ssh
SSH_PORT_a=2222 SSH_USER_a=canopy-owner-a
SSH_PORT_b=2223 SSH_USER_b=canopy-owner-b
export SLURM_CONF=$S/etc/slurm.conf
# alive = exists and is not a zombie (PID 1 may reap late in containers)
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
