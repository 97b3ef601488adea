//! The hard filters as a vocabulary: [`Filter`], in evaluation order, and
//! the words a failed filter is reported with. The predicates themselves
//! live in `check.rs`. Nothing here decides anything.

use super::Requirements;
use crate::spec::Topology;
use serde::Serialize;
use std::fmt::Write as _;

/// One hard filter. The declaration order is the evaluation order: a node
/// ruled out is counted under the first filter it fails. Categorical and
/// shape filters come first (cheap, and permanent), then pool-wide numeric
/// limits, then the node's own state and free capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Filter {
    /// The provider is not in `constraints.providers`.
    Provider,
    /// The pool's region is not in `constraints.regions`.
    Region,
    /// The pool lacks a required compliance tag.
    Compliance,
    /// The pool is interruptible and the workload does not allow it.
    Interruptible,
    /// The pool lacks a required capability tag.
    Capability,
    /// The workload has `runtime.image` and the pool does not run
    /// container images.
    Image,
    /// The workload has `runtime.image` and a memory limit, and the pool's
    /// container engine cannot enforce one (rootless on cgroup v1).
    ImageMemory,
    /// A node has fewer GPUs than requested (multi-GPU work needs one node).
    GpuCount,
    Vendor,
    Family,
    /// The accelerator is not the model asked for (`accelerator.model`).
    Model,
    ComputeCapability,
    /// GPU memory outside the requested range (or not above the retry minimum).
    GpuMemory,
    Interconnect,
    /// A gang's nodes lack the network it asked for between them.
    Fabric,
    /// Even an empty node has too few CPU cores.
    CpuShape,
    /// Even an empty node has too little RAM.
    MemoryShape,
    /// Even an empty node has too little disk.
    DiskShape,
    ProviderQuarantined,
    PoolQuarantined,
    /// A retry excluded the pool.
    PoolExcluded,
    /// The tenant's quota in the pool's flavor, with what it may borrow,
    /// is in use.
    Quota,
    /// The workload's share of a node costs more per hour than allowed.
    HourlyPrice,
    /// The estimated cost exceeds `max_cost_usd`.
    Cost,
    /// Canopy already holds as many GPUs in the pool as its owner lends.
    PoolLendLimit,
    /// Canopy already holds as many GPUs in the provider as its owner lends.
    ProviderLendLimit,
    /// The pool has no nodes at all (rules out pools, never counts nodes).
    NoNodes,
    Cordoned,
    Draining,
    Down,
    NodeQuarantined,
    /// A retry excluded the node.
    NodeExcluded,
    FreeGpus,
    FreeCpu,
    FreeMemory,
    FreeDisk,
    /// Gangs only: the node fits on its own, but too few such nodes share
    /// its topology domain (switch, pool or region) to hold the gang.
    Topology,
    /// Gangs only: `same-switch` was asked for and the fleet does not say
    /// which switch the node hangs off.
    NoSwitch,
}

impl Filter {
    /// Every filter, in evaluation order.
    pub const ALL: [Filter; 38] = [
        Filter::Provider,
        Filter::Region,
        Filter::Compliance,
        Filter::Interruptible,
        Filter::Capability,
        Filter::Image,
        Filter::ImageMemory,
        Filter::GpuCount,
        Filter::Vendor,
        Filter::Family,
        Filter::Model,
        Filter::ComputeCapability,
        Filter::GpuMemory,
        Filter::Interconnect,
        Filter::Fabric,
        Filter::CpuShape,
        Filter::MemoryShape,
        Filter::DiskShape,
        Filter::ProviderQuarantined,
        Filter::PoolQuarantined,
        Filter::PoolExcluded,
        Filter::Quota,
        Filter::HourlyPrice,
        Filter::Cost,
        Filter::PoolLendLimit,
        Filter::ProviderLendLimit,
        Filter::NoNodes,
        Filter::Cordoned,
        Filter::Draining,
        Filter::Down,
        Filter::NodeQuarantined,
        Filter::NodeExcluded,
        Filter::FreeGpus,
        Filter::FreeCpu,
        Filter::FreeMemory,
        Filter::FreeDisk,
        Filter::Topology,
        Filter::NoSwitch,
    ];
    pub(crate) const COUNT: usize = Filter::ALL.len();

    /// The filter at position `i` of [`Filter::ALL`].
    pub(crate) fn from_index(i: usize) -> Option<Filter> {
        Filter::ALL.get(i).copied()
    }

    /// True for the node-level filters that mean "right shape, but busy".
    pub fn is_exhaustion(self) -> bool {
        matches!(self, Filter::FreeGpus | Filter::FreeCpu | Filter::FreeMemory | Filter::FreeDisk)
    }

    /// True for the class-level hardware filters: failing one means the
    /// node is the wrong machine, not merely busy or disallowed.
    pub fn is_shape(self) -> bool {
        matches!(
            self,
            Filter::GpuCount
                | Filter::Vendor
                | Filter::Family
                | Filter::Model
                | Filter::ComputeCapability
                | Filter::GpuMemory
                | Filter::Interconnect
                | Filter::Fabric
                | Filter::CpuShape
                | Filter::MemoryShape
                | Filter::DiskShape
        )
    }

    /// Short words for the dimension an exhaustion filter measures.
    pub fn dimension(self) -> &'static str {
        match self {
            Filter::FreeGpus | Filter::GpuCount => "gpus",
            Filter::FreeCpu | Filter::CpuShape => "cpu",
            Filter::FreeMemory | Filter::MemoryShape => "memory",
            Filter::FreeDisk | Filter::DiskShape => "disk",
            _ => "",
        }
    }

    /// Why a node failed this filter, in the words of the request:
    /// "gpu memory < 24 GB", "region not in [eu-*]", "cordoned".
    pub fn reason(self, req: &Requirements) -> String {
        match self {
            Filter::Provider => format!("provider not in [{}]", join(&req.providers)),
            Filter::Region => format!("region not in [{}]", join(&req.regions)),
            Filter::Compliance => format!("missing compliance [{}]", req.compliance.join(", ")),
            Filter::Interruptible => "interruptible (spot) not allowed".into(),
            Filter::Capability => format!("missing capability [{}]", req.capabilities.join(", ")),
            Filter::Image => "does not run container images".into(),
            Filter::ImageMemory => {
                "cannot hold a container to its memory limit (rootless engine on cgroup v1)".into()
            }
            Filter::GpuCount => format!("fewer than {} GPU{} per node", req.gpus, plural(req.gpus as usize)),
            Filter::Vendor => match req.vendor {
                Some(v) => format!("vendor not {v}"),
                None => {
                    "its vendor's accelerators take only work that names them (resources.accelerator)".into()
                }
            },
            Filter::Family => format!("family not in [{}]", join(&req.families)),
            Filter::Model => match &req.model {
                Some(m) => format!("accelerator model is not {m}"),
                None => "wrong accelerator model".into(),
            },
            Filter::ComputeCapability => match req.min_compute_capability {
                Some(cc) => format!("compute capability < {cc}"),
                None => "compute capability too low".into(),
            },
            Filter::GpuMemory => gpu_memory_reason(req),
            Filter::Interconnect => match req.interconnect {
                Some(ic) => format!("no {ic} between GPUs"),
                None => "wrong interconnect".into(),
            },
            Filter::Fabric => fabric_reason(req),
            Filter::CpuShape => format!("fewer than {} CPU cores per node", num(req.cpu_cores)),
            Filter::MemoryShape => format!("less than {} GB RAM per node", num(req.memory_gb)),
            Filter::DiskShape => format!("less than {} GB disk per node", num(req.disk_gb)),
            Filter::ProviderQuarantined => "provider quarantined".into(),
            Filter::PoolQuarantined => "pool quarantined".into(),
            Filter::PoolExcluded => "pool excluded by retry".into(),
            Filter::Quota => "tenant's quota in use".into(),
            Filter::HourlyPrice => match req.max_hourly_usd {
                Some(m) => format!("costs more than {}/h", usd(m)),
                None => "too expensive per hour".into(),
            },
            Filter::Cost => match req.max_cost_usd {
                Some(m) => format!("estimated cost over {}", usd(m)),
                None => "estimated cost too high".into(),
            },
            Filter::PoolLendLimit => "pool lend limit reached".into(),
            Filter::ProviderLendLimit => "provider lend limit reached".into(),
            Filter::NoNodes => "pool has no nodes".into(),
            Filter::Cordoned => "cordoned".into(),
            Filter::Draining => "draining".into(),
            Filter::Down => "down".into(),
            Filter::NodeQuarantined => "node quarantined".into(),
            Filter::NodeExcluded => "node excluded by retry".into(),
            Filter::FreeGpus => format!("insufficient free GPUs (need {})", req.gpus),
            Filter::FreeCpu => format!("insufficient free CPU (need {} cores)", num(req.cpu_cores)),
            Filter::FreeMemory => {
                format!("insufficient free memory (need {} GB)", num(req.memory_gb))
            }
            Filter::FreeDisk => format!("insufficient free disk (need {} GB)", num(req.disk_gb)),
            Filter::Topology => format!(
                "fewer than {} such nodes {}",
                req.nodes.max(1),
                match req.topology {
                    Topology::SameSwitch => "behind its switch",
                    Topology::SamePool => "in its pool",
                    Topology::SameRegion => "in its provider's region",
                }
            ),
            Filter::NoSwitch => "switch unknown (same-switch needs one)".into(),
        }
    }

    /// For exhaustion filters, what the busy nodes lack: "< 2 free GPUs".
    pub(crate) fn shortfall(self, req: &Requirements) -> String {
        match self {
            Filter::FreeGpus => format!("< {} free GPU{}", req.gpus, plural(req.gpus as usize)),
            Filter::FreeCpu => format!("< {} free CPU cores", num(req.cpu_cores)),
            Filter::FreeMemory => format!("< {} GB free RAM", num(req.memory_gb)),
            Filter::FreeDisk => format!("< {} GB free disk", num(req.disk_gb)),
            other => other.reason(req),
        }
    }
}

impl Filter {
    /// The filter's name as serialized ("gpu-memory", "free-gpus").
    pub fn as_str(self) -> &'static str {
        match self {
            Filter::Provider => "provider",
            Filter::Region => "region",
            Filter::Compliance => "compliance",
            Filter::Interruptible => "interruptible",
            Filter::Capability => "capability",
            Filter::Image => "image",
            Filter::ImageMemory => "image-memory",
            Filter::GpuCount => "gpu-count",
            Filter::Vendor => "vendor",
            Filter::Family => "family",
            Filter::Model => "model",
            Filter::ComputeCapability => "compute-capability",
            Filter::GpuMemory => "gpu-memory",
            Filter::Interconnect => "interconnect",
            Filter::Fabric => "fabric",
            Filter::CpuShape => "cpu-shape",
            Filter::MemoryShape => "memory-shape",
            Filter::DiskShape => "disk-shape",
            Filter::ProviderQuarantined => "provider-quarantined",
            Filter::PoolQuarantined => "pool-quarantined",
            Filter::PoolExcluded => "pool-excluded",
            Filter::Quota => "quota",
            Filter::HourlyPrice => "hourly-price",
            Filter::Cost => "cost",
            Filter::PoolLendLimit => "pool-lend-limit",
            Filter::ProviderLendLimit => "provider-lend-limit",
            Filter::NoNodes => "no-nodes",
            Filter::Cordoned => "cordoned",
            Filter::Draining => "draining",
            Filter::Down => "down",
            Filter::NodeQuarantined => "node-quarantined",
            Filter::NodeExcluded => "node-excluded",
            Filter::FreeGpus => "free-gpus",
            Filter::FreeCpu => "free-cpu",
            Filter::FreeMemory => "free-memory",
            Filter::FreeDisk => "free-disk",
            Filter::Topology => "topology",
            Filter::NoSwitch => "no-switch",
        }
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// "no infiniband ≥ 400 Gbit/s between nodes".
fn fabric_reason(req: &Requirements) -> String {
    let kind = req.fabric.map_or_else(|| "network".to_string(), |f| f.to_string());
    match req.fabric_gbps {
        Some(g) => format!("no {kind} ≥ {} Gbit/s between nodes", num(g)),
        None => format!("no {kind} between nodes"),
    }
}

fn gpu_memory_reason(req: &Requirements) -> String {
    let r = req.gpu_memory_gb;
    // The effective lower bound: inclusive `min` or the exclusive retry
    // minimum, whichever is stricter.
    let lower = match (r.min, req.min_gpu_memory_exclusive) {
        (Some(m), Some(x)) if x >= m => Some((x, false)),
        (Some(m), _) => Some((m, true)),
        (None, Some(x)) => Some((x, false)),
        (None, None) => None,
    };
    match (lower, r.max) {
        (Some((lo, true)), None) => format!("gpu memory < {} GB", num(lo)),
        (Some((lo, false)), None) => format!("gpu memory ≤ {} GB", num(lo)),
        (None, Some(hi)) => format!("gpu memory > {} GB", num(hi)),
        (Some((lo, incl)), Some(hi)) => {
            format!("gpu memory not in {}{}, {}] GB", if incl { "[" } else { "(" }, num(lo), num(hi))
        }
        (None, None) => "gpu memory out of range".into(),
    }
}

/// A number without a needless `.0`: 24 → "24", 0.5 → "0.5".
pub(crate) fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{}", v as i64) } else { format!("{v}") }
}

pub(crate) fn usd(v: f64) -> String {
    format!("${v:.2}")
}

pub(crate) fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    let mut s = String::new();
    for (i, it) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{it}");
    }
    s
}
