//! The best set of N nodes in one domain, exactly, and its score.
//!
//! ## The score of a set (exact definition)
//!
//! Each node `i` has the single-node factor values of [`crate::schedule::Factor`]
//! (`others` in `score.rs`): health `h_i`, success `s_i`, startup `t_i`,
//! locality `l_i`, fit `f_i`, preference `p_i`; and its pool's hourly share
//! `c_i` and expected hourly share `e_i` (`c_i` × the pool's paid hours per
//! useful hour, over its GPUs' relative throughput when the policy prices
//! per unit of work: [`crate::schedule::Risk::per_work`]). For a set S of N nodes:
//! - hourly `H(S) = Σ_pools k_p c_p` (k_p nodes of pool p), reported as
//!   the candidate's `hourly_usd`; expected `E(S) = Σ_pools k_p e_p`;
//! - cost = `(E* + s) / (E(S) + s)` clamped to 0..=1, where `E*` is the
//!   least `E` of any feasible set and `s` the policy's cost smoothing
//!   (`cost_smoothing_share × E*`, or `cost_smoothing_usd` when `E*` is 0);
//! - health = `min h_i`, success = `min s_i`, startup = `min t_i` (the
//!   slowest pool), locality = `min l_i` (one region: all equal);
//! - fit = `Σ f_i / N`, preference = `Σ p_i / N` (summed in rank order);
//! - score = Σ weight-normalised coefficient × value, exactly as for one
//!   node ([`Scorer`]'s coefficients).
//!
//! Sets rank by: CPU-only before GPU nodes for work without GPUs (as for
//! one node), score desc, `H` asc, then the nodes' name ranks (sorted,
//! lexicographically). Within a set, nodes are in rank order: health desc,
//! success desc, fit desc, name; rank 0 is the best node.
//!
//! ## Why the choice is optimal
//!
//! In a domain, the optimum S* has some minimum health `h*`, success `s*`
//! and startup `t*`. Enumerating every threshold triple (the distinct
//! values present) and restricting to nodes at or above it, S* is among
//! the candidates of the triple `(h*, s*, t*)`, and any set there scores
//! at least as well on the three minima. What is left is to maximise
//! `Σ v_i / N + w·g(E(S))` with `v_i = coef_fit f_i + coef_pref p_i` and
//! `g(E) = (E* + s)/(E + s)`, decreasing. In one pool `E` is the same for
//! every set, so the N largest `v` are optimal. Across pools
//! (`same-region`), the optimum is among the sets no other set beats on
//! both `Σ v` and `E` (the Pareto frontier); a pool's nodes share a price,
//! so a set takes the best `k_p` of each pool, and the frontier is built
//! pool by pool over the `k_p` ([`frontier`]). Each candidate set's true
//! score is then computed and the best kept. Only N nodes of a pool are
//! candidates at a threshold triple, and triples are visited by the
//! points their minima give, skipped once even the best the rest of the
//! score could add cannot reach the best set found.

use super::domains::{Avail, Ctx};
use crate::schedule::score::{BOUND_SLACK, Feasible, Scorer};
use std::cmp::Ordering;

/// One node's figures within a domain.
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeVal {
    node: u32,
    pool: u32,
    /// health, success, startup, locality, fit, preference.
    raw: [f64; 6],
    /// `coef_fit × fit + coef_pref × preference`.
    v: f64,
    hourly: f64,
    expected: f64,
    name_rank: u32,
}

/// A chosen set and its score.
#[derive(Debug, Clone)]
pub(super) struct Pick {
    pub(super) tier: u8,
    pub(super) score: f64,
    pub(super) hourly: f64,
    /// The nodes' name ranks, sorted: the last tie-break.
    pub(super) names: Vec<u32>,
    /// Nodes in rank order.
    pub(super) nodes: Vec<u32>,
    pub(super) pools: Vec<u32>,
    pub(super) raw: [f64; 7],
}

pub(super) fn pick_order(a: &Pick, b: &Pick) -> Ordering {
    a.tier
        .cmp(&b.tier)
        .then(b.score.total_cmp(&a.score))
        .then(a.hourly.total_cmp(&b.hourly))
        .then(a.names.cmp(&b.names))
}

/// Each available node's factor values, hourly shares and name rank.
pub(super) fn node_vals(ctx: &Ctx<'_>, scorer: &Scorer<'_>, nodes: &[Avail], out: &mut Vec<NodeVal>) {
    let snap = ctx.snap;
    out.clear();
    let (cf, cp) = (scorer.coef(5), scorer.coef(6));
    for a in nodes {
        let row = &snap.rows[a.pool as usize];
        let risk = scorer.risk(row);
        let hourly = ctx.hourly(a.pool as usize);
        let name_rank = snap.nodes[a.node as usize].name_rank;
        let f = Feasible {
            pool: a.pool,
            node: a.node,
            free_gpus: a.free_gpus,
            hourly,
            expected_hourly: hourly * risk.paid_per_useful,
            survival: risk.survival,
            score: 0.0,
            tier: 0,
            label_rank: row.label_rank,
            name_rank,
        };
        let raw = scorer.others(&f);
        out.push(NodeVal {
            node: a.node,
            pool: a.pool,
            raw,
            v: cf * raw[4] + cp * raw[5],
            hourly,
            expected: f.expected_hourly,
            name_rank,
        });
    }
}

/// Distinct values, largest first.
fn distinct_desc(vals: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = vals.collect();
    v.sort_by(|a, b| b.total_cmp(a));
    v.dedup_by(|a, b| a.to_bits() == b.to_bits());
    v
}

/// The best set of N among `vals` (one domain); see the module docs.
pub(super) fn best_set(ctx: &Ctx<'_>, scorer: &Scorer<'_>, vals: &[NodeVal], tier: u8) -> Option<Pick> {
    let n = ctx.n;
    if vals.len() < n {
        return None;
    }
    // Preference order for the linear part: v desc, hourly asc, name.
    let mut sorted: Vec<usize> = (0..vals.len()).collect();
    let pref = |a: &NodeVal, b: &NodeVal| {
        b.v.total_cmp(&a.v).then(a.hourly.total_cmp(&b.hourly)).then(a.name_rank.cmp(&b.name_rank))
    };
    sorted.sort_by(|&a, &b| pref(&vals[a], &vals[b]));
    let one_price = vals.iter().all(|x| x.expected.to_bits() == vals[0].expected.to_bits());
    let hs = distinct_desc(vals.iter().map(|x| x.raw[0]));
    let ss = distinct_desc(vals.iter().map(|x| x.raw[1]));
    let ts = distinct_desc(vals.iter().map(|x| x.raw[2]));
    // Thresholds in descending order of the points their minima give, so
    // a good set is found early and the bound below skips the rest: a set
    // whose minima are (h, s, t) scores at most those points, plus the
    // best cost, the best locality and the mean of the N largest `v` of
    // the nodes at or above them.
    let (ch, cs, ct) = (scorer.coef(1), scorer.coef(2), scorer.coef(3));
    let mut triples: Vec<(f64, f64, f64, f64)> = Vec::with_capacity(hs.len() * ss.len() * ts.len());
    for &h in &hs {
        for &s in &ss {
            for &t in &ts {
                triples.push((ch * h + cs * s + ct * t, h, s, t));
            }
        }
    }
    triples.sort_by(|a, b| b.0.total_cmp(&a.0));
    let locality = scorer.coef(4) * vals.iter().map(|x| x.raw[3]).fold(0.0, f64::max);
    // The most a set whose minima give `points`, among nodes the cheapest
    // of which has expected hourly `e_least`, can score: it costs no less
    // than N of those.
    let bound = |points: f64, e_least: f64, v_mean: f64| {
        points + scorer.coef(0) * scorer.cost(n as f64 * e_least) + locality + v_mean
    };
    let least = |nodes: &[usize]| nodes.iter().map(|&i| vals[i].expected).fold(f64::INFINITY, f64::min);
    let e_all = least(&sorted);
    let mut best: Option<Pick> = None;
    let mut eligible: Vec<usize> = Vec::with_capacity(vals.len());
    let mut last: Vec<usize> = Vec::new();
    // Each node's pool as a small index, for counting a pool's nodes.
    let mut pool_ids: Vec<u32> = vals.iter().map(|x| x.pool).collect();
    pool_ids.sort_unstable();
    pool_ids.dedup();
    let local: Vec<usize> = vals.iter().map(|x| pool_ids.binary_search(&x.pool).unwrap_or(0)).collect();
    let mut taken: Vec<usize> = vec![0; pool_ids.len()];
    let mut set: Vec<usize> = Vec::with_capacity(n);
    let consider = |set: &[usize], best: &mut Option<Pick>| {
        let pick = evaluate(ctx, scorer, vals, set, tier);
        if best.as_ref().is_none_or(|b| pick_order(&pick, b).is_lt()) {
            *best = Some(pick);
        }
    };
    // The most the mean `v` of any N nodes can be.
    let v_most = sorted[..n].iter().map(|&i| vals[i].v).sum::<f64>() / n as f64;
    for &(points, th, tsu, tst) in &triples {
        // Triples come by points, descending: once even the best of
        // everything else cannot lift one to the best set, none can.
        if best.as_ref().is_some_and(|b| bound(points, e_all, v_most) + BOUND_SLACK < b.score) {
            break;
        }
        // The nodes at or above the thresholds, in preference order, at
        // most N of each pool: a pool's nodes share one price, so any set
        // the linear part picks takes a pool's nodes in this order.
        eligible.clear();
        taken.fill(0);
        for &i in &sorted {
            let r = &vals[i].raw;
            if r[0] >= th && r[1] >= tsu && r[2] >= tst && taken[local[i]] < n {
                taken[local[i]] += 1;
                eligible.push(i);
            }
        }
        if eligible.len() < n || eligible == last {
            continue;
        }
        last.clone_from(&eligible);
        let v_top = eligible[..n].iter().map(|&i| vals[i].v).sum::<f64>() / n as f64;
        if best.as_ref().is_some_and(|b| bound(points, least(&eligible), v_top) + BOUND_SLACK < b.score) {
            continue;
        }
        let single = one_price
            || eligible.iter().all(|&i| vals[i].expected.to_bits() == vals[eligible[0]].expected.to_bits());
        if single {
            set.clear();
            set.extend_from_slice(&eligible[..n]);
            consider(&set, &mut best);
            continue;
        }
        for set in frontier(vals, &eligible, n) {
            consider(&set, &mut best);
        }
    }
    best
}

/// The sets of `n` among `eligible` (in preference order, at most `n`
/// per pool) that no other set beats on both the summed `v` (more is
/// better) and the expected hourly `E` (less is better): the best set for
/// any score that grows with `Σ v` and falls with `E` is among them. A
/// pool's nodes share one price, so a set takes a prefix of each pool's;
/// the frontier is built pool by pool over how many nodes each gives.
fn frontier(vals: &[NodeVal], eligible: &[usize], n: usize) -> Vec<Vec<usize>> {
    // (E, Σ v, nodes) per count of nodes taken so far.
    type Point = (f64, f64, Vec<usize>);
    let mut pools: Vec<(u32, Vec<usize>)> = Vec::new();
    for &i in eligible {
        match pools.iter_mut().find(|(p, _)| *p == vals[i].pool) {
            Some((_, nodes)) => nodes.push(i),
            None => pools.push((vals[i].pool, vec![i])),
        }
    }
    let mut by_count: Vec<Vec<Point>> = vec![Vec::new(); n + 1];
    by_count[0].push((0.0, 0.0, Vec::new()));
    for (_, nodes) in &pools {
        let e = vals[nodes[0]].expected;
        let mut next = by_count.clone();
        for c in 0..n {
            for (pe, pv, pset) in &by_count[c] {
                let (mut v, mut set) = (*pv, pset.clone());
                for (k, &i) in nodes.iter().enumerate().take(n - c) {
                    v += vals[i].v;
                    set.push(i);
                    next[c + k + 1].push((pe + (k + 1) as f64 * e, v, set.clone()));
                }
            }
        }
        for points in &mut next {
            // Cheapest first, then most v; keep a point only if it has
            // more v than every cheaper one.
            points.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
            let mut most = f64::NEG_INFINITY;
            points.retain(|p| {
                let keep = p.1 > most;
                most = most.max(p.1);
                keep
            });
        }
        by_count = next;
    }
    by_count.pop().unwrap_or_default().into_iter().map(|(_, _, set)| set).collect()
}

/// The set's combined factors, score and rank order.
fn evaluate(ctx: &Ctx<'_>, scorer: &Scorer<'_>, vals: &[NodeVal], set: &[usize], tier: u8) -> Pick {
    let n = set.len() as f64;
    let mut ranked: Vec<&NodeVal> = set.iter().map(|&i| &vals[i]).collect();
    ranked.sort_by(|a, b| {
        b.raw[0]
            .total_cmp(&a.raw[0])
            .then(b.raw[1].total_cmp(&a.raw[1]))
            .then(b.raw[4].total_cmp(&a.raw[4]))
            .then(a.name_rank.cmp(&b.name_rank))
    });
    let mut raw = [0.0; 7];
    for i in 0..4 {
        raw[i + 1] = ranked.iter().map(|x| x.raw[i]).fold(f64::INFINITY, f64::min);
    }
    raw[5] = ranked.iter().map(|x| x.raw[4]).sum::<f64>() / n;
    raw[6] = ranked.iter().map(|x| x.raw[5]).sum::<f64>() / n;
    // Per pool, in index order: k_p × share.
    let mut pools: Vec<u32> = ranked.iter().map(|x| x.pool).collect();
    pools.sort_unstable();
    let (mut hourly, mut expected) = (0.0, 0.0);
    let mut i = 0;
    while i < pools.len() {
        let p = pools[i];
        let k = pools[i..].iter().take_while(|&&q| q == p).count();
        let x = ranked.iter().find(|x| x.pool == p).map_or((0.0, 0.0), |x| (x.hourly, x.expected));
        hourly += k as f64 * x.0;
        expected += k as f64 * x.1;
        i += k;
    }
    raw[0] = scorer.cost(expected);
    let mut names: Vec<u32> = ranked.iter().map(|x| x.name_rank).collect();
    names.sort_unstable();
    let _ = ctx;
    Pick {
        tier,
        score: scorer.score_raw(&raw),
        hourly,
        names,
        nodes: ranked.iter().map(|x| x.node).collect(),
        pools: ranked.iter().map(|x| x.pool).collect(),
        raw,
    }
}
