//! `canopy sim`: a discrete-event simulator that drives the production
//! engine core, scheduler, health tracking and retry policy in virtual
//! time, over a fleet, a fault model and a workload trace, and compares
//! placement policies on the same workload and the same luck.
//!
//! It owns the trace formats ([`trace`]), the fault model ([`faults`]),
//! the event loop ([`world`]), the figures ([`metrics`]) and their table
//! ([`report`]). It must not do I/O (the CLI reads files and hands their
//! text to the parsers here), read a clock, spawn threads or draw
//! randomness other than from the seed: same inputs and seed, same report,
//! byte for byte.
//!
//! It must not special-case a policy either: policies are the engine
//! core's [`PlacementPolicy`], chosen through [`CoreConfig`], so what is
//! measured here is what production would do.
//!
//! [`CoreConfig`]: crate::engine::core::CoreConfig

pub mod fairness;
pub mod faults;
pub mod metrics;
pub mod report;
pub mod scale;
pub mod seeds;
pub mod speed;
pub mod tenants;
pub mod trace;
pub mod usage;
pub mod world;

pub use crate::engine::core::PlacementPolicy;
pub use crate::engine::model::Record;
pub use faults::FaultModel;
pub use metrics::PolicyReport;
pub use report::SimReport;
pub use trace::{Format, Job, Outcome, TraceError};
pub use world::{EPOCH, NoSink, RecordSink};

use crate::accel::Family;
use crate::fleet::Fleet;
use crate::spec::{AcceleratorReq, GbRange, Optimize, Spec};

/// The policies compared by default, Canopy's first.
pub fn default_policies(seed: u64) -> Vec<PlacementPolicy> {
    vec![
        PlacementPolicy::HealthAware,
        PlacementPolicy::CheapestFirst,
        PlacementPolicy::Blocklist,
        PlacementPolicy::Random { seed },
    ]
}

/// Parses a policy name as the CLI spells it.
pub fn parse_policy(name: &str, seed: u64) -> Result<PlacementPolicy, String> {
    default_policies(seed).into_iter().chain([PlacementPolicy::Eager]).find(|p| p.name() == name).ok_or_else(|| {
        format!("unknown policy {name:?}; expected one of: canopy, canopy-eager, cheapest-first, blocklist, random")
    })
}

/// Trace jobs whose runtime estimate is longer than this checkpoint ...
pub const CHECKPOINT_ABOVE_S: f64 = 3600.0;
/// ... every this often.
pub const CHECKPOINT_EVERY_S: u64 = 1800;

/// A workload spec per job: its GPUs with 4 cores and 16 GB of host memory
/// per GPU (2 cores and 8 GB without GPUs), interruptible capacity
/// allowed, the default retry policy, `optimize` as given, and the GPU
/// type and memory the trace names. A GPU type must name (part of) an
/// accelerator model in the fleet; the spec then accepts that model's
/// families.
///
/// - **Runtime estimate**: `expected_runtime` is the job's duration times
///   [`faults::estimate_factor`] (seeded; users' estimates are rough and
///   mostly high), never the exact duration.
/// - **Checkpoints**: a job whose estimate exceeds [`CHECKPOINT_ABOVE_S`]
///   gets `[checkpoint]` with `interval` [`CHECKPOINT_EVERY_S`] (as a user
///   would configure it, from what they expect), and the simulator
///   resumes its next attempt from its last checkpoint.
/// - **Gangs**: a job wanting more GPUs than the fleet's largest node gets
///   `resources.nodes` ([`gang_shape`]): the fewest nodes whose equal
///   share of its GPUs fits a pool's node shape, in a pool with that many
///   nodes; `resources.gpus` is then the share per node.
pub fn specs(
    jobs: &[Job],
    fleet: &Fleet,
    optimize: Optimize,
    seed: u64,
    model: &FaultModel,
) -> Result<Vec<Spec>, String> {
    let mut base = Spec::new("job", vec!["train".into()]);
    base.constraints.interruptible = true;
    base.preferences.optimize = optimize;
    jobs.iter()
        .enumerate()
        .map(|(i, j)| {
            let mut s = base.clone();
            s.name = sanitize(&j.name);
            let estimate = (j.duration_s * faults::estimate_factor(seed, i, model)).round().max(1.0);
            s.expected_runtime = Some(crate::units::HumanDuration::from_secs(estimate as u64));
            if estimate > CHECKPOINT_ABOVE_S {
                s.checkpoint = Some(crate::spec::Checkpoint {
                    path: "/ckpt".into(),
                    keep: Default::default(),
                    interval: Some(crate::units::HumanDuration::from_secs(CHECKPOINT_EVERY_S)),
                    max_gb: None,
                });
            }
            let (nodes, per_node) = gang_shape(j.gpus, fleet);
            let g = f64::from(per_node);
            s.resources.nodes = nodes;
            s.resources.gpus = per_node;
            s.resources.cpu_cores = if per_node == 0 { 2.0 } else { 4.0 * g };
            s.resources.memory_gb = if per_node == 0 { 8.0 } else { 16.0 * g };
            if let Some(m) = j.gpu_memory_gb {
                s.resources.gpu_memory_gb = Some(GbRange { min: Some(m), max: None });
            }
            if let Some(t) = &j.gpu_type {
                s.resources.accelerator =
                    Some(AcceleratorReq { family: families(fleet, t)?, ..Default::default() });
            }
            Ok(s)
        })
        .collect()
}

/// How a job of `gpus` GPUs is split over nodes: `(nodes, GPUs per
/// node)`. One node when some node shape holds them all; otherwise the
/// fewest nodes `n` such that `gpus` divides into `n` equal shares and
/// some pool has at least `n` nodes of at least that many GPUs each (32
/// GPUs over 8-GPU nodes: 4 × 8; 20 GPUs: 4 × 5 over 8-GPU nodes, since
/// no pool has 10-GPU nodes). When no split fits, one node of all of them
/// (the scheduler then says nothing fits).
pub fn gang_shape(gpus: u32, fleet: &Fleet) -> (u32, u32) {
    let pools: Vec<(u32, usize)> = fleet
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let idx = crate::fleet::PoolIdx(i as u32);
            (p.shape.gpus_per_node, fleet.pool_nodes(idx).len())
        })
        .filter(|(g, n)| *g > 0 && *n > 0)
        .collect();
    let largest = pools.iter().map(|p| p.0).max().unwrap_or(0);
    if gpus <= largest {
        return (1, gpus);
    }
    (2..=gpus)
        .find(|&n| {
            gpus.is_multiple_of(n) && pools.iter().any(|&(g, count)| g >= gpus / n && count >= n as usize)
        })
        .map_or((1, gpus), |n| (n, gpus / n))
}

fn families(fleet: &Fleet, gpu_type: &str) -> Result<Vec<Family>, String> {
    let want = gpu_type.to_ascii_lowercase();
    let mut out: Vec<Family> = fleet
        .pools
        .iter()
        .filter_map(|p| p.shape.accelerator.as_ref())
        .filter(|a| a.model.to_ascii_lowercase().contains(&want))
        .map(|a| a.family)
        .collect();
    out.sort_by_key(|f| f.to_string());
    out.dedup();
    if out.is_empty() {
        let mut models: Vec<&str> = fleet
            .pools
            .iter()
            .filter_map(|p| p.shape.accelerator.as_ref())
            .map(|a| a.model.as_str())
            .collect();
        models.sort();
        models.dedup();
        return Err(format!(
            "gpu_type {gpu_type:?} matches no accelerator in the fleet ({})",
            models.join(", ")
        ));
    }
    Ok(out)
}

/// Letters, digits, `-`, `_` and `.`; anything else becomes `-`.
fn sanitize(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect();
    if s.is_empty() { "job".into() } else { s }
}

/// What a simulation needs: the fleet, the trace's jobs, the fault model,
/// the seed and the policies to compare.
pub struct Input<'a> {
    pub fleet: &'a Fleet,
    pub jobs: &'a [Job],
    pub faults: &'a FaultModel,
    pub seed: u64,
    pub policies: &'a [PlacementPolicy],
    /// What the trace's jobs ask placement to favour (`preferences.optimize`);
    /// only Canopy's policy reads it.
    pub optimize: Optimize,
    /// Names for the report header.
    pub fleet_name: &'a str,
    pub trace_name: &'a str,
    /// Tenants, quotas and owners (the fleet file's `[[tenant]]` and
    /// `[[flavor]]`); `None`: none. Jobs are submitted for their
    /// `tenant` ([`tenants::assign`] fills it in).
    pub tenancy: Option<&'a crate::tenant::Tenancy>,
}

/// Runs every policy over the same trace and luck. `sink` sees the
/// records of each run in turn (see [`RecordSink`]).
pub fn simulate(input: &Input<'_>, sink: &mut dyn RecordSink) -> Result<SimReport, String> {
    input.faults.validate()?;
    let specs = specs(input.jobs, input.fleet, input.optimize, input.seed, input.faults)?;
    let policies = input
        .policies
        .iter()
        .map(|&policy| {
            let run = world::Run {
                fleet: input.fleet,
                jobs: input.jobs,
                specs: &specs,
                faults: input.faults,
                seed: input.seed,
                policy,
                tenancy: input.tenancy,
            };
            world::run(&run, sink)
        })
        .collect();
    Ok(SimReport {
        seed: input.seed,
        optimize: input.optimize,
        fleet: input.fleet_name.to_string(),
        trace: input.trace_name.to_string(),
        jobs: input.jobs.len(),
        nodes: input.fleet.nodes.len(),
        gpus: input.fleet.total_gpus(),
        faults: input.faults.clone(),
        policies,
    })
}
