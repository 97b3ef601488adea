//! [`Policy`]: how much each scoring factor counts, and the few constants
//! the factors use. Pure data; the factors themselves live in `score.rs`.

use crate::spec::Optimize;
use serde::{Deserialize, Serialize};

/// Relative weight of each factor. Only their ratios matter: the score is
/// normalized over the factors that apply to a request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    pub cost: f64,
    pub health: f64,
    pub success: f64,
    pub startup: f64,
    pub locality: f64,
    pub fit: f64,
    pub preference: f64,
}

impl Weights {
    pub const BALANCED: Weights = Weights {
        cost: 0.25,
        health: 0.20,
        success: 0.15,
        startup: 0.10,
        locality: 0.10,
        fit: 0.10,
        preference: 0.10,
    };
    pub const COST: Weights = Weights {
        cost: 0.50,
        health: 0.10,
        success: 0.10,
        startup: 0.05,
        locality: 0.10,
        fit: 0.10,
        preference: 0.05,
    };
    pub const SPEED: Weights = Weights {
        cost: 0.10,
        health: 0.15,
        success: 0.10,
        startup: 0.40,
        locality: 0.10,
        fit: 0.05,
        preference: 0.10,
    };
    pub const RELIABILITY: Weights = Weights {
        cost: 0.10,
        health: 0.35,
        success: 0.30,
        startup: 0.05,
        locality: 0.05,
        fit: 0.10,
        preference: 0.05,
    };
    /// Price and nothing else: baselines, and patience's pricing of pools.
    pub const PRICE_ONLY: Weights = Weights {
        cost: 1.0,
        health: 0.0,
        success: 0.0,
        startup: 0.0,
        locality: 0.0,
        fit: 0.0,
        preference: 0.0,
    };
}

impl Default for Weights {
    fn default() -> Self {
        Self::BALANCED
    }
}

/// Scoring policy for [`super::place`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub weights: Weights,
    /// Candidates returned: the placement plus fallbacks (at least 1).
    pub top_k: usize,
    /// Success rate assumed of a provider with no record.
    pub success_prior: f64,
    /// How many observations that prior is worth; providers shrink toward
    /// it, pools toward their provider, nodes toward their pool.
    pub success_prior_weight: f64,
    /// Without `startup_within`, the startup time that scores 0.5.
    pub startup_reference_s: f64,
    /// Added to both prices in the cost ratio when the cheapest feasible
    /// capacity is free, so that it does not drive every priced pool's
    /// cost score to zero.
    pub cost_smoothing_usd: f64,
    /// Otherwise this share of the cheapest price is added to both: a
    /// smoothing that scales with the prices compared, so that a job of
    /// one GPU at $0.25 an hour weighs a price gap as one of eight at $30
    /// does (a fixed $0.10 scored $0.44 against $0.21 at 0.57, not 0.47).
    pub cost_smoothing_share: f64,
    /// Whether a pool's interruption rate weighs on work with an expected
    /// runtime: cost compares the expected paid hours to finish, success
    /// includes the chance the attempt survives ([`super::Risk`]).
    pub interruption_risk: bool,
    /// Whether GPU work is priced per unit of work rather than per hour:
    /// the cost factor compares the hourly share over the pool's relative
    /// training throughput ([`crate::fleet::Accelerator::relative_speed`]),
    /// so a GPU twice as fast at less than twice the price is the cheaper
    /// one. Never for `inference` (a service runs for wall-clock time
    /// whatever the GPU) or work without GPUs.
    pub per_work: bool,
}

impl Policy {
    /// Whether this policy prices `req` per unit of work ([`Policy::per_work`]).
    pub fn prices_per_work(&self, req: &super::Requirements) -> bool {
        self.per_work && req.gpus > 0 && req.kind != crate::spec::WorkloadKind::Inference
    }

    /// The weights a spec's `preferences.optimize` asks for.
    pub fn for_optimize(o: Optimize) -> Self {
        let weights = match o {
            Optimize::Cost => Weights::COST,
            Optimize::Speed => Weights::SPEED,
            Optimize::Reliability => Weights::RELIABILITY,
            Optimize::Balanced => Weights::BALANCED,
        };
        Self { weights, ..Self::default() }
    }
}

impl Default for Policy {
    /// Balanced weights. The success prior and startup reference are the
    /// ones the snapshot precomputes for; other values are honoured but
    /// computed per decision.
    fn default() -> Self {
        Self {
            weights: Weights::BALANCED,
            top_k: 5,
            success_prior: 0.95,
            success_prior_weight: 10.0,
            startup_reference_s: 300.0,
            cost_smoothing_usd: 0.10,
            cost_smoothing_share: 0.10,
            interruption_risk: true,
            per_work: true,
        }
    }
}
