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
//! Tenants: `place/core/10000/no-tenants` and `place/core/10000/tenants-20`
//! time one decision as the engine core makes it (`Core::decide_for`: the
//! pools the tenant's quota rules out, then `place`) for the same mix on
//! the same 10,000-node fleet, about a quarter of its GPUs busy with 3,000
//! workloads of 20 tenants; without a tenancy, and with 20 tenants in two
//! cohorts, nominal quotas per accelerator family and borrowing limits
//! (`tenants-20-tight`: quotas a tenth as large, so that the larger
//! tenants are at their limits and the quota rules pools out). Goal:
//! tenants-20 ≥ 0.8× no-tenants.
//!
//! Run: `cargo bench --bench placement -- --quick`

use canopy::engine::core::{Core, CoreConfig, Event};
use canopy::engine::model::Millis;
use canopy::fleet::Fleet;
use canopy::fleet::synth::{SynthParams, synth_fleet, synth_fleet_with, synth_health};
use canopy::schedule::mix::requirements_mix;
use canopy::schedule::{Decision, Policy, Requirements, Snapshot, place};
use canopy::spec::Topology;
use canopy::tenant::{Tenancy, TenancyDoc};
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

const TENANTS: usize = 20;

/// 20 tenants in two cohorts; a flavor per accelerator family in the
/// fleet; each tenant's nominal quota there a `share`-th of the family's
/// GPUs (40: the quotas add up to half the fleet; 400: a twentieth, so
/// the larger tenants reach their limits), borrowing up to as much again;
/// tenant `i` owns provider `i` when there is one.
fn tenancy(fleet: &Fleet, share: u64) -> Tenancy {
    let mut gpus: std::collections::BTreeMap<String, u64> = Default::default();
    for n in &fleet.nodes {
        let pool = fleet.pool(n.pool);
        if let Some(a) = &pool.shape.accelerator {
            *gpus.entry(a.family.as_str().to_string()).or_default() += u64::from(pool.shape.gpus_per_node);
        }
    }
    let mut text = String::new();
    for f in gpus.keys() {
        text += &format!("[[flavor]]\nname = \"{f}\"\nfamilies = [\"{f}\"]\n");
    }
    for i in 0..TENANTS {
        text += &format!("[[tenant]]\nname = \"t{i:02}\"\ncohort = \"c{}\"\n", i % 2);
        if let Some(p) = fleet.providers.get(i) {
            text += &format!("owns = [\"{}\"]\n", p.name);
        }
        for (f, g) in &gpus {
            let n = g / share;
            text += &format!("[tenant.quota.{f}]\ngpus = {{ nominal = {n}, borrowing_limit = {n} }}\n");
        }
    }
    TenancyDoc::parse(&text, false).expect("a valid tenancy").1
}

/// The core on the 10,000-node fleet after 3,000 workloads of 20 tenants
/// (tenant `i` submitting in proportion to `i + 1`) were placed, with
/// `tenancy` in force from the start (or none).
fn busy_core(tenancy: Option<Tenancy>) -> Core {
    let fleet = synth_fleet(10_000, SEED);
    let mut core = Core::new("bench", fleet, CoreConfig::default());
    core.seed_nonces(1);
    let now = Millis(1_700_000_000_000);
    if let Some(t) = tenancy {
        core.handle(Event::SetTenancy { tenancy: Box::new(t) }, now);
    }
    let weights: u64 = (1..=TENANTS as u64).sum();
    for k in 0..3_000u64 {
        let mut pick = k % weights;
        let mut tenant = 0;
        while pick > tenant as u64 {
            pick -= tenant as u64 + 1;
            tenant += 1;
        }
        let gpus = [1, 1, 2, 4, 8][(k % 5) as usize];
        let mut spec = canopy::spec::Spec::new(format!("w{k}"), vec!["train".into()]);
        spec.constraints.interruptible = true;
        spec.resources.gpus = gpus;
        spec.resources.cpu_cores = 4.0 * f64::from(gpus);
        spec.resources.memory_gb = 16.0 * f64::from(gpus);
        core.handle(
            Event::Submit {
                request: k,
                spec_hash: format!("w{k}"),
                spec: Box::new(spec),
                idempotency_key: None,
                by: None,
                tenant: Some(format!("t{tenant:02}")),
            },
            now,
        );
    }
    core
}

fn tenants(c: &mut Criterion) {
    let mix: Vec<(Requirements, Policy, String)> = requirements_mix(1_000, SEED)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let p = Policy::for_optimize(r.optimize);
            (r, p, format!("t{:02}", i % TENANTS))
        })
        .collect();
    let now = Millis(1_700_000_000_000);
    let mut g = c.benchmark_group("place/core/10000");
    g.throughput(Throughput::Elements(mix.len() as u64));
    let fleet = synth_fleet(10_000, SEED);
    let variants = [
        ("no-tenants", None),
        ("tenants-20", Some(tenancy(&fleet, 40))),
        ("tenants-20-tight", Some(tenancy(&fleet, 400))),
    ];
    for (name, tenancy) in variants {
        let mut core = busy_core(tenancy);
        let (mut ruled, mut placed) = (0, 0);
        for (r, p, who) in &mix {
            let mut req = r.clone();
            placed +=
                usize::from(matches!(core.decide_for(Some(who), &mut req, p, now), Decision::Placed(_)));
            ruled += usize::from(!req.quota_pools.is_empty());
        }
        let busy: u32 = core.fleet().nodes.iter().map(|n| n.canopy_gpus).sum();
        eprintln!(
            "place/core/10000/{name}: {busy} of {} GPUs busy; {placed} of {} placed; quotas rule pools out for {ruled}",
            core.fleet().total_gpus(),
            mix.len()
        );
        g.bench_function(name, |b| {
            b.iter(|| {
                for (r, p, who) in &mix {
                    let mut req = r.clone();
                    black_box(core.decide_for(Some(who), black_box(&mut req), p, now));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, placement, tenants);
criterion_main!(benches);
