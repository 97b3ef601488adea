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
mod specs;
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
pub use specs::{Shape, Specs, gang_shape, specs};
pub use trace::{Format, Job, Outcome, TraceError};
pub use world::{EPOCH, NoSink, RecordSink};

use crate::fleet::Fleet;
use crate::spec::Optimize;

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
