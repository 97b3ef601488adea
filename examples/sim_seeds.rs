//! The seeds table of `docs/sim-*.md`, regenerated in one command: Canopy's
//! policy (and canopy-eager, Canopy's without patience) against
//! cheapest-first on every seed, through the library code `canopy sim`
//! runs (`canopy::sim::simulate`), then the table, its summary line and
//! the verdict against the targets (`canopy::sim::seeds`).
//!
//! ```sh
//! cargo run --release --example sim_seeds -- --trace assets/traces/gavel_msr_seed0_ee9e8c.trace
//! cargo run --release --example sim_seeds -- --trace FILE [--seeds 0-9] [--fleet FLEET.toml]
//!     [--faults FAULTS.toml] [--optimize balanced] [--limit N] [--threads N]
//! ```
//!
//! Prints, in Markdown: the first seed's report with the four default
//! policies (byte for byte what `canopy sim --trace FILE --seed N` prints),
//! then "Seeds …", its summary line, "Against the targets" and "Against
//! the better of cheapest-first and blocklist". `--seeds`
//! takes `0-9`, `3` or `0,4,7`. Seeds run on `--threads` threads (default:
//! the machine's cores); the output does not depend on it.

use canopy::fleet::{Fleet, load};
use canopy::sim::{self, FaultModel, Input, NoSink, PlacementPolicy, SimReport, seeds::Seeds};
use canopy::spec::Optimize;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Args {
    trace: String,
    seeds: Vec<u64>,
    fleet: Option<String>,
    faults: Option<String>,
    optimize: Optimize,
    limit: Option<usize>,
    threads: usize,
}

const USAGE: &str = "usage: sim_seeds --trace FILE [--seeds 0-9] [--fleet FLEET.toml] [--faults FAULTS.toml] \
                     [--optimize balanced|cost|speed|reliability] [--limit N] [--threads N]";

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        trace: String::new(),
        seeds: (0..10).collect(),
        fleet: None,
        faults: None,
        optimize: Optimize::Balanced,
        limit: None,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--trace" => a.trace = value()?,
            "--seeds" => a.seeds = canopy::sim::seeds::parse_seeds(&value()?)?,
            "--fleet" => a.fleet = Some(value()?),
            "--faults" => a.faults = Some(value()?),
            "--optimize" => {
                let v = value()?;
                a.optimize = serde_json::from_value(serde_json::Value::String(v.clone())).map_err(|_| {
                    format!("--optimize {v:?}: expected balanced, cost, speed or reliability")
                })?;
            }
            "--limit" => a.limit = Some(value()?.parse().map_err(|_| "--limit takes a number of jobs")?),
            "--threads" => {
                a.threads = value()?.parse().map_err(|_| "--threads takes a number")?;
                a.threads = a.threads.max(1);
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    if a.trace.is_empty() {
        return Err(format!("--trace FILE is required\n{USAGE}"));
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    // The inputs as `canopy sim` reads them (src/cli/sim.rs).
    let (fleet, fleet_name): (Fleet, String) = match &args.fleet {
        Some(p) => (load::load_file(Path::new(p)).map_err(|e| e.to_string())?, p.clone()),
        None => (load::demo().map_err(|e| e.to_string())?, "the demo fleet".into()),
    };
    let faults_path = args.faults.clone().or_else(|| {
        let p = Path::new(args.fleet.as_ref()?).with_extension("faults.toml");
        p.exists().then(|| p.display().to_string())
    });
    let faults: FaultModel = match &faults_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("reading {p}: {e}"))?;
            toml::from_str(&text).map_err(|e| format!("{p}: {}", e.message().trim()))?
        }
        None => FaultModel::default(),
    };
    let text = std::fs::read_to_string(&args.trace).map_err(|e| format!("reading {}: {e}", args.trace))?;
    let mut jobs = sim::trace::parse(sim::trace::detect(&args.trace, &text), &text, &args.trace)
        .map_err(|e| e.to_string())?;
    if let Some(n) = args.limit {
        jobs.truncate(n);
    }

    // Each seed: canopy, canopy-eager, cheapest-first and blocklist (the
    // better of the last two is what Canopy's cost is judged against); the
    // first seed also random, for its full report.
    let first = args.seeds[0];
    let policies = |seed: u64| -> Vec<PlacementPolicy> {
        let mut p = vec![
            PlacementPolicy::HealthAware,
            PlacementPolicy::Eager,
            PlacementPolicy::CheapestFirst,
            PlacementPolicy::Blocklist,
        ];
        if seed == first {
            p.push(PlacementPolicy::Random { seed });
        }
        p
    };
    let results: Mutex<Vec<(usize, Result<SimReport, String>)>> = Mutex::new(Vec::new());
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..args.threads.min(args.seeds.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = args.seeds.get(i) else { break };
                    let policies = policies(seed);
                    let input = Input {
                        fleet: &fleet,
                        jobs: &jobs,
                        faults: &faults,
                        seed,
                        policies: &policies,
                        optimize: args.optimize,
                        fleet_name: &fleet_name,
                        trace_name: &args.trace,
                        tenancy: None,
                    };
                    let report = sim::simulate(&input, &mut NoSink);
                    eprintln!("seed {seed} done");
                    results.lock().unwrap_or_else(|e| e.into_inner()).push((i, report));
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|r| r.0);
    let reports: Vec<SimReport> = results.into_iter().map(|r| r.1).collect::<Result<_, _>>()?;

    // The first seed's report as `canopy sim --seed N` prints it: the four
    // default policies, in their order.
    let mut shown = reports[0].clone();
    let order: Vec<String> = sim::default_policies(first).iter().map(|p| p.name().to_string()).collect();
    shown.policies.retain(|p| order.contains(&p.policy));
    shown.policies.sort_by_key(|p| order.iter().position(|n| *n == p.policy));
    print!("{}", shown.to_markdown());
    println!();
    print!("{}", Seeds::new(&reports)?.to_markdown());
    Ok(())
}
