//! [`PlacementPolicy`]: how the core chooses among feasible placements.
//!
//! Owns the mapping from a named policy to the scheduler's knobs: factor
//! weights, whether the health view reaches the snapshot, whether a
//! workload's own history (failed nodes and pools) excludes placements,
//! and whether the pick is a seeded random choice. Production runs
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
    #[default]
    HealthAware,
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

/// Price and nothing else.
const PRICE_ONLY: Weights =
    Weights { cost: 1.0, health: 0.0, success: 0.0, startup: 0.0, locality: 0.0, fit: 0.0, preference: 0.0 };

impl PlacementPolicy {
    /// Short stable name, for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Self::HealthAware => "canopy",
            Self::CheapestFirst => "cheapest-first",
            Self::Blocklist => "blocklist",
            Self::Random { .. } => "random",
        }
    }

    /// Whether the scheduler sees observed health (scores, quarantine).
    pub fn uses_health(self) -> bool {
        matches!(self, Self::HealthAware)
    }

    /// Whether a workload's failed nodes and pools are excluded from its
    /// next attempts. Capacity misses are honoured by every policy: a pool
    /// that just said "no capacity" is skipped until capacity changes.
    pub fn keeps_exclusions(self) -> bool {
        matches!(self, Self::HealthAware | Self::Blocklist)
    }

    /// The scheduler policy for a spec's `optimize` preference.
    pub fn scheduler_policy(self, optimize: Optimize) -> Policy {
        match self {
            Self::HealthAware => Policy::for_optimize(optimize),
            Self::CheapestFirst | Self::Blocklist => {
                Policy { weights: PRICE_ONLY, interruption_risk: false, ..Policy::default() }
            }
            // Every feasible pool comes back; `choose` draws among them.
            Self::Random { .. } => Policy {
                weights: PRICE_ONLY,
                top_k: usize::MAX,
                interruption_risk: false,
                ..Policy::default()
            },
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
