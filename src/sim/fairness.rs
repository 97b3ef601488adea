//! How fairly tenants were served, as issue 27 defines it: every simulated
//! 10 minutes, among the tenants with a backlog (a workload waiting to be
//! placed, not in a retry backoff) — at least two of them — each tenant's
//! share of the GPUs those tenants hold, divided by its fair share among
//! them (its weight over their weights). Jain's index over those ratios
//! is 1 when every backlogged tenant holds exactly its fair share and
//! 1/n when one holds everything.
//!
//! A second measure beside it, demand-aware: a tenant that cannot use its
//! weighted share (its backlog is one small job, and it holds little) is
//! not owed it. Each backlogged tenant's entitlement is its weighted
//! max-min fair share of the same GPUs ([`water_fill`]): with demand =
//! the GPUs it holds + the GPUs its waiting work asks (work the fleet
//! could hold), a tenant whose demand is below its weighted share of
//! what is left is entitled to its demand, and the rest is shared by
//! weight among the others. Jain's index over held ÷ entitlement. Both
//! are reported side by side; the first is issue 27's definition.
//!
//! No I/O, no clock: a function of the core's state at each sample.

use crate::engine::core::Core;
use crate::engine::model::{Millis, WorkloadState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::tenant::fair::water_fill;

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
    /// Demand-aware: Jain's index over the backlogged tenants' held ÷
    /// entitlement (weighted max-min), the mean over the same samples.
    #[serde(default)]
    pub demand_jain_mean: f64,
    /// The lowest sample's.
    #[serde(default)]
    pub demand_jain_min: f64,
    /// Per tenant: held ÷ entitlement, the mean over its backlogged samples.
    #[serde(default)]
    pub held_over_entitled: BTreeMap<String, f64>,
    /// Per tenant: samples in which it was backlogged.
    #[serde(default)]
    pub backlogged: BTreeMap<String, usize>,
    /// Per tenant: samples in which its demand was below its weighted
    /// share (it could not use its fair share: water-filling capped it).
    #[serde(default)]
    pub capped: BTreeMap<String, usize>,
    /// Per tenant: samples in which it was backlogged and held no GPUs.
    #[serde(default)]
    pub held_none: BTreeMap<String, usize>,
    /// Samples in which some backlogged tenant held no GPUs.
    #[serde(default)]
    pub samples_held_none: usize,
    /// Samples in which some backlogged tenant was capped, and the mean of
    /// the first index over them (1 without such samples).
    #[serde(default)]
    pub samples_capped: usize,
    #[serde(default)]
    pub jain_mean_capped: f64,
    /// The first index's mean over the samples in which no tenant was
    /// capped (1 without such samples).
    #[serde(default)]
    pub jain_mean_uncapped: f64,
}

/// Samples the core's state every [`SAMPLE_EVERY_MS`].
#[derive(Debug, Default)]
pub struct Sampler {
    next: Option<i64>,
    jain: Vec<f64>,
    ratios: BTreeMap<String, (f64, usize)>,
    /// Per sample: the demand-aware index and whether a tenant was capped.
    demand: Vec<(f64, bool)>,
    entitled: BTreeMap<String, (f64, usize)>,
    capped: BTreeMap<String, usize>,
    held_none: BTreeMap<String, usize>,
    samples_held_none: usize,
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
        let fleet = core.fleet();
        let per_node = |n: &crate::fleet::Node| fleet.pool(n.pool).shape.gpus_per_node;
        let fleet_gpus: f64 = fleet.nodes.iter().map(|n| f64::from(per_node(n))).sum();
        let widest = fleet.nodes.iter().map(per_node).max().unwrap_or(0);
        let mut backlogged: Vec<&str> = Vec::new();
        // GPUs each backlogged tenant's waiting work asks: work the fleet
        // could hold (per node no more than its widest node, in all no
        // more than its GPUs).
        let mut asks: BTreeMap<&str, f64> = BTreeMap::new();
        for w in core.live_workloads() {
            if w.state != WorkloadState::Queued || w.not_before.is_some_and(|t| t > now) {
                continue;
            }
            if let Some(t) = w.tenant.as_deref().or(default) {
                if !backlogged.contains(&t) {
                    backlogged.push(t);
                }
                let ask = f64::from(w.spec.resources.gpus) * f64::from(w.spec.resources.nodes.max(1));
                if w.spec.resources.gpus <= widest && ask <= fleet_gpus {
                    *asks.entry(t).or_default() += ask;
                }
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
        // Demand-aware: the same GPUs, water-filled over what each asks.
        let held_of = |t: &str| held.get(t).copied().unwrap_or(0.0);
        let wd: Vec<(f64, f64)> = backlogged
            .iter()
            .map(|t| (weight(t), held_of(t) + asks.get(t).copied().unwrap_or(0.0)))
            .collect();
        let entitled = water_fill(total, &wd);
        let mut any_capped = false;
        let mut y = Vec::with_capacity(backlogged.len());
        for (i, t) in backlogged.iter().enumerate() {
            let r = if entitled[i] > 0.0 { held_of(t) / entitled[i] } else { 1.0 };
            y.push(r);
            let e = self.entitled.entry(t.to_string()).or_default();
            e.0 += r * k as f64;
            e.1 += k;
            if held_of(t) <= 0.0 {
                *self.held_none.entry(t.to_string()).or_default() += k;
            }
            // Capped: its demand is below its plain weighted share.
            if wd[i].1 < total * wd[i].0 / weights - 1e-9 {
                any_capped = true;
                *self.capped.entry(t.to_string()).or_default() += k;
            }
        }
        if backlogged.iter().any(|t| held_of(t) <= 0.0) {
            self.samples_held_none += k;
        }
        self.demand.extend(std::iter::repeat_n((jain(&y), any_capped), k));
    }

    pub fn finish(self) -> Fairness {
        let n = self.jain.len();
        let mean = |v: &mut dyn Iterator<Item = f64>| {
            let (s, c) = v.fold((0.0, 0usize), |(s, c), x| (s + x, c + 1));
            if c == 0 { 1.0 } else { s / c as f64 }
        };
        let split = |capped: bool| {
            mean(&mut self.jain.iter().zip(&self.demand).filter(|(_, d)| d.1 == capped).map(|(j, _)| *j))
        };
        Fairness {
            samples: n,
            jain_mean: mean(&mut self.jain.iter().copied()),
            jain_min: self.jain.iter().copied().fold(1.0, f64::min),
            share_over_fair: self
                .ratios
                .iter()
                .map(|(t, (s, c))| (t.clone(), s / (*c).max(1) as f64))
                .collect(),
            demand_jain_mean: mean(&mut self.demand.iter().map(|d| d.0)),
            demand_jain_min: self.demand.iter().map(|d| d.0).fold(1.0, f64::min),
            held_over_entitled: self
                .entitled
                .iter()
                .map(|(t, (s, c))| (t.clone(), s / (*c).max(1) as f64))
                .collect(),
            backlogged: self.ratios.iter().map(|(t, (_, c))| (t.clone(), *c)).collect(),
            capped: self.capped.clone(),
            held_none: self.held_none.clone(),
            samples_held_none: self.samples_held_none,
            samples_capped: self.demand.iter().filter(|d| d.1).count(),
            jain_mean_capped: split(true),
            jain_mean_uncapped: split(false),
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

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9)
    }

    #[test]
    fn water_filling_gives_a_small_demand_all_it_asks_and_shares_the_rest_by_weight() {
        // 12 GPUs, three tenants of weight 1: one asks 2, the others a lot.
        // Plain shares would be 4 each; the small one gets its 2, the other
        // two 5 each.
        let e = water_fill(12.0, &[(1.0, 2.0), (1.0, 20.0), (1.0, 9.0)]);
        assert!(close(&e, &[2.0, 5.0, 5.0]), "{e:?}");
        // Everyone asks more than their share: plain weighted shares.
        let e = water_fill(12.0, &[(2.0, 100.0), (1.0, 100.0)]);
        assert!(close(&e, &[8.0, 4.0]), "{e:?}");
        // Capping cascades: 10 GPUs, demands 1, 3, 100 (weights 1): the
        // first round's share is 3.33, so 1 and 3 are met; 6 is left.
        let e = water_fill(10.0, &[(1.0, 1.0), (1.0, 3.0), (1.0, 100.0)]);
        assert!(close(&e, &[1.0, 3.0, 6.0]), "{e:?}");
        // Weights: 9 GPUs, weights 2:1, the weight-2 tenant asks 4 (its
        // share would be 6): it gets 4, the other the 5 left.
        let e = water_fill(9.0, &[(2.0, 4.0), (1.0, 50.0)]);
        assert!(close(&e, &[4.0, 5.0]), "{e:?}");
        // More capacity than demand: everyone gets its demand; weight 0
        // gets nothing.
        let e = water_fill(100.0, &[(1.0, 3.0), (1.0, 7.0), (0.0, 5.0)]);
        assert!(close(&e, &[3.0, 7.0, 0.0]), "{e:?}");
    }

    #[test]
    fn a_tenant_with_a_tiny_backlog_scores_fair_on_the_demand_aware_index_only() {
        // 12 GPUs held by three backlogged tenants: a holds 1 and waits for
        // 1 more, b and c hold 5 and 6 and wait for plenty. Their plain
        // shares are 4 each: a at 0.25 of it drags the first index down
        // though a could use no more than 2.
        let held = [1.0, 5.0, 6.0];
        let plain: Vec<f64> = held.iter().map(|h| h / 4.0).collect();
        assert!((jain(&plain) - 0.7742).abs() < 1e-3, "{}", jain(&plain));
        let e = water_fill(12.0, &[(1.0, 2.0), (1.0, 20.0), (1.0, 20.0)]);
        assert!(close(&e, &[2.0, 5.0, 5.0]), "{e:?}");
        let aware: Vec<f64> = held.iter().zip(&e).map(|(h, e)| h / e).collect();
        assert!((jain(&aware) - 0.9033).abs() < 1e-3, "{}", jain(&aware));
    }
}
