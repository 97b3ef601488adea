//! Retry policy: given how an attempt failed, decide whether and where the
//! workload tries again, and say which rule decided.
//!
//! Owns the rules only; the core applies the decision and journals it.
//! Infrastructure failures retry elsewhere with backoff, excluding the node
//! (and the pool after repeats), from their own budget (`infra_retries`)
//! before they spend the workload's attempts; capacity misses move on to
//! the next candidate at once without spending an attempt; gpu-oom retries only
//! where GPUs have more memory; the workload's own errors retry only as far
//! as the spec allows; timeout, cost-cap and cancel are final.

use crate::failure::FailureClass;
use crate::spec::RetryPolicy;

/// Everything the decision depends on, gathered by the core.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryInput<'a> {
    pub class: FailureClass,
    pub policy: &'a RetryPolicy,
    /// Attempts that count toward `max_attempts`, including this one:
    /// every ended attempt but capacity misses and the infrastructure
    /// failures `infra_retries` covers.
    pub counted_attempts: u32,
    /// Infrastructure failures of this workload (capacity misses aside),
    /// including this one if it is one.
    pub infra_failures: u32,
    /// Failures classed `app`, including this one if it is one.
    pub app_failures: u32,
    /// Infrastructure failures of this workload in the failed attempt's
    /// pool, including this one: capacity misses, evictions and free stops
    /// aside ([`stop_is_free`]).
    pub failures_in_pool: u32,
    /// GPU memory per GPU where the attempt ran.
    pub gpu_memory_gb: f64,
    /// The most GPU memory per GPU anywhere in the fleet.
    pub fleet_max_gpu_memory_gb: f64,
    /// Canopy stopped the attempt to move it off a drained node
    /// ([`crate::engine::rules::EVICTED_RULE`]).
    pub evicted: bool,
    /// The stop was not the workload's fault and it made progress
    /// ([`stop_is_free`]): nothing is spent. Such stops are left out of
    /// every count above.
    pub free: bool,
}

/// The least an attempt must have run for a stop that is not the
/// workload's fault to be free: ten minutes. With the checkpoint it must
/// also have left, this is the minimum progress per attempt.
pub const MIN_FREE_RUN_S: f64 = 600.0;

/// An ended attempt as [`stop_is_free`] judges it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stop {
    pub class: FailureClass,
    /// Seconds it ran, from started to ended (0 if it never started).
    pub ran_s: f64,
    /// It left a complete checkpoint it wrote itself: newer than the one
    /// it resumed from, so the next attempt resumes further on.
    pub new_checkpoint: bool,
    /// Seconds the workload's attempts ran in all, this one included.
    pub ran_total_s: f64,
}

/// The one rule for stops that are not the workload's fault: such a stop
/// is free — it spends neither `infra_retries` nor `max_attempts` — when
/// the attempt made progress the next one resumes from: it ran at least
/// [`MIN_FREE_RUN_S`] and left a new complete checkpoint. Bounded so that
/// a workload cannot be stopped for free forever: every free stop moves
/// its checkpoint on; once its attempts together have run its
/// `max_runtime` (the time one uninterrupted attempt may take) further
/// stops are charged; and its cost cap counts every attempt's cost, so
/// reaching it ends the workload (`cost-cap`, final) however it was
/// stopped. An owner's reclaim needs no minimum run, only the new
/// checkpoint: the owner's promise was the terms the work borrowed on, and
/// reclaims come only as fast as the owner's own work does, so they cannot
/// churn it as a flapping spot market can. Anything else is charged like
/// the infrastructure failure it is: from `infra_retries` first, then from
/// `max_attempts`.
pub fn stop_is_free(s: &Stop, max_runtime_s: Option<f64>) -> bool {
    s.class.is_displacement()
        && s.new_checkpoint
        && (s.ran_s >= MIN_FREE_RUN_S || s.class == FailureClass::Reclaimed)
        && max_runtime_s.is_none_or(|m| s.ran_total_s <= m)
}

#[derive(Debug, Clone, PartialEq)]
pub struct RetryDecision {
    pub retry: bool,
    /// Stable id of the rule that decided, e.g. `retry.infra-elsewhere`.
    pub rule: &'static str,
    /// One line for the journal and the console.
    pub reason: String,
    /// Wait this long before placing again.
    pub delay_s: f64,
    /// Whether this attempt counts toward `max_attempts`.
    pub counts: bool,
    pub exclude_node: bool,
    pub exclude_pool: bool,
    /// The next placement needs strictly more GPU memory than this.
    pub min_gpu_memory_exclusive: Option<f64>,
}

impl RetryDecision {
    fn fin(rule: &'static str, reason: String) -> Self {
        Self {
            retry: false,
            rule,
            reason,
            delay_s: 0.0,
            counts: true,
            exclude_node: false,
            exclude_pool: false,
            min_gpu_memory_exclusive: None,
        }
    }
}

/// Exponential backoff from the policy: `backoff × 2^(n-1)`, capped.
pub fn backoff_s(policy: &RetryPolicy, retry_n: u32) -> f64 {
    let base = policy.backoff.0.as_secs_f64();
    let cap = policy.backoff_max.0.as_secs_f64();
    (base * 2f64.powi(retry_n.saturating_sub(1).min(30) as i32)).min(cap)
}

/// Pool-level exclusion kicks in after this many infrastructure failures
/// of one workload in one pool.
pub const POOL_EXCLUDE_AFTER: u32 = 2;

pub fn decide(i: &RetryInput<'_>) -> RetryDecision {
    if i.free {
        return free_stop(i);
    }
    charged(i)
}

/// A stop that is not the workload's fault, after progress: placed again
/// without spending anything. A drained node's work moves at once; a
/// preempted attempt waits the first backoff step. Neither excludes the
/// pool: interruptible capacity delivered what it promises, and a job of
/// weeks on spot meets the market's preemptions in every pool it runs in
/// (ruling out each pool after two of them sent it to capacity at several
/// times the price). Stops before progress are charged, and a pool that
/// keeps taking its capacity back that early is excluded as any
/// infrastructure failure's is ([`charged`]).
fn free_stop(i: &RetryInput<'_>) -> RetryDecision {
    let (delay_s, what) = if i.evicted {
        (0.0, moved(i.class))
    } else {
        (backoff_s(i.policy, 1), "stopped by the infrastructure")
    };
    RetryDecision {
        retry: true,
        rule: "retry.resumed-free",
        reason: format!(
            "{what} after progress (a new checkpoint); resumes from it in {delay_s:.0}s, spending no retry"
        ),
        delay_s,
        counts: false,
        exclude_node: false,
        exclude_pool: false,
        min_gpu_memory_exclusive: None,
    }
}

/// Every end that is charged: the classes' own rules.
fn charged(i: &RetryInput<'_>) -> RetryDecision {
    use FailureClass as C;
    let max = i.policy.max_attempts;
    match i.class {
        C::Cancelled => RetryDecision::fin("retry.cancelled", "cancelled by an operator".into()),
        C::Config => RetryDecision::fin(
            "retry.config-final",
            "cannot run as configured, wherever it is placed; fix what the evidence names and resubmit"
                .into(),
        ),
        C::Image => RetryDecision::fin(
            "retry.image-final",
            "the container image does not exist or may not be pulled; fix runtime.image (or push the \
             image, or grant access) and resubmit"
                .into(),
        ),
        C::Timeout => RetryDecision::fin(
            "retry.timeout-final",
            "ran past max_runtime; another attempt would hit it again (raise constraints.max_runtime)".into(),
        ),
        C::CostCap => RetryDecision::fin(
            "retry.cost-cap-final",
            "spent max_cost_usd, or a hard budget (the evidence names it) is spent; no money is left for another attempt".into(),
        ),
        C::CpuOom => RetryDecision::fin(
            "retry.cpu-oom-final",
            "ran out of host memory; raise resources.memory_gb and resubmit".into(),
        ),
        // A capacity miss never ran: try the next candidate now, without
        // spending one of the workload's attempts.
        C::Capacity => RetryDecision {
            retry: true,
            rule: "retry.capacity-elsewhere",
            reason: "no capacity at launch; trying the next candidate".into(),
            delay_s: 0.0,
            counts: false,
            exclude_node: false,
            exclude_pool: true,
            min_gpu_memory_exclusive: None,
        },
        // Within the infrastructure budget: the workload is not to blame,
        // so its attempts are not spent.
        c if c.is_infrastructure() && i.infra_failures <= i.policy.infra_retries => {
            infra_elsewhere(i, c, i.infra_failures, false)
        }
        _ if i.counted_attempts >= max => RetryDecision::fin(
            "retry.max-attempts",
            format!("{} of {max} attempts used (retry.max_attempts)", i.counted_attempts),
        ),
        C::GpuOom if i.fleet_max_gpu_memory_gb <= i.gpu_memory_gb => RetryDecision::fin(
            "retry.gpu-oom-no-larger",
            format!(
                "ran out of GPU memory on {} GB GPUs and no GPU in the fleet has more",
                fmt_gb(i.gpu_memory_gb)
            ),
        ),
        C::GpuOom => RetryDecision {
            retry: true,
            rule: "retry.gpu-oom-larger",
            reason: format!(
                "ran out of GPU memory; retrying on GPUs with more than {} GB",
                fmt_gb(i.gpu_memory_gb)
            ),
            delay_s: 0.0,
            counts: true,
            exclude_node: false,
            exclude_pool: false,
            min_gpu_memory_exclusive: Some(i.gpu_memory_gb),
        },
        C::App if i.app_failures > i.policy.app_errors => RetryDecision::fin(
            "retry.app-final",
            if i.policy.app_errors == 0 {
                "the workload's own error; not retried (set retry.app_errors to allow)".into()
            } else {
                format!(
                    "the workload's own error, {} of {} allowed retries used",
                    i.app_failures - 1,
                    i.policy.app_errors
                )
            },
        ),
        C::App => RetryDecision {
            retry: true,
            rule: "retry.app-allowed",
            reason: format!(
                "the workload's own error; retry {} of {} allowed",
                i.app_failures, i.policy.app_errors
            ),
            delay_s: backoff_s(i.policy, i.counted_attempts),
            counts: true,
            exclude_node: false,
            exclude_pool: false,
            min_gpu_memory_exclusive: None,
        },
        // Provider, node, comm, io, preempted past the budget: they spend
        // attempts like any other failure.
        c => infra_elsewhere(i, c, i.counted_attempts, true),
    }
}

/// Retry an infrastructure failure away from where it happened: not on the
/// node (unless the API or the market failed, which says nothing of the
/// node), not in the pool after repeats; backoff by the `nth` retry.
fn infra_elsewhere(i: &RetryInput<'_>, c: FailureClass, nth: u32, counts: bool) -> RetryDecision {
    use FailureClass as C;
    // The provider's own failures (API errors, timeouts, an unreachable
    // control plane) say nothing of the pool: they back off and wait. An
    // operator's move excludes nothing (the drained node takes no work
    // anyway) and waits for nothing.
    let exclude_pool = i.failures_in_pool >= POOL_EXCLUDE_AFTER && c != C::Provider && !i.evicted;
    let exclude_node = c != C::Provider && c != C::Preempted && !i.evicted;
    let delay = if i.evicted { 0.0 } else { backoff_s(i.policy, nth) };
    let place = match (exclude_pool, exclude_node) {
        (true, _) => "outside this pool",
        (false, true) => "on another node",
        (false, false) => "wherever fits best",
    };
    let rule = match (counts, i.evicted) {
        (true, false) => "retry.infra-elsewhere",
        (true, true) => "retry.evicted-charged",
        (false, false) => "retry.infra-free",
        (false, true) => "retry.evicted",
    };
    let budget = if counts {
        format!(", spending attempt {} of {}", i.counted_attempts + 1, i.policy.max_attempts)
    } else {
        format!(" ({nth} of {} infrastructure retries)", i.policy.infra_retries)
    };
    let what = if i.evicted {
        format!(
            "{} before the progress that makes a move free ({:.0} min of run and a new checkpoint)",
            moved(c),
            MIN_FREE_RUN_S / 60.0
        )
    } else {
        format!("{c} failure")
    };
    RetryDecision {
        retry: true,
        rule,
        reason: format!("{what}; retrying {place} in {delay:.0}s{budget}"),
        delay_s: delay,
        counts,
        exclude_node,
        exclude_pool,
        min_gpu_memory_exclusive: None,
    }
}

/// What Canopy did to move work that did nothing wrong: an owner's
/// reclaim, or an evicting drain.
fn moved(c: FailureClass) -> &'static str {
    if c == FailureClass::Reclaimed {
        "stopped for the owner of its capacity"
    } else {
        "moved off a drained node"
    }
}

fn fmt_gb(v: f64) -> String {
    if v.fract() == 0.0 { format!("{v:.0}") } else { format!("{v:.1}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(class: FailureClass, policy: &RetryPolicy) -> RetryInput<'_> {
        RetryInput {
            class,
            policy,
            counted_attempts: 1,
            infra_failures: u32::from(class.is_infrastructure() && class != FailureClass::Capacity),
            app_failures: 0,
            failures_in_pool: 1,
            gpu_memory_gb: 24.0,
            fleet_max_gpu_memory_gb: 80.0,
            evicted: false,
            free: false,
        }
    }

    #[test]
    fn a_stop_after_progress_is_free_whatever_the_budget() {
        let p = RetryPolicy { max_attempts: 1, infra_retries: 0, ..RetryPolicy::default() };
        let mut i = input(FailureClass::Preempted, &p);
        (i.free, i.counted_attempts, i.infra_failures) = (true, 5, 9);
        let d = decide(&i);
        assert!(d.retry && !d.counts && !d.exclude_node && !d.exclude_pool, "{d:?}");
        assert_eq!((d.rule, d.delay_s), ("retry.resumed-free", 10.0));
        // However many free stops it met in this pool before: a job of
        // weeks on spot meets the market's preemptions wherever it runs,
        // and ruling the pool out sent it to capacity at several times the
        // price (issue 24, the held-out Alibaba trace).
        i.failures_in_pool = 5;
        assert!(!decide(&i).exclude_pool);
        // The same stop before progress is charged, and a pool that keeps
        // taking capacity back that early is left.
        let d = RetryPolicy::default();
        let charged = RetryInput { failures_in_pool: 2, ..input(FailureClass::Preempted, &d) };
        assert!(decide(&charged).exclude_pool);
        // Moved off a drained node after progress: at once.
        i.evicted = true;
        let d = decide(&i);
        assert_eq!((d.rule, d.delay_s, d.counts), ("retry.resumed-free", 0.0, false));
    }

    #[test]
    fn an_eviction_without_progress_is_charged_like_a_preemption_but_moves_at_once() {
        let p = RetryPolicy { max_attempts: 1, infra_retries: 1, ..RetryPolicy::default() };
        let mut i = input(FailureClass::Preempted, &p);
        (i.evicted, i.failures_in_pool) = (true, 3);
        let d = decide(&i);
        assert!(d.retry && !d.counts && !d.exclude_node && !d.exclude_pool, "{d:?}");
        assert_eq!((d.rule, d.delay_s), ("retry.evicted", 0.0));
        assert!(d.reason.contains("1 of 1 infrastructure retries"), "{}", d.reason);
        i.infra_failures = 2;
        assert_eq!(decide(&i).rule, "retry.max-attempts");
    }

    #[test]
    fn only_displacements_with_progress_within_max_runtime_are_free() {
        let stop = Stop {
            class: FailureClass::Preempted,
            ran_s: MIN_FREE_RUN_S,
            new_checkpoint: true,
            ran_total_s: 7200.0,
        };
        assert!(stop_is_free(&stop, None));
        assert!(stop_is_free(&stop, Some(7200.0)));
        assert!(!stop_is_free(&stop, Some(7199.0)), "past max_runtime in all: charged");
        assert!(!stop_is_free(&Stop { new_checkpoint: false, ..stop }, None), "no checkpoint progress");
        assert!(!stop_is_free(&Stop { ran_s: MIN_FREE_RUN_S - 1.0, ..stop }, None), "ran too little");
        let reclaimed = Stop { class: FailureClass::Reclaimed, ran_s: 5.0, ..stop };
        assert!(
            stop_is_free(&reclaimed, None),
            "a reclaim after a new checkpoint is free however short its run"
        );
        assert!(!stop_is_free(&Stop { new_checkpoint: false, ..reclaimed }, None), "but not without one");
        assert!(
            stop_is_free(&Stop { class: FailureClass::Reclaimed, ..stop }, None),
            "an owner's reclaim too"
        );
        for c in FailureClass::ALL.into_iter().filter(|c| !c.is_displacement()) {
            assert!(!stop_is_free(&Stop { class: c, ..stop }, None), "{c} is never free");
        }
    }

    #[test]
    fn infrastructure_retries_elsewhere_with_backoff() {
        let p = RetryPolicy::default();
        let d = decide(&input(FailureClass::Node, &p));
        assert!(d.retry && d.exclude_node && !d.exclude_pool && !d.counts);
        assert_eq!(d.rule, "retry.infra-free");
        assert_eq!(d.delay_s, 10.0);
        let mut i = input(FailureClass::Comm, &p);
        i.failures_in_pool = 2;
        i.infra_failures = 2;
        let d = decide(&i);
        assert!(d.exclude_pool);
        assert_eq!(d.delay_s, 20.0);
        // A preemption says nothing against the node.
        let d = decide(&input(FailureClass::Preempted, &p));
        assert!(d.retry && !d.exclude_node);
    }

    #[test]
    fn infrastructure_failures_spend_no_attempts_within_their_budget() {
        let p = RetryPolicy { max_attempts: 1, infra_retries: 2, ..RetryPolicy::default() };
        let mut i = input(FailureClass::Node, &p);
        i.infra_failures = 2;
        let d = decide(&i);
        assert!(d.retry && !d.counts, "{d:?}");
        // Past the budget they spend attempts like any other failure.
        i.infra_failures = 3;
        i.counted_attempts = 1;
        assert_eq!(decide(&i).rule, "retry.max-attempts");
        let p = RetryPolicy { infra_retries: 2, ..RetryPolicy::default() };
        let mut i = input(FailureClass::Node, &p);
        i.infra_failures = 3;
        let d = decide(&i);
        assert!(d.retry && d.counts);
        assert_eq!(d.rule, "retry.infra-elsewhere");
        assert!(d.reason.contains("spending attempt 2 of 3"), "{}", d.reason);
    }

    #[test]
    fn app_errors_are_final_unless_allowed() {
        let p = RetryPolicy::default();
        let mut i = input(FailureClass::App, &p);
        i.app_failures = 1;
        let d = decide(&i);
        assert!(!d.retry);
        assert_eq!(d.rule, "retry.app-final");
        let p = RetryPolicy { app_errors: 1, ..RetryPolicy::default() };
        let mut i = input(FailureClass::App, &p);
        i.app_failures = 1;
        assert!(decide(&i).retry);
    }

    #[test]
    fn gpu_oom_needs_bigger_gpus() {
        let p = RetryPolicy::default();
        let d = decide(&input(FailureClass::GpuOom, &p));
        assert!(d.retry);
        assert_eq!(d.min_gpu_memory_exclusive, Some(24.0));
        let mut i = input(FailureClass::GpuOom, &p);
        i.gpu_memory_gb = 80.0;
        assert_eq!(decide(&i).rule, "retry.gpu-oom-no-larger");
    }

    #[test]
    fn final_classes_and_max_attempts() {
        let p = RetryPolicy::default();
        for c in [
            FailureClass::Timeout,
            FailureClass::CostCap,
            FailureClass::Cancelled,
            FailureClass::CpuOom,
            FailureClass::Config,
            FailureClass::Image,
        ] {
            assert!(!decide(&input(c, &p)).retry, "{c}");
        }
        let mut i = input(FailureClass::App, &p);
        i.counted_attempts = 3;
        assert_eq!(decide(&i).rule, "retry.max-attempts");
        // Capacity misses never spend an attempt.
        let mut i = input(FailureClass::Capacity, &p);
        i.counted_attempts = 3;
        let d = decide(&i);
        assert!(d.retry && !d.counts);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let p = RetryPolicy::default();
        assert_eq!(backoff_s(&p, 1), 10.0);
        assert_eq!(backoff_s(&p, 3), 40.0);
        assert_eq!(backoff_s(&p, 20), 600.0);
    }
}
