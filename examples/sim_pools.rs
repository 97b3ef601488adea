//! Where each policy ran a trace's work: per pool, the attempts, the
//! GPU-hours they held and what they cost, for one seed, through the
//! library code `canopy sim` runs (`canopy::sim::simulate`) with a sink
//! that reads the attempts' final records. For diagnosing a policy's
//! figures in `docs/sim-*.md`.
//!
//! ```sh
//! cargo run --release --example sim_pools -- TRACE [SEED] [GPUS]
//! ```
//!
//! Prints, per policy (canopy and cheapest-first), a table by GPUs per
//! node (a gang counts as its nodes' share, 8 for a 32-GPU job on 8-GPU
//! nodes) and a table per pool. `GPUS` keeps only the attempts of that
//! many GPUs per node in the per-pool table (every job still runs).
//! GPU-hours are per node: a gang's other nodes are not counted.

use canopy::engine::model::Millis;
use canopy::engine::model::{AttemptId, Record};
use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Input, PlacementPolicy, RecordSink};
use canopy::spec::Optimize;
use std::collections::BTreeMap;

/// An attempt's pool, GPUs per node, start, end and cost.
type Ran = (String, u32, Option<Millis>, Option<Millis>, f64);

#[derive(Default)]
struct Pools {
    /// Each attempt's latest record.
    attempts: BTreeMap<AttemptId, Ran>,
}

impl RecordSink for Pools {
    fn batch(&mut self, _: Millis, records: &[Record]) {
        for r in records {
            if let Record::Attempt(a) = r {
                self.attempts.insert(a.id, (a.pool.clone(), a.gpus, a.started_at, a.ended_at, a.cost_usd));
            }
        }
    }
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let trace = args.first().ok_or("usage: sim_pools TRACE [SEED] [GPUS]")?;
    let seed: u64 = args.get(1).map_or(Ok(0), |s| s.parse()).map_err(|_| "SEED is a number")?;
    let only: u32 = args.get(2).map_or(Ok(u32::MAX), |s| s.parse()).map_err(|_| "GPUS is a number")?;
    let fleet = load::demo().map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(trace).map_err(|e| format!("reading {trace}: {e}"))?;
    let jobs =
        sim::trace::parse(sim::trace::detect(trace, &text), &text, trace).map_err(|e| e.to_string())?;
    let faults = FaultModel::default();
    for policy in [PlacementPolicy::HealthAware, PlacementPolicy::CheapestFirst] {
        let mut sink = Pools::default();
        let input = Input {
            fleet: &fleet,
            jobs: &jobs,
            faults: &faults,
            seed,
            policies: &[policy],
            optimize: Optimize::Balanced,
            fleet_name: "the demo fleet",
            trace_name: trace,
            tenancy: None,
        };
        sim::simulate(&input, &mut sink)?;
        let mut by_pool: BTreeMap<String, (u32, f64, f64)> = BTreeMap::new();
        for (pool, gpus, start, end, cost) in sink.attempts.values() {
            if only != u32::MAX && *gpus != only {
                continue;
            }
            let h = match (start, end) {
                (Some(s), Some(e)) => (e.0 - s.0) as f64 / 3.6e6,
                _ => 0.0,
            };
            let e = by_pool.entry(pool.clone()).or_default();
            *e = (e.0 + 1, e.1 + h * f64::from(*gpus), e.2 + cost);
        }
        let mut by_size: BTreeMap<u32, (u32, f64, f64)> = BTreeMap::new();
        for (_, gpus, start, end, cost) in sink.attempts.values() {
            let h = match (start, end) {
                (Some(s), Some(e)) => (e.0 - s.0) as f64 / 3.6e6,
                _ => 0.0,
            };
            let e = by_size.entry(*gpus).or_default();
            *e = (e.0 + 1, e.1 + h * f64::from(*gpus), e.2 + cost);
        }
        println!("\n{} (seed {seed}) by GPUs per node\n", policy.name());
        println!("| GPUs per node | attempts | GPU-h per node | cost |\n|---:|---:|---:|---:|");
        for (g, (n, gh, cost)) in &by_size {
            println!("| {g} | {n} | {gh:.0} | ${cost:.0} |");
        }
        let which = if only == u32::MAX {
            "every attempt".to_string()
        } else {
            format!("attempts of {only} GPUs per node")
        };
        println!("\n{} (seed {seed}), {which}, per pool\n", policy.name());
        println!("| pool | attempts | GPU-h per node | cost |\n|---|---:|---:|---:|");
        for (pool, (n, gh, cost)) in &by_pool {
            println!("| {pool} | {n} | {gh:.0} | ${cost:.0} |");
        }
    }
    Ok(())
}
