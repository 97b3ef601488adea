//! After a failed attempt: the retry policy's decision
//! (`engine::retry`), then the workload is queued again (with backoff,
//! exclusions and the decision in its events) or failed for good.

use super::{Core, Entry};
use crate::engine::model::*;
use crate::engine::retry::{self, RetryInput};
use crate::failure::FailureClass;

impl Core {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn retry_or_fail(
        &mut self,
        a: AttemptId,
        class: FailureClass,
        pool: &str,
        node: &str,
        gpu_mem: f64,
        fleet_max_mem: f64,
        now: Millis,
    ) {
        let Some(e) = self.entries.get_mut(&a.workload) else { return };
        if class == FailureClass::App {
            e.rec.app_failures += 1;
        }
        // Stops that were not the workload's fault and after which it
        // resumes with progress count toward nothing (`retry::stop_is_free`).
        let Spent { free, counted, infra } = spent(e);
        let this = e.attempts.iter().position(|t| t.id == a);
        let this_evicted = this.is_some_and(|i| evicted(&e.attempts[i]));
        let this_free = this.is_some_and(|i| free[i]);
        // Free stops are not failures of the pool either: a long job on
        // spot capacity meets the market's preemptions there, and each one
        // it resumed from with progress says the pool delivered.
        let in_pool = e
            .attempts
            .iter()
            .zip(&free)
            .filter(|(t, free)| {
                !**free
                    && t.pool == pool
                    && t.class.is_some_and(|c| c.is_infrastructure() && c != FailureClass::Capacity)
                    && !evicted(t)
            })
            .count() as u32;
        let d = retry::decide(&RetryInput {
            class,
            policy: &e.rec.spec.retry,
            counted_attempts: counted,
            infra_failures: infra,
            app_failures: e.rec.app_failures,
            failures_in_pool: in_pool,
            gpu_memory_gb: gpu_mem,
            fleet_max_gpu_memory_gb: fleet_max_mem,
            evicted: this_evicted,
            free: this_free,
        });
        let msg = format!("{} [{}]: {}", if d.retry { "retry" } else { "final" }, d.rule, d.reason);
        self.event(now, a.workload, Some(a), EventKind::Retry, msg);
        let Some(e) = self.entries.get_mut(&a.workload) else { return };
        if !d.retry {
            let reason = format!("{class}: {}", d.reason);
            return self.finish_workload(a.workload, WorkloadState::Failed, Some(class), reason, now);
        }
        let mut excluded = false;
        if d.exclude_node {
            excluded |= e.exclude_nodes.insert(node.to_string());
        }
        if d.exclude_pool {
            if class == FailureClass::Capacity {
                e.capacity_misses.insert(pool.to_string());
                self.with_misses.push(a.workload);
            } else {
                excluded |= e.exclude_pools.insert(pool.to_string());
            }
        }
        if let Some(m) = d.min_gpu_memory_exclusive {
            e.min_gpu_memory_exclusive = Some(e.min_gpu_memory_exclusive.map_or(m, |x| x.max(m)));
        }
        e.rec.state = WorkloadState::Queued;
        e.rec.reason = Some(d.reason.clone());
        if excluded {
            self.exclusions_set(a.workload, now);
        }
        let priority = self.queue_priority(a.workload);
        let Some(e) = self.entries.get_mut(&a.workload) else { return };
        if d.delay_s > 0.0 {
            let until = now.plus_secs(d.delay_s);
            e.rec.not_before = Some(until);
            self.queue.push_backoff(until, priority, a.workload);
        } else {
            e.rec.not_before = None;
            self.queue.push_ready(priority, a.workload);
        }
        self.save_workload(a.workload, now);
        self.notify(a.workload, crate::spec::NotifyOn::Retrying, now);
    }
}

/// What a workload's attempts have spent of its retry budget.
pub(super) struct Spent {
    /// Per attempt, in order: whether it ended in a free stop.
    pub free: Vec<bool>,
    /// Attempts that count toward `max_attempts`: every ended one but
    /// capacity misses, free stops and the infrastructure failures
    /// `infra_retries` covers.
    pub counted: u32,
    /// Infrastructure failures (capacity misses and free stops aside).
    pub infra: u32,
}

pub(super) fn spent(e: &Entry) -> Spent {
    let free = free_stops(e);
    let charged = || e.attempts.iter().zip(&free).filter(|(_, f)| !**f).map(|(t, _)| t);
    let ended =
        charged().filter(|t| t.class != Some(FailureClass::Capacity) && t.state.is_final()).count() as u32;
    let infra = charged()
        .filter(|t| t.class.is_some_and(|c| c.is_infrastructure() && c != FailureClass::Capacity))
        .count() as u32;
    // Infrastructure failures the budget covers spend no attempt.
    let counted = ended.saturating_sub(infra.min(e.rec.spec.retry.infra_retries));
    Spent { free, counted, infra }
}

/// For each of the workload's attempts, in order: whether it ended in a
/// free stop ([`retry::stop_is_free`]): not the workload's fault, after at
/// least the minimum run and a new checkpoint of its own, while its
/// attempts together stay within `max_runtime`.
pub(super) fn free_stops(e: &Entry) -> Vec<bool> {
    let max_runtime = e.rec.spec.constraints.max_runtime.map(|d| d.0.as_secs_f64());
    let mut ran_total_s = 0.0;
    e.attempts
        .iter()
        .map(|t| {
            let ran_s = match (t.started_at, t.ended_at) {
                (Some(a), Some(b)) => b.secs_since(a).max(0.0),
                _ => 0.0,
            };
            ran_total_s += ran_s;
            let Some(class) = t.class else { return false };
            let new_checkpoint =
                t.checkpoint.as_ref().and_then(|c| c.saved.as_ref()).is_some_and(|s| s.attempt == t.id.n);
            retry::stop_is_free(&retry::Stop { class, ran_s, new_checkpoint, ran_total_s }, max_runtime)
        })
        .collect()
}

/// Whether Canopy stopped this attempt to move it: off a drained node,
/// or off capacity its owner took back.
pub(super) fn evicted(a: &AttemptRecord) -> bool {
    use crate::engine::rules::{EVICTED_RULE, RECLAIMED_RULE};
    matches!(a.rule.as_deref(), Some(EVICTED_RULE | RECLAIMED_RULE))
}
