//! Workloads with `runtime.image` and the pools that run container images
//! (issue 29), on the engine core's test clock: placement sends an image
//! only where a container engine runs it, says why the other pools were
//! ruled out, and a fleet where nothing runs images refuses the submit
//! with the reason and what to do, instead of spending retries on
//! launches Slurm or Ray would refuse.

mod common;

use canopy::engine::command::Refusal;
use canopy::engine::core::Reply;
use canopy::engine::model::*;
use canopy::fleet::{
    CONTAINER_MEMORY_UNENFORCED_TAG, CONTAINER_TAG, Fleet, FleetBuilder, Lifecycle, NodeDef, PoolDef,
    ProviderKind, Shape,
};
use canopy::health::HealthView;
use canopy::schedule::{Decision, Filter, Policy, Requirements, Snapshot, place};
use common::{World, gpu_pool, toml_spec};

/// A CPU-only pool of `cores`-core nodes.
fn cpu_pool(name: &str, cores: f64, price: f64) -> PoolDef {
    let mut p = gpu_pool(name, "none", 1, 0.0, price);
    p.shape = Shape { accelerator: None, gpus_per_node: 0, cpu_cores: cores, memory_gb: 64.0, ..p.shape };
    p
}

/// A Slurm cluster (cheap, two 32-core nodes, no images) and, unless
/// `without_local`, this host as the local provider: one 4-core node with
/// a container engine.
fn fleet(without_local: bool) -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("slurm-a", ProviderKind::Slurm, None).unwrap();
    let mut gpu = cpu_pool("gpu", 32.0, 0.5);
    gpu.lifecycle = Lifecycle::Job;
    b.pool(gpu, vec![NodeDef::idle("s1"), NodeDef::idle("s2")]).unwrap();
    if !without_local {
        b.provider("local", ProviderKind::Local, None).unwrap();
        let mut host = cpu_pool("host", 4.0, 2.0);
        host.capabilities = vec![CONTAINER_TAG.into()];
        host.lifecycle = Lifecycle::Process;
        b.pool(host, vec![NodeDef::idle("l1")]).unwrap();
    }
    b.build()
}

/// Four cores and 8 GB, in `image` when given.
fn spec(name: &str, image: Option<&str>) -> canopy::spec::Spec {
    let image = image.map(|i| format!("image = {i:?}\n")).unwrap_or_default();
    toml_spec(
        &format!(
            "name = {name:?}\n[runtime]\n{image}command = [\"python\", \"etl.py\"]\n\
             [resources]\ncpu_cores = 4\nmemory_gb = 8\n"
        ),
        "etl.toml",
    )
}

fn submit(w: &mut World, name: &str, image: Option<&str>) -> WorkloadId {
    match w.submit_spec(&spec(name, image), None) {
        Reply::Submitted { id, .. } => id,
        other => panic!("{name} was not accepted: {other:?}"),
    }
}

/// The image goes to the host that runs containers, not to the cheaper
/// Slurm cluster, which the plan rules out by name; a second image waits
/// for the host, with the reason, rather than being sent to Slurm; work
/// without an image still goes to Slurm.
#[test]
fn an_image_goes_to_the_pool_that_runs_images_and_the_others_are_ruled_out_by_name() {
    let fleet = fleet(false);
    let snap = Snapshot::new(&fleet, &HealthView::default());
    let req = Requirements::from_spec(&spec("etl", Some("localhost/etl:1")));
    match place(&req, &snap, &Policy::default()) {
        Decision::Placed(p) => {
            assert_eq!(p.candidates[0].pool, "local/host");
            let ruled: Vec<String> = p.considered.ruled_out.iter().map(|r| r.describe(&snap, &req)).collect();
            assert_eq!(ruled, vec!["slurm-a/gpu: does not run container images".to_string()]);
            assert!(p.considered.ruled_out.iter().all(|r| r.filter == Filter::Image));
        }
        Decision::Unschedulable(e) => panic!("nothing fits: {e}"),
    }

    let mut w = World::new(fleet);
    let first = submit(&mut w, "etl", Some("localhost/etl:1"));
    let (a1, node) = w.last_launch(first);
    assert_eq!(node, "l1");
    w.run(a1);
    // The host is full: the next image waits for it and says why.
    let second = submit(&mut w, "etl-2", Some("localhost/etl:1"));
    w.advance(60.0);
    assert_eq!(w.launches(second), 0, "an image was sent where nothing runs images");
    let rec = w.workload(second);
    assert_eq!(rec.state, WorkloadState::Queued);
    let reason = rec.reason.unwrap_or_default();
    assert!(reason.contains("2 does not run container images"), "{reason}");
    assert!(reason.contains("insufficient free CPU"), "{reason}");
    // Work without an image is not held back by the filter.
    let plain = submit(&mut w, "plain", None);
    let (_, node) = w.last_launch(plain);
    assert!(node == "s1" || node == "s2", "{node}");
    // The host frees up: the waiting image runs there.
    w.end(a1, canopy::failure::ProviderEnd::Exited { code: 0 }, &[]);
    w.advance(1.0);
    assert_eq!(w.launched(second), Some("l1"));
}

/// The only host that runs images has a rootless engine on cgroup v1,
/// which cannot hold a container to its memory limit: the image is refused
/// at submit with that reason and what to do, never run unlimited.
#[test]
fn an_image_is_refused_where_the_only_engine_cannot_enforce_its_memory_limit() {
    let mut b = FleetBuilder::new();
    b.provider("local", ProviderKind::Local, None).unwrap();
    let mut host = cpu_pool("host", 4.0, 0.0);
    host.capabilities = vec![CONTAINER_TAG.into(), CONTAINER_MEMORY_UNENFORCED_TAG.into()];
    b.pool(host, vec![NodeDef::idle("l1")]).unwrap();
    let mut w = World::new(b.build());
    match w.submit_spec(&spec("etl", Some("localhost/etl:1")), None) {
        Reply::Error { code: Refusal::Unschedulable, message } => {
            assert!(message.contains("cannot hold a container to its memory limit"), "{message}");
            assert!(message.contains("rootless on cgroup v1"), "{message}");
            assert!(message.contains("run the engine as root"), "{message}");
        }
        other => panic!("an image was accepted where its memory limit cannot hold: {other:?}"),
    }
    assert_eq!(w.launch_log().count(), 0);
    // Plain work runs there.
    let plain = submit(&mut w, "plain", None);
    assert_eq!(w.launched(plain), Some("l1"));
}

/// No pool of the fleet runs container images: the submit is refused at
/// once with the reason and what to do, and nothing is launched; the same
/// spec without an image is accepted, and one that asks to wait for
/// capacity waits.
#[test]
fn a_fleet_without_a_pool_that_runs_images_refuses_an_image_at_submit() {
    let mut w = World::new(fleet(true));
    match w.submit_spec(&spec("etl", Some("localhost/etl:1")), None) {
        Reply::Error { code: Refusal::Unschedulable, message } => {
            assert!(message.contains("could ever run \"etl\""), "{message}");
            assert!(message.contains("2 does not run container images"), "{message}");
            assert!(message.contains("runtime.image needs a pool that runs container images"), "{message}");
            assert!(message.contains("Drop runtime.image"), "{message}");
        }
        other => panic!("an image was accepted where nothing runs images: {other:?}"),
    }
    assert_eq!(w.launch_log().count(), 0);
    let plain = submit(&mut w, "plain", None);
    assert_eq!(w.launched(plain), Some("s1"));
    let waits = toml_spec(
        "name = \"waits\"\n[runtime]\nimage = \"localhost/etl:1\"\ncommand = [\"true\"]\n\
         [constraints]\nwait_for_capacity = true\n",
        "waits.toml",
    );
    assert!(matches!(w.submit_spec(&waits, None), Reply::Submitted { .. }));
}
