//! What [`super::place`] returns: a ranked placement with its score
//! breakdown, or an explanation of why nothing fits. Plain data for the
//! CLI, the engine and the console; no logic beyond formatting helpers.

use super::Requirements;
use super::explain::Explanation;
use super::filter::{Filter, usd};
use super::score::FactorScore;
use super::snapshot::Snapshot;
use crate::fleet::{NodeIdx, PoolIdx};
use serde::Serialize;

/// The outcome of one scheduling decision.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "decision", rename_all = "lowercase")]
pub enum Decision {
    Placed(Placement),
    Unschedulable(Explanation),
}

impl Decision {
    /// The chosen candidate, if placed.
    pub fn chosen(&self) -> Option<&Candidate> {
        match self {
            Decision::Placed(p) => p.candidates.first(),
            Decision::Unschedulable(_) => None,
        }
    }
}

/// Where the workload goes, and where it would go next.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// Ranked: `[0]` is the placement, the rest the fallback order. Never
    /// empty, at most `policy.top_k`, at most one per pool.
    pub candidates: Vec<Candidate>,
    pub considered: Considered,
}

/// One feasible (pool, node) and why it ranks where it does.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub provider: String,
    /// `provider/pool`.
    pub pool: String,
    pub node: String,
    pub region: String,
    /// "8× H100-SXM 80GB nvlink", or "cpu".
    pub accelerator: String,
    /// This workload's share of the node per hour ([`crate::fleet::Pool::hourly_share`]).
    pub hourly_usd: f64,
    /// The relative training throughput (V100 = 1) the cost factor divided
    /// `hourly_usd` by: the GPUs' when GPU work is priced per unit of work
    /// ([`super::Policy::per_work`]), else 1.
    pub relative_speed: f64,
    pub est_cost_usd: CostRange,
    pub startup_s: u64,
    /// 0..100.
    pub score: f64,
    pub breakdown: Vec<FactorScore>,
    /// For work without GPUs on a GPU node: why it ranks where it does.
    /// Such candidates rank after every CPU-only one, whatever their
    /// score; `None` for GPU work and for CPU-only nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_node: Option<GpuNode>,
    /// The chance the job exhausts its retry budget here, from the pool's
    /// learned preemption rate over the job's expected runtime
    /// ([`super::Exhaustion`]), when it is at least 0.1 %: part of the
    /// success factor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exhaustion: Option<f64>,
    pub pool_idx: PoolIdx,
    pub node_idx: NodeIdx,
    /// A gang's nodes in rank order, rank 0 first (`node` and `node_idx`
    /// are rank 0's); empty for one node. All in one provider, and in the
    /// topology domain the request asked for.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gang: Vec<GangNode>,
}

/// What a pool would charge a request on its best usable node: the
/// candidate [`super::place`] would make there, reduced to its price
/// ([`super::pool_prices`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolPrice {
    pub pool_idx: PoolIdx,
    /// As [`Candidate::hourly_usd`].
    pub hourly_usd: f64,
    /// As [`Candidate::relative_speed`].
    pub relative_speed: f64,
}

impl PoolPrice {
    /// As [`Candidate::priced_hourly`].
    pub fn priced_hourly(&self) -> f64 {
        self.hourly_usd / self.relative_speed
    }
}

/// One node of a gang's placement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GangNode {
    pub node: String,
    /// `provider/pool` (a `same-region` gang may span pools of one shape).
    pub pool: String,
    #[serde(skip)]
    pub node_idx: NodeIdx,
}

impl Candidate {
    /// What the cost factor compares: `hourly_usd` over `relative_speed`
    /// (per V100-hour of work where GPU work is priced so, else per hour).
    pub fn priced_hourly(&self) -> f64 {
        self.hourly_usd / self.relative_speed
    }

    /// Every node the placement takes, in rank order.
    pub fn node_names(&self) -> Vec<String> {
        if self.gang.is_empty() {
            vec![self.node.clone()]
        } else {
            self.gang.iter().map(|g| g.node.clone()).collect()
        }
    }

    /// Every node index the placement takes, in rank order.
    pub fn node_indices(&self) -> Vec<NodeIdx> {
        if self.gang.is_empty() {
            vec![self.node_idx]
        } else {
            self.gang.iter().map(|g| g.node_idx).collect()
        }
    }
}

/// Why work without GPUs was offered a GPU node. Its CPU and memory there
/// would block the node's free GPUs (the fragmentation GPU-cluster studies
/// measure), so a GPU node is a last resort: it ranks after every node
/// without GPUs that fits, whatever the scores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuNode {
    /// A CPU-only node fits too, and ranks first.
    KeptForGpuWork,
    /// No CPU-only node fits.
    LastResort,
}

impl GpuNode {
    /// A few words for a table column.
    pub fn short(self) -> &'static str {
        match self {
            GpuNode::KeptForGpuWork => "kept free for GPU work",
            GpuNode::LastResort => "GPU node, last resort",
        }
    }
}

impl std::fmt::Display for GpuNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            GpuNode::KeptForGpuWork => "kept free for GPU work: a CPU-only node fits",
            GpuNode::LastResort => "GPU node used as a last resort: no CPU-only node fits",
        })
    }
}

/// Estimated cost of one attempt: hourly share × expected runtime (low) and
/// × max runtime (high). `high` is `None` when no runtime bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CostRange {
    pub low: f64,
    pub high: Option<f64>,
}

impl CostRange {
    pub(crate) fn estimate(hourly: f64, req: &Requirements) -> Self {
        let hours = |d: std::time::Duration| d.as_secs_f64() / 3600.0;
        let high = req.max_runtime.map(|d| hourly * hours(d));
        let low = req.expected_runtime.map_or(0.0, |d| hourly * hours(d));
        Self { low: high.map_or(low, |h| low.min(h)), high }
    }
}

impl std::fmt::Display for CostRange {
    /// "$1.20–$4.80", "$1.20+", "≤ $4.80", or "?" when nothing is known.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.low, self.high) {
            (l, Some(h)) if l > 0.0 && l < h => write!(f, "{}–{}", usd(l), usd(h)),
            (l, Some(h)) if l > 0.0 && l >= h => write!(f, "{}", usd(h)),
            (_, Some(h)) => write!(f, "≤ {}", usd(h)),
            (l, None) if l > 0.0 => write!(f, "{}+", usd(l)),
            (_, None) => f.write_str("?"),
        }
    }
}

/// What the decision looked at.
#[derive(Debug, Clone, Serialize)]
pub struct Considered {
    pub total_nodes: usize,
    pub total_pools: usize,
    /// Pools with at least one feasible node.
    pub feasible_pools: usize,
    /// Pools ruled out, each with its first failed filter (for pools whose
    /// nodes were all unusable, the reason of the best-ranked node, or the
    /// most common node state when none is ready). In filter order, then
    /// pool order.
    pub ruled_out: Vec<RuledOut>,
}

/// A pool that was ruled out, and by which filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RuledOut {
    pub pool: PoolIdx,
    pub filter: Filter,
}

impl RuledOut {
    /// "cloud-a/us-east-h100: gpu memory < 24 GB".
    pub fn describe(&self, snap: &Snapshot, req: &Requirements) -> String {
        format!("{}: {}", snap.label(self.pool), self.filter.reason(req))
    }
}
