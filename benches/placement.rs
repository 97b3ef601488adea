//! Placement throughput on synthetic fleets of 100, 1,000 and 10,000 nodes
//! with a realistic requirements mix. Throughput is in decisions per second.
//!
//! Targets (one core): ≥ 100,000 decisions/s at 10,000 nodes, and the
//! 10,000-node fleet costing at most 2× the 1,000-node one per decision.
//!
//! A decision's cost follows pools, not nodes: the synthetic fleets keep
//! pools at 4–64 nodes, so 10× the nodes is ~12× the pools.
//! `place/mix-large-pools/10000` holds 10,000 nodes in about as many pools
//! as the 1,000-node fleet, to show the node count alone costs nothing.
//!
//! Gangs: `place/gang-4-same-pool`, `-same-switch` and `-same-region` place
//! the mix's GPU requests as gangs of 4 (target ≥ 10,000 decisions/s).
//!
//! Run: `cargo bench --bench placement -- --quick`

use canopy::fleet::synth::{SynthParams, synth_fleet, synth_fleet_with, synth_health};
use canopy::schedule::mix::requirements_mix;
use canopy::schedule::{Decision, Policy, Requirements, Snapshot, place};
use canopy::spec::Topology;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

const SIZES: [usize; 3] = [100, 1_000, 10_000];
const SEED: u64 = 7;

fn snapshot(nodes: usize) -> Snapshot {
    let fleet = synth_fleet(nodes, SEED);
    let health = synth_health(&fleet, SEED);
    Snapshot::new(&fleet, &health)
}

fn decide_all(snap: &Snapshot, reqs: &[(Requirements, Policy)]) {
    for (req, policy) in reqs {
        black_box(place(black_box(req), snap, policy));
    }
}

fn placement(c: &mut Criterion) {
    let mix: Vec<(Requirements, Policy)> = requirements_mix(1_000, SEED)
        .into_iter()
        .map(|r| {
            let p = Policy::for_optimize(r.optimize);
            (r, p)
        })
        .collect();

    let mut g = c.benchmark_group("place/mix");
    g.throughput(Throughput::Elements(mix.len() as u64));
    for n in SIZES {
        let snap = snapshot(n);
        g.bench_with_input(BenchmarkId::from_parameter(n), &snap, |b, snap| {
            b.iter(|| decide_all(snap, &mix))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("place/mix-large-pools");
    g.throughput(Throughput::Elements(mix.len() as u64));
    let params = SynthParams { pool_nodes: (200, 350), ..SynthParams::new(10_000, SEED) };
    let fleet = synth_fleet_with(&params);
    let snap = Snapshot::new(&fleet, &synth_health(&fleet, SEED));
    g.bench_with_input(BenchmarkId::from_parameter(10_000), &snap, |b, snap| {
        b.iter(|| decide_all(snap, &mix))
    });
    g.finish();

    // The two paths apart: placements, and the exact-count explanations.
    for (name, want_placed) in [("place/placed", true), ("place/unschedulable", false)] {
        let mut g = c.benchmark_group(name);
        for n in SIZES {
            let snap = snapshot(n);
            let subset: Vec<(Requirements, Policy)> = mix
                .iter()
                .filter(|(r, p)| matches!(place(r, &snap, p), Decision::Placed(_)) == want_placed)
                .cloned()
                .collect();
            if subset.is_empty() {
                continue;
            }
            g.throughput(Throughput::Elements(subset.len() as u64));
            g.bench_with_input(BenchmarkId::from_parameter(n), &snap, |b, snap| {
                b.iter(|| decide_all(snap, &subset))
            });
        }
        g.finish();
    }

    // Gangs of 4 on the 10,000-node fleet: 8 GPUs per node (whole nodes,
    // as distributed training takes them) and 1 GPU per node, in one pool,
    // behind one switch, and across the pools of one region.
    let snap = snapshot(10_000);
    for topology in [Topology::SamePool, Topology::SameSwitch, Topology::SameRegion] {
        let gangs: Vec<(Requirements, Policy)> = mix
            .iter()
            .filter(|(r, _)| r.gpus > 0)
            .map(|(r, p)| {
                let r = Requirements {
                    nodes: 4,
                    topology,
                    gpus: if r.gpus >= 4 { 8 } else { r.gpus },
                    ..r.clone()
                };
                (r, p.clone())
            })
            .collect();
        let placed = gangs.iter().filter(|(r, p)| matches!(place(r, &snap, p), Decision::Placed(_))).count();
        eprintln!("gang/{topology}: {placed} of {} placed", gangs.len());
        let mut g = c.benchmark_group(format!("place/gang-4-{topology}"));
        g.throughput(Throughput::Elements(gangs.len() as u64));
        g.bench_with_input(BenchmarkId::from_parameter(10_000), &snap, |b, snap| {
            b.iter(|| decide_all(snap, &gangs))
        });
        g.finish();
    }

    let mut g = c.benchmark_group("snapshot/new");
    for n in SIZES {
        let fleet = synth_fleet(n, SEED);
        let health = synth_health(&fleet, SEED);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &(fleet, health), |b, (f, h)| {
            b.iter(|| Snapshot::new(f, h))
        });
    }
    g.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
