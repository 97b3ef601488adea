# Shared settings for scripts/engines/*.sh (sourced, not run).
# Everything lives under $CANOPY_ENGINES_DIR (default /tmp/canopy-engines):
#   slurm/   config, state, logs, PID files (run/*.pid), slurmrestd token (rest/root.jwt)
#   rayvenv/ the Ray virtualenv;  raytmp/ Ray's temp dir and ray-head.pid
#   jobs/    working directory for jobs (mode 1777), shared by Canopy and the jobs
E=${CANOPY_ENGINES_DIR:-/tmp/canopy-engines}
S=$E/slurm
RAY_VENV=${RAY_VENV:-$E/rayvenv}
RAY_TMP=$E/raytmp
RAY_VERSION=${RAY_VERSION:-2.60.0}
SLURM_REST_PORT=${SLURM_REST_PORT:-6820}
RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-8265}
export SLURM_CONF=$S/etc/slurm.conf
# alive = exists and is not a zombie (PID 1 may reap late in containers)
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
