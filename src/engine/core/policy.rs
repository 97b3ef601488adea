//! [`PlacementPolicy`]: how the core chooses among feasible placements.
//!
//! Owns the mapping from a named policy to the scheduler's knobs: factor
//! weights, whether the health view reaches the snapshot, whether a
//! workload's own history (failed nodes and pools) excludes placements,
//! whether the pick is a seeded random choice, and whether long work waits
//! for cheaper capacity due to free soon ([`Patience`]). Production runs
//! [`PlacementPolicy::HealthAware`]; the others exist so the simulator can
//! compare Canopy with how other tools place work, through the same core.
//! No I/O, no clock; randomness only from a seed and the attempt's identity.

use crate::providers::sim::rng::Rng;
use crate::schedule::{Candidate, Policy, Weights};
use crate::spec::Optimize;
use serde::Serialize;

/// A placement policy. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum PlacementPolicy {
    /// Canopy's: the spec's `optimize` weights over health, historical
    /// success, cost, startup and fit; quarantine; per-workload exclusions
    /// of failed nodes and pools.
    /// With [`Patience`]: long work waits a while for much cheaper
    /// capacity that running work is expected to free.
    #[default]
    HealthAware,
    /// Canopy's policy without [`Patience`]: whatever fits now. For
    /// comparison.
    Eager,
    /// Price only, as dstack orders offers: no health view, no memory of
    /// where this workload failed, so a retry goes back to the cheapest
    /// offer.
    CheapestFirst,
    /// Price only, but a failed node (and a pool after repeats) is excluded
    /// for the rest of that workload, as SkyPilot's failover does; nothing
    /// is remembered across workloads.
    Blocklist,
    /// A seeded random choice among the feasible pools; no health, no
    /// exclusions. A baseline.
    Random { seed: u64 },
}

impl PlacementPolicy {
    /// Short stable name, for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::HealthAware => "canopy",
            Self::Eager => "canopy-eager",
            Self::CheapestFirst => "cheapest-first",
            Self::Blocklist => "blocklist",
            Self::Random { .. } => "random",
        }
    }

    /// Whether the scheduler sees observed health (scores, quarantine).
    pub fn uses_health(self) -> bool {
        matches!(self, Self::HealthAware | Self::Eager)
    }

    /// Whether long work may wait for cheaper capacity (as
    /// [`super::CoreConfig::patience`] says).
    pub fn patient(self) -> bool {
        matches!(self, Self::HealthAware)
    }

    /// Whether a workload's failed nodes and pools are excluded from its
    /// next attempts. Capacity misses are honoured by every policy: a pool
    /// that just said "no capacity" is skipped until capacity changes.
    pub fn keeps_exclusions(self) -> bool {
        matches!(self, Self::HealthAware | Self::Eager | Self::Blocklist)
    }

    /// The scheduler policy for a spec's `optimize` preference.
    pub fn scheduler_policy(self, optimize: Optimize) -> Policy {
        match self {
            Self::HealthAware | Self::Eager => Policy::for_optimize(optimize),
            Self::CheapestFirst | Self::Blocklist => Policy {
                weights: Weights::PRICE_ONLY,
                interruption_risk: false,
                per_work: false,
                ..Policy::default()
            },
            // Every feasible pool comes back; `choose` draws among them.
            Self::Random { .. } => Policy {
                weights: Weights::PRICE_ONLY,
                top_k: usize::MAX,
                interruption_risk: false,
                per_work: false,
                ..Policy::default()
            },
        }
    }

    /// The scheduler policy for placing a queued workload: the
    /// [`Self::scheduler_policy`], asking for the best candidate alone
    /// where [`Self::choose`] takes the best (every policy but `Random`).
    /// The best is the same whatever the number asked for (the rank order
    /// is total); a candidate's names, cost range and score breakdown
    /// were most of a decision's cost, built for candidates never used.
    pub fn deciding_policy(self, optimize: Optimize) -> Policy {
        let policy = self.scheduler_policy(optimize);
        match self {
            Self::Random { .. } => policy,
            _ => Policy { top_k: 1, ..policy },
        }
    }

    /// Picks the candidate to launch from the ranked list: the best, or
    /// for `Random` a draw keyed by the attempt (workload id and number),
    /// so the choice does not depend on the order of other decisions.
    pub fn choose(self, mut ranked: Vec<Candidate>, workload: u64, attempt: u32) -> Option<Candidate> {
        match self {
            Self::Random { seed } if !ranked.is_empty() => {
                let key = workload.to_string();
                let i = Rng::stream_n(seed, "placement", &key, u64::from(attempt)).below(ranked.len() as u64);
                Some(ranked.swap_remove(i as usize))
            }
            _ => ranked.into_iter().next(),
        }
    }
}

/// Patience: rather than overflow long work onto capacity at several times
/// the price, wait a while for much cheaper capacity that running work is
/// expected to free.
///
/// The engine knows when running work is expected to end only from what
/// its specs say (`expected_runtime` from when it started; work past its
/// estimate is not counted on), so the wait is bounded: work expected to
/// run `D` waits at most `min(wait_share × D, max_wait_s)` in all, then
/// takes what fits. The decision itself ([`Patience::wait`]) is a pure
/// function of prices and times; the core supplies the cheapest price due
/// within the wait that is left.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Patience {
    /// Only work expected to run at least this long waits.
    pub min_runtime_s: f64,
    /// It waits only for capacity at most this share of the hourly price
    /// it would pay now.
    pub max_price_share: f64,
    /// It waits at most this share of its expected runtime ...
    pub wait_share: f64,
    /// ... and never longer than this.
    pub max_wait_s: f64,
}

impl Default for Patience {
    /// Work of 2 hours or more waits up to a quarter of its runtime (6
    /// hours at most) for capacity at half the price or less: a wait of a
    /// quarter of the run at most doubles nothing but the queue time, and
    /// halves the bill.
    fn default() -> Self {
        Self { min_runtime_s: 2.0 * 3600.0, max_price_share: 0.5, wait_share: 0.25, max_wait_s: 6.0 * 3600.0 }
    }
}

impl Patience {
    /// How long in all work expected to run `runtime_s` may wait; 0 when
    /// it is too short to wait at all.
    pub fn window_s(&self, runtime_s: f64) -> f64 {
        if runtime_s.is_finite() && runtime_s >= self.min_runtime_s {
            (self.wait_share * runtime_s).min(self.max_wait_s).max(0.0)
        } else {
            0.0
        }
    }

    /// Whether work expected to run `runtime_s`, which has waited
    /// `waited_s` so far and would pay `now_hourly` if placed now, should
    /// wait for `later_hourly`: the cheapest price of capacity (reliable,
    /// or interruptible where the work checkpoints) that is due to free
    /// within the wait it has left, if any.
    pub fn wait(&self, runtime_s: f64, waited_s: f64, now_hourly: f64, later_hourly: Option<f64>) -> bool {
        let left = self.window_s(runtime_s) - waited_s.max(0.0);
        left > 0.0 && later_hourly.is_some_and(|l| l.is_finite() && l <= self.max_price_share * now_hourly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_work_waits_a_bounded_while_for_much_cheaper_capacity() {
        let p = Patience::default();
        let h = 3600.0;
        // Ten hours of work, on-demand at 31.5 now, reserved at 16 due soon.
        assert!(p.wait(10.0 * h, 0.0, 31.5, Some(15.0)));
        // Not for capacity only a little cheaper, or none due.
        assert!(!p.wait(10.0 * h, 0.0, 31.5, Some(20.0)));
        assert!(!p.wait(10.0 * h, 0.0, 31.5, None));
        // Short work never waits; long work stops once its window is spent.
        assert!(!p.wait(h, 0.0, 31.5, Some(1.0)));
        assert_eq!(p.window_s(10.0 * h), 2.5 * h);
        assert!(!p.wait(10.0 * h, 2.5 * h, 31.5, Some(1.0)));
        assert_eq!(p.window_s(100.0 * h), 6.0 * h);
    }

    #[test]
    fn only_canopys_policy_is_patient() {
        assert!(PlacementPolicy::HealthAware.patient());
        for p in [PlacementPolicy::Eager, PlacementPolicy::CheapestFirst, PlacementPolicy::Blocklist] {
            assert!(!p.patient(), "{}", p.name());
        }
    }
}
