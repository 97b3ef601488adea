//! Where a gang can go: which open pools hold a topology domain of N
//! usable nodes, read from the snapshot's index as little as possible,
//! an upper bound of the score of any set in a pool, and, for pools that
//! hold no domain, why.
//!
//! Which pools hold a domain, and so `E*`, is known without reading every
//! node: a pool's ready nodes (the snapshot's index for the per-node GPUs)
//! are read only until N usable ones are found (`same-switch`: until one
//! switch has N; a pool whose biggest switch has fewer than N ready nodes,
//! which the snapshot counts, is not read at all; `same-region`: up to N
//! per pool, all the cheapest set of N could take from it). Only pools
//! that hold no domain are read in full, to say why.

use crate::fleet::PoolIdx;
use crate::schedule::check::free_shortfall;
use crate::schedule::domain::DomainKey;
use crate::schedule::filter::Filter;
use crate::schedule::requirements::Requirements;
use crate::schedule::score::Scorer;
use crate::schedule::snapshot::{NO_SWITCH, ReadyNode, Snapshot, unit};
use crate::spec::Topology;

/// One node that fits the per-node request now.
#[derive(Debug, Clone, Copy)]
pub(super) struct Avail {
    pub(super) node: u32,
    pub(super) pool: u32,
    pub(super) free_gpus: u32,
    pub(super) switch: u32,
}

/// A unit of the branch and bound: a `same-pool` domain (one pool), a
/// pool's `same-switch` domains (each switch with N usable nodes), or a
/// `same-region` domain (its pools with usable nodes).
pub(super) struct Unit {
    /// Its pools, in index order, as a range of the pool list.
    pub(super) pools: std::ops::Range<usize>,
    /// The least expected hourly of any set of N of its nodes.
    pub(super) cheapest: f64,
    pub(super) gpus_per_node: u32,
}

/// Per-decision figures shared by the phases.
pub(super) struct Ctx<'a> {
    pub(super) req: &'a Requirements,
    pub(super) snap: &'a Snapshot,
    pub(super) n: usize,
    pub(super) share: Vec<f64>,
    pub(super) excluded: Vec<u32>,
}

impl Ctx<'_> {
    pub(super) fn hourly(&self, p: usize) -> f64 {
        let row = &self.snap.rows[p];
        row.price * self.share[row.class as usize]
    }

    /// Whether a ready node of the request's list fits the per-node
    /// request: not excluded, with the free CPU, memory and disk.
    #[inline]
    pub(super) fn usable(&self, r: &ReadyNode) -> bool {
        !self.excluded.contains(&r.node) && free_shortfall(self.req, &r.free).is_none()
    }

    /// The nodes of pool `p` that fit the per-node request now, best first.
    pub(super) fn available(&self, p: usize, out: &mut Vec<Avail>) {
        let (list, _) = self.snap.ready_nodes(PoolIdx(p as u32), self.req.gpus);
        for r in list {
            if self.usable(r) {
                out.push(Avail {
                    node: r.node,
                    pool: p as u32,
                    free_gpus: r.free.gpus,
                    switch: self.snap.switch_of[r.node as usize],
                });
            }
        }
    }

    /// How many nodes of pool `p` fit the per-node request now, counting
    /// no further than `cap`.
    pub(super) fn usable_up_to(&self, p: usize, cap: usize) -> usize {
        let (list, _) = self.snap.ready_nodes(PoolIdx(p as u32), self.req.gpus);
        let mut c = 0;
        for r in list {
            if c == cap {
                break;
            }
            c += usize::from(self.usable(r));
        }
        c
    }

    /// Whether pool `p` alone holds a domain of N usable nodes (`same-pool`:
    /// the pool; `same-switch`: one of its switches). Reads its ready nodes
    /// only until it knows; under `same-switch`, none when its biggest
    /// switch has fewer than N ready nodes. `counts` is scratch.
    pub(super) fn holds(&self, p: usize, counts: &mut Vec<u32>) -> bool {
        let (snap, n) = (self.snap, self.n);
        let row = &snap.rows[p];
        let (list, _) = snap.ready_nodes(PoolIdx(p as u32), self.req.gpus);
        if list.len() < n {
            return false;
        }
        if self.req.topology != Topology::SameSwitch {
            return self.usable_up_to(p, n) == n;
        }
        if snap.biggest_switch(row, self.req.gpus) < n {
            return false;
        }
        let first = snap.pool_switches[p].start;
        counts.clear();
        counts.resize(snap.pool_switches[p].len(), 0);
        for r in list {
            let sw = snap.switch_of[r.node as usize];
            if sw != NO_SWITCH && self.usable(r) {
                let c = &mut counts[(sw - first) as usize];
                *c += 1;
                if *c as usize >= n {
                    return true;
                }
            }
        }
        false
    }

    /// An upper bound of the score of any set with `n` usable nodes of
    /// pool `p` (`n` = N: of each of its domains; 1: of any set that has
    /// one of its nodes, with the factors at their best there), whose
    /// expected hourly is at least `expected`: the weakest node's health
    /// at most the `n`-th best ready node's, the mean fit at most that of
    /// the `n` ready nodes with the fewest free GPUs, success at the pool's
    /// best, the rest exact.
    pub(super) fn pool_bound(&self, scorer: &Scorer<'_>, p: usize, expected: f64, n: usize) -> f64 {
        let (snap, gpus) = (self.snap, self.req.gpus);
        let row = &snap.rows[p];
        let (list, _) = snap.ready_nodes(PoolIdx(p as u32), gpus);
        if list.len() < n || n == 0 {
            return f64::INFINITY;
        }
        // Ready nodes are in node health order, NaNs (if any) at an end.
        let score = |r: &ReadyNode| snap.nodes[r.node as usize].health.score;
        let sane = |r: Option<&ReadyNode>| r.is_some_and(|r| !score(r).is_nan());
        let health = if row.health >= 0.0 && sane(list.first()) && sane(list.last()) {
            unit(row.health * score(&list[n - 1]))
        } else {
            row.health_bound
        };
        // Fit never grows with free GPUs: the N with the fewest free GPUs
        // fit best (the last list's nodes have at least that many).
        let (mut left, mut sum, mut most, mut prev, mut monotone) = (n, 0.0, 0.0f64, f64::INFINITY, true);
        for g in gpus..=row.gpus_per_node {
            let count = snap.ready_count(row, g) - snap.ready_count(row, g + 1);
            if count == 0 {
                continue;
            }
            let fit = scorer.fit(row, g);
            if fit.is_nan() {
                return f64::INFINITY;
            }
            monotone &= fit <= prev;
            prev = fit;
            most = most.max(fit);
            let take = count.min(left);
            sum += take as f64 * fit;
            left -= take;
        }
        let fit = if monotone { sum / n as f64 } else { most };
        scorer.gang_bound(row, scorer.risk(row), expected, health, fit)
    }
}

/// The units of the open pools that hold at least one domain of N usable
/// nodes, and their pools. Exact without reading every node: a pool is
/// read only until it is known to hold a domain (N usable nodes; under
/// `same-region`, up to N per pool, which is all the cheapest set of N
/// can take from it).
pub(super) fn units(ctx: &Ctx<'_>, scorer: &Scorer<'_>, open: &[(DomainKey, u32)]) -> (Vec<u32>, Vec<Unit>) {
    let (snap, n) = (ctx.snap, ctx.n);
    let mut pools: Vec<u32> = Vec::new();
    let mut out = Vec::new();
    let mut counts = Vec::new();
    let expected = |p: u32| {
        let row = &snap.rows[p as usize];
        ctx.hourly(p as usize) * scorer.risk(row).paid_per_useful
    };
    if ctx.req.topology != Topology::SameRegion {
        // One pool per key.
        for &(_, p) in open {
            if ctx.holds(p as usize, &mut counts) {
                pools.push(p);
                out.push(Unit {
                    pools: pools.len() - 1..pools.len(),
                    cheapest: n as f64 * expected(p),
                    gpus_per_node: snap.rows[p as usize].gpus_per_node,
                });
            }
        }
        return (pools, out);
    }
    let mut i = 0;
    while i < open.len() {
        let key = open[i].0;
        let j = i + open[i..].iter().take_while(|o| o.0 == key).count();
        let counted: Vec<(u32, usize)> = open[i..j]
            .iter()
            .map(|&(_, p)| (p, ctx.usable_up_to(p as usize, n)))
            .filter(|&(_, c)| c > 0)
            .collect();
        if counted.iter().map(|&(_, c)| c).sum::<usize>() >= n {
            // The cheapest N: whole pools, cheapest first.
            let mut by_price: Vec<(f64, u32, usize)> =
                counted.iter().map(|&(p, c)| (expected(p), p, c)).collect();
            by_price.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut left = n;
            let mut take: Vec<(u32, usize)> = Vec::new();
            for (_, p, c) in by_price {
                let t = c.min(left);
                take.push((p, t));
                left -= t;
                if left == 0 {
                    break;
                }
            }
            take.sort_unstable();
            let cheapest = take.iter().map(|&(p, t)| t as f64 * expected(p)).sum();
            let start = pools.len();
            pools.extend(counted.iter().map(|&(p, _)| p));
            let gpus_per_node = snap.rows[open[i].1 as usize].gpus_per_node;
            out.push(Unit { pools: start..pools.len(), cheapest, gpus_per_node });
        }
        i = j;
    }
    (pools, out)
}

/// Why open pool `p` is in no domain that can hold the gang.
pub(super) fn why_no_domain(ctx: &Ctx<'_>, p: u32) -> Filter {
    let snap = ctx.snap;
    let pi = PoolIdx(p);
    let (list, _) = snap.ready_nodes(pi, ctx.req.gpus);
    let mut some_fit = false;
    for r in list {
        if ctx.usable(r) {
            if ctx.req.topology != Topology::SameSwitch || snap.switch_of[r.node as usize] != NO_SWITCH {
                return Filter::Topology;
            }
            some_fit = true;
        }
    }
    if some_fit {
        // Only nodes without a switch fit (`same-switch`).
        return Filter::NoSwitch;
    }
    let why = |node: u32, free| {
        if ctx.excluded.contains(&node) { Some(Filter::NodeExcluded) } else { free_shortfall(ctx.req, free) }
    };
    list.first().and_then(|r| why(r.node, &r.free)).unwrap_or_else(|| {
        if snap.fleet().pool(pi).nodes.is_empty() {
            Filter::NoNodes
        } else if snap.ready_nodes(pi, 0).0.is_empty() {
            snap.pools[p as usize].unready
        } else {
            Filter::FreeGpus
        }
    })
}
