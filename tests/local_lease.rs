//! The local provider under a lease (`LocalConfig::lease`), with real
//! processes: a workload whose lease is renewed keeps running; once
//! renewal stops, its whole group (a grandchild that ignores SIGTERM
//! included) is gone, SIGTERM having reached the workload first, and the
//! end is the node's (`NodeLost`, "lease expired: …"); nothing starts
//! without a held lease; a gang's ranks all stop. Every wait is a bounded
//! poll; nothing asserts on elapsed time.

use canopy::engine::classify::classify;
use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand, lease, procfs};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use canopy::spec::Spec;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(30);
/// Short, so that a test sees several lease periods go by.
const LEASE: Duration = Duration::from_secs(2);

fn provider(root: &Path, nodes: u32) -> (LocalProvider, PathBuf) {
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let mut cfg = LocalConfig::new(root.join("attempts"), shim);
    cfg.grace = Duration::from_secs(1);
    cfg.containers = ContainerPolicy::Disabled;
    cfg.nodes = nodes;
    let lease = root.join("lease.json");
    cfg.lease = Some(lease.clone());
    (LocalProvider::new(cfg), lease)
}

fn request(root: &Path, workload: u64, script: &str, nodes: &[&str]) -> LaunchRequest {
    let spec: Spec = serde_json::from_value(json!({
        "name": "leased",
        "runtime": { "command": ["sh", "-c", script], "stop_grace": "1s" },
        "resources": { "nodes": nodes.len() },
    }))
    .unwrap();
    let attempt = AttemptId { workload: WorkloadId(workload), n: 1 };
    LaunchRequest {
        attempt,
        token: attempt.token("l3as", ""),
        spec: Arc::new(spec),
        pool: "host".into(),
        node: nodes[0].into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: root.join("artifacts"),
    }
}

/// Renews the lease every 200 ms until dropped: Canopy in contact.
struct Renewer(Arc<AtomicBool>);

impl Renewer {
    fn start(path: &Path) -> Self {
        lease::renew(path, LEASE).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, path) = (Arc::clone(&stop), path.to_path_buf());
        std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                lease::renew(&path, LEASE).unwrap();
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Self(stop)
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn wait_end(p: &LocalProvider, token: &str) -> ProviderEnd {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match p.status(token).await.unwrap() {
            AttemptStatus::Ended(end) => return end,
            s if Instant::now() > deadline => panic!("{token} did not end; last status {s:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stdout(p: &LocalProvider, token: &str) -> String {
    String::from_utf8(p.logs(token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data).unwrap()
}

/// The pid (and start time) a workload wrote to `file` in its work dir.
async fn pid_in(p: &LocalProvider, token: &str, file: &str) -> (i32, u64) {
    let f = p.attempt_dir(token).join("work").join(file);
    wait_for(file, || std::fs::read_to_string(&f).is_ok_and(|s| s.ends_with('\n'))).await;
    let pid: i32 = std::fs::read_to_string(&f).unwrap().trim().parse().unwrap();
    (pid, procfs::stat(pid).unwrap().start_time)
}

fn running(pid: i32, start_time: u64) -> bool {
    procfs::stat(pid).is_some_and(|s| s.start_time == start_time && s.state != 'Z')
}

fn lease_lost(end: &ProviderEnd) -> &str {
    match end {
        ProviderEnd::NodeLost { message } if message.starts_with("lease expired: ") => message,
        other => panic!("expected a NodeLost for the lease, got {other:?}"),
    }
}

/// Traps SIGTERM (prints, then exits 0), and leaves a grandchild that
/// ignores SIGTERM, so only the grace's SIGKILL ends it.
const TRAPPING: &str = "trap 'echo got TERM; exit 0' TERM; \
    (trap '' TERM; exec sleep 1000) & echo $! > grandchild.pid; \
    echo $$ > leader.pid; while true; do sleep 0.1; done";

#[tokio::test]
async fn a_renewed_lease_keeps_the_workload_and_a_lapsed_one_stops_its_whole_group() {
    let t = tempfile::tempdir().unwrap();
    let (p, lease_file) = provider(t.path(), 1);
    let renewer = Renewer::start(&lease_file);
    let req = request(t.path(), 1, TRAPPING, &["localhost"]);
    p.launch(&req).await.unwrap();
    let (leader, leader_start) = pid_in(&p, &req.token, "leader.pid").await;
    let (grandchild, grandchild_start) = pid_in(&p, &req.token, "grandchild.pid").await;

    // Several lease periods go by while Canopy keeps renewing.
    let until = Instant::now() + LEASE * 3;
    while Instant::now() < until {
        assert_eq!(p.status(&req.token).await.unwrap(), AttemptStatus::Running);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(running(leader, leader_start) && running(grandchild, grandchild_start));

    // Contact lost: the lease runs out and everything of the attempt goes.
    drop(renewer);
    let end = wait_end(&p, &req.token).await;
    let message = lease_lost(&end);
    assert!(message.contains("lost contact with Canopy for"), "{message}");
    assert!(!running(leader, leader_start), "the workload outlived its lease");
    assert!(!running(grandchild, grandchild_start), "a grandchild outlived the lease");
    assert_eq!(stdout(&p, &req.token).await, "got TERM\n", "SIGTERM first, with the spec's grace");
    let notes = std::fs::read_to_string(p.attempt_dir(&req.token).join("supervisor.log")).unwrap();
    assert!(notes.contains("sending SIGKILL"), "the grandchild needed the SIGKILL: {notes}");
    assert!(notes.contains("not collecting outputs"), "{notes}");

    // The node's fault, not the workload's: retried elsewhere.
    let c = classify(&end, &["got TERM"]);
    assert_eq!((c.class, c.rule), (FailureClass::Node, "provider.node-lost"), "{c:?}");
}

#[tokio::test]
async fn without_a_held_lease_nothing_starts() {
    let t = tempfile::tempdir().unwrap();
    let (p, lease_file) = provider(t.path(), 1);
    let script = "touch started; sleep 1000";

    // No lease file at all: no lease.
    let req = request(t.path(), 1, script, &["localhost"]);
    p.launch(&req).await.unwrap();
    let message = lease_lost(&wait_end(&p, &req.token).await).to_string();
    assert!(message.contains("there is no lease file"), "{message}");
    assert!(!p.attempt_dir(&req.token).join("work/started").exists());

    // A lease that already ran out.
    lease::renew(&lease_file, Duration::ZERO).unwrap();
    let req = request(t.path(), 2, script, &["localhost"]);
    p.launch(&req).await.unwrap();
    let message = lease_lost(&wait_end(&p, &req.token).await).to_string();
    assert!(message.contains("before the workload started"), "{message}");
    assert!(!p.attempt_dir(&req.token).join("work/started").exists());

    // The lease file vanishing while the workload runs ends it too.
    lease::renew(&lease_file, Duration::from_secs(3600)).unwrap();
    let req = request(t.path(), 3, "echo $$ > leader.pid; exec sleep 1000", &["localhost"]);
    p.launch(&req).await.unwrap();
    let (leader, start) = pid_in(&p, &req.token, "leader.pid").await;
    std::fs::remove_file(&lease_file).unwrap();
    let message = lease_lost(&wait_end(&p, &req.token).await).to_string();
    assert!(message.contains("there is no lease file"), "{message}");
    assert!(!running(leader, start));
}

#[tokio::test]
async fn a_lapsed_lease_stops_every_rank_of_a_gang() {
    let t = tempfile::tempdir().unwrap();
    let (p, lease_file) = provider(t.path(), 2);
    let renewer = Renewer::start(&lease_file);
    let script = "trap 'echo rank $NODE_RANK got TERM; exit 0' TERM; echo $$ > rank$NODE_RANK.pid; \
                  while true; do sleep 0.1; done";
    let req = request(t.path(), 1, script, &["localhost-0", "localhost-1"]);
    p.launch(&req).await.unwrap();
    let (r0, s0) = pid_in(&p, &req.token, "rank0.pid").await;
    let (r1, s1) = pid_in(&p, &req.token, "rank1.pid").await;
    assert_eq!(p.status(&req.token).await.unwrap(), AttemptStatus::Running);
    drop(renewer);
    let end = wait_end(&p, &req.token).await;
    lease_lost(&end);
    assert!(!running(r0, s0) && !running(r1, s1), "a rank outlived the gang's lease");
    let out = stdout(&p, &req.token).await;
    for r in 0..2 {
        // Each rank got SIGTERM once: the lease's stop, not a second one
        // for the rank that ended first.
        assert_eq!(out.matches(&format!("rank {r} got TERM")).count(), 1, "{out}");
    }
}
