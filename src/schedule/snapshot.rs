//! [`Snapshot`]: the fleet and its health, prepared once so that each
//! decision touches classes and pools and only a handful of nodes.
//!
//! It owns the indexes: pools grouped by class, region, provider and
//! compliance tag as [`PoolSet`]s; health and quarantine flags resolved
//! from names to indices; lend-limit usage; compact per-pool rows for the
//! hot loop; and, per pool, its ready nodes bucketed by free GPU count and
//! ordered by node health, with their free capacity inline. Build a new
//! one whenever the fleet or health view changes. No I/O, no clock.

use super::bitset::PoolSet;
use super::filter::Filter;
use crate::fleet::{Fleet, Free, NodeIdx, NodeState, PoolIdx};
use crate::health::{Health, HealthView};
use std::collections::HashMap;

/// The success prior and weight the snapshot precomputes smoothed success
/// for: [`super::Policy::default`]'s. Other policies compute it per decision.
pub(crate) const CACHED_PRIOR: (f64, f64) = (0.95, 10.0);

/// The startup reference time the snapshot precomputes the startup factor
/// for: [`super::Policy::default`]'s, without `startup_within`.
pub(crate) const CACHED_STARTUP_REFERENCE_S: f64 = 300.0;

/// A prepared, indexed view of a fleet and its health.
#[derive(Debug, Clone)]
pub struct Snapshot {
    fleet: Fleet,
    /// Per pool, what every decision reads, packed tight.
    pub(crate) rows: Vec<PoolRow>,
    /// Per pool, what only output and explanations read.
    pub(crate) pools: Vec<PoolInfo>,
    /// Per provider: GPUs Canopy holds, and its lend limit (`u64::MAX`: none).
    pub(crate) provider_lend: Vec<(u64, u64)>,
    pub(crate) classes: Vec<ClassInfo>,
    pub(crate) nodes: Vec<NodeInfo>,
    /// Distinct region names, sorted; `PoolRow::region` indexes this.
    pub(crate) regions: Vec<String>,
    pub(crate) region_pools: Vec<PoolSet>,
    pub(crate) provider_pools: Vec<PoolSet>,
    pub(crate) compliance_pools: HashMap<String, PoolSet>,
    pub(crate) interruptible: PoolSet,
    pub(crate) provider_quarantined: PoolSet,
    pub(crate) pool_quarantined: PoolSet,
    pub(crate) all_pools: PoolSet,
    /// Smallest GPU memory of any pool (0 without GPU pools).
    pub(crate) min_gpu_memory: f64,
    pool_by_label: HashMap<String, PoolIdx>,
    node_by_name: HashMap<String, NodeIdx>,
    /// Ready nodes, pool by pool and free-GPU threshold by threshold.
    index: Vec<ReadyNode>,
    /// Offsets into `index`; see [`Snapshot::ready_nodes`].
    index_at: Vec<u32>,
    /// Per list (same positions as `index_at`): where its first node with
    /// some free CPU and some free memory sits. Nodes before it can host no
    /// work that asks for CPU and memory, so a pick for such work starts here.
    usable_at: Vec<u32>,
    /// The node at each `usable_at` ([`NO_NODE`] when none), dense so the
    /// common pick reads one small array instead of the large index.
    heads: Vec<ReadyNode>,
}

/// `ReadyNode::node` of an empty list's head.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// What every decision reads of a pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolRow {
    pub price: f64,
    pub startup_s: f64,
    /// The startup factor for [`CACHED_STARTUP_REFERENCE_S`].
    pub startup_score: f64,
    /// Provider score × pool score.
    pub health: f64,
    /// The most any node of the pool can score on health and (for
    /// [`CACHED_PRIOR`]) success: upper bounds that let a decision skip
    /// scoring pools that cannot make its top k.
    pub health_bound: f64,
    pub success_bound: f64,
    /// Memory per GPU; 0 for CPU-only pools.
    pub gpu_memory: f64,
    /// GPUs Canopy holds in the pool, and the pool's lend limit (`u64::MAX`: none).
    pub held: u64,
    pub limit: u64,
    pub provider: u32,
    pub class: u32,
    pub region: u32,
    /// Position of the pool's label in sorted order, for tie-breaks.
    pub label_rank: u32,
    /// Start of this pool's offsets in `Snapshot::index_at`.
    pub index_base: u32,
    pub gpus_per_node: u32,
    pub reserved: bool,
    /// Expected preemptions per hour a workload runs here: observed, shrunk
    /// toward a prior that depends on whether the capacity can be reclaimed.
    /// (Hardware faults strike every pool; node health and quarantine deal
    /// with those.)
    pub hazard_per_h: f64,
}

/// What output and explanations read of a pool.
#[derive(Debug, Clone)]
pub(crate) struct PoolInfo {
    pub label: String,
    /// "8× H100-SXM 80GB nvlink" or "cpu".
    pub accelerator: String,
    pub health: Health,
    pub provider_health: Health,
    /// Why the pool has no ready node, when it has none.
    pub unready: Filter,
}

#[derive(Debug, Clone)]
pub(crate) struct ClassInfo {
    /// A pool of this class, for its shape and capability tags.
    pub rep: PoolIdx,
    pub pools: PoolSet,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeInfo {
    pub health: Health,
    /// Node success smoothed toward its pool's, for [`CACHED_PRIOR`].
    pub success: f64,
    pub name_rank: u32,
    pub quarantined: bool,
}

/// A ready node in the index, its free capacity inline so that picking a
/// node does not touch the fleet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadyNode {
    pub node: u32,
    pub free: Free,
}

impl Snapshot {
    /// Indexes `fleet` with `health`. Costs O(nodes · log nodes); meant to
    /// be built once per fleet or health change and shared by decisions.
    pub fn new(fleet: &Fleet, health: &HealthView) -> Self {
        let fleet = fleet.clone();
        let n_pools = fleet.pools.len();

        let mut regions: Vec<String> = fleet.pools.iter().map(|p| p.region.clone()).collect();
        regions.sort();
        regions.dedup();
        let mut region_pools = vec![PoolSet::empty(n_pools); regions.len()];
        let mut provider_pools = vec![PoolSet::empty(n_pools); fleet.providers.len()];
        let mut compliance_pools: HashMap<String, PoolSet> = HashMap::new();
        let mut interruptible = PoolSet::empty(n_pools);
        let mut provider_quarantined = PoolSet::empty(n_pools);
        let mut pool_quarantined = PoolSet::empty(n_pools);
        let mut classes: Vec<ClassInfo> = Vec::new();
        // Fleet class id → snapshot classes carrying it. A fleet built by
        // hand may give unequal shapes one class id; those are split here.
        let mut by_fleet_class: HashMap<u32, Vec<u32>> = HashMap::new();

        let labels: Vec<String> = (0..n_pools).map(|i| fleet.pool_label(PoolIdx(i as u32))).collect();
        let label_rank = ranks(&labels);
        let node_names: Vec<String> = fleet.nodes.iter().map(|n| n.name.clone()).collect();
        let node_rank = ranks(&node_names);

        let (prior, weight) = CACHED_PRIOR;
        let cached = super::Requirements::default();
        let cached_policy =
            super::Policy { startup_reference_s: CACHED_STARTUP_REFERENCE_S, ..super::Policy::default() };
        let mut nodes: Vec<NodeInfo> = fleet
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let h = health.node(&n.name);
                NodeInfo { health: h, success: 0.0, name_rank: node_rank[i], quarantined: h.quarantined }
            })
            .collect();

        let mut rows = Vec::with_capacity(n_pools);
        let mut pools = Vec::with_capacity(n_pools);
        let mut index = Vec::new();
        let mut index_at = Vec::new();
        let mut heads = Vec::new();
        let mut usable_at = Vec::new();
        for (i, pool) in fleet.pools.iter().enumerate() {
            let p = PoolIdx(i as u32);
            let provider = fleet.provider(pool.provider);
            // Always found: `regions` was collected from these very pools.
            let region = regions.binary_search(&pool.region).unwrap_or(0) as u32;
            region_pools[region as usize].insert(i);
            provider_pools[pool.provider.0 as usize].insert(i);
            for tag in &pool.compliance {
                compliance_pools.entry(tag.clone()).or_insert_with(|| PoolSet::empty(n_pools)).insert(i);
            }
            if pool.interruptible {
                interruptible.insert(i);
            }
            let provider_health = health.provider(&provider.name);
            let pool_health = health.pool(&labels[i]);
            if provider_health.quarantined {
                provider_quarantined.insert(i);
            }
            if pool_health.quarantined {
                pool_quarantined.insert(i);
            }

            let same = by_fleet_class.entry(pool.class.0).or_default();
            let found = same.iter().copied().find(|&c| {
                let rep = fleet.pool(classes[c as usize].rep);
                rep.shape == pool.shape && rep.capabilities == pool.capabilities
            });
            let class = found.unwrap_or_else(|| {
                classes.push(ClassInfo { rep: p, pools: PoolSet::empty(n_pools) });
                let c = classes.len() as u32 - 1;
                same.push(c);
                c
            });
            classes[class as usize].pools.insert(i);

            let pool_success =
                pool_health.smoothed_success(provider_health.smoothed_success(prior, weight), weight);
            let health = provider_health.score * pool_health.score;
            let (mut health_bound, mut success_bound) = (0.0f64, 0.0f64);
            for n in pool.nodes.clone() {
                let info = &mut nodes[n as usize];
                info.success = info.health.smoothed_success(pool_success, weight);
                health_bound = health_bound.max(unit(health * info.health.score));
                success_bound = success_bound.max(unit(info.success));
            }
            let index_base = index_at.len() as u32;
            let unready =
                build_ready_index(&fleet, &nodes, p, &mut index, &mut index_at, &mut usable_at, &mut heads);
            rows.push(PoolRow {
                price: pool.price_per_hour,
                startup_s: pool.startup.as_secs_f64(),
                startup_score: super::score::startup_score(
                    pool.startup.as_secs_f64(),
                    &cached,
                    &cached_policy,
                ),
                health,
                health_bound,
                success_bound,
                gpu_memory: pool.gpu_memory_gb(),
                held: fleet.pool_nodes(p).iter().map(|n| n.canopy_gpus as u64).sum(),
                limit: pool.lend_limit_gpus.map_or(u64::MAX, u64::from),
                provider: pool.provider.0,
                class,
                region,
                label_rank: label_rank[i],
                index_base,
                gpus_per_node: pool.shape.gpus_per_node,
                reserved: pool.reserved,
                hazard_per_h: hazard_per_h(&pool_health, pool.interruptible),
            });
            pools.push(PoolInfo {
                label: labels[i].clone(),
                accelerator: accelerator_text(&fleet, p),
                health: pool_health,
                provider_health,
                unready,
            });
        }
        let mut provider_lend: Vec<(u64, u64)> =
            fleet.providers.iter().map(|p| (0, p.lend_limit_gpus.map_or(u64::MAX, u64::from))).collect();
        for (row, p) in rows.iter().zip(&fleet.pools) {
            provider_lend[p.provider.0 as usize].0 += row.held;
        }
        let min_gpu_memory =
            rows.iter().map(|r| r.gpu_memory).filter(|&m| m > 0.0).fold(f64::INFINITY, f64::min);
        let pool_by_label = labels.into_iter().enumerate().map(|(i, l)| (l, PoolIdx(i as u32))).collect();
        let node_by_name = node_names.into_iter().enumerate().map(|(i, n)| (n, NodeIdx(i as u32))).collect();
        Self {
            all_pools: PoolSet::full(n_pools),
            fleet,
            rows,
            pools,
            provider_lend,
            classes,
            nodes,
            regions,
            region_pools,
            provider_pools,
            compliance_pools,
            interruptible,
            provider_quarantined,
            pool_quarantined,
            min_gpu_memory: if min_gpu_memory.is_finite() { min_gpu_memory } else { 0.0 },
            pool_by_label,
            node_by_name,
            index,
            index_at,
            usable_at,
            heads,
        }
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Number of distinct pool shapes the snapshot checks constraints on.
    pub fn class_count(&self) -> usize {
        self.classes.len()
    }

    pub fn pool_by_label(&self, label: &str) -> Option<PoolIdx> {
        self.pool_by_label.get(label).copied()
    }

    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.node_by_name.get(name).copied()
    }

    /// `provider/pool`.
    pub fn label(&self, p: PoolIdx) -> &str {
        &self.pools[p.0 as usize].label
    }

    /// The pool's accelerator as operators read it: "8× H100-SXM 80GB nvlink", "cpu".
    pub fn accelerator(&self, p: PoolIdx) -> &str {
        &self.pools[p.0 as usize].accelerator
    }

    /// GPUs Canopy holds in the pool and in its provider.
    pub(crate) fn held(&self, p: PoolIdx) -> (u64, u64) {
        let row = &self.rows[p.0 as usize];
        (row.held, self.provider_lend[row.provider as usize].0)
    }

    /// The first of [`Snapshot::ready_nodes`]`(p, gpus)` with some free CPU
    /// and memory, if any, from the dense head array.
    #[inline]
    pub(crate) fn best_usable_node(&self, row: &PoolRow, gpus: u32) -> Option<&ReadyNode> {
        if gpus > row.gpus_per_node {
            return None;
        }
        self.heads.get(row.index_base as usize + gpus as usize).filter(|h| h.node != NO_NODE)
    }

    /// Ready, unquarantined nodes of the pool with at least `gpus` free
    /// GPUs, best first: healthiest, then fewest free GPUs, then by name;
    /// and how many of them lead with no free CPU or no free memory.
    #[inline]
    pub(crate) fn ready_nodes(&self, p: PoolIdx, gpus: u32) -> (&[ReadyNode], usize) {
        let row = &self.rows[p.0 as usize];
        if gpus > row.gpus_per_node {
            return (&[], 0);
        }
        let at = row.index_base as usize + gpus as usize;
        let (lo, hi) = (self.index_at[at] as usize, self.index_at[at + 1] as usize);
        (&self.index[lo..hi], self.usable_at[at] as usize - lo)
    }
}

/// Appends the pool's ready-node lists (one per free-GPU threshold
/// `0..=gpus_per_node`) and returns why the pool has no ready node, for
/// when it has none: the most common node state or quarantine.
fn build_ready_index(
    fleet: &Fleet,
    nodes: &[NodeInfo],
    p: PoolIdx,
    index: &mut Vec<ReadyNode>,
    index_at: &mut Vec<u32>,
    usable_at: &mut Vec<u32>,
    heads: &mut Vec<ReadyNode>,
) -> Filter {
    let pool = fleet.pool(p);
    let mut ready: Vec<u32> = Vec::new();
    let mut why =
        [(Filter::Cordoned, 0), (Filter::Draining, 0), (Filter::Down, 0), (Filter::NodeQuarantined, 0)];
    for i in pool.nodes.clone() {
        let n = &fleet.nodes[i as usize];
        let slot = match n.state {
            NodeState::Ready if nodes[i as usize].quarantined => 3,
            NodeState::Ready => {
                ready.push(i);
                continue;
            }
            NodeState::Cordoned => 0,
            NodeState::Draining => 1,
            NodeState::Down => 2,
        };
        why[slot].1 += 1;
    }
    ready.sort_by(|&a, &b| {
        let (na, nb) = (&nodes[a as usize], &nodes[b as usize]);
        let free = |i: u32| fleet.nodes[i as usize].free.gpus;
        nb.health
            .score
            .total_cmp(&na.health.score)
            .then(free(a).cmp(&free(b)))
            .then(na.name_rank.cmp(&nb.name_rank))
    });
    for g in 0..=pool.shape.gpus_per_node {
        let at = index.len();
        index_at.push(at as u32);
        let free = |i: u32| fleet.nodes[i as usize].free;
        index
            .extend(ready.iter().map(|&i| ReadyNode { node: i, free: free(i) }).filter(|r| r.free.gpus >= g));
        let usable = index[at..].iter().position(|r| r.free.cpu_cores > 0.0 && r.free.memory_gb > 0.0);
        let usable = at + usable.unwrap_or(index.len() - at);
        usable_at.push(usable as u32);
        heads.push(index.get(usable).copied().unwrap_or(ReadyNode { node: NO_NODE, free: Free::default() }));
    }
    index_at.push(index.len() as u32);
    usable_at.push(index.len() as u32);
    heads.push(ReadyNode { node: NO_NODE, free: Free::default() });
    if pool.nodes.is_empty() {
        return Filter::NoNodes;
    }
    // Most common; ties go to the earlier filter (max_by_key keeps the last max).
    why.iter().rev().max_by_key(|(_, c)| *c).map_or(Filter::Down, |(f, _)| *f)
}

/// Clamped to 0..=1, the range of every raw factor value (NaN stays NaN).
/// Prior preemption rate per running hour of capacity that can be
/// reclaimed (spot, market): about one run in five lost within a day.
pub(crate) const INTERRUPTIBLE_PRIOR_PER_H: f64 = 0.01;
/// How many running hours the prior is worth against observation.
pub(crate) const HAZARD_PRIOR_H: f64 = 100.0;

/// A pool's preemption rate per running hour: observed preemptions over
/// observed running hours, shrunk toward the prior for its kind (a Gamma
/// prior worth [`HAZARD_PRIOR_H`] hours), so a pool with little history is
/// judged by its kind and a long record speaks for itself. Capacity that
/// cannot be reclaimed starts at 0 and stays there unless a provider
/// reclaims it anyway.
pub(crate) fn hazard_per_h(health: &Health, interruptible: bool) -> f64 {
    let prior = if interruptible { INTERRUPTIBLE_PRIOR_PER_H } else { 0.0 };
    (f64::from(health.preemptions) + prior * HAZARD_PRIOR_H) / (health.exposure_h.max(0.0) + HAZARD_PRIOR_H)
}

pub(crate) fn unit(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// Rank of each string in sorted order. Labels and node names are unique,
/// so the ranks are too, and they do not depend on insertion order.
fn ranks(names: &[String]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.sort_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
    let mut rank = vec![0u32; names.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    rank
}

fn accelerator_text(fleet: &Fleet, p: PoolIdx) -> String {
    let s = &fleet.pool(p).shape;
    match &s.accelerator {
        None => "cpu".into(),
        Some(a) => {
            let mem = super::filter::num(a.memory_gb);
            let mut t = format!("{}× {}", s.gpus_per_node, a.model);
            if !a.model.contains(&format!("{mem}GB")) {
                t.push_str(&format!(" {mem}GB"));
            }
            if s.gpus_per_node > 1 && s.interconnect != crate::accel::Interconnect::Pcie {
                t.push_str(&format!(" {}", s.interconnect));
            }
            t
        }
    }
}
