//! How fairly tenants were served, as issue 27 defines it: every simulated
//! 10 minutes, among the tenants with a backlog (a workload waiting to be
//! placed, not in a retry backoff) — at least two of them — each tenant's
//! share of the GPUs those tenants hold, divided by its fair share among
//! them (its weight over their weights). Jain's index over those ratios
//! is 1 when every backlogged tenant holds exactly its fair share and
//! 1/n when one holds everything.
//!
//! No I/O, no clock: a function of the core's state at each sample.

use crate::engine::core::Core;
use crate::engine::model::{Millis, WorkloadState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How often the shares are sampled (simulated time).
pub const SAMPLE_EVERY_MS: i64 = 10 * 60 * 1000;

/// What the samples say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fairness {
    /// Samples with at least two tenants backlogged.
    pub samples: usize,
    /// Jain's index over the backlogged tenants' share ÷ fair share, the
    /// mean over samples (1 without samples).
    pub jain_mean: f64,
    /// The lowest sample's.
    pub jain_min: f64,
    /// Per tenant: its share ÷ fair share, the mean over the samples in
    /// which it had a backlog.
    pub share_over_fair: BTreeMap<String, f64>,
}

/// Samples the core's state every [`SAMPLE_EVERY_MS`].
#[derive(Debug, Default)]
pub struct Sampler {
    next: Option<i64>,
    jain: Vec<f64>,
    ratios: BTreeMap<String, (f64, usize)>,
}

/// Jain's index of `x`: (Σx)² / (n·Σx²); 1 for an empty or all-zero `x`.
pub fn jain(x: &[f64]) -> f64 {
    let (s, s2) = x.iter().fold((0.0, 0.0), |(s, s2), v| (s + v, s2 + v * v));
    if x.is_empty() || s2 <= 0.0 { 1.0 } else { s * s / (x.len() as f64 * s2) }
}

impl Sampler {
    /// The core's state holds from `now` until `until` (the next event):
    /// every sample instant in `[now, until)` sees it.
    pub fn observe(&mut self, now: Millis, until: Millis, core: &Core) {
        let next = *self.next.get_or_insert(now.0);
        if next >= until.0 {
            return;
        }
        let k = ((until.0 - 1 - next) / SAMPLE_EVERY_MS + 1) as usize;
        self.next = Some(next + k as i64 * SAMPLE_EVERY_MS);
        let tenancy = core.tenancy();
        if tenancy.tenants.len() < 2 {
            return;
        }
        let default = tenancy.default_tenant.as_deref();
        let mut backlogged: Vec<&str> = Vec::new();
        for w in core.live_workloads() {
            if w.state != WorkloadState::Queued || w.not_before.is_some_and(|t| t > now) {
                continue;
            }
            if let Some(t) = w.tenant.as_deref().or(default)
                && !backlogged.contains(&t)
            {
                backlogged.push(t);
            }
        }
        if backlogged.len() < 2 {
            return;
        }
        let mut held: BTreeMap<String, f64> = BTreeMap::new();
        for (t, _, a) in core.tenant_usage() {
            *held.entry(t).or_default() += a.gpus as f64;
        }
        let weight = |t: &str| tenancy.tenant(t).map_or(0.0, |x| x.weight);
        let total: f64 = backlogged.iter().map(|t| held.get(*t).copied().unwrap_or(0.0)).sum();
        let weights: f64 = backlogged.iter().map(|t| weight(t)).sum();
        if total <= 0.0 || weights <= 0.0 {
            return;
        }
        let x: Vec<f64> = backlogged
            .iter()
            .map(|t| (held.get(*t).copied().unwrap_or(0.0) / total) / (weight(t) / weights))
            .collect();
        let j = jain(&x);
        for (t, r) in backlogged.iter().zip(&x) {
            let e = self.ratios.entry(t.to_string()).or_default();
            e.0 += r * k as f64;
            e.1 += k;
        }
        self.jain.extend(std::iter::repeat_n(j, k));
    }

    pub fn finish(self) -> Fairness {
        let n = self.jain.len();
        Fairness {
            samples: n,
            jain_mean: if n == 0 { 1.0 } else { self.jain.iter().sum::<f64>() / n as f64 },
            jain_min: self.jain.iter().copied().fold(1.0, f64::min),
            share_over_fair: self.ratios.into_iter().map(|(t, (s, c))| (t, s / c.max(1) as f64)).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jains_index_is_one_when_equal_and_one_over_n_when_one_holds_all() {
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[3.0, 0.0, 0.0]) - 1.0 / 3.0).abs() < 1e-12);
        assert!((jain(&[2.0, 0.0]) - 0.5).abs() < 1e-12);
        assert_eq!(jain(&[]), 1.0);
    }
}
