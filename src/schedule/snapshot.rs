//! [`Snapshot`]: the fleet and its health, prepared once so that each
//! decision touches classes and pools and only a handful of nodes.
//!
//! It owns the indexes: pools grouped by class, region, provider and
//! compliance tag as [`PoolSet`]s; health and quarantine flags resolved
//! from names to indices; lend-limit usage; compact per-pool rows for the
//! hot loop; and, per pool, its ready nodes bucketed by free GPU count and
//! ordered by node health, with their free capacity inline, and how many
//! of each bucket sit behind each switch. Build one per
//! fleet and health view; when one node's capacity, state or health, or
//! one pool's or provider's health changes, update it in place with the
//! `set_*` methods, which touch only that node's lists (or that pool's or
//! provider's figures) and leave the snapshot exactly as a fresh build of
//! the changed fleet and view would be. No I/O, no clock.
//!
//! This file holds the tables and what decisions read of them;
//! `snapshot/build.rs` builds them ([`Snapshot::new`]) and
//! `snapshot/update.rs` updates them in place. It also defines the
//! pool-level figures the snapshot precomputes and the scorer reads: the
//! preemption hazard ([`hazard_per_h`]) and the startup factor
//! ([`startup_score`]).

mod build;
mod update;

use super::bitset::PoolSet;
use super::filter::Filter;
use super::policy::Policy;
use super::requirements::Requirements;
use crate::fleet::{Fleet, Free, NodeIdx, NodeState, PoolIdx};
use crate::health::Health;
use std::cmp::Ordering;
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
    /// Per pool: the success its nodes are smoothed toward, and what keeps
    /// its row's bounds without visiting its nodes.
    pub(crate) success: Vec<PoolSuccess>,
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
    /// The widths of the work the engine knows, for the fit factor
    /// ([`Snapshot::set_demand`]); empty in a fresh build.
    pub(crate) stranding: super::demand::Stranding,
    pool_by_label: HashMap<String, PoolIdx>,
    node_by_name: HashMap<String, NodeIdx>,
    /// Ready nodes, pool by pool and free-GPU threshold by threshold. Each
    /// list has room for every node of its pool, so that one node's change
    /// moves entries within its lists only; unused room holds [`EMPTY`].
    index: Vec<ReadyNode>,
    /// Where each list starts in `index`; see [`Snapshot::ready_nodes`].
    index_at: Vec<u32>,
    /// How many nodes each list holds.
    index_len: Vec<u32>,
    /// Per list (same positions as `index_at`): where its first node with
    /// some free CPU and some free memory sits. Nodes before it can host no
    /// work that asks for CPU and memory, so a pick for such work starts here.
    usable_at: Vec<u32>,
    /// The node at each `usable_at` ([`NO_NODE`] when none), dense so the
    /// common pick reads one small array instead of the large index.
    heads: Vec<ReadyNode>,
    /// What changed since when, for [`super::UnfitCache`]: `stamp` counts
    /// in-place updates; `node_stamp` is, per pool, the `stamp` of the last
    /// change to one of its nodes; `quarantine_stamp` that of the last
    /// change to the pool or provider quarantine sets. Not part of what a
    /// decision reads (a fresh build starts them at 0).
    pub(crate) stamp: u64,
    pub(crate) node_stamp: Vec<u64>,
    pub(crate) quarantine_stamp: u64,
    /// Per node, its switch as a dense id ([`NO_SWITCH`] when the fleet
    /// does not say); a pool's switches have consecutive ids, in name
    /// order, in the range `pool_switches[pool]`. Fixed by the fleet.
    pub(crate) switch_of: Vec<u32>,
    pub(crate) pool_switches: Vec<std::ops::Range<u32>>,
    /// Per list (same positions as `index_at`): where its per-switch
    /// counts start in `switch_count`, one count per switch of
    /// `pool_switches[pool]`, in id order.
    switch_at: Vec<u32>,
    /// How many nodes of each list sit behind each switch of its pool.
    switch_count: Vec<u32>,
    /// Per list: its largest switch count (0 when its pool has no
    /// switches), so that a `same-switch` gang skips a pool whose biggest
    /// switch has too few ready nodes without reading them.
    switch_max: Vec<u32>,
    /// Pools and providers with a lend limit.
    pub(crate) limited_pools: Vec<u32>,
    pub(crate) limited_providers: Vec<u32>,
}

/// `switch_of` of a node whose switch is unknown.
pub(crate) const NO_SWITCH: u32 = u32::MAX;

/// `ReadyNode::node` of an empty list's head.
pub(crate) const NO_NODE: u32 = u32::MAX;

/// An empty list's head, and unused room in the index.
const EMPTY: ReadyNode =
    ReadyNode { node: NO_NODE, free: Free { gpus: 0, cpu_cores: 0.0, memory_gb: 0.0, disk_gb: 0.0 } };

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
    /// Training throughput of one of its GPUs relative to a V100
    /// ([`crate::fleet::Accelerator::relative_speed`]; 1 for CPU-only pools).
    pub speed: f64,
}

/// A pool's success for [`CACHED_PRIOR`], and what its row's health and
/// success bounds are taken from.
///
/// A provider's health moves with every attempt that ends on it, and with
/// it the success of every one of its pools and their nodes. Visiting every
/// node of the provider each time was most of what ending an attempt cost
/// on a large fleet, so a node's smoothed success is worked out when it is
/// read ([`PoolSuccess::node`]), and the pool's success bound is kept valid
/// from the last exact one: a node's smoothed success is a mix of its own
/// rate and the pool's with the pool's share at most 1, so it cannot rise by
/// more than the pool's did. Once the pool's success has moved
/// [`SUCCESS_DRIFT`] from where the bound was exact, or a node's or the
/// pool's own health changes, the bound is taken exactly again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PoolSuccess {
    /// Provider's success shrunk toward the prior, the pool's toward that.
    pub pool: f64,
    /// The pool success the exact bound was taken at, and that bound (the
    /// best smoothed success of a node of the pool then; 0 with no nodes).
    at: f64,
    best: f64,
    /// The best health score of a node of the pool (0 with no nodes).
    node_score: f64,
}

/// A pool's success for [`CACHED_PRIOR`]: the provider's shrunk toward
/// the prior, the pool's toward that.
pub(crate) fn pool_success(pool: &Health, provider: &Health) -> f64 {
    let (prior, weight) = CACHED_PRIOR;
    pool.smoothed_success(provider.smoothed_success(prior, weight), weight)
}

/// How far a pool's success may move before its success bound is taken
/// exactly again (see [`PoolSuccess`]).
pub(crate) const SUCCESS_DRIFT: f64 = 0.005;

impl PoolSuccess {
    /// Exact, visiting the pool's nodes.
    pub(crate) fn exact(nodes: &[NodeInfo], members: std::ops::Range<u32>, pool: f64) -> Self {
        let weight = CACHED_PRIOR.1;
        let (mut best, mut node_score) = (0.0f64, 0.0f64);
        for n in members {
            let h = &nodes[n as usize].health;
            best = best.max(unit(h.smoothed_success(pool, weight)));
            node_score = node_score.max(h.score);
        }
        Self { pool, at: pool, best, node_score }
    }

    /// The same bounds after the pool's success moved to `pool`, or `None`
    /// when it has moved too far to keep them without visiting the nodes.
    pub(crate) fn moved(self, pool: f64) -> Option<Self> {
        ((pool - self.at).abs() <= SUCCESS_DRIFT).then_some(Self { pool, ..self })
    }

    /// The row's health bound for pool health `health` (provider × pool
    /// score): exactly the best a node scores.
    pub(crate) fn health_bound(&self, health: f64) -> f64 {
        unit(health * self.node_score)
    }

    /// The row's success bound: at least any node's smoothed success.
    /// Where the pool's success rose since the exact bound, by that rise
    /// and a margin for rounding (a node's success worked out afresh may
    /// round a little above the sum); where it fell, each node's fell too.
    pub(crate) fn success_bound(&self) -> f64 {
        let rise = self.pool - self.at;
        if rise > 0.0 { unit(self.best + rise + 1e-12) } else { unit(self.best) }
    }

    /// A node's success smoothed toward this pool's.
    #[inline]
    pub(crate) fn node(&self, node: &NodeInfo) -> f64 {
        node.health.smoothed_success(self.pool, CACHED_PRIOR.1)
    }

    /// Whether the two agree on everything but how tight the success bound
    /// is; for [`Snapshot::diff`].
    pub(crate) fn same_but_bound(&self, fresh: &Self) -> bool {
        self.pool.to_bits() == fresh.pool.to_bits() && self.node_score.to_bits() == fresh.node_score.to_bits()
    }
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
    /// The view a plan of `req` reads (the API's, `canopy plan`'s, the
    /// console's preview): the fleet and health as given and, when the
    /// engine's mix of live work is known, that mix with `req` counted
    /// in, as the engine counts a request it places. Without a mix (no
    /// engine behind the plan) fit stays best fit.
    pub fn for_plan(
        fleet: &Fleet,
        health: &crate::health::HealthView,
        demand: Option<&super::DemandMix>,
        req: &Requirements,
    ) -> Self {
        let mut snap = Snapshot::new(fleet, health);
        if let Some(mix) = demand {
            snap.set_demand(&mix.with(req.gpus, req.nodes));
        }
        snap
    }

    /// Tells the fit factor what the work the engine knows asks for
    /// ([`super::DemandMix`]). Not fleet state: a fresh build starts
    /// without it, and [`Snapshot::diff`] does not compare it.
    pub fn set_demand(&mut self, mix: &super::DemandMix) {
        self.stranding = super::demand::Stranding::of(mix);
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

    /// The fewest free GPUs of any ready, unquarantined node of the pool
    /// (its GPUs per node when it has none): the largest threshold whose
    /// list holds every node of the first. O(GPUs per node).
    #[inline]
    pub(crate) fn fewest_free_gpus(&self, row: &PoolRow) -> u32 {
        let base = row.index_base as usize;
        let len = |g: u32| self.index_len.get(base + g as usize).copied().unwrap_or(0);
        let all = len(0);
        (1..=row.gpus_per_node).take_while(|&g| len(g) == all).last().unwrap_or(0)
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
        let lo = self.index_at[at] as usize;
        let hi = lo + self.index_len[at] as usize;
        (&self.index[lo..hi], self.usable_at[at] as usize - lo)
    }

    /// How many ready, unquarantined nodes of the pool have at least
    /// `gpus` free GPUs (the length of [`Snapshot::ready_nodes`]). O(1).
    #[inline]
    pub(crate) fn ready_count(&self, row: &PoolRow, gpus: u32) -> usize {
        if gpus > row.gpus_per_node {
            return 0;
        }
        self.index_len[row.index_base as usize + gpus as usize] as usize
    }

    /// The most of those nodes ([`Snapshot::ready_count`]) behind any one
    /// switch of the pool; 0 when its nodes have no switch. O(1).
    #[inline]
    pub(crate) fn biggest_switch(&self, row: &PoolRow, gpus: u32) -> usize {
        if gpus > row.gpus_per_node {
            return 0;
        }
        self.switch_max[row.index_base as usize + gpus as usize] as usize
    }
}

/// The order of a pool's ready nodes: least excess fault rate first
/// ([`node_excess_hazard`]: the nodes whose own record is no worse than
/// a fresh node's come first, together), then healthiest, then fewest
/// free GPUs, then by name. Total: names are unique.
#[inline]
fn ready_order(nodes: &[NodeInfo], a: &ReadyNode, b: &ReadyNode) -> Ordering {
    let (na, nb) = (&nodes[a.node as usize], &nodes[b.node as usize]);
    node_excess_hazard(&na.health)
        .total_cmp(&node_excess_hazard(&nb.health))
        .then(nb.health.score.total_cmp(&na.health.score))
        .then(a.free.gpus.cmp(&b.free.gpus))
        .then(na.name_rank.cmp(&nb.name_rank))
}

/// Why the pool has no ready node, for when it has none: the most common
/// node state or quarantine.
fn unready(fleet: &Fleet, nodes: &[NodeInfo], p: usize) -> Filter {
    let pool = &fleet.pools[p];
    if pool.nodes.is_empty() {
        return Filter::NoNodes;
    }
    let mut why =
        [(Filter::Cordoned, 0), (Filter::Draining, 0), (Filter::Down, 0), (Filter::NodeQuarantined, 0)];
    for i in pool.nodes.clone() {
        let slot = match fleet.nodes[i as usize].state {
            NodeState::Ready if nodes[i as usize].quarantined => 3,
            NodeState::Ready => continue,
            NodeState::Cordoned => 0,
            NodeState::Draining => 1,
            NodeState::Down => 2,
        };
        why[slot].1 += 1;
    }
    // Most common; ties go to the earlier filter (max_by_key keeps the last max).
    why.iter().rev().max_by_key(|(_, c)| *c).map_or(Filter::Down, |(f, _)| *f)
}

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

/// Prior rate of a node's own hardware faults per running hour of an
/// attempt on it (Xid errors, lost hosts): about one a month of constant
/// use, the order of the failure studies' per-node rates (the simulator's
/// default fleet has 1.5e-3 per GPU-hour on a typical node).
pub(crate) const NODE_FAULT_PRIOR_PER_H: f64 = 1e-3;
/// How many running hours the node prior is worth against observation.
pub(crate) const NODE_FAULT_PRIOR_H: f64 = 100.0;

/// A node's own fault rate per running hour, as far as it exceeds what
/// is expected of any node: its faults over its running hours, shrunk
/// toward [`NODE_FAULT_PRIOR_PER_H`] (a Gamma prior worth
/// [`NODE_FAULT_PRIOR_H`] hours), less that prior, and at least 0.
///
/// A node with no more faults than its hours predict scores 0, as a fresh
/// one does, so the usual order (packing) among sound nodes stays; one
/// fault on a node with little history weighs a lot, and the same fault
/// after hundreds of clean hours little. A lemon (a node that fails tens
/// of times as often as the rest) is thus found after a fault or two and
/// given work only when its pool's sound nodes are full, for as long as
/// its record says so, not for the few outcomes a moving average
/// remembers. The expected work an attempt loses to the node is this rate
/// × its hours at risk, so ordering by it orders by expected loss.
pub(crate) fn node_excess_hazard(health: &Health) -> f64 {
    // (f + r·H0) / (E + H0) − r = (f − r·E) / (E + H0): exactly 0 for a
    // node without faults.
    let faults = f64::from(health.failures());
    let hours = health.exposure_h.max(0.0);
    ((faults - NODE_FAULT_PRIOR_PER_H * hours) / (hours + NODE_FAULT_PRIOR_H)).max(0.0)
}

/// Clamped to 0..=1, the range of every raw factor value (NaN stays NaN).
pub(crate) fn unit(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// The startup factor: 1 within `startup_within`, then decaying as the
/// target over the startup time; without a target, reference / (reference
/// + startup), so the policy's reference time scores 0.5.
pub(crate) fn startup_score(startup_s: f64, req: &Requirements, policy: &Policy) -> f64 {
    match req.startup_within {
        Some(w) if startup_s <= w.as_secs_f64() => 1.0,
        Some(w) => w.as_secs_f64() / startup_s,
        None => {
            let r = policy.startup_reference_s.max(0.0);
            if r + startup_s > 0.0 { r / (r + startup_s) } else { 1.0 }
        }
    }
}
