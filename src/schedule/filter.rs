//! The hard filters: what they are ([`Filter`], in evaluation order), the
//! plain per-class, per-pool and per-node predicates, and the words a
//! failed filter is reported with.
//!
//! The predicates here are the single definition of feasibility. The fast
//! path in `place.rs` evaluates the categorical ones on sets (per region,
//! per provider, per class) instead of per pool, but calls these same
//! functions for everything numeric; the explanation path calls them for
//! every pool and node. Nothing here scores or allocates per node.

use super::Requirements;
use super::snapshot::Snapshot;
use crate::accel::{Interconnect, family_mask};
use crate::fleet::{Free, Node, NodeState, PoolIdx, Shape};
use crate::units::allowed;
use serde::Serialize;
use std::fmt::Write as _;
use std::ops::ControlFlow;

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
    /// A node has fewer GPUs than requested (multi-GPU work needs one node).
    GpuCount,
    Vendor,
    Family,
    ComputeCapability,
    /// GPU memory outside the requested range (or not above the retry minimum).
    GpuMemory,
    Interconnect,
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
}

impl Filter {
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
                | Filter::ComputeCapability
                | Filter::GpuMemory
                | Filter::Interconnect
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
            Filter::GpuCount => format!("fewer than {} GPU{} per node", req.gpus, plural(req.gpus as usize)),
            Filter::Vendor => match req.vendor {
                Some(v) => format!("vendor not {v}"),
                None => "wrong vendor".into(),
            },
            Filter::Family => format!("family not in [{}]", join(&req.families)),
            Filter::ComputeCapability => match req.min_compute_capability {
                Some(cc) => format!("compute capability < {cc}"),
                None => "compute capability too low".into(),
            },
            Filter::GpuMemory => gpu_memory_reason(req),
            Filter::Interconnect => match req.interconnect {
                Some(ic) => format!("no {ic} between GPUs"),
                None => "wrong interconnect".into(),
            },
            Filter::CpuShape => format!("fewer than {} CPU cores per node", num(req.cpu_cores)),
            Filter::MemoryShape => format!("less than {} GB RAM per node", num(req.memory_gb)),
            Filter::DiskShape => format!("less than {} GB disk per node", num(req.disk_gb)),
            Filter::ProviderQuarantined => "provider quarantined".into(),
            Filter::PoolQuarantined => "pool quarantined".into(),
            Filter::PoolExcluded => "pool excluded by retry".into(),
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
            Filter::GpuCount => "gpu-count",
            Filter::Vendor => "vendor",
            Filter::Family => "family",
            Filter::ComputeCapability => "compute-capability",
            Filter::GpuMemory => "gpu-memory",
            Filter::Interconnect => "interconnect",
            Filter::CpuShape => "cpu-shape",
            Filter::MemoryShape => "memory-shape",
            Filter::DiskShape => "disk-shape",
            Filter::ProviderQuarantined => "provider-quarantined",
            Filter::PoolQuarantined => "pool-quarantined",
            Filter::PoolExcluded => "pool-excluded",
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
        }
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

/// `Continue` when `ok`, else whatever `fail` decides.
#[inline]
fn check(ok: bool, f: Filter, fail: &mut impl FnMut(Filter) -> ControlFlow<()>) -> ControlFlow<()> {
    if ok { ControlFlow::Continue(()) } else { fail(f) }
}

/// `have >= want`, false when either is NaN: one comparison for shape and
/// free checks alike, so both paths agree on odd input.
#[inline]
fn at_least(have: f64, want: f64) -> bool {
    have >= want
}

/// True when every tag in `want` (sorted or not) is in `have` (sorted).
pub(crate) fn has_all(have: &[String], want: &[String]) -> bool {
    want.iter().all(|w| have.binary_search(w).is_ok())
}

/// The class-level filters, in order, for a shape and its capability tags.
pub(crate) fn class_checks(
    req: &Requirements,
    shape: &Shape,
    caps: &[String],
    fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
) -> ControlFlow<()> {
    check(has_all(caps, &req.capabilities), Filter::Capability, fail)?;
    if req.wants_gpus() {
        check(shape.gpus_per_node >= req.gpus, Filter::GpuCount, fail)?;
        let acc = shape.accelerator.as_ref();
        check(req.vendor.is_none_or(|v| acc.is_some_and(|a| a.vendor == v)), Filter::Vendor, fail)?;
        let mask = family_mask(&req.families);
        check(mask == 0 || acc.is_some_and(|a| a.family.bit() & mask != 0), Filter::Family, fail)?;
        check(
            req.min_compute_capability.is_none_or(|m| acc.is_some_and(|a| a.compute_capability >= m)),
            Filter::ComputeCapability,
            fail,
        )?;
        let mem = acc.map_or(0.0, |a| a.memory_gb);
        let mem_ok = acc.is_some()
            && req.gpu_memory_gb.contains(mem)
            && req.min_gpu_memory_exclusive.is_none_or(|x| mem > x);
        check(mem_ok, Filter::GpuMemory, fail)?;
        let ic_ok = match req.interconnect {
            Some(want) if req.gpus > 1 && want != Interconnect::Pcie => shape.interconnect == want,
            _ => true,
        };
        check(ic_ok, Filter::Interconnect, fail)?;
    }
    check(at_least(shape.cpu_cores, req.cpu_cores), Filter::CpuShape, fail)?;
    check(at_least(shape.memory_gb, req.memory_gb), Filter::MemoryShape, fail)?;
    check(at_least(shape.disk_gb, req.disk_gb), Filter::DiskShape, fail)
}

/// The pool-wide numeric limits (price, cost, lend limits), in order.
pub(crate) fn pool_limit_checks(
    req: &Requirements,
    snap: &Snapshot,
    p: PoolIdx,
    hourly: f64,
    fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
) -> ControlFlow<()> {
    check(req.max_hourly_usd.is_none_or(|m| hourly <= m), Filter::HourlyPrice, fail)?;
    let cost_ok = match (req.max_cost_usd, req.cost_runtime_hours()) {
        (Some(cap), Some(h)) => hourly * h <= cap,
        _ => true,
    };
    check(cost_ok, Filter::Cost, fail)?;
    let (pool_ok, provider_ok) = snap.lend_room(p, req.gpus);
    check(pool_ok, Filter::PoolLendLimit, fail)?;
    check(provider_ok, Filter::ProviderLendLimit, fail)
}

/// Every pool-stage filter, in order: categorical, class, health and
/// exclusions, limits. The plain form used by the explanation.
pub(crate) fn pool_checks(
    req: &Requirements,
    snap: &Snapshot,
    p: PoolIdx,
    fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let fleet = snap.fleet();
    let pool = fleet.pool(p);
    let provider = fleet.provider(pool.provider);
    check(allowed(&req.providers, &provider.name), Filter::Provider, fail)?;
    check(allowed(&req.regions, &pool.region), Filter::Region, fail)?;
    check(has_all(&pool.compliance, &req.compliance), Filter::Compliance, fail)?;
    check(!pool.interruptible || req.interruptible, Filter::Interruptible, fail)?;
    class_checks(req, &pool.shape, &pool.capabilities, fail)?;
    let (provider_q, pool_q) = snap.quarantine(p);
    check(!provider_q, Filter::ProviderQuarantined, fail)?;
    check(!pool_q, Filter::PoolQuarantined, fail)?;
    let label = snap.label(p);
    check(!req.exclude_pools.iter().any(|l| l == label), Filter::PoolExcluded, fail)?;
    let hourly = pool.hourly_share(req.gpus, req.cpu_cores, req.memory_gb);
    pool_limit_checks(req, snap, p, hourly, fail)?;
    check(!pool.nodes.is_empty(), Filter::NoNodes, fail)
}

/// The first free-capacity dimension a node lacks, if any.
#[inline]
pub(crate) fn free_shortfall(req: &Requirements, free: &Free) -> Option<Filter> {
    if free.gpus < req.gpus {
        Some(Filter::FreeGpus)
    } else if !at_least(free.cpu_cores, req.cpu_cores) {
        Some(Filter::FreeCpu)
    } else if !at_least(free.memory_gb, req.memory_gb) {
        Some(Filter::FreeMemory)
    } else if !at_least(free.disk_gb, req.disk_gb) {
        Some(Filter::FreeDisk)
    } else {
        None
    }
}

/// The first node-level filter a node fails, if any.
pub(crate) fn node_failure(req: &Requirements, node: &Node, quarantined: bool) -> Option<Filter> {
    match node.state {
        NodeState::Ready => {}
        NodeState::Cordoned => return Some(Filter::Cordoned),
        NodeState::Draining => return Some(Filter::Draining),
        NodeState::Down => return Some(Filter::Down),
    }
    if quarantined {
        return Some(Filter::NodeQuarantined);
    }
    if req.exclude_nodes.contains(&node.name) {
        return Some(Filter::NodeExcluded);
    }
    free_shortfall(req, &node.free)
}
