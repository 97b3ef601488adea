//! What a policy achieved, computed from the engine's own [`Record`]s:
//! the same stream the journal stores, so the figures are what an operator
//! would find in the store after the run.
//!
//! Owns the definitions of the reported figures; no I/O, no clock.

use crate::engine::model::{AttemptId, AttemptState, Millis, Record, WorkloadId, WorkloadState};
use crate::failure::FailureClass;
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::collections::HashMap;

/// One policy's results. Times in hours, money in USD.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyReport {
    pub policy: String,
    pub workloads: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Never started: nothing in the fleet can host them (e.g. more GPUs
    /// than any node has), or still queued when the run ended.
    pub never_ran: usize,
    /// Succeeded / workloads, in percent.
    pub completed_pct: f64,
    /// Workloads whose failed attempts were all infrastructure failures
    /// (capacity misses at launch aside), at least one.
    pub infra_only: usize,
    /// Of those, how many succeeded, in percent.
    pub infra_only_completed_pct: f64,
    /// GPU-hours every attempt ran, on whatever GPU (a gang: every node's).
    pub used_gpu_h: f64,
    /// GPU-hours of attempts that ran and failed, any class but cancel,
    /// less what they saved in checkpoints that a later attempt resumed
    /// from: work lost or redone.
    pub wasted_gpu_h: f64,
    /// The part of `wasted_gpu_h` lost to infrastructure failures.
    pub wasted_infra_gpu_h: f64,
    /// The rest of `wasted_gpu_h`, the workloads' own errors, in work
    /// units: V100-hours, each GPU-hour weighed by its accelerator's
    /// throughput in the table the scheduler prices by
    /// ([`crate::fleet::throughput`]; a model it does not know counts as
    /// a V100). An hour lost on an H100 is 4.5 V100-hours lost, so a
    /// policy on faster GPUs does not look as if it lost less work.
    pub wasted_own_v100_h: f64,
    /// `wasted_infra_gpu_h` in the same work units.
    pub wasted_infra_v100_h: f64,
    pub cost_usd: f64,
    /// The work of the jobs that completed, in the trace's GPU-hours
    /// (GPUs × duration as measured on the trace's GPU, a V100 unless the
    /// trace says otherwise): the same unit for every policy, whatever
    /// GPUs did the work, and nothing for work lost, redone or abandoned.
    pub useful_gpu_h: f64,
    /// `cost_usd / useful_gpu_h`: what a GPU-hour of completed work cost.
    /// A policy that spends on jobs it never completes, or on work it
    /// redoes, pays for it here.
    pub cost_per_useful_gpu_h: f64,
    pub queue_p50_h: f64,
    pub queue_p99_h: f64,
    /// Submit to success, for succeeded workloads.
    pub completion_p50_h: f64,
    pub completion_p99_h: f64,
    pub attempts_per_workload: f64,
    /// Failed attempts per class, by class name.
    pub failures_by_class: std::collections::BTreeMap<String, usize>,
    /// `wasted_gpu_h` per class, by class name.
    pub wasted_by_class_gpu_h: std::collections::BTreeMap<String, f64>,
    /// Virtual time from the first submit to the last workload's end
    /// (success or failure), hours.
    pub makespan_h: f64,
    /// Per tenant, when the trace's jobs have tenants
    /// ([`super::tenants`]); by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tenants: Vec<TenantReport>,
    /// How fairly tenants with a backlog were served
    /// ([`super::fairness`]); `None` without tenants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<super::fairness::Fairness>,
    /// The usage ledger of the run, by tenant, as `GET /v1/usage` would
    /// report it from the run's journal ([`super::usage`]); `None` only
    /// for reports not made by a run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<crate::usage::Report>,
}

/// What sharing did to one tenant ([`super::tenants`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TenantReport {
    pub tenant: String,
    pub workloads: usize,
    pub succeeded: usize,
    /// The trace GPU-hours of its jobs that succeeded (as `useful_gpu_h`).
    pub completed_gpu_h: f64,
    /// GPU-hours its attempts ran (as `used_gpu_h`).
    pub used_gpu_h: f64,
    pub queue_p50_h: f64,
    pub queue_p99_h: f64,
    /// Reclaims the core made for its workloads as an owner.
    pub reclaims: usize,
    /// From the core's reclaim to the owner's workload placed, seconds.
    pub reclaim_p50_s: f64,
    pub reclaim_p99_s: f64,
    pub reclaim_max_s: f64,
    /// Its `max_reclaim_delay`, seconds; `None` when the run had no
    /// tenancy.
    pub promise_s: Option<f64>,
    /// Of its reclaims, the share placed within its promise (100 with none).
    pub reclaims_within_pct: f64,
    /// Its attempts stopped for an owner (class `reclaimed`).
    pub reclaimed_attempts: usize,
    /// The longest time it was refused its nominal quota
    /// ([`super::tenants::Refusals`]), seconds.
    pub refused_nominal_max_s: f64,
}

impl TenantReport {
    pub(super) fn named(tenant: &str) -> Self {
        TenantReport {
            tenant: tenant.to_string(),
            workloads: 0,
            succeeded: 0,
            completed_gpu_h: 0.0,
            used_gpu_h: 0.0,
            queue_p50_h: 0.0,
            queue_p99_h: 0.0,
            reclaims: 0,
            reclaim_p50_s: 0.0,
            reclaim_p99_s: 0.0,
            reclaim_max_s: 0.0,
            promise_s: None,
            reclaims_within_pct: 100.0,
            reclaimed_attempts: 0,
            refused_nominal_max_s: 0.0,
        }
    }
}

/// What the report needs of one workload, packed: 48 bytes a workload
/// (issue 24: a run of 100,000 jobs keeps one per job to its end).
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// Virtual ms; [`NONE`] when not known.
    submitted: i64,
    first_start: i64,
    finished_at: i64,
    /// Its final state, with `finished_at`; `None` while it is not final.
    finished: Option<WorkloadState>,
    /// Whether a record of it was seen (the slot may be room only).
    seen: bool,
    attempts: u32,
    infra_failures: u32,
    own_failures: u32,
    /// Its work in trace GPU-hours ([`Tally::work`]).
    work: f64,
}

/// `Seen`'s "no time".
const NONE: i64 = i64::MIN;

impl Default for Seen {
    fn default() -> Self {
        Seen {
            submitted: NONE,
            first_start: NONE,
            finished_at: NONE,
            finished: None,
            seen: false,
            attempts: 0,
            infra_failures: 0,
            own_failures: 0,
            work: 0.0,
        }
    }
}

impl Seen {
    fn time(t: i64) -> Option<Millis> {
        (t != NONE).then_some(Millis(t))
    }
}

/// Workload `id`'s entry in `seen`, made on first sight; `None` for id 0,
/// which the core never gives.
fn slot(seen: &mut Vec<Seen>, id: WorkloadId) -> Option<&mut Seen> {
    let i = usize::try_from(id.0.checked_sub(1)?).ok()?;
    if i >= seen.len() {
        seen.resize(i + 1, Seen::default());
    }
    seen.get_mut(i)
}

/// Accumulates records into a [`PolicyReport`].
#[derive(Debug, Default)]
pub struct Tally {
    /// Per workload, at `id - 1`: the core numbers workloads 1, 2, … in
    /// submission order, so this is dense and in id order.
    seen: Vec<Seen>,
    wasted: f64,
    wasted_infra: f64,
    /// Waste in V100-hours: the workloads' own, the infrastructure's.
    wasted_own_v100: f64,
    wasted_infra_v100: f64,
    /// Throughput relative to a V100 by pool label ([`Tally::for_fleet`]).
    speed: HashMap<String, f64>,
    used: f64,
    cost: f64,
    /// GPU-hours each stopped attempt saved in checkpoints ([`Tally::saved`]).
    saved: FxHashMap<AttemptId, f64>,
    /// What failed attempts saved, by workload, until a later attempt
    /// resumes from it ([`Tally::resumed`]): (class, GPU-hours, V100-hours).
    unclaimed: FxHashMap<WorkloadId, Vec<(FailureClass, f64, f64)>>,
    by_class: std::collections::BTreeMap<String, usize>,
    wasted_by_class: std::collections::BTreeMap<String, f64>,
}

impl Tally {
    /// A tally that weighs waste in work units by the throughput of each
    /// pool's accelerator in `fleet` (its stated figure, else the table's;
    /// 1 for a model neither knows and for pools without GPUs).
    pub fn for_fleet(fleet: &crate::fleet::Fleet) -> Self {
        let speed = (0..fleet.pools.len())
            .map(|i| {
                let p = crate::fleet::PoolIdx(i as u32);
                let rel =
                    fleet.pool(p).shape.accelerator.as_ref().and_then(|a| a.known_speed()).unwrap_or(1.0);
                (fleet.pool_label(p), rel)
            })
            .collect();
        Tally { speed, ..Tally::default() }
    }

    /// Makes room for `n` workloads at once (a run knows its job count).
    pub fn expect_workloads(&mut self, n: usize) {
        self.seen.reserve_exact(n.saturating_sub(self.seen.len()));
    }

    /// Workload `id` is `gpu_h` trace GPU-hours of work, counted as useful
    /// if it succeeds.
    pub fn work(&mut self, id: WorkloadId, gpu_h: f64) {
        if let Some(s) = slot(&mut self.seen, id) {
            s.work = gpu_h;
        }
    }

    /// Attempt `a` stopped short, and `gpu_h` of what it ran is kept in a
    /// checkpoint: not wasted if it fails.
    pub fn saved(&mut self, a: AttemptId, gpu_h: f64) {
        *self.saved.entry(a).or_default() += gpu_h;
    }

    /// An attempt of workload `w` resumed from its checkpoint: what the
    /// failed attempts before it saved is not wasted after all.
    pub fn resumed(&mut self, w: WorkloadId) {
        for (class, gpu_h, v100_h) in self.unclaimed.remove(&w).unwrap_or_default() {
            self.wasted -= gpu_h;
            if class.is_infrastructure() {
                self.wasted_infra -= gpu_h;
                self.wasted_infra_v100 -= v100_h;
            } else {
                self.wasted_own_v100 -= v100_h;
            }
            if let Some(c) = self.wasted_by_class.get_mut(class.as_str()) {
                *c -= gpu_h;
            }
        }
    }

    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Workload(w) => {
                let Some(s) = slot(&mut self.seen, w.id) else { return };
                s.seen = true;
                if s.submitted == NONE {
                    s.submitted = w.submitted_at.0;
                }
                s.attempts = w.attempts;
                if w.state.is_final() {
                    s.finished_at = w.updated_at.0;
                    s.finished = Some(w.state);
                }
            }
            Record::Attempt(a) => {
                let Some(s) = slot(&mut self.seen, a.id.workload) else { return };
                s.seen = true;
                if let Some(t) = a.started_at {
                    s.first_start = if s.first_start == NONE { t.0 } else { s.first_start.min(t.0) };
                }
                if !a.state.is_final() {
                    return;
                }
                self.cost += a.cost_usd;
                let ran_h = match (a.started_at, a.ended_at) {
                    (Some(s), Some(e)) => e.secs_since(s).max(0.0) / 3600.0,
                    _ => 0.0,
                };
                let all_gpu_h = f64::from(a.gpus) * a.nodes.len().max(1) as f64 * ran_h;
                self.used += all_gpu_h;
                let saved = self.saved.remove(&a.id).unwrap_or(0.0);
                let Some(class) = a.class else { return };
                if class == FailureClass::Cancelled || a.state == AttemptState::Cancelled {
                    return;
                }
                *self.by_class.entry(class.as_str().to_string()).or_default() += 1;
                // Wasted until a later attempt resumes from what it saved.
                let gpu_h = all_gpu_h;
                let rel = self.speed.get(&a.pool).copied().unwrap_or(1.0);
                if saved > 0.0 {
                    let kept = saved.min(all_gpu_h);
                    self.unclaimed.entry(a.id.workload).or_default().push((class, kept, kept * rel));
                }
                self.wasted += gpu_h;
                *self.wasted_by_class.entry(class.as_str().to_string()).or_default() += gpu_h;
                if class.is_infrastructure() {
                    self.wasted_infra += gpu_h;
                    self.wasted_infra_v100 += gpu_h * rel;
                    if class != FailureClass::Capacity {
                        s.infra_failures += 1;
                    }
                } else {
                    self.wasted_own_v100 += gpu_h * rel;
                    s.own_failures += 1;
                }
            }
            Record::Event(_)
            | Record::Health(_)
            | Record::Audit(_)
            | Record::NodeIntent { .. }
            | Record::Delivery(_) => {}
        }
    }

    pub fn report(&self, policy: &str, _end: Millis) -> PolicyReport {
        let n = self.seen.iter().filter(|s| s.seen).count();
        let (mut ok, mut failed, mut never, mut infra_only, mut infra_ok, mut attempts) =
            (0, 0, 0, 0, 0, 0u64);
        let (mut queue, mut completion) = (Vec::new(), Vec::new());
        let mut first_submit: Option<Millis> = None;
        let mut useful = 0.0;
        let mut last_finish: Option<Millis> = None;
        // In id order, as the sums were always taken.
        for s in self.seen.iter().filter(|s| s.seen) {
            let (submitted, first_start) = (Seen::time(s.submitted), Seen::time(s.first_start));
            let finished = s.finished.zip(Seen::time(s.finished_at)).map(|(state, t)| (t, state));
            attempts += u64::from(s.attempts);
            if let Some(t) = submitted {
                first_submit = Some(first_submit.map_or(t, |f| f.min(t)));
            }
            if let Some((t, _)) = finished {
                last_finish = Some(last_finish.map_or(t, |l: Millis| l.max(t)));
            }
            let succeeded = matches!(finished, Some((_, WorkloadState::Succeeded)));
            if succeeded {
                useful += s.work;
            }
            match finished {
                Some((_, WorkloadState::Succeeded)) => ok += 1,
                Some(_) => failed += 1,
                None => {}
            }
            match (submitted, first_start) {
                (Some(sub), Some(start)) => queue.push(start.secs_since(sub) / 3600.0),
                _ => never += 1,
            }
            if let (true, Some(sub), Some((at, _))) = (succeeded, submitted, finished) {
                completion.push(at.secs_since(sub) / 3600.0);
            }
            if s.infra_failures > 0 && s.own_failures == 0 {
                infra_only += 1;
                infra_ok += usize::from(succeeded);
            }
        }
        let pct = |a: usize, b: usize| if b == 0 { 100.0 } else { 100.0 * a as f64 / b as f64 };
        PolicyReport {
            policy: policy.to_string(),
            workloads: n,
            succeeded: ok,
            failed,
            never_ran: never,
            completed_pct: pct(ok, n),
            infra_only,
            infra_only_completed_pct: pct(infra_ok, infra_only),
            used_gpu_h: self.used,
            wasted_gpu_h: self.wasted,
            wasted_infra_gpu_h: self.wasted_infra,
            wasted_own_v100_h: self.wasted_own_v100,
            wasted_infra_v100_h: self.wasted_infra_v100,
            cost_usd: self.cost,
            useful_gpu_h: useful,
            cost_per_useful_gpu_h: if useful > 0.0 { self.cost / useful } else { 0.0 },
            queue_p50_h: percentile(&mut queue, 0.50),
            queue_p99_h: percentile(&mut queue, 0.99),
            completion_p50_h: percentile(&mut completion, 0.50),
            completion_p99_h: percentile(&mut completion, 0.99),
            attempts_per_workload: if n == 0 { 0.0 } else { attempts as f64 / n as f64 },
            failures_by_class: self.by_class.clone(),
            wasted_by_class_gpu_h: self.wasted_by_class.clone(),
            makespan_h: match (first_submit, last_finish) {
                (Some(f), Some(l)) => l.secs_since(f) / 3600.0,
                _ => 0.0,
            },
            tenants: Vec::new(),
            fairness: None,
            usage: None,
        }
    }
}

/// Nearest-rank percentile; 0 for no values.
pub(super) fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

#[cfg(test)]
mod tests {
    #[test]
    fn nearest_rank() {
        let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(super::percentile(&mut v, 0.5), 3.0);
        assert_eq!(super::percentile(&mut v, 0.99), 5.0);
        assert_eq!(super::percentile(&mut [], 0.5), 0.0);
    }
}
