//! The fleet's families of `/metrics`, from the engine's published
//! [`FleetStatus`]: GPUs per provider and pool (total, free, held by
//! Canopy), nodes by state, and each pool's health score. Label sets are
//! the fleet's pools: as few as the configuration makes them.

use super::prom::{family, label};
use crate::engine::handle::FleetStatus;
use crate::fleet::NodeState;
use crate::health::Health;
use std::fmt::Write;

/// Node states as `canopy_nodes` labels them, in the order a node is
/// counted under the first that holds (so each node counts once).
pub const NODE_STATES: [&str; 5] = ["down", "draining", "cordoned", "quarantined", "ready"];

/// Appends the fleet's families.
pub fn render(out: &mut String, st: &FleetStatus) {
    let fleet = &st.fleet;
    let pools: Vec<(String, String, usize)> = (0..fleet.pools.len())
        .map(|i| {
            let p = &fleet.pools[i];
            (label(&fleet.providers[p.provider.0 as usize].name), label(&p.name), i)
        })
        .collect();
    type Gpus = (&'static str, &'static str, fn(&crate::fleet::Pool, &crate::fleet::Node) -> u64);
    let gpus: [Gpus; 3] = [
        ("canopy_gpus", "GPUs in a pool's nodes, whatever their state.", |p, _| {
            u64::from(p.shape.gpus_per_node)
        }),
        ("canopy_gpus_free", "GPUs free for new work on a pool's ready nodes.", |_, n| {
            if n.state == NodeState::Ready { u64::from(n.free.gpus) } else { 0 }
        }),
        ("canopy_gpus_held", "GPUs of a pool that Canopy's workloads hold.", |_, n| u64::from(n.canopy_gpus)),
    ];
    for (name, help, value) in gpus {
        family(out, name, "gauge", help);
        for (provider, pool, i) in &pools {
            let p = &fleet.pools[*i];
            let sum: u64 =
                fleet.pool_nodes(crate::fleet::PoolIdx(*i as u32)).iter().map(|n| value(p, n)).sum();
            let _ = writeln!(out, "{name}{{provider=\"{provider}\",pool=\"{pool}\"}} {sum}");
        }
    }
    family(
        out,
        "canopy_nodes",
        "gauge",
        "A pool's nodes by state; a node counts once, under down, draining, cordoned, quarantined (health) or ready, the first that holds.",
    );
    for (provider, pool, i) in &pools {
        let mut n = [0u64; NODE_STATES.len()];
        for node in fleet.pool_nodes(crate::fleet::PoolIdx(*i as u32)) {
            let quarantined = st.health.nodes.get(&node.name).is_some_and(|h| h.quarantined);
            let k = match node.state {
                NodeState::Down => 0,
                NodeState::Draining => 1,
                NodeState::Cordoned => 2,
                NodeState::Ready if quarantined => 3,
                NodeState::Ready => 4,
            };
            n[k] += 1;
        }
        for (state, count) in NODE_STATES.iter().zip(n) {
            let _ = writeln!(
                out,
                "canopy_nodes{{provider=\"{provider}\",pool=\"{pool}\",state=\"{state}\"}} {count}"
            );
        }
    }
    family(
        out,
        "canopy_pool_health_score",
        "gauge",
        "A pool's health score, 0 (broken) to 1 (healthy), recent attempt outcomes weighted more; 1 before any.",
    );
    for (provider, pool, i) in &pools {
        let h = st.health.pools.get(&fleet.pool_label(crate::fleet::PoolIdx(*i as u32))).copied();
        let score = h.unwrap_or(Health::UNKNOWN).score;
        let _ = writeln!(out, "canopy_pool_health_score{{provider=\"{provider}\",pool=\"{pool}\"}} {score}");
    }
}
