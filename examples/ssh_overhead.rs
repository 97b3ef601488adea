//! What the `ssh` provider costs per workload on an owner's host, against
//! running the same command with plain `ssh host cmd`, on the test sshd of
//! `scripts/engines/sshd.sh` (host a: canopy-owner-a@127.0.0.1:2222).
//!
//! Measured, N times each (medians and the slowest reported):
//! - **first contact**: opening the ControlMaster and uploading Canopy
//!   (once per host per build);
//! - **launch to running**: `launch()` until `status()` says running (a
//!   `sleep 1` workload), polled every 10 ms;
//! - **whole workload through the provider**: launch, status until it
//!   ended, its stdout, and removing the attempt from the host, for
//!   `echo hi`;
//! - **plain ssh**: `ssh … host echo hi`, a new connection each time, and
//!   the same over an open ControlMaster (`ssh -S`).
//!
//! `cargo run --release --example ssh_overhead -- [N]` (uploads the
//! example's own binary's sibling `canopy`: build it first with
//! `cargo build --release`; CANOPY_BIN overrides).

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::providers::ssh::transport::Target;
use canopy::providers::ssh::{HostConfig, PoolConfig, SshConfig, SshProvider};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn engines() -> PathBuf {
    PathBuf::from(std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into()))
}

fn target() -> Target {
    let dir = engines().join("ssh");
    Target {
        name: "owner-a".into(),
        address: "127.0.0.1".into(),
        port: 2222,
        user: "canopy-owner-a".into(),
        key: dir.join("client_ed25519"),
        known_hosts: dir.join("known_hosts"),
    }
}

fn binary() -> PathBuf {
    if let Ok(b) = std::env::var("CANOPY_BIN") {
        return b.into();
    }
    let me = std::env::current_exe().unwrap();
    me.parent().and_then(|p| p.parent()).map(|p| p.join("canopy")).unwrap()
}

fn request(n: u32, command: &[&str]) -> LaunchRequest {
    let spec: canopy::spec::Spec = serde_json::from_value(serde_json::json!({
        "name": "overhead",
        "runtime": { "command": command },
        "resources": { "cpu_cores": 0.1, "memory_gb": 0.1 },
    }))
    .unwrap();
    let attempt = AttemptId { workload: WorkloadId(u64::from(n)), n: 1 };
    let nonce = format!("{:016x}", std::process::id() as u64 * 1000 + u64::from(n));
    LaunchRequest {
        attempt,
        token: attempt.token("bench", &nonce),
        spec: Arc::new(spec),
        pool: "lab".into(),
        node: "owner-a".into(),
        secrets: Vec::new(),
        artifact_dir: std::env::temp_dir().join("canopy-ssh-bench"),
        nodes: vec!["owner-a".into()],
        checkpoint_dir: None,
    }
}

fn report(what: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{what:<48} median {:>7.1} ms   max {:>7.1} ms   (n={})",
        ms(v[v.len() / 2]),
        ms(v[v.len() - 1]),
        v.len()
    );
}

fn plain_ssh(extra: &[String]) -> Duration {
    let t = target();
    let start = Instant::now();
    let out = Command::new("ssh")
        .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", t.known_hosts.display()))
        .arg("-i")
        .arg(&t.key)
        .args(extra)
        .args(["-p", "2222", "canopy-owner-a@127.0.0.1", "echo", "hi"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let mut pools = BTreeMap::new();
    pools.insert("lab".to_string(), PoolConfig::default());
    let cfg = SshConfig {
        name: "ssh".into(),
        lease: Duration::from_secs(60),
        binaries: std::collections::BTreeMap::from([(std::env::consts::ARCH.to_string(), binary())]),
        store: "bench".into(),
        control_dir: std::env::temp_dir().join("canopy-ssh-bench-ctl"),
        connection_idle: canopy::config::DEFAULT_SSH_CONNECTION_IDLE,
        hosts: vec![HostConfig { target: target(), pool: "lab".into(), owner: None }],
        pools,
        grace: Duration::from_secs(5),
        outputs: Default::default(),
        clock: Arc::new(std::time::SystemTime::now),
    };
    let p = SshProvider::start(cfg);
    let t0 = Instant::now();
    p.check_host("owner-a").await.expect("host a must answer; start scripts/engines/start.sh ssh");
    println!(
        "first contact (ControlMaster + upload if needed): {:.1} ms",
        t0.elapsed().as_secs_f64() * 1000.0
    );

    let mut to_running = Vec::new();
    for i in 0..n {
        let req = request(1000 + i, &["sleep", "1"]);
        let start = Instant::now();
        p.launch(&req).await.unwrap();
        loop {
            if p.status(&req.token).await.unwrap() == AttemptStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        to_running.push(start.elapsed());
        p.terminate(&req.token).await.unwrap();
        p.release(&req.token).await.unwrap();
    }
    report("launch to running (ssh provider)", to_running);

    let mut whole = Vec::new();
    for i in 0..n {
        let req = request(2000 + i, &["echo", "hi"]);
        let start = Instant::now();
        p.launch(&req).await.unwrap();
        loop {
            if let AttemptStatus::Ended(_) = p.status(&req.token).await.unwrap() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let out = p.logs(&req.token, LogStream::Stdout, 0, 1 << 20).await.unwrap();
        assert_eq!(out.data, b"hi\n");
        p.release(&req.token).await.unwrap();
        whole.push(start.elapsed());
    }
    report("echo hi through the ssh provider (whole workload)", whole);

    let fresh: Vec<Duration> = (0..n).map(|_| plain_ssh(&[])).collect();
    report("plain `ssh host echo hi` (new connection)", fresh);
    let sock = std::env::temp_dir().join(format!("canopy-bench-cm-{}", std::process::id()));
    let master = [
        "-o".to_string(),
        "ControlMaster=auto".into(),
        "-o".into(),
        "ControlPersist=30".into(),
        "-S".into(),
        sock.display().to_string(),
    ];
    plain_ssh(&master);
    let muxed: Vec<Duration> = (0..n).map(|_| plain_ssh(&master)).collect();
    report("plain `ssh -S master host echo hi` (multiplexed)", muxed);
    let _ = Command::new("ssh").args(["-S", &sock.display().to_string(), "-O", "exit", "x"]).output();
}
