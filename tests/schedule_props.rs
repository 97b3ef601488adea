//! Properties of the scheduler on small random fleets, checked against a
//! brute-force feasibility predicate written plainly here, independent of
//! the scheduler's own filters and indexes.

use canopy::accel::{ComputeCapability, Family, Interconnect, Vendor};
use canopy::fleet::{
    Accelerator, Fleet, FleetBuilder, Free, Lifecycle, NodeDef, NodeIdx, NodeState, PoolDef, PoolIdx,
    ProviderKind, Shape,
};
use canopy::health::{Health, HealthView};
use canopy::schedule::{Candidate, Decision, GpuNode, Policy, Requirements, Snapshot, place};
use canopy::spec::GbRange;
use canopy::units::Glob;
use proptest::prelude::*;
use std::collections::BTreeSet;
use std::time::Duration;

const PROVIDERS: [&str; 3] = ["alpha", "beta", "gamma"];
const REGIONS: [&str; 4] = ["us-east", "us-west", "eu-west", "eu-central"];
const CAPS: [&str; 2] = ["fast-disk", "long-training"];
const COMPLIANCE: [&str; 2] = ["gdpr", "hipaa"];

fn catalog(i: usize) -> Option<(Accelerator, Interconnect)> {
    let a = |vendor, model: &str, family, cc: (u8, u8), mem| Accelerator {
        vendor,
        model: model.into(),
        family,
        compute_capability: ComputeCapability::new(cc.0, cc.1),
        memory_gb: mem,
        throughput: None,
    };
    Some(match i {
        0 => (a(Vendor::Nvidia, "L4", Family::Ada, (8, 9), 24.0), Interconnect::Pcie),
        1 => (a(Vendor::Nvidia, "A100", Family::Ampere, (8, 0), 40.0), Interconnect::Nvlink),
        2 => (a(Vendor::Nvidia, "H100", Family::Hopper, (9, 0), 80.0), Interconnect::Nvlink),
        3 => (a(Vendor::Amd, "MI300X", Family::Cdna3, (9, 4), 192.0), Interconnect::Xgmi),
        4 => (a(Vendor::Nvidia, "L40S", Family::Ada, (8, 9), 48.0), Interconnect::Pcie),
        _ => return None,
    })
}

#[derive(Debug, Clone)]
struct NodeSpec {
    state: u8,
    used_gpus: u32,
    used_frac: f64,
    canopy: bool,
    health: u8,
}

#[derive(Debug, Clone)]
struct PoolSpec {
    region: usize,
    accel: usize,
    gpn: u32,
    cpu: f64,
    mem: f64,
    disk: f64,
    price: f64,
    startup: u64,
    caps: u8,
    compliance: u8,
    reserved: bool,
    interruptible: bool,
    lend: Option<u32>,
    health: u8,
    nodes: Vec<NodeSpec>,
}

#[derive(Debug, Clone)]
struct ProviderSpec {
    lend: Option<u32>,
    quarantined: bool,
    pools: Vec<PoolSpec>,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (0u8..10, 0u32..=8, 0.0f64..1.0, any::<bool>(), 0u8..10).prop_map(
        |(state, used_gpus, used_frac, canopy, health)| NodeSpec {
            state,
            used_gpus,
            used_frac,
            canopy,
            health,
        },
    )
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (
        (0..REGIONS.len(), 0usize..7, prop::sample::select(vec![1u32, 2, 4, 8])),
        (prop::sample::select(vec![4.0, 16.0, 64.0]), prop::sample::select(vec![16.0, 64.0, 512.0])),
        (prop::sample::select(vec![100.0, 1000.0]), 0u32..40, 0u64..600),
        (
            0u8..4,
            0u8..4,
            any::<bool>(),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.2, 0u32..12),
            0u8..12,
        ),
        prop::collection::vec(node_spec(), 0..7),
    )
        .prop_map(
            |(
                (region, accel, gpn),
                (cpu, mem),
                (disk, price, startup),
                (caps, compliance, reserved, interruptible, lend, health),
                nodes,
            )| {
                PoolSpec {
                    region,
                    accel,
                    gpn,
                    cpu,
                    mem,
                    disk,
                    price: price as f64 * 0.5,
                    startup,
                    caps,
                    compliance,
                    reserved,
                    interruptible,
                    lend,
                    health,
                    nodes,
                }
            },
        )
}

fn fleet_spec() -> impl Strategy<Value = Vec<ProviderSpec>> {
    prop::collection::vec(
        (
            prop::option::weighted(0.3, 0u32..24),
            prop::bool::weighted(0.1),
            prop::collection::vec(pool_spec(), 1..6),
        )
            .prop_map(|(lend, quarantined, pools)| ProviderSpec { lend, quarantined, pools }),
        1..=3,
    )
}

/// Builds the fleet and health view; `reversed` inserts providers, pools
/// and nodes in the opposite order (same names, same everything else).
fn build(spec: &[ProviderSpec], reversed: bool) -> (Fleet, HealthView) {
    let mut b = FleetBuilder::new();
    let mut h = HealthView::default();
    let mut order: Vec<usize> = (0..spec.len()).collect();
    if reversed {
        order.reverse();
    }
    for &pi in &order {
        let ps = &spec[pi];
        let pname = PROVIDERS[pi];
        b.provider(pname, ProviderKind::Sim, ps.lend).unwrap();
        if ps.quarantined {
            h.providers.insert(pname.into(), Health::UNKNOWN.quarantined());
        }
        let mut pools: Vec<usize> = (0..ps.pools.len()).collect();
        if reversed {
            pools.reverse();
        }
        for &qi in &pools {
            let q = &ps.pools[qi];
            let (accelerator, gpn, ic) = match catalog(q.accel) {
                Some((a, ic)) => (Some(a), q.gpn, if q.gpn > 1 { ic } else { Interconnect::Pcie }),
                None => (None, 0, Interconnect::Pcie),
            };
            let bits = |mask: u8, names: &[&str]| {
                names
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, n)| n.to_string())
                    .collect()
            };
            let name = format!("pool{qi}");
            let def = PoolDef {
                name: name.clone(),
                region: REGIONS[q.region].into(),
                shape: Shape {
                    accelerator,
                    gpus_per_node: gpn,
                    interconnect: ic,
                    cpu_cores: q.cpu,
                    memory_gb: q.mem,
                    disk_gb: q.disk,
                    fabric: None,
                },
                price_per_hour: q.price,
                startup: Duration::from_secs(q.startup),
                capabilities: bits(q.caps, &CAPS),
                compliance: bits(q.compliance, &COMPLIANCE),
                reserved: q.reserved,
                interruptible: q.interruptible,
                lifecycle: Lifecycle::Process,
                lend_limit_gpus: q.lend,
            };
            let label = format!("{pname}/{name}");
            match q.health {
                0 => drop(h.pools.insert(label, Health::UNKNOWN.quarantined())),
                1..=3 => drop(
                    h.pools
                        .insert(label, Health::new(0.5 + q.health as f64 / 10.0, 0.9, q.health as u32 * 7)),
                ),
                _ => {}
            }
            let mut nodes: Vec<NodeDef> = q
                .nodes
                .iter()
                .enumerate()
                .map(|(ni, n)| {
                    let used_gpus = n.used_gpus % (gpn + 1);
                    let node_name = format!("{pname}-{qi}-n{ni}");
                    match n.health {
                        0 => drop(h.nodes.insert(node_name.clone(), Health::UNKNOWN.quarantined())),
                        1..=3 => drop(
                            h.nodes.insert(node_name.clone(), Health::new(n.health as f64 / 4.0, 0.8, 5)),
                        ),
                        _ => {}
                    }
                    NodeDef {
                        name: node_name,
                        state: match n.state {
                            0 => NodeState::Cordoned,
                            1 => NodeState::Down,
                            2 => NodeState::Draining,
                            _ => NodeState::Ready,
                        },
                        used: Free {
                            gpus: used_gpus,
                            cpu_cores: (q.cpu * n.used_frac).floor(),
                            memory_gb: (q.mem * n.used_frac).floor(),
                            disk_gb: (q.disk * n.used_frac).floor(),
                        },
                        canopy_gpus: if n.canopy { used_gpus } else { 0 },
                        switch: None,
                    }
                })
                .collect();
            if reversed {
                nodes.reverse();
            }
            b.pool(def, nodes).unwrap();
        }
    }
    (b.build(), h)
}

#[derive(Debug, Clone)]
struct ReqSpec {
    req: Requirements,
    exclude_nodes: Vec<(usize, usize, usize)>,
    exclude_pools: Vec<(usize, usize)>,
}

fn globs_from(mask: u8, options: &[&str]) -> Vec<Glob> {
    options.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, g)| Glob::new(*g)).collect()
}

/// Each constraint is present only now and then, so that about half of
/// the cases place something and both outcomes are well exercised.
fn req_spec() -> impl Strategy<Value = ReqSpec> {
    fn some<T: std::fmt::Debug + Clone + 'static>(xs: Vec<T>) -> impl Strategy<Value = Option<T>> {
        prop::option::weighted(0.15, prop::sample::select(xs))
    }
    fn mask(bits: u8) -> impl Strategy<Value = u8> {
        prop::option::weighted(0.12, 1u8..(1 << bits)).prop_map(|m| m.unwrap_or(0))
    }
    let gpus = prop_oneof![
        12 => prop::sample::select(vec![0u32, 0, 0, 1, 1, 1, 1, 2, 4, 8]),
        1 => Just(9u32),
    ];
    let mem = (some(vec![16.0, 24.0, 40.0, 80.0]), some(vec![48.0, 80.0]), some(vec![24.0, 40.0]));
    let accel = (
        some(vec![Vendor::Nvidia, Vendor::Amd]),
        some(vec![vec![Family::Ada], vec![Family::Hopper, Family::Cdna3]])
            .prop_map(Option::unwrap_or_default),
        some(vec![ComputeCapability::new(8, 5), ComputeCapability::new(9, 0)]),
        some(vec![Interconnect::Pcie, Interconnect::Nvlink, Interconnect::Xgmi]),
    );
    let size = (
        prop_oneof![12 => prop::sample::select(vec![0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 16.0]), 1 => Just(70.0)],
        prop_oneof![12 => prop::sample::select(vec![1.0, 1.0, 8.0, 8.0, 16.0, 64.0]), 1 => Just(300.0)],
        prop_oneof![12 => prop::sample::select(vec![0.0, 0.0, 0.0, 0.0, 0.0, 100.0]), 1 => Just(3000.0)],
    );
    let lists = (mask(3), mask(3), mask(2), mask(2), prop::bool::weighted(0.6));
    let money =
        (some(vec![1.0, 5.0, 20.0]), some(vec![5.0, 50.0]), some(vec![1u64, 10]), some(vec![2u64, 20]));
    let soft = (
        mask(2),
        mask(2),
        any::<bool>(),
        prop::option::of(0u64..400),
        prop::option::of((0..REGIONS.len(), 1.0f64..100.0)),
    );
    let excl = (
        prop::collection::vec((0usize..3, 0usize..5, 0usize..6), 0..3),
        prop::collection::vec((0usize..3, 0usize..5), 0..2),
    );
    (gpus, mem, accel, size, lists, money, soft, excl).prop_map(
        |(
            gpus,
            (min, max, excl_min),
            (vendor, families, cc, ic),
            (cpu, ram, disk),
            (prov, reg, comp, caps, spot),
            (hourly, cost, max_rt, exp_rt),
            (pref_reg, pref_caps, reserved_first, startup, input),
            (exclude_nodes, exclude_pools),
        )| {
            let req = Requirements {
                gpus,
                gpu_memory_gb: GbRange { min, max },
                min_gpu_memory_exclusive: excl_min,
                vendor,
                families,
                min_compute_capability: cc,
                interconnect: ic,
                cpu_cores: cpu,
                memory_gb: ram,
                disk_gb: disk,
                providers: globs_from(prov, &["alpha", "b*", "*"]),
                regions: globs_from(reg, &["us-*", "eu-west", "*"]),
                compliance: globs_from(comp, &COMPLIANCE).iter().map(|g| g.as_str().to_string()).collect(),
                capabilities: globs_from(caps, &CAPS).iter().map(|g| g.as_str().to_string()).collect(),
                interruptible: spot,
                max_hourly_usd: hourly,
                max_cost_usd: cost,
                max_runtime: max_rt.map(|h| Duration::from_secs(h * 3600)),
                expected_runtime: exp_rt.map(|h| Duration::from_secs(h * 3600)),
                preferred_regions: globs_from(pref_reg, &["eu-*", "us-west"]),
                preferred_capabilities: globs_from(pref_caps, &CAPS)
                    .iter()
                    .map(|g| g.as_str().to_string())
                    .collect(),
                reserved_first,
                startup_within: startup.map(Duration::from_secs),
                inputs: input
                    .map(|(r, gb)| {
                        vec![canopy::schedule::InputSite {
                            region: Some(REGIONS[r].into()),
                            size_gb: Some(gb),
                        }]
                    })
                    .unwrap_or_default(),
                ..Requirements::default()
            };
            ReqSpec { req, exclude_nodes, exclude_pools }
        },
    )
}

/// Resolves the exclusion indices against names that may or may not exist.
fn resolve(spec: &ReqSpec) -> Requirements {
    let mut req = spec.req.clone();
    req.exclude_nodes =
        spec.exclude_nodes.iter().map(|(p, q, n)| format!("{}-{q}-n{n}", PROVIDERS[*p])).collect();
    req.exclude_pools =
        spec.exclude_pools.iter().map(|(p, q)| format!("{}/pool{q}", PROVIDERS[*p])).collect();
    req
}

/// Every hard constraint, spelled out with no shared code.
fn brute_feasible(f: &Fleet, h: &HealthView, r: &Requirements, node: NodeIdx) -> bool {
    let n = f.node(node);
    let p = f.pool(n.pool);
    let prov = f.provider(p.provider);
    let label = format!("{}/{}", prov.name, p.name);
    let any_glob = |gs: &[Glob], s: &str| gs.is_empty() || gs.iter().any(|g| g.matches(s));
    if !any_glob(&r.providers, &prov.name) || !any_glob(&r.regions, &p.region) {
        return false;
    }
    if !r.compliance.iter().all(|c| p.compliance.contains(c))
        || !r.capabilities.iter().all(|c| p.capabilities.contains(c))
    {
        return false;
    }
    if p.interruptible && !r.interruptible {
        return false;
    }
    if r.gpus > 0 {
        let Some(a) = &p.shape.accelerator else {
            return false;
        };
        if p.shape.gpus_per_node < r.gpus {
            return false;
        }
        if r.vendor.is_some_and(|v| v != a.vendor) {
            return false;
        }
        if !r.families.is_empty() && !r.families.contains(&a.family) {
            return false;
        }
        if r.min_compute_capability.is_some_and(|cc| a.compute_capability < cc) {
            return false;
        }
        if r.gpu_memory_gb.min.is_some_and(|m| a.memory_gb < m)
            || r.gpu_memory_gb.max.is_some_and(|m| a.memory_gb > m)
            || r.min_gpu_memory_exclusive.is_some_and(|m| a.memory_gb <= m)
        {
            return false;
        }
        if r.gpus > 1 {
            match r.interconnect {
                Some(Interconnect::Nvlink) if p.shape.interconnect != Interconnect::Nvlink => {
                    return false;
                }
                Some(Interconnect::Xgmi) if p.shape.interconnect != Interconnect::Xgmi => {
                    return false;
                }
                _ => {}
            }
        }
        let pool_idx = PoolIdx(f.pools.iter().position(|x| std::ptr::eq(x, p)).unwrap() as u32);
        if p.lend_limit_gpus.is_some_and(|l| f.canopy_gpus_in_pool(pool_idx) + r.gpus > l) {
            return false;
        }
        if prov.lend_limit_gpus.is_some_and(|l| f.canopy_gpus_in_provider(p.provider) + r.gpus > l) {
            return false;
        }
    }
    if p.shape.cpu_cores < r.cpu_cores || p.shape.memory_gb < r.memory_gb || p.shape.disk_gb < r.disk_gb {
        return false;
    }
    if h.provider(&prov.name).quarantined || h.pool(&label).quarantined || h.node(&n.name).quarantined {
        return false;
    }
    if r.exclude_pools.contains(&label) || r.exclude_nodes.contains(&n.name) {
        return false;
    }
    let share = p.hourly_share(r.gpus, r.cpu_cores, r.memory_gb);
    if r.max_hourly_usd.is_some_and(|m| share > m) {
        return false;
    }
    let hours = r.max_runtime.or(r.expected_runtime).map(|d| d.as_secs_f64() / 3600.0);
    if let (Some(cap), Some(hours)) = (r.max_cost_usd, hours)
        && share * hours > cap
    {
        return false;
    }
    n.state == NodeState::Ready
        && n.free.gpus >= r.gpus
        && n.free.cpu_cores >= r.cpu_cores
        && n.free.memory_gb >= r.memory_gb
        && n.free.disk_gb >= r.disk_gb
}

fn feasible_nodes(f: &Fleet, h: &HealthView, r: &Requirements) -> Vec<NodeIdx> {
    (0..f.nodes.len() as u32).map(NodeIdx).filter(|&n| brute_feasible(f, h, r, n)).collect()
}

fn all_policy() -> Policy {
    Policy { top_k: 1000, ..Policy::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// (1) Every candidate satisfies every hard constraint, and (2) the
    /// workload is unschedulable exactly when no node is feasible.
    #[test]
    fn candidates_are_feasible_and_unschedulable_means_none_is(spec in fleet_spec(), rs in req_spec()) {
        let (fleet, health) = build(&spec, false);
        let req = resolve(&rs);
        let snap = Snapshot::new(&fleet, &health);
        let feasible = feasible_nodes(&fleet, &health, &req);
        match place(&req, &snap, &all_policy()) {
            Decision::Placed(p) => {
                prop_assert!(!feasible.is_empty());
                for c in &p.candidates {
                    prop_assert!(brute_feasible(&fleet, &health, &req, c.node_idx), "infeasible candidate {c:?}");
                    prop_assert_eq!(&fleet.node(c.node_idx).name, &c.node);
                    prop_assert_eq!(fleet.node(c.node_idx).pool, c.pool_idx);
                    prop_assert_eq!(fleet.pool_label(c.pool_idx), c.pool.clone());
                }
                // With room for all, the candidate pools are exactly the pools with a feasible node.
                let want: BTreeSet<u32> = feasible.iter().map(|&n| fleet.node(n).pool.0).collect();
                let got: BTreeSet<u32> = p.candidates.iter().map(|c| c.pool_idx.0).collect();
                prop_assert_eq!(got.len(), p.candidates.len(), "one candidate per pool");
                prop_assert_eq!(&got, &want);
                // Every other pool is ruled out exactly once.
                let ruled: BTreeSet<u32> = p.considered.ruled_out.iter().map(|r| r.pool.0).collect();
                prop_assert_eq!(ruled.len(), p.considered.ruled_out.len());
                prop_assert!(ruled.is_disjoint(&got));
                prop_assert_eq!(ruled.len() + got.len(), fleet.pools.len());
                prop_assert_eq!(p.considered.feasible_pools, got.len());
                // Within its pool, the node is the healthiest, then the tightest fit.
                for c in &p.candidates {
                    let key = |n: NodeIdx| {
                        let node = fleet.node(n);
                        (-health.node(&node.name).score, node.free.gpus, node.name.clone())
                    };
                    let best = feasible.iter().copied().filter(|&n| fleet.node(n).pool == c.pool_idx)
                        .min_by(|&a, &b| key(a).partial_cmp(&key(b)).unwrap()).unwrap();
                    prop_assert_eq!(best, c.node_idx);
                }
                // Work without GPUs takes a GPU node only when no CPU-only
                // node fits, and each GPU-node candidate says which it is.
                let has_gpus = |n: NodeIdx| fleet.pool(fleet.node(n).pool).shape.gpus_per_node > 0;
                let cpu_fits = feasible.iter().any(|&n| !has_gpus(n));
                for c in &p.candidates {
                    let want = (req.gpus == 0 && has_gpus(c.node_idx)).then_some(if cpu_fits {
                        GpuNode::KeptForGpuWork
                    } else {
                        GpuNode::LastResort
                    });
                    prop_assert_eq!(c.gpu_node, want, "{}", c.pool);
                }
                if req.gpus == 0 && cpu_fits {
                    prop_assert!(!has_gpus(p.candidates[0].node_idx), "{} placed on a GPU node", p.candidates[0].pool);
                }
                // Ranked: CPU-only nodes first for work without GPUs, then
                // score desc, then hourly asc, then label, then node.
                for w in p.candidates.windows(2) {
                    let (a, b) = (&w[0], &w[1]);
                    let tier = |c: &Candidate| c.gpu_node == Some(GpuNode::KeptForGpuWork);
                    let ka = (tier(a), -a.score, a.hourly_usd, a.pool.clone(), a.node.clone());
                    let kb = (tier(b), -b.score, b.hourly_usd, b.pool.clone(), b.node.clone());
                    prop_assert!(ka < kb, "{ka:?} !< {kb:?}");
                    prop_assert!((0.0..=100.0).contains(&a.score));
                }
            }
            Decision::Unschedulable(e) => {
                prop_assert!(feasible.is_empty(), "unschedulable, yet {:?} fits:\n{}", fleet.node(feasible[0]).name, e);
            }
        }
    }

    /// (3) Same input, same output; and the ranking does not depend on the
    /// order providers, pools and nodes were inserted in.
    #[test]
    fn ranking_is_deterministic(spec in fleet_spec(), rs in req_spec(), k in 1usize..4, twins in any::<bool>()) {
        // Twins: every provider offers the same pools, so scores tie and the
        // label and node-name tie-breaks decide.
        let spec: Vec<ProviderSpec> = if twins {
            spec.iter().map(|_| ProviderSpec { lend: None, quarantined: false, pools: spec[0].pools.clone() }).collect()
        } else {
            spec
        };
        let policy = Policy { top_k: k, ..Policy::default() };
        let req = resolve(&rs);
        let (fleet, health) = build(&spec, false);
        let snap = Snapshot::new(&fleet, &health);
        let a = place(&req, &snap, &policy);
        let b = place(&req, &Snapshot::new(&fleet, &health.clone()), &policy);
        prop_assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());

        // Keeping only the best k (and skipping pools whose score bound
        // cannot make it) gives exactly the first k of the full ranking.
        if let (Decision::Placed(x), Decision::Placed(all)) = (&a, place(&req, &snap, &all_policy())) {
            let view = |cs: &[canopy::schedule::Candidate]| cs.iter()
                .map(|c| (c.pool.clone(), c.node.clone(), c.score.to_bits()))
                .collect::<Vec<_>>();
            prop_assert_eq!(view(&x.candidates), view(&all.candidates[..k.min(all.candidates.len())]));
        }

        let (fleet2, health2) = build(&spec, true);
        let c = place(&req, &Snapshot::new(&fleet2, &health2), &policy);
        match (&a, &c) {
            (Decision::Placed(x), Decision::Placed(y)) => {
                let view = |p: &canopy::schedule::Placement| p.candidates.iter()
                    .map(|c| (c.pool.clone(), c.node.clone(), c.score.to_bits(), c.hourly_usd.to_bits()))
                    .collect::<Vec<_>>();
                prop_assert_eq!(view(x), view(y));
            }
            (Decision::Unschedulable(x), Decision::Unschedulable(y)) => {
                prop_assert_eq!(&x.reasons, &y.reasons);
                prop_assert_eq!(&x.exhausted, &y.exhausted);
                prop_assert_eq!(x.nearest.as_ref().map(|n| n.to_string()), y.nearest.as_ref().map(|n| n.to_string()));
            }
            _ => prop_assert!(false, "insertion order changed the outcome"),
        }
    }

    /// (4) An explanation counts every node exactly once.
    #[test]
    fn explanation_counts_sum_to_total_nodes(spec in fleet_spec(), rs in req_spec()) {
        let (fleet, health) = build(&spec, false);
        let req = resolve(&rs);
        if let Decision::Unschedulable(e) = place(&req, &Snapshot::new(&fleet, &health), &Policy::default()) {
            prop_assert_eq!(e.total_nodes, fleet.nodes.len());
            prop_assert_eq!(e.reasons.iter().map(|r| r.nodes).sum::<usize>(), fleet.nodes.len());
            prop_assert!(e.reasons.windows(2).all(|w| w[0].nodes >= w[1].nodes));
            prop_assert!(e.reasons.iter().all(|r| r.nodes > 0));
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default().to_string();
            let prefix = format!("0/{} nodes fit", fleet.nodes.len());
            prop_assert!(first.starts_with(&prefix));
        }
    }
}
