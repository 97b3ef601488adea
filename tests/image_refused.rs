//! Slurm and Ray do not run container images (issue 29): a launch with
//! `runtime.image` is refused with the reason before anything reaches the
//! cluster, never run as a bare command. Needs no engine: the providers
//! point at an address where nothing listens, and the refusal comes first.

use canopy::engine::model::{AttemptId, WorkloadId};
use canopy::providers::ray::{RayConfig, RayProvider};
use canopy::providers::slurm::{SlurmConfig, SlurmProvider};
use canopy::providers::{LaunchError, LaunchRequest, Provider};
use canopy::spec::Spec;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// Nothing listens on port 1: any call to the cluster would fail as an
/// API error, not as the refusal the tests expect.
const NOWHERE: &str = "http://127.0.0.1:1";

fn request(root: &Path, image: Option<&str>) -> LaunchRequest {
    let mut runtime = json!({ "command": ["python", "train.py"] });
    if let Some(i) = image {
        runtime["image"] = json!(i);
    }
    let spec: Spec = serde_json::from_value(json!({ "name": "t", "runtime": runtime })).unwrap();
    let attempt = AttemptId { workload: WorkloadId(1), n: 1 };
    LaunchRequest {
        attempt,
        token: attempt.token("r3fu", ""),
        spec: Arc::new(spec),
        pool: "p".into(),
        node: "n1".into(),
        nodes: vec!["n1".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: root.join("artifacts"),
    }
}

fn slurm(root: &Path) -> SlurmProvider {
    // SAFETY of the test: the variable only names the JWT of a cluster that is not there.
    unsafe { std::env::set_var("CANOPY_TEST_REFUSED_JWT", "not-a-token") };
    let toml = format!(
        "[[slurm]]\nurl = {NOWHERE:?}\ntoken_env = \"CANOPY_TEST_REFUSED_JWT\"\njobs_dir = {:?}\n",
        root.join("jobs").display().to_string()
    );
    let entry = canopy::config::parse(&toml).unwrap().slurm.remove(0);
    SlurmProvider::new(SlurmConfig::from_entry(&entry).unwrap()).unwrap()
}

fn ray(root: &Path) -> RayProvider {
    let toml =
        format!("[[ray]]\nurl = {NOWHERE:?}\njobs_dir = {:?}\n", root.join("jobs").display().to_string());
    let entry = canopy::config::parse(&toml).unwrap().ray.remove(0);
    RayProvider::new(RayConfig::from_entry(&entry).unwrap()).unwrap()
}

fn refusal(r: Result<canopy::providers::LaunchAck, LaunchError>) -> String {
    match r {
        Err(LaunchError::Rejected(m)) => m,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn slurm_refuses_an_image_spec_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let p = slurm(t.path());
    let m = refusal(p.launch(&request(t.path(), Some("ghcr.io/acme/train:1"))).await);
    assert!(m.contains("does not run container images") && m.contains("OCI bundle"), "{m}");
    assert!(m.contains("ghcr.io/acme/train:1"), "{m}");
    // Without an image the same launch goes to the cluster (and fails
    // there, as nothing listens): the refusal is the image's alone.
    assert!(!matches!(p.launch(&request(t.path(), None)).await, Err(LaunchError::Rejected(_))));
}

#[tokio::test]
async fn ray_refuses_an_image_spec_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let p = ray(t.path());
    let m = refusal(p.launch(&request(t.path(), Some("ghcr.io/acme/train:1"))).await);
    assert!(m.contains("does not run container images") && m.contains("image_uri"), "{m}");
    assert!(!matches!(p.launch(&request(t.path(), None)).await, Err(LaunchError::Rejected(_))));
}
