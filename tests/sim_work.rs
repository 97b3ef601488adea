//! What the simulator counts as work: runtime estimates drawn with error
//! (never the exact duration), run time scaled by the accelerator, work
//! resumed from the last checkpoint, useful GPU-hours and their cost, and
//! how a job too large for one node is split into a gang.

mod common;

use canopy::engine::core::PlacementPolicy;
use canopy::fleet::{Fleet, load};
use canopy::sim::{self, FaultModel, Job, NoSink, world};
use common::{cloud_fleet, gpu_pool};

fn job(i: usize, hours: f64, gpus: u32) -> Job {
    Job {
        name: format!("j{i}").into(),
        submit_s: i as f64 * 60.0,
        duration_s: hours * 3600.0,
        gpus,
        gpu_type: None,
        gpu_memory_gb: None,
        outcome: Some(sim::Outcome::Completes),
        fails_after_s: None,
        measured_on: Some("V100".into()),
        tenant: None,
    }
}

/// Spot A100 nodes at 2/h, preempted often, and nothing else.
fn spot_fleet() -> Fleet {
    let mut pool = gpu_pool("spot", "A100-SXM4-80GB", 1, 80.0, 2.0);
    pool.interruptible = true;
    cloud_fleet(vec![(pool, vec!["s1", "s2", "s3", "s4"])])
}

fn preempting() -> FaultModel {
    FaultModel { preempt_per_hour: 0.5, ..FaultModel::none() }
}

/// Canopy's policy over `jobs` with no infrastructure faults, seed 0;
/// `check` sees the specs first.
fn fault_free(fleet: &Fleet, jobs: &[Job], check: impl Fn(&[canopy::spec::Spec])) -> sim::PolicyReport {
    let faults = FaultModel::none();
    let specs = sim::specs(jobs, fleet, Default::default(), 0, &faults).expect("specs");
    check(&specs.all());
    let run = world::Run {
        fleet,
        jobs,
        specs: &specs,
        faults: &faults,
        seed: 0,
        policy: PlacementPolicy::HealthAware,
        tenancy: None,
    };
    world::run(&run, &mut NoSink)
}

#[test]
fn estimates_are_seeded_rough_and_never_the_duration() {
    let fleet = load::demo().expect("demo fleet");
    let jobs: Vec<Job> = (0..400).map(|i| job(i, 1.0 + i as f64 / 100.0, 1)).collect();
    let m = FaultModel::default();
    let a = sim::specs(&jobs, &fleet, Default::default(), 3, &m).expect("specs");
    assert_eq!(a, sim::specs(&jobs, &fleet, Default::default(), 3, &m).expect("specs"));
    assert_ne!(a, sim::specs(&jobs, &fleet, Default::default(), 4, &m).expect("specs"));
    let a = a.all();
    let mut ratios: Vec<f64> = a
        .iter()
        .zip(&jobs)
        .map(|(s, j)| s.expected_runtime.expect("an estimate").0.as_secs_f64() / j.duration_s)
        .collect();
    assert!(ratios.iter().all(|r| (r - 1.0).abs() > 1e-6), "never the exact duration");
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    assert!((1.6..2.5).contains(&median), "median estimate / duration {median}");
    let under = ratios.iter().filter(|r| **r < 1.0).count() as f64 / ratios.len() as f64;
    assert!((0.15..0.35).contains(&under), "share underestimated {under}");
    // Long jobs checkpoint every 30 minutes; short ones do not.
    for (s, j) in a.iter().zip(&jobs) {
        let long = s.expected_runtime.expect("estimate").0.as_secs_f64() > sim::CHECKPOINT_ABOVE_S;
        assert_eq!(s.checkpoint.is_some(), long, "{}: {}", j.name, j.duration_s);
    }
}

#[test]
fn a_job_runs_faster_on_a_faster_accelerator() {
    let jobs = vec![job(0, 9.0, 1)];
    let mut times = Vec::new();
    for model in ["V100", "A100-SXM4-80GB", "H100-SXM5"] {
        let fleet = cloud_fleet(vec![(gpu_pool("p", model, 1, 80.0, 1.0), vec!["n1"])]);
        let r = fault_free(&fleet, &jobs, |_| {});
        assert_eq!(r.succeeded, 1);
        // The work done is the trace's, whatever the GPU.
        assert!((r.useful_gpu_h - 9.0).abs() < 1e-9);
        times.push(r.used_gpu_h);
    }
    // 9 V100-hours: 9 h on a V100, 9/2.2 on an A100, 9/4.5 on an H100.
    for (t, want) in times.iter().zip([9.0, 9.0 / 2.2, 2.0]) {
        assert!((t - want).abs() < 0.01, "{times:?}");
    }
}

/// Canopy's policy over `jobs` under `faults` and `seed`.
fn under(fleet: &Fleet, jobs: &[Job], faults: &FaultModel, seed: u64) -> sim::PolicyReport {
    let specs = sim::specs(jobs, fleet, Default::default(), seed, faults).expect("specs");
    let run = world::Run {
        fleet,
        jobs,
        specs: &specs,
        faults,
        seed,
        policy: PlacementPolicy::HealthAware,
        tenancy: None,
    };
    world::run(&run, &mut NoSink)
}

#[test]
fn the_simulated_truth_runs_each_job_at_its_own_speed_around_the_table() {
    // A 9-V100-hour job on an H100: the table says 2 hours.
    let fleet = cloud_fleet(vec![(gpu_pool("p", "H100-SXM5", 1, 80.0, 1.0), vec!["n1"])]);
    let jobs = vec![job(0, 9.0, 1)];
    let truth = FaultModel { speed_sigma: 0.3, ..FaultModel::none() };
    let hours: Vec<f64> = (0..30)
        .map(|seed| {
            let r = under(&fleet, &jobs, &truth, seed);
            assert_eq!(r.succeeded, 1, "{r:?}");
            // The work done is the trace's, however long it took.
            assert!((r.useful_gpu_h - 9.0).abs() < 1e-9);
            r.used_gpu_h
        })
        .collect();
    // Seeded: the same seed gives the same hours.
    assert_eq!(under(&fleet, &jobs, &truth, 3).used_gpu_h, hours[3]);
    // Around the table, not on it: log-normal, σ 0.3.
    let mut sorted = hours.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(sorted[0] < 1.8 && sorted[29] > 2.2, "{sorted:?}");
    assert!((1.7..2.3).contains(&sorted[15]), "median {sorted:?}");
    assert!(sorted.iter().all(|h| (0.6..6.0).contains(h)), "{sorted:?}");
    // σ 0: exactly the table.
    assert!((under(&fleet, &jobs, &FaultModel::none(), 3).used_gpu_h - 2.0).abs() < 0.01);
}

#[test]
fn a_failed_trace_job_fails_at_its_recorded_time_and_its_loss_is_counted_in_v100_hours() {
    // A trace records how long a failed job ran: 9 V100-hours (2 h on an
    // H100), or 4.5 where it records `fails_after_s`.
    let fleet = cloud_fleet(vec![(gpu_pool("p", "H100-SXM5", 1, 80.0, 1.0), vec!["n1", "n2", "n3", "n4"])]);
    let failed = |i: usize, after: Option<f64>| Job {
        outcome: Some(sim::Outcome::FailsOnItsOwn),
        fails_after_s: after,
        ..job(i, 9.0, 1)
    };
    let jobs = vec![failed(0, None), failed(1, None), failed(2, Some(4.5 * 3600.0)), failed(3, None)];
    let r = fault_free(&fleet, &jobs, |_| {});
    assert_eq!(r.failed, 4, "{r:?}");
    assert!((r.wasted_gpu_h - (3.0 * 2.0 + 1.0)).abs() < 0.01, "{r:?}");
    assert!((r.wasted_by_class_gpu_h["app"] - 7.0).abs() < 0.01, "{r:?}");
    // The same loss in work units: 3 × 9 + 4.5 V100-hours.
    assert!((r.wasted_own_v100_h - 31.5).abs() < 0.05, "{r:?}");
    assert_eq!(r.wasted_infra_v100_h, 0.0);
}

#[test]
fn checkpointed_work_resumes_and_loses_only_the_time_since_its_checkpoint() {
    let fleet = spot_fleet();
    let jobs: Vec<Job> = (0..4).map(|i| job(i, 20.0, 1)).collect();
    let faults = preempting();
    let with = sim::specs(&jobs, &fleet, Default::default(), 1, &faults).expect("specs");
    assert!(with.all().iter().all(|s| s.checkpoint.is_some()));
    let mut without = with.clone();
    for s in &mut without.shapes {
        s.checkpoint = false;
    }
    assert!(without.all().iter().all(|s| s.checkpoint.is_none()));
    let go = |specs: &sim::Specs<'_>| {
        let run = world::Run {
            fleet: &fleet,
            jobs: &jobs,
            specs,
            faults: &faults,
            seed: 1,
            policy: PlacementPolicy::CheapestFirst,
            tenancy: None,
        };
        world::run(&run, &mut NoSink)
    };
    let (a, b) = (go(&with), go(&without));
    assert_eq!(a.succeeded, 4, "{a:?}");
    let preempted = a.failures_by_class.get("preempted").copied().unwrap_or(0);
    assert!(preempted > 0);
    // At most one interval (30 min) lost per preemption.
    assert!(a.wasted_gpu_h <= preempted as f64 * 0.5 + 1e-6, "{a:?}");
    assert!((a.useful_gpu_h - 80.0).abs() < 1e-9);
    // Run from scratch each time, the same jobs spend their retries, waste
    // far more and complete less.
    assert!(b.succeeded < 4, "{b:?}");
    assert!(b.wasted_gpu_h > 3.0 * a.wasted_gpu_h, "{} vs {}", b.wasted_gpu_h, a.wasted_gpu_h);
    assert!(b.useful_gpu_h < a.useful_gpu_h);
    assert!(a.cost_per_useful_gpu_h < b.cost_per_useful_gpu_h);
    assert!((a.cost_per_useful_gpu_h - a.cost_usd / a.useful_gpu_h).abs() < 1e-12);
}

#[test]
fn a_job_too_large_for_one_node_is_split_into_the_fewest_equal_nodes() {
    let fleet = load::demo().expect("demo fleet");
    assert_eq!(sim::gang_shape(8, &fleet), (1, 8));
    assert_eq!(sim::gang_shape(16, &fleet), (2, 8));
    assert_eq!(sim::gang_shape(32, &fleet), (4, 8));
    // 20 GPUs: no 10-GPU nodes, so 4 nodes of 5 on 8-GPU nodes.
    assert_eq!(sim::gang_shape(20, &fleet), (4, 5));
    let jobs = vec![job(0, 2.0, 32)];
    let specs = sim::specs(&jobs, &fleet, Default::default(), 0, &FaultModel::none()).expect("specs").all();
    assert_eq!(
        (specs[0].resources.nodes, specs[0].resources.gpus, specs[0].resources.cpu_cores),
        (4, 8, 32.0)
    );
}

#[test]
fn a_gang_runs_on_all_its_nodes_and_its_gpu_hours_count_every_node() {
    struct Nodes(Vec<(usize, f64)>);
    impl sim::RecordSink for Nodes {
        fn batch(&mut self, _: canopy::engine::model::Millis, records: &[sim::Record]) {
            for r in records {
                if let sim::Record::Attempt(a) = r
                    && a.state.is_final()
                    && let (Some(s), Some(e)) = (a.started_at, a.ended_at)
                {
                    self.0.push((a.nodes.len(), f64::from(a.gpus) * e.secs_since(s) / 3600.0));
                }
            }
        }
    }
    let fleet = load::demo().expect("demo fleet");
    let jobs = vec![job(0, 9.0, 16)];
    let faults = FaultModel::none();
    let specs = sim::specs(&jobs, &fleet, Default::default(), 0, &faults).expect("specs");
    let run = world::Run {
        fleet: &fleet,
        jobs: &jobs,
        specs: &specs,
        faults: &faults,
        seed: 0,
        policy: PlacementPolicy::HealthAware,
        tenancy: None,
    };
    let mut seen = Nodes(Vec::new());
    let r = world::run(&run, &mut seen);
    assert_eq!((r.succeeded, r.never_ran), (1, 0), "{r:?}");
    let [(nodes, per_node_gpu_h)] = seen.0[..] else { panic!("one attempt: {:?}", seen.0) };
    assert_eq!(nodes, 2, "16 GPUs run as a gang of 2 × 8");
    assert!((r.used_gpu_h - 2.0 * per_node_gpu_h).abs() < 1e-9, "{r:?}");
    assert!((r.useful_gpu_h - 144.0).abs() < 1e-9);
}

#[test]
fn a_checkpoint_no_later_attempt_resumes_from_is_wasted_with_its_attempt() {
    // Jobs that fail on their own after checkpointing: own errors are not
    // retried, so nothing ever resumes from what they saved, and every
    // GPU-hour they ran is lost.
    let fleet = cloud_fleet(vec![(gpu_pool("p", "V100", 1, 32.0, 1.0), vec!["n1", "n2", "n3", "n4"])]);
    let jobs: Vec<Job> =
        (0..8).map(|i| Job { outcome: Some(sim::Outcome::FailsOnItsOwn), ..job(i, 20.0, 1) }).collect();
    let r = fault_free(&fleet, &jobs, |specs| assert!(specs.iter().all(|s| s.checkpoint.is_some())));
    assert_eq!(r.failed, 8, "{r:?}");
    // Some ran past their first checkpoint (30 min).
    assert!(r.used_gpu_h > 8.0 * 0.5, "{r:?}");
    assert!((r.wasted_gpu_h - r.used_gpu_h).abs() < 1e-6, "{r:?}");
    assert!((r.wasted_by_class_gpu_h["app"] - r.used_gpu_h).abs() < 1e-6, "{r:?}");
    assert_eq!(r.wasted_infra_gpu_h, 0.0);
}

#[test]
fn with_notice_a_job_that_saves_on_sigterm_loses_nothing_to_a_preemption() {
    let fleet = spot_fleet();
    let jobs: Vec<Job> = (0..4).map(|i| job(i, 20.0, 1)).collect();
    let go = |faults: &FaultModel| {
        let specs = sim::specs(&jobs, &fleet, Default::default(), 1, faults).expect("specs");
        let run = world::Run {
            fleet: &fleet,
            jobs: &jobs,
            specs: &specs,
            faults,
            seed: 1,
            policy: PlacementPolicy::HealthAware,
            tenancy: None,
        };
        world::run(&run, &mut NoSink)
    };
    let saving = go(&FaultModel { saves_on_sigterm: 1.0, ..preempting() });
    let not = go(&preempting());
    for r in [&saving, &not] {
        assert_eq!(r.succeeded, 4, "{r:?}");
        // Stopped by Canopy on the notice, not struck by the provider.
        assert!(r.failures_by_class.get("preempted").copied().unwrap_or(0) > 2, "{r:?}");
    }
    let preempted = saving.failures_by_class["preempted"] as f64;
    // All but the seconds between SIGTERM and the end of the stop (5 s).
    assert!(saving.wasted_gpu_h <= preempted * 10.0 / 3600.0, "{saving:?}");
    assert!(not.wasted_gpu_h > 10.0 * saving.wasted_gpu_h, "{} vs {}", not.wasted_gpu_h, saving.wasted_gpu_h);
}
