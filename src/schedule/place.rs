//! [`place`]: filter → score → pick, the fast path.
//!
//! Categorical filters run on pool sets (one glob match per region or
//! provider, one shape check per class), numeric limits per surviving
//! pool, and the node index hands each surviving pool its best node
//! without a scan. Only when nothing fits does the explanation scan every
//! node (`explain.rs`). No I/O, no clock, no randomness.

use super::bitset::PoolSet;
use super::decision::{Candidate, Considered, CostRange, Decision, Placement, RuledOut};
use super::explain::explain;
use super::filter::{Filter, class_checks, free_shortfall, pool_limit_checks};
use super::score::{Feasible, Scorer};
use super::snapshot::Snapshot;
use super::{Policy, Requirements};
use crate::fleet::{NodeIdx, PoolIdx};
use crate::units::allowed;
use std::cmp::Ordering;
use std::ops::ControlFlow;

/// Places one workload: every hard filter, then the policy's score, then a
/// deterministic order (score desc, hourly asc, pool label, node name).
pub fn place(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Decision {
    let fleet = snap.fleet();
    let mut ruled_out = Vec::new();
    let remaining = categorical(req, snap, &mut ruled_out);

    let excluded: Vec<u32> =
        req.exclude_nodes.iter().filter_map(|n| snap.node_by_name(n)).map(|n| n.0).collect();
    let mut feasible = Vec::new();
    for p in remaining.iter() {
        let pi = PoolIdx(p as u32);
        let hourly = fleet.pools[p].hourly_share(req.gpus, req.cpu_cores, req.memory_gb);
        let mut failed = None;
        let _ = pool_limit_checks(req, snap, pi, hourly, &mut |f| {
            failed = Some(f);
            ControlFlow::Break(())
        });
        let pick = match failed {
            Some(f) => Err(f),
            None => pick_node(req, snap, pi, &excluded),
        };
        match pick {
            Ok(node) => feasible.push(Feasible { pool: p as u32, node, hourly, score: 0.0 }),
            Err(filter) => ruled_out.push(RuledOut { pool: pi, filter }),
        }
    }
    if feasible.is_empty() {
        return Decision::Unschedulable(explain(req, snap));
    }

    let scorer = Scorer::new(req, snap, policy, &feasible);
    for f in &mut feasible {
        f.score = scorer.score(f);
    }
    let order = |a: &Feasible, b: &Feasible| rank_order(snap, a, b);
    let k = policy.top_k.max(1);
    if feasible.len() > k {
        feasible.select_nth_unstable_by(k - 1, order);
        feasible.truncate(k);
    }
    feasible.sort_unstable_by(order);

    let considered = Considered {
        total_nodes: fleet.nodes.len(),
        total_pools: fleet.pools.len(),
        // Every pool was either ruled out once or found feasible.
        feasible_pools: fleet.pools.len() - ruled_out.len(),
        ruled_out,
    };
    let candidates = feasible.iter().map(|f| candidate(req, snap, &scorer, f)).collect();
    Decision::Placed(Placement { candidates, considered })
}

/// Records pools removed by filter `f`.
fn push(out: &mut Vec<RuledOut>, f: Filter) -> impl FnMut(usize) + '_ {
    move |p| out.push(RuledOut { pool: PoolIdx(p as u32), filter: f })
}

/// Score desc, hourly asc, pool label, node name: a total order that does
/// not depend on insertion order.
fn rank_order(snap: &Snapshot, a: &Feasible, b: &Feasible) -> Ordering {
    b.score
        .total_cmp(&a.score)
        .then(a.hourly.total_cmp(&b.hourly))
        .then(snap.pools[a.pool as usize].label_rank.cmp(&snap.pools[b.pool as usize].label_rank))
        .then(snap.nodes[a.node as usize].name_rank.cmp(&snap.nodes[b.node as usize].name_rank))
}

/// The categorical and class filters on pool sets, in [`Filter`] order.
/// Returns the pools that pass; records each removed pool's filter.
fn categorical(req: &Requirements, snap: &Snapshot, out: &mut Vec<RuledOut>) -> PoolSet {
    let fleet = snap.fleet();
    let n = fleet.pools.len();
    let mut rem = snap.all_pools.clone();

    if !req.providers.is_empty() {
        let mut pass = PoolSet::empty(n);
        for (i, provider) in fleet.providers.iter().enumerate() {
            if allowed(&req.providers, &provider.name) {
                pass.union_with(&snap.provider_pools[i]);
            }
        }
        rem.retain_in(&pass, push(out, Filter::Provider));
    }
    if !req.regions.is_empty() {
        let mut pass = PoolSet::empty(n);
        for (i, region) in snap.regions.iter().enumerate() {
            if allowed(&req.regions, region) {
                pass.union_with(&snap.region_pools[i]);
            }
        }
        rem.retain_in(&pass, push(out, Filter::Region));
    }
    let none = PoolSet::empty(n);
    for tag in &req.compliance {
        let pass = snap.compliance_pools.get(tag).unwrap_or(&none);
        rem.retain_in(pass, push(out, Filter::Compliance));
    }
    if !req.interruptible {
        rem.remove_all(&snap.interruptible, push(out, Filter::Interruptible));
    }
    let fleet_pools = &fleet.pools;
    for class in &snap.classes {
        let rep = &fleet_pools[class.rep.0 as usize];
        let mut first = None;
        let _ = class_checks(req, &rep.shape, &rep.capabilities, &mut |f| {
            first = Some(f);
            ControlFlow::Break(())
        });
        if let Some(f) = first {
            rem.remove_all(&class.pools, push(out, f));
        }
    }
    rem.remove_all(&snap.provider_quarantined, push(out, Filter::ProviderQuarantined));
    rem.remove_all(&snap.pool_quarantined, push(out, Filter::PoolQuarantined));
    for label in &req.exclude_pools {
        if let Some(p) = snap.pool_by_label(label)
            && rem.contains(p.0 as usize)
        {
            rem.remove(p.0 as usize);
            out.push(RuledOut { pool: p, filter: Filter::PoolExcluded });
        }
    }
    rem
}

/// The pool's best usable node: the first in the ready index (healthiest,
/// fewest free GPUs) that is not excluded and has the free CPU, memory and
/// disk. On failure, why (see [`Considered::ruled_out`]).
fn pick_node(req: &Requirements, snap: &Snapshot, p: PoolIdx, excluded: &[u32]) -> Result<u32, Filter> {
    let list = snap.ready_nodes(p, req.gpus);
    let nodes = &snap.fleet().nodes;
    let mut first_failure = None;
    for &n in list {
        let why = if excluded.contains(&n) {
            Some(Filter::NodeExcluded)
        } else {
            free_shortfall(req, &nodes[n as usize].free)
        };
        match why {
            None => return Ok(n),
            Some(f) => {
                first_failure.get_or_insert(f);
            }
        }
    }
    Err(first_failure.unwrap_or_else(|| {
        if snap.fleet().pool(p).nodes.is_empty() {
            Filter::NoNodes
        } else if snap.ready_nodes(p, 0).is_empty() {
            snap.pools[p.0 as usize].unready
        } else {
            Filter::FreeGpus
        }
    }))
}

fn candidate(req: &Requirements, snap: &Snapshot, scorer: &Scorer<'_>, f: &Feasible) -> Candidate {
    let fleet = snap.fleet();
    let pool = &fleet.pools[f.pool as usize];
    let info = &snap.pools[f.pool as usize];
    Candidate {
        provider: fleet.provider(pool.provider).name.clone(),
        pool: info.label.clone(),
        node: fleet.nodes[f.node as usize].name.clone(),
        region: pool.region.clone(),
        accelerator: info.accelerator.clone(),
        hourly_usd: f.hourly,
        est_cost_usd: CostRange::estimate(f.hourly, req),
        startup_s: pool.startup.as_secs(),
        score: f.score,
        breakdown: scorer.breakdown(f),
        pool_idx: PoolIdx(f.pool),
        node_idx: NodeIdx(f.node),
    }
}
