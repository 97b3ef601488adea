//! How long an attempt takes to come to life, per lifecycle, and the
//! handle the simulated provider answers a launch with.
//!
//! Pure functions of (seed, token, lifecycle, the pool's startup estimate,
//! time scale). Owns nothing else: the market keeps the resulting moments,
//! the provider acts on them.
//!
//! | lifecycle | phases | total, as a multiple of the pool's estimate |
//! |---|---|---|
//! | `vm` | provisioning (≈30 %), booting (≈70 %) | 0.77–1.36, mean ≈ 1.07 |
//! | `container` | image pull (cached 30 % of the time), start | cached ≈ 0.05–0.3, else ≈ 0.64–1.52 |
//! | `job` | queued (exponential, capped at 5×), prolog (5 %) | mean ≈ 1.05 |
//! | `process` | none | 0 |
//!
//! Every duration is multiplied by the market's `time_scale`.

use super::rng::Rng;
use crate::fleet::Lifecycle;
use std::time::Duration;

/// One step between launch and the command starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StartPhase {
    Provisioning,
    Booting,
    PullingImage,
    StartingContainer,
    Queued,
    Prolog,
}

impl StartPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "provisioning",
            Self::Booting => "booting",
            Self::PullingImage => "pulling image",
            Self::StartingContainer => "starting container",
            Self::Queued => "queued",
            Self::Prolog => "prolog",
        }
    }
}

/// The phases an attempt goes through before its command starts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StartupPlan {
    pub phases: Vec<(StartPhase, Duration)>,
}

impl StartupPlan {
    pub fn total(&self) -> Duration {
        self.phases.iter().map(|(_, d)| *d).sum()
    }

    /// The phase at `elapsed` since launch; `None` once started.
    pub fn phase_at(&self, elapsed: Duration) -> Option<StartPhase> {
        let mut end = Duration::ZERO;
        for (phase, d) in &self.phases {
            end += *d;
            if elapsed < end {
                return Some(*phase);
            }
        }
        None
    }
}

/// Share of an image pull that hits a warm cache.
pub const IMAGE_CACHE_HIT: f64 = 0.3;
/// A job never waits in the queue longer than this many estimates.
pub const MAX_QUEUE_FACTOR: f64 = 5.0;

/// The startup plan of the attempt with this token.
pub fn startup_plan(
    seed: u64,
    token: &str,
    lifecycle: Lifecycle,
    estimate: Duration,
    time_scale: f64,
) -> StartupPlan {
    let mut rng = Rng::stream(seed, "startup", token);
    let est = estimate.as_secs_f64() * time_scale.max(0.0);
    let d = |secs: f64| Duration::from_secs_f64(secs.max(0.0));
    let phases = match lifecycle {
        Lifecycle::Process => Vec::new(),
        Lifecycle::Vm => vec![
            (StartPhase::Provisioning, d(est * 0.3 * rng.range(0.7, 1.5))),
            (StartPhase::Booting, d(est * 0.7 * rng.range(0.8, 1.3))),
        ],
        Lifecycle::Container => {
            let pull = if rng.chance(IMAGE_CACHE_HIT) {
                est * 0.05 * rng.range(0.5, 1.5)
            } else {
                est * 0.8 * rng.range(0.6, 1.6)
            };
            vec![
                (StartPhase::PullingImage, d(pull)),
                (StartPhase::StartingContainer, d(est * 0.2 * rng.range(0.8, 1.2))),
            ]
        }
        Lifecycle::Job => {
            // Exponential by inverse CDF; 1 - u is in (0, 1], so ln is finite.
            let wait = (-(1.0 - rng.unit()).ln()).min(MAX_QUEUE_FACTOR);
            vec![(StartPhase::Queued, d(est * wait)), (StartPhase::Prolog, d(est * 0.05))]
        }
    };
    StartupPlan { phases }
}

/// The provider's handle for a launch: `i-0a1b…` for a VM, `ctr-…` for a
/// container, `job 48213` for a batch job (`job_number` comes from the
/// market's counter, as a workload manager's would), `proc-…` for a process.
pub fn provider_ref(seed: u64, token: &str, lifecycle: Lifecycle, job_number: u64) -> String {
    let mut rng = Rng::stream(seed, "ref", token);
    match lifecycle {
        Lifecycle::Vm => format!("i-0{}", rng.hex(16)),
        Lifecycle::Container => format!("ctr-{}", rng.hex(12)),
        Lifecycle::Job => format!("job {job_number}"),
        Lifecycle::Process => format!("proc-{}", rng.hex(8)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(lifecycle: Lifecycle, estimate_s: u64, scale: f64) -> Vec<f64> {
        (0..2_000)
            .map(|i| {
                let plan =
                    startup_plan(11, &format!("t{i}"), lifecycle, Duration::from_secs(estimate_s), scale);
                plan.total().as_secs_f64()
            })
            .collect()
    }

    fn mean(v: &[f64]) -> f64 {
        v.iter().sum::<f64>() / v.len() as f64
    }

    #[test]
    fn vm_provisions_then_boots_for_about_the_estimate() {
        let plan = startup_plan(1, "t", Lifecycle::Vm, Duration::from_secs(240), 1.0);
        let kinds: Vec<_> = plan.phases.iter().map(|p| p.0).collect();
        assert_eq!(kinds, [StartPhase::Provisioning, StartPhase::Booting]);
        let t = totals(Lifecycle::Vm, 240, 1.0);
        assert!(t.iter().all(|s| (0.77 * 240.0..=1.36 * 240.0).contains(s)));
        assert!((mean(&t) - 1.07 * 240.0).abs() < 10.0, "{}", mean(&t));
    }

    #[test]
    fn time_scale_shrinks_a_four_minute_boot_to_seconds() {
        let t = totals(Lifecycle::Vm, 240, 0.05);
        assert!((mean(&t) - 12.8).abs() < 1.0, "{}", mean(&t));
        assert!(t.iter().all(|s| *s < 17.0));
    }

    #[test]
    fn containers_pull_then_start_and_some_pulls_are_cached() {
        let plan = startup_plan(1, "t", Lifecycle::Container, Duration::from_secs(75), 1.0);
        assert_eq!(plan.phases[0].0, StartPhase::PullingImage);
        assert_eq!(plan.phases[1].0, StartPhase::StartingContainer);
        let t = totals(Lifecycle::Container, 100, 1.0);
        let fast = t.iter().filter(|s| **s < 35.0).count() as f64 / t.len() as f64;
        assert!((fast - IMAGE_CACHE_HIT).abs() < 0.05, "{fast}");
    }

    #[test]
    fn jobs_queue_for_a_random_wait() {
        let t = totals(Lifecycle::Job, 45, 1.0);
        assert!((mean(&t) - 45.0 * 1.05).abs() < 4.0, "{}", mean(&t));
        assert!(t.iter().all(|s| *s <= 45.0 * (MAX_QUEUE_FACTOR + 0.05) + 1e-6));
        let spread = t.iter().cloned().fold(0.0, f64::max) - t.iter().cloned().fold(f64::MAX, f64::min);
        assert!(spread > 100.0, "waits vary: {spread}");
    }

    #[test]
    fn processes_start_at_once_and_plans_are_reproducible() {
        assert_eq!(
            startup_plan(1, "t", Lifecycle::Process, Duration::from_secs(60), 1.0).total(),
            Duration::ZERO
        );
        let a = startup_plan(3, "t", Lifecycle::Job, Duration::from_secs(60), 1.0);
        assert_eq!(a, startup_plan(3, "t", Lifecycle::Job, Duration::from_secs(60), 1.0));
        assert_eq!(a.phase_at(Duration::ZERO), Some(StartPhase::Queued));
        assert_eq!(a.phase_at(a.total()), None);
    }

    #[test]
    fn refs_look_like_the_real_thing() {
        assert!(provider_ref(1, "t", Lifecycle::Vm, 0).starts_with("i-0"));
        assert_eq!(provider_ref(1, "t", Lifecycle::Vm, 0).len(), 19);
        assert!(provider_ref(1, "t", Lifecycle::Container, 0).starts_with("ctr-"));
        assert_eq!(provider_ref(1, "t", Lifecycle::Job, 48213), "job 48213");
    }
}
