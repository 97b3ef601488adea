//! Inventory refresh: a provider's fresh inventory replaces its pools and
//! nodes in the fleet, while Canopy's own allocations are kept.
//!
//! Pure, like the rest of the core. A node's use becomes what the provider
//! reports as used by others plus what Canopy's live attempts hold on it
//! (capped at the node's shape, so nothing is ever overcommitted). Node
//! states follow the provider (down, drained → cordoned); a state an
//! operator set in Canopy (cordon, drain) is kept while the provider
//! reports the node ready. Capacity that grew unblocks waiting work. A
//! node that refused a launch stays full across a report that repeats the
//! one it refused under (`refused.rs`). A node reported ready again after
//! it was not ends workloads' exclusions of it (`exclusion.rs`).
//! Must not perform I/O; the shell takes the inventory.

use super::Core;
use crate::engine::model::Millis;
use crate::fleet::{Fleet, FleetBuilder, Free, NodeDef, NodeIdx, NodeState, PoolDef, PoolIdx};
use std::collections::{BTreeSet, HashMap, HashSet};

/// What each provider last reported about its nodes' states, to tell a
/// provider's change from an operator's.
#[derive(Debug, Clone, Default)]
pub(super) struct Reported {
    states: HashMap<String, NodeState>,
    /// Each node's last inventory report: its state and what others use
    /// (only for nodes an inventory has reported).
    last: HashMap<String, (NodeState, Free)>,
    /// Providers that have reported an inventory since the core started.
    seen: HashSet<String>,
}

impl Reported {
    /// The states the fleet starts with are taken as the providers' own.
    pub(super) fn from_fleet(fleet: &Fleet) -> Self {
        Self {
            states: fleet.nodes.iter().map(|n| (n.name.clone(), n.state)).collect(),
            last: HashMap::new(),
            seen: HashSet::new(),
        }
    }

    /// What the node's provider last reported about it, if it has.
    pub(super) fn reported(&self, node: &str) -> Option<(NodeState, Free)> {
        self.last.get(node).copied()
    }
}

impl Core {
    /// Replaces `provider`'s pools and nodes with `pools` (node `used` =
    /// used by others). An unknown provider or an inventory that cannot
    /// form a fleet (duplicate names…) leaves the fleet as it was.
    pub(super) fn on_inventory(&mut self, provider: &str, pools: Vec<(PoolDef, Vec<NodeDef>)>, now: Millis) {
        let Some(target) = self.fleet.providers.iter().position(|p| p.name == provider) else { return };
        let mut ours: HashMap<String, Free> = HashMap::new();
        for l in self.entries.values().filter_map(|e| e.live.as_ref()) {
            for n in l.nodes.iter().filter_map(|n| self.fleet.nodes.get(n.0 as usize)) {
                let f = ours.entry(n.name.clone()).or_default();
                f.gpus += l.alloc.gpus;
                f.cpu_cores += l.alloc.cpu_cores;
                f.memory_gb += l.alloc.memory_gb;
                f.disk_gb += l.alloc.disk_gb;
            }
        }
        let old: HashMap<String, (NodeState, Free)> = self
            .fleet
            .provider(crate::fleet::ProviderIdx(target as u32))
            .pools
            .clone()
            .flat_map(|p| self.fleet.pool_nodes(PoolIdx(p)).iter())
            // Capacity hidden after a refusal does not make the report's
            // look like growth: it is compared with what the node had.
            .map(|n| (n.name.clone(), (n.state, self.unhidden_free(&n.name, n.free))))
            .collect();
        let mut b = FleetBuilder::new();
        let mut grew = false;
        for (i, p) in self.fleet.providers.iter().enumerate() {
            if b.provider(p.name.clone(), p.kind, p.lend_limit_gpus).is_err() {
                return;
            }
            if i != target {
                for pool in p.pools.clone() {
                    let pool = PoolIdx(pool);
                    if b.pool(self.fleet.pool_def(pool), self.fleet.node_defs(pool)).is_err() {
                        return;
                    }
                }
                continue;
            }
            for (def, nodes) in &pools {
                let s = &def.shape;
                let mut merged = Vec::with_capacity(nodes.len());
                for n in nodes {
                    let mine = ours.get(&n.name).copied().unwrap_or_default();
                    let used = Free {
                        gpus: n.used.gpus.saturating_add(mine.gpus).min(s.gpus_per_node),
                        cpu_cores: (n.used.cpu_cores + mine.cpu_cores).min(s.cpu_cores),
                        memory_gb: (n.used.memory_gb + mine.memory_gb).min(s.memory_gb),
                        disk_gb: (n.used.disk_gb + mine.disk_gb).min(s.disk_gb),
                    };
                    let previous = old.get(&n.name).copied();
                    let last = self.inventory.states.get(&n.name).copied().or(previous.map(|p| p.0));
                    let state = match (self.intents.get(&n.name), previous) {
                        // An operator's standing cordon or drain holds while
                        // the provider calls the node ready.
                        (Some(i), _) if n.state == NodeState::Ready => i.state,
                        // Ready at the provider: a state set here stays.
                        (_, Some((was, _))) if n.state == NodeState::Ready && last != Some(was) => was,
                        _ => n.state,
                    };
                    let free = Free {
                        gpus: s.gpus_per_node - used.gpus,
                        cpu_cores: s.cpu_cores - used.cpu_cores,
                        memory_gb: s.memory_gb - used.memory_gb,
                        disk_gb: s.disk_gb - used.disk_gb,
                    };
                    grew |= state == NodeState::Ready
                        && previous.is_none_or(|(was, f)| {
                            was != NodeState::Ready
                                || free.gpus > f.gpus
                                || free.cpu_cores > f.cpu_cores
                                || free.memory_gb > f.memory_gb
                        });
                    merged.push(NodeDef {
                        name: n.name.clone(),
                        state,
                        used,
                        canopy_gpus: mine.gpus.min(used.gpus),
                        switch: n.switch.clone(),
                    });
                }
                if b.pool(def.clone(), merged).is_err() {
                    return;
                }
            }
        }
        let fleet: Fleet = b.build();
        // Back: ready now after a report in which it was not ready or not
        // listed at all. A provider's first report after a start proves
        // no recovery (`exclusion.rs`).
        let recovered: BTreeSet<String> = if self.inventory.seen.insert(provider.to_string()) {
            BTreeSet::new()
        } else {
            let states = &self.inventory.states;
            pools
                .iter()
                .flat_map(|(_, nodes)| nodes)
                .filter(|n| n.state == NodeState::Ready)
                .filter(|n| {
                    !old.contains_key(&n.name) || states.get(&n.name).is_some_and(|s| *s != NodeState::Ready)
                })
                .map(|n| n.name.clone())
                .collect()
        };
        let report: HashMap<String, (NodeState, Free)> =
            pools.iter().flat_map(|(_, nodes)| nodes).map(|n| (n.name.clone(), (n.state, n.used))).collect();
        for (name, &(state, _)) in &report {
            self.inventory.states.insert(name.clone(), state);
        }
        // Live attempts keep their node by name; one on a node the provider
        // no longer lists holds nothing (its release is then a no-op).
        let by_name: HashMap<&str, NodeIdx> =
            fleet.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), NodeIdx(i as u32))).collect();
        for e in self.entries.values_mut() {
            if let Some(l) = e.live.as_mut() {
                for node in l.nodes.iter_mut() {
                    let name = self.fleet.nodes.get(node.0 as usize).map(|n| n.name.as_str());
                    *node = name.and_then(|n| by_name.get(n).copied()).unwrap_or(NodeIdx(u32::MAX));
                }
            }
        }
        self.fleet = fleet;
        self.max_gpu_memory = super::max_gpu_memory(&self.fleet);
        self.drop_snapshot();
        self.ideal = None;
        self.ideal_per_pool = None;
        self.prices.clear();
        // Pools may have moved: file the live attempts again.
        let live: Vec<crate::engine::model::WorkloadId> = self.live_ids.iter().copied().collect();
        for id in live {
            self.file_live(id);
        }
        self.beliefs_after_inventory(&report, now);
        self.inventory.last.extend(report);
        if grew {
            self.capacity_changed();
        }
        self.nodes_recovered(&recovered, "its provider reports it ready again", now);
    }
}
