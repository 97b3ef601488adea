//! A clean exit whose declared outputs cannot be collected, under the test
//! clock: the collection's real message (from `providers::collect` over a
//! real outputs directory) is handed to the core as the shell hands it. A
//! workload that wrote its output to the wrong place (the spec's absolute
//! path itself, outside `$CANOPY_OUTPUT_DIR`) made its own mistake: class
//! `app`, not retried on other nodes; a store that cannot be written is a
//! storage failure (`io`) and is retried. The first case is also run
//! with a real process on the local provider, whose supervisor collects.

mod common;

use canopy::engine::core::{Event, OutputsResult};
use canopy::engine::model::*;
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::fleet::Fleet;
use canopy::providers::AttemptStatus;
use canopy::providers::collect::{self, OutputLimits};
use common::{World, cloud_fleet, gpu_pool, job_spec};
use std::path::Path;

fn fleet() -> Fleet {
    cloud_fleet(vec![(gpu_pool("small", "GPU-24", 1, 24.0, 1.0), vec!["s1", "s2", "s3"])])
}

/// A one-GPU job with one required output at `path`.
fn spec_with_output(path: &Path) -> canopy::spec::Spec {
    job_spec(1, &format!("[[outputs]]\nname = \"model\"\npath = {:?}\nrequired = true\n", path.display()))
}

/// The attempt's outputs directory as a launch leaves it: the output's
/// parent directory made under it.
fn outputs_root(tmp: &Path, spec_path: &Path) -> std::path::PathBuf {
    let root = tmp.join("attempt/outputs");
    let rel = spec_path.strip_prefix("/").unwrap();
    std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
    root
}

/// Runs the workload's first attempt to a clean exit, then collects with
/// `message` as the collection's failure.
fn exits_cleanly_but_collection_fails(w: &mut World, id: WorkloadId, message: &str) -> AttemptId {
    let (a, _) = w.last_launch(id);
    w.run(a);
    let end = ProviderEnd::Exited { code: 0 };
    w.send(Event::Status { attempt: a, status: AttemptStatus::Ended(end.clone()) });
    let outputs = OutputsResult::Failed { message: message.to_string() };
    w.send(Event::Collected { attempt: a, end, log_tail: vec![], outputs });
    a
}

#[test]
fn an_output_written_outside_the_output_dir_is_the_workloads_error_not_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let spec_path = tmp.path().join("results/model.bin");
    let root = outputs_root(tmp.path(), &spec_path);
    // The workload writes the spec's path itself, not $CANOPY_OUTPUT_DIR/….
    std::fs::create_dir_all(spec_path.parent().unwrap()).unwrap();
    std::fs::write(&spec_path, b"weights").unwrap();
    let spec = spec_with_output(&spec_path);
    let message =
        collect::collect(&root, &spec, &tmp.path().join("store"), &OutputLimits::default()).unwrap_err();

    let mut w = World::new(fleet());
    let id = match w.submit_spec(&spec, None) {
        canopy::engine::core::Reply::Submitted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    let a = exits_cleanly_but_collection_fails(&mut w, id, &message);

    let att = w.attempt(a);
    assert_eq!(att.class, Some(FailureClass::App), "{att:?}");
    assert_eq!(att.rule.as_deref(), Some("outputs.not-written"));
    let evidence = att.evidence.unwrap();
    let shown = spec_path.display().to_string();
    assert!(
        evidence.contains(&format!(
            "the workload wrote {shown} itself; outputs must be under $CANOPY_OUTPUT_DIR"
        )) && evidence.contains(&format!("write $CANOPY_OUTPUT_DIR{shown}")),
        "{evidence}"
    );
    assert_eq!(w.state(id), WorkloadState::Failed);
    assert_eq!(w.workload(id).class, Some(FailureClass::App));
    w.advance(3600.0);
    assert_eq!(w.launches(id), 1, "not retried on other nodes");
}

#[test]
fn a_missing_output_says_where_it_was_expected_and_is_the_workloads_error() {
    let tmp = tempfile::tempdir().unwrap();
    let spec_path = tmp.path().join("never/written.json");
    let root = outputs_root(tmp.path(), &spec_path);
    let spec = spec_with_output(&spec_path);
    let message =
        collect::collect(&root, &spec, &tmp.path().join("store"), &OutputLimits::default()).unwrap_err();
    assert!(!message.contains("itself"), "nothing was written anywhere: {message}");
    assert!(message.contains(&format!("must write it under $CANOPY_OUTPUT_DIR{}", spec_path.display())));

    let mut w = World::new(fleet());
    let id = match w.submit_spec(&spec, None) {
        canopy::engine::core::Reply::Submitted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    let a = exits_cleanly_but_collection_fails(&mut w, id, &message);
    assert_eq!(w.attempt(a).class, Some(FailureClass::App));
    assert_eq!(w.state(id), WorkloadState::Failed);
}

#[test]
fn a_store_that_cannot_be_written_stays_a_storage_failure_and_is_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let spec_path = Path::new("/outputs/model.bin");
    let root = outputs_root(tmp.path(), spec_path);
    std::fs::write(root.join("outputs/model.bin"), b"weights").unwrap();
    // The artifact store's directory cannot be made: a file holds its place.
    std::fs::write(tmp.path().join("store"), b"").unwrap();
    let spec = spec_with_output(spec_path);
    let message =
        collect::collect(&root, &spec, &tmp.path().join("store/w-1"), &OutputLimits::default()).unwrap_err();

    let mut w = World::new(fleet());
    let id = match w.submit_spec(&spec, None) {
        canopy::engine::core::Reply::Submitted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    let a = exits_cleanly_but_collection_fails(&mut w, id, &message);
    let att = w.attempt(a);
    assert_eq!(att.class, Some(FailureClass::Io), "{att:?}");
    assert_eq!(att.rule.as_deref(), Some("outputs.collect-failed"));
    assert!(att.evidence.unwrap().contains("cannot create"));
    w.advance(3600.0);
    assert_eq!(w.launches(id), 2, "an infrastructure failure is retried");
}

/// The local provider runs a real process that writes the spec's absolute
/// path itself; its supervisor's collection fails, and the core, handed
/// that failure as the shell hands it, classes it as the workload's.
#[tokio::test]
async fn a_real_process_writing_its_output_outside_the_output_dir_on_the_local_provider_is_app() {
    use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand};
    use canopy::providers::{LaunchRequest, Provider};
    let tmp = tempfile::tempdir().unwrap();
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let mut cfg = LocalConfig::new(tmp.path().join("attempts"), shim);
    cfg.containers = ContainerPolicy::Disabled;
    let p = LocalProvider::new(cfg);
    let target = tmp.path().join("results/model.bin");
    let script = format!("mkdir -p {0:?} && echo weights > {1:?}", target.parent().unwrap(), target);
    let mut spec = spec_with_output(&target);
    spec.runtime.command = vec!["sh".into(), "-c".into(), script];
    let attempt = AttemptId { workload: WorkloadId(1), n: 1 };
    let req = LaunchRequest {
        attempt,
        token: attempt.token("t3st", ""),
        spec: std::sync::Arc::new(spec.clone()),
        pool: "host".into(),
        node: "localhost".into(),
        nodes: vec!["localhost".into()],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: tmp.path().join("artifacts"),
    };
    p.launch(&req).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let end = loop {
        match p.status(&req.token).await.unwrap() {
            AttemptStatus::Ended(end) => break end,
            s => assert!(std::time::Instant::now() < deadline, "did not end: {s:?}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(end, ProviderEnd::Exited { code: 0 });
    assert!(target.exists(), "the process wrote its output outside $CANOPY_OUTPUT_DIR");
    let err = p.outputs(&req.token, &spec, &tmp.path().join("store")).await.unwrap_err();
    let (class, rule, evidence) = canopy::engine::classify::collection_failure(&err.message);
    assert_eq!((class, rule), (FailureClass::App, "outputs.not-written"), "{evidence}");
    assert!(
        evidence.contains(&format!(
            "the workload wrote {0} itself; outputs must be under $CANOPY_OUTPUT_DIR: write $CANOPY_OUTPUT_DIR{0}",
            target.display()
        )),
        "{evidence}"
    );
}
