//! A simulated run's usage ledger is summed as the run goes
//! (`sim::usage::RunLedger`): a workload's records are dropped once it
//! ends, so the memory a run keeps grows with the work in flight, not
//! with the run (issue 24: 1.78 million records at 100,000 jobs, 403 MB).
//! Its report is the one the ledger of every record gives
//! (`sim::usage::LedgerTally`, what `GET /v1/usage` builds from a
//! journal), with tenants and owners' reclaims too.

use canopy::engine::core::Core;
use canopy::engine::model::{Millis, Record};
use canopy::fleet::{Fleet, load};
use canopy::sim::usage::{LedgerTally, RunLedger};
use canopy::sim::{self, FaultModel, Input, PlacementPolicy, RecordSink};
use canopy::tenant::Tenancy;
use canopy::usage::report::By;

/// Feeds every batch to both ledgers.
struct Both<'a> {
    fleet: &'a Fleet,
    tenancy: Option<&'a Tenancy>,
    all: LedgerTally,
    run: RunLedger,
    /// The most workloads the summing ledger kept at once.
    most_kept: usize,
    end: Option<Millis>,
}

impl RecordSink for Both<'_> {
    fn batch(&mut self, at: Millis, records: &[Record]) {
        self.all.batch(at, records);
        for r in records {
            self.run.observe(r);
        }
        self.run.settle(at, self.fleet, self.tenancy);
        self.most_kept = self.most_kept.max(self.run.kept());
    }

    fn settled(&mut self, at: Millis, next: Option<Millis>, _: &Core) {
        if next.is_none() {
            self.end = Some(at);
        }
    }
}

/// Runs Canopy's policy over the Gavel trace's first `limit` jobs on
/// `fleet_text` (the demo fleet when `None`); checks that both ledgers and
/// the run's own report agree, and returns (jobs, the most workloads kept
/// at once, workloads summed and dropped).
fn run(fleet_text: Option<&str>, limit: usize) -> (usize, usize, usize) {
    let (fleet, tenancy) = match fleet_text {
        Some(t) => (
            load::parse(t, "fleet.toml").expect("fleet"),
            load::parse_tenancy(t, "fleet.toml").expect("tenancy"),
        ),
        None => (load::demo().expect("the demo fleet"), Tenancy::default()),
    };
    let mut jobs = sim::scale::gavel().expect("the Gavel trace parses");
    jobs.truncate(limit);
    sim::tenants::assign(&mut jobs, &tenancy).expect("tenants");
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 1,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "fleet",
        trace_name: "gavel",
        tenancy: Some(&tenancy),
    };
    let mut both = Both {
        fleet: &fleet,
        tenancy: Some(&tenancy),
        all: LedgerTally::new(Some(&tenancy)),
        run: RunLedger::new(&fleet, Some(&tenancy)),
        most_kept: 0,
        end: None,
    };
    let report = sim::simulate(&input, &mut both).expect("the simulation runs");
    let end = both.end.expect("the run ended");
    let every = both.all.report(&fleet, Some(&tenancy), By::Tenant, end);
    let summed = both.run.report(&fleet, Some(&tenancy), end);
    assert_eq!(summed, every, "the summed ledger reports what the ledger of every record does");
    assert_eq!(report.policies[0].usage.as_ref(), Some(&every), "the run reports the ledger of every record");
    assert_eq!(both.run.late(), 0, "no record comes after its workload ended");
    (jobs.len(), both.most_kept, both.run.summed())
}

#[test]
fn a_run_keeps_the_records_of_work_in_flight_only_and_reports_the_same() {
    let (jobs, most_kept, summed) = run(None, 2_000);
    assert!(summed * 10 >= jobs * 7, "{summed} of {jobs} workloads summed and dropped");
    assert!(most_kept * 4 <= jobs, "{most_kept} of {jobs} workloads kept at once");
}

#[test]
fn tenants_and_owners_reclaims_are_summed_alike() {
    let text = include_str!("../assets/fleets/demo-tenants.toml");
    let (jobs, most_kept, summed) = run(Some(text), 600);
    assert!(summed * 10 >= jobs * 7, "{summed} of {jobs} workloads summed and dropped");
    assert!(most_kept * 2 <= jobs, "{most_kept} of {jobs} workloads kept at once");
}
