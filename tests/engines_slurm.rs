//! Canopy against a real Slurm 22.05 through slurmrestd (see
//! `scripts/engines/`): capability placement, logs and outputs, a node
//! taken down mid-run, cancel, and the adapter's own contract (adoption
//! by token, exit codes). Skips visibly without the engines; fails under
//! `CANOPY_ENGINES=require`.

mod engines_support;

use canopy::engine::model::{AttemptState, WorkloadState};
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::providers::slurm::{SlurmConfig, SlurmProvider};
use canopy::providers::{AttemptStatus, LaunchError, LaunchRequest, LogStream, Provider};
use engines_support::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);

fn gpu_spec(name: &str, script: &str) -> canopy::spec::Spec {
    spec(json!({
        "name": name,
        "runtime": { "command": ["sh", "-c", script] },
        "resources": { "gpus": 2, "accelerator": { "family": ["hopper"] }, "memory_gb": 0.5 },
        "outputs": [{ "name": "result", "path": "/result.txt", "required": true }],
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn two_gpu_workload_runs_on_slurm_with_logs_and_outputs() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("two_gpu_workload_runs_on_slurm_with_logs_and_outputs", "slurm").await else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let script = "echo \"gpus=$CUDA_VISIBLE_DEVICES node=$SLURMD_NODENAME\"; echo oops >&2; echo done > \"$CANOPY_OUTPUT_DIR/result.txt\"";
    let id = submit(&r, gpu_spec("slurm-e2e", script)).await;
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].pool, "slurm/debug", "placed by capability on the Slurm h100 pool");
    assert_eq!(a[0].gpus, 2);
    let logs = find_files(&t.path().join("home"), "stdout.log");
    let two_gpus = regex::Regex::new(r"gpus=\d,\d node=n\d").unwrap();
    assert!(logs.iter().any(|(_, s)| two_gpus.is_match(s)), "stdout shipped through Canopy: {logs:?}");
    let errs = find_files(&t.path().join("home"), "stderr.log");
    assert!(errs.iter().any(|(_, s)| s.contains("oops")), "stderr shipped: {errs:?}");
    let art = find_files(&t.path().join("home"), "result");
    assert_eq!(art.len(), 1, "one artifact collected: {art:?}");
    assert_eq!(art[0].1, "done\n");
    r.handle.shutdown();
}

/// Puts the node back whatever happens to the test.
struct Resume(String);
impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scontrol")
            .env("SLURM_CONF", slurm_conf())
            .args(["update", &format!("nodename={}", self.0), "state=resume"])
            .status();
    }
}

/// An admin's `scontrol update state=down` mid-run is maintenance: the
/// work moves and reruns once elsewhere, and the node is not charged (it
/// used to count as a node failure per job, so draining a node with two
/// jobs quarantined it).
#[tokio::test(flavor = "multi_thread")]
async fn an_admins_node_down_moves_the_work_without_charging_the_node() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("an_admins_node_down_moves_the_work_without_charging_the_node", "slurm").await
    else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let marker = e.jobs_dir.join(format!("finished-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    // The work finishes only once the test opens the gate, after the node
    // went down and the first attempt ended: a fixed sleep let a loaded
    // machine see the first attempt run past its end before the node went
    // down (its line was written, then it was stopped and moved).
    let gate = e.jobs_dir.join(format!("gate-{}", std::process::id()));
    let _ = std::fs::remove_file(&gate);
    let script = format!(
        "while [ ! -e {g} ]; do sleep 0.2; done; echo \"$SLURMD_NODENAME\" >> {m}; \
         echo ok > \"$CANOPY_OUTPUT_DIR/result.txt\"",
        g = gate.display(),
        m = marker.display()
    );
    let id = submit(&r, gpu_spec("slurm-node-down", &script)).await;
    let (_, a) = wait(t.path(), id, LONG, "attempt 1 running", |_, a| {
        a.first().is_some_and(|a| a.state == AttemptState::Running)
    })
    .await;
    let node = a[0].node.clone();
    let _resume = Resume(node.clone());
    sh(&format!("scontrol update nodename={node} state=down reason=canopy-test"));
    wait(t.path(), id, LONG, "the first attempt to end", |_, a| a[0].class.is_some()).await;
    std::fs::write(&gate, b"").unwrap();
    let (w, a) =
        wait(t.path(), id, LONG, "success after the node went down", |w, _| w.state.is_final()).await;
    let _ = std::fs::remove_file(&gate);
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "one move: {a:#?}");
    assert_eq!(a[0].class, Some(FailureClass::Preempted), "moved, not failed: {a:#?}");
    let evidence = a[0].evidence.clone().unwrap_or_default();
    assert!(evidence.contains(&node) && evidence.contains("canopy-test"), "{evidence}");
    assert_ne!(a[1].node, node, "the rerun ran elsewhere");
    let finished = std::fs::read_to_string(&marker).unwrap();
    assert_eq!(finished.lines().count(), 1, "the work finished exactly once: {finished:?}");
    assert_eq!(finished.trim(), a[1].node);
    let health = journal(t.path()).health_observations(canopy::engine::model::Millis(0)).unwrap();
    assert!(
        !health.iter().any(|h| h.node == node && h.class.is_some()),
        "an admin's maintenance is not the node's failure: {health:?}"
    );
    r.handle.shutdown();
    let _ = std::fs::remove_file(&marker);
}

/// Kills one node's slurmd (a real node failure: slurmctld marks it down,
/// not responding, after `SlurmdTimeout`) and starts it again afterwards,
/// whatever happens to the test.
struct DeadSlurmd(String);

impl DeadSlurmd {
    fn kill(node: &str) -> DeadSlurmd {
        let pid_file =
            slurm_conf().parent().unwrap().parent().unwrap().join(format!("run/slurmd-{node}.pid"));
        let pid = std::fs::read_to_string(&pid_file).unwrap();
        sh(&format!("kill -9 {}", pid.trim()));
        DeadSlurmd(node.to_string())
    }
}

impl Drop for DeadSlurmd {
    fn drop(&mut self) {
        let _ = std::process::Command::new("slurmd")
            .env("SLURM_CONF", slurm_conf())
            .args(["-N", &self.0])
            .status();
        let _ = std::process::Command::new("scontrol")
            .env("SLURM_CONF", slurm_conf())
            .args(["update", &format!("nodename={}", self.0), "state=resume"])
            .status();
        // Up again once it answers (no `*`).
        for _ in 0..300 {
            let out = std::process::Command::new("sinfo")
                .env("SLURM_CONF", slurm_conf())
                .args(["-h", "-N", "-n", &self.0, "-o", "%t"])
                .output();
            if out.is_ok_and(|o| {
                let t = String::from_utf8_lossy(&o.stdout).to_string();
                !t.trim().is_empty() && !t.contains('*') && !t.contains("down")
            }) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// A gang rank's node that dies is the one charged: Slurm's requeue names
/// no node, and the engine used to blame rank 0 (a healthy node) and
/// exclude it.
#[tokio::test(flavor = "multi_thread")]
async fn a_gangs_lost_node_is_the_one_charged() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_gangs_lost_node_is_the_one_charged", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let s = spec(json!({
        "name": "slurm-gang-node-lost",
        "runtime": { "command": ["sh", "-c", "echo \"rank $NODE_RANK up\"; sleep 600"] },
        "resources": { "nodes": 2, "gpus": 2, "memory_gb": 0.1 },
        "constraints": { "providers": ["slurm"] },
    }));
    let id = submit(&r, s).await;
    let (_, a) = wait(t.path(), id, LONG, "the gang running", |_, a| {
        a.first().is_some_and(|a| a.state == AttemptState::Running)
    })
    .await;
    // Slurm's job is running before srun has launched its tasks: a node
    // killed then fails the *launch*, which srun may report on the other
    // node (CI saw "Task launch ... failed on node n2: Zero Bytes were
    // transmitted" after n1 was killed). This test is about a node lost
    // under a running gang, so both ranks are up first.
    let prefix = format!("canopy-{}-w{}-a1-", r.store_id, id.0);
    let deadline = Instant::now() + LONG;
    loop {
        let up = find_files(&e.jobs_dir, "stdout.log")
            .into_iter()
            .find(|(p, _)| p.to_string_lossy().contains(&prefix))
            .is_some_and(|(_, s)| s.contains("rank 0 up") && s.contains("rank 1 up"));
        if up {
            break;
        }
        assert!(Instant::now() < deadline, "the gang's two ranks never both started");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (rank0, rank1) = (a[0].nodes[0].clone(), a[0].nodes[1].clone());
    let dead = DeadSlurmd::kill(&rank1);
    let (_, a) = wait(t.path(), id, Duration::from_secs(180), "the first attempt to end", |_, a| {
        a.first().is_some_and(|a| a.state.is_final())
    })
    .await;
    assert_eq!(a[0].class, Some(FailureClass::Node), "{a:#?}");
    let evidence = a[0].evidence.clone().unwrap_or_default();
    assert!(evidence.contains(&format!("rank 1 on {rank1}")), "the lost node is named: {evidence}");
    let health = journal(t.path()).health_observations(canopy::engine::model::Millis(0)).unwrap();
    let charged: Vec<&str> = health.iter().filter(|h| h.class.is_some()).map(|h| h.node.as_str()).collect();
    assert_eq!(charged, [rank1.as_str()], "only the node that died is charged, not {rank0}: {health:?}");
    r.handle.shutdown();
    drop(dead);
}

/// An attempt's directory in the shared jobs_dir is Canopy's user's alone
/// (every user of the cluster used to read every workload's output), and
/// goes once Canopy has its logs and outputs and `jobs_retention` passed.
#[tokio::test(flavor = "multi_thread")]
async fn attempt_directories_are_private_and_go_after_their_retention() {
    use std::os::unix::fs::PermissionsExt;
    let _g = SERIAL.lock().await;
    let Some(e) = engines("attempt_directories_are_private_and_go_after_their_retention", "slurm").await
    else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let toml = slurm_toml(&e, "jobs_retention = \"0s\"");
    let r = start(t.path(), &toml).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let id =
        submit(&r, gpu_spec("slurm-private", "echo private; echo done > \"$CANOPY_OUTPUT_DIR/result.txt\""))
            .await;
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    let prefix = format!("canopy-{}-w{}-a1-", r.store_id, id.0);
    let dir = std::fs::read_dir(&e.jobs_dir)
        .unwrap()
        .flatten()
        .map(|d| d.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with(&prefix))
        .expect("the attempt's directory");
    // Released once the engine has collected it.
    let deadline = Instant::now() + LONG;
    while !dir.join(canopy::providers::jobs_dir::RELEASED).exists() {
        assert!(Instant::now() < deadline, "{} was never released", dir.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut open = Vec::new();
    for p in [dir.clone(), dir.join("outputs"), dir.join("work")] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            open.push(format!("{} {mode:o}", p.display()));
        }
    }
    assert!(open.is_empty(), "others can reach: {open:?}");
    assert!(dir.join("stdout.log").exists(), "the job's log is inside the private directory");
    // The next listing of the store's jobs (every reconcile) sweeps it.
    let entry = canopy::config::parse(&toml).unwrap().slurm.remove(0);
    let p = SlurmProvider::new(SlurmConfig::from_entry(&entry).unwrap()).unwrap();
    p.list_owned(&r.store_id).await.unwrap();
    assert!(!dir.exists(), "{} outlived its retention", dir.display());
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(logs.iter().any(|(_, s)| s.contains("private")), "Canopy kept its own copy: {logs:?}");
    r.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_leaves_nothing_running_on_slurm() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("cancel_leaves_nothing_running_on_slurm", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let id = submit(&r, gpu_spec("slurm-cancel", "sleep 300")).await;
    wait(t.path(), id, LONG, "running", |w, _| w.state == WorkloadState::Running).await;
    let res = r.handle.command(canopy::engine::command::Command::Cancel { id }).await;
    assert!(!matches!(res, canopy::engine::command::CommandResult::Error { .. }), "{res:?}");
    let (w, _) = wait(t.path(), id, LONG, "cancelled", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Cancelled);
    let p = adapter(&e);
    let deadline = Instant::now() + LONG;
    loop {
        let owned = p.list_owned(&r.store_id).await.unwrap();
        assert!(!owned.is_empty(), "the cancelled job is still listed");
        if owned.iter().all(|o| !o.running) {
            break;
        }
        assert!(Instant::now() < deadline, "still running at Slurm: {owned:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    r.handle.shutdown();
}

fn adapter(e: &Engines) -> SlurmProvider {
    let entry = canopy::config::parse(&slurm_toml(e, "")).unwrap().slurm.remove(0);
    SlurmProvider::new(SlurmConfig::from_entry(&entry).unwrap()).unwrap()
}

fn request(token: &str, spec: canopy::spec::Spec, dir: &std::path::Path) -> LaunchRequest {
    use canopy::engine::model::{AttemptId, WorkloadId};
    LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(1), n: 1 },
        token: token.into(),
        spec: Arc::new(spec),
        pool: "debug".into(),
        node: "n1".into(),
        nodes: vec!["n1".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: dir.to_path_buf(),
    }
}

async fn end_of(p: &SlurmProvider, token: &str) -> ProviderEnd {
    let deadline = Instant::now() + LONG;
    loop {
        if let AttemptStatus::Ended(end) = p.status(token).await.unwrap() {
            return end;
        }
        assert!(Instant::now() < deadline, "{token} did not end");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn adapter_adopts_by_token_and_decodes_exit_codes() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("adapter_adopts_by_token_and_decodes_exit_codes", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    let inv = p.inventory().await.unwrap();
    let pool = inv.pools.iter().find(|p| p.def.name == "debug").expect("pool debug");
    assert_eq!(pool.def.shape.gpus_per_node, 4);
    assert_eq!(pool.nodes.len(), 2);
    assert!(pool.def.capabilities.iter().any(|c| c == "gres:gpu:h100"));
    let token = format!("canopy-adapter{}-w1-a1", std::process::id());
    let s = spec(
        json!({ "name": "x", "runtime": { "command": ["sh", "-c", "printf '%s|%s\\n' \"$0\" \"$1\"; exit 7", "it's", "a b"] } }),
    );
    let req = request(&token, s, t.path());
    let first = p.launch(&req).await.unwrap();
    let again = p.launch(&req).await.unwrap();
    assert!(!first.adopted && again.adopted, "{first:?} {again:?}");
    assert_eq!(first.provider_ref, again.provider_ref, "never submitted twice");
    // The same token for another spec (a journal rolled back before tokens
    // carried nonces) is refused, not adopted.
    let other = spec(json!({ "name": "y", "runtime": { "command": ["true"] } }));
    match p.launch(&request(&token, other, t.path())).await {
        Err(LaunchError::Rejected(m)) => assert!(m.contains("another spec"), "{m}"),
        r => panic!("another spec's attempt was adopted: {r:?}"),
    }
    assert_eq!(end_of(&p, &token).await, ProviderEnd::Exited { code: 7 });
    let out = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&out.data), "it's|a b\n", "argv quoted safely");
    let tail = p.logs(&token, LogStream::Stdout, 5, 1 << 20).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&tail.data), "a b\n", "logs from an offset");
}

/// Slurm counts Canopy's running jobs as allocated, and the engine counts
/// its live attempts itself: the inventory must not report them as used
/// by others, or usable capacity halves (FREE 0 with 4 of 8 GPUs free).
#[tokio::test(flavor = "multi_thread")]
async fn canopys_own_jobs_are_not_counted_as_used_by_others() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("canopys_own_jobs_are_not_counted_as_used_by_others", "slurm").await else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    let used = |inv: &canopy::providers::Inventory| -> u32 {
        inv.pools
            .iter()
            .filter(|p| p.def.name == "debug")
            .flat_map(|p| &p.nodes)
            .map(|n| n.used_by_others.gpus)
            .sum()
    };
    let before = used(&p.inventory().await.unwrap());
    let tokens: Vec<String> =
        (1..=2).map(|i| format!("canopy-held{}-w{i}-a1-00000000000000{i:02}", std::process::id())).collect();
    for token in &tokens {
        let s = spec(json!({
            "name": "held", "runtime": { "command": ["sleep", "60"] },
            "resources": { "gpus": 2, "memory_gb": 0.1 },
        }));
        p.launch(&request(token, s, t.path())).await.unwrap();
    }
    let deadline = Instant::now() + LONG;
    for token in &tokens {
        while p.status(token).await.unwrap() != AttemptStatus::Running {
            assert!(Instant::now() < deadline, "{token} did not start");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let during = used(&p.inventory().await.unwrap());
    for token in &tokens {
        p.terminate(token).await.unwrap();
    }
    assert_eq!(during, before, "Canopy's 4 GPUs were reported as used by others");
}

/// Starts slurmrestd again when dropped (the test stops it).
struct RestBack;

impl Drop for RestBack {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/engines/start.sh");
        let _ = std::process::Command::new("bash").args([script, "slurm"]).output();
    }
}

/// A short slurmrestd outage strands nothing: running work waits it out
/// and is shown as unknown (not running) meanwhile; work submitted during
/// it fails launches that only back off (the pool is never ruled out) and
/// runs once the control plane answers again.
#[tokio::test(flavor = "multi_thread")]
async fn a_slurmrestd_outage_strands_nothing() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_slurmrestd_outage_strands_nothing", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let quick = |name: &str, script: &str| {
        spec(json!({
            "name": name, "runtime": { "command": ["sh", "-c", script] },
            "resources": { "gpus": 1, "memory_gb": 0.1 },
            "retry": { "backoff": "1s", "backoff_max": "4s" },
        }))
    };
    let running = submit(&r, quick("through-the-outage", "sleep 12")).await;
    wait(t.path(), running, LONG, "running", |w, _| w.state == WorkloadState::Running).await;

    let pid = std::fs::read_to_string(e.dir.join("slurm/run/slurmrestd.pid")).unwrap();
    let back = RestBack;
    sh(&format!("kill {}", pid.trim()));
    let during = submit(&r, quick("submitted-during", "echo ok")).await;
    // The running one is shown as what it is: unknown.
    let home = t.path().join("home");
    let deadline = Instant::now() + LONG;
    loop {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_canopy"))
            .arg("--store")
            .arg(&home)
            .args(["status", &running.to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("unreachable since") {
            break;
        }
        assert!(Instant::now() < deadline, "never shown as unknown: {text}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Launches fail while it is down (at least two, which used to rule out
    // the only pool for good).
    wait(t.path(), during, LONG, "two refused launches", |_, a| a.len() >= 2).await;
    drop(back);
    let (w, a) = wait(t.path(), during, LONG, "the late submit to run", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert!(a[..a.len() - 1].iter().all(|x| x.class == Some(FailureClass::Provider)), "{a:#?}");
    let (w, a) = wait(t.path(), running, LONG, "the running one to finish", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1, "rode out the outage without a relaunch: {a:#?}");
    r.handle.shutdown();
}

/// A secret reaches the Slurm job's environment and nothing else: not
/// slurmctld's state (job environment, batch script), spool, logs or
/// slurmrestd's answers.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_reach_the_slurm_job_and_no_slurm_surface() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("secrets_reach_the_slurm_job_and_no_slurm_surface", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    let (value, sha) = canary();
    let token = format!("canopy-slurmsecret{}-w1-a1", std::process::id());
    let s = spec(json!({
        "name": "secret",
        "runtime": { "command": ["sh", "-c", "printf %s \"$HF_TOKEN\" | sha256sum; sleep 2"], "secrets": ["HF_TOKEN"] },
    }));
    let mut req = request(&token, s, t.path());
    req.secrets = vec![("HF_TOKEN".into(), canopy::providers::SecretValue::new(value.clone()))];
    // A node that is up (another test may have just brought one back).
    let deadline = Instant::now() + LONG;
    req.node = loop {
        let inv = p.inventory().await.unwrap();
        let ready = inv
            .pools
            .iter()
            .flat_map(|p| &p.nodes)
            .find(|n| n.state == canopy::fleet::NodeState::Ready)
            .map(|n| n.name.clone());
        if let Some(n) = ready {
            break n;
        }
        assert!(Instant::now() < deadline, "no Slurm node came up");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    p.launch(&req).await.unwrap();
    // While it runs, slurmctld holds the job's state: look there then.
    let deadline = Instant::now() + LONG;
    while p.status(&token).await.unwrap() != AttemptStatus::Running {
        assert!(Instant::now() < deadline, "{token} did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let hits = files_containing(&e.dir.join("slurm"), value.as_bytes());
    assert!(hits.is_empty(), "the secret is written in {hits:?}");
    assert_eq!(end_of(&p, &token).await, ProviderEnd::Exited { code: 0 });
    let out = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
    assert!(String::from_utf8_lossy(&out.data).contains(&sha), "the job did not see its secret");
    for dir in [e.dir.join("slurm"), e.jobs_dir.clone()] {
        let hits = files_containing(&dir, value.as_bytes());
        assert!(hits.is_empty(), "the secret is written in {hits:?}");
    }
}

/// Through the engine: with two 2-GPU Canopy jobs on the two 4-GPU nodes,
/// half the GPUs are still free, so a third 2-GPU job runs beside them
/// instead of queueing behind capacity counted twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_third_job_runs_beside_two_of_canopys_own() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_third_job_runs_beside_two_of_canopys_own", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let mut ids = Vec::new();
    for i in 1..=3 {
        let s = spec(json!({
            "name": format!("side-by-side-{i}"),
            "runtime": { "command": ["sleep", "30"] },
            "resources": { "gpus": 2, "memory_gb": 0.1 },
        }));
        ids.push(submit(&r, s).await);
    }
    let deadline = Instant::now() + LONG;
    loop {
        let j = journal(t.path());
        let states: Vec<WorkloadState> =
            ids.iter().map(|id| j.workload(*id).unwrap().unwrap().state).collect();
        if states.iter().all(|s| *s == WorkloadState::Running) {
            break;
        }
        if Instant::now() > deadline {
            let events: Vec<String> = j.events(ids[2]).unwrap().into_iter().map(|e| e.message).collect();
            panic!("the three never ran together: {states:?}; the third's events: {events:#?}");
        }
        drop(j);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for id in ids {
        r.handle.command(canopy::engine::command::Command::Cancel { id }).await;
    }
    r.handle.shutdown();
}

fn gang(token: &str, script: &str, nodes: &[&str], dir: &std::path::Path) -> LaunchRequest {
    let s = spec(json!({
        "name": "gang",
        "runtime": { "command": ["sh", "-c", script] },
        "resources": { "nodes": nodes.len(), "gpus": 1, "memory_gb": 0.1 },
    }));
    let mut req = request(token, s, dir);
    req.nodes = nodes.iter().map(|n| n.to_string()).collect();
    req.node = req.nodes[0].clone();
    req
}

async fn running(p: &SlurmProvider, token: &str) {
    let deadline = Instant::now() + LONG;
    while p.status(token).await.unwrap() != AttemptStatus::Running {
        assert!(Instant::now() < deadline, "{token} did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A gang of two is one Slurm job with a launcher on each node: each
/// knows its rank, both agree on the rendezvous, and the secret reaches
/// every launcher without being written anywhere in clear.
#[tokio::test(flavor = "multi_thread")]
async fn a_gang_runs_one_launcher_per_slurm_node() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_gang_runs_one_launcher_per_slurm_node", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    p.inventory().await.unwrap();
    let (value, sha) = canary();
    let token = format!("canopy-slurmgang{}-w1-a1", std::process::id());
    let script = "printf %s \"$HF_TOKEN\" | sha256sum | sed \"s/ .*//; s/^/$SLURMD_NODENAME saw /\"; \
                  echo \"node=$SLURMD_NODENAME rank=$NODE_RANK of=$NNODES master=$MASTER_ADDR:$MASTER_PORT gpus=$CUDA_VISIBLE_DEVICES\"";
    let mut req = gang(&token, script, &["n1", "n2"], t.path());
    req.secrets = vec![("HF_TOKEN".into(), canopy::providers::SecretValue::new(value.clone()))];
    p.launch(&req).await.unwrap();
    assert_eq!(end_of(&p, &token).await, ProviderEnd::Exited { code: 0 });
    let out = String::from_utf8_lossy(&p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data)
        .into_owned();
    let line = regex::Regex::new(r"node=(n\d) rank=(\d) of=2 master=(\S+):(\d+) gpus=\d").unwrap();
    let mut seen: Vec<(String, String, String)> = line
        .captures_iter(&out)
        .map(|c| (c[1].to_string(), c[2].to_string(), format!("{}:{}", &c[3], &c[4])))
        .collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "one launcher per node: {out}");
    assert_eq!((seen[0].0.as_str(), seen[0].1.as_str()), ("n1", "0"), "{out}");
    assert_eq!((seen[1].0.as_str(), seen[1].1.as_str()), ("n2", "1"), "{out}");
    assert_eq!(seen[0].2, seen[1].2, "both ranks agree on the rendezvous: {out}");
    assert!(seen[0].2.starts_with("127.0.0.1:"), "MASTER_ADDR is n1's address as Slurm knows it: {out}");
    for node in ["n1", "n2"] {
        assert!(out.contains(&format!("{node} saw {sha}")), "{node} did not see its secret: {out}");
    }
    for dir in [e.dir.join("slurm"), e.jobs_dir.clone()] {
        let hits = files_containing(&dir, value.as_bytes());
        assert!(hits.is_empty(), "the secret is written in {hits:?}");
    }
}

/// One rank failing stops the whole gang, and the end names that rank and
/// its node (rank order is Canopy's, not Slurm's sorted node list).
#[tokio::test(flavor = "multi_thread")]
async fn one_failing_rank_ends_the_slurm_gang_and_is_named() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("one_failing_rank_ends_the_slurm_gang_and_is_named", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    p.inventory().await.unwrap();
    let token = format!("canopy-slurmgangfail{}-w1-a1", std::process::id());
    // "survived" only when rank 0's sleep ran its course: Slurm's
    // process tracking here (proctrack/linuxproc) may signal the sleep
    // and not the shell around it, which then goes on (CI once saw
    // "survived" printed by a shell whose sleep had been killed).
    let script = "echo \"rank $NODE_RANK up on $SLURMD_NODENAME\"; if [ \"$NODE_RANK\" = 1 ]; then sleep 1; exit 3; fi; \
                  sleep 120 && echo survived";
    p.launch(&gang(&token, script, &["n2", "n1"], t.path())).await.unwrap();
    let end = end_of(&p, &token).await;
    assert_eq!(
        end,
        ProviderEnd::Rank { rank: 1, node: "n1".into(), end: Box::new(ProviderEnd::Exited { code: 3 }) }
    );
    let out = String::from_utf8_lossy(&p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data)
        .into_owned();
    assert!(out.contains("rank 0 up on n2") && out.contains("rank 1 up on n1"), "{out}");
    assert!(!out.contains("survived"), "rank 0 was not stopped: {out}");
}

/// A running gang's holdings are Canopy's on both nodes (not "used by
/// others"), and a stop with grace reaches every launcher as SIGTERM
/// before anything is killed.
#[tokio::test(flavor = "multi_thread")]
async fn a_gang_is_counted_on_both_nodes_and_stops_with_grace() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_gang_is_counted_on_both_nodes_and_stops_with_grace", "slurm").await else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    let used = |inv: &canopy::providers::Inventory| -> Vec<(String, u32, f64)> {
        let mut v: Vec<(String, u32, f64)> = inv
            .pools
            .iter()
            .filter(|p| p.def.name == "debug")
            .flat_map(|p| &p.nodes)
            .map(|n| (n.name.clone(), n.used_by_others.gpus, n.used_by_others.cpu_cores))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let before = used(&p.inventory().await.unwrap());
    let token = format!("canopy-slurmganggrace{}-w1-a1", std::process::id());
    // Slurm signals every process of the step, one by one, not just the
    // launcher: a `sleep` that died of the SIGTERM first could end
    // `wait`, and so the shell, before the shell's own SIGTERM ran its
    // trap (CI saw rank 0 end so, under load). The sleep ignores
    // SIGTERM, so only the launcher's shell answers the stop.
    let script = "trap 'echo \"SIGTERM on $SLURMD_NODENAME\"; exit 0' TERM; echo ready; \
                  (trap '' TERM; exec sleep 300 >/dev/null 2>&1) & wait";
    let mut req = gang(&token, script, &["n1", "n2"], t.path());
    req.spec = Arc::new(spec(json!({
        "name": "gang", "runtime": { "command": ["sh", "-c", script] },
        "resources": { "nodes": 2, "gpus": 2, "cpu_cores": 2, "memory_gb": 0.1 },
    })));
    p.launch(&req).await.unwrap();
    running(&p, &token).await;
    let during = used(&p.inventory().await.unwrap());
    assert_eq!(during, before, "the gang's GPUs and CPUs on n1 and n2 were counted as someone else's");
    // Both launchers have set their trap before the stop.
    let deadline = Instant::now() + LONG;
    loop {
        let out = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
        if String::from_utf8_lossy(&out.data).matches("ready").count() == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the launchers did not start");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p.terminate_within(&token, Duration::from_secs(30)).await.unwrap();
    let end = p.status(&token).await.unwrap();
    assert!(matches!(end, AttemptStatus::Ended(_)), "still running after the stop");
    let out = String::from_utf8_lossy(&p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data)
        .into_owned();
    for node in ["n1", "n2"] {
        assert!(
            out.contains(&format!("SIGTERM on {node}")),
            "{node}'s launcher got no SIGTERM ({end:?}): {out}"
        );
    }
    assert_eq!(
        end,
        AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }),
        "both launchers saved and exited 0"
    );
}

/// canopy.toml declares what Slurm cannot report: the pool's fabric and
/// each node's switch reach the inventory (and so the fleet); a node
/// Slurm does not have is an error naming the file and key.
#[tokio::test(flavor = "multi_thread")]
async fn declared_topology_reaches_the_slurm_inventory() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("declared_topology_reaches_the_slurm_inventory", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("canopy.toml");
    let load = |topology: &str| {
        std::fs::write(&file, slurm_toml(&e, &format!("[slurm.topology]\n{topology}"))).unwrap();
        let entry = canopy::config::load(&file).unwrap().slurm.remove(0);
        SlurmProvider::new(SlurmConfig::from_entry(&entry).unwrap()).unwrap()
    };
    let p = load(
        "fabric = { kind = \"infiniband\", gbps = 200 }\nswitches = { sw1 = [\"n1\"], sw2 = [\"n2\"] }\n",
    );
    let inv = p.inventory().await.unwrap();
    let fleet = canopy::app::provider_def("slurm", canopy::fleet::ProviderKind::Slurm, None, inv);
    let (pool, nodes) = fleet.pools.iter().find(|(p, _)| p.name == "debug").expect("pool debug");
    let fabric = pool.shape.fabric.expect("the declared fabric");
    assert_eq!((fabric.kind, fabric.gbps), (canopy::accel::Fabric::Infiniband, 200.0));
    let switches: Vec<(String, Option<String>)> =
        nodes.iter().map(|n| (n.name.clone(), n.switch.clone())).collect();
    assert_eq!(switches, vec![("n1".into(), Some("sw1".into())), ("n2".into(), Some("sw2".into()))]);
    let wrong = load("switches = { sw1 = [\"n1\", \"n9\"] }\n");
    let err = wrong.inventory().await.unwrap_err().to_string();
    assert!(err.contains(&file.display().to_string()), "the file is named: {err}");
    assert!(err.contains("[slurm.topology] switches.sw1 names node \"n9\""), "the key is named: {err}");
    assert!(err.contains("n1, n2"), "the nodes Slurm has are listed: {err}");
}

/// A gang of two through the whole engine onto the real Slurm: placed on
/// both nodes at once, one launcher per node with its rank, and the same
/// rendezvous for both (the CI nodes share one hostname, so each prints
/// Slurm's own name for its node).
#[tokio::test(flavor = "multi_thread")]
async fn a_two_node_gang_runs_through_the_engine_on_slurm() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_two_node_gang_runs_through_the_engine_on_slurm", "slurm").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let s = spec(json!({
        "name": "slurm-gang",
        "runtime": { "command": ["sh", "-c", "echo \"node=$SLURMD_NODENAME rank=$NODE_RANK of $NNODES master=$MASTER_ADDR:$MASTER_PORT\""] },
        "resources": { "nodes": 2, "gpus": 2, "memory_gb": 0.1 },
        "constraints": { "providers": ["slurm"] },
    }));
    let id = submit(&r, s).await;
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1);
    let mut nodes = a[0].nodes.clone();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2"], "{a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    let text: String = logs.iter().map(|(_, s)| s.as_str()).collect();
    let line = regex::Regex::new(r"node=(n\d) rank=(\d) of 2 master=(\S+)").unwrap();
    let mut seen: Vec<(String, String, String)> =
        line.captures_iter(&text).map(|c| (c[1].to_string(), c[2].to_string(), c[3].to_string())).collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "{text}");
    assert_eq!(seen[0].2, seen[1].2, "one rendezvous for both: {seen:?}");
    let pairs: Vec<(String, String)> = seen.iter().map(|(n, r, _)| (n.clone(), r.clone())).collect();
    let rank_of = |n: &str| a[0].nodes.iter().position(|x| x == n).unwrap().to_string();
    assert_eq!(pairs, [("n1".to_string(), rank_of("n1")), ("n2".to_string(), rank_of("n2"))], "{text}");
    r.handle.shutdown();
}

/// Slurm 22.05 runs no container images here (its `--container` wants an
/// OCI bundle and the cluster's `oci.conf`): an image spec only Slurm
/// could take is refused at submit with the reason and what to do, and
/// nothing reaches the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_spec_for_slurm_is_refused_at_submit_with_the_reason() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("an_image_spec_for_slurm_is_refused_at_submit_with_the_reason", "slurm").await
    else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &slurm_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    wait_for_pools(&r, "slurm").await;
    let m = refused_at_submit(&r, image_spec("slurm-image", "slurm")).await;
    assert!(m.contains("does not run container images"), "{m}");
    assert!(m.contains("runtime.image needs a pool that runs container images"), "{m}");
    assert!(adapter(&e).list_owned(&r.store_id).await.unwrap().is_empty(), "a job reached Slurm");
    r.handle.shutdown();
}
