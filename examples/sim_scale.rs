//! Times one simulator run and prints the wall time, so the simulator's
//! speed can be checked without criterion's repetitions.
//!
//! ```sh
//! # the 2,000-job Gavel trace over the demo fleet, Canopy's policy
//! cargo run --release --example sim_scale -- gavel
//! # 100,000 jobs over a 10,000-node synthetic fleet (the defaults)
//! cargo run --release --example sim_scale -- large [--jobs N] [--nodes N] [--load X | --speedup X]
//! ```
//!
//! Options: `--policy NAME` (default `canopy`; `all` for the four),
//! `--seed N`, `--digest` (also print an FNV-1a digest of every record the
//! engine produced, to check that a change keeps the output identical),
//! `--dump FILE` (write every record, one a line, to compare two runs).
//!
//! The large scenario is `sim::scale::scenario`: `fleet::synth::synth_fleet(nodes, 1)`
//! and the Gavel trace tiled with `sim::scale::tile`: copies of the trace
//! laid over one another with seeded offsets, arrivals compressed so that
//! the jobs offer `--load` (default `sim::scale::LOAD`, 0.35: that share of
//! all GPUs busy with them on average, three quarters of the fleet with
//! the other tenants' use), or by `--speedup` when given.

use canopy::engine::model::{Millis, Record};
use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Input, RecordSink, scale};
use std::time::Instant;

const GAVEL: &str = include_str!("../assets/traces/gavel_msr_seed0_ee9e8c.trace");

/// Counts batches and records and, when asked, hashes their debug form.
struct Digest {
    on: bool,
    hash: u64,
    batches: u64,
    records: u64,
    dump: Option<std::io::BufWriter<std::fs::File>>,
    /// The engine core's work counts at the end of each policy's run.
    counts: Vec<canopy::engine::core::WorkCounts>,
}

impl RecordSink for Digest {
    fn settled(&mut self, _: Millis, next: Option<Millis>, core: &canopy::engine::core::Core) {
        if next.is_none() {
            self.counts.push(core.work_counts());
        }
    }

    fn batch(&mut self, at: Millis, records: &[Record]) {
        self.batches += 1;
        self.records += records.len() as u64;
        if let Some(out) = self.dump.as_mut() {
            use std::io::Write;
            for r in records {
                let _ = writeln!(out, "{} {r:?}", at.0);
            }
        }
        if self.on {
            let text = format!("{}{records:?}", at.0);
            self.hash =
                text.bytes().fold(self.hash, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let mode = args.first().cloned().unwrap_or_else(|| "gavel".into());
    let seed: u64 = flag("--seed").map_or(Ok(0), |s| s.parse())?;
    let policies = match flag("--policy").as_deref() {
        None => vec![sim::PlacementPolicy::HealthAware],
        Some("all") => sim::default_policies(seed),
        Some(p) => vec![sim::parse_policy(p, seed)?],
    };
    let base = sim::trace::parse(sim::trace::Format::Gavel, GAVEL, "gavel")?;
    let demo = load::demo()?;
    let (fleet, jobs, fleet_name) = match mode.as_str() {
        "gavel" => (demo.clone(), base.clone(), "the demo fleet".to_string()),
        "large" => {
            let nodes: usize = flag("--nodes").map_or(Ok(10_000), |s| s.parse())?;
            let n: usize = flag("--jobs").map_or(Ok(100_000), |s| s.parse())?;
            let load: f64 = flag("--load").map_or(Ok(scale::LOAD), |s| s.parse())?;
            let (fleet, mut jobs, mut speedup) = scale::scenario(&base, n, nodes, load, seed);
            if let Some(s) = flag("--speedup") {
                speedup = s.parse()?;
                jobs = scale::tile(&base, n, speedup, seed);
            }
            eprintln!(
                "{} jobs (speedup {speedup:.3}, offered load {:.2}; Gavel on the demo fleet: {:.2}) over {} nodes, {} GPUs",
                jobs.len(),
                scale::offered_load(&jobs, fleet.total_gpus()),
                scale::offered_load(&base, demo.total_gpus()),
                fleet.nodes.len(),
                fleet.total_gpus()
            );
            (fleet, jobs, format!("synth_fleet({nodes}, 1)"))
        }
        other => return Err(format!("unknown mode {other:?}; expected gavel or large").into()),
    };
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed,
        policies: &policies,
        optimize: Default::default(),
        fleet_name: &fleet_name,
        trace_name: "gavel",
        tenancy: None,
    };
    let dump = match flag("--dump") {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path)?)),
        None => None,
    };
    let mut sink = Digest {
        on: args.iter().any(|a| a == "--digest"),
        hash: 0xcbf2_9ce4_8422_2325,
        batches: 0,
        records: 0,
        dump,
        counts: Vec::new(),
    };
    let t0 = Instant::now();
    let report = sim::simulate(&input, &mut sink)?;
    let wall = t0.elapsed();
    print!("{}", report.to_markdown());
    println!(
        "\nwall {:.2} s for {} policies; {} record batches, {} records{}",
        wall.as_secs_f64(),
        policies.len(),
        sink.batches,
        sink.records,
        if sink.on { format!(", digest {:016x}", sink.hash) } else { String::new() }
    );
    for c in &sink.counts {
        println!("work counts: {c:?}");
    }
    Ok(())
}
