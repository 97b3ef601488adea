//! The engine end to end with real processes, as `engine_local` (split
//! from it): what operators do to nodes (cordons, drains with and without
//! eviction, across restarts), the fleet and plan a configuration gives,
//! checkpoints resumed after a kill, and gangs of ranks on this host.
//!
//! Every wait is a bounded poll for a condition; nothing is timed.

use canopy::engine::model::WorkloadState;
mod local_support;
mod reap_support;

use local_support::{Cli, Engine, live_fleet, setup, spec, wait_for};

fn node_state(fleet: &serde_json::Value, name: &str) -> String {
    let node = fleet["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap();
    node["state"].as_str().unwrap().to_string()
}

#[test]
fn an_operators_cordon_outlives_the_engine_with_who_and_why() {
    const NODE: &str = "fra-h100-01";
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let said = cli.ok(&["cordon", NODE, "--reason", "fan noise, ticket OPS-12", "--until", "2h"]);
    assert!(said.contains("cordoned"), "{said}");
    engine.stop();

    // A new engine: the cordon, who set it and why are still there.
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let fleet = live_fleet(&s.store);
    assert_eq!(node_state(&fleet, NODE), "cordoned");
    let intent = &fleet["intents"][NODE];
    assert_eq!(intent["reason"], "fan noise, ticket OPS-12", "{intent}");
    assert!(intent["by"].as_str().unwrap().starts_with("local:"), "{intent}");
    assert!(intent["until"].as_i64().unwrap() > intent["at"].as_i64().unwrap());
    // The audit trail has it too.
    let audit = cli.ok(&["audit", "--json"]);
    assert!(audit.contains("fan noise, ticket OPS-12") && audit.contains("\"cordon\""), "{audit}");

    // Uncordon lifts it, and that is kept as well.
    cli.ok(&["uncordon", NODE, "--reason", "fan replaced"]);
    engine.stop();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let fleet = live_fleet(&s.store);
    assert_eq!(node_state(&fleet, NODE), "ready");
    assert!(fleet["intents"].get(NODE).is_none(), "{}", fleet["intents"]);
    engine.stop();
}

#[test]
fn draining_a_node_lets_work_finish_and_evicting_moves_it_without_a_failure() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    // A plain drain: the running workload finishes where it is.
    let finishing = cli.submit(&spec(&s.specs, "finishing", "sleep 1; echo finished", ""));
    cli.wait_state(finishing, |s| s == WorkloadState::Running);
    let node = cli.status(finishing).1[0].node.clone();
    cli.ok(&["drain", &node, "--reason", "kernel update"]);
    assert_eq!(cli.wait_final(finishing).state, WorkloadState::Succeeded);
    cli.ok(&["uncordon", &node]);

    // An evicting drain: the workload (which ignores SIGTERM) is stopped
    // after the drain's grace and waits to be placed again; its one
    // allowed attempt is not spent (with nothing checkpointed to resume
    // from, the move comes out of infra_retries, as a preemption's would),
    // and the node's health is untouched.
    let marker = s.scratch.join("moved");
    let script = format!("trap '' TERM; echo run >> {}; sleep 60", marker.display());
    let path = spec(&s.specs, "moved", &script, "[retry]\nmax_attempts = 1\ninfra_retries = 1\n");
    // A short grace, so that the cancel at the end ends it soon.
    let text =
        std::fs::read_to_string(&path).unwrap().replace("[runtime]\n", "[runtime]\nstop_grace = \"1s\"\n");
    std::fs::write(&path, text).unwrap();
    let moved = cli.submit(&path);
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    let said = cli.ok(&["drain", &node, "--evict", "--grace", "1s", "--reason", "disk swap"]);
    assert!(said.contains("drain"), "{said}");
    let w = cli.wait_state(moved, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(moved);
    assert_eq!(attempts[0].rule.as_deref(), Some("canopy.evicted"), "{attempts:?}");
    assert!(w.reason.as_deref().unwrap_or("").contains("draining"), "{w:?}");
    let events = cli.ok(&["events", &moved.to_string()]);
    assert!(events.contains("retry.evicted") && events.contains("disk swap"), "{events}");
    // One outcome on the node (the finished workload's), a perfect score.
    let health = &live_fleet(&s.store)["health"]["nodes"][node.as_str()];
    assert_eq!((health["samples"].as_u64(), health["score"].as_f64()), (Some(1), Some(1.0)), "{health}");
    // The node back: the workload runs again, its second run.
    cli.ok(&["uncordon", &node]);
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    wait_for("the second run", || std::fs::read_to_string(&marker).unwrap_or_default().lines().count() == 2);
    cli.ok(&["cancel", &moved.to_string()]);
    // Ended before the engine stops: a stopped engine leaves work running.
    assert_eq!(cli.wait_final(moved).state, WorkloadState::Cancelled);
    engine.stop();
}

/// `canopy fleet` and `canopy plan` see the fleet the engine would run
/// with: the engine's own when one runs, else the configured providers
/// taken live, and the demo fleet only when canopy.toml includes it.
#[test]
fn fleet_and_plan_follow_the_configuration_with_or_without_an_engine() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n").unwrap();
    let gpu = s.specs.join("gpu.toml");
    std::fs::write(&gpu, "name = \"gpu\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = 8\n").unwrap();
    let cli = Cli::new(&s.store);
    let check = |when: &str| {
        let fleet = cli.ok(&["fleet", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&fleet).unwrap();
        let providers: std::collections::BTreeSet<String> =
            v.as_array().unwrap().iter().map(|p| p["provider"].as_str().unwrap().to_string()).collect();
        assert_eq!(providers.into_iter().collect::<Vec<_>>(), ["local"], "{when}: {fleet}");
        let out = cli.run(&["plan", gpu.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(3), "{when}: an 8-GPU plan on this host alone cannot fit");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("0/1 nodes fit"), "{when}: {text}");
    };
    check("without an engine");
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    check("with the engine running");
    engine.stop();
}

/// A drain is kept across a restart like a cordon, and an evicting drain's
/// stop already decided is carried out after one: the moved workload
/// waits to be placed again, its stop (no checkpointed progress) charged
/// to its one infrastructure retry, never to `max_attempts`.
#[test]
fn a_drain_and_its_eviction_survive_an_engine_restart() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = "trap '' TERM; sleep 60";
    let moved =
        cli.submit(&spec(&s.specs, "moved", script, "[retry]\nmax_attempts = 1\ninfra_retries = 1\n"));
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    let node = cli.status(moved).1[0].node.clone();
    // A long grace: the engine dies before the stop is done.
    cli.ok(&["drain", &node, "--evict", "--grace", "3s", "--reason", "disk swap"]);
    engine.kill();

    let engine = Engine::start(&s.store, &s.scratch, &[]);
    assert_eq!(node_state(&live_fleet(&s.store), &node), "draining", "the drain outlived the engine");
    let w = cli.wait_state(moved, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(moved);
    assert_eq!(attempts[0].rule.as_deref(), Some("canopy.evicted"), "{w:?} {attempts:?}");
    cli.ok(&["cancel", &moved.to_string()]);
    // Ended before the engine stops: a stopped engine leaves work running.
    assert_eq!(cli.wait_final(moved).state, WorkloadState::Cancelled);
    engine.stop();
}

/// The script of a workload that counts to 5, saving each step as a
/// checkpoint (`step-N/` with `COMPLETE` last) and resuming from the
/// newest it finds. `$1` is a marker file; the first run leaves step-4
/// half-written and kills itself.
const COUNTING: &str = r#"d="$CANOPY_CHECKPOINT_DIR"; start=0
for c in "$d"/step-*/COMPLETE; do [ -e "$c" ] || continue; n=$(basename "$(dirname "$c")"); n=${n#step-}; [ "$n" -gt "$start" ] && start=$n; done
echo "resumed at step $start"; echo "run from $start" >> "$MARK"
s=$start
while [ $s -lt 5 ]; do
  s=$((s+1)); mkdir -p "$d/step-$s"; echo $s > "$d/step-$s/state"
  if [ $s = 4 ] && [ $start = 0 ]; then kill -9 $$; fi
  touch "$d/step-$s/COMPLETE"
done
echo "finished at step $s""#;

#[test]
fn a_checkpointed_workload_killed_mid_run_resumes_from_its_last_complete_checkpoint() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let mark = s.scratch.join("runs");
    let extra = format!(
        "[checkpoint]\npath = \"/ckpt\"\n\n[retry]\napp_errors = 1\nbackoff = \"1s\"\n\n\
         [runtime.env]\nMARK = {:?}\n",
        mark.display().to_string()
    );
    let path = s.specs.join("counting.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"counting\"\n[runtime]\ncommand = [\"sh\", \"-c\", {COUNTING:?}]\n{}\n\
             [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n",
            extra
        ),
    )
    .unwrap();
    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    // The second run started at step 3, the last complete one; the
    // half-written step 4 was never handed on.
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "run from 0\nrun from 3\n");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 2);
    let resumed = attempts[1].checkpoint.as_ref().and_then(|c| c.resumed.as_ref()).expect("resumed");
    assert_eq!((resumed.name.as_str(), resumed.attempt), ("step-3", 1));
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("resumed at step 3") && logs.contains("finished at step 5"), "{logs}");
    let events = cli.ok(&["events", &id.to_string()]);
    assert!(events.contains("resumes from checkpoint step-3 of attempt 1 (saved"), "{events}");
    engine.stop();
}

/// An evicting drain sends SIGTERM and waits its grace: the workload
/// saves a checkpoint in that time, and its next run resumes from it.
#[test]
fn sigterm_with_grace_reaches_the_workload_before_an_evicting_drain_kills_it() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = r#"d="$CANOPY_CHECKPOINT_DIR"
if [ -e "$d/on-term/COMPLETE" ]; then echo "resumed from on-term"; exit 0; fi
trap 'mkdir -p "$d/on-term"; echo 42 > "$d/on-term/state"; touch "$d/on-term/COMPLETE"; echo saved on SIGTERM; exit 143' TERM
echo started; sleep 60 & wait"#;
    let path = spec(&s.specs, "graceful", script, "[checkpoint]\npath = \"/ckpt\"\n");
    let id = cli.submit(&path);
    cli.wait_state(id, |s| s == WorkloadState::Running);
    let node = cli.status(id).1[0].node.clone();
    wait_for("the workload to start", || cli.ok(&["logs", &id.to_string()]).contains("started"));
    cli.ok(&["drain", &node, "--evict", "--grace", "30s", "--reason", "reboot"]);
    cli.wait_state(id, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(id);
    let saved = attempts[0].checkpoint.as_ref().and_then(|c| c.saved.as_ref()).expect("a checkpoint saved");
    assert_eq!(saved.name, "on-term");
    cli.ok(&["uncordon", &node]);
    assert_eq!(cli.wait_final(id).state, WorkloadState::Succeeded);
    let logs = cli.ok(&["logs", &id.to_string(), "--attempt", "1"]);
    assert!(logs.contains("saved on SIGTERM"), "{logs}");
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("resumed from on-term"), "{logs}");
    engine.stop();
}

/// A gang of two on this machine offered as three nodes, through the
/// engine: the first run's rank 1 fails with an NCCL error, which stops
/// rank 0 too (SIGTERM first); the gang runs again once — one retry, not
/// two — away from the node that failed, which alone is charged.
#[test]
fn one_failing_rank_stops_the_gang_and_it_runs_again_once_elsewhere() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n\n[local]\nnodes = 3\n")
        .unwrap();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = r#"case "$CANOPY_ATTEMPT.$NODE_RANK" in
  *.1.1) echo "NCCL WARN Net/Socket : peer closed connection; NCCL error: unhandled system error" >&2; exit 1 ;;
  *.1.0) trap 'echo "rank 0 stopped by SIGTERM"; exit 143' TERM; sleep 60 & wait ;;
  *) echo "rank $NODE_RANK of $NNODES on $CANOPY_NODE_NAME, master $MASTER_ADDR:$MASTER_PORT" ;;
esac"#;
    let path = spec(&s.specs, "gang", script, "");
    let text = std::fs::read_to_string(&path).unwrap().replace("[resources]\n", "[resources]\nnodes = 2\n");
    std::fs::write(&path, text).unwrap();
    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 2, "one relaunch of the whole gang: {attempts:?}");
    let first = &attempts[0];
    assert_eq!(first.nodes.len(), 2, "{first:?}");
    let culprit = &first.nodes[1];
    assert_eq!(first.class, Some(canopy::failure::FailureClass::Comm), "{first:?}");
    let evidence = first.evidence.clone().unwrap_or_default();
    assert!(evidence.starts_with(&format!("rank 1 on {culprit}: ")), "{evidence}");
    assert!(!attempts[1].nodes.contains(culprit), "the rerun avoids {culprit}: {:?}", attempts[1]);
    let logs = cli.ok(&["logs", &id.to_string(), "--attempt", "1"]);
    assert!(logs.contains("rank 0 stopped by SIGTERM"), "{logs}");
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("rank 0 of 2") && logs.contains("rank 1 of 2"), "{logs}");
    // Only the failing rank's node is charged with the fault (the fleet
    // status is published a moment after the change).
    let mut fleet = live_fleet(&s.store);
    wait_for("the fault on the failing rank's node", || {
        fleet = live_fleet(&s.store);
        fleet["health"]["faults"][culprit.as_str()].is_array()
    });
    let faults = &fleet["health"]["faults"];
    assert_eq!(faults[culprit.as_str()][0]["class"], "comm", "{faults}");
    assert!(faults[first.nodes[0].as_str()].is_null(), "rank 0's node is not blamed: {faults}");
    engine.stop();
}

/// The launchers of a gang meet over TCP through the engine.
#[test]
fn a_gangs_launchers_rendezvous_over_tcp_through_the_engine() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n\n[local]\nnodes = 2\n")
        .unwrap();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let py = "import os, socket, time\n\
rank = int(os.environ['NODE_RANK']); port = int(os.environ['MASTER_PORT']); host = os.environ['MASTER_ADDR']\n\
if rank == 0:\n    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n    s.bind((host, port)); s.listen(1); s.settimeout(30)\n    c, _ = s.accept(); print('rank 0 heard:', c.recv(100).decode(), flush=True)\n\
else:\n    for _ in range(300):\n        try:\n            c = socket.create_connection((host, port), timeout=1); break\n        except OSError:\n            time.sleep(0.1)\n    c.sendall(b'hello from rank 1'); c.close()\n";
    let path = s.specs.join("rendezvous.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"rendezvous\"\n[runtime]\ncommand = [\"python3\", \"-c\", {py:?}]\n\n\
             [resources]\nnodes = 2\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n"
        ),
    )
    .unwrap();
    let id = cli.submit(&path);
    assert_eq!(cli.wait_final(id).state, WorkloadState::Succeeded);
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("rank 0 heard: hello from rank 1"), "{logs}");
    engine.stop();
}
