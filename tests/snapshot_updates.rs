//! The scheduler snapshot's in-place updates (`Snapshot::set_*`) against
//! fresh builds: after any sequence of allocations, releases, node state
//! changes and node, pool and provider health changes, the updated
//! snapshot is field for field what `Snapshot::new` builds from the
//! changed fleet and health view, and it decides every request alike.

use canopy::fleet::synth::{SynthParams, synth_fleet_with, synth_health};
use canopy::fleet::{Fleet, Free, NodeIdx, NodeState, PoolIdx, ProviderIdx};
use canopy::health::{Health, HealthView};
use canopy::schedule::{Policy, Requirements, Snapshot, place};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Node (by position mod count), then GPUs, CPU, memory, disk as
    /// fractions of the shape (0 and 1 often), and Canopy's share of the
    /// used GPUs.
    Capacity(usize, [u8; 4], u8),
    State(usize, u8),
    NodeHealth(usize, u8, bool),
    PoolHealth(usize, u8, bool),
    ProviderHealth(usize, u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), any::<[u8; 4]>(), any::<u8>()).prop_map(|(n, f, c)| Op::Capacity(n, f, c)),
        1 => (any::<usize>(), 0u8..4).prop_map(|(n, s)| Op::State(n, s)),
        2 => (any::<usize>(), any::<u8>(), prop::bool::weighted(0.2)).prop_map(|(n, h, q)| Op::NodeHealth(n, h, q)),
        1 => (any::<usize>(), any::<u8>(), prop::bool::weighted(0.1)).prop_map(|(n, h, q)| Op::PoolHealth(n, h, q)),
        1 => (any::<usize>(), any::<u8>(), prop::bool::weighted(0.05))
            .prop_map(|(n, h, q)| Op::ProviderHealth(n, h, q)),
    ]
}

/// A fraction of `max` with the edges (nothing, all) common.
fn part(b: u8, max: f64) -> f64 {
    match b % 8 {
        0 => 0.0,
        1 => max,
        _ => (max * f64::from(b) / 255.0).floor(),
    }
}

/// A health figure from a byte: a few distinct scores so ties happen.
fn health(b: u8, quarantined: bool) -> Health {
    let score = [1.0, 0.9, 0.5, 0.2][usize::from(b % 4)];
    let mut h = Health::new(score, f64::from(b / 4) / 63.0, u32::from(b / 16));
    h.quarantined = quarantined;
    h
}

/// Applies `op` to the fleet and view and, in place, to `snap`.
fn apply(op: &Op, fleet: &mut Fleet, view: &mut HealthView, snap: &mut Snapshot) {
    let nodes = fleet.nodes.len();
    match *op {
        Op::Capacity(n, f, c) => {
            let i = n % nodes;
            let shape = fleet.pool(fleet.nodes[i].pool).shape.clone();
            let gpus = part(f[0], f64::from(shape.gpus_per_node)) as u32;
            let free = Free {
                gpus,
                cpu_cores: part(f[1], shape.cpu_cores),
                memory_gb: part(f[2], shape.memory_gb),
                disk_gb: part(f[3], shape.disk_gb),
            };
            let canopy = u32::from(c) % (shape.gpus_per_node - gpus + 1);
            fleet.nodes[i].free = free;
            fleet.nodes[i].canopy_gpus = canopy;
            snap.set_node_capacity(NodeIdx(i as u32), free, canopy);
        }
        Op::State(n, s) => {
            let i = n % nodes;
            let state =
                [NodeState::Ready, NodeState::Cordoned, NodeState::Draining, NodeState::Down][usize::from(s)];
            fleet.nodes[i].state = state;
            snap.set_node_state(NodeIdx(i as u32), state);
        }
        Op::NodeHealth(n, b, q) => {
            let i = n % nodes;
            let h = health(b, q);
            view.nodes.insert(fleet.nodes[i].name.clone(), h);
            snap.set_node_health(NodeIdx(i as u32), h);
        }
        Op::PoolHealth(n, b, q) => {
            let p = n % fleet.pools.len();
            let h = health(b, q);
            view.pools.insert(fleet.pool_label(PoolIdx(p as u32)), h);
            snap.set_pool_health(PoolIdx(p as u32), h);
        }
        Op::ProviderHealth(n, b, q) => {
            let p = n % fleet.providers.len();
            let h = health(b, q);
            view.providers.insert(fleet.providers[p].name.clone(), h);
            snap.set_provider_health(ProviderIdx(p as u32), h);
        }
    }
}

/// Requests of every size, for CPU-only and GPU work, with and without
/// CPU and memory, with an exclusion or a lend-limited size.
fn requests(fleet: &Fleet) -> Vec<Requirements> {
    let mut out = Vec::new();
    for gpus in [0, 1, 2, 4, 8] {
        for (cpu, mem) in [(0.0, 0.0), (1.0, 4.0), (16.0, 64.0)] {
            out.push(Requirements { gpus, cpu_cores: cpu, memory_gb: mem, ..Requirements::default() });
        }
    }
    let excluded = fleet.nodes.iter().step_by(3).map(|n| n.name.clone()).collect();
    out.push(Requirements {
        gpus: 1,
        cpu_cores: 1.0,
        memory_gb: 1.0,
        exclude_nodes: excluded,
        ..Requirements::default()
    });
    out
}

fn same_decisions(fleet: &Fleet, a: &Snapshot, b: &Snapshot) -> Result<(), String> {
    let policy = Policy { top_k: 5, ..Policy::default() };
    for req in requests(fleet) {
        let (x, y) = (place(&req, a, &policy), place(&req, b, &policy));
        if format!("{x:?}") != format!("{y:?}") {
            return Err(format!("decisions differ for {req:?}"));
        }
    }
    Ok(())
}

fn check(seed: u64, nodes: usize, pool_nodes: (usize, usize), ops: &[Op]) -> Result<(), TestCaseError> {
    let mut fleet = synth_fleet_with(&SynthParams { nodes, seed, pool_nodes });
    let mut view = synth_health(&fleet, seed);
    let mut snap = Snapshot::new(&fleet, &view);
    for (k, op) in ops.iter().enumerate() {
        apply(op, &mut fleet, &mut view, &mut snap);
        let fresh = Snapshot::new(&fleet, &view);
        if let Some(d) = snap.diff(&fresh) {
            return Err(TestCaseError::fail(format!("after op {k} ({op:?}): {d}")));
        }
        if k % 8 == 7 || k + 1 == ops.len() {
            same_decisions(&fleet, &snap, &fresh).map_err(TestCaseError::fail)?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn updates_match_a_fresh_build(
        seed in 0u64..1000,
        nodes in 1usize..120,
        small in any::<bool>(),
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let pool_nodes = if small { (1, 4) } else { (4, 40) };
        check(seed, nodes, pool_nodes, &ops)?;
    }
}

/// A long run on one larger fleet: many allocations and releases in the
/// same pools, as the simulator makes them.
#[test]
fn a_long_sequence_on_a_larger_fleet() {
    let ops: Vec<Op> = (0..2_000u64)
        .map(|k| {
            let r = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 7;
            let n = (r % 997) as usize;
            match k % 23 {
                0 => Op::State(n, (r % 4) as u8),
                1 | 2 => Op::NodeHealth(n, (r >> 3) as u8, r % 11 == 0),
                3 => Op::PoolHealth(n, (r >> 5) as u8, r % 17 == 0),
                4 => Op::ProviderHealth(n, (r >> 2) as u8, false),
                _ => Op::Capacity(
                    n,
                    [(r >> 8) as u8, (r >> 16) as u8, (r >> 24) as u8, (r >> 32) as u8],
                    (r >> 40) as u8,
                ),
            }
        })
        .collect();
    check(11, 400, (4, 64), &ops).unwrap();
}
