//! The health view: what Canopy has observed about nodes, pools and
//! providers, in the form the scheduler consumes.
//!
//! This module owns the view's types and the neutral defaults for what has
//! never been observed. It does not decide health: the engine turns attempt
//! outcomes into observations and fills this view in; tests use fixed
//! values. No I/O, no clock.

use std::collections::HashMap;

pub mod tracker;
pub use tracker::{HealthConfig, HealthTracker, Quarantine};

/// Health of one node, pool or provider.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Health {
    /// 0.0 (broken) to 1.0 (healthy), recent outcomes weighted more.
    pub score: f64,
    /// Share of attempts that ended without an infrastructure failure.
    pub success_rate: f64,
    /// How many outcomes the figures rest on.
    pub samples: u32,
    /// Excluded from new work until a cool-down ends.
    pub quarantined: bool,
    /// Back from quarantine and trusted only with probation work.
    pub probation: bool,
    /// Hours attempts have run here, whatever ended them (pools and nodes).
    pub exposure_h: f64,
    /// Running attempts the provider reclaimed here (pools only).
    pub preemptions: u32,
}

impl Health {
    /// What is assumed of something never observed: healthy, with no
    /// evidence either way.
    pub const UNKNOWN: Health = Health {
        score: 1.0,
        success_rate: 1.0,
        samples: 0,
        quarantined: false,
        probation: false,
        exposure_h: 0.0,
        preemptions: 0,
    };

    pub fn new(score: f64, success_rate: f64, samples: u32) -> Self {
        Self { score, success_rate, samples, ..Self::UNKNOWN }
    }

    /// With this record of running hours and preemptions.
    pub fn with_exposure(mut self, hours: f64, preemptions: u32) -> Self {
        self.exposure_h = hours;
        self.preemptions = preemptions;
        self
    }

    pub fn quarantined(mut self) -> Self {
        self.quarantined = true;
        self
    }

    /// Attempts that ended in a failure counted against this (for a node:
    /// its own hardware, [`crate::failure::FailureClass::counts_against_node`]).
    pub fn failures(&self) -> u32 {
        let failed = f64::from(self.samples) * (1.0 - self.success_rate);
        // success_rate is successes / samples: this is a whole number up
        // to rounding.
        failed.round().clamp(0.0, f64::from(self.samples)) as u32
    }

    /// Success rate shrunk toward `prior` when there are few samples
    /// (a Beta prior worth `weight` observations), so one lucky attempt
    /// does not outrank a long record.
    pub fn smoothed_success(&self, prior: f64, weight: f64) -> f64 {
        let n = self.samples as f64;
        (self.success_rate * n + prior * weight) / (n + weight)
    }
}

impl Default for Health {
    fn default() -> Self {
        Self::UNKNOWN
    }
}

/// Observed health keyed by name: node names, `provider/pool` labels and
/// provider names. Anything absent is [`Health::UNKNOWN`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HealthView {
    pub nodes: HashMap<String, Health>,
    pub pools: HashMap<String, Health>,
    pub providers: HashMap<String, Health>,
    /// Infrastructure faults seen on each node in the last
    /// [`FAULT_WINDOW_S`], oldest first: a node's record of trouble that
    /// outlives the work that moved off it.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub faults: HashMap<String, Vec<NodeFault>>,
}

/// How long a node's fault stays in its history (24 h).
pub const FAULT_WINDOW_S: f64 = 24.0 * 3600.0;

/// One infrastructure fault an attempt met on a node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeFault {
    pub at: crate::engine::model::Millis,
    pub class: crate::failure::FailureClass,
    /// `provider/pool`.
    pub pool: String,
}

impl NodeFault {
    /// When it leaves the node's history.
    pub fn clears_at(&self) -> crate::engine::model::Millis {
        self.at.plus_secs(FAULT_WINDOW_S)
    }
}

impl HealthView {
    pub fn node(&self, name: &str) -> Health {
        self.nodes.get(name).copied().unwrap_or_default()
    }
    pub fn pool(&self, label: &str) -> Health {
        self.pools.get(label).copied().unwrap_or_default()
    }
    pub fn provider(&self, name: &str) -> Health {
        self.providers.get(name).copied().unwrap_or_default()
    }
}
