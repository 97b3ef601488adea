//! The scoring factors: each turns one feasible (pool, node) into a raw
//! value in 0..=1, and the policy's weights turn the raw values into a
//! 0..100 score with a per-factor breakdown.
//!
//! Factors only rank what the filters let through; they never exclude.
//! A factor that does not apply to a request (locality without located
//! inputs, preference without preferences) is left out of the score and
//! of the breakdown, and the other weights are renormalized.

use super::snapshot::Snapshot;
use super::{Policy, Requirements};
use crate::fleet::PoolIdx;
use crate::units::allowed;
use serde::Serialize;

/// One scoring factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Factor {
    /// Cheapest feasible hourly share = 1; others by price ratio.
    Cost,
    /// Node × pool × provider health score.
    Health,
    /// Smoothed historical success: node toward pool toward provider toward the prior.
    Success,
    /// 1 within `startup_within`; otherwise decays with expected startup.
    Startup,
    /// Share of the input data (by size, else by count) in the pool's region.
    Locality,
    /// How little of the node's GPUs and GPU memory the work leaves idle.
    Fit,
    /// Preferred regions, preferred capability tags, reserved capacity.
    Preference,
}

impl Factor {
    pub const ALL: [Factor; 7] = [
        Factor::Cost,
        Factor::Health,
        Factor::Success,
        Factor::Startup,
        Factor::Locality,
        Factor::Fit,
        Factor::Preference,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Factor::Cost => "cost",
            Factor::Health => "health",
            Factor::Success => "success",
            Factor::Startup => "startup",
            Factor::Locality => "locality",
            Factor::Fit => "fit",
            Factor::Preference => "preference",
        }
    }
}

impl std::fmt::Display for Factor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One factor's part in a candidate's score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactorScore {
    pub factor: Factor,
    /// 0..=1.
    pub raw: f64,
    /// The policy's weight for this factor.
    pub weight: f64,
    /// Points of the 0..100 score; a candidate's contributions sum to its score.
    pub contribution: f64,
}

/// A feasible (pool, node) with its hourly share and, once scored, score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Feasible {
    pub pool: u32,
    pub node: u32,
    pub hourly: f64,
    pub score: f64,
}

/// Per-decision scoring context: what depends on the whole feasible set
/// (cheapest price, smallest GPU memory) or on the request only (region
/// shares), computed once and read per candidate.
pub(crate) struct Scorer<'a> {
    req: &'a Requirements,
    snap: &'a Snapshot,
    policy: &'a Policy,
    weights: [f64; 7],
    applies: [bool; 7],
    weight_sum: f64,
    min_hourly: f64,
    min_gpu_memory: f64,
    /// Input share per snapshot region, when any input has a region.
    locality: Option<Vec<f64>>,
    /// Whether each snapshot region is preferred, when preferences name regions.
    preferred_region: Option<Vec<bool>>,
}

impl<'a> Scorer<'a> {
    pub fn new(req: &'a Requirements, snap: &'a Snapshot, policy: &'a Policy, feasible: &[Feasible]) -> Self {
        let w = &policy.weights;
        let weights = [w.cost, w.health, w.success, w.startup, w.locality, w.fit, w.preference]
            .map(|x| if x.is_finite() { x.max(0.0) } else { 0.0 });
        let locality = locality_shares(req, snap);
        let has_pref =
            !req.preferred_regions.is_empty() || !req.preferred_capabilities.is_empty() || req.reserved_first;
        let applies = [true, true, true, true, locality.is_some(), true, has_pref];
        let weight_sum = weights.iter().zip(applies).filter(|(_, a)| *a).map(|(w, _)| w).sum();
        let fleet = snap.fleet();
        let min_hourly = feasible.iter().map(|f| f.hourly).fold(f64::INFINITY, f64::min);
        let min_gpu_memory = feasible
            .iter()
            .map(|f| fleet.pools[f.pool as usize].gpu_memory_gb())
            .fold(f64::INFINITY, f64::min);
        let preferred_region = (!req.preferred_regions.is_empty())
            .then(|| snap.regions.iter().map(|r| allowed(&req.preferred_regions, r)).collect());
        Self {
            req,
            snap,
            policy,
            weights,
            applies,
            weight_sum,
            min_hourly,
            min_gpu_memory,
            locality,
            preferred_region,
        }
    }

    /// Raw factor values, in [`Factor::ALL`] order (0 where a factor does not apply).
    fn raws(&self, f: &Feasible) -> [f64; 7] {
        let (req, snap, policy) = (self.req, self.snap, self.policy);
        let fleet = snap.fleet();
        let pool = &fleet.pools[f.pool as usize];
        let info = &snap.pools[f.pool as usize];
        let node = &fleet.nodes[f.node as usize];
        let node_info = &snap.nodes[f.node as usize];

        let c = policy.cost_smoothing_usd.max(0.0);
        let cost = if f.hourly + c > 0.0 { (self.min_hourly + c) / (f.hourly + c) } else { 1.0 };

        let health = info.provider_health.score * info.health.score * node_info.health.score;

        let (prior, weight) = (policy.success_prior, policy.success_prior_weight.max(0.0));
        let provider_s = info.provider_health.smoothed_success(prior, weight);
        let pool_s = info.health.smoothed_success(provider_s, weight);
        let success = node_info.health.smoothed_success(pool_s, weight);

        let s = pool.startup.as_secs_f64();
        let startup = match req.startup_within {
            Some(w) if s <= w.as_secs_f64() => 1.0,
            Some(w) => w.as_secs_f64() / s,
            None => {
                let r = policy.startup_reference_s.max(0.0);
                if r + s > 0.0 { r / (r + s) } else { 1.0 }
            }
        };

        let locality = self.locality.as_ref().map_or(0.0, |l| l[info.region as usize]);

        let fit = if req.gpus > 0 {
            let count = req.gpus as f64 / node.free.gpus.max(1) as f64;
            let mem = pool.gpu_memory_gb();
            let memory = if mem > 0.0 { self.min_gpu_memory / mem } else { 1.0 };
            count * memory
        } else if pool.shape.gpus_per_node > 0 {
            // CPU work on a GPU node strands the GPUs.
            0.1
        } else {
            1.0
        };

        let preference = if self.applies[6] { self.preference(PoolIdx(f.pool)) } else { 0.0 };

        [cost, health, success, startup, locality, fit, preference].map(|x| x.clamp(0.0, 1.0))
    }

    fn preference(&self, p: PoolIdx) -> f64 {
        let req = self.req;
        let pool = self.snap.fleet().pool(p);
        let (mut sum, mut parts) = (0.0, 0u32);
        if let Some(pref) = &self.preferred_region {
            sum += f64::from(u8::from(pref[self.snap.pools[p.0 as usize].region as usize]));
            parts += 1;
        }
        if !req.preferred_capabilities.is_empty() {
            let have = req
                .preferred_capabilities
                .iter()
                .filter(|c| pool.capabilities.binary_search(c).is_ok())
                .count();
            sum += have as f64 / req.preferred_capabilities.len() as f64;
            parts += 1;
        }
        if req.reserved_first {
            sum += f64::from(u8::from(pool.reserved));
            parts += 1;
        }
        if parts == 0 { 0.0 } else { sum / parts as f64 }
    }

    /// Each applicable factor's points, in [`Factor::ALL`] order.
    fn contributions(&self, raws: &[f64; 7]) -> impl Iterator<Item = (usize, f64)> + '_ {
        let scale = if self.weight_sum > 0.0 { 100.0 / self.weight_sum } else { 0.0 };
        let raws = *raws;
        (0..7).filter(|&i| self.applies[i]).map(move |i| (i, self.weights[i] * raws[i] * scale))
    }

    /// The 0..100 score: the sum of [`Scorer::breakdown`]'s contributions.
    pub fn score(&self, f: &Feasible) -> f64 {
        self.contributions(&self.raws(f)).map(|(_, c)| c).sum()
    }

    pub fn breakdown(&self, f: &Feasible) -> Vec<FactorScore> {
        let raws = self.raws(f);
        self.contributions(&raws)
            .map(|(i, contribution)| FactorScore {
                factor: Factor::ALL[i],
                raw: raws[i],
                weight: self.weights[i],
                contribution,
            })
            .collect()
    }
}

/// Share of the located input data per snapshot region: by size when every
/// located input gives one, else by count. `None` when no input has a region.
fn locality_shares(req: &Requirements, snap: &Snapshot) -> Option<Vec<f64>> {
    let located: Vec<(&str, Option<f64>)> =
        req.inputs.iter().filter_map(|i| i.region.as_deref().map(|r| (r, i.size_gb))).collect();
    if located.is_empty() {
        return None;
    }
    let by_size = located.iter().all(|(_, s)| s.is_some_and(|s| s > 0.0));
    let weight = |s: Option<f64>| if by_size { s.unwrap_or(0.0) } else { 1.0 };
    let total: f64 = located.iter().map(|(_, s)| weight(*s)).sum();
    let mut shares = vec![0.0; snap.regions.len()];
    for (region, size) in located {
        if let Ok(r) = snap.regions.binary_search_by(|x| x.as_str().cmp(region)) {
            shares[r] += weight(size) / total;
        }
    }
    Some(shares)
}
