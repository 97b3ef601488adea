//! Canopy against a real Ray head through the Jobs API (see
//! `scripts/engines/`): submit, logs, stop, adoption of a duplicate
//! launch, a job Ray cannot fit, classed capacity and moved to Slurm, and
//! gangs over its two nodes (the head and a second raylet).
//! Skips visibly without the engines; fails under `CANOPY_ENGINES=require`.

mod engines_support;

use canopy::engine::model::{AttemptId, WorkloadId, WorkloadState};
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::providers::ray::{RayConfig, RayProvider};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use engines_support::*;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(150);

fn adapter(e: &Engines) -> RayProvider {
    let entry = canopy::config::parse(&ray_toml(e, "")).unwrap().ray.remove(0);
    RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap()
}

async fn status_until(
    p: &RayProvider,
    token: &str,
    mut ok: impl FnMut(&AttemptStatus) -> bool,
) -> AttemptStatus {
    let deadline = Instant::now() + LONG;
    loop {
        let s = p.status(token).await.unwrap();
        if ok(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "{token}: last status {s:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn ray_submit_logs_duplicate_and_stop() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("ray_submit_logs_duplicate_and_stop", "ray").await else { return };
    let t = tempfile::tempdir().unwrap();
    let p = adapter(&e);
    let inv = p.inventory().await.unwrap();
    let pool = inv.pools.iter().find(|p| p.def.name == "h100").expect("pool h100 from accelerator_type:H100");
    assert_eq!(pool.def.shape.gpus_per_node, 4);
    let token = format!("canopy-raytest{}-w1-a1", std::process::id());
    let s = spec(json!({
        "name": "ray",
        "runtime": { "command": ["sh", "-c", "echo \"gpus=$CUDA_VISIBLE_DEVICES $0\"; sleep 300", "it's"] },
        "resources": { "gpus": 1 },
    }));
    let req = LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(1), n: 1 },
        token: token.clone(),
        spec: Arc::new(s),
        pool: "h100".into(),
        node: "ray-127.0.0.1".into(),
        nodes: vec!["ray-127.0.0.1".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: t.path().into(),
    };
    let first = p.launch(&req).await.unwrap();
    let again = p.launch(&req).await.unwrap();
    assert!(!first.adopted && again.adopted, "duplicate launch adopted: {first:?} {again:?}");
    // The same token for another spec is refused, not adopted.
    let mut other = req.clone();
    other.spec = Arc::new(spec(json!({ "name": "other", "runtime": { "command": ["true"] } })));
    match p.launch(&other).await {
        Err(canopy::providers::LaunchError::Rejected(m)) => assert!(m.contains("another spec"), "{m}"),
        r => panic!("another spec's job was adopted: {r:?}"),
    }
    status_until(&p, &token, |s| *s == AttemptStatus::Running).await;
    let deadline = Instant::now() + LONG;
    let line = regex::Regex::new(r"gpus=\d it's\n").unwrap();
    let logs = loop {
        let chunk = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
        let text = String::from_utf8_lossy(&chunk.data).into_owned();
        if line.is_match(&text) {
            break text;
        }
        assert!(Instant::now() < deadline, "no output in Ray's logs: {text:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let at = logs.find("gpus=").unwrap() as u64;
    let tail = p.logs(&token, LogStream::Stdout, at, 1 << 20).await.unwrap();
    assert!(String::from_utf8_lossy(&tail.data).starts_with("gpus="));
    assert!(p.list_owned("raytest").await.unwrap().is_empty(), "other stores' jobs are not listed");
    p.terminate(&token).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    assert_eq!(end, AttemptStatus::Ended(ProviderEnd::Cancelled));
}

/// Holds Ray's GPUs outside Canopy; stops its jobs on drop.
struct Hog(String, Vec<String>);
impl Drop for Hog {
    fn drop(&mut self) {
        for id in &self.1 {
            let _ = std::process::Command::new("curl")
                .args(["-s", "-X", "POST", &format!("{}/api/jobs/{}/stop", self.0, id)])
                .output();
        }
    }
}

/// Takes every GPU of both Ray nodes (4 each) outside Canopy, running.
async fn hog_all_gpus(e: &Engines, name: &str) -> Hog {
    let client = reqwest::Client::new();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let ids: Vec<String> =
        (1..=2).map(|i| format!("hog-{}-{nanos}-{name}-{i}", std::process::id())).collect();
    let hog = Hog(e.ray_url.clone(), ids.clone());
    for id in &ids {
        let body = json!({ "entrypoint": "sleep 600", "submission_id": id, "entrypoint_num_gpus": 4 });
        let resp = client.post(format!("{}/api/jobs/", e.ray_url)).json(&body).send().await.unwrap();
        assert!(resp.status().is_success(), "{:?}", resp.text().await);
    }
    let deadline = Instant::now() + LONG;
    for id in &ids {
        loop {
            let j: serde_json::Value = client
                .get(format!("{}/api/jobs/{id}", e.ray_url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if j["status"] == "RUNNING" {
                break;
            }
            assert!(Instant::now() < deadline, "the hog did not start: {j}");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    hog
}

#[tokio::test(flavor = "multi_thread")]
async fn unfittable_ray_job_is_capacity_and_moves_to_slurm() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("unfittable_ray_job_is_capacity_and_moves_to_slurm", "both").await else { return };
    let _hog = hog_all_gpus(&e, "moves").await;
    let t = tempfile::tempdir().unwrap();
    let toml = format!(
        "{}{}",
        slurm_toml(&e, "[slurm.partitions.debug]\nprice_per_hour = 40.0\n"),
        ray_toml(&e, "startup_limit = \"4s\"\ncapabilities = [\"ray-jobs\"]\n")
    );
    let r = start(t.path(), &toml).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let s = spec(json!({
        "name": "moves",
        "runtime": { "command": ["sh", "-c", "echo moved"] },
        "resources": { "gpus": 2, "accelerator": { "family": ["hopper"] }, "memory_gb": 0.5 },
        "preferences": { "capabilities": ["ray-jobs"] },
    }));
    let id = submit(&r, s).await;
    let (w, a) = wait(t.path(), id, LONG, "the move to Slurm", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "{a:#?}");
    assert_eq!(a[0].pool, "ray/h100");
    assert_eq!(a[0].class, Some(FailureClass::Capacity), "{a:#?}");
    assert_eq!(a[1].pool, "slurm/debug");
    r.handle.shutdown();
}

/// ray-project/ray#58353: a job given up on while pending (its stop is a
/// no-op) may start once Ray frees GPUs. The adapter keeps stopping it, so
/// it is stopped within moments of starting instead of running to the end.
#[tokio::test(flavor = "multi_thread")]
async fn abandoned_pending_ray_job_is_stopped_when_it_starts() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("abandoned_pending_ray_job_is_stopped_when_it_starts", "ray").await else { return };
    let client = reqwest::Client::new();
    let hog_guard = hog_all_gpus(&e, "abandon").await;
    let job = |id: String| {
        let (client, url) = (client.clone(), e.ray_url.clone());
        async move {
            let j: serde_json::Value =
                client.get(format!("{url}/api/jobs/{id}")).send().await.unwrap().json().await.unwrap();
            j["status"].as_str().unwrap_or_default().to_string()
        }
    };
    let entry = canopy::config::parse(&ray_toml(&e, "startup_limit = \"2s\"\n")).unwrap().ray.remove(0);
    let p = RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap();
    let t = tempfile::tempdir().unwrap();
    let token = format!("canopy-raytest{}-w2-a1", std::process::id());
    let req = LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(2), n: 1 },
        token: token.clone(),
        spec: Arc::new(spec(json!({
            "name": "abandoned",
            "runtime": { "command": ["sh", "-c", "sleep 20; echo ran-$((40+2))"] },
            "resources": { "gpus": 1 },
        }))),
        pool: "h100".into(),
        node: "ray-127.0.0.1".into(),
        nodes: vec!["ray-127.0.0.1".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: t.path().into(),
    };
    p.inventory().await.unwrap();
    p.launch(&req).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    assert!(
        matches!(&end, AttemptStatus::Ended(ProviderEnd::LaunchRejected { capacity: true, .. })),
        "{end:?}"
    );
    assert_eq!(p.abandoned(), vec![token.clone()]);
    drop(hog_guard); // frees the GPUs: Ray now starts the abandoned job
    let deadline = Instant::now() + LONG;
    let last = loop {
        let s = job(token.clone()).await;
        if s == "STOPPED" || s == "SUCCEEDED" || s == "FAILED" {
            break s;
        }
        assert!(Instant::now() < deadline, "{token} still {s}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_ne!(last, "SUCCEEDED", "the abandoned job ran to its end untracked");
    let logs = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
    assert!(!String::from_utf8_lossy(&logs.data).contains("ran-42"));
    // Once Ray reports it ended, the adapter forgets it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !p.abandoned().is_empty() {
        p.list_owned("raytest-none").await.unwrap();
        assert!(Instant::now() < deadline, "still abandoned: {:?}", p.abandoned());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A launch request for a one-node job on the head node.
fn one_node(token: &str, n: u32, command: &str, gpus: u32, dir: &std::path::Path) -> LaunchRequest {
    LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(9), n },
        token: token.to_string(),
        spec: Arc::new(spec(json!({
            "name": "one-node",
            "runtime": { "command": ["sh", "-c", command] },
            "resources": { "gpus": gpus, "cpu_cores": 0.1, "memory_gb": 0.1 },
        }))),
        pool: "h100".into(),
        node: "ray-127.0.0.1".into(),
        nodes: vec!["ray-127.0.0.1".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: dir.into(),
    }
}

/// Issue 23 item 17: Ray takes seconds to start even a trivial job (its
/// supervisor actor, its runtime env) while nothing waits for capacity.
/// Past a startup limit shorter than that, such jobs are progressing: each
/// runs to its end, none is given up as a capacity miss or abandoned.
#[tokio::test(flavor = "multi_thread")]
async fn ray_jobs_ray_is_still_starting_are_not_given_up_at_the_startup_limit() {
    let _g = SERIAL.lock().await;
    let Some(e) =
        engines("ray_jobs_ray_is_still_starting_are_not_given_up_at_the_startup_limit", "ray").await
    else {
        return;
    };
    let entry = canopy::config::parse(&ray_toml(&e, "startup_limit = \"1s\"\n")).unwrap().ray.remove(0);
    let p = RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap();
    p.inventory().await.unwrap();
    let t = tempfile::tempdir().unwrap();
    let tokens: Vec<String> =
        (1..=4).map(|n| format!("canopy-raystart{}-w9-a{n}", std::process::id())).collect();
    let launched = Instant::now();
    for (n, token) in tokens.iter().enumerate() {
        p.launch(&one_node(token, n as u32 + 1, "echo started", 0, t.path())).await.unwrap();
    }
    let mut pending_past_the_limit = 0;
    for token in &tokens {
        let end = status_until(&p, token, |s| {
            if *s == AttemptStatus::Pending && launched.elapsed() > Duration::from_secs(1) {
                pending_past_the_limit += 1;
            }
            matches!(s, AttemptStatus::Ended(_))
        })
        .await;
        assert_eq!(end, AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }), "{token}");
    }
    assert!(p.abandoned().is_empty(), "given up on: {:?}", p.abandoned());
    eprintln!("polls that found a job pending past the 1 s startup limit: {pending_past_the_limit}");
}

/// Issue 23 item 17: a pending attempt lost with its Ray head is reported
/// gone as soon as the restarted head answers that it has no such job (a
/// running one always was), not when the launch's grace for Ray to list a
/// new job runs out.
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_ray_job_lost_with_its_head_is_gone_as_soon_as_ray_answers() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_pending_ray_job_lost_with_its_head_is_gone_as_soon_as_ray_answers", "ray").await
    else {
        return;
    };
    let hog = hog_all_gpus(&e, "lost-pending").await;
    let entry = canopy::config::parse(&ray_toml(&e, "startup_limit = \"10m\"\n")).unwrap().ray.remove(0);
    let p = RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap();
    p.inventory().await.unwrap();
    let t = tempfile::tempdir().unwrap();
    let token = format!("canopy-raylost{}-w9-a1", std::process::id());
    p.launch(&one_node(&token, 1, "echo ran", 1, t.path())).await.unwrap();
    let client = reqwest::Client::new();
    let job_status = async |token: &str| -> Option<u16> {
        let r = client.get(format!("{}/api/jobs/{token}", e.ray_url)).send().await.ok()?;
        Some(r.status().as_u16())
    };
    assert_eq!(job_status(&token).await, Some(200), "Ray lists the job");
    assert_eq!(p.status(&token).await.unwrap(), AttemptStatus::Pending, "waiting for the hog's GPUs");

    let back = HeadBack;
    let stop = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/engines/stop.sh");
    let out = std::process::Command::new("bash").args([stop, "ray"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    drop(back); // the head starts again, without its jobs
    drop(hog);
    let deadline = Instant::now() + LONG;
    while job_status(&token).await != Some(404) {
        assert!(Instant::now() < deadline, "the restarted head never answered for {token}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(p.status(&token).await.unwrap(), AttemptStatus::NotFound, "Ray no longer knows the job");
}

/// A secret reaches the Ray job's environment and nothing else: not
/// runtime_env, the entrypoint, Ray's job listing or any of its logs.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_reach_the_ray_job_and_no_ray_surface() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("secrets_reach_the_ray_job_and_no_ray_surface", "ray").await else { return };
    let p = adapter(&e);
    let t = tempfile::tempdir().unwrap();
    let (value, sha) = canary();
    let token = format!("canopy-raysecret{}-w3-a1", std::process::id());
    let req = LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(3), n: 1 },
        token: token.clone(),
        spec: Arc::new(spec(json!({
            "name": "secret",
            "runtime": { "command": ["sh", "-c", "printf %s \"$HF_TOKEN\" | sha256sum"], "secrets": ["HF_TOKEN"] },
        }))),
        pool: "cpu".into(),
        node: "ray-127.0.0.1".into(),
        nodes: vec!["ray-127.0.0.1".into()],
        checkpoint_dir: None,
        secrets: vec![("HF_TOKEN".into(), canopy::providers::SecretValue::new(value.clone()))],
        artifact_dir: t.path().into(),
    };
    p.inventory().await.unwrap();
    p.launch(&req).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    assert_eq!(end, AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }));
    let logs = p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
    assert!(String::from_utf8_lossy(&logs.data).contains(&sha), "the job did not see its secret");
    let listing = reqwest::get(format!("{}/api/jobs/", e.ray_url)).await.unwrap().text().await.unwrap();
    assert!(!listing.contains(&value), "Ray's job listing carries the secret");
    let detail = reqwest::get(format!("{}/api/jobs/{token}", e.ray_url)).await.unwrap().text().await.unwrap();
    assert!(!detail.contains(&value), "the job's details carry the secret");
    for dir in [e.dir.join("raytmp"), e.jobs_dir.clone()] {
        let hits = files_containing(&dir, value.as_bytes());
        assert!(hits.is_empty(), "the secret is written in {hits:?}");
    }
}

/// Brings the Ray head back when dropped (the test stops it).
struct HeadBack;

impl Drop for HeadBack {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/engines/start.sh");
        let _ = std::process::Command::new("bash").args([script, "ray"]).output();
    }
}

/// A restarted Ray head forgets its jobs. The attempt it lost is the
/// provider's loss: no node is charged, the only Ray node is not
/// quarantined, and the work runs again there as soon as Ray is back.
#[tokio::test(flavor = "multi_thread")]
async fn a_ray_head_restart_charges_no_node() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_ray_head_restart_charges_no_node", "ray").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ray_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let s = spec(json!({
        "name": "outlives-the-head",
        // The first attempt outlasts Ray's shutdown; the rerun is quick.
        "runtime": { "command": ["sh", "-c", "case $CANOPY_ATTEMPT_TOKEN in *-a1-*) sleep 120;; esac; echo done"] },
        "resources": { "gpus": 1, "memory_gb": 0.1 },
        "retry": { "backoff": "1s", "backoff_max": "2s" },
    }));
    let id = submit(&r, s).await;
    wait(t.path(), id, LONG, "running on Ray", |w, _| w.state == WorkloadState::Running).await;

    let back = HeadBack;
    let stop = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/engines/stop.sh");
    let out = std::process::Command::new("bash").args([stop, "ray"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stopped = String::from_utf8_lossy(&out.stdout).into_owned();
    let deadline = Instant::now() + LONG;
    loop {
        let events = journal(t.path()).events(id).unwrap();
        if events.iter().any(|e| e.message.contains("status poll failed")) {
            break;
        }
        let said: Vec<&str> = events.iter().map(|e| e.message.as_str()).collect();
        assert!(Instant::now() < deadline, "the engine never noticed Ray was down ({stopped}): {said:#?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    drop(back);

    let (w, a) = wait(t.path(), id, LONG, "the rerun after the restart", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "{a:#?}");
    assert_eq!(a[0].class, Some(FailureClass::Provider), "{a:#?}");
    assert_eq!(a[1].pool, a[0].pool, "ran again on Ray: {a:#?}");
    let status = r.handle.status().borrow().clone().expect("a fleet status");
    let node = status.health.node(&a[0].node);
    assert!(!node.quarantined, "{} was quarantined for Ray's restart: {node:?}", a[0].node);
    r.handle.shutdown();
}

/// The two Ray nodes (head and second raylet) by Canopy's names, sorted.
async fn ray_nodes(p: &RayProvider) -> Vec<String> {
    let inv = p.inventory().await.unwrap();
    let mut nodes: Vec<String> = inv.pools.iter().flat_map(|p| &p.nodes).map(|n| n.name.clone()).collect();
    nodes.sort();
    nodes
}

fn ray_gang(token: &str, script: &str, nodes: &[String], dir: &std::path::Path) -> LaunchRequest {
    LaunchRequest {
        attempt: AttemptId { workload: WorkloadId(4), n: 1 },
        token: token.into(),
        spec: Arc::new(spec(json!({
            "name": "gang",
            "runtime": { "command": ["sh", "-c", script] },
            "resources": { "nodes": nodes.len(), "gpus": 1, "cpu_cores": 1 },
        }))),
        pool: "h100".into(),
        node: nodes[0].clone(),
        nodes: nodes.to_vec(),
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: dir.into(),
    }
}

/// A gang of two on Ray: one launcher per node (STRICT_SPREAD over the
/// head and the second raylet, each where Canopy placed it), both told
/// the same rendezvous, rank 0's node address as MASTER_ADDR.
#[tokio::test(flavor = "multi_thread")]
async fn a_ray_gang_spreads_one_launcher_per_node() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_ray_gang_spreads_one_launcher_per_node", "ray").await else { return };
    let p = adapter(&e);
    let nodes = ray_nodes(&p).await;
    assert_eq!(nodes, vec!["ray-127.0.0.1", "ray-127.0.0.2"], "Ray's inventory lists both nodes");
    let t = tempfile::tempdir().unwrap();
    let (value, sha) = canary();
    let token = format!("canopy-raygang{}-w4-a1", std::process::id());
    let script = "printf %s \"$HF_TOKEN\" | sha256sum | sed \"s/ .*//; s/^/rank $NODE_RANK saw /\"; \
                  echo \"rank=$NODE_RANK of=$NNODES name=$CANOPY_NODE_NAME ip=$CANOPY_RAY_NODE_IP id=$CANOPY_RAY_NODE_ID \
                  master=$MASTER_ADDR:$MASTER_PORT gpus=$CUDA_VISIBLE_DEVICES\"";
    // Rank 0 on the second raylet: rank order is Canopy's.
    let order = vec![nodes[1].clone(), nodes[0].clone()];
    let mut req = ray_gang(&token, script, &order, t.path());
    req.spec = Arc::new(spec(json!({
        "name": "gang",
        "runtime": { "command": ["sh", "-c", script], "secrets": ["HF_TOKEN"] },
        "resources": { "nodes": 2, "gpus": 1, "cpu_cores": 1 },
    })));
    req.secrets = vec![("HF_TOKEN".into(), canopy::providers::SecretValue::new(value.clone()))];
    p.launch(&req).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    let logs = String::from_utf8_lossy(&p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data)
        .into_owned();
    assert_eq!(end, AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }), "{logs}");
    let line =
        regex::Regex::new(r"rank=(\d) of=2 name=(\S+) ip=(\S+) id=(\S+) master=(\S+) gpus=\d").unwrap();
    let mut ranks: Vec<Vec<String>> =
        line.captures_iter(&logs).map(|c| (1..=5).map(|i| c[i].to_string()).collect()).collect();
    ranks.sort();
    assert_eq!(ranks.len(), 2, "one launcher per node: {logs}");
    assert_eq!(ranks[0][..3], ["0".to_string(), "ray-127.0.0.2".into(), "127.0.0.2".into()], "{logs}");
    assert_eq!(ranks[1][..3], ["1".to_string(), "ray-127.0.0.1".into(), "127.0.0.1".into()], "{logs}");
    assert_ne!(ranks[0][3], ranks[1][3], "two Ray nodes: {logs}");
    assert_eq!(ranks[0][4], ranks[1][4], "one rendezvous: {logs}");
    assert!(ranks[0][4].starts_with("127.0.0.2:"), "rank 0's node is MASTER_ADDR: {logs}");
    for rank in 0..2 {
        assert!(
            logs.contains(&format!("rank {rank} saw {sha}")),
            "rank {rank} did not see its secret: {logs}"
        );
    }
    let detail = reqwest::get(format!("{}/api/jobs/{token}", e.ray_url)).await.unwrap().text().await.unwrap();
    assert!(!detail.contains(&value), "the job's details carry the secret");
    for dir in [e.dir.join("raytmp"), e.jobs_dir.clone()] {
        let hits = files_containing(&dir, value.as_bytes());
        assert!(hits.is_empty(), "the secret is written in {hits:?}");
    }
}

/// One rank failing stops the other, and the end names that rank and its
/// node.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_ray_rank_stops_the_gang_and_is_named() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_failing_ray_rank_stops_the_gang_and_is_named", "ray").await else { return };
    let p = adapter(&e);
    let nodes = ray_nodes(&p).await;
    let t = tempfile::tempdir().unwrap();
    let token = format!("canopy-raygangfail{}-w4-a1", std::process::id());
    let script = "echo \"rank $NODE_RANK up\"; if [ \"$NODE_RANK\" = 1 ]; then sleep 2; exit 3; fi; sleep 120; echo survived";
    p.launch(&ray_gang(&token, script, &nodes, t.path())).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    let logs = String::from_utf8_lossy(&p.logs(&token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data)
        .into_owned();
    assert_eq!(
        end,
        AttemptStatus::Ended(ProviderEnd::Rank {
            rank: 1,
            node: nodes[1].clone(),
            end: Box::new(ProviderEnd::Exited { code: 3 })
        }),
        "{logs}"
    );
    assert!(logs.contains("rank 0 up") && logs.contains("rank 1 up"), "{logs}");
    assert!(!logs.contains("survived"), "rank 0 was not stopped: {logs}");
}

/// A gang Ray cannot place (three nodes, two in the cluster) runs nothing
/// and ends as a capacity refusal once the startup limit has passed.
#[tokio::test(flavor = "multi_thread")]
async fn an_unplaceable_ray_gang_runs_nothing_and_is_capacity() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("an_unplaceable_ray_gang_runs_nothing_and_is_capacity", "ray").await else {
        return;
    };
    let entry = canopy::config::parse(&ray_toml(&e, "startup_limit = \"3s\"\n")).unwrap().ray.remove(0);
    let p = RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap();
    let mut nodes = ray_nodes(&p).await;
    nodes.push("ray-127.0.0.3".into());
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("ran");
    let token = format!("canopy-raygangunplaced{}-w4-a1", std::process::id());
    let script = format!("touch {}", marker.display());
    p.launch(&ray_gang(&token, &script, &nodes, t.path())).await.unwrap();
    let end = status_until(&p, &token, |s| matches!(s, AttemptStatus::Ended(_))).await;
    assert!(
        matches!(&end, AttemptStatus::Ended(ProviderEnd::LaunchRejected { capacity: true, message }) if message.contains("could not place")),
        "{end:?}"
    );
    assert!(!marker.exists(), "a rank ran although the gang was not placed");
}

/// A gang of two through the whole engine onto Ray's two nodes (the head
/// and the second raylet): placed on both, one launcher per node with its
/// rank and the same rendezvous.
#[tokio::test(flavor = "multi_thread")]
async fn a_two_node_gang_runs_through_the_engine_on_ray() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("a_two_node_gang_runs_through_the_engine_on_ray", "ray").await else { return };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ray_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let s = spec(json!({
        "name": "ray-gang",
        "runtime": { "command": ["sh", "-c", "echo \"rank=$NODE_RANK of $NNODES node=$CANOPY_NODE_NAME master=$MASTER_ADDR:$MASTER_PORT\""] },
        "resources": { "nodes": 2, "gpus": 1, "cpu_cores": 1, "memory_gb": 0.1 },
        "constraints": { "providers": ["ray"] },
    }));
    let id = submit(&r, s).await;
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].nodes.len(), 2, "{a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    let text: String = logs.iter().map(|(_, s)| s.as_str()).collect();
    let line = regex::Regex::new(r"rank=(\d) of 2 node=(\S+) master=(\S+)").unwrap();
    let mut seen: Vec<(String, String, String)> =
        line.captures_iter(&text).map(|c| (c[1].to_string(), c[2].to_string(), c[3].to_string())).collect();
    seen.sort();
    assert_eq!(seen.len(), 2, "{text}");
    assert_eq!((seen[0].0.as_str(), seen[1].0.as_str()), ("0", "1"), "{text}");
    assert_eq!([seen[0].1.clone(), seen[1].1.clone()].to_vec(), a[0].nodes, "{text}");
    assert_eq!(seen[0].2, seen[1].2, "one rendezvous for both: {seen:?}");
    r.handle.shutdown();
}

/// Ray runs no container images here (`runtime_env.image_uri` needs an
/// image carrying the cluster's own Ray and Python): an image spec only
/// Ray could take is refused at submit with the reason and what to do.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_spec_for_ray_is_refused_at_submit_with_the_reason() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("an_image_spec_for_ray_is_refused_at_submit_with_the_reason", "ray").await else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ray_toml(&e, "")).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    wait_for_pools(&r, "ray").await;
    let m = refused_at_submit(&r, image_spec("ray-image", "ray")).await;
    assert!(m.contains("does not run container images"), "{m}");
    assert!(m.contains("runtime.image needs a pool that runs container images"), "{m}");
    r.handle.shutdown();
}
