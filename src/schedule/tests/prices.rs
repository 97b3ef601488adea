//! [`pool_prices`] says what [`place`] would, per pool, without the
//! candidates: the same pools and the same prices.

use super::*;
use crate::fleet::synth::{synth_fleet, synth_health};

/// Per pool, the cheapest candidate `place` makes with `top_k` unbounded.
fn from_place(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Vec<PoolPrice> {
    let all = Policy { top_k: usize::MAX, ..policy.clone() };
    let Decision::Placed(p) = place(req, snap, &all) else { return Vec::new() };
    let mut out: Vec<PoolPrice> = Vec::new();
    for c in p.candidates {
        let price =
            PoolPrice { pool_idx: c.pool_idx, hourly_usd: c.hourly_usd, relative_speed: c.relative_speed };
        match out.iter_mut().find(|o| o.pool_idx == c.pool_idx) {
            Some(o) if price.priced_hourly() < o.priced_hourly() => *o = price,
            Some(_) => {}
            None => out.push(price),
        }
    }
    out.sort_by_key(|p| p.pool_idx);
    out
}

#[test]
fn pool_prices_are_the_cheapest_candidate_per_pool_that_place_makes() {
    let fleet = synth_fleet(400, 5);
    let snap = Snapshot::new(&fleet, &synth_health(&fleet, 5));
    let mut reqs = Vec::new();
    for (gpus, nodes) in [(0, 1), (1, 1), (2, 1), (4, 1), (8, 1), (3, 1), (8, 2), (4, 3)] {
        for interruptible in [false, true] {
            reqs.push(Requirements {
                gpus,
                nodes,
                cpu_cores: 4.0,
                memory_gb: 16.0,
                interruptible,
                expected_runtime: Some(Duration::from_secs(3 * 3600)),
                ..Requirements::default()
            });
        }
    }
    // A price cap and an excluded node rule out some pools or nodes.
    reqs.push(Requirements { gpus: 1, max_hourly_usd: Some(1.5), ..Requirements::default() });
    let excluded = fleet.nodes.iter().take(20).map(|n| n.name.clone()).collect();
    reqs.push(Requirements { gpus: 1, exclude_nodes: excluded, ..Requirements::default() });
    let mut nonempty = 0;
    for req in &reqs {
        for per_work in [false, true] {
            let policy = Policy { per_work, ..Policy::default() };
            let got = pool_prices(req, &snap, &policy);
            assert_eq!(got, from_place(req, &snap, &policy), "{req:?}, per work: {per_work}");
            nonempty += usize::from(got.len() > 1);
        }
    }
    assert!(nonempty > reqs.len(), "most requests fit several pools: {nonempty}");
}
