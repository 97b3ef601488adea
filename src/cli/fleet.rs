//! `canopy fleet`: providers, pools and capacity as a table or JSON. The
//! live fleet of the engine that owns the store (node states, operators'
//! cordons and drains with who and why) when one answers; the fleet file
//! otherwise.

use super::table::{new_table, usd};
use canopy::engine::model::NodeIntent;
use canopy::fleet::{Fleet, Node, NodeState, PoolIdx};
use canopy::health::HealthView;
use color_eyre::eyre::Result;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

#[derive(Serialize)]
struct PoolRow {
    provider: String,
    kind: String,
    lifecycle: String,
    region: String,
    pool: String,
    accelerator: String,
    gpus_per_node: u32,
    gpus_free: u32,
    gpus_total: u32,
    canopy_gpus: u32,
    nodes_ready: usize,
    nodes_total: usize,
    price_per_hour: f64,
    startup_s: u64,
    reserved: bool,
    interruptible: bool,
    capabilities: Vec<String>,
    compliance: Vec<String>,
    lend_limit_gpus: Option<u32>,
    class: u32,
    /// Training throughput of one GPU relative to a V100, as GPU work is
    /// priced by: the fleet's stated figure or the built-in table's;
    /// `None` for CPU-only pools and models neither knows (priced as 1).
    relative_speed: Option<f64>,
    nodes: Vec<NodeRow>,
}

#[derive(Serialize)]
struct NodeRow {
    name: String,
    state: String,
    gpus_free: u32,
    cpu_free: f64,
    memory_free_gb: f64,
    canopy_gpus: u32,
    /// An operator's standing cordon or drain: who, when, why, until.
    #[serde(skip_serializing_if = "Option::is_none")]
    intent: Option<NodeIntent>,
    /// Health score, 0..1, from what ran there (1 when nothing did).
    health: f64,
    /// Kept out of placement by its failures until its cool-down ends or
    /// an operator lifts it (`canopy unquarantine`).
    quarantined: bool,
    /// Taking work again after a quarantine, one attempt at a time.
    probation: bool,
}

/// What the fleet shows for a node: its state, unless its health keeps it
/// out of placement (`quarantined`) or on probation.
fn shown_state(n: &Node, health: &HealthView) -> String {
    let h = health.node(&n.name);
    match n.state {
        NodeState::Ready if h.quarantined => "quarantined".into(),
        NodeState::Ready if h.probation => "ready (probation)".into(),
        s => s.to_string(),
    }
}

/// Whether the node takes new work now.
fn takes_work(n: &Node, health: &HealthView) -> bool {
    n.state == NodeState::Ready && !health.node(&n.name).quarantined
}

fn rows(
    fleet: &Fleet,
    intents: &BTreeMap<String, NodeIntent>,
    health: &HealthView,
    with_nodes: bool,
) -> Vec<PoolRow> {
    (0..fleet.pools.len())
        .map(|i| {
            let idx = PoolIdx(i as u32);
            let p = fleet.pool(idx);
            let prov = fleet.provider(p.provider);
            let nodes = fleet.pool_nodes(idx);
            let ready = nodes.iter().filter(|n| takes_work(n, health));
            PoolRow {
                provider: prov.name.clone(),
                kind: prov.kind.to_string(),
                lifecycle: p.lifecycle.to_string(),
                region: p.region.clone(),
                pool: p.name.clone(),
                accelerator: accelerator_label(fleet, idx),
                gpus_per_node: p.shape.gpus_per_node,
                gpus_free: ready.clone().map(|n| n.free.gpus).sum(),
                gpus_total: p.shape.gpus_per_node * nodes.len() as u32,
                canopy_gpus: fleet.canopy_gpus_in_pool(idx),
                nodes_ready: ready.count(),
                nodes_total: nodes.len(),
                price_per_hour: p.price_per_hour,
                startup_s: p.startup.as_secs(),
                reserved: p.reserved,
                interruptible: p.interruptible,
                capabilities: p.capabilities.clone(),
                compliance: p.compliance.clone(),
                lend_limit_gpus: p.lend_limit_gpus,
                class: p.class.0,
                relative_speed: p
                    .shape
                    .accelerator
                    .as_ref()
                    .and_then(canopy::fleet::Accelerator::known_speed),
                nodes: if with_nodes {
                    nodes
                        .iter()
                        .map(|n| NodeRow {
                            name: n.name.clone(),
                            state: shown_state(n, health),
                            gpus_free: n.free.gpus,
                            cpu_free: n.free.cpu_cores,
                            memory_free_gb: n.free.memory_gb,
                            canopy_gpus: n.canopy_gpus,
                            intent: intents.get(&n.name).cloned(),
                            health: health.node(&n.name).score,
                            quarantined: health.node(&n.name).quarantined,
                            probation: health.node(&n.name).probation,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            }
        })
        .collect()
}

/// "8× H100-SXM5 80GB nvlink", or "cpu" for CPU-only pools.
pub fn accelerator_label(fleet: &Fleet, pool: PoolIdx) -> String {
    let p = fleet.pool(pool);
    match &p.shape.accelerator {
        Some(a) => {
            let link =
                if p.shape.gpus_per_node > 1 { format!(" {}", p.shape.interconnect) } else { String::new() };
            format!("{}× {} {}GB{link}", p.shape.gpus_per_node, a.model, a.memory_gb)
        }
        None => "cpu".to_string(),
    }
}

pub fn run(
    fleet: &Fleet,
    intents: &BTreeMap<String, NodeIntent>,
    health: &HealthView,
    unknown: &BTreeMap<String, String>,
    with_nodes: bool,
    wide: bool,
    json: bool,
) -> Result<ExitCode> {
    let rows = rows(fleet, intents, health, with_nodes);
    if json {
        outln!("{}", canopy::text::json_with_times(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut header = vec![
        "PROVIDER",
        "REGION",
        "POOL",
        "ACCELERATOR",
        "GPUS FREE",
        "NODES",
        "$/NODE-H",
        "STARTUP",
        "TAGS",
    ];
    if wide {
        header.push("×V100");
        header.push("CAPABILITIES");
    }
    let mut t = new_table(&header);
    for r in &rows {
        let mut tags: Vec<String> = Vec::new();
        if r.reserved {
            tags.push("reserved".into());
        }
        if r.interruptible {
            tags.push("spot".into());
        }
        tags.extend(r.compliance.iter().cloned());
        let gpus =
            if r.gpus_total == 0 { "-".to_string() } else { format!("{}/{}", r.gpus_free, r.gpus_total) };
        let mut row = vec![
            format!("{} ({}:{})", r.provider, r.kind, r.lifecycle),
            r.region.clone(),
            r.pool.clone(),
            r.accelerator.clone(),
            gpus,
            format!("{}/{}", r.nodes_ready, r.nodes_total),
            usd(r.price_per_hour),
            format!("{}s", r.startup_s),
            tags.join(","),
        ];
        if wide {
            row.push(match (r.gpus_per_node, r.relative_speed) {
                (0, _) => "-".into(),
                (_, Some(s)) => format!("{s}"),
                (_, None) => "1?".into(),
            });
            row.push(r.capabilities.join(","));
        }
        t.add_row(row);
        for n in &r.nodes {
            t.add_row(vec![
                String::new(),
                String::new(),
                format!("  {}", n.name),
                if n.canopy_gpus > 0 { format!("canopy holds {}", n.canopy_gpus) } else { String::new() },
                if r.gpus_total == 0 { "-".into() } else { format!("{}/{}", n.gpus_free, r.gpus_per_node) },
                n.state.clone(),
                n.intent.as_ref().map(describe).unwrap_or_default(),
            ]);
        }
    }
    outln!("{t}");
    let unknown_speed: Vec<String> = rows
        .iter()
        .filter(|r| r.gpus_per_node > 0 && r.relative_speed.is_none())
        .map(|r| format!("{}/{} ({})", r.provider, r.pool, r.accelerator))
        .collect();
    if !unknown_speed.is_empty() {
        outln!(
            "Not in the throughput table, so priced as a V100 for training and batch work: {}. State `throughput` in the pool's accelerator (relative to a V100 = 1).",
            unknown_speed.join(", ")
        );
    }
    let limits: Vec<String> = fleet
        .providers
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            p.lend_limit_gpus.map(|l| {
                let used = fleet.canopy_gpus_in_provider(canopy::fleet::ProviderIdx(i as u32));
                format!("{}: {used}/{l} GPUs", p.name)
            })
        })
        .collect();
    outln!(
        "{} providers, {} pools ({} shape classes), {} nodes, {} GPUs in {} regions.",
        fleet.providers.len(),
        fleet.pools.len(),
        fleet.class_count,
        fleet.nodes.len(),
        fleet.total_gpus(),
        fleet.regions().len()
    );
    if !limits.is_empty() {
        outln!("Lend limits (held by Canopy/cap): {}", limits.join(", "));
    }
    if !intents.is_empty() {
        outln!("Held by operators:");
        for i in intents.values() {
            outln!("  {} {}", canopy::text::sanitize(&i.node), describe(i));
        }
    }
    if !unknown.is_empty() {
        outln!(
            "Running at providers but unknown to the journal ({}; Canopy leaves them alone, stop them at their \
             provider if unwanted):",
            unknown.len()
        );
        for (token, provider) in unknown {
            outln!("  {} at {}", canopy::text::sanitize(token), canopy::text::sanitize(provider));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cordoned by ops-alice at 2026-12-01 14:03:11 until …: fan noise`, safe
/// for a terminal (the reason is someone's free text).
fn describe(i: &NodeIntent) -> String {
    use canopy::text::sanitize;
    let until = i.until.map(|u| format!(" until {}", super::workloads::local_time(u))).unwrap_or_default();
    let why = i.reason.as_deref().map(|r| format!(": {}", sanitize(r))).unwrap_or_default();
    format!("{} by {} at {}{until}{why}", i.state, sanitize(&i.by), super::workloads::local_time(i.at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use canopy::health::Health;

    #[test]
    fn a_quarantined_node_is_shown_so_and_not_counted_ready() {
        let fleet = canopy::fleet::load::demo().unwrap();
        let mut health = HealthView::default();
        health.nodes.insert("fra-h100-03".into(), Health::new(0.4, 0.2, 5).quarantined());
        health.nodes.insert("fra-h100-05".into(), Health { probation: true, ..Health::new(0.8, 0.9, 5) });
        let before = rows(&fleet, &BTreeMap::new(), &HealthView::default(), true);
        let after = rows(&fleet, &BTreeMap::new(), &health, true);
        let pool = |rows: &[PoolRow]| {
            let i = rows.iter().position(|r| r.provider == "onprem-fra" && r.pool == "h100-nvl").unwrap();
            (
                rows[i].nodes_ready,
                rows[i].gpus_free,
                rows[i].nodes.iter().map(|n| n.state.clone()).collect::<Vec<_>>(),
            )
        };
        let (ready_before, free_before, _) = pool(&before);
        let (ready, free, states) = pool(&after);
        assert_eq!(ready, ready_before - 1, "the quarantined node takes no work");
        assert_eq!(free, free_before - 8, "nor are its GPUs free to anyone");
        assert_eq!(states[2], "quarantined", "{states:?}");
        assert_eq!(states[4], "ready (probation)", "{states:?}");
        let node = &after.iter().find(|r| r.pool == "h100-nvl").unwrap().nodes[2];
        assert!(node.quarantined && node.health < 0.5);
    }
}
