#!/usr/bin/env bash
# The console's memory and idle CPU with 10,000 workloads held (issue #23
# item 12): seeds a store with 10,000 workloads and their attempts and
# events (examples/console_store.rs, the simulator's records on the demo
# fleet), starts `canopy serve` over it, attaches the real console in a
# 120x40 tmux session, pages every workload in (G at the end of the
# workloads list) and reports the console's VmRSS (/proc/PID/status) and
# its CPU while idle for IDLE_S seconds (utime+stime from /proc/PID/stat).
#
#   scripts/console_footprint.sh [CANOPY_BIN] [SEEDER_BIN]
#
# CANOPY_BIN defaults to target/release/canopy, SEEDER_BIN to
# target/release/examples/console_store (build them with `cargo build
# --release --bin canopy --example console_store`). STORE_TEMPLATE=DIR
# reuses a store seeded before (it is copied, never changed); IDLE_S
# (default 60) sets the idle span; VIEW (default 4, the workloads) the
# view the console idles on. Needs tmux.
set -euo pipefail

BIN=${1:-target/release/canopy}
SEEDER=${2:-target/release/examples/console_store}
IDLE_S=${IDLE_S:-60}
VIEW=${VIEW:-4}
N=10000
command -v tmux >/dev/null || { echo "tmux is not installed (apt-get install -y tmux)" >&2; exit 2; }

DIR=$(mktemp -d /tmp/canopy-footprint.XXXXXX)
SESSION=canopy-footprint-$$
SERVE_PID=
cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    if [ -n "$SERVE_PID" ]; then kill "$SERVE_PID" 2>/dev/null || true; wait "$SERVE_PID" 2>/dev/null || true; fi
    rm -rf "$DIR"
}
trap cleanup EXIT

if [ -n "${STORE_TEMPLATE:-}" ]; then
    cp -a "$STORE_TEMPLATE" "$DIR/s"
    rm -f "$DIR/s/canopy.sock" "$DIR/s/canopy.lock"
else
    "$SEEDER" --store "$DIR/s" --workloads "$N" >&2
fi
chmod 700 "$DIR/s"
echo 'include_demo_fleet = true' >"$DIR/canopy.toml"

"$BIN" --store "$DIR/s" --config "$DIR/canopy.toml" serve --no-faults >/dev/null 2>"$DIR/serve.err" &
SERVE_PID=$!
for _ in $(seq 1 600); do
    grep -q "API on" "$DIR/serve.err" && break
    kill -0 "$SERVE_PID" 2>/dev/null || { cat "$DIR/serve.err" >&2; exit 1; }
    sleep 0.1
done

tmux new-session -d -s "$SESSION" -x 120 -y 40 \
    "$BIN --store $DIR/s --config $DIR/canopy.toml --no-faults --color=none; sleep 3600"
screen() { tmux capture-pane -p -t "$SESSION"; }
for _ in $(seq 1 600); do screen | grep -q "attached to\|workloads\|overview" && break; sleep 0.1; done
PANE=$(tmux display -p -t "$SESSION" '#{pane_pid}')
PID=$(pgrep -P "$PANE")

# Page every workload in: G goes to the end of the list, which asks for
# the next older page.
tmux send-keys -t "$SESSION" 4
held=
for _ in $(seq 1 120); do
    tmux send-keys -t "$SESSION" G
    sleep 1
    if screen | grep -q "workloads $N/$N "; then held=yes; break; fi
done
[ -n "$held" ] || { echo "the console did not page all $N workloads in:" >&2; screen >&2; exit 1; }
tmux send-keys -t "$SESSION" g "$VIEW"
sleep 5

rss_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
hwm_kb=$(awk '/^VmHWM/ {print $2}' "/proc/$PID/status")
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
s0=$(date +%s.%N)
sleep "$IDLE_S"
t1=$(ticks)
s1=$(date +%s.%N)
rss_after_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$PID/status")
cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s0="$s0" -v s1="$s1" \
    'BEGIN { printf "%.2f", 100 * (b - a) / hz / (s1 - s0) }')
echo "console pid $PID holding $N workloads (view $VIEW), binary $BIN"
echo "VmRSS $((rss_kb / 1024)) MB (after idling: $((rss_after_kb / 1024)) MB; peak VmHWM $((hwm_kb / 1024)) MB)"
echo "idle CPU over ${IDLE_S}s: ${cpu}% of one core ($((t1 - t0)) ticks of 1/${hz} s)"
