//! Admission and victim choice against brute-force references on small
//! cohorts and fleets: never above quota + borrowing limit, an owner's
//! guarantee is never refused, victims free enough, are never more than
//! needed, and are the best under the stated order.

use canopy::tenant::quota::{self, Admission, Amount, Limit, Limits, Usage};
use canopy::tenant::reclaim::{Candidate, choose};
use proptest::prelude::*;

fn limit() -> impl Strategy<Value = Limit> {
    (0u64..8, prop::option::of(0u64..8), prop::option::of(0u64..8)).prop_map(
        |(nominal, borrowing, lending)| Limit {
            nominal,
            borrowing,
            lending: lending.map(|l| l.min(nominal)),
        },
    )
}

fn gpus(l: Limit) -> Limits {
    Limits { gpus: Some(l), cpu: None }
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn members(limits: &[Limit], used: &[u64]) -> Vec<Usage<'static>> {
    limits
        .iter()
        .zip(used)
        .enumerate()
        .map(|(i, (l, u))| Usage { tenant: NAMES[i], limits: gpus(*l), used: Amount::new(*u, 0) })
        .collect()
}

/// The rules, written the long way: each member within nominal + borrowing
/// (nominal alone without a cohort), and what members use beyond what is
/// theirs alone within what the members lend.
fn reference_within(limits: &[Limit], used: &[u64], cohort: bool) -> bool {
    let mut shared = 0u64;
    let mut shared_use = 0u64;
    for (l, &u) in limits.iter().zip(used) {
        let cap = if cohort { l.borrowing.map_or(u64::MAX, |b| l.nominal + b) } else { l.nominal };
        if u > cap {
            return false;
        }
        let lend = l.lending.map_or(l.nominal, |x| x.min(l.nominal));
        shared += lend;
        shared_use += u.saturating_sub(l.nominal - lend);
    }
    shared_use <= shared
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn admission_never_exceeds_limits_and_never_refuses_a_guarantee(
        limits in prop::collection::vec(limit(), 1..=4),
        requests in prop::collection::vec((0usize..4, 1u64..6), 0..24),
        cohort in any::<bool>(),
    ) {
        let n = limits.len();
        let cohort_name = cohort.then_some("c");
        let mut used = vec![0u64; n];
        for (who, req) in requests {
            let who = who % n;
            let m = members(&limits, &used);
            let got = quota::admit(cohort_name, "f", &m, NAMES[who], Amount::new(req, 0)).unwrap();
            let mut after = used.clone();
            after[who] += req;
            let fits = reference_within(&limits, &after, cohort);
            match got {
                Admission::Admit { borrowed } => {
                    prop_assert!(fits, "admitted beyond the limits: {limits:?} {after:?}");
                    prop_assert_eq!(borrowed.gpus, after[who].saturating_sub(limits[who].nominal));
                    used = after;
                }
                Admission::Reclaim { reclaim } => {
                    prop_assert!(!fits);
                    prop_assert!(after[who] <= limits[who].nominal, "reclaim for work beyond nominal");
                    // Borrowers giving back exactly `reclaim` (what each holds beyond
                    // its nominal, in any order) makes it fit; one less does not.
                    let give_back = |amount: u64| {
                        let mut a = after.clone();
                        let mut left = amount;
                        for i in 0..n {
                            let over = a[i].saturating_sub(limits[i].nominal);
                            let take = over.min(left);
                            a[i] -= take;
                            left -= take;
                        }
                        (left == 0, a)
                    };
                    let (enough, fixed) = give_back(reclaim.gpus);
                    prop_assert!(enough && reference_within(&limits, &fixed, cohort));
                    let (_, short) = give_back(reclaim.gpus - 1);
                    prop_assert!(!reference_within(&limits, &short, cohort));
                    used = fixed;
                }
                Admission::Wait(w) => {
                    prop_assert!(!fits, "refused although it fits: {w}");
                    prop_assert!(after[who] > limits[who].nominal, "a guarantee was refused: {w}");
                }
            }
            prop_assert!(quota::within(&members(&limits, &used), !cohort));
        }
    }

    #[test]
    fn victims_free_enough_are_never_more_than_needed_and_are_the_best(
        free in prop::collection::vec(0u64..4, 1..=3),
        cands in prop::collection::vec((0usize..3, 1u64..5, 0u64..50, 0u64..50), 0..9),
        request in 1u64..9,
    ) {
        let nodes: Vec<(u32, Amount)> = free.iter().enumerate().map(|(i, f)| (i as u32, Amount::new(*f, 0))).collect();
        let candidates: Vec<Candidate> = cands
            .iter()
            .enumerate()
            .map(|(i, &(node, g, lost, run))| Candidate {
                workload: i as u64,
                frees: vec![((node % nodes.len()) as u32, Amount::new(g, 0))],
                lost_gpu_s: lost,
                run_gpu_s: run,
            })
            .collect();
        let req = Amount::new(request, 0);
        // Brute force: every subset, on the node where it helps.
        let fits_on = |set: &[usize], node: u32| {
            let f = nodes[node as usize].1.gpus
                + set.iter().filter(|&&i| candidates[i].frees[0].0 == node).map(|&i| candidates[i].frees[0].1.gpus).sum::<u64>();
            f >= request
        };
        let mut best: Option<(u64, u64, usize)> = None;
        for mask in 0u32..(1 << candidates.len()) {
            let set: Vec<usize> = (0..candidates.len()).filter(|i| mask & (1 << i) != 0).collect();
            // A set only counts on one node: all its members there.
            for node in 0..nodes.len() as u32 {
                if set.iter().all(|&i| candidates[i].frees[0].0 == node) && fits_on(&set, node) {
                    let cost = set.iter().fold((0u64, 0u64, 0usize), |c, &i| (c.0 + candidates[i].lost_gpu_s, c.1 + candidates[i].run_gpu_s, c.2 + 1));
                    if best.is_none_or(|b| cost < b) {
                        best = Some(cost);
                    }
                }
            }
        }
        let got = choose(&nodes, &candidates, req, 1);
        match (got, best) {
            (None, None) => {}
            (Some(c), Some(b)) => {
                prop_assert_eq!(c.cost(), b, "not the best choice");
                let node = c.nodes[0];
                let set: Vec<usize> = c.victims.iter().map(|v| v.workload as usize).collect();
                prop_assert!(set.iter().all(|&i| candidates[i].frees[0].0 == node));
                prop_assert!(fits_on(&set, node), "does not free enough");
                for k in 0..set.len() {
                    let mut fewer = set.clone();
                    fewer.remove(k);
                    prop_assert!(!fits_on(&fewer, node), "victim {} was not needed", set[k]);
                }
            }
            (got, best) => prop_assert!(false, "choose {got:?} vs brute force {best:?}"),
        }
    }
}
