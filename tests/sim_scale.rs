//! The simulator scales: the engine core's scheduling work per job stays
//! flat as the job count and the fleet grow together (the large scenario,
//! `sim::scale`, at two sizes). Counts, never timings: how often a job is
//! taken from the queue and placed (afresh or from a remembered answer),
//! how often a remembered answer is checked again, and how many blocked
//! jobs are asked again at once. When one of these grows with the size,
//! the run's time grows faster than its size (issue 24: a 100,000-job run
//! that took 23 s did not finish in 41 minutes).
//!
//! The timings themselves are in `benches/sim.rs` (`sim-large`).

use canopy::engine::core::{Core, WorkCounts};
use canopy::engine::model::{Millis, Record};
use canopy::sim::{self, FaultModel, Input, PlacementPolicy, RecordSink, scale};

/// Keeps the core's counts at the end of the run.
#[derive(Default)]
struct Counts(Option<WorkCounts>);

impl RecordSink for Counts {
    fn batch(&mut self, _: Millis, _: &[Record]) {}

    fn settled(&mut self, _: Millis, next: Option<Millis>, core: &Core) {
        if next.is_none() {
            self.0 = Some(core.work_counts());
        }
    }
}

/// One count read from the core's totals.
type Measure = fn(&WorkCounts) -> u64;

/// Canopy's policy over `jobs` jobs on `nodes` nodes: the core's counts.
fn counts(jobs: usize, nodes: usize) -> WorkCounts {
    let (fleet, jobs, _) = scale::synthetic(jobs, nodes, 0).expect("the Gavel trace parses");
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "synth",
        trace_name: "gavel tiled",
        tenancy: None,
    };
    let mut sink = Counts::default();
    let report = sim::simulate(&input, &mut sink).expect("the simulation runs");
    assert_eq!(report.policies[0].workloads, jobs.len());
    sink.0.expect("the run ended")
}

/// Failed before issue 24's fix: patience's look-up of cheaper capacity
/// due to free (`engine/core/patience.rs`, `cheapest_due`) read every live
/// attempt, and placed the request on the whole ideal fleet, for every
/// placement of patient work: 0 live attempts read per job at 1,000 jobs
/// over 100 nodes, 4.7 at 4,000 over 400, 706 at 10,000 over 1,000 and
/// 1,417 at 20,000 over 2,000. It now reads one pool's live attempts due
/// by then, cheapest pool first: 0.01 and 0.03 per job at the two sizes.
#[test]
fn scheduling_work_per_job_does_not_grow_with_the_fleet() {
    let sizes = [(1_000, 100), (4_000, 400)];
    let [small, large] = sizes.map(|(j, n)| (j as f64, counts(j, n)));
    let per_job = |(jobs, c): &(f64, WorkCounts), f: Measure| f(c) as f64 / jobs;
    let measures: [(&str, Measure); 7] = [
        ("placements tried (taken from the queue)", |c| c.taken),
        ("full scheduler decisions", |c| c.decisions),
        ("remembered answers checked again", |c| c.group_checks),
        ("blocked jobs asked again all at once", |c| c.woken_all),
        ("jobs asked again as a lend limit admitted their size", |c| c.lend_woken),
        ("live attempts looked at by patience's look-ups", |c| c.patience_live_scanned),
        ("gangs placed on the whole ideal fleet to price them", |c| c.patience_gang_pricings),
    ];
    let mut grew = Vec::new();
    for (what, f) in measures {
        let (a, b) = (per_job(&small, f), per_job(&large, f));
        // Four times the jobs over four times the nodes: per job, the same
        // work (give or take the luck of a different run), not four times it.
        if b > 1.5 * a.max(1.0) {
            grew.push(format!("{what}: {a:.1} per job at {} jobs, {b:.1} at {}", small.0, large.0));
        }
    }
    assert!(
        grew.is_empty(),
        "scheduling work per job grows with the size:\n{}\n{small:?}\n{large:?}",
        grew.join("\n")
    );
}

/// Canopy's policy launches the best candidate of a decision, so a
/// decision builds that one alone (`PlacementPolicy::deciding_policy`).
/// Before, it built the top five, each with its names, cost range and
/// score breakdown: up to five candidates per decision.
#[test]
fn a_decision_builds_the_candidate_it_launches_only() {
    let c = counts(1_000, 100);
    assert!(c.decisions > 0, "{c:?}");
    assert!(
        c.candidates <= c.decisions,
        "{} candidates built over {} decisions: {c:?}",
        c.candidates,
        c.decisions
    );
}

/// Keeps how many ended attempts the core holds for budgets at the end.
#[derive(Default)]
struct History(Option<usize>);

impl RecordSink for History {
    fn batch(&mut self, _: Millis, _: &[Record]) {}

    fn settled(&mut self, _: Millis, next: Option<Millis>, core: &Core) {
        if next.is_none() {
            self.0 = Some(core.budget_history_len());
        }
    }
}

/// Failed before: the core kept every attempt that ended within the
/// budgets' horizon (a month) for budgets set later, also in the
/// simulator, whose budgets are fixed for the run: with none, about 1 KB
/// an attempt that nothing reads (94 MB of 284 at 100,000 jobs). Without
/// budgets the simulator keeps none.
#[test]
fn a_run_without_budgets_keeps_no_ended_attempts() {
    let (fleet, jobs, _) = scale::synthetic(1_000, 100, 0).expect("the Gavel trace parses");
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "synth",
        trace_name: "gavel tiled",
        tenancy: None,
    };
    let mut sink = History::default();
    let report = sim::simulate(&input, &mut sink).expect("the simulation runs");
    assert_eq!(report.policies[0].workloads, jobs.len());
    assert_eq!(sink.0, Some(0), "ended attempts kept for budgets in a run without budgets");
}
