//! [`Requirements`]: a spec's placement-relevant parts, normalized once so
//! the filters and factors read plain fields.
//!
//! This file owns the normalization from [`Spec`] and nothing else: it does
//! not check that a spec makes sense (that is `spec::validate`) and it does
//! not look at the fleet.

use crate::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use crate::spec::{GbRange, Optimize, Spec, Topology, WorkloadKind};
use crate::units::Glob;
use serde::Serialize;
use std::time::Duration;

/// Everything the scheduler needs to know about one workload.
///
/// Hard fields exclude capacity; soft fields (`preferred_*`, `reserved_first`,
/// `startup_within`, `inputs`) only shape the score. Accelerator fields
/// (`gpu_memory_gb`, `min_gpu_memory_exclusive`, `vendor`, `families`,
/// `min_compute_capability`, `interconnect`) apply only when `gpus > 0`;
/// `interconnect` only when `gpus > 1`.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Requirements {
    pub kind: WorkloadKind,
    /// Nodes placed together (a gang), each with everything below; 1 for
    /// ordinary work. See `gang.rs`.
    pub nodes: u32,
    /// The network a gang's nodes need between them (gangs only).
    pub fabric: Option<Fabric>,
    /// The least bandwidth per node on it, Gbit/s (gangs only).
    pub fabric_gbps: Option<f64>,
    /// How close a gang's nodes must be (gangs only).
    pub topology: Topology,
    /// One exact accelerator model, matched as a whole word
    /// ([`crate::accel::model_matches`]).
    pub model: Option<String>,
    /// GPUs, all on one node (per node, for a gang).
    pub gpus: u32,
    /// Memory per GPU, inclusive bounds.
    pub gpu_memory_gb: GbRange,
    /// Memory per GPU must be strictly more than this (a gpu-oom retry needs
    /// more than the attempt that ran out).
    pub min_gpu_memory_exclusive: Option<f64>,
    pub vendor: Option<Vendor>,
    /// Any of these families; empty means any.
    pub families: Vec<Family>,
    pub min_compute_capability: Option<ComputeCapability>,
    /// Required GPU link. `Pcie` is met by every node; `Nvlink` and `Xgmi`
    /// only by nodes that have them.
    pub interconnect: Option<Interconnect>,
    pub cpu_cores: f64,
    pub memory_gb: f64,
    pub disk_gb: f64,
    /// Allowed providers (globs); empty: any.
    pub providers: Vec<Glob>,
    /// Allowed regions (globs); empty: any.
    pub regions: Vec<Glob>,
    /// Compliance tags the pool must all carry.
    pub compliance: Vec<String>,
    /// Capability tags the pool must all carry.
    pub capabilities: Vec<String>,
    /// The workload runs in a container image (`runtime.image`): only
    /// pools that run images fit (tag [`crate::fleet::CONTAINER_TAG`]).
    pub image: bool,
    /// May run on interruptible (spot) capacity.
    pub interruptible: bool,
    pub max_hourly_usd: Option<f64>,
    pub max_cost_usd: Option<f64>,
    pub max_runtime: Option<Duration>,
    pub expected_runtime: Option<Duration>,
    /// How often the work saves a checkpoint it can resume from
    /// (`[checkpoint] interval`): an interruption loses at most this much.
    pub checkpoint_interval: Option<Duration>,
    /// Charged stops (infrastructure failures, and stops that are not the
    /// workload's fault without progress: `engine::retry::stop_is_free`)
    /// it can still take before one ends it: what is left of
    /// `retry.infra_retries` plus `retry.max_attempts` less one. Placement
    /// weighs the chance a pool's preemptions use it up (the success
    /// factor's budget term); `None` weighs nothing.
    pub charged_stops_left: Option<u32>,
    /// Node names a retry must avoid.
    pub exclude_nodes: Vec<String>,
    /// `provider/pool` labels a retry must avoid.
    pub exclude_pools: Vec<String>,
    /// `provider/pool` labels the workload's tenant may not use now: its
    /// quota there, with what it may borrow, is spent (`tenant/quota.rs`).
    /// Sorted; empty without tenants.
    pub quota_pools: Vec<String>,
    /// The tenant whose quota `quota_pools` comes from.
    pub quota_tenant: Option<String>,
    pub startup_within: Option<Duration>,
    pub preferred_regions: Vec<Glob>,
    pub preferred_capabilities: Vec<String>,
    pub reserved_first: bool,
    /// The spec's leaning; build the policy with [`super::Policy::for_optimize`].
    pub optimize: Optimize,
    /// Where the inputs live, for the locality factor.
    pub inputs: Vec<InputSite>,
}

/// One input's location and size.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct InputSite {
    pub region: Option<String>,
    pub size_gb: Option<f64>,
}

impl Requirements {
    /// Normalizes a spec. Tag lists are sorted and deduplicated; retry
    /// exclusions start empty.
    pub fn from_spec(spec: &Spec) -> Self {
        let r = &spec.resources;
        let c = &spec.constraints;
        let p = &spec.preferences;
        let acc = r.accelerator.clone().unwrap_or_default();
        Self {
            kind: spec.kind,
            nodes: r.nodes.max(1),
            fabric: r.fabric,
            fabric_gbps: r.fabric_gbps,
            topology: c.topology.unwrap_or_default(),
            model: acc.model.clone(),
            gpus: r.gpus,
            gpu_memory_gb: r.gpu_memory_gb.unwrap_or_default(),
            min_gpu_memory_exclusive: None,
            vendor: acc.vendor,
            families: acc.family,
            min_compute_capability: acc.min_compute_capability,
            interconnect: r.interconnect,
            cpu_cores: r.cpu_cores,
            memory_gb: r.memory_gb,
            disk_gb: r.disk_gb,
            providers: c.providers.clone(),
            regions: c.regions.clone(),
            compliance: sorted(&c.compliance),
            capabilities: sorted(&c.capabilities),
            image: spec.runtime.image.is_some(),
            interruptible: c.interruptible,
            max_hourly_usd: c.max_hourly_usd,
            max_cost_usd: c.max_cost_usd,
            max_runtime: c.max_runtime.map(|d| d.0),
            expected_runtime: spec.expected_runtime.map(|d| d.0),
            checkpoint_interval: spec.checkpoint.as_ref().and_then(|c| c.interval).map(|d| d.0),
            charged_stops_left: Some(
                spec.retry.infra_retries.saturating_add(spec.retry.max_attempts.saturating_sub(1)),
            ),
            exclude_nodes: Vec::new(),
            exclude_pools: Vec::new(),
            quota_pools: Vec::new(),
            quota_tenant: None,
            startup_within: p.startup_within.map(|d| d.0),
            preferred_regions: p.regions.clone(),
            preferred_capabilities: sorted(&p.capabilities),
            reserved_first: p.reserved_first,
            optimize: p.optimize,
            inputs: spec
                .inputs
                .iter()
                .map(|i| InputSite { region: i.region.clone(), size_gb: i.size_gb })
                .collect(),
        }
    }

    /// The runtime a cost cap is checked against: the hard limit when
    /// there is one, else the expected runtime.
    pub fn cost_runtime_hours(&self) -> Option<f64> {
        self.max_runtime.or(self.expected_runtime).map(|d| d.as_secs_f64() / 3600.0)
    }

    /// Nodes placed together: `nodes`, at least 1 (a default-built
    /// request has 0, meaning one).
    pub fn gang_size(&self) -> u32 {
        self.nodes.max(1)
    }

    /// True when a node must be tested on its accelerator at all.
    pub(crate) fn wants_gpus(&self) -> bool {
        self.gpus > 0
    }
}

fn sorted(v: &[String]) -> Vec<String> {
    let mut v = v.to_vec();
    v.sort();
    v.dedup();
    v
}
