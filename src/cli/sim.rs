//! `canopy sim`: run the discrete-event simulator over a fleet and a trace
//! and print the policy comparison, or (`--watch`) replay one policy's run
//! into the console. Reads the files; everything else is `canopy::sim`
//! and `canopy::console::replay`.

use super::ConsoleArgs;
use canopy::console::app::{App, Config};
use canopy::console::model::Model;
use canopy::console::{replay, run as console};
use canopy::fleet::{Fleet, load};
use canopy::sim::{self, FaultModel, Input, Job, NoSink, PlacementPolicy};
use canopy::spec::Optimize;
use canopy::tenant::Tenancy;
use color_eyre::eyre::{Result, WrapErr, bail, eyre};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Workload trace: Gavel TSV (`*.trace`), Tiresias CSV, ElasticFlow/ITP
    /// CSV (`job_id,submission_time,duration,num_gpu`), Pollux/Philly CSV
    /// (`timestamp,duration,num_gpus,gpu_time,cluster`), or the generic CSV
    /// (`submit_s,duration_s,gpus[,name,gpu_type,gpu_memory_gb,outcome]`).
    /// See docs/sim.md.
    #[arg(long, value_name = "FILE", required_unless_present = "synthetic")]
    pub trace: Option<PathBuf>,
    /// Instead of a trace and a fleet file: JOBS jobs of the Gavel trace
    /// tiled over a synthetic fleet of NODES nodes, offering a load of
    /// 0.35 (the simulator's scale run; docs/sim.md, "Speed"), e.g.
    /// `--synthetic 100000,10000`.
    #[arg(long, value_name = "JOBS,NODES", conflicts_with_all = ["trace", "fleet"], value_parser = sim::scale::parse_size)]
    pub synthetic: Option<(usize, usize)>,
    /// Fleet file (TOML). Defaults to the embedded demo fleet. It may carry
    /// tenants, flavors, quotas and owners (`[[tenant]]`, `[[flavor]]` as in
    /// canopy.toml; e.g. assets/fleets/demo-tenants.toml): jobs then go to
    /// their trace's `tenant` column, else round-robin by arrival, and the
    /// report adds a row per tenant (docs/sim.md, "Tenants").
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
    /// canopy, canopy-eager (no patience), cheapest-first, blocklist, random.
    /// Default: canopy, cheapest-first, blocklist, random
    /// (with --watch: the one to watch, default canopy).
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
    /// Replay the run into the console, paced by its virtual time, instead
    /// of printing the comparison. Read-only; space pauses, + and - change
    /// the speed, q quits.
    #[arg(long, conflicts_with = "json")]
    pub watch: bool,
    /// Speed-up of the replay: 1440 (or 1440x) plays a day of the fleet in
    /// a minute. Default: one that fits the trace into about two minutes.
    #[arg(long, value_name = "N", requires = "watch", value_parser = replay::parse_speed)]
    pub speed: Option<f64>,
}

pub fn run(args: SimArgs, console: &ConsoleArgs) -> Result<()> {
    let (fleet, fleet_name, tenancy) = match &args.fleet {
        Some(p) => {
            let file = p.display().to_string();
            let text =
                std::fs::read_to_string(p).wrap_err_with(|| format!("reading the fleet file {file}"))?;
            (load::parse(&text, &file)?, file.clone(), load::parse_tenancy(&text, &file)?)
        }
        None => (load::demo()?, "the demo fleet".to_string(), Tenancy::default()),
    };
    let faults_path = args.faults.clone().or_else(|| {
        let p = args.fleet.as_ref()?.with_extension("faults.toml");
        p.exists().then_some(p)
    });
    let faults: FaultModel = match &faults_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).wrap_err_with(|| format!("reading {}", p.display()))?;
            let faults: FaultModel =
                toml::from_str(&text).map_err(|e| eyre!("{}: {}", p.display(), e.message().trim()))?;
            faults.validate().map_err(|e| {
                eyre!("{}: {e}; correct it, or leave the key out for its default (docs/sim.md, \"Fault model\")", p.display())
            })?;
            faults
        }
        None => FaultModel::default(),
    };
    let (fleet, fleet_name, file, mut jobs) = match (&args.trace, args.synthetic) {
        (_, Some((n, nodes))) => {
            let (fleet, jobs, speedup) = sim::scale::synthetic(n, nodes, args.seed)?;
            let file = format!("the Gavel trace tiled to {n} jobs, arrivals ×{speedup:.1}");
            (fleet, format!("synth_fleet({nodes}, 1)"), file, jobs)
        }
        (Some(path), None) => {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path).wrap_err_with(|| format!("reading {file}"))?;
            let jobs = sim::trace::parse(sim::trace::detect(&file, &text), &text, &file)?;
            (fleet, fleet_name, file, jobs)
        }
        (None, None) => bail!("give a trace with --trace FILE, or --synthetic JOBS,NODES"),
    };
    if let Some(n) = args.limit {
        jobs.truncate(n);
    }
    sim::tenants::assign(&mut jobs, &tenancy).map_err(|e| eyre!("{file}: {e}"))?;
    if args.watch {
        return watch(args, (fleet, tenancy), fleet_name, jobs, faults, file, console);
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
        tenancy: Some(&tenancy),
    };
    let report = sim::simulate(&input, &mut NoSink).map_err(|e| eyre!(e))?;
    if args.json {
        outln!("{}", report.to_json());
    } else {
        out!("{}", report.to_markdown());
    }
    Ok(())
}

/// `--watch`: the simulation runs on its own thread, paced into a
/// read-only console until the operator quits; the policy's report is
/// printed after, when the run had ended.
fn watch(
    args: SimArgs,
    (fleet, tenancy): (Fleet, Tenancy),
    fleet_name: String,
    jobs: Vec<Job>,
    faults: FaultModel,
    trace_name: String,
    console_args: &ConsoleArgs,
) -> Result<()> {
    let name = match args.policy.as_slice() {
        [] => "canopy",
        [one] => one.trim(),
        many => bail!(
            "--watch replays one policy, got {} ({}); pick one with --policy NAME",
            many.len(),
            many.join(", ")
        ),
    };
    let policy = sim::parse_policy(name, args.seed).map_err(|e| eyre!(e))?;
    // What simulate would refuse, refused before the screen is taken.
    faults.validate().map_err(|e| eyre!(e))?;
    let optimize: Optimize = args.optimize.into();
    sim::specs(&jobs, &fleet, optimize, args.seed, &faults).map_err(|e| eyre!(e))?;
    let theme = super::console::theme(console_args)?;
    // A default that fits the trace: about two minutes to watch.
    let span = jobs.iter().map(|j| j.submit_s + j.duration_s).fold(0.0, f64::max);
    let speed = args.speed.unwrap_or_else(|| replay::speed_for(span));
    let (mut pacer, clock, handle) = replay::replay(policy.name(), speed);
    let seed = args.seed;
    let sim = std::thread::Builder::new()
        .name("sim".into())
        .spawn(move || {
            let input = Input {
                fleet: &fleet,
                jobs: &jobs,
                faults: &faults,
                seed,
                policies: &[policy],
                optimize,
                fleet_name: &fleet_name,
                trace_name: &trace_name,
                tenancy: Some(&tenancy),
            };
            sim::simulate(&input, &mut pacer)
        })
        .wrap_err("starting the simulation")?;
    let rt = tokio::runtime::Runtime::new().wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let config = Config {
            read_only: true,
            theme,
            utc_offset_s: console::local_offset_s(),
            stale_after_s: f64::INFINITY,
        };
        let mut app = App::new(config, Model::default(), sim::EPOCH);
        console::run_replay(&mut app, handle, clock, std::env::temp_dir()).await
    })
    .wrap_err("the console's terminal failed")?;
    // Quit before the end: the simulation thread goes with the process.
    if sim.is_finished() {
        match sim.join() {
            Ok(Ok(report)) => out!("{}", report.to_markdown()),
            Ok(Err(e)) => bail!(e),
            Err(_) => bail!("the simulation panicked"),
        }
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
