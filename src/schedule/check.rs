//! The hard filters as predicates: the single definition of feasibility.
//!
//! Shape and capability checks run per class ([`class_checks`]), numeric
//! pool limits through [`Limits`], node checks through [`free_shortfall`]
//! and [`node_failure`]. The fast path (`place.rs`) evaluates the
//! categorical filters on pool sets; [`PoolJudge`] evaluates every
//! pool-stage filter of one pool in order, for explanations. Both call the
//! same predicates (the glob allow-lists per provider and region,
//! [`class_checks`] per class, [`Limits`]), so they agree; the property
//! tests check it. Nothing here scores, and nothing allocates per node.

use super::Requirements;
use super::bitset::PoolSet;
use super::filter::Filter;
use super::snapshot::{PoolRow, Snapshot};
use crate::accel::{Interconnect, family_mask, model_matches};
use crate::fleet::{Free, Node, NodeState, PoolIdx, Shape};
use crate::units::allowed;
use std::ops::ControlFlow;

/// `Continue` when `ok`, else whatever `fail` decides.
#[inline]
pub(crate) fn check(
    ok: bool,
    f: Filter,
    fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
) -> ControlFlow<()> {
    if ok { ControlFlow::Continue(()) } else { fail(f) }
}

/// `have >= want`, false when either is NaN: one comparison for shape and
/// free checks alike, so both paths agree on odd input.
#[inline]
pub(crate) fn at_least(have: f64, want: f64) -> bool {
    have >= want
}

/// True when every tag in `want` is in `have` (sorted).
pub(crate) fn has_all(have: &[String], want: &[String]) -> bool {
    want.iter().all(|w| have.binary_search(w).is_ok())
}

/// True when `tag` is in `have` (sorted).
fn has_tag(have: &[String], tag: &str) -> bool {
    have.binary_search_by(|h| h.as_str().cmp(tag)).is_ok()
}

/// The class-level filters, in order, for a shape and its capability tags.
pub(crate) fn class_checks(
    req: &Requirements,
    shape: &Shape,
    caps: &[String],
    fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
) -> ControlFlow<()> {
    check(has_all(caps, &req.capabilities), Filter::Capability, fail)?;
    check(!req.image || has_tag(caps, crate::fleet::CONTAINER_TAG), Filter::Image, fail)?;
    check(
        !req.image || req.memory_gb <= 0.0 || !has_tag(caps, crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG),
        Filter::ImageMemory,
        fail,
    )?;
    if req.wants_gpus() {
        check(shape.gpus_per_node >= req.gpus, Filter::GpuCount, fail)?;
        let acc = shape.accelerator.as_ref();
        let mask = family_mask(&req.families);
        let vendor_ok = match req.vendor {
            Some(v) => acc.is_some_and(|a| a.vendor == v),
            // Opt-in vendors take work that names their family or model,
            // or asks for domestic hardware only.
            None => acc.is_none_or(|a| {
                !a.vendor.opt_in()
                    || mask != 0
                    || req.model.is_some()
                    || has_tag(&req.compliance, crate::accel::DOMESTIC_HARDWARE)
            }),
        };
        check(vendor_ok, Filter::Vendor, fail)?;
        check(mask == 0 || acc.is_some_and(|a| a.family.bit() & mask != 0), Filter::Family, fail)?;
        check(
            req.model.as_deref().is_none_or(|m| acc.is_some_and(|a| model_matches(&a.model, m))),
            Filter::Model,
            fail,
        )?;
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
    if req.gang_size() > 1 && (req.fabric.is_some() || req.fabric_gbps.is_some()) {
        let ok = shape.fabric.is_some_and(|f| {
            req.fabric.is_none_or(|want| f.kind.serves(want))
                && req.fabric_gbps.is_none_or(|g| at_least(f.gbps, g))
        });
        check(ok, Filter::Fabric, fail)?;
    }
    check(at_least(shape.cpu_cores, req.cpu_cores), Filter::CpuShape, fail)?;
    check(at_least(shape.memory_gb, req.memory_gb), Filter::MemoryShape, fail)?;
    check(at_least(shape.disk_gb, req.disk_gb), Filter::DiskShape, fail)
}

/// The pool-wide numeric limits of one request: price, cost, lend limits.
/// For a gang of N they are the gang's: N × the per-node hourly share
/// against the price and cost caps, N × the per-node GPUs against lend
/// limits (for one node, N = 1 and nothing changes).
///
/// Plain initialised fields rather than `Option`s on purpose: with an
/// `Option<f64>` the optimiser may multiply by the uninitialised payload of
/// a `None` before branching, and when those bits are a subnormal every
/// pool pays a microcode assist (measured: most of a decision's time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    has_max_hourly: bool,
    max_hourly: f64,
    /// A cost cap and the runtime it is checked against, both known.
    has_cost: bool,
    cost_cap: f64,
    cost_hours: f64,
    gpus: u64,
    /// Nodes in the gang, as a factor on the hourly share (1.0 for one node).
    nodes: f64,
}

impl Limits {
    pub fn new(req: &Requirements) -> Self {
        let cost = req.max_cost_usd.zip(req.cost_runtime_hours());
        Self {
            has_max_hourly: req.max_hourly_usd.is_some(),
            max_hourly: req.max_hourly_usd.unwrap_or(f64::INFINITY),
            has_cost: cost.is_some(),
            cost_cap: cost.map_or(f64::INFINITY, |c| c.0),
            cost_hours: cost.map_or(1.0, |c| c.1),
            gpus: req.gpus as u64 * u64::from(req.gang_size()),
            nodes: f64::from(req.gang_size()),
        }
    }

    #[inline]
    fn hourly_ok(&self, hourly: f64) -> bool {
        !self.has_max_hourly || at_least(self.max_hourly, hourly * self.nodes)
    }

    #[inline]
    fn cost_ok(&self, hourly: f64) -> bool {
        !self.has_cost || at_least(self.cost_cap, hourly * self.nodes * self.cost_hours)
    }

    /// Work without GPUs never counts against GPU lend limits.
    #[inline]
    fn pool_lend_ok(&self, row: &PoolRow) -> bool {
        self.gpus == 0 || row.held + self.gpus <= row.limit
    }

    #[inline]
    fn provider_lend_ok(&self, snap: &Snapshot, row: &PoolRow) -> bool {
        let (held, limit) = snap.provider_lend[row.provider as usize];
        self.gpus == 0 || held + self.gpus <= limit
    }

    /// The first limit a pool with this hourly share breaks, if any.
    #[inline]
    pub fn first_failure(&self, snap: &Snapshot, row: &PoolRow, hourly: f64) -> Option<Filter> {
        if !self.hourly_ok(hourly) {
            Some(Filter::HourlyPrice)
        } else if !self.cost_ok(hourly) {
            Some(Filter::Cost)
        } else if !self.pool_lend_ok(row) {
            Some(Filter::PoolLendLimit)
        } else if !self.provider_lend_ok(snap, row) {
            Some(Filter::ProviderLendLimit)
        } else {
            None
        }
    }

    fn checks(
        &self,
        snap: &Snapshot,
        row: &PoolRow,
        hourly: f64,
        fail: &mut impl FnMut(Filter) -> ControlFlow<()>,
    ) -> ControlFlow<()> {
        check(self.hourly_ok(hourly), Filter::HourlyPrice, fail)?;
        check(self.cost_ok(hourly), Filter::Cost, fail)?;
        check(self.pool_lend_ok(row), Filter::PoolLendLimit, fail)?;
        check(self.provider_lend_ok(snap, row), Filter::ProviderLendLimit, fail)
    }
}

/// Each class's share of one node for this request: a pool's hourly share
/// is its price times its class's share, exactly `Pool::hourly_share`.
pub(crate) fn class_shares(req: &Requirements, snap: &Snapshot) -> Vec<f64> {
    let fleet = snap.fleet();
    snap.classes
        .iter()
        .map(|c| fleet.pool(c.rep).shape.share(req.gpus, req.cpu_cores, req.memory_gb))
        .collect()
}

/// Every pool-stage filter for one request, evaluated pool by pool in
/// [`Filter`] order. Built once per decision on the explanation path.
pub(crate) struct PoolJudge<'a> {
    req: &'a Requirements,
    snap: &'a Snapshot,
    limits: Limits,
    provider_ok: Vec<bool>,
    region_ok: Vec<bool>,
    compliance_ok: PoolSet,
    /// Every class-level filter each class fails, in order.
    class_failures: Vec<Vec<Filter>>,
    excluded: PoolSet,
    /// Pools the tenant's quota rules out.
    over_quota: PoolSet,
    share: Vec<f64>,
}

impl<'a> PoolJudge<'a> {
    pub fn new(req: &'a Requirements, snap: &'a Snapshot) -> Self {
        let fleet = snap.fleet();
        let n = fleet.pools.len();
        let mut compliance_ok = snap.all_pools.clone();
        for tag in &req.compliance {
            match snap.compliance_pools.get(tag) {
                Some(set) => compliance_ok.retain_in(set, |_| ()),
                None => compliance_ok = PoolSet::empty(n),
            }
        }
        let mut excluded = PoolSet::empty(n);
        for p in req.exclude_pools.iter().filter_map(|l| snap.pool_by_label(l)) {
            excluded.insert(p.0 as usize);
        }
        let mut over_quota = PoolSet::empty(n);
        for p in req.quota_pools.iter().filter_map(|l| snap.pool_by_label(l)) {
            over_quota.insert(p.0 as usize);
        }
        let class_failures = snap
            .classes
            .iter()
            .map(|c| {
                let rep = fleet.pool(c.rep);
                let mut failed = Vec::new();
                let _ = class_checks(req, &rep.shape, &rep.capabilities, &mut |f| {
                    failed.push(f);
                    ControlFlow::Continue(())
                });
                failed
            })
            .collect();
        Self {
            req,
            snap,
            limits: Limits::new(req),
            provider_ok: fleet.providers.iter().map(|p| allowed(&req.providers, &p.name)).collect(),
            region_ok: snap.regions.iter().map(|r| allowed(&req.regions, r)).collect(),
            compliance_ok,
            class_failures,
            excluded,
            over_quota,
            share: class_shares(req, snap),
        }
    }

    /// The request's hourly share of pool `p`.
    pub fn hourly(&self, p: PoolIdx) -> f64 {
        let row = &self.snap.rows[p.0 as usize];
        row.price * self.share[row.class as usize]
    }

    /// Every pool-stage filter pool `p` fails, in order.
    pub fn checks(&self, p: PoolIdx, fail: &mut impl FnMut(Filter) -> ControlFlow<()>) -> ControlFlow<()> {
        let snap = self.snap;
        let i = p.0 as usize;
        let row = &snap.rows[i];
        check(self.provider_ok[row.provider as usize], Filter::Provider, fail)?;
        check(self.region_ok[row.region as usize], Filter::Region, fail)?;
        check(self.compliance_ok.contains(i), Filter::Compliance, fail)?;
        check(self.req.interruptible || !snap.interruptible.contains(i), Filter::Interruptible, fail)?;
        for &f in &self.class_failures[row.class as usize] {
            fail(f)?;
        }
        check(!snap.provider_quarantined.contains(i), Filter::ProviderQuarantined, fail)?;
        check(!snap.pool_quarantined.contains(i), Filter::PoolQuarantined, fail)?;
        check(!self.excluded.contains(i), Filter::PoolExcluded, fail)?;
        check(!self.over_quota.contains(i), Filter::Quota, fail)?;
        self.limits.checks(snap, row, self.hourly(p), fail)?;
        check(!snap.fleet().pool(p).nodes.is_empty(), Filter::NoNodes, fail)
    }
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
