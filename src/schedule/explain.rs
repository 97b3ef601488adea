//! [`Explanation`]: why nothing fits, in the style of Kubernetes' FitError
//! and Nomad's AllocMetric: "0/412 nodes fit: 300 gpu memory < 24 GB, …",
//! which capacity dimensions ran out, and the nearest miss.
//!
//! This is the slow path: it runs every filter on every pool and, where a
//! pool passes them all, on every node, so the counts are exact. It is
//! only called when the fast path found nothing. It never scores.

use super::Requirements;
use super::check::{PoolJudge, node_failure};
use super::domain::{DomainKey, domain_key, domain_label};
use super::filter::{Filter, num, plural, usd};
use super::snapshot::Snapshot;
use crate::fleet::PoolIdx;
use crate::spec::Topology;
use serde::Serialize;
use std::fmt;
use std::ops::ControlFlow;

/// Why a workload cannot be placed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub total_nodes: usize,
    /// Each node counted once, under the first filter it failed; sorted by
    /// count, descending (ties in filter order). The counts sum to `total_nodes`.
    pub reasons: Vec<ReasonCount>,
    /// Dimensions where the shape fits but free capacity ran out:
    /// "gpus: 40 nodes of the right shape have < 2 free GPUs".
    pub exhausted: Vec<String>,
    /// The pool that failed the fewest filters, and what it would need.
    pub nearest: Option<NearMiss>,
    /// For a gang: how close the fleet came to holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangShortfall>,
}

/// Why no set of nodes holds a gang: nodes fit on their own, but too few
/// of them share one topology domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GangShortfall {
    /// The gang's size.
    pub nodes: u32,
    pub topology: Topology,
    /// Nodes that fit the per-node request on their own.
    pub available: usize,
    /// The most of them in one domain, and that domain ("cloud-a/h100
    /// switch leaf-2"); 0 and `None` when no node fits.
    pub largest: usize,
    pub largest_domain: Option<String>,
    /// What each node must offer, in words: "with 8 free GPUs".
    pub per_node: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReasonCount {
    pub filter: Filter,
    /// "gpu memory < 24 GB".
    pub reason: String,
    pub nodes: usize,
}

/// The pool closest to fitting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NearMiss {
    /// `provider/pool`.
    pub pool: String,
    pub pool_idx: PoolIdx,
    /// Every filter it failed (for a pool whose nodes are all unusable, the
    /// most common node-level reason).
    pub failed: Vec<Filter>,
    /// What would have to change: "regions allowed us-east".
    pub needs: Vec<String>,
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = ": ";
        match &self.gang {
            None => write!(f, "0/{} nodes fit", self.total_nodes)?,
            Some(g) => {
                write!(f, "0/{} nodes are available for a gang of {}", self.total_nodes, g.nodes)?;
                if g.largest > 0 {
                    write!(
                        f,
                        ": only {} node{} {} in any {} domain",
                        g.largest,
                        plural(g.largest),
                        g.per_node,
                        g.topology
                    )?;
                    if let Some(d) = &g.largest_domain {
                        write!(f, " ({d})")?;
                    }
                    sep = "; ";
                }
            }
        }
        if self.total_nodes == 0 {
            f.write_str(": the fleet has no nodes")?;
        }
        for (i, r) in self.reasons.iter().enumerate() {
            write!(f, "{}{} {}", if i == 0 { sep } else { ", " }, r.nodes, r.reason)?;
        }
        for e in &self.exhausted {
            write!(f, "\nexhausted {e}")?;
        }
        if let Some(n) = &self.nearest {
            write!(f, "\n{n}")?;
        }
        Ok(())
    }
}

impl fmt::Display for NearMiss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nearest: {} would fit if {}", self.pool, self.needs.join(" and "))
    }
}

/// The full scan. Exact counts; see [`Explanation`].
pub(crate) fn explain(req: &Requirements, snap: &Snapshot) -> Explanation {
    let fleet = snap.fleet();
    let judge = PoolJudge::new(req, snap);
    let mut by_filter = [0usize; Filter::COUNT];
    // The nearest miss so far: its key and its most common node-level
    // reason (for pools that pass every pool-level filter).
    let mut nearest: Option<(NearKey, Option<Filter>)> = None;
    let gang = req.gang_size() > 1;
    // Gangs: nodes that fit on their own, with their domain; each is
    // counted below as `Topology` (or `NoSwitch`) once all are known.
    let mut available: Vec<(Option<DomainKey>, u32)> = Vec::new();
    for (i, pool) in fleet.pools.iter().enumerate() {
        let p = PoolIdx(i as u32);
        let size = pool.nodes.len();
        if size == 0 {
            continue;
        }
        let (mut first, mut failures, mut shape, mut gap) = (None, 0usize, 0usize, 0.0);
        let _ = judge.checks(p, &mut |f| {
            first.get_or_insert(f);
            failures += 1;
            shape += usize::from(f.is_shape());
            gap += shape_gap(req, &pool.shape, f);
            ControlFlow::Continue(())
        });
        let mut node_reason = None;
        if let Some(first) = first {
            by_filter[first as usize] += size;
        } else {
            let mut local = [0usize; Filter::COUNT];
            for (j, node) in fleet.pool_nodes(p).iter().enumerate() {
                let at = pool.nodes.start as usize + j;
                let quarantined = snap.nodes[at].quarantined;
                match node_failure(req, node, quarantined) {
                    Some(f) => local[f as usize] += 1,
                    None if gang => {
                        let key = domain_key(snap, req.topology, i, at);
                        local[if key.is_some() { Filter::Topology } else { Filter::NoSwitch } as usize] += 1;
                        available.push((key, at as u32));
                    }
                    // The fast path would have placed here; leaving it
                    // uncounted makes the totals disagree, which tests catch.
                    None => debug_assert!(false, "explain() called while {} fits", node.name),
                }
            }
            for (total, n) in by_filter.iter_mut().zip(local) {
                *total += n;
            }
            // The most common node-level reason; ties to the earlier filter.
            node_reason = (0..Filter::COUNT)
                .rev()
                .max_by_key(|&f| local[f])
                .filter(|&f| local[f] > 0)
                .and_then(Filter::from_index);
            failures += usize::from(node_reason.is_some());
        }
        let key =
            NearKey { failures, shape, gap, hourly: judge.hourly(p), rank: snap.rows[i].label_rank, pool: p };
        if nearest.as_ref().is_none_or(|(best, _)| key.better_than(best)) {
            nearest = Some((key, node_reason));
        }
    }
    let nearest = nearest.map(|(key, node_reason)| {
        let mut failed = Vec::new();
        let _ = judge.checks(key.pool, &mut |f| {
            failed.push(f);
            ControlFlow::Continue(())
        });
        failed.extend(node_reason);
        (failed, key.pool)
    });

    let mut counts: Vec<(Filter, usize)> = (0..Filter::COUNT)
        .filter_map(|i| Some((Filter::from_index(i)?, by_filter[i])))
        .filter(|(_, n)| *n > 0)
        .collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut exhausted: Vec<(Filter, usize)> =
        counts.iter().copied().filter(|(f, _)| f.is_exhaustion()).collect();
    exhausted.sort_by_key(|(f, _)| *f);
    let gang = gang.then(|| gang_shortfall(req, snap, &mut available));
    Explanation {
        gang,
        total_nodes: fleet.nodes.len(),
        reasons: counts
            .iter()
            .map(|&(filter, nodes)| ReasonCount { filter, reason: filter.reason(req), nodes })
            .collect(),
        exhausted: exhausted
            .into_iter()
            .map(|(f, n)| {
                let verb = if n == 1 { "has" } else { "have" };
                format!(
                    "{}: {n} node{} of the right shape {verb} {}",
                    f.dimension(),
                    plural(n),
                    f.shortfall(req)
                )
            })
            .collect(),
        nearest: nearest.map(|(failed, p)| NearMiss {
            pool: snap.label(p).to_string(),
            pool_idx: p,
            needs: needs(req, snap, p, &failed),
            failed,
        }),
    }
}

/// The largest domain among the nodes that fit on their own.
fn gang_shortfall(
    req: &Requirements,
    snap: &Snapshot,
    available: &mut [(Option<DomainKey>, u32)],
) -> GangShortfall {
    available.sort_unstable();
    let mut largest: Option<(usize, DomainKey, u32)> = None;
    let mut i = 0;
    while i < available.len() {
        let key = available[i].0;
        let j = i + available[i..].iter().take_while(|a| a.0 == key).count();
        if let Some(k) = key {
            let size = j - i;
            // The largest; ties to the smallest key (the first).
            if largest.is_none_or(|(s, _, _)| size > s) {
                largest = Some((size, k, available[i].1));
            }
        }
        i = j;
    }
    let per_node = if req.gpus > 0 {
        format!("with {} free GPU{}", req.gpus, plural(req.gpus as usize))
    } else {
        "that fit".to_string()
    };
    GangShortfall {
        nodes: req.gang_size(),
        topology: req.topology,
        available: available.len(),
        largest: largest.map_or(0, |l| l.0),
        largest_domain: largest.map(|(_, k, node)| domain_label(snap, k, node as usize)),
        per_node,
    }
}

/// How near a pool came to fitting; smaller is nearer.
struct NearKey {
    /// Filters failed (a pool whose nodes are all unusable counts one).
    failures: usize,
    /// Of those, hardware the workload's shape would have to give up: a
    /// limit is easier to loosen than a machine to change.
    shape: usize,
    /// How far short its hardware falls, summed relative gaps.
    gap: f64,
    hourly: f64,
    rank: u32,
    pool: PoolIdx,
}

impl NearKey {
    /// Fewest failures, then fewest shape failures, then the smallest
    /// hardware gap, then cheapest, then by label.
    fn better_than(&self, other: &NearKey) -> bool {
        self.failures
            .cmp(&other.failures)
            .then(self.shape.cmp(&other.shape))
            .then(self.gap.total_cmp(&other.gap))
            .then(self.hourly.total_cmp(&other.hourly))
            .then(self.rank.cmp(&other.rank))
            .is_lt()
    }
}

/// For a failed hardware filter, how far short the shape falls relative to
/// the request (0 for other filters): an 8-GPU node misses a 16-GPU request
/// by less than a 1-GPU node does.
fn shape_gap(req: &Requirements, shape: &crate::fleet::Shape, f: Filter) -> f64 {
    let rel = |want: f64, have: f64| {
        if want > 0.0 { ((want - have) / want).clamp(0.0, 1.0) } else { 0.0 }
    };
    let mem = shape.accelerator.as_ref().map_or(0.0, |a| a.memory_gb);
    match f {
        Filter::GpuCount => rel(req.gpus as f64, shape.gpus_per_node as f64),
        Filter::GpuMemory => match (req.gpu_memory_gb.min, req.gpu_memory_gb.max) {
            (Some(lo), _) if mem < lo => rel(lo, mem),
            (_, Some(hi)) if mem > hi && mem > 0.0 => ((mem - hi) / mem).clamp(0.0, 1.0),
            _ => 0.0,
        },
        Filter::CpuShape => rel(req.cpu_cores, shape.cpu_cores),
        Filter::MemoryShape => rel(req.memory_gb, shape.memory_gb),
        Filter::DiskShape => rel(req.disk_gb, shape.disk_gb),
        _ => 0.0,
    }
}

/// What would have to change for pool `p` to pass `failed`, one phrase
/// per distinct change.
fn needs(req: &Requirements, snap: &Snapshot, p: PoolIdx, failed: &[Filter]) -> Vec<String> {
    let fleet = snap.fleet();
    let pool = fleet.pool(p);
    let provider = fleet.provider(pool.provider);
    let s = &pool.shape;
    let acc = s.accelerator.as_ref();
    let missing = |have: &[String], want: &[String]| {
        want.iter().filter(|w| have.binary_search(w).is_err()).cloned().collect::<Vec<_>>().join(", ")
    };
    // A gang's caps and lend limits are the whole gang's.
    let gang = req.gang_size();
    let hourly = pool.hourly_share(req.gpus, req.cpu_cores, req.memory_gb) * f64::from(gang);
    let (held_pool, held_provider) = snap.held(p);
    let no_gpu = || format!("it had GPU{}", plural(req.gpus as usize));
    let mut out: Vec<String> = Vec::new();
    for &f in failed {
        let phrase = match (f, acc) {
            (Filter::Provider, _) => format!("providers allowed {}", provider.name),
            (Filter::Region, _) => format!("regions allowed {}", pool.region),
            (Filter::Compliance, _) => {
                format!("it carried compliance [{}]", missing(&pool.compliance, &req.compliance))
            }
            (Filter::Interruptible, _) => "interruptible capacity were allowed".into(),
            (Filter::Capability, _) => {
                format!("it carried capability [{}]", missing(&pool.capabilities, &req.capabilities))
            }
            (Filter::Image, _) => "it ran container images, or runtime.image were dropped".into(),
            (Filter::ImageMemory, _) => "its container engine could enforce memory limits".into(),
            (Filter::GpuCount, _) if s.gpus_per_node == 0 => no_gpu(),
            (Filter::GpuCount, _) => format!("gpus were ≤ {}", s.gpus_per_node),
            (Filter::Vendor | Filter::Family | Filter::ComputeCapability | Filter::GpuMemory, None) => {
                no_gpu()
            }
            (Filter::Vendor, Some(a)) => format!("vendor allowed {}", a.vendor),
            (Filter::Family, Some(a)) => format!("families allowed {}", a.family),
            (Filter::Model, None) => no_gpu(),
            (Filter::Model, Some(a)) => format!("the model asked for were {}", a.model),
            (Filter::ComputeCapability, Some(a)) => {
                format!("min compute capability were ≤ {}", a.compute_capability)
            }
            (Filter::GpuMemory, Some(a)) => format!("gpu memory allowed {} GB", num(a.memory_gb)),
            (Filter::Interconnect, _) => format!("interconnect allowed {}", s.interconnect),
            (Filter::Fabric, _) => match s.fabric {
                Some(fab) => format!("fabric allowed {} at {} Gbit/s", fab.kind, num(fab.gbps)),
                None => "the fleet gave it a fabric".into(),
            },
            (Filter::CpuShape, _) => format!("cpu_cores were ≤ {}", num(s.cpu_cores)),
            (Filter::MemoryShape, _) => format!("memory_gb were ≤ {}", num(s.memory_gb)),
            (Filter::DiskShape, _) => format!("disk_gb were ≤ {}", num(s.disk_gb)),
            (Filter::ProviderQuarantined, _) => format!("{} left quarantine", provider.name),
            (Filter::PoolQuarantined, _) => "it left quarantine".into(),
            (Filter::PoolExcluded, _) => "the retry did not exclude it".into(),
            (Filter::Quota, _) => "the tenant's quota had room".into(),
            (Filter::HourlyPrice, _) => format!("max_hourly_usd were ≥ {}", usd(hourly)),
            (Filter::Cost, _) => {
                let hours = req.cost_runtime_hours().unwrap_or(0.0);
                format!("max_cost_usd were ≥ {}", usd(hourly * hours))
            }
            (Filter::PoolLendLimit, _) => {
                format!("its lend limit allowed {} GPUs", held_pool + u64::from(req.gpus) * u64::from(gang))
            }
            (Filter::ProviderLendLimit, _) => {
                format!(
                    "{}'s lend limit allowed {} GPUs",
                    provider.name,
                    held_provider + u64::from(req.gpus) * u64::from(gang)
                )
            }
            (Filter::NoNodes, _) => "it had nodes".into(),
            (Filter::Cordoned, _) => "a node were uncordoned".into(),
            (Filter::Draining, _) => "a node finished draining".into(),
            (Filter::Down, _) => "a node came back up".into(),
            (Filter::NodeQuarantined, _) => "a node left quarantine".into(),
            (Filter::NodeExcluded, _) => "the retry did not exclude its nodes".into(),
            (Filter::FreeGpus, _) => format!("a node had {} free GPU{}", req.gpus, plural(req.gpus as usize)),
            (Filter::FreeCpu, _) => format!("a node had {} free CPU cores", num(req.cpu_cores)),
            (Filter::FreeMemory, _) => format!("a node had {} GB free RAM", num(req.memory_gb)),
            (Filter::FreeDisk, _) => format!("a node had {} GB free disk", num(req.disk_gb)),
            (Filter::Topology, _) => format!("{gang} of its free nodes shared a {} domain", req.topology),
            (Filter::NoSwitch, _) => "the fleet said which switch its nodes hang off".into(),
        };
        if !out.contains(&phrase) {
            out.push(phrase);
        }
    }
    out
}
