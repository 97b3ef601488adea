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

use super::bitset::PoolSet;
use super::filter::Filter;
use crate::fleet::{Fleet, Free, NodeIdx, NodeState, PoolIdx, ProviderIdx};
use crate::health::{Health, HealthView};
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
        let mut index_len = Vec::new();
        let mut heads = Vec::new();
        let mut usable_at = Vec::new();
        let (switch_of, pool_switches) = switch_ids(&fleet);
        let mut switch_at = Vec::new();
        let mut switch_count = Vec::new();
        let mut switch_max = Vec::new();
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
            // Room for the lists (one per free-GPU threshold); filled below.
            let index_base = index_at.len() as u32;
            for _ in 0..=pool.shape.gpus_per_node {
                index_at.push(index.len() as u32);
                index_len.push(0);
                usable_at.push(index.len() as u32);
                heads.push(EMPTY);
                index.resize(index.len() + pool.nodes.len(), EMPTY);
                switch_at.push(switch_count.len() as u32);
                switch_count.resize(switch_count.len() + pool_switches[i].len(), 0);
                switch_max.push(0);
            }
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
                speed: pool.shape.accelerator.as_ref().map_or(1.0, crate::fleet::Accelerator::relative_speed),
            });
            pools.push(PoolInfo {
                label: labels[i].clone(),
                accelerator: accelerator_text(&fleet, p),
                health: pool_health,
                provider_health,
                // Set with the lists below.
                unready: Filter::NoNodes,
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
        let limited_pools = (0..n_pools as u32).filter(|&p| rows[p as usize].limit != u64::MAX).collect();
        let limited_providers =
            (0..provider_lend.len() as u32).filter(|&p| provider_lend[p as usize].1 != u64::MAX).collect();
        let mut snap = Self {
            switch_of,
            pool_switches,
            switch_at,
            switch_count,
            switch_max,
            stamp: 0,
            node_stamp: vec![0; n_pools],
            quarantine_stamp: 0,
            limited_pools,
            limited_providers,
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
            index_len,
            usable_at,
            heads,
        };
        for p in 0..n_pools {
            snap.fill_lists(p);
            snap.pools[p].unready = unready(&snap.fleet, &snap.nodes, p);
        }
        snap
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

/// Updating in place. Each method leaves the snapshot as
/// [`Snapshot::new`] would build it from the changed fleet and health
/// view, field for field; `tests/snapshot_updates.rs` checks that.
impl Snapshot {
    /// A node's free capacity and the GPUs Canopy holds on it changed
    /// (an allocation or a release). O(log n + GPUs per node) for a pool of
    /// n nodes, plus a move of the entries after it in its lists.
    pub fn set_node_capacity(&mut self, node: NodeIdx, free: Free, canopy_gpus: u32) {
        let Some(n) = self.fleet.nodes.get(node.0 as usize) else { return };
        let (state, health) = (n.state, self.nodes[node.0 as usize].health);
        self.update_node(node, state, free, canopy_gpus, health);
    }

    /// A node's state changed (cordon, drain, down, ready).
    pub fn set_node_state(&mut self, node: NodeIdx, state: NodeState) {
        let Some(n) = self.fleet.nodes.get(node.0 as usize) else { return };
        let (free, canopy_gpus, health) = (n.free, n.canopy_gpus, self.nodes[node.0 as usize].health);
        self.update_node(node, state, free, canopy_gpus, health);
    }

    /// A node's health changed (score, success, quarantine).
    pub fn set_node_health(&mut self, node: NodeIdx, health: Health) {
        let Some(n) = self.fleet.nodes.get(node.0 as usize) else { return };
        let (state, free, canopy_gpus) = (n.state, n.free, n.canopy_gpus);
        self.update_node(node, state, free, canopy_gpus, health);
    }

    /// A pool's health changed. O(nodes of the pool).
    pub fn set_pool_health(&mut self, pool: PoolIdx, health: Health) {
        let p = pool.0 as usize;
        let Some(info) = self.pools.get_mut(p) else { return };
        if same_health(&info.health, &health) {
            return;
        }
        let quarantine_changed = info.health.quarantined != health.quarantined;
        info.health = health;
        self.stamp += 1;
        if quarantine_changed {
            self.quarantine_stamp = self.stamp;
        }
        if health.quarantined {
            self.pool_quarantined.insert(p);
        } else {
            self.pool_quarantined.remove(p);
        }
        self.refresh_pool_health(p);
    }

    /// A provider's health changed. O(nodes of the provider).
    pub fn set_provider_health(&mut self, provider: ProviderIdx, health: Health) {
        let Some(pools) = self.fleet.providers.get(provider.0 as usize).map(|p| p.pools.clone()) else {
            return;
        };
        for p in pools.map(|p| p as usize) {
            if same_health(&self.pools[p].provider_health, &health) {
                continue;
            }
            self.stamp += 1;
            if self.pools[p].provider_health.quarantined != health.quarantined {
                self.quarantine_stamp = self.stamp;
            }
            self.pools[p].provider_health = health;
            if health.quarantined {
                self.provider_quarantined.insert(p);
            } else {
                self.provider_quarantined.remove(p);
            }
            self.refresh_pool_health(p);
        }
    }

    /// The health a node has in this snapshot.
    pub fn node_health(&self, node: NodeIdx) -> Option<Health> {
        self.nodes.get(node.0 as usize).map(|n| n.health)
    }

    fn update_node(&mut self, node: NodeIdx, state: NodeState, free: Free, canopy_gpus: u32, health: Health) {
        let i = node.0 as usize;
        let Some(old) = self.fleet.nodes.get(i) else { return };
        let p = old.pool.0 as usize;
        self.stamp += 1;
        self.node_stamp[p] = self.stamp;
        let (old_state, old_free, old_canopy) = (old.state, old.free, old.canopy_gpus);
        let old_info = self.nodes[i];
        let was_ready = old_state == NodeState::Ready && !old_info.quarantined;
        let is_ready = state == NodeState::Ready && !health.quarantined;
        let health_changed = !same_health(&old_info.health, &health);
        let row = self.rows[p];
        let (base, gpn) = (row.index_base as usize, row.gpus_per_node);
        let old_key = ReadyNode { node: node.0, free: old_free };
        let new_key = ReadyNode { node: node.0, free };
        let capacity_changed = !same_free(&old_free, &free);
        let lists_change = was_ready != is_ready || health_changed || capacity_changed;

        if was_ready && is_ready && !health_changed && old_free.gpus == free.gpus {
            // Same place in the same lists: only the free capacity inline changes.
            if capacity_changed {
                for g in 0..=gpn.min(free.gpus) {
                    let at = base + g as usize;
                    if let Some(k) = self.find(at, &old_key) {
                        self.index[k] = new_key;
                    }
                    self.refresh_head(at);
                }
            }
        } else if lists_change {
            if was_ready {
                for g in 0..=gpn.min(old_free.gpus) {
                    self.remove(base + g as usize, &old_key);
                }
            }
            // The order reads the node's health: change it between the two.
            self.nodes[i].health = health;
            self.nodes[i].quarantined = health.quarantined;
            if is_ready {
                for g in 0..=gpn.min(free.gpus) {
                    self.insert(base + g as usize, new_key);
                }
            }
            for g in 0..=gpn {
                self.refresh_head(base + g as usize);
            }
        }

        let n = &mut self.fleet.nodes[i];
        n.state = state;
        n.free = free;
        n.canopy_gpus = canopy_gpus;
        self.nodes[i].health = health;
        self.nodes[i].quarantined = health.quarantined;
        if canopy_gpus != old_canopy {
            let provider = row.provider as usize;
            let (was, now) = (u64::from(old_canopy), u64::from(canopy_gpus));
            self.rows[p].held = self.rows[p].held - was + now;
            self.provider_lend[provider].0 = self.provider_lend[provider].0 - was + now;
        }
        if health_changed {
            self.refresh_pool_health(p);
        }
        if old_state != state || old_info.quarantined != health.quarantined {
            self.pools[p].unready = unready(&self.fleet, &self.nodes, p);
        }
    }

    /// Recomputes what a pool's row and nodes derive from the provider's,
    /// the pool's and the nodes' health, exactly as [`Snapshot::new`] does.
    fn refresh_pool_health(&mut self, p: usize) {
        let (prior, weight) = CACHED_PRIOR;
        let info = &self.pools[p];
        let (pool_health, provider_health) = (info.health, info.provider_health);
        let pool_success =
            pool_health.smoothed_success(provider_health.smoothed_success(prior, weight), weight);
        let health = provider_health.score * pool_health.score;
        let (mut health_bound, mut success_bound) = (0.0f64, 0.0f64);
        for n in self.fleet.pools[p].nodes.clone() {
            let info = &mut self.nodes[n as usize];
            info.success = info.health.smoothed_success(pool_success, weight);
            health_bound = health_bound.max(unit(health * info.health.score));
            success_bound = success_bound.max(unit(info.success));
        }
        let interruptible = self.fleet.pools[p].interruptible;
        let row = &mut self.rows[p];
        row.health = health;
        row.health_bound = health_bound;
        row.success_bound = success_bound;
        row.hazard_per_h = hazard_per_h(&pool_health, interruptible);
    }

    /// Fills the pool's lists (one per free-GPU threshold
    /// `0..=gpus_per_node`) from scratch: its ready, unquarantined nodes,
    /// best first.
    fn fill_lists(&mut self, p: usize) {
        let pool = &self.fleet.pools[p];
        let mut ready: Vec<ReadyNode> = pool
            .nodes
            .clone()
            .filter(|&i| {
                self.fleet.nodes[i as usize].state == NodeState::Ready && !self.nodes[i as usize].quarantined
            })
            .map(|i| ReadyNode { node: i, free: self.fleet.nodes[i as usize].free })
            .collect();
        ready.sort_by(|a, b| ready_order(&self.nodes, a, b));
        let base = self.rows[p].index_base as usize;
        for g in 0..=pool.shape.gpus_per_node {
            let at = base + g as usize;
            let start = self.index_at[at] as usize;
            let mut len = 0;
            for r in ready.iter().filter(|r| r.free.gpus >= g) {
                self.index[start + len] = *r;
                len += 1;
            }
            self.index_len[at] = len as u32;
            self.refresh_head(at);
            let block = self.switch_block(p, at);
            self.switch_count[block].fill(0);
            self.switch_max[at] = 0;
            for k in 0..len {
                let node = self.index[start + k].node;
                self.count_switch(p, at, node, true);
            }
        }
    }

    /// List `at`'s (of pool `p`) per-switch counts, as a range of `switch_count`.
    fn switch_block(&self, p: usize, at: usize) -> std::ops::Range<usize> {
        let start = self.switch_at[at] as usize;
        start..start + self.pool_switches[p].len()
    }

    /// Counts `node` (of pool `p`) into or out of list `at`'s switch counts.
    fn count_switch(&mut self, p: usize, at: usize, node: u32, into: bool) {
        let sw = self.switch_of[node as usize];
        if sw == NO_SWITCH {
            return;
        }
        let block = self.switch_block(p, at);
        let c = &mut self.switch_count[block.start + (sw - self.pool_switches[p].start) as usize];
        if into {
            *c += 1;
        } else {
            *c = c.saturating_sub(1);
        }
        self.switch_max[at] = self.switch_count[block].iter().copied().max().unwrap_or(0);
    }

    /// List `at` as a range of `index`.
    fn list(&self, at: usize) -> std::ops::Range<usize> {
        let start = self.index_at[at] as usize;
        start..start + self.index_len[at] as usize
    }

    /// Where `key`'s node sits in list `at`, found by its order.
    fn find(&self, at: usize, key: &ReadyNode) -> Option<usize> {
        let range = self.list(at);
        let list = &self.index[range.clone()];
        match list.binary_search_by(|x| ready_order(&self.nodes, x, key)) {
            Ok(k) if list[k].node == key.node => Some(range.start + k),
            // Not where its order says (it cannot be, but never lose track).
            _ => list.iter().position(|x| x.node == key.node).map(|k| range.start + k),
        }
    }

    fn remove(&mut self, at: usize, key: &ReadyNode) {
        let Some(k) = self.find(at, key) else { return };
        let end = self.list(at).end;
        self.index.copy_within(k + 1..end, k);
        self.index[end - 1] = EMPTY;
        self.index_len[at] -= 1;
        let p = self.fleet.nodes[key.node as usize].pool.0 as usize;
        self.count_switch(p, at, key.node, false);
    }

    fn insert(&mut self, at: usize, key: ReadyNode) {
        let range = self.list(at);
        // Every list has room for all its pool's nodes, this one included.
        let room = self.index_at.get(at + 1).map_or(self.index.len(), |&next| next as usize);
        if range.end >= room {
            debug_assert!(false, "list {at} is full");
            return;
        }
        let k = range.start
            + self.index[range.clone()].partition_point(|x| ready_order(&self.nodes, x, &key).is_lt());
        self.index.copy_within(k..range.end, k + 1);
        self.index[k] = key;
        self.index_len[at] += 1;
        let p = self.fleet.nodes[key.node as usize].pool.0 as usize;
        self.count_switch(p, at, key.node, true);
    }

    /// Recomputes list `at`'s first usable node and the dense head.
    fn refresh_head(&mut self, at: usize) {
        let range = self.list(at);
        let list = &self.index[range.clone()];
        let usable = list.iter().position(|r| r.free.cpu_cores > 0.0 && r.free.memory_gb > 0.0);
        let usable = usable.unwrap_or(list.len());
        self.usable_at[at] = (range.start + usable) as u32;
        self.heads[at] = list.get(usable).copied().unwrap_or(EMPTY);
    }

    /// The first difference between two snapshots in anything a decision,
    /// an explanation or an update reads, or `None` when they agree. For
    /// tests of the in-place updates against fresh builds.
    #[doc(hidden)]
    pub fn diff(&self, other: &Snapshot) -> Option<String> {
        if self.fleet != other.fleet {
            let n = self.fleet.nodes.iter().zip(&other.fleet.nodes).position(|(a, b)| a != b);
            return Some(format!("fleets differ (first node: {n:?})"));
        }
        let tags = |m: &HashMap<String, PoolSet>| {
            let mut v: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            v.sort();
            v
        };
        let sorted = |m: &HashMap<String, u32>| {
            let mut v: Vec<(String, u32)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
            v.sort();
            v
        };
        let pools = |m: &HashMap<String, PoolIdx>| sorted(&m.iter().map(|(k, v)| (k.clone(), v.0)).collect());
        let nodes = |m: &HashMap<String, NodeIdx>| sorted(&m.iter().map(|(k, v)| (k.clone(), v.0)).collect());
        let one = |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| (format!("{a:?}"), format!("{b:?}"));
        let scalars = [
            ("interruptible", one(&self.interruptible, &other.interruptible)),
            ("provider_quarantined", one(&self.provider_quarantined, &other.provider_quarantined)),
            ("pool_quarantined", one(&self.pool_quarantined, &other.pool_quarantined)),
            ("all_pools", one(&self.all_pools, &other.all_pools)),
            ("min_gpu_memory", one(&self.min_gpu_memory, &other.min_gpu_memory)),
        ];
        for (what, (a, b)) in scalars {
            if a != b {
                return Some(format!("{what}: {a} != {b}"));
            }
        }
        first_diff("rows", &self.rows, &other.rows)
            .or_else(|| first_diff("pools", &self.pools, &other.pools))
            .or_else(|| first_diff("provider_lend", &self.provider_lend, &other.provider_lend))
            .or_else(|| first_diff("classes", &self.classes, &other.classes))
            .or_else(|| first_diff("nodes", &self.nodes, &other.nodes))
            .or_else(|| first_diff("regions", &self.regions, &other.regions))
            .or_else(|| first_diff("region_pools", &self.region_pools, &other.region_pools))
            .or_else(|| first_diff("provider_pools", &self.provider_pools, &other.provider_pools))
            .or_else(|| {
                first_diff("compliance_pools", &tags(&self.compliance_pools), &tags(&other.compliance_pools))
            })
            .or_else(|| {
                first_diff("pool_by_label", &pools(&self.pool_by_label), &pools(&other.pool_by_label))
            })
            .or_else(|| first_diff("node_by_name", &nodes(&self.node_by_name), &nodes(&other.node_by_name)))
            .or_else(|| first_diff("switch_of", &self.switch_of, &other.switch_of))
            .or_else(|| first_diff("pool_switches", &self.pool_switches, &other.pool_switches))
            .or_else(|| first_diff("switch_at", &self.switch_at, &other.switch_at))
            .or_else(|| first_diff("switch_count", &self.switch_count, &other.switch_count))
            .or_else(|| first_diff("switch_max", &self.switch_max, &other.switch_max))
            .or_else(|| first_diff("limited_pools", &self.limited_pools, &other.limited_pools))
            .or_else(|| first_diff("limited_providers", &self.limited_providers, &other.limited_providers))
            .or_else(|| first_diff("index_at", &self.index_at, &other.index_at))
            .or_else(|| first_diff("index_len", &self.index_len, &other.index_len))
            .or_else(|| first_diff("usable_at", &self.usable_at, &other.usable_at))
            .or_else(|| first_diff("heads", &self.heads, &other.heads))
            .or_else(|| first_diff("index", &self.index, &other.index))
    }
}

/// The first position where two lists differ in their debug form (exact
/// for floats: it prints the shortest form that reads back the same).
fn first_diff<T: std::fmt::Debug>(what: &str, a: &[T], b: &[T]) -> Option<String> {
    if a.len() != b.len() {
        return Some(format!("{what}: {} entries != {}", a.len(), b.len()));
    }
    a.iter().zip(b).enumerate().find_map(|(i, (x, y))| {
        let (x, y) = (format!("{x:?}"), format!("{y:?}"));
        (x != y).then(|| format!("{what}[{i}]: {x} != {y}"))
    })
}

/// The order of a pool's ready nodes: healthiest first, then fewest free
/// GPUs, then by name. Total: names are unique.
#[inline]
fn ready_order(nodes: &[NodeInfo], a: &ReadyNode, b: &ReadyNode) -> Ordering {
    let (na, nb) = (&nodes[a.node as usize], &nodes[b.node as usize]);
    nb.health
        .score
        .total_cmp(&na.health.score)
        .then(a.free.gpus.cmp(&b.free.gpus))
        .then(na.name_rank.cmp(&nb.name_rank))
}

/// Equal to the bit, so that a change that makes no difference is skipped
/// and any other (NaN included) is applied.
fn same_health(a: &Health, b: &Health) -> bool {
    a.score.to_bits() == b.score.to_bits()
        && a.success_rate.to_bits() == b.success_rate.to_bits()
        && a.samples == b.samples
        && a.quarantined == b.quarantined
        && a.probation == b.probation
        && a.exposure_h.to_bits() == b.exposure_h.to_bits()
        && a.preemptions == b.preemptions
}

fn same_free(a: &Free, b: &Free) -> bool {
    a.gpus == b.gpus
        && a.cpu_cores.to_bits() == b.cpu_cores.to_bits()
        && a.memory_gb.to_bits() == b.memory_gb.to_bits()
        && a.disk_gb.to_bits() == b.disk_gb.to_bits()
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

/// Dense switch ids: pool by pool, each pool's distinct switch names in
/// sorted order. Returns each node's id ([`NO_SWITCH`] for none) and each
/// pool's range of ids.
fn switch_ids(fleet: &Fleet) -> (Vec<u32>, Vec<std::ops::Range<u32>>) {
    let mut of = vec![NO_SWITCH; fleet.nodes.len()];
    let mut ranges = Vec::with_capacity(fleet.pools.len());
    let mut next = 0u32;
    for pool in &fleet.pools {
        let nodes = &fleet.nodes[pool.nodes.start as usize..pool.nodes.end as usize];
        let mut names: Vec<&str> = nodes.iter().filter_map(|n| n.switch.as_deref()).collect();
        names.sort_unstable();
        names.dedup();
        for (j, n) in nodes.iter().enumerate() {
            if let Some(sw) = n.switch.as_deref()
                && let Ok(k) = names.binary_search(&sw)
            {
                of[pool.nodes.start as usize + j] = next + k as u32;
            }
        }
        ranges.push(next..next + names.len() as u32);
        next += names.len() as u32;
    }
    (of, ranges)
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
