//! What the local provider's tests (`local_provider`, `local_outputs`)
//! share: a provider over a temporary root with the real shim, specs and
//! launch requests, and bounded waits for an attempt's end.
#![allow(dead_code)]

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::failure::ProviderEnd;
use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand, procfs};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use canopy::spec::Spec;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const STORE: &str = "t3st";

pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn config(root: &Path) -> LocalConfig {
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let mut cfg = LocalConfig::new(root.join("attempts"), shim);
    cfg.grace = Duration::from_secs(1);
    cfg.containers = ContainerPolicy::Disabled;
    cfg
}

pub fn provider(root: &Path) -> LocalProvider {
    LocalProvider::new(config(root))
}

pub fn spec(v: serde_json::Value) -> Spec {
    let mut v = v;
    v["name"] = json!("test");
    serde_json::from_value(v).unwrap()
}

pub fn cmd(argv: &[&str]) -> Spec {
    spec(json!({ "runtime": { "command": argv } }))
}

pub fn request(root: &Path, workload: u64, spec: Spec) -> LaunchRequest {
    let attempt = AttemptId { workload: WorkloadId(workload), n: 1 };
    LaunchRequest {
        attempt,
        token: attempt.token(STORE, ""),
        spec: Arc::new(spec),
        pool: "host".into(),
        node: "localhost".into(),
        nodes: vec!["localhost".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: root.join("artifacts"),
    }
}

pub async fn wait_end(p: &LocalProvider, token: &str) -> ProviderEnd {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match p.status(token).await.unwrap() {
            AttemptStatus::Ended(end) => return end,
            s if Instant::now() > deadline => {
                panic!("{token} did not end within {PATIENCE:?}; last status {s:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

pub async fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ok() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn log(p: &LocalProvider, token: &str, stream: LogStream) -> String {
    String::from_utf8(p.logs(token, stream, 0, 1 << 20).await.unwrap().data).unwrap()
}

pub async fn run(p: &LocalProvider, req: &LaunchRequest) -> ProviderEnd {
    let ack = p.launch(req).await.unwrap();
    assert!(!ack.adopted);
    wait_end(p, &req.token).await
}

/// Whether this very process (pid and start time) still runs.
pub fn running(pid: i32, start_time: u64) -> bool {
    procfs::stat(pid).is_some_and(|s| s.start_time == start_time && s.state != 'Z')
}

pub fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Every file under `dir`, links not followed.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let ft = std::fs::symlink_metadata(&path).unwrap().file_type();
        if ft.is_dir() {
            walk(&path, out);
        } else if ft.is_file() {
            out.push(path);
        }
    }
}
