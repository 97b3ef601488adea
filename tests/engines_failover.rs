//! Failover across engines: with Slurm's lend limit reached, a workload
//! that fits both runs on Ray, and the placement says why; cancelling
//! both leaves nothing running on either engine. Skips visibly without
//! the engines; fails under `CANOPY_ENGINES=require`.

mod engines_support;

use canopy::engine::command::Command;
use canopy::engine::model::WorkloadState;
use canopy::health::HealthView;
use canopy::providers::Provider;
use canopy::schedule::{Decision, Policy, Requirements, Snapshot, place};
use engines_support::*;
use serde_json::json;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(120);

fn gpu2(name: &str, providers: &[&str]) -> canopy::spec::Spec {
    spec(json!({
        "name": name,
        "runtime": { "command": ["sleep", "300"] },
        "resources": { "gpus": 2, "accelerator": { "family": ["hopper"] }, "memory_gb": 0.5 },
        "constraints": { "providers": providers },
    }))
}

#[tokio::test(flavor = "multi_thread")]
async fn slurm_lend_limit_reached_runs_on_ray_and_cancel_cleans_both() {
    let _g = SERIAL.lock().await;
    let Some(e) = engines("slurm_lend_limit_reached_runs_on_ray_and_cancel_cleans_both", "both").await else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let toml =
        format!("{}{}", slurm_toml(&e, "lend_limit_gpus = 2\n"), ray_toml(&e, "price_per_hour = 50.0\n"));
    let r = start(t.path(), &toml).await;
    let _cleanup = Cleanup { store_id: r.store_id.clone(), engines: e.clone() };
    let first = submit(&r, gpu2("holds-slurm", &["slurm"])).await;
    let (_, a) =
        wait(t.path(), first, LONG, "running on Slurm", |w, _| w.state == WorkloadState::Running).await;
    assert_eq!(a[0].pool, "slurm/debug");
    let running_on = a[0].node.clone();
    let second = submit(&r, gpu2("fails-over", &[])).await;
    let (_, a) = wait(t.path(), second, LONG, "running", |w, _| w.state == WorkloadState::Running).await;
    assert_eq!(a[0].pool, "ray/h100", "Slurm's lend limit is reached: {a:#?}");
    // The plan for the same spec, against the fleet as the engine holds it
    // now (Slurm's 2 lent GPUs taken), says why Slurm was passed over.
    let mut fleet = r.fleet.clone();
    let held = fleet.node_by_name(&running_on).unwrap();
    fleet.nodes[held.0 as usize].canopy_gpus += 2;
    fleet.nodes[held.0 as usize].free.gpus -= 2;
    let spec = gpu2("fails-over", &[]);
    let req = Requirements::from_spec(&spec);
    let snap = Snapshot::new(&fleet, &HealthView::default());
    let Decision::Placed(plan) = place(&req, &snap, &Policy::for_optimize(spec.preferences.optimize)) else {
        panic!("the plan found nothing")
    };
    assert_eq!(
        (plan.candidates[0].provider.as_str(), plan.candidates[0].pool.as_str()),
        ("ray", "ray/h100"),
        "{:?}",
        plan.candidates[0]
    );
    let why: Vec<String> = plan.considered.ruled_out.iter().map(|o| o.describe(&snap, &req)).collect();
    assert!(why.iter().any(|w| w == "slurm/debug: provider lend limit reached"), "{why:?}");
    for id in [first, second] {
        r.handle.command(Command::Cancel { id }).await;
    }
    for id in [first, second] {
        let (w, _) = wait(t.path(), id, LONG, "cancelled", |w, _| w.state.is_final()).await;
        assert_eq!(w.state, WorkloadState::Cancelled);
    }
    let slurm = canopy::providers::slurm::SlurmProvider::new(
        canopy::providers::slurm::SlurmConfig::from_entry(
            &canopy::config::parse(&slurm_toml(&e, "")).unwrap().slurm[0],
        )
        .unwrap(),
    )
    .unwrap();
    let ray = canopy::providers::ray::RayProvider::new(
        canopy::providers::ray::RayConfig::from_entry(
            &canopy::config::parse(&ray_toml(&e, "")).unwrap().ray[0],
        )
        .unwrap(),
    )
    .unwrap();
    let deadline = Instant::now() + LONG;
    loop {
        let mut owned = slurm.list_owned(&r.store_id).await.unwrap();
        owned.extend(ray.list_owned(&r.store_id).await.unwrap());
        assert_eq!(owned.len(), 2, "{owned:?}");
        if owned.iter().all(|o| !o.running) {
            break;
        }
        assert!(Instant::now() < deadline, "still running after cancel: {owned:?}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    r.handle.shutdown();
}
