//! The engine core's incremental indexes during whole simulator runs: after
//! every event, the scheduler snapshot it keeps up to date in place equals
//! a fresh build from its fleet and health, and its deadline index equals a
//! scan of the live attempts (`Core::check_indexes`). Runs every policy,
//! with faults raised so that quarantines, releases, churn, retries and
//! lend limits all happen.

use canopy::fleet::{load, synth};
use canopy::sim::{self, FaultModel, Format, NoSink, world};

fn harsh() -> FaultModel {
    FaultModel {
        infra_per_gpu_hour: 0.05,
        lemon_fraction: 0.2,
        churn_per_node_day: 0.5,
        churn_down_s: [600.0, 3600.0],
        capacity_error: 0.1,
        api_error: 0.05,
        launch_timeout: 0.05,
        preempt_per_hour: 0.2,
        ..FaultModel::default()
    }
}

fn check(fleet: &canopy::fleet::Fleet, jobs: &[sim::Job], seed: u64) {
    let faults = harsh();
    let specs = sim::specs(jobs, fleet, Default::default(), seed, &faults).expect("specs");
    for policy in sim::default_policies(seed) {
        let run = world::Run { fleet, jobs, specs: &specs, faults: &faults, seed, policy, tenancy: None };
        let report =
            world::run_checked(&run, &mut NoSink).unwrap_or_else(|e| panic!("{}: {e}", policy.name()));
        assert_eq!(report.workloads, jobs.len());
    }
}

#[test]
fn gavel_on_the_demo_fleet() {
    let text = include_str!("../assets/traces/gavel_msr_seed0_ee9e8c.trace");
    let mut jobs = sim::trace::parse(Format::Gavel, text, "gavel.trace").expect("trace");
    jobs.truncate(150);
    // Arrivals 20× closer, so that work queues and waits for capacity.
    for j in &mut jobs {
        j.submit_s /= 20.0;
    }
    check(&load::demo().expect("demo fleet"), &jobs, 5);
}

#[test]
fn tiled_gavel_on_a_synthetic_fleet_with_lend_limits() {
    let text = include_str!("../assets/traces/gavel_msr_seed0_ee9e8c.trace");
    let base = sim::trace::parse(Format::Gavel, text, "gavel.trace").expect("trace");
    let fleet = synth::synth_fleet(80, 3);
    assert!(fleet.providers.iter().any(|p| p.lend_limit_gpus.is_some()));
    let jobs = sim::scale::tile(&base[..100], 150, 40.0, 1);
    check(&fleet, &jobs, 2);
}
