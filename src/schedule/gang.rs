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
//! ## The score of a set (exact definition)
//!
//! Each node `i` has the single-node factor values of [`super::Factor`]
//! (`others` in `score.rs`): health `h_i`, success `s_i`, startup `t_i`,
//! locality `l_i`, fit `f_i`, preference `p_i`; and its pool's hourly share
//! `c_i` and expected hourly share `e_i` (`c_i` × the pool's paid hours per
//! useful hour, over its GPUs' relative throughput when the policy prices
//! per unit of work: [`super::Risk::per_work`]). For a set S of N nodes:
//! - hourly `H(S) = Σ_pools k_p c_p` (k_p nodes of pool p), reported as
//!   the candidate's `hourly_usd`; expected `E(S) = Σ_pools k_p e_p`;
//! - cost = `(E* + s) / (E(S) + s)` clamped to 0..=1, where `E*` is the
//!   least `E` of any feasible set and `s` the policy's cost smoothing
//!   (`cost_smoothing_share × E*`, or `cost_smoothing_usd` when `E*` is 0);
//! - health = `min h_i`, success = `min s_i`, startup = `min t_i` (the
//!   slowest pool), locality = `min l_i` (one region: all equal);
//! - fit = `Σ f_i / N`, preference = `Σ p_i / N` (summed in rank order);
//! - score = Σ weight-normalised coefficient × value, exactly as for one
//!   node ([`super::Scorer`]'s coefficients).
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
//!
//! The top k are the best set of each of the k best domains.
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
//! [`gang_hold`] answers what the engine needs to hold capacity for a gang
//! that does not fit now. No I/O, no clock, no randomness.

use super::bitset::PoolSet;
use super::check::{Limits, class_shares, free_shortfall, node_failure};
use super::decision::{Candidate, Considered, CostRange, Decision, GangNode, GpuNode, Placement, RuledOut};
use super::explain::explain;
use super::filter::Filter;
use super::place::categorical;
use super::score::{BOUND_SLACK, Feasible, Scorer};
use super::snapshot::{NO_SWITCH, ReadyNode, Snapshot, unit};
use super::{Policy, Requirements};
use crate::fleet::{NodeIdx, NodeState, PoolIdx, ProviderKind};
use crate::spec::Topology;
use std::cmp::Ordering;

/// A topology domain: the nodes a gang may be drawn from together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum DomainKey {
    /// One switch (ids are unique across the fleet).
    Switch(u32),
    Pool(u32),
    /// One provider, region and shape class.
    Region {
        provider: u32,
        region: u32,
        class: u32,
    },
}

/// The domain node `node` of pool `pool` belongs to under `topology`, if
/// any (a node without a switch has none under `same-switch`).
pub(crate) fn domain_key(snap: &Snapshot, topology: Topology, pool: usize, node: usize) -> Option<DomainKey> {
    match topology {
        Topology::SameSwitch => {
            let sw = snap.switch_of.get(node).copied().unwrap_or(NO_SWITCH);
            (sw != NO_SWITCH).then_some(DomainKey::Switch(sw))
        }
        Topology::SamePool => Some(DomainKey::Pool(pool as u32)),
        Topology::SameRegion => Some(pool_region_key(snap, pool)),
    }
}

/// A pool's `same-region` domain: its provider, region and class, or the
/// pool alone where the provider cannot launch one gang across pools.
fn pool_region_key(snap: &Snapshot, pool: usize) -> DomainKey {
    let row = &snap.rows[pool];
    if spans_pools(snap.fleet().providers[row.provider as usize].kind) {
        DomainKey::Region { provider: row.provider, region: row.region, class: row.class }
    } else {
        DomainKey::Pool(pool as u32)
    }
}

/// Whether a provider of this kind can launch one gang over several pools.
/// Slurm cannot: a job is submitted to one partition (a pool).
pub fn spans_pools(kind: ProviderKind) -> bool {
    kind != ProviderKind::Slurm
}

/// How a domain is named to people: "cloud-a/h100 switch leaf-2",
/// "cloud-a/h100", "cloud-a us-east (8× H100-SXM 80GB nvlink)".
pub(crate) fn domain_label(snap: &Snapshot, key: DomainKey, any_node: usize) -> String {
    let fleet = snap.fleet();
    let node = &fleet.nodes[any_node];
    let pool = node.pool;
    match key {
        DomainKey::Switch(_) => {
            format!("{} switch {}", snap.label(pool), node.switch.as_deref().unwrap_or("?"))
        }
        DomainKey::Pool(_) => snap.label(pool).to_string(),
        DomainKey::Region { .. } => {
            let p = fleet.pool(pool);
            format!("{} {} ({})", fleet.provider(p.provider).name, p.region, snap.accelerator(pool))
        }
    }
}

/// One node that fits the per-node request now.
#[derive(Debug, Clone, Copy)]
struct Avail {
    node: u32,
    pool: u32,
    free_gpus: u32,
    switch: u32,
}

/// A unit of the branch and bound: a `same-pool` domain (one pool), a
/// pool's `same-switch` domains (each switch with N usable nodes), or a
/// `same-region` domain (its pools with usable nodes).
struct Unit {
    /// Its pools, in index order, as a range of the pool list.
    pools: std::ops::Range<usize>,
    /// The least expected hourly of any set of N of its nodes.
    cheapest: f64,
    gpus_per_node: u32,
}

/// One node's figures within a domain.
#[derive(Debug, Clone, Copy)]
struct NodeVal {
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
struct Pick {
    tier: u8,
    score: f64,
    hourly: f64,
    /// The nodes' name ranks, sorted: the last tie-break.
    names: Vec<u32>,
    /// Nodes in rank order.
    nodes: Vec<u32>,
    pools: Vec<u32>,
    raw: [f64; 7],
}

fn pick_order(a: &Pick, b: &Pick) -> Ordering {
    a.tier
        .cmp(&b.tier)
        .then(b.score.total_cmp(&a.score))
        .then(a.hourly.total_cmp(&b.hourly))
        .then(a.names.cmp(&b.names))
}

/// Per-decision figures shared by the phases.
struct Ctx<'a> {
    req: &'a Requirements,
    snap: &'a Snapshot,
    n: usize,
    share: Vec<f64>,
    excluded: Vec<u32>,
}

impl Ctx<'_> {
    fn hourly(&self, p: usize) -> f64 {
        let row = &self.snap.rows[p];
        row.price * self.share[row.class as usize]
    }

    /// Whether a ready node of the request's list fits the per-node
    /// request: not excluded, with the free CPU, memory and disk.
    #[inline]
    fn usable(&self, r: &ReadyNode) -> bool {
        !self.excluded.contains(&r.node) && free_shortfall(self.req, &r.free).is_none()
    }

    /// The nodes of pool `p` that fit the per-node request now, best first.
    fn available(&self, p: usize, out: &mut Vec<Avail>) {
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
    fn usable_up_to(&self, p: usize, cap: usize) -> usize {
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
    fn holds(&self, p: usize, counts: &mut Vec<u32>) -> bool {
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
    fn pool_bound(&self, scorer: &Scorer<'_>, p: usize, expected: f64, n: usize) -> f64 {
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

/// The units of the open pools that hold at least one domain of N usable
/// nodes, and their pools. Exact without reading every node: a pool is
/// read only until it is known to hold a domain (N usable nodes; under
/// `same-region`, up to N per pool, which is all the cheapest set of N
/// can take from it).
fn units(ctx: &Ctx<'_>, scorer: &Scorer<'_>, open: &[(DomainKey, u32)]) -> (Vec<u32>, Vec<Unit>) {
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
fn why_no_domain(ctx: &Ctx<'_>, p: u32) -> Filter {
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

/// Each available node's factor values, hourly shares and name rank.
fn node_vals(ctx: &Ctx<'_>, scorer: &Scorer<'_>, nodes: &[Avail], out: &mut Vec<NodeVal>) {
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
fn best_set(ctx: &Ctx<'_>, scorer: &Scorer<'_>, vals: &[NodeVal], tier: u8) -> Option<Pick> {
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
