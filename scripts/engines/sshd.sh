#!/usr/bin/env bash
# Two real sshd on loopback acting as two asset owners' hosts, for the ssh
# provider's tests:
#   host a: 127.0.0.1:2222, user canopy-owner-a, files in $CANOPY_ENGINES_DIR/ssh-a/
#   host b: 127.0.0.1:2223, user canopy-owner-b, files in $CANOPY_ENGINES_DIR/ssh-b/
# Key authentication only; each sshd admits its own owner only. The client
# side is in $CANOPY_ENGINES_DIR/ssh/: client_ed25519 (authorised for both
# users), known_hosts (both host keys pinned as "[127.0.0.1]:2222 ssh-ed25519
# ..."), and for refusal tests known_hosts.changed (the same names with
# another, freshly generated key) and known_hosts.empty.
#
# Usage: sshd.sh start|stop|cut|status [a|b|all]   (default all)
#   start   sets up what is missing (users, keys, config) and starts the
#           listener; idempotent: a running one is left alone.
#   stop    stops the listener by its PID (SIGTERM): no new connection is
#           accepted. Like a real sshd restart, sessions already established
#           (and everything they started) keep running: "stopped" means
#           "refuses new connections", not "off the network".
#   cut     ends the established ssh sessions of that host's user: only the
#           per-connection sshd processes ("sshd: <user> [priv]" and
#           "sshd: <user>@..."), never the user's other processes, so work a
#           session started in its own session (setsid) keeps running.
#           As when a network drops, the commands the sessions ran are not
#           signalled either: they find their stdin closed and get EPIPE
#           when they next write.
#           `stop` then `cut` is a host that dropped off the network.
#   status  prints each host's listener PID or "stopped".
# Needs root (useradd, host keys, sshd's privilege separation).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"

port() { local v=SSH_PORT_$1; echo "${!v}"; }
user() { local v=SSH_USER_$1; echo "${!v}"; }
hostdir() { echo "$E/ssh-$1"; }
pidfile() { echo "$(hostdir "$1")/sshd.pid"; }
# The listener of host $1, if it runs: its PID file names a live sshd.
listener() {
  local f pid; f=$(pidfile "$1")
  [ -f "$f" ] || return 1
  pid=$(cat "$f"); alive "$pid" && grep -q sshd "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

# The client side, shared by both hosts: one key, the pinned host keys.
setup_client() {
  mkdir -p "$SSH_DIR" && chmod 755 "$SSH_DIR"
  [ -f "$SSH_DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C canopy-test-client -f "$SSH_DIR/client_ed25519"
  [ -f "$SSH_DIR/changed_host_ed25519" ] \
    || ssh-keygen -q -t ed25519 -N '' -C canopy-test-changed -f "$SSH_DIR/changed_host_ed25519"
}

setup_host() { # a|b
  local h=$1 d u p home; d=$(hostdir "$1"); u=$(user "$1"); p=$(port "$1")
  mkdir -p "$d" /run/sshd   # /run/sshd: sshd's privilege separation directory
  chmod 700 "$d"
  id "$u" >/dev/null 2>&1 || useradd -m -s /bin/bash "$u"
  usermod -p '*' "$u"       # useradd leaves '!' (locked), which sshd refuses without PAM
  [ -f "$d/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C "canopy-test-host-$h" -f "$d/host_ed25519"
  home=$(getent passwd "$u" | cut -d: -f6)
  # Read as the user itself: it must live in the user's home, owned by it.
  install -d -m 700 -o "$u" -g "$u" "$home/.ssh"
  install -m 600 -o "$u" -g "$u" "$SSH_DIR/client_ed25519.pub" "$home/.ssh/authorized_keys"
  cat > "$d/sshd_config" <<CONF
Port $p
ListenAddress 127.0.0.1
HostKey $d/host_ed25519
PidFile $d/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
AllowUsers $u
UsePAM no
PermitUserEnvironment no
X11Forwarding no
PrintMotd no
# Multiplexed clients open many sessions over one connection.
MaxSessions 64
MaxStartups 64:30:128
Subsystem sftp internal-sftp
LogLevel VERBOSE
CONF
  /usr/sbin/sshd -t -f "$d/sshd_config"
}

# known_hosts for both hosts, and the refusal fixtures.
write_known_hosts() {
  local kh="" ch="" h
  for h in a b; do
    kh+="[127.0.0.1]:$(port $h) $(cut -d' ' -f1,2 "$(hostdir $h)/host_ed25519.pub")"$'\n'
    ch+="[127.0.0.1]:$(port $h) $(cut -d' ' -f1,2 "$SSH_DIR/changed_host_ed25519.pub")"$'\n'
  done
  printf '%s' "$kh" > "$SSH_DIR/known_hosts"
  printf '%s' "$ch" > "$SSH_DIR/known_hosts.changed"
  : > "$SSH_DIR/known_hosts.empty"
  chmod 644 "$SSH_DIR"/known_hosts*
}

start_host() { # a|b
  local h=$1 d; d=$(hostdir "$1")
  if listener "$h" >/dev/null; then return 0; fi
  rm -f "$d/sshd.pid"
  # Absolute path (sshd re-executes itself); it forks and writes its PidFile.
  /usr/sbin/sshd -f "$d/sshd_config" -E "$d/sshd.log"
  for _ in $(seq 1 100); do listener "$h" >/dev/null && break; sleep 0.05; done
  listener "$h" >/dev/null || { echo "sshd $h did not start:"; tail -5 "$d/sshd.log"; exit 1; }
}

stop_host() { # a|b
  local h=$1 pid t0; t0=$(ms)
  # Rootless podman leaves a pause process (catatonit -P) per user that ran
  # a container: the owner's images test starts one; reap it with the host.
  pkill -TERM -u "$(user "$h")" -x catatonit 2>/dev/null || true
  pid=$(listener "$h") || { rm -f "$(pidfile "$h")"; return 0; }
  kill -TERM "$pid"
  for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.05; done
  alive "$pid" && kill -KILL "$pid"
  rm -f "$(pidfile "$h")"
  echo "stopped sshd $h (pid $pid) in $(( $(ms) - t0 )) ms"
}

# The per-connection processes of host $1's sessions: "sshd: <user> [priv]"
# (root, the session's monitor) and "sshd: <user>@notty" or "@pts/N" (the
# user's). Matched on the exact process title, so nothing else of the user.
sessions() {
  local u; u=$(user "$1")
  ps -eo pid=,args= | awk -v a="sshd: $u [priv]" -v b="sshd: $u@" \
    '{ pid = $1; $1 = ""; sub(/^ /, ""); if ($0 == a || index($0, b) == 1) print pid }'
}

cut_host() { # a|b
  local h=$1 pids n=0
  pids=$(sessions "$h")
  for p in $pids; do kill -TERM "$p" 2>/dev/null && n=$((n + 1)); done
  for _ in $(seq 1 100); do [ -z "$(sessions "$h")" ] && break; sleep 0.05; done
  pids=$(sessions "$h")
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  echo "cut $n sshd session process(es) of host $h ($(user "$h"))"
}

CMD=${1:-}
WHICH=${2:-all}
case $WHICH in a|b) HOSTS=("$WHICH") ;; all) HOSTS=(a b) ;; *) CMD=usage ;; esac
case $CMD in
  start)
    t0=$(ms)
    setup_client
    for h in a b; do setup_host $h; done
    write_known_hosts
    for h in "${HOSTS[@]}"; do start_host "$h"; done
    echo "sshd up in $(( $(ms) - t0 )) ms: $(for h in "${HOSTS[@]}"; do
      printf '%s@127.0.0.1:%s ' "$(user $h)" "$(port $h)"; done)"
    ;;
  stop) for h in "${HOSTS[@]}"; do stop_host "$h"; done ;;
  cut) for h in "${HOSTS[@]}"; do cut_host "$h"; done ;;
  status) for h in "${HOSTS[@]}"; do echo "$h: $(listener "$h" || echo stopped)"; done ;;
  *) echo "usage: $0 start|stop|cut|status [a|b|all]"; exit 2 ;;
esac
