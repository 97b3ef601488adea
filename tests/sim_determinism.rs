//! `canopy sim` is a pure function of its inputs: the same fleet, trace,
//! fault model and seed give the same report, byte for byte; another seed
//! gives another run; and every policy meets the same workload.

use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Format, Input, NoSink, Record, RecordSink};

fn report(seed: u64, limit: usize) -> String {
    let text = include_str!("../assets/traces/gavel_msr_seed0_ee9e8c.trace");
    let mut jobs = sim::trace::parse(Format::Gavel, text, "gavel.trace").expect("trace");
    jobs.truncate(limit);
    let fleet = load::demo().expect("demo fleet");
    let faults = FaultModel::default();
    let policies = sim::default_policies(seed);
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed,
        optimize: Default::default(),
        policies: &policies,
        fleet_name: "demo",
        trace_name: "gavel",
        tenancy: None,
    };
    sim::simulate(&input, &mut NoSink).expect("runs").to_json()
}

#[test]
fn same_seed_same_json_other_seed_other_run() {
    let a = report(3, 300);
    assert_eq!(a, report(3, 300));
    assert_ne!(a, report(4, 300));
}

#[test]
fn policies_face_the_same_workload() {
    let v: serde_json::Value = serde_json::from_str(&report(1, 300)).expect("json");
    let ps = v["policies"].as_array().expect("policies");
    assert_eq!(ps.len(), 4);
    // The workload's own errors are fixed per job: every policy sees the same count.
    let app: Vec<&serde_json::Value> = ps.iter().map(|p| &p["failures_by_class"]["app"]).collect();
    assert!(app.iter().all(|x| *x == app[0]), "{app:?}");
    assert!(ps.iter().all(|p| p["workloads"] == 300));
}

/// The `--watch` hook: batches come in virtual-time order.
#[test]
fn records_reach_the_sink_in_time_order() {
    struct Order(Vec<i64>, usize);
    impl RecordSink for Order {
        fn batch(&mut self, at: canopy::engine::model::Millis, records: &[Record]) {
            self.0.push(at.0);
            self.1 += records.len();
        }
    }
    let text = include_str!("../assets/traces/tiresias_60_job.csv");
    let jobs = sim::trace::parse(Format::Tiresias, text, "t.csv").expect("trace");
    let fleet = load::demo().expect("demo fleet");
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        optimize: Default::default(),
        policies: &[sim::PlacementPolicy::HealthAware],
        fleet_name: "demo",
        trace_name: "tiresias",
        tenancy: None,
    };
    let mut sink = Order(Vec::new(), 0);
    let r = sim::simulate(&input, &mut sink).expect("runs");
    assert!(sink.0.windows(2).all(|w| w[0] <= w[1]));
    assert!(sink.1 > 60 * 3);
    assert_eq!(r.policies[0].workloads, 60);
}
