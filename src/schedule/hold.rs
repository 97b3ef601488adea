//! [`gang_hold`]: what the engine holds for a gang that does not fit now,
//! so that it starts as soon as other work leaves one domain's nodes. A
//! question beside placement, not part of it: it reads the same filters
//! and domains, ignores other work's usage, and never scores. No I/O, no
//! clock, no randomness.

use super::categorical::categorical;
use super::check::{Limits, class_shares, node_failure};
use super::domain::{DomainKey, domain_key, domain_label};
use super::filter::Filter;
use super::requirements::Requirements;
use super::snapshot::Snapshot;
use crate::fleet::{NodeIdx, NodeState};

/// Where a gang that does not fit now would run soonest: the nodes the
/// engine should hold for it (and let only work that ends in time use).
#[derive(Debug, Clone, PartialEq)]
pub struct GangHold {
    /// The domain, as people read it ("cloud-a/h100 switch leaf-2").
    pub domain: String,
    /// N nodes in the order to take them: those that fit now first.
    pub nodes: Vec<NodeIdx>,
    /// How many of them fit the per-node request now.
    pub fit_now: usize,
}

/// The domain and nodes to hold for gang `req` so that it starts as soon
/// as other work leaves them: the N nodes of one domain that would fit the
/// per-node request if they were free. Other work's current usage (free
/// capacity, GPUs Canopy holds against lend limits) is ignored; what
/// usage cannot change is not: pool-level filters (shape, model, fabric,
/// quarantine, exclusions, the gang's hourly and cost caps, N × GPUs
/// within each lend limit), node state, node quarantine and exclusion.
///
/// The domain chosen is the one where the most nodes fit now, then whose
/// N chosen nodes have the fewest GPUs in use, then the cheapest, then by
/// name; its nodes are those that fit now (healthiest first), then the
/// ones with the most free GPUs, CPU and memory, then by name. `None` when
/// no domain has N such nodes (the gang cannot run without the fleet
/// changing). Meant for a gang [`super::place`] found no room for, but
/// pure and valid for any gang request. Costs a scan of every node of the
/// pools that pass the pool-level filters.
pub fn gang_hold(req: &Requirements, snap: &Snapshot) -> Option<GangHold> {
    let fleet = snap.fleet();
    let n = req.gang_size() as usize;
    let mut ruled_out = Vec::new();
    let remaining = categorical(req, snap, &mut ruled_out);
    let share = class_shares(req, snap);
    // Limits on an empty fleet: nothing held by Canopy.
    let limits = Limits::new(req);
    let gang_gpus = u64::from(req.gpus) * n as u64;
    // (domain, fits now, gpus in use, -free cpu, -free mem, name rank, node, hourly)
    type Row = (DomainKey, bool, u32, f64, f64, u32, u32, f64);
    let mut rows: Vec<Row> = Vec::new();
    remaining.for_each(|p| {
        let row = &snap.rows[p];
        let hourly = row.price * share[row.class as usize];
        let mut empty = *row;
        empty.held = 0;
        let lend_ok = gang_gpus == 0
            || (gang_gpus <= row.limit && gang_gpus <= snap.provider_lend[row.provider as usize].1);
        let price_ok = limits
            .first_failure(snap, &empty, hourly)
            .is_none_or(|f| matches!(f, Filter::PoolLendLimit | Filter::ProviderLendLimit));
        if !lend_ok || !price_ok {
            return;
        }
        let pool = &fleet.pools[p];
        for i in pool.nodes.clone() {
            let (node, info) = (&fleet.nodes[i as usize], &snap.nodes[i as usize]);
            if node.state != NodeState::Ready || info.quarantined || req.exclude_nodes.contains(&node.name) {
                continue;
            }
            let Some(key) = domain_key(snap, req.topology, p, i as usize) else { continue };
            let fits = node_failure(req, node, info.quarantined).is_none();
            let used = pool.shape.gpus_per_node.saturating_sub(node.free.gpus);
            rows.push((
                key,
                !fits,
                used,
                -node.free.cpu_cores,
                -node.free.memory_gb,
                info.name_rank,
                i,
                hourly,
            ));
        }
    });
    // Within a domain: fitting now first, then by health (the ready order),
    // then fewest GPUs in use, most CPU, most memory, name.
    rows.sort_by(|a, b| {
        let h = |r: &Row| snap.nodes[r.6 as usize].health.score;
        a.0.cmp(&b.0)
            .then(a.1.cmp(&b.1))
            .then(h(b).total_cmp(&h(a)))
            .then(a.2.cmp(&b.2))
            .then(a.3.total_cmp(&b.3))
            .then(a.4.total_cmp(&b.4))
            .then(a.5.cmp(&b.5))
    });
    let mut best: Option<(usize, u32, f64, String, &[Row])> = None;
    let mut i = 0;
    while i < rows.len() {
        let key = rows[i].0;
        let j = i + rows[i..].iter().take_while(|r| r.0 == key).count();
        if j - i >= n {
            let chosen = &rows[i..i + n];
            let fit_now = chosen.iter().filter(|r| !r.1).count();
            let used: u32 = chosen.iter().map(|r| r.2).sum();
            let hourly: f64 = chosen.iter().map(|r| r.7).sum();
            let label = domain_label(snap, key, chosen[0].6 as usize);
            let better = best.as_ref().is_none_or(|b| {
                fit_now
                    .cmp(&b.0)
                    .reverse()
                    .then(used.cmp(&b.1))
                    .then(hourly.total_cmp(&b.2))
                    .then(label.cmp(&b.3))
                    .is_lt()
            });
            if better {
                best = Some((fit_now, used, hourly, label, chosen));
            }
        }
        i = j;
    }
    best.map(|(fit_now, _, _, domain, chosen)| GangHold {
        domain,
        nodes: chosen.iter().map(|r| NodeIdx(r.6)).collect(),
        fit_now,
    })
}
