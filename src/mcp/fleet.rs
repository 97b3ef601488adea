//! The `fleet` tool's answer: capacity by provider and pool, with health,
//! from `GET /v1/fleet` — what an agent needs, not every node.

use crate::engine::handle::FleetStatus;
use crate::fleet::{NodeState, PoolIdx};
use serde_json::{Value, json};

/// Per pool: its provider, shape, price, nodes by state, GPUs in all and
/// free, and health; then each provider's health and reachability.
pub fn summary(s: &FleetStatus) -> Value {
    let f = &s.fleet;
    let pools: Vec<Value> = f
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let idx = PoolIdx(i as u32);
            let label = f.pool_label(idx);
            let nodes = f.pool_nodes(idx);
            let count = |st: NodeState| nodes.iter().filter(|n| n.state == st).count();
            let gpus = p.shape.gpus_per_node as u64 * nodes.len() as u64;
            let free: u64 =
                nodes.iter().filter(|n| n.state == NodeState::Ready).map(|n| u64::from(n.free.gpus)).sum();
            json!({
                "pool": label,
                "provider": f.provider(p.provider).name,
                "region": p.region,
                "accelerator": p.shape.accelerator,
                "gpus_per_node": p.shape.gpus_per_node,
                "price_per_hour": p.price_per_hour,
                "interruptible": p.interruptible,
                "nodes": {
                    "ready": count(NodeState::Ready),
                    "cordoned": count(NodeState::Cordoned),
                    "draining": count(NodeState::Draining),
                    "down": count(NodeState::Down),
                },
                "gpus": gpus,
                "gpus_free": free,
                "health": s.health.pools.get(&label),
            })
        })
        .collect();
    let providers: Vec<Value> = f
        .providers
        .iter()
        .map(|p| {
            json!({
                "provider": p.name,
                "health": s.health.providers.get(&p.name),
                "unreachable": s.unreachable.get(&p.name),
            })
        })
        .collect();
    json!({
        "at": s.at,
        "pools": pools,
        "providers": providers,
        "blocked_workloads": s.blocked,
        "budgets": s.budgets,
    })
}
