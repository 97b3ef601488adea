//! Single-node placement: filter → score → pick, the fast path.
//!
//! 1. Categorical and shape filters on pool sets (`categorical.rs`): one
//!    glob match per region or provider, one check per class, set
//!    operations for the rest.
//! 2. Per surviving pool: the numeric limits, then its best node from the
//!    snapshot's index (usually one read). This fixes which pools are
//!    feasible, exactly, and the cheapest price the cost factor needs.
//! 3. Per feasible pool: an upper bound of its score; only pools whose
//!    bound can still beat the current k-th best are scored in full
//!    (branch and bound, exact).
//!
//! Work without GPUs takes a GPU node only as a last resort: while a
//! CPU-only pool is feasible, every GPU pool ranks after every CPU-only
//! one, whatever the scores (its CPU and memory would block the node's
//! free GPUs), and the candidate says so ([`super::GpuNode`]). GPU work is
//! ranked by score alone.
//!
//! Only when nothing fits does the explanation scan every node
//! (`explain.rs`). No I/O, no clock, no randomness.

use super::bitset::PoolSet;
use super::categorical::categorical;
use super::check::{Limits, class_shares, free_shortfall};
use super::decision::{Candidate, Considered, CostRange, Decision, GpuNode, Placement, PoolPrice, RuledOut};
use super::explain::explain;
use super::filter::Filter;
use super::policy::Policy;
use super::requirements::Requirements;
use super::score::{BOUND_SLACK, Feasible, Risk, Scorer};
use super::snapshot::{PoolRow, ReadyNode, Snapshot};
use crate::fleet::{NodeIdx, PoolIdx};
use std::cmp::Ordering;

/// Places one workload on one node: every hard filter, then the policy's
/// score, then a deterministic order (CPU-only nodes first for work
/// without GPUs, then score desc, hourly asc, pool label, node name).
pub(crate) fn place_single(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Decision {
    let fleet = snap.fleet();
    let mut ruled_out = Vec::with_capacity(fleet.pools.len());
    let remaining = categorical(req, snap, &mut ruled_out);

    let mut ctx = PoolContext::new(req, snap);
    let mut scorer = Scorer::new(req, snap, policy);
    let (feasible, cheapest) = feasible_pools(&mut ctx, Some(&scorer), &remaining, &mut ruled_out);
    let count = feasible.len();
    if count == 0 {
        return Decision::Unschedulable(explain(req, snap));
    }
    scorer.set_cheapest(cheapest);
    let top = top_k(&ctx, &scorer, &feasible, policy.top_k.max(1));
    let considered = Considered {
        total_nodes: fleet.nodes.len(),
        total_pools: fleet.pools.len(),
        feasible_pools: count,
        ruled_out,
    };
    let candidates = top.iter().map(|f| candidate(&ctx, &scorer, f)).collect();
    Decision::Placed(Placement { candidates, considered })
}

/// Every pool that could host `req` on one node, with the price
/// [`place_single`] would give its candidate there under `policy` with
/// `top_k` unbounded: the same filters and the same numbers, without
/// scoring, building candidates or explaining a refusal. In pool order.
pub(crate) fn pool_prices_single(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Vec<PoolPrice> {
    let mut ruled_out = Vec::new();
    let remaining = categorical(req, snap, &mut ruled_out);
    let mut ctx = PoolContext::new(req, snap);
    let scorer = Scorer::new(req, snap, policy);
    // Prices only: no pool's risk is needed.
    let (feasible, _) = feasible_pools(&mut ctx, None, &remaining, &mut ruled_out);
    feasible
        .iter()
        .map(|pick| PoolPrice {
            pool_idx: PoolIdx(pick.pool),
            hourly_usd: pick.hourly,
            relative_speed: snap.rows.get(pick.pool as usize).map_or(1.0, |row| scorer.speed(row)),
        })
        .collect()
}

/// What judging one pool needs, computed once per decision.
struct PoolContext<'a> {
    req: &'a Requirements,
    snap: &'a Snapshot,
    /// Each class's share of a node (a pool's hourly share is price × share).
    share: Vec<f64>,
    limits: Limits,
    /// Excluded nodes, resolved to indices.
    excluded: Vec<u32>,
    /// Whether a pool without GPUs is feasible (set by [`feasible_pools`]).
    cpu_fits: bool,
}

/// What [`feasible_pools`] found in a feasible pool: its best usable node
/// and that node's free GPUs, the pool's hourly share, and the risk of an
/// attempt there (before the retry budget, [`Scorer::risk_of_an_attempt`])
/// where it was asked for. [`top_k`] reads them instead of working them
/// out again.
#[derive(Clone, Copy)]
struct Pick {
    pool: u32,
    node: u32,
    free_gpus: u32,
    hourly: f64,
    risk: Risk,
}

impl<'a> PoolContext<'a> {
    fn new(req: &'a Requirements, snap: &'a Snapshot) -> Self {
        Self {
            req,
            snap,
            share: class_shares(req, snap),
            limits: Limits::new(req),
            excluded: req.exclude_nodes.iter().filter_map(|n| snap.node_by_name(n)).map(|n| n.0).collect(),
            cpu_fits: false,
        }
    }

    /// Whether placing the request on a node of pool `row` holds a GPU
    /// node back for GPU work: work without GPUs, a GPU pool, and a
    /// CPU-only pool that fits.
    #[inline]
    fn kept_for_gpu_work(&self, row: &PoolRow) -> bool {
        self.cpu_fits && self.req.gpus == 0 && row.gpus_per_node > 0
    }

    /// What a candidate in pool `row` says about taking a GPU node.
    fn gpu_node(&self, row: &PoolRow) -> Option<GpuNode> {
        if self.req.gpus > 0 || row.gpus_per_node == 0 {
            None
        } else if self.cpu_fits {
            Some(GpuNode::KeptForGpuWork)
        } else {
            Some(GpuNode::LastResort)
        }
    }

    #[inline]
    fn hourly(&self, p: usize) -> f64 {
        self.snap.rows.get(p).map_or(f64::NAN, |row| {
            row.price * self.share.get(row.class as usize).copied().unwrap_or(f64::NAN)
        })
    }
}

/// Judges each pool that passed the categorical filters: the pool-wide
/// limits, then whether it has a usable node. Returns each feasible pool's
/// pick, in pool order (with its risk under `scorer`; without a scorer no
/// risk is worked out and the cheapest is infinite), and the cheapest
/// expected hourly share among them; the rest go to `ruled_out`. Notes in
/// `ctx` whether a CPU-only pool fits.
fn feasible_pools(
    ctx: &mut PoolContext<'_>,
    scorer: Option<&Scorer<'_>>,
    remaining: &PoolSet,
    ruled_out: &mut Vec<RuledOut>,
) -> (Vec<Pick>, f64) {
    let snap = ctx.snap;
    let (mut cheapest, mut cpu_fits) = (f64::INFINITY, false);
    let mut picks = Vec::with_capacity(snap.rows.len());
    remaining.for_each(|p| {
        let Some(row) = snap.rows.get(p) else { return };
        let hourly = ctx.hourly(p);
        let pick = match ctx.limits.first_failure(snap, row, hourly) {
            Some(f) => Err(f),
            None => pick_node(ctx, p),
        };
        match pick {
            Ok((node, free_gpus)) => {
                cpu_fits |= row.gpus_per_node == 0;
                let risk = match scorer {
                    Some(s) => {
                        let risk = s.risk_of_an_attempt(row);
                        cheapest = cheapest.min(hourly * risk.paid_per_useful);
                        risk
                    }
                    None => Risk::new(0.0, None),
                };
                picks.push(Pick { pool: p as u32, node, free_gpus, hourly, risk });
            }
            Err(filter) => ruled_out.push(RuledOut { pool: PoolIdx(p as u32), filter }),
        }
    });
    ctx.cpu_fits = cpu_fits;
    (picks, cheapest)
}

/// The best `k` feasible (pool, node)s, scored, in rank order. A pool whose
/// tier ranks after the current k-th best's, or whose score bound cannot
/// reach it in the same tier, is not scored (branch and bound), so only a
/// few pools are scored in full. Reads each pool's pick and risk from
/// [`feasible_pools`] (run with this scorer).
fn top_k(ctx: &PoolContext<'_>, scorer: &Scorer<'_>, feasible: &[Pick], k: usize) -> Vec<Feasible> {
    let snap = ctx.snap;
    // `k` may be usize::MAX ("everything"); the list never outgrows k + 1.
    let mut top: Vec<Feasible> = Vec::with_capacity(k.min(64) + 1);
    for &Pick { pool, node, free_gpus, hourly, risk: attempt } in feasible {
        let p = pool as usize;
        let Some(row) = snap.rows.get(p) else { continue };
        let expected_hourly = hourly * attempt.paid_per_useful;
        let tier = u8::from(ctx.kept_for_gpu_work(row));
        let full = top.len() == k;
        let beaten = |risk| {
            full && top.last().is_some_and(|last: &Feasible| {
                tier > last.tier
                    || (tier == last.tier
                        && scorer.bound(row, risk, expected_hourly) + BOUND_SLACK < last.score)
            })
        };
        // The budget's chance only lowers survival, so a pool beaten
        // without it is beaten with it: most pools never work it out.
        if scorer.bound_grows_with_survival() && beaten(attempt) {
            continue;
        }
        let risk = scorer.with_budget(row, attempt);
        if beaten(risk) {
            continue;
        }
        let name_rank = snap.nodes.get(node as usize).map_or(u32::MAX, |n| n.name_rank);
        let mut f = Feasible {
            pool: p as u32,
            node,
            free_gpus,
            hourly,
            expected_hourly,
            survival: risk.survival,
            score: 0.0,
            tier,
            label_rank: row.label_rank,
            name_rank,
        };
        f.score = scorer.score(&f);
        if full && top.last().is_some_and(|last| rank_order(&f, last).is_ge()) {
            continue;
        }
        let at = top.partition_point(|t| rank_order(t, &f).is_lt());
        top.insert(at, f);
        top.truncate(k);
    }
    top
}

/// Tier asc, score desc, hourly asc, pool label, node name: a total order
/// that does not depend on insertion order.
#[inline]
fn rank_order(a: &Feasible, b: &Feasible) -> Ordering {
    a.tier
        .cmp(&b.tier)
        .then(b.score.total_cmp(&a.score))
        .then(a.hourly.total_cmp(&b.hourly))
        .then(a.label_rank.cmp(&b.label_rank))
        .then(a.name_rank.cmp(&b.name_rank))
}

/// The pool's best usable node and its free GPUs: the first in the ready
/// index (healthiest, fewest free GPUs) that is not excluded and has the
/// free CPU, memory and disk. On failure, why (see [`Considered::ruled_out`]).
#[inline]
fn pick_node(ctx: &PoolContext<'_>, p: usize) -> Result<(u32, u32), Filter> {
    let (req, snap, excluded) = (ctx.req, ctx.snap, &ctx.excluded);
    let pi = PoolIdx(p as u32);
    // Work that asks for some CPU and memory cannot use the leading nodes
    // that have none free (say, GPU-saturated ones), so it starts after them.
    let needs_some = req.cpu_cores > 0.0 && req.memory_gb > 0.0;
    // Usually the best usable node fits.
    if needs_some
        && excluded.is_empty()
        && let Some(n) = snap.rows.get(p).and_then(|row| snap.best_usable_node(row, req.gpus))
        && free_shortfall(req, &n.free).is_none()
    {
        return Ok((n.node, n.free.gpus));
    }
    let (list, unusable) = snap.ready_nodes(pi, req.gpus);
    let skip = if needs_some { unusable } else { 0 };
    let why = |n: &ReadyNode| {
        if excluded.contains(&n.node) { Some(Filter::NodeExcluded) } else { free_shortfall(req, &n.free) }
    };
    if let Some(n) = list.iter().skip(skip).find(|n| why(n).is_none()) {
        return Ok((n.node, n.free.gpus));
    }
    // Ruled out: report why its best-ranked node does not fit.
    Err(list.first().and_then(why).unwrap_or_else(|| {
        if snap.fleet().pool(pi).nodes.is_empty() {
            Filter::NoNodes
        } else if snap.ready_nodes(pi, 0).0.is_empty() {
            snap.pools[p].unready
        } else {
            Filter::FreeGpus
        }
    }))
}

fn candidate(ctx: &PoolContext<'_>, scorer: &Scorer<'_>, f: &Feasible) -> Candidate {
    let (req, snap) = (ctx.req, ctx.snap);
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
        relative_speed: snap.rows.get(f.pool as usize).map_or(1.0, |row| scorer.speed(row)),
        est_cost_usd: CostRange::estimate(f.hourly, req),
        startup_s: pool.startup.as_secs(),
        score: f.score,
        breakdown: scorer.breakdown(f),
        gpu_node: snap.rows.get(f.pool as usize).and_then(|row| ctx.gpu_node(row)),
        exhaustion: snap.rows.get(f.pool as usize).and_then(|row| scorer.exhaustion(row)),
        pool_idx: PoolIdx(f.pool),
        node_idx: NodeIdx(f.node),
        gang: Vec::new(),
    }
}
