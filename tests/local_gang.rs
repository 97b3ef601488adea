//! Gangs on the local provider with real processes: one launcher per node,
//! each told its rank and the rendezvous; launchers that really meet over
//! TCP; one rank failing stops the others and names itself; and the
//! checkpoint directory a workload sees. Every wait is a bounded poll.

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::failure::ProviderEnd;
use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand};
use canopy::providers::{AttemptStatus, LaunchRequest, LogStream, Provider};
use canopy::spec::Spec;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PATIENCE: Duration = Duration::from_secs(30);

fn provider(root: &Path) -> LocalProvider {
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let mut cfg = LocalConfig::new(root.join("attempts"), shim);
    cfg.grace = Duration::from_secs(1);
    cfg.containers = ContainerPolicy::Disabled;
    cfg.nodes = 2;
    LocalProvider::new(cfg)
}

fn spec(script: &str, extra: serde_json::Value) -> Spec {
    let mut v = json!({
        "name": "gang",
        "runtime": { "command": ["sh", "-c", script], "stop_grace": "2s" },
        "resources": { "nodes": 2 },
    });
    if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in extra {
            v.insert(k.clone(), x.clone());
        }
    }
    serde_json::from_value(v).unwrap()
}

fn request(root: &Path, workload: u64, spec: Spec, nodes: &[&str]) -> LaunchRequest {
    let attempt = AttemptId { workload: WorkloadId(workload), n: 1 };
    LaunchRequest {
        attempt,
        token: attempt.token("g4ng", ""),
        spec: Arc::new(spec),
        pool: "host".into(),
        node: nodes[0].into(),
        nodes: nodes.iter().map(|n| n.to_string()).collect(),
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
            s if Instant::now() > deadline => panic!("{token} did not end; last status {s:?}"),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

async fn stdout(p: &LocalProvider, token: &str) -> String {
    String::from_utf8(p.logs(token, LogStream::Stdout, 0, 1 << 20).await.unwrap().data).unwrap()
}

#[tokio::test]
async fn the_machine_is_offered_as_two_nodes_behind_one_switch() {
    let t = tempfile::tempdir().unwrap();
    let inv = provider(t.path()).inventory().await.unwrap();
    let pool = &inv.pools[0];
    assert_eq!(pool.nodes.len(), 2);
    assert!(pool.nodes.iter().all(|n| n.switch.as_deref() == Some("loopback")));
    assert!(pool.def.shape.fabric.is_some(), "a split machine declares its loopback fabric");
}

#[tokio::test]
async fn every_rank_learns_its_rank_and_the_same_master() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = "echo \"rank=$NODE_RANK of $NNODES node=$CANOPY_NODE_NAME master=$MASTER_ADDR:$MASTER_PORT \
                  sky=$SKYPILOT_NODE_RANK dstack=$DSTACK_NODE_RANK gpus=${DSTACK_GPUS_NUM-unset}\"";
    let req = request(t.path(), 1, spec(script, json!({})), &["h-1", "h-2"]);
    p.launch(&req).await.unwrap();
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    let out = stdout(&p, &req.token).await;
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    let port = canopy::providers::gang::rendezvous_port(&req.token);
    assert_eq!(
        lines,
        [
            format!("rank=0 of 2 node=h-1 master=127.0.0.1:{port} sky=0 dstack=0 gpus=0"),
            format!("rank=1 of 2 node=h-2 master=127.0.0.1:{port} sky=1 dstack=1 gpus=0"),
        ],
        "{out}"
    );
}

/// Rank 0 listens on `MASTER_PORT`, rank 1 connects and says hello; rank 0
/// prints what it heard: the launchers really met.
#[tokio::test]
async fn the_launchers_rendezvous_over_tcp() {
    if which("python3").is_none() {
        panic!("python3 is needed for the TCP rendezvous test; install it (CI images have it)");
    }
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let py = r#"
import os, socket, time
rank = int(os.environ["NODE_RANK"]); port = int(os.environ["MASTER_PORT"]); host = os.environ["MASTER_ADDR"]
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(20)
    c, _ = s.accept(); print("rank 0 heard:", c.recv(100).decode(), flush=True)
else:
    for _ in range(200):
        try:
            c = socket.create_connection((host, port), timeout=1); break
        except OSError:
            time.sleep(0.1)
    c.sendall(("hello from rank %d of %s" % (rank, os.environ["NNODES"])).encode()); c.close()
"#;
    let mut s = spec("", json!({}));
    s.runtime.command = vec!["python3".into(), "-c".into(), py.into()];
    let req = request(t.path(), 2, s, &["h-1", "h-2"]);
    p.launch(&req).await.unwrap();
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(stdout(&p, &req.token).await, "rank 0 heard: hello from rank 1 of 2\n");
}

/// Rank 1 fails at once; rank 0 would run for a minute. The gang ends
/// with rank 1's end, naming its node, and rank 0 got SIGTERM first.
#[tokio::test]
async fn one_rank_failing_stops_the_whole_gang_and_names_itself() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let script = "if [ \"$NODE_RANK\" = 1 ]; then echo 'rank 1: NCCL error: unhandled system error' >&2; exit 3; fi; \
                  trap 'echo rank 0 got SIGTERM; exit 143' TERM; sleep 60 & wait";
    let req = request(t.path(), 3, spec(script, json!({})), &["h-1", "h-2"]);
    p.launch(&req).await.unwrap();
    let end = wait_end(&p, &req.token).await;
    assert_eq!(
        end,
        ProviderEnd::Rank { rank: 1, node: "h-2".into(), end: Box::new(ProviderEnd::Exited { code: 3 }) }
    );
    assert_eq!(stdout(&p, &req.token).await, "rank 0 got SIGTERM\n");
    let c = canopy::engine::classify::classify(&end, &["rank 1: NCCL error: unhandled system error"]);
    assert_eq!(c.class, canopy::failure::FailureClass::Comm);
    assert!(c.evidence.line.starts_with("rank 1 on h-2: "), "{}", c.evidence.line);
}

#[tokio::test]
async fn a_checkpointing_workload_sees_its_checkpoint_directory() {
    let t = tempfile::tempdir().unwrap();
    let p = provider(t.path());
    let ckpt = t.path().join("checkpoints/w-4");
    std::fs::create_dir_all(&ckpt).unwrap();
    let mut s = spec("echo \"$CANOPY_CHECKPOINT_DIR\"", json!({ "checkpoint": { "path": "/ckpt" } }));
    s.resources.nodes = 1;
    let mut req = request(t.path(), 4, s, &["h-1"]);
    req.checkpoint_dir = Some(ckpt.clone());
    p.launch(&req).await.unwrap();
    assert_eq!(wait_end(&p, &req.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(stdout(&p, &req.token).await.trim_end(), ckpt.to_str().unwrap());
}

fn which(program: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}
