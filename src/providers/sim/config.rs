//! The simulator's knobs: seed, time scale, fault rates, lemons, churn,
//! and the three presets (calibrated default, demo, no faults).
//!
//! Plain data with a validity check; it owns no behaviour.

use super::churn::ChurnConfig;
use super::faults::FaultRates;
use std::time::Duration;

/// How the simulated market behaves. Start from [`SimConfig::default`]
/// (calibrated), [`SimConfig::demo`] or [`SimConfig::no_faults`].
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub seed: u64,
    /// Multiplies every startup latency (0.05 turns a 4-minute boot into 12 s).
    pub time_scale: f64,
    pub faults: FaultRates,
    /// Share of nodes that are lemons.
    pub lemon_fraction: f64,
    /// How much likelier node-attributable faults are on a lemon.
    pub lemon_multiplier: f64,
    pub churn: ChurnConfig,
    /// Running faults strike within this long after the command starts
    /// (or within the spec's expected runtime, when that is shorter).
    pub fault_window: Duration,
    /// A launch timeout hangs this long before answering `Timeout` (a
    /// caller with a shorter timeout gives up first); `None` answers at once.
    pub launch_hang: Option<Duration>,
    /// How long before a preemption strikes its notice is given (status
    /// polls answer `Reclaiming`), as clouds do for spot capacity (AWS two
    /// minutes, GCP and Azure 30 s); zero gives none.
    pub preempt_notice: Duration,
}

impl Default for SimConfig {
    /// Rates calibrated against public studies (see [`super::faults`]), real
    /// startup latencies, quiet churn.
    fn default() -> Self {
        Self {
            seed: 0x00ca_7095,
            time_scale: 1.0,
            faults: FaultRates::CALIBRATED,
            lemon_fraction: 0.03,
            lemon_multiplier: 8.0,
            churn: ChurnConfig::CALIBRATED,
            fault_window: Duration::from_secs(30 * 60),
            launch_hang: None,
            preempt_notice: Duration::from_secs(120),
        }
    }
}

impl SimConfig {
    /// A lively demo: startups at 1/20 of real time, about twice the
    /// calibrated fault rates, faults within 20 s of running, visible churn.
    pub fn demo() -> Self {
        Self {
            time_scale: 0.05,
            faults: FaultRates::DEMO,
            lemon_fraction: 0.08,
            churn: ChurnConfig::DEMO,
            fault_window: Duration::from_secs(20),
            launch_hang: Some(Duration::from_secs(45)),
            // AWS's two minutes at the demo's pace.
            preempt_notice: Duration::from_secs(6),
            ..Self::default()
        }
    }

    /// No faults, no lemons, no churn: every launch that fits succeeds.
    pub fn no_faults() -> Self {
        Self { faults: FaultRates::NONE, lemon_fraction: 0.0, churn: ChurnConfig::NONE, ..Self::default() }
    }

    pub fn with_seed(self, seed: u64) -> Self {
        Self { seed, ..self }
    }

    pub(super) fn check(&self) -> Result<(), SimError> {
        let bad =
            |what: &str, v: f64| SimError::Config(format!("{what} must be a probability in [0, 1], got {v}"));
        for (what, v) in self.faults.fields() {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(what, v));
            }
        }
        for (what, v) in [("lemon_fraction", self.lemon_fraction), ("churn.drift", self.churn.drift)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(bad(what, v));
            }
        }
        for (what, v) in [
            ("time_scale", self.time_scale),
            ("lemon_multiplier", self.lemon_multiplier),
            ("churn.down_per_hour", self.churn.down_per_hour),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SimError::Config(format!("{what} must be a number, 0 or more, got {v}")));
            }
        }
        if self.churn.step.is_zero() {
            return Err(SimError::Config("churn.step must be longer than zero".into()));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    #[error("the simulated market has no provider {name:?}; it has {}", known.join(", "))]
    UnknownProvider { name: String, known: Vec<String> },
}
