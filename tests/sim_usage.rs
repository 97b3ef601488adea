//! `canopy sim` reports the usage ledger that `canopy usage` builds from
//! a journal, built by the same code from the run's records: its totals
//! are the sum over the run's attempts, and the GPU-hours it calls useful
//! and lost are the ones the simulator's own figures count.

use canopy::engine::core::PlacementPolicy;
use canopy::engine::model::{AttemptId, AttemptRecord, Millis, Record};
use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Format, Input, RecordSink};
use std::collections::HashMap;

/// Keeps the newest record of every attempt, as the journal would.
#[derive(Default)]
struct Attempts(HashMap<AttemptId, AttemptRecord>);

impl RecordSink for Attempts {
    fn batch(&mut self, _: Millis, records: &[Record]) {
        for r in records {
            if let Record::Attempt(a) = r {
                self.0.insert(a.id, (**a).clone());
            }
        }
    }
}

fn gavel(limit: usize) -> Vec<sim::Job> {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/assets/traces/gavel_msr_seed0_ee9e8c.trace")).unwrap();
    let mut jobs = sim::trace::parse(Format::Gavel, &text, "gavel").unwrap();
    jobs.truncate(limit);
    jobs
}

#[test]
fn the_sims_ledger_is_the_sum_over_its_attempts_and_agrees_with_its_figures() {
    let fleet = load::parse(load::DEMO_FLEET, "demo.toml").unwrap();
    let jobs = gavel(300);
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "demo",
        trace_name: "gavel",
        tenancy: None,
    };
    let mut sink = Attempts::default();
    let report = sim::simulate(&input, &mut sink).unwrap();
    let p = &report.policies[0];
    let u = p.usage.as_ref().expect("a run reports its ledger");
    let t = &u.total;

    // The ledger's totals are the sum over the run's attempts (a launch
    // refused for capacity held nothing and spent no attempt).
    let held: Vec<&AttemptRecord> =
        sink.0.values().filter(|a| a.rule.as_deref() != Some(canopy::engine::REFUSED_RULE)).collect();
    assert!(held.len() > 300, "the run made attempts: {}", held.len());
    let gpus = |a: &AttemptRecord| u64::from(a.gpus) * a.nodes.len().max(1) as u64;
    let ms = |from: Millis, to: Option<Millis>| u64::try_from(to.expect("ended").0 - from.0).unwrap();
    let held_ms: u64 = held.iter().map(|a| gpus(a) * ms(a.placed_at, a.ended_at)).sum();
    let ran_ms: u64 = held.iter().filter_map(|a| Some(gpus(a) * ms(a.started_at?, a.ended_at))).sum();
    assert_eq!(t.attempts, held.len() as u64);
    assert_eq!(t.gpu_ms, held_ms, "GPU time held, launch to end");
    assert_eq!(t.live_gpu_ms, 0, "the run ended");
    let lost = t.wasted_infra_gpu_ms + t.wasted_own_gpu_ms + t.decision_gpu_ms;
    assert_eq!(t.useful_gpu_ms + lost, ran_ms, "running time is useful or lost");
    assert_eq!(t.idle_gpu_ms, held_ms - ran_ms, "the rest is launch to running");
    let cost: f64 = held.iter().map(|a| a.cost_usd).sum();
    let close = |a: f64, b: f64, what: &str| {
        assert!((a - b).abs() < 1e-6 * held.len() as f64, "{what}: ledger {a} vs {b}");
    };
    close(t.cost_micro_usd as f64 / 1e6, cost, "cost");
    // The groups (by tenant) add up to the total exactly.
    let sum = |f: fn(&canopy::usage::Line) -> u64| u.groups.iter().map(f).sum::<u64>();
    assert_eq!(sum(|l| l.gpu_ms), t.gpu_ms);
    assert_eq!(sum(|l| l.useful_gpu_ms), t.useful_gpu_ms);
    assert_eq!(sum(|l| l.cost_micro_usd), t.cost_micro_usd);

    // The simulator's own figures: GPU-hours run, lost (less checkpoints
    // a later attempt resumed from), lost to the infrastructure, cost.
    let h = sim::usage::gpu_h;
    assert!(t.wasted_infra_gpu_ms > 0 && t.wasted_own_gpu_ms > 0, "faults of both kinds: {t:?}");
    close(h(t.useful_gpu_ms + lost), p.used_gpu_h, "GPU-hours run");
    close(h(t.wasted_infra_gpu_ms + t.wasted_own_gpu_ms), p.wasted_gpu_h, "GPU-hours wasted");
    close(h(t.wasted_infra_gpu_ms), p.wasted_infra_gpu_h, "GPU-hours lost to the infrastructure");
    close(h(t.useful_gpu_ms), p.used_gpu_h - p.wasted_gpu_h - h(t.decision_gpu_ms), "useful: run and kept");
    close(t.cost_micro_usd as f64 / 1e6, p.cost_usd, "cost");

    // `canopy sim` prints the ledger's totals in `canopy usage`'s words.
    let md = report.to_markdown();
    let want = format!(
        "| canopy | {} | {} | {} | {} | {} | {} | {} | {} | ${:.2} |",
        t.attempts,
        canopy::usage::report::hours(t.gpu_ms),
        canopy::usage::report::hours(t.useful_gpu_ms),
        canopy::usage::report::hours(t.wasted_infra_gpu_ms),
        canopy::usage::report::hours(t.wasted_own_gpu_ms),
        canopy::usage::report::hours(t.decision_gpu_ms),
        canopy::usage::report::hours(t.idle_gpu_ms),
        canopy::usage::report::hours(t.live_gpu_ms),
        t.cost_micro_usd as f64 / 1e6,
    );
    assert!(
        md.contains(
            "| policy | attempts | GPU-h | useful | lost: infra | lost: own | decision | idle | live | cost |"
        ),
        "{md}"
    );
    assert!(md.contains(&want), "{want} in\n{md}");
}
