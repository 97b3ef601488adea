//! [`place`]: the top of the scheduler. It chooses the strategy, one node
//! (`single.rs`) or a gang of N nodes in one topology domain (`gang.rs`);
//! both stand on the same shared layer (the filters, the scorer, the
//! explanation) and return the same [`Decision`].

use super::decision::{Decision, PoolPrice};
use super::gang::place_gang;
use super::policy::Policy;
use super::requirements::Requirements;
use super::single::{place_single, pool_prices_single};
use super::snapshot::Snapshot;

/// Places one workload: every hard filter, then the policy's score, then a
/// deterministic order (CPU-only nodes first for work without GPUs, then
/// score desc, hourly asc, pool label, node name). Gangs (`nodes > 1`)
/// rank sets of nodes the same way; see `gang.rs`.
pub fn place(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Decision {
    if req.nodes > 1 { place_gang(req, snap, policy) } else { place_single(req, snap, policy) }
}

/// Every pool that could host `req`, with the cheapest price
/// ([`PoolPrice::priced_hourly`]) among the candidates [`place`] would make
/// there under `policy`, `top_k` taken as unbounded; in pool order. For
/// one node this skips the scoring and the candidates (and, when nothing
/// fits, the explanation): its cost grows with the pools, not the nodes.
pub fn pool_prices(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Vec<PoolPrice> {
    if req.nodes <= 1 {
        return pool_prices_single(req, snap, policy);
    }
    let all = Policy { top_k: usize::MAX, ..policy.clone() };
    let Decision::Placed(p) = place_gang(req, snap, &all) else { return Vec::new() };
    let mut out: Vec<PoolPrice> = Vec::new();
    for c in p.candidates {
        let price =
            PoolPrice { pool_idx: c.pool_idx, hourly_usd: c.hourly_usd, relative_speed: c.relative_speed };
        match out.iter_mut().find(|o| o.pool_idx == c.pool_idx) {
            // Equal prices: the first, as a map keyed by pool kept it.
            Some(o) if price.priced_hourly() < o.priced_hourly() => *o = price,
            Some(_) => {}
            None => out.push(price),
        }
    }
    out.sort_by_key(|p| p.pool_idx);
    out
}
