//! Gang placement on small random fleets, against a brute-force reference
//! that enumerates every set of N nodes: the chosen sets are feasible,
//! none scores better, and "nothing fits" means no set does.
//!
//! The reference takes each node's single-node factor values from the
//! one-node scheduler (the node alone allowed), and combines them for a
//! set as `gang.rs` defines: cost on the summed hourly (per unit of work)
//! against the cheapest feasible set's, the weakest node's health,
//! success, startup and locality, the mean fit and preference.

use canopy::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use canopy::fleet::{
    Accelerator, Fleet, FleetBuilder, Free, Lifecycle, NodeDef, NodeFabric, NodeIdx, NodeState, PoolDef,
    ProviderKind, Shape,
};
use canopy::health::{Health, HealthView};
use canopy::schedule::{Decision, Factor, Policy, Requirements, Snapshot, place};
use canopy::spec::Topology;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::time::Duration;

const PROVIDERS: [&str; 3] = ["alpha", "beta", "gamma"];

#[derive(Debug, Clone)]
struct NodeSpec {
    state: u8,
    used_gpus: u32,
    used_frac: f64,
    switch: u8,
    health: u8,
}

#[derive(Debug, Clone)]
struct PoolSpec {
    region: u8,
    shape: u8,
    price: u32,
    startup: u64,
    lend: Option<u32>,
    health: u8,
    nodes: Vec<NodeSpec>,
}

#[derive(Debug, Clone)]
struct ProviderSpec {
    slurm: bool,
    lend: Option<u32>,
    quarantined: bool,
    pools: Vec<PoolSpec>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    let used = prop_oneof![3 => Just(0u32), 2 => 0u32..=8];
    let frac = prop_oneof![3 => Just(0.0f64), 2 => 0.0f64..1.0];
    (0u8..12, used, frac, 0u8..3, 0u8..10).prop_map(|(state, used_gpus, used_frac, switch, health)| {
        NodeSpec { state, used_gpus, used_frac, switch, health }
    })
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        0u8..2,
        prop::sample::select(vec![0u8, 0, 1, 2]),
        1u32..5,
        0u64..400,
        prop::option::weighted(0.2, 0u32..40),
        0u8..12,
        prop::collection::vec(node_spec(), 0..6),
    )
        .prop_map(|(region, shape, price, startup, lend, health, nodes)| PoolSpec {
            region,
            shape,
            price: price * 4,
            startup,
            lend,
            health,
            nodes,
        })
}

fn fleet_spec() -> impl Strategy<Value = Vec<ProviderSpec>> {
    prop::collection::vec(
        (
            any::<bool>(),
            prop::option::weighted(0.2, 0u32..48),
            prop::bool::weighted(0.1),
            prop::collection::vec(pool_spec(), 1..4),
        )
            .prop_map(|(slurm, lend, quarantined, pools)| ProviderSpec {
                slurm,
                lend,
                quarantined,
                pools,
            }),
        1..=3,
    )
}

/// Three shapes: 8× H100 on InfiniBand 400, 8× H100 on Ethernet 100 (a
/// different class), and CPU-only nodes without a stated fabric.
fn shape(i: u8) -> Shape {
    let h100 = Accelerator {
        vendor: Vendor::Nvidia,
        model: "H100-SXM".into(),
        family: Family::Hopper,
        compute_capability: ComputeCapability::new(9, 0),
        memory_gb: 80.0,
        throughput: None,
    };
    let gpu = |kind, gbps| Shape {
        accelerator: Some(h100.clone()),
        gpus_per_node: 8,
        interconnect: Interconnect::Nvlink,
        cpu_cores: 64.0,
        memory_gb: 512.0,
        disk_gb: 1000.0,
        fabric: Some(NodeFabric { kind, gbps }),
    };
    match i {
        0 => gpu(Fabric::Infiniband, 400.0),
        1 => gpu(Fabric::Ethernet, 100.0),
        _ => Shape {
            accelerator: None,
            gpus_per_node: 0,
            interconnect: Interconnect::Pcie,
            cpu_cores: 32.0,
            memory_gb: 128.0,
            disk_gb: 500.0,
            fabric: None,
        },
    }
}

fn build(spec: &[ProviderSpec]) -> (Fleet, HealthView) {
    let mut b = FleetBuilder::new();
    let mut h = HealthView::default();
    for (pi, ps) in spec.iter().enumerate() {
        let pname = PROVIDERS[pi];
        let kind = if ps.slurm { ProviderKind::Slurm } else { ProviderKind::Cloud };
        b.provider(pname, kind, ps.lend).unwrap();
        if ps.quarantined {
            h.providers.insert(pname.into(), Health::UNKNOWN.quarantined());
        }
        for (qi, q) in ps.pools.iter().enumerate() {
            let s = shape(q.shape);
            let gpn = s.gpus_per_node;
            let def = PoolDef {
                name: format!("pool{qi}"),
                region: ["r1", "r2"][q.region as usize].into(),
                shape: s.clone(),
                price_per_hour: q.price as f64,
                startup: Duration::from_secs(q.startup),
                capabilities: vec![],
                compliance: vec![],
                reserved: qi % 2 == 0,
                interruptible: false,
                lifecycle: Lifecycle::Process,
                lend_limit_gpus: q.lend,
            };
            let label = format!("{pname}/pool{qi}");
            match q.health {
                0 => {
                    h.pools.insert(label, Health::UNKNOWN.quarantined());
                }
                1..=3 => {
                    h.pools.insert(label, Health::new(0.5 + q.health as f64 / 10.0, 0.9, 20));
                }
                _ => {}
            }
            let nodes = q
                .nodes
                .iter()
                .enumerate()
                .map(|(ni, n)| {
                    let name = format!("{pname}-{qi}-n{ni}");
                    match n.health {
                        0 => {
                            h.nodes.insert(name.clone(), Health::UNKNOWN.quarantined());
                        }
                        1..=3 => {
                            h.nodes.insert(name.clone(), Health::new(n.health as f64 / 4.0, 0.8, 5));
                        }
                        _ => {}
                    }
                    let used_gpus = n.used_gpus % (gpn + 1);
                    NodeDef {
                        name,
                        state: match n.state {
                            0 => NodeState::Cordoned,
                            1 => NodeState::Down,
                            _ => NodeState::Ready,
                        },
                        used: Free {
                            gpus: used_gpus,
                            cpu_cores: (s.cpu_cores * n.used_frac).floor(),
                            memory_gb: (s.memory_gb * n.used_frac).floor(),
                            disk_gb: 0.0,
                        },
                        canopy_gpus: used_gpus / 2,
                        switch: (n.switch > 0).then(|| format!("sw{}", n.switch)),
                    }
                })
                .collect();
            b.pool(def, nodes).unwrap();
        }
    }
    (b.build(), h)
}

fn req_spec() -> impl Strategy<Value = Requirements> {
    (
        prop::sample::select(vec![2u32, 2, 3, 4]),
        prop::sample::select(vec![0u32, 1, 1, 4, 8]),
        prop::sample::select(vec![Topology::SameSwitch, Topology::SamePool, Topology::SameRegion]),
        prop::option::weighted(
            0.2,
            prop::sample::select(vec![Fabric::Ethernet, Fabric::Roce, Fabric::Infiniband]),
        ),
        prop::option::weighted(0.1, prop::sample::select(vec![100.0, 400.0])),
        prop::option::weighted(0.1, prop::sample::select(vec![20.0, 60.0])),
        prop::sample::select(vec![1.0, 1.0, 8.0, 40.0]),
        prop::collection::vec((0usize..3, 0usize..3, 0usize..5), 0..=1),
    )
        .prop_map(|(nodes, gpus, topology, fabric, fabric_gbps, max_hourly, cpu, excl)| Requirements {
            nodes,
            gpus,
            topology,
            fabric,
            fabric_gbps,
            max_hourly_usd: max_hourly,
            cpu_cores: cpu,
            memory_gb: cpu * 4.0,
            exclude_nodes: excl.iter().map(|(p, q, n)| format!("{}-{q}-n{n}", PROVIDERS[*p])).collect(),
            ..Requirements::default()
        })
}

/// Every per-node constraint of a gang, spelled out.
fn node_fits(f: &Fleet, h: &HealthView, r: &Requirements, i: NodeIdx) -> bool {
    let n = f.node(i);
    let p = f.pool(n.pool);
    let prov = f.provider(p.provider);
    let label = f.pool_label(n.pool);
    let gang = r.nodes as u64;
    let s = &p.shape;
    if r.gpus > 0 && (s.accelerator.is_none() || s.gpus_per_node < r.gpus) {
        return false;
    }
    if r.fabric.is_some() || r.fabric_gbps.is_some() {
        let Some(fab) = s.fabric else { return false };
        if r.fabric.is_some_and(|w| !fab.kind.serves(w)) || r.fabric_gbps.is_some_and(|g| fab.gbps < g) {
            return false;
        }
    }
    if s.cpu_cores < r.cpu_cores || s.memory_gb < r.memory_gb {
        return false;
    }
    if h.provider(&prov.name).quarantined || h.pool(&label).quarantined || h.node(&n.name).quarantined {
        return false;
    }
    if r.exclude_nodes.contains(&n.name) {
        return false;
    }
    let share = p.hourly_share(r.gpus, r.cpu_cores, r.memory_gb);
    if r.max_hourly_usd.is_some_and(|m| share * gang as f64 > m) {
        return false;
    }
    let gpus = r.gpus as u64 * gang;
    if r.gpus > 0 {
        if p.lend_limit_gpus.is_some_and(|l| f.canopy_gpus_in_pool(n.pool) as u64 + gpus > l as u64) {
            return false;
        }
        if prov
            .lend_limit_gpus
            .is_some_and(|l| f.canopy_gpus_in_provider(p.provider) as u64 + gpus > l as u64)
        {
            return false;
        }
    }
    n.state == NodeState::Ready
        && n.free.gpus >= r.gpus
        && n.free.cpu_cores >= r.cpu_cores
        && n.free.memory_gb >= r.memory_gb
        && n.free.disk_gb >= r.disk_gb
}

/// The node's topology domain, from first principles.
fn domain(f: &Fleet, r: &Requirements, i: NodeIdx) -> Option<String> {
    let n = f.node(i);
    let p = f.pool(n.pool);
    let prov = f.provider(p.provider);
    match r.topology {
        Topology::SameSwitch => n.switch.as_ref().map(|s| format!("{}|{s}", f.pool_label(n.pool))),
        Topology::SamePool => Some(f.pool_label(n.pool)),
        Topology::SameRegion if prov.kind == ProviderKind::Slurm => Some(f.pool_label(n.pool)),
        Topology::SameRegion => Some(format!("{}|{}|{:?}", prov.name, p.region, p.shape)),
    }
}

/// Per factor: the node's raw value and the factor's points per unit.
type Factors = std::collections::HashMap<Factor, (f64, f64)>;

/// One node's factor values (by factor), hourly share and the relative
/// throughput its cost was priced at, from the one-node scheduler with
/// every other node excluded.
fn node_factors(
    f: &Fleet,
    snap: &Snapshot,
    r: &Requirements,
    policy: &Policy,
    i: NodeIdx,
) -> (Factors, f64, f64) {
    let one = Requirements {
        nodes: 1,
        max_hourly_usd: None,
        exclude_nodes: f.nodes.iter().filter(|n| n.name != f.node(i).name).map(|n| n.name.clone()).collect(),
        ..r.clone()
    };
    let Decision::Placed(p) = place(&one, snap, &Policy { top_k: 1, ..policy.clone() }) else {
        panic!("{} fits a gang but not alone", f.node(i).name)
    };
    let c = &p.candidates[0];
    assert_eq!(c.node_idx, i);
    let total: f64 = c.breakdown.iter().map(|b| b.weight).sum();
    (
        c.breakdown.iter().map(|b| (b.factor, (b.raw, b.weight * 100.0 / total))).collect(),
        c.hourly_usd,
        c.relative_speed,
    )
}

/// What a set's cost factor compares: its nodes' hourly shares, each over
/// the throughput it was priced at.
fn priced(nodes: &[NodeIdx], factors: &BTreeMap<NodeIdx, (Factors, f64, f64)>) -> f64 {
    nodes.iter().map(|n| factors[n].1 / factors[n].2).sum()
}

/// The defined score of a set, given the cheapest set's priced hourly.
fn set_score(
    nodes: &[NodeIdx],
    factors: &BTreeMap<NodeIdx, (Factors, f64, f64)>,
    cheapest: f64,
    smoothing: f64,
) -> (f64, f64) {
    let hourly: f64 = nodes.iter().map(|n| factors[n].1).sum();
    let cost = priced(nodes, factors);
    let first = &factors[&nodes[0]].0;
    let mut score = 0.0;
    for (&factor, &(_, coef)) in first {
        let vals: Vec<f64> = nodes.iter().map(|n| factors[n].0[&factor].0).collect();
        let raw = match factor {
            Factor::Cost => ((cheapest + smoothing) / (cost + smoothing)).clamp(0.0, 1.0),
            Factor::Fit | Factor::Preference => vals.iter().sum::<f64>() / vals.len() as f64,
            _ => vals.iter().copied().fold(f64::INFINITY, f64::min),
        };
        score += coef * raw;
    }
    (score, hourly)
}

fn subsets(items: &[NodeIdx], k: usize, out: &mut Vec<Vec<NodeIdx>>, cur: &mut Vec<NodeIdx>, from: usize) {
    if cur.len() == k {
        out.push(cur.clone());
        return;
    }
    for i in from..items.len() {
        cur.push(items[i]);
        subsets(items, k, out, cur, i + 1);
        cur.pop();
    }
}

proptest! {
    // 1024 cases unless PROPTEST_CASES says otherwise (say, 4096 after a
    // change to the gang placement).
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(1024),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_chosen_gang_is_feasible_and_no_set_scores_better(spec in fleet_spec(), req in req_spec()) {
        let (fleet, health) = build(&spec);
        let snap = Snapshot::new(&fleet, &health);
        let policy = Policy { top_k: 1000, ..Policy::default() };
        let n = req.nodes as usize;
        let fits: Vec<NodeIdx> =
            (0..fleet.nodes.len() as u32).map(NodeIdx).filter(|&i| node_fits(&fleet, &health, &req, i)).collect();
        let mut by_domain: BTreeMap<String, Vec<NodeIdx>> = BTreeMap::new();
        for &i in &fits {
            if let Some(d) = domain(&fleet, &req, i) {
                by_domain.entry(d).or_default().push(i);
            }
        }
        let mut sets: Vec<(String, Vec<NodeIdx>)> = Vec::new();
        for (d, nodes) in &by_domain {
            let mut out = Vec::new();
            subsets(nodes, n, &mut out, &mut Vec::new(), 0);
            sets.extend(out.into_iter().map(|s| (d.clone(), s)));
        }
        let decision = place(&req, &snap, &policy);
        let p = match &decision {
            Decision::Unschedulable(e) => {
                prop_assert!(sets.is_empty(), "unschedulable, yet {:?} fits:\n{e}", sets[0]);
                prop_assert_eq!(e.reasons.iter().map(|r| r.nodes).sum::<usize>(), fleet.nodes.len());
                prop_assert!(e.gang.is_some());
                return Ok(());
            }
            Decision::Placed(p) => p,
        };
        prop_assert!(!sets.is_empty(), "placed {:?} though no set fits", p.candidates[0].node_names());

        let factors: BTreeMap<NodeIdx, _> =
            fits.iter().map(|&i| (i, node_factors(&fleet, &snap, &req, &policy, i))).collect();
        let cheapest = sets
            .iter()
            .map(|(_, s)| priced(s, &factors))
            .fold(f64::INFINITY, f64::min);
        let smoothing = if cheapest > 0.0 {
            policy.cost_smoothing_share.max(0.0) * cheapest
        } else {
            policy.cost_smoothing_usd.max(0.0)
        };
        let cpu_set = |s: &[NodeIdx]| fleet.pool(fleet.node(s[0]).pool).shape.gpus_per_node == 0;
        let cpu_fits = req.gpus == 0 && sets.iter().any(|(_, s)| cpu_set(s));
        let best = sets
            .iter()
            .filter(|(_, s)| !cpu_fits || cpu_set(s))
            .map(|(_, s)| set_score(s, &factors, cheapest, smoothing).0)
            .fold(f64::NEG_INFINITY, f64::max);

        let mut seen = std::collections::BTreeSet::new();
        for c in &p.candidates {
            let nodes = c.node_indices();
            prop_assert_eq!(nodes.len(), n);
            prop_assert_eq!(nodes[0], c.node_idx);
            let mut distinct = nodes.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert_eq!(distinct.len(), n, "a node twice");
            let d = domain(&fleet, &req, nodes[0]);
            prop_assert!(d.is_some());
            for &i in &nodes {
                prop_assert!(node_fits(&fleet, &health, &req, i), "{} does not fit", fleet.node(i).name);
                prop_assert_eq!(domain(&fleet, &req, i), d.clone(), "outside the domain");
                prop_assert_eq!(fleet.pool(fleet.node(i).pool).provider, fleet.pool(c.pool_idx).provider);
            }
            prop_assert!(seen.insert(d), "two candidates in one domain");
            let (score, hourly) = set_score(&nodes, &factors, cheapest, smoothing);
            prop_assert!((score - c.score).abs() < 1e-9, "reported {} defined {score}", c.score);
            prop_assert!((hourly - c.hourly_usd).abs() < 1e-9);
        }
        prop_assert!(p.candidates[0].score >= best - 1e-9, "chose {} but a set scores {best}", p.candidates[0].score);
        // One domain per candidate, every domain that holds N.
        prop_assert_eq!(p.candidates.len(), sets.iter().map(|(d, _)| d).collect::<std::collections::BTreeSet<_>>().len());
        for w in p.candidates.windows(2) {
            let tier = |c: &canopy::schedule::Candidate| u8::from(c.gpu_node == Some(canopy::schedule::GpuNode::KeptForGpuWork));
            prop_assert!((tier(&w[0]), -w[0].score) <= (tier(&w[1]), -w[1].score) || (w[0].score - w[1].score).abs() < 1e-9);
        }
        // The pruned paths (the default top 5, and top 1, where the bounds
        // skip the most) pick the same set.
        for top_k in [5, 1] {
            let Decision::Placed(one) = place(&req, &snap, &Policy { top_k, ..Policy::default() }) else {
                return Err(TestCaseError::fail("top-k found nothing"));
            };
            prop_assert_eq!(one.candidates[0].node_names(), p.candidates[0].node_names(), "top {}", top_k);
        }
    }
}
