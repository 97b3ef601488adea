//! Containers on the local provider against a real podman (issue 29): an
//! output artifact and its SHA-256, a cancel whose SIGTERM reaches the
//! container's process within `stop_grace`, an OOM kill under the spec's
//! memory, a missing image, and a container found again by a new provider
//! (an engine restarted after `kill -9`) rather than started twice.
//!
//! Every test first checks that a container can run here
//! (`podman run --rm IMAGE true`) and skips visibly when it cannot, except
//! with `CANOPY_ENGINES=require` (CI, after `scripts/containers/setup.sh`),
//! where it fails saying what is missing. Every wait is a bounded poll.

use canopy::engine::classify::classify;
use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use canopy::spec::Spec;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const STORE: &str = "c0nt";
const PATIENCE: Duration = Duration::from_secs(40);

fn image() -> String {
    std::env::var("CANOPY_TEST_IMAGE").unwrap_or_else(|_| "localhost/canopy-test:latest".into())
}

/// A provider that runs containers, or `None` (the skip already said why).
async fn provider(root: &Path, test: &str) -> Option<LocalProvider> {
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let mut cfg = LocalConfig::new(root.join("attempts"), shim);
    cfg.grace = Duration::from_secs(1);
    cfg.containers = ContainerPolicy::LocalImagesOnly;
    let p = LocalProvider::new(cfg);
    let usable = match p.container_engine().await {
        None => Err("no podman or docker on PATH".to_string()),
        Some(engine) => container_runs(&engine.program, &image()).await,
    };
    match usable {
        Ok(()) => Some(p),
        Err(why) => {
            let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require")
                || std::env::var_os("CANOPY_TEST_REQUIRE_CONTAINERS").is_some();
            assert!(
                !require,
                "{test}: containers are required here but {why}; run scripts/containers/setup.sh"
            );
            // Past the harness's capture, so a skip shows in every run.
            let _ =
                writeln!(std::io::stderr(), "SKIPPED {test}: {why} (scripts/containers/setup.sh sets it up)");
            None
        }
    }
}

/// Whether `program run --rm IMAGE true` works here, or why not.
async fn container_runs(program: &Path, image: &str) -> Result<(), String> {
    const PROBE: Duration = Duration::from_secs(60);
    let probe = tokio::process::Command::new(program)
        .args(["run", "--rm", "--pull=never", image, "true"])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let shown = format!("`{} run --rm {image} true`", program.display());
    match tokio::time::timeout(PROBE, probe).await {
        Err(_) => Err(format!("{shown} did not finish within {}s", PROBE.as_secs())),
        Ok(Err(e)) => Err(format!("{shown} could not start: {e}")),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            Err(format!("{shown} failed ({}): {}", out.status, last.trim()))
        }
    }
}

fn spec(v: serde_json::Value) -> Spec {
    let mut v = v;
    v["name"] = json!("test");
    serde_json::from_value(v).unwrap()
}

fn request(root: &Path, workload: u64, spec: Spec) -> LaunchRequest {
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

async fn wait_end(p: &LocalProvider, token: &str) -> ProviderEnd {
    let deadline = Instant::now() + PATIENCE;
    loop {
        match p.status(token).await.unwrap() {
            AttemptStatus::Ended(end) => return end,
            s if Instant::now() > deadline => panic!("{token} did not end within {PATIENCE:?}; last {s:?}"),
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn wait_file(path: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        if Instant::now() > deadline {
            let attempt = path.ancestors().nth(2).unwrap();
            let stderr = std::fs::read_to_string(attempt.join("stderr.log")).unwrap_or_default();
            let listing: Vec<_> =
                std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.path()).collect();
            let launch = std::fs::read_to_string(attempt.join("launch.json")).unwrap_or_default();
            panic!(
                "{} did not appear within {PATIENCE:?}; stderr: {stderr}; {listing:?} {launch}",
                path.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn log(p: &LocalProvider, token: &str, stream: LogStream) -> String {
    String::from_utf8(p.logs(token, stream, 0, 1 << 20).await.unwrap().data).unwrap()
}

/// Containers carrying this token's label, running or not.
fn containers_with_label(token: &str) -> usize {
    let out = std::process::Command::new("podman")
        .args(["ps", "--all", "--quiet", "--filter", &format!("label=canopy.token={token}")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count()
}

/// Removes the test's container however the test ends (a failed
/// assertion must not leave it running).
struct Reap(String);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = std::process::Command::new("podman")
            .args(["rm", "--force", "--time", "0", &self.0])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The end as the engine classifies it, with no log lines to read.
fn class_of(end: &ProviderEnd) -> (FailureClass, &'static str) {
    let c = classify(end, &[]);
    (c.class, c.rule)
}

#[tokio::test]
async fn a_container_streams_logs_and_its_output_is_collected_with_its_sha256() {
    let t = tempfile::tempdir().unwrap();
    let Some(p) = provider(t.path(), "a_container_streams_logs_and_its_output_is_collected").await else {
        return;
    };
    let s = spec(json!({
        "runtime": { "image": image(), "command": ["sh", "-c",
            "echo hi > /outputs/x.txt; echo out $CANOPY_ATTEMPT; echo err >&2"] },
        "outputs": [{ "name": "x", "path": "/outputs/x.txt", "required": true }],
    }));
    let req = request(t.path(), 1, s.clone());
    p.launch(&req).await.unwrap();
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(log(&p, &req.token, LogStream::Stdout).await, "out w-1.1\n");
    assert_eq!(log(&p, &req.token, LogStream::Stderr).await, "err\n");
    let arts = p.outputs(&req.token, &s, &t.path().join("store")).await.unwrap().artifacts;
    assert_eq!(arts.len(), 1);
    assert_eq!(arts[0].sha256, hex::encode(Sha256::digest(b"hi\n")));
    // The supervisor removed the ended container.
    assert_eq!(containers_with_label(&req.token), 0);
}

#[tokio::test]
async fn a_cancel_sends_sigterm_to_the_containers_process_within_stop_grace() {
    let t = tempfile::tempdir().unwrap();
    let Some(p) = provider(t.path(), "a_cancel_sends_sigterm_to_the_containers_process").await else {
        return;
    };
    // The grace is long enough that only a SIGTERM that reached the shell
    // (not the SIGKILL after it) can write the mark.
    let s = spec(json!({
        "runtime": { "image": image(), "stop_grace": "20s", "command": ["sh", "-c",
            "trap 'echo term > $CANOPY_OUTPUT_DIR/term; exit 0' TERM; echo up > $CANOPY_OUTPUT_DIR/up; \
             while :; do sleep 0.2; done"] },
    }));
    let req = request(t.path(), 2, s);
    let _reap = Reap(req.token.clone());
    p.launch(&req).await.unwrap();
    let outputs = p.attempt_dir(&req.token).join("outputs");
    wait_file(&outputs.join("up")).await;
    p.terminate(&req.token).await.unwrap();
    let end = wait_end(&p, &req.token).await;
    assert_eq!(std::fs::read_to_string(outputs.join("term")).unwrap(), "term\n", "{end:?}");
    assert_eq!(end, ProviderEnd::Exited { code: 0 });
    assert_eq!(containers_with_label(&req.token), 0);
}

#[tokio::test]
async fn a_container_over_its_memory_is_classified_cpu_oom() {
    let t = tempfile::tempdir().unwrap();
    let Some(p) = provider(t.path(), "a_container_over_its_memory_is_classified_cpu_oom").await else {
        return;
    };
    // 64 MB, and a shell that holds 300 MB in a variable.
    let s = spec(json!({
        "resources": { "memory_gb": 0.064 },
        "runtime": { "image": image(), "command": ["sh", "-c",
            "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived"] },
    }));
    let req = request(t.path(), 3, s);
    let _reap = Reap(req.token.clone());
    p.launch(&req).await.unwrap();
    let end = wait_end(&p, &req.token).await;
    assert_eq!(end, ProviderEnd::OutOfMemory, "stdout: {}", log(&p, &req.token, LogStream::Stdout).await);
    assert_eq!(class_of(&end), (FailureClass::CpuOom, "provider.oom"));
    assert_eq!(containers_with_label(&req.token), 0);
}

#[tokio::test]
async fn a_missing_image_is_class_image_and_final() {
    let t = tempfile::tempdir().unwrap();
    let Some(p) = provider(t.path(), "a_missing_image_is_class_image_and_final").await else {
        return;
    };
    let s = spec(json!({ "runtime": { "image": "localhost/canopy-no-such-image:1", "command": ["true"] } }));
    let req = request(t.path(), 4, s);
    p.launch(&req).await.unwrap();
    let end = wait_end(&p, &req.token).await;
    let ProviderEnd::BootFailed { message } = &end else { panic!("expected a boot failure, got {end:?}") };
    assert!(message.contains("canopy-no-such-image"), "{message}");
    assert_eq!(class_of(&end), (FailureClass::Image, "provider.boot-image"));
    // Final: the retry policy gives it no second attempt anywhere.
    let policy = canopy::spec::RetryPolicy::default();
    assert!(!FailureClass::Image.counts_against_node());
    let d = canopy::engine::retry::decide(&retry_input(&policy));
    assert!(!d.retry, "{d:?}");
}

/// A first failure classed `image`, under the default policy.
fn retry_input(policy: &canopy::spec::RetryPolicy) -> canopy::engine::retry::RetryInput<'_> {
    canopy::engine::retry::RetryInput {
        class: FailureClass::Image,
        policy,
        counted_attempts: 1,
        infra_failures: 0,
        app_failures: 0,
        failures_in_pool: 0,
        gpu_memory_gb: 0.0,
        fleet_max_gpu_memory_gb: 0.0,
        evicted: false,
        free: false,
    }
}

#[tokio::test]
async fn a_container_outlives_its_provider_and_is_adopted_not_run_twice() {
    let t = tempfile::tempdir().unwrap();
    let Some(first) = provider(t.path(), "a_container_outlives_its_provider_and_is_adopted").await else {
        return;
    };
    let s = spec(json!({
        "runtime": { "image": image(), "command": ["sh", "-c",
            "echo start >> $CANOPY_OUTPUT_DIR/starts; while [ ! -e $CANOPY_OUTPUT_DIR/go ]; do sleep 0.2; done; \
             echo done"] },
    }));
    let req = request(t.path(), 5, s);
    let _reap = Reap(req.token.clone());
    assert!(!first.launch(&req).await.unwrap().adopted);
    let outputs = first.attempt_dir(&req.token).join("outputs");
    wait_file(&outputs.join("starts")).await;
    // The engine is gone (as after kill -9); a new one over the same
    // attempts directory launches the same attempt again.
    drop(first);
    let second = provider(t.path(), "adopted").await.unwrap();
    assert_eq!(second.status(&req.token).await.unwrap(), AttemptStatus::Running);
    assert!(second.launch(&req).await.unwrap().adopted);
    assert_eq!(containers_with_label(&req.token), 1);
    std::fs::write(outputs.join("go"), "").unwrap();
    assert_eq!(wait_end(&second, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(std::fs::read_to_string(outputs.join("starts")).unwrap(), "start\n", "started once");
    assert_eq!(log(&second, &req.token, LogStream::Stdout).await, "done\n");
}
