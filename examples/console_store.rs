//! Seeds a store with a long history for measuring the console (issue #23
//! item 12): N workloads (default 10,000) on the demo fleet, run to their
//! end by the simulator (the engine core itself, in virtual time, with the
//! default fault model's failures, retries and node churn), every record
//! batch it made written to the store's journal as the engine would have.
//! A `canopy serve` over the store then holds them, with their attempts and
//! events, and a console attached to it can page them all in.
//!
//! `cargo run --release --example console_store -- --store DIR [--workloads N] [--seed S]`
//!
//! The store must not hold a journal yet. `scripts/console_footprint.sh`
//! uses it to measure the console's memory and idle CPU.

use canopy::engine::model::{Millis, Record, WorkloadState};
use canopy::fleet::load;
use canopy::fleet::synth::SplitMix64;
use canopy::home::Home;
use canopy::journal::Journal;
use canopy::sim::{self, FaultModel, Format, Input, PlacementPolicy, RecordSink};
use std::collections::HashMap;
use std::fmt::Write;

/// Records written in one journal transaction.
const CHUNK: usize = 20_000;

/// A mix like the demo's users make: mostly one-GPU jobs of minutes to
/// hours, some CPU-only work, a few gangs.
fn trace(n: usize, seed: u64) -> String {
    let mut rng = SplitMix64::new(seed);
    let mut csv = String::from("submit_s,duration_s,gpus,name\n");
    let mut t = 0.0;
    for i in 0..n {
        t += -20.0 * (1.0 - rng.unit()).ln();
        let gpus = [0, 0, 1, 1, 1, 1, 2, 4][rng.below(8)];
        let kind = ["train", "eval", "sweep", "prep"][rng.below(4)];
        let _ = writeln!(csv, "{t:.0},{:.0},{gpus},{kind}-{i}", rng.between(120.0, 3.0 * 3600.0));
    }
    csv
}

struct ToJournal {
    journal: Journal,
    pending: Vec<Record>,
    states: HashMap<u64, WorkloadState>,
    error: Option<String>,
}

impl ToJournal {
    fn flush(&mut self) {
        if self.error.is_none()
            && !self.pending.is_empty()
            && let Err(e) = self.journal.append(&self.pending)
        {
            self.error = Some(e.to_string());
        }
        self.pending.clear();
    }
}

impl RecordSink for ToJournal {
    fn batch(&mut self, _: Millis, records: &[Record]) {
        for r in records {
            if let Record::Workload(w) = r {
                self.states.insert(w.id.0, w.state);
            }
        }
        self.pending.extend_from_slice(records);
        if self.pending.len() >= CHUNK {
            self.flush();
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let store = flag("--store").ok_or("--store DIR is required")?;
    let n: usize = flag("--workloads").map_or(Ok(10_000), |s| s.parse())?;
    let seed: u64 = flag("--seed").map_or(Ok(0), |s| s.parse())?;
    let home = Home::new(&store);
    std::fs::create_dir_all(home.root())?;
    if home.store().exists() {
        return Err(format!("{} already holds a journal; seed an empty store", home.store().display()).into());
    }
    let journal = Journal::open(&home.store())?;
    let fleet = load::demo()?;
    let text = trace(n, seed);
    let jobs = sim::trace::parse(Format::Csv, &text, "console-store.csv")?;
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "demo",
        trace_name: "console-store",
        tenancy: None,
    };
    let mut sink = ToJournal { journal, pending: Vec::new(), states: HashMap::new(), error: None };
    sim::simulate(&input, &mut sink)?;
    sink.flush();
    if let Some(e) = sink.error {
        return Err(e.into());
    }
    let mut by_state: HashMap<&str, usize> = HashMap::new();
    for s in sink.states.values() {
        *by_state.entry(s.as_str()).or_default() += 1;
    }
    let mut by_state: Vec<_> = by_state.into_iter().collect();
    by_state.sort();
    println!("{} workloads in {}: {by_state:?}", sink.states.len(), home.store().display());
    Ok(())
}
