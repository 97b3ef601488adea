//! `canopy sim`: run the discrete-event simulator over a fleet and a trace
//! and print the policy comparison. Reads the files; everything else is
//! `canopy::sim`.

use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Input, NoSink, PlacementPolicy};
use canopy::spec::Optimize;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Workload trace: Gavel TSV (`*.trace`), Tiresias CSV, or the generic
    /// CSV (`submit_s,duration_s,gpus[,name,gpu_type,gpu_memory_gb,outcome]`).
    /// See docs/sim.md.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// Fleet file (TOML). Defaults to the embedded demo fleet.
    #[arg(long, value_name = "FILE")]
    pub fleet: Option<PathBuf>,
    /// Fault model (TOML, any subset of the fields in docs/sim.md).
    /// Defaults to `<fleet>.faults.toml` next to the fleet file when it
    /// exists, else the calibrated defaults.
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
    /// Seed of every random draw (fates, faults, churn, the random policy).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Policies to compare, comma-separated:
    /// canopy, cheapest-first, blocklist, random. Default: all four.
    #[arg(long, value_delimiter = ',')]
    pub policy: Vec<String>,
    /// What the trace's jobs ask placement to favour
    /// (`preferences.optimize`: balanced, cost, speed, reliability); only
    /// Canopy's policy reads it.
    #[arg(long, value_enum, default_value = "balanced")]
    pub optimize: OptimizeArg,
    /// Only the first N jobs of the trace.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SimArgs) -> Result<()> {
    let (fleet, fleet_name) = match &args.fleet {
        Some(p) => (load::load_file(p)?, p.display().to_string()),
        None => (load::demo()?, "the demo fleet".to_string()),
    };
    let faults_path = args.faults.clone().or_else(|| {
        let p = args.fleet.as_ref()?.with_extension("faults.toml");
        p.exists().then_some(p)
    });
    let faults: FaultModel = match &faults_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).wrap_err_with(|| format!("reading {}", p.display()))?;
            toml::from_str(&text).map_err(|e| eyre!("{}: {}", p.display(), e.message().trim()))?
        }
        None => FaultModel::default(),
    };
    let file = args.trace.display().to_string();
    let text = std::fs::read_to_string(&args.trace).wrap_err_with(|| format!("reading {file}"))?;
    let mut jobs = sim::trace::parse(sim::trace::detect(&file, &text), &text, &file)?;
    if let Some(n) = args.limit {
        jobs.truncate(n);
    }
    let policies: Vec<PlacementPolicy> = if args.policy.is_empty() {
        sim::default_policies(args.seed)
    } else {
        args.policy
            .iter()
            .map(|n| sim::parse_policy(n.trim(), args.seed))
            .collect::<Result<_, _>>()
            .map_err(|e| eyre!(e))?
    };
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: args.seed,
        policies: &policies,
        optimize: args.optimize.into(),
        fleet_name: &fleet_name,
        trace_name: &file,
    };
    let report = sim::simulate(&input, &mut NoSink).map_err(|e| eyre!(e))?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_markdown());
    }
    Ok(())
}

/// `preferences.optimize` as a flag value.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum OptimizeArg {
    Balanced,
    Cost,
    Speed,
    Reliability,
}

impl From<OptimizeArg> for Optimize {
    fn from(o: OptimizeArg) -> Self {
        match o {
            OptimizeArg::Balanced => Optimize::Balanced,
            OptimizeArg::Cost => Optimize::Cost,
            OptimizeArg::Speed => Optimize::Speed,
            OptimizeArg::Reliability => Optimize::Reliability,
        }
    }
}
