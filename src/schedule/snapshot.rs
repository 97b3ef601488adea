//! [`Snapshot`]: the fleet and its health, prepared once so that each
//! decision touches classes and pools and only a handful of nodes.
//!
//! It owns the indexes: pools grouped by class, region, provider and
//! compliance tag as [`PoolSet`]s; health and quarantine flags resolved
//! from names to indices; lend-limit usage; and, per pool, its ready
//! nodes bucketed by free GPU count and ordered by node health. Build a new
//! one whenever the fleet or health view changes. No I/O, no clock.

use super::bitset::PoolSet;
use super::filter::Filter;
use crate::fleet::{Fleet, NodeIdx, NodeState, PoolIdx};
use crate::health::{Health, HealthView};
use std::collections::HashMap;

/// A prepared, indexed view of a fleet and its health.
#[derive(Debug, Clone)]
pub struct Snapshot {
    fleet: Fleet,
    pub(crate) pools: Vec<PoolInfo>,
    pub(crate) classes: Vec<ClassInfo>,
    pub(crate) nodes: Vec<NodeInfo>,
    /// Distinct region names, sorted; `PoolInfo::region` indexes this.
    pub(crate) regions: Vec<String>,
    pub(crate) region_pools: Vec<PoolSet>,
    pub(crate) provider_pools: Vec<PoolSet>,
    pub(crate) compliance_pools: HashMap<String, PoolSet>,
    pub(crate) interruptible: PoolSet,
    pub(crate) provider_quarantined: PoolSet,
    pub(crate) pool_quarantined: PoolSet,
    pub(crate) all_pools: PoolSet,
    pool_by_label: HashMap<String, PoolIdx>,
    node_by_name: HashMap<String, NodeIdx>,
    /// GPUs Canopy holds per provider.
    held_provider: Vec<u64>,
    /// Node indices, pool by pool and free-GPU threshold by threshold.
    index: Vec<u32>,
    /// Offsets into `index`; see [`Snapshot::ready_nodes`].
    index_at: Vec<u32>,
}

/// What a decision needs of a pool, precomputed.
#[derive(Debug, Clone)]
pub(crate) struct PoolInfo {
    pub region: u32,
    pub label: String,
    /// "8× H100-SXM 80GB nvlink" or "cpu".
    pub accelerator: String,
    /// Position of `label` in sorted order, for tie-breaks.
    pub label_rank: u32,
    pub health: Health,
    pub provider_health: Health,
    /// GPUs Canopy holds in the pool.
    pub held: u64,
    /// Start of this pool's offsets in `Snapshot::index_at`.
    index_base: u32,
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
    pub name_rank: u32,
    pub quarantined: bool,
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
        let node_rank = ranks(&fleet.nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>());

        let nodes: Vec<NodeInfo> = fleet
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let h = health.node(&n.name);
                NodeInfo { health: h, name_rank: node_rank[i], quarantined: h.quarantined }
            })
            .collect();

        let mut pools = Vec::with_capacity(n_pools);
        let mut index = Vec::new();
        let mut index_at = Vec::new();
        for (i, pool) in fleet.pools.iter().enumerate() {
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
                classes.push(ClassInfo { rep: PoolIdx(i as u32), pools: PoolSet::empty(n_pools) });
                let c = classes.len() as u32 - 1;
                same.push(c);
                c
            });
            classes[class as usize].pools.insert(i);

            let index_base = index_at.len() as u32;
            let unready = build_ready_index(&fleet, &nodes, PoolIdx(i as u32), &mut index, &mut index_at);
            pools.push(PoolInfo {
                region,
                label: labels[i].clone(),
                accelerator: accelerator_text(&fleet, PoolIdx(i as u32)),
                label_rank: label_rank[i],
                health: pool_health,
                provider_health,
                held: fleet.pool_nodes(PoolIdx(i as u32)).iter().map(|n| n.canopy_gpus as u64).sum(),
                index_base,
                unready,
            });
        }
        let mut held_provider = vec![0u64; fleet.providers.len()];
        for (pi, p) in fleet.pools.iter().enumerate() {
            held_provider[p.provider.0 as usize] += pools[pi].held;
        }
        let pool_by_label = labels.into_iter().enumerate().map(|(i, l)| (l, PoolIdx(i as u32))).collect();
        let node_by_name =
            fleet.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), NodeIdx(i as u32))).collect();
        Self {
            all_pools: PoolSet::full(n_pools),
            fleet,
            pools,
            classes,
            nodes,
            regions,
            region_pools,
            provider_pools,
            compliance_pools,
            interruptible,
            provider_quarantined,
            pool_quarantined,
            pool_by_label,
            node_by_name,
            held_provider,
            index,
            index_at,
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

    /// (provider quarantined, pool quarantined).
    pub(crate) fn quarantine(&self, p: PoolIdx) -> (bool, bool) {
        let i = &self.pools[p.0 as usize];
        (i.provider_health.quarantined, i.health.quarantined)
    }

    /// Whether `gpus` more GPUs stay within the (pool, provider) lend
    /// limits. Work without GPUs never counts against them.
    pub(crate) fn lend_room(&self, p: PoolIdx, gpus: u32) -> (bool, bool) {
        if gpus == 0 {
            return (true, true);
        }
        let pool = self.fleet.pool(p);
        let provider = self.fleet.provider(pool.provider);
        let want = gpus as u64;
        let held_pool = self.pools[p.0 as usize].held;
        let held_provider = self.held_provider[pool.provider.0 as usize];
        (
            pool.lend_limit_gpus.is_none_or(|l| held_pool + want <= l as u64),
            provider.lend_limit_gpus.is_none_or(|l| held_provider + want <= l as u64),
        )
    }

    /// GPUs Canopy holds in the pool and in its provider.
    pub(crate) fn held(&self, p: PoolIdx) -> (u64, u64) {
        let provider = self.fleet.pool(p).provider;
        (self.pools[p.0 as usize].held, self.held_provider[provider.0 as usize])
    }

    /// Ready, unquarantined nodes of the pool with at least `gpus` free
    /// GPUs, best first: healthiest, then fewest free GPUs, then by name.
    pub(crate) fn ready_nodes(&self, p: PoolIdx, gpus: u32) -> &[u32] {
        let pool = self.fleet.pool(p);
        if gpus > pool.shape.gpus_per_node {
            return &[];
        }
        let at = self.pools[p.0 as usize].index_base as usize + gpus as usize;
        let (lo, hi) = (self.index_at[at] as usize, self.index_at[at + 1] as usize);
        &self.index[lo..hi]
    }
}

/// Appends the pool's ready-node lists (one per free-GPU threshold
/// `0..=gpus_per_node`) and returns why the pool has no ready node, for
/// when it has none: the most common node state or quarantine.
fn build_ready_index(
    fleet: &Fleet,
    nodes: &[NodeInfo],
    p: PoolIdx,
    index: &mut Vec<u32>,
    index_at: &mut Vec<u32>,
) -> Filter {
    let pool = fleet.pool(p);
    let mut ready: Vec<u32> = Vec::new();
    let mut why: [(Filter, usize); 4] =
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
        nb.health
            .score
            .total_cmp(&na.health.score)
            .then(fleet.nodes[a as usize].free.gpus.cmp(&fleet.nodes[b as usize].free.gpus))
            .then(na.name_rank.cmp(&nb.name_rank))
    });
    for g in 0..=pool.shape.gpus_per_node {
        index_at.push(index.len() as u32);
        index.extend(ready.iter().copied().filter(|&i| fleet.nodes[i as usize].free.gpus >= g));
    }
    index_at.push(index.len() as u32);
    if pool.nodes.is_empty() {
        return Filter::NoNodes;
    }
    // Most common; ties go to the earlier filter (max_by_key keeps the last max).
    why.iter().rev().max_by_key(|(_, c)| *c).map_or(Filter::Down, |(f, _)| *f)
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
