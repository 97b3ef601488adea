//! Gang placement: N nodes for one workload, all or nothing, in one
//! provider and one topology domain. [`super::place`] hands every request
//! with `nodes > 1` here; one-node work never comes here.
//!
//! ## Feasible sets
//!
//! A gang of N is a set of N distinct nodes such that
//! - every node fits the per-node request on its own: its pool passes every
//!   pool-level filter (categorical, shape, model, the fabric the gang asks
//!   for, quarantine, exclusions), the node is ready, not quarantined, not
//!   excluded, and has the free GPUs, CPU, memory and disk;
//! - the pool-wide limits hold for the whole gang: N × the per-node hourly
//!   share against `max_hourly_usd` and `max_cost_usd`, N × the per-node
//!   GPUs against the pool's and the provider's lend limits (checked per
//!   pool, as if the whole gang were in it: a `same-region` gang may only
//!   use a pool that could hold all of it under these limits);
//! - all nodes lie in one domain of the requested topology:
//!   `same-switch`: one pool, one `Node::switch` (nodes without a switch
//!   form no domain); `same-pool`: one pool; `same-region`: pools of one
//!   provider, one region and one shape class (identical shape and tags).
//!   A Slurm job lives in one partition, which is one pool, so for a Slurm
//!   provider `same-region` means `same-pool`.
//!
//! The score of a set, and why the set chosen is the best, are in
//! `gang/sets.rs`. The top k are the best set of each of the k best
//! domains.
//!
//! ## How a decision stays cheap
//!
//! Which pools hold a domain, and so `E*`, is known without reading every
//! node: a pool's ready nodes (the snapshot's index for the per-node GPUs)
//! are read only until N usable ones are found (`same-switch`: until one
//! switch has N; a pool whose biggest switch has fewer than N ready nodes,
//! which the snapshot counts, is not read at all; `same-region`: up to N
//! per pool, all the cheapest set of N could take from it). Only pools
//! that hold no domain are read in full, to say why.
//!
//! Then pools (with all their switches) and `same-region` domains are
//! visited in order of an upper bound of their score and skipped once the
//! bound cannot reach the k-th best (branch and bound); only visited ones
//! are read in full and ranked as above. A pool's bound is exact but for
//! three figures, each bounded from the index alone: the weakest node's
//! health (at most the N-th healthiest ready node's), the mean fit (at
//! most that of the N ready nodes with the fewest free GPUs: fit never
//! grows with free GPUs) and success (the pool's best node's).
//! `same-region` domains of several pools are always visited.
//!
//! This file drives the phases: `gang/domains.rs` finds the units and
//! bounds, `gang/sets.rs` picks each unit's best set. No I/O, no clock, no
//! randomness.

mod domains;
mod sets;

use super::bitset::PoolSet;
use super::categorical::categorical;
use super::check::{Limits, class_shares};
use super::decision::{Candidate, Considered, CostRange, Decision, GangNode, GpuNode, Placement, RuledOut};
use super::domain::{DomainKey, pool_region_key};
use super::explain::explain;
use super::policy::Policy;
use super::requirements::Requirements;
use super::score::{BOUND_SLACK, Scorer};
use super::snapshot::{NO_SWITCH, Snapshot};
use crate::fleet::{NodeIdx, PoolIdx};
use crate::spec::Topology;
use domains::{Avail, Ctx, Unit, units, why_no_domain};
use sets::{Pick, best_set, node_vals, pick_order};

/// Places a gang (`req.nodes > 1`); see the module docs.
pub(crate) fn place_gang(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Decision {
    let fleet = snap.fleet();
    let mut ruled_out = Vec::new();
    let remaining = categorical(req, snap, &mut ruled_out);
    let ctx = Ctx {
        req,
        snap,
        n: req.gang_size() as usize,
        share: class_shares(req, snap),
        excluded: req.exclude_nodes.iter().filter_map(|n| snap.node_by_name(n)).map(|n| n.0).collect(),
    };
    let mut scorer = Scorer::new(req, snap, policy);
    let limits = Limits::new(req);

    // Pools that pass the gang's limits, ordered so that each domain's
    // pools are adjacent.
    let mut open: Vec<(DomainKey, u32)> = Vec::new();
    remaining.for_each(|p| {
        let row = &snap.rows[p];
        match limits.first_failure(snap, row, ctx.hourly(p)) {
            Some(f) => ruled_out.push(RuledOut { pool: PoolIdx(p as u32), filter: f }),
            None => {
                let key = match req.topology {
                    Topology::SameRegion => pool_region_key(snap, p),
                    _ => DomainKey::Pool(p as u32),
                };
                open.push((key, p as u32));
            }
        }
    });
    open.sort_unstable();

    let (unit_pools, units) = units(&ctx, &scorer, &open);
    let in_domain = {
        let mut set = PoolSet::empty(snap.rows.len());
        for &p in &unit_pools {
            set.insert(p as usize);
        }
        set
    };
    for &(_, p) in &open {
        if !in_domain.contains(p as usize) {
            ruled_out.push(RuledOut { pool: PoolIdx(p), filter: why_no_domain(&ctx, p) });
        }
    }
    if units.is_empty() {
        return Decision::Unschedulable(explain(req, snap));
    }
    ruled_out.sort_by_key(|r| (r.filter, r.pool));

    let cheapest = units.iter().map(|u| u.cheapest).fold(f64::INFINITY, f64::min);
    scorer.set_cheapest(cheapest);
    let cpu_fits = req.gpus == 0 && units.iter().any(|u| u.gpus_per_node == 0);
    let tier = |u: &Unit| u8::from(cpu_fits && u.gpus_per_node > 0);

    // Visit units best bound first; stop once none can make the top k.
    let mut order: Vec<(u8, f64, usize)> = units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            // A set across pools (`same-region`) scores at most the bound
            // of the pool of it whose nodes' fit and preference are best:
            // its minima are at most that pool's, its means at most its
            // best, its cost at most the unit's cheapest set's.
            let bound = match &unit_pools[u.pools.clone()] {
                [p] => ctx.pool_bound(&scorer, *p as usize, u.cheapest, ctx.n),
                pools => pools
                    .iter()
                    .map(|&p| ctx.pool_bound(&scorer, p as usize, u.cheapest, 1))
                    .fold(f64::NEG_INFINITY, f64::max),
            };
            (tier(u), bound, i)
        })
        .collect();
    order.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
    let k = policy.top_k.max(1);
    let mut top: Vec<Pick> = Vec::with_capacity(k.min(64) + 1);
    let (mut avail, mut vals) = (Vec::new(), Vec::new());
    for &(t, bound, i) in &order {
        if top.len() == k
            && top
                .last()
                .is_some_and(|last| t > last.tier || (t == last.tier && bound + BOUND_SLACK < last.score))
        {
            break;
        }
        avail.clear();
        for &p in &unit_pools[units[i].pools.clone()] {
            ctx.available(p as usize, &mut avail);
        }
        let mut offer = |nodes: &[Avail]| {
            node_vals(&ctx, &scorer, nodes, &mut vals);
            let Some(pick) = best_set(&ctx, &scorer, &vals, t) else { return };
            if top.len() == k && top.last().is_some_and(|last| pick_order(&pick, last).is_ge()) {
                return;
            }
            let at = top.partition_point(|x| pick_order(x, &pick).is_lt());
            top.insert(at, pick);
            top.truncate(k);
        };
        if req.topology == Topology::SameSwitch {
            // One pool: each switch with N usable nodes is a domain.
            avail.sort_by_key(|a| a.switch);
            for same in avail.chunk_by(|a, b| a.switch == b.switch) {
                if same[0].switch != NO_SWITCH && same.len() >= ctx.n {
                    offer(same);
                }
            }
        } else {
            offer(&avail);
        }
    }

    let considered = Considered {
        total_nodes: fleet.nodes.len(),
        total_pools: fleet.pools.len(),
        feasible_pools: {
            let mut c = 0;
            in_domain.for_each(|_| c += 1);
            c
        },
        ruled_out,
    };
    let candidates = top.iter().map(|p| candidate(&ctx, &scorer, p, cpu_fits)).collect();
    Decision::Placed(Placement { candidates, considered })
}

fn candidate(ctx: &Ctx<'_>, scorer: &Scorer<'_>, p: &Pick, cpu_fits: bool) -> Candidate {
    let (req, snap) = (ctx.req, ctx.snap);
    let fleet = snap.fleet();
    let first_pool = PoolIdx(p.pools[0]);
    // A domain's pools share a shape.
    let gpus_per_node = snap.rows[p.pools[0] as usize].gpus_per_node;
    let pool = fleet.pool(first_pool);
    let startup_s = p.pools.iter().map(|&q| fleet.pools[q as usize].startup.as_secs()).max().unwrap_or(0);
    let gpu_node = (req.gpus == 0 && gpus_per_node > 0).then_some(if cpu_fits {
        GpuNode::KeptForGpuWork
    } else {
        GpuNode::LastResort
    });
    Candidate {
        provider: fleet.provider(pool.provider).name.clone(),
        pool: snap.label(first_pool).to_string(),
        node: fleet.nodes[p.nodes[0] as usize].name.clone(),
        region: pool.region.clone(),
        accelerator: snap.accelerator(first_pool).to_string(),
        hourly_usd: p.hourly,
        relative_speed: scorer.speed(&snap.rows[p.pools[0] as usize]),
        est_cost_usd: CostRange::estimate(p.hourly, req),
        startup_s,
        score: p.score,
        breakdown: scorer.breakdown_raw(&p.raw),
        gpu_node,
        exhaustion: scorer.exhaustion(&snap.rows[p.pools[0] as usize]),
        pool_idx: first_pool,
        node_idx: NodeIdx(p.nodes[0]),
        gang: p
            .nodes
            .iter()
            .zip(&p.pools)
            .map(|(&node, &pool)| GangNode {
                node: fleet.nodes[node as usize].name.clone(),
                pool: snap.label(PoolIdx(pool)).to_string(),
                node_idx: NodeIdx(node),
            })
            .collect(),
    }
}
