//! Which borrowed workloads stop when an owner needs its capacity back.
//!
//! The owner's work needs `request` on each of `count` nodes of its own.
//! Borrowed workloads running there are the candidates. A choice frees
//! enough, and among the choices that do, it is the best in this order:
//!
//! 1. the least progress lost: GPU-seconds run since each victim's last
//!    checkpoint (since its start when it has none), summed;
//! 2. then the fewest GPU-seconds preempted: the victims' GPUs times how
//!    long their attempts have run, summed (the least disruption);
//! 3. then the fewest workloads.
//!
//! Never more than needed: a choice from which a victim could be left out
//! and still free enough is never made (the order makes any such choice
//! worse than the one without it). For one node the search is exact
//! (branch and bound over the node's candidates, up to [`EXACT_UP_TO`] of
//! them; beyond that, cheapest first and then dropping any victim not
//! needed). For `count` nodes, each node's best set is found that way and
//! the `count` cheapest nodes are taken.

use super::quota::Amount;

/// Up to this many candidates on one node the choice is exact.
pub const EXACT_UP_TO: usize = 20;

/// A borrowed workload the owner's work may displace.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub workload: u64,
    /// What stopping it frees, per node it runs on.
    pub frees: Vec<(u32, Amount)>,
    /// GPU-seconds of work since its last checkpoint (lost if stopped).
    pub lost_gpu_s: u64,
    /// GPU-seconds its current attempt has run (the disruption).
    pub run_gpu_s: u64,
}

/// Why a victim was chosen, for its event and the console.
#[derive(Debug, Clone, PartialEq)]
pub struct VictimReason {
    pub workload: u64,
    pub node: u32,
    pub frees: Amount,
    pub lost_gpu_s: u64,
    pub run_gpu_s: u64,
    /// How many borrowed workloads ran on the owner's nodes considered.
    pub considered: usize,
    /// How many victims the choice has.
    pub of: usize,
}

impl VictimReason {
    /// "loses 0.4 GPU-h since its last checkpoint and stops 2.0 GPU-h of
    /// running work; the least costly way to free 4 GPUs on its node: the
    /// only victim among 5 borrowed workloads on the owner's nodes"
    pub fn explain(&self, request: &Amount) -> String {
        let gh = |s: u64| format!("{:.1}", s as f64 / 3600.0);
        let victims =
            if self.of == 1 { "the only victim".to_string() } else { format!("one of {} victims", self.of) };
        format!(
            "loses {} GPU-h since its last checkpoint and stops {} GPU-h of running work; \
             the least costly way to free {} on its node: {victims} among {} borrowed workloads on the owner's nodes",
            gh(self.lost_gpu_s),
            gh(self.run_gpu_s),
            describe(request),
            self.considered
        )
    }
}

fn describe(a: &Amount) -> String {
    use super::quota::Resource;
    match (a.gpus, a.cpu_milli) {
        (0, c) => Resource::Cpu.show(c),
        (g, 0) => Resource::Gpus.show(g),
        (g, c) => format!("{} and {}", Resource::Gpus.show(g), Resource::Cpu.show(c)),
    }
}

/// The victims chosen and the nodes the owner's work goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    pub nodes: Vec<u32>,
    pub victims: Vec<VictimReason>,
}

impl Choice {
    /// (progress lost, disruption, victims): smaller is better.
    pub fn cost(&self) -> (u64, u64, usize) {
        let mut seen: Vec<u64> = Vec::new();
        let (mut lost, mut run) = (0u64, 0u64);
        for v in &self.victims {
            if !seen.contains(&v.workload) {
                seen.push(v.workload);
                lost = lost.saturating_add(v.lost_gpu_s);
                run = run.saturating_add(v.run_gpu_s);
            }
        }
        (lost, run, seen.len())
    }
}

type Cost = (u64, u64, usize);

fn add(c: Cost, k: &Candidate) -> Cost {
    (c.0.saturating_add(k.lost_gpu_s), c.1.saturating_add(k.run_gpu_s), c.2 + 1)
}

/// Choose victims so `request` fits on `count` of `nodes` (each node with
/// what is free on it now). `None` when even stopping every candidate does
/// not free enough.
pub fn choose(
    nodes: &[(u32, Amount)],
    candidates: &[Candidate],
    request: Amount,
    count: usize,
) -> Option<Choice> {
    let mut per_node: Vec<(Cost, u32, Vec<usize>)> = nodes
        .iter()
        .filter_map(|&(node, free)| {
            let here: Vec<(usize, Amount)> = candidates
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.frees.iter().find(|(n, _)| *n == node).map(|(_, a)| (i, *a)))
                .filter(|(_, a)| !a.is_zero())
                .collect();
            let (cost, set) = best_on_node(free, &here, candidates, request)?;
            Some((cost, node, set))
        })
        .collect();
    if per_node.len() < count.max(1) {
        return None;
    }
    per_node.sort_by_key(|(cost, node, _)| (*cost, *node));
    per_node.truncate(count.max(1));
    let mut victims: Vec<VictimReason> = Vec::new();
    let mut chosen: Vec<u32> = Vec::new();
    for (_, node, set) in &per_node {
        chosen.push(*node);
        for &i in set {
            let c = &candidates[i];
            if victims.iter().any(|v| v.workload == c.workload) {
                continue;
            }
            let frees = c.frees.iter().find(|(n, _)| n == node).map_or(Amount::ZERO, |(_, a)| *a);
            victims.push(VictimReason {
                workload: c.workload,
                node: *node,
                frees,
                lost_gpu_s: c.lost_gpu_s,
                run_gpu_s: c.run_gpu_s,
                considered: candidates.len(),
                of: 0,
            });
        }
    }
    let n = victims.len();
    for v in &mut victims {
        v.of = n;
    }
    Some(Choice { nodes: chosen, victims })
}

/// The cheapest set of `here` (candidate index, what it frees on this node)
/// that makes `request` fit beside `free`.
fn best_on_node(
    free: Amount,
    here: &[(usize, Amount)],
    all: &[Candidate],
    request: Amount,
) -> Option<(Cost, Vec<usize>)> {
    if free.covers(&request) {
        return Some(((0, 0, 0), Vec::new()));
    }
    let total = here.iter().fold(free, |acc, (_, a)| acc.saturating_add(*a));
    if !total.covers(&request) {
        return None;
    }
    let mut order: Vec<(usize, Amount)> = here.to_vec();
    order.sort_by_key(|(i, _)| (all[*i].lost_gpu_s, all[*i].run_gpu_s, all[*i].workload));
    if order.len() <= EXACT_UP_TO {
        let mut best: Option<(Cost, Vec<usize>)> = None;
        let mut path = Vec::new();
        search(&order, all, 0, free, (0, 0, 0), request, &mut path, &mut best);
        return best;
    }
    // Cheapest first until it fits, then leave out whatever is not needed.
    let mut have = free;
    let mut set: Vec<(usize, Amount)> = Vec::new();
    for &(i, a) in &order {
        if have.covers(&request) {
            break;
        }
        have = have.saturating_add(a);
        set.push((i, a));
    }
    for k in (0..set.len()).rev() {
        let without = have.saturating_sub(set[k].1);
        if without.covers(&request) {
            have = without;
            set.remove(k);
        }
    }
    let cost = set.iter().fold((0, 0, 0), |c, (i, _)| add(c, &all[*i]));
    Some((cost, set.into_iter().map(|(i, _)| i).collect()))
}

#[allow(clippy::too_many_arguments)]
fn search(
    order: &[(usize, Amount)],
    all: &[Candidate],
    at: usize,
    have: Amount,
    cost: Cost,
    request: Amount,
    path: &mut Vec<usize>,
    best: &mut Option<(Cost, Vec<usize>)>,
) {
    if best.as_ref().is_some_and(|(b, _)| cost >= *b) {
        return;
    }
    if have.covers(&request) {
        *best = Some((cost, path.clone()));
        return;
    }
    // What is left cannot free enough: stop.
    let rest = order[at..].iter().fold(have, |acc, (_, a)| acc.saturating_add(*a));
    if at == order.len() || !rest.covers(&request) {
        return;
    }
    let (i, a) = order[at];
    path.push(i);
    search(order, all, at + 1, have.saturating_add(a), add(cost, &all[i]), request, path, best);
    path.pop();
    search(order, all, at + 1, have, cost, request, path, best);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(w: u64, node: u32, gpus: u64, lost_h: f64, run_h: f64) -> Candidate {
        Candidate {
            workload: w,
            frees: vec![(node, Amount::new(gpus, 0))],
            lost_gpu_s: (lost_h * 3600.0 * gpus as f64) as u64,
            run_gpu_s: (run_h * 3600.0 * gpus as f64) as u64,
        }
    }

    #[test]
    fn one_bigger_victim_that_loses_less_beats_two_small_ones() {
        // Need 4 GPUs on node 1: two 2-GPU workloads lose 1 GPU-h each
        // (0.5 h × 2 GPUs), one 4-GPU workload loses 0.8 GPU-h.
        let c = [cand(1, 1, 2, 0.5, 3.0), cand(2, 1, 2, 0.5, 3.0), cand(3, 1, 4, 0.2, 9.0)];
        let choice = choose(&[(1, Amount::ZERO)], &c, Amount::new(4, 0), 1).unwrap();
        assert_eq!(choice.victims.iter().map(|v| v.workload).collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn never_more_than_needed_and_free_capacity_counts() {
        let c = [cand(1, 1, 2, 0.0, 1.0), cand(2, 1, 2, 0.0, 2.0), cand(3, 1, 2, 0.0, 3.0)];
        let choice = choose(&[(1, Amount::new(2, 0))], &c, Amount::new(4, 0), 1).unwrap();
        assert_eq!(choice.victims.iter().map(|v| v.workload).collect::<Vec<_>>(), vec![1]);
        let none = choose(&[(1, Amount::new(8, 0))], &c, Amount::new(4, 0), 1).unwrap();
        assert!(none.victims.is_empty());
        assert!(choose(&[(1, Amount::ZERO)], &c, Amount::new(8, 0), 1).is_none());
    }

    #[test]
    fn a_gang_takes_the_cheapest_nodes_and_the_reason_reads_well() {
        let c = [cand(1, 1, 8, 1.0, 2.0), cand(2, 2, 8, 0.1, 2.0), cand(3, 3, 8, 0.5, 2.0)];
        let nodes = [(1, Amount::ZERO), (2, Amount::ZERO), (3, Amount::ZERO)];
        let choice = choose(&nodes, &c, Amount::new(8, 0), 2).unwrap();
        assert_eq!(choice.nodes, vec![2, 3]);
        assert_eq!(
            choice.victims[0].explain(&Amount::new(8, 0)),
            "loses 0.8 GPU-h since its last checkpoint and stops 16.0 GPU-h of running work; \
             the least costly way to free 8 GPUs on its node: one of 2 victims among 3 borrowed workloads on the owner's nodes"
        );
    }
}
