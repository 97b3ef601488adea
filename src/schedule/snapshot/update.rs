//! Updating a [`Snapshot`] in place when one node's capacity, state or
//! health, or one pool's or provider's health, changes; and
//! [`Snapshot::diff`], which tests use to check that an updated snapshot
//! is a fresh build (up to how tight a pool's success bound is).

use super::{EMPTY, NO_SWITCH, PoolSuccess, ReadyNode, Snapshot, hazard_per_h, ready_order, unready};
use crate::fleet::{Free, NodeIdx, NodeState, PoolIdx, ProviderIdx};
use crate::health::Health;
use crate::schedule::bitset::PoolSet;
use std::collections::HashMap;

/// Updating in place. Each method leaves the snapshot as
/// [`Snapshot::new`] would build it from the changed fleet and health
/// view, field for field, but for a pool's success bound, which may be
/// looser while it still bounds (see [`PoolSuccess`]);
/// `tests/snapshot_updates.rs` checks that.
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
            self.refresh_provider_health(p);
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

    /// Recomputes what a pool's row and success derive from the
    /// provider's, the pool's and the nodes' health, exactly as
    /// [`Snapshot::new`] does.
    fn refresh_pool_health(&mut self, p: usize) {
        let (pool_success, health) = self.pool_success(p);
        self.success[p] = PoolSuccess::exact(&self.nodes, self.fleet.pools[p].nodes.clone(), pool_success);
        let interruptible = self.fleet.pools[p].interruptible;
        let hazard = hazard_per_h(&self.pools[p].health, interruptible);
        self.set_bounds(p, health);
        self.rows[p].hazard_per_h = hazard;
    }

    /// What a pool's row derives from its provider's health, which moved:
    /// its nodes are visited only when its success has moved too far to
    /// keep the success bound without them (see [`PoolSuccess`]).
    fn refresh_provider_health(&mut self, p: usize) {
        let (pool_success, health) = self.pool_success(p);
        match self.success[p].moved(pool_success) {
            Some(moved) => {
                self.success[p] = moved;
                self.set_bounds(p, health);
            }
            None => self.refresh_pool_health(p),
        }
    }

    /// The pool's success for [`super::CACHED_PRIOR`] and its health (provider
    /// score × pool score).
    fn pool_success(&self, p: usize) -> (f64, f64) {
        let info = &self.pools[p];
        (
            super::pool_success(&info.health, &info.provider_health),
            info.provider_health.score * info.health.score,
        )
    }

    fn set_bounds(&mut self, p: usize, health: f64) {
        let success = self.success[p];
        let row = &mut self.rows[p];
        row.health = health;
        row.health_bound = success.health_bound(health);
        row.success_bound = success.success_bound();
    }

    /// Fills the pool's lists (one per free-GPU threshold
    /// `0..=gpus_per_node`) from scratch: its ready, unquarantined nodes,
    /// best first.
    pub(super) fn fill_lists(&mut self, p: usize) {
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
        // A success bound kept since its last exact value may be looser
        // than a fresh one; it must still bound it (see `PoolSuccess`).
        let loose = self.rows.iter().zip(&other.rows).position(|(a, b)| a.success_bound < b.success_bound);
        if let Some(p) = loose {
            let (a, b) = (self.rows[p].success_bound, other.rows[p].success_bound);
            return Some(format!("rows[{p}].success_bound: {a} is below a fresh build's {b}"));
        }
        let unbound = |rows: &[super::PoolRow]| -> Vec<super::PoolRow> {
            rows.iter().map(|r| super::PoolRow { success_bound: 0.0, ..*r }).collect()
        };
        let success = self.success.iter().zip(&other.success).position(|(a, b)| !a.same_but_bound(b));
        if let Some(p) = success {
            return Some(format!("success[{p}]: {:?} != {:?}", self.success[p], other.success[p]));
        }
        first_diff("rows", &unbound(&self.rows), &unbound(&other.rows))
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
