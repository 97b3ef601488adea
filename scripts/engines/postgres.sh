#!/usr/bin/env bash
# A throwaway PostgreSQL (Debian's packages, version 15 or later) for the
# journal's tests: one cluster under $CANOPY_ENGINES_DIR/postgres, made by
# initdb as the unprivileged `postgres` user when run as root (PostgreSQL
# refuses to run as root), listening on 127.0.0.1:$CANOPY_PG_PORT only
# (default 55432; no Unix socket outside the cluster's directory), with
# one role `canopy` that has a password (scram-sha-256, random, kept in
# postgres/password, mode 600) and owns one database `canopy`. The role may
# create databases and schemas: each test makes its own schema and drops it.
#
# Usage: postgres.sh start|stop|env|status
#   start   sets up what is missing (cluster, role, database) and starts the
#           server; idempotent: a running one is left alone. Prints the
#           environment to export (as `env` does).
#   stop    stops the server by its PID (fast shutdown: sessions ended,
#           everything committed stays), waits for it to go.
#   env     prints  export CANOPY_TEST_POSTGRES=postgres://canopy@127.0.0.1:PORT/canopy
#                   export CANOPY_TEST_POSTGRES_PASSWORD=...
#           the two variables the tests read (tests/journal.rs).
#   status  prints the server's PID or "stopped".
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd); . "$HERE/common.sh"
PG_PORT=${CANOPY_PG_PORT:-55432}
PG_DIR=$E/postgres
PG_DATA=$PG_DIR/data
PG_PASS=$PG_DIR/password
PG_LOG=$PG_DIR/server.log

# The newest installed server's binaries (Debian keeps them out of PATH).
pg_bin() {
  local d; d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$d" ] || { echo "PostgreSQL is not installed: apt-get install -y postgresql" >&2; exit 1; }
  echo "$d"
}
# Runs a command as the cluster's owner: `postgres` under root, else ourselves.
as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
server_pid() {
  local pid
  [ -f "$PG_DATA/postmaster.pid" ] || return 1
  pid=$(head -1 "$PG_DATA/postmaster.pid")
  alive "$pid" && grep -q postgres "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}
print_env() {
  echo "export CANOPY_TEST_POSTGRES=postgres://canopy@127.0.0.1:$PG_PORT/canopy"
  echo "export CANOPY_TEST_POSTGRES_PASSWORD=$(cat "$PG_PASS")"
}

start() {
  local bin t0; bin=$(pg_bin); t0=$(ms)
  if server_pid >/dev/null; then print_env; return; fi
  mkdir -p "$PG_DIR"
  chmod 755 "$E" 2>/dev/null || true
  if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_DIR"; fi
  chmod 700 "$PG_DIR"
  if [ ! -f "$PG_PASS" ]; then
    (umask 077; head -c 18 /dev/urandom | base64 | tr -d '/+=' > "$PG_PASS")
    if [ "$(id -u)" = 0 ]; then chown postgres: "$PG_PASS"; fi
  fi
  local fresh=0
  if [ ! -f "$PG_DATA/PG_VERSION" ]; then
    # Local (socket) connections trust the owner; TCP needs a password.
    as_owner "$bin/initdb" -D "$PG_DATA" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
      -E UTF8 --locale=C.UTF-8 >/dev/null
    fresh=1
  fi
  # Loopback only, the socket inside the cluster's directory; fsync stays
  # on (the journal's durability is what is tested).
  as_owner "$bin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $PG_DIR -c max_connections=200" start >/dev/null \
    || { echo "PostgreSQL did not come up:"; tail -5 "$PG_LOG"; exit 1; }
  if [ "$fresh" = 1 ] || ! as_owner "$bin/psql" -h "$PG_DIR" -p "$PG_PORT" -U postgres -tAc \
      "SELECT 1 FROM pg_roles WHERE rolname = 'canopy'" | grep -q 1; then
    as_owner "$bin/psql" -q -h "$PG_DIR" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 \
      -v pw="$(cat "$PG_PASS")" <<'SQL'
CREATE ROLE canopy LOGIN CREATEDB PASSWORD :'pw';
CREATE DATABASE canopy OWNER canopy;
SQL
  fi
  echo "postgres: pid $(server_pid) on 127.0.0.1:$PG_PORT in $(( $(ms) - t0 )) ms" >&2
  print_env
}

stop() {
  local pid; pid=$(server_pid) || { echo "postgres: stopped"; return; }
  kill -INT "$pid"   # fast shutdown
  for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
  alive "$pid" && kill -KILL "$pid"
  echo "postgres: stopped (pid $pid)"
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  env) [ -f "$PG_PASS" ] || { echo "postgres: not set up; run $0 start" >&2; exit 1; }; print_env ;;
  status) server_pid || echo stopped ;;
  *) echo "usage: $0 start|stop|env|status"; exit 2 ;;
esac
