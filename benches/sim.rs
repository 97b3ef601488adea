//! Simulator speed: whole `canopy sim` runs, Canopy's policy, no sink.
//!
//! - `sim/gavel`: the 2,000-job Gavel trace
//!   (`assets/traces/gavel_msr_seed0_ee9e8c.trace`) over the embedded demo
//!   fleet (70 nodes). Target: under 2 s.
//! - `sim-large/100k-jobs-10k-nodes`: 100,000 jobs over a 10,000-node
//!   synthetic fleet, `sim::scale::scenario`: the Gavel trace tiled 50 times
//!   with seeded offsets over `synth_fleet(10_000, 1)` (44,718 GPUs), its
//!   arrivals compressed ×15.2 so the jobs offer a load of 0.35 (three
//!   quarters of the fleet busy with the other tenants' use; work queues at
//!   peaks). Jobs asking for more GPUs than any node has (5.6%) wait to the
//!   end, as in the Gavel run. Target: under 60 s. Ten samples; run it
//!   alone with `cargo bench --bench sim -- sim-large`.
//!
//! - `sim-scale/20k-jobs-2k-nodes`: the same scenario at 20,000 jobs over
//!   2,000 nodes (`canopy sim --synthetic 20000,2000`): small enough to
//!   run in every bench session, large enough that work growing faster
//!   than the fleet shows (issue 24: 8.8 s here while 10,000 over 1,000
//!   took 1.6 s). Ten samples; `cargo bench --bench sim -- sim-scale`.
//!
//! One run at a time without criterion: `examples/sim_scale.rs`.
//!
//! Measured 2026-11-29, release, 2 shared cores (see docs/sim.md, "Speed"):
//! Gavel ≈ 0.25 s (0.35–0.5 s before the incremental snapshot), 100k × 10k
//! ≈ 10–15 s (about 265 s before, at a lighter load).

use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Input, Job, NoSink, PlacementPolicy, scale};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

const GAVEL: &str = include_str!("../assets/traces/gavel_msr_seed0_ee9e8c.trace");

fn gavel() -> Vec<Job> {
    sim::trace::parse(sim::trace::Format::Gavel, GAVEL, "gavel").expect("the Gavel trace parses")
}

fn run(fleet: &canopy::fleet::Fleet, jobs: &[Job]) -> sim::SimReport {
    let faults = FaultModel::default();
    let input = Input {
        fleet,
        jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "bench",
        trace_name: "gavel",
        tenancy: None,
    };
    sim::simulate(&input, &mut NoSink).expect("the simulation runs")
}

fn small(c: &mut Criterion) {
    let fleet = load::demo().expect("the demo fleet parses");
    let jobs = gavel();
    let mut g = c.benchmark_group("sim");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("gavel", |b| b.iter(|| black_box(run(&fleet, &jobs))));
    g.finish();
}

fn large(c: &mut Criterion) {
    let (fleet, jobs, _) = scale::scenario(&gavel(), 100_000, 10_000, scale::LOAD, 0);
    let mut g = c.benchmark_group("sim-large");
    g.sample_size(10).warm_up_time(Duration::from_millis(1)).measurement_time(Duration::from_secs(150));
    g.bench_function("100k-jobs-10k-nodes", |b| b.iter(|| black_box(run(&fleet, &jobs))));
    g.finish();
}

fn mid(c: &mut Criterion) {
    let (fleet, jobs, _) = scale::scenario(&gavel(), 20_000, 2_000, scale::LOAD, 0);
    let mut g = c.benchmark_group("sim-scale");
    g.sample_size(10).warm_up_time(Duration::from_millis(1)).measurement_time(Duration::from_secs(60));
    g.bench_function("20k-jobs-2k-nodes", |b| b.iter(|| black_box(run(&fleet, &jobs))));
    g.finish();
}

criterion_group!(benches, small, mid, large);
criterion_main!(benches);
