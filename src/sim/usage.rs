//! The usage ledger of a simulated run: the same rows, columns and report
//! (`crate::usage::ledger`, `crate::usage::report`) that `canopy usage`
//! and `GET /v1/usage` build from a journal, built here from the records
//! the engine core wrote during the run. So `canopy sim` and production
//! account alike: a GPU-hour lands in the same column in both.
//!
//! Holds the newest record of each workload and attempt (what a journal
//! would hold after the run); pure, no I/O.

use crate::engine::model::{AttemptId, AttemptRecord, Millis, Record, WorkloadId};
use crate::fleet::Fleet;
use crate::tenant::Tenancy;
use crate::usage::report::{self, By, Line, Report, hours};
use crate::usage::{Context, Work, ledger};
use std::collections::HashMap;
use std::fmt::Write;

/// The newest record of every workload and attempt of one run, in the
/// order they first appeared (the report's figures do not depend on the
/// rows' order, so the ledger reads them in place, without a copy).
#[derive(Debug, Default)]
pub struct LedgerTally {
    work: Vec<Work>,
    work_at: HashMap<WorkloadId, usize>,
    attempts: Vec<AttemptRecord>,
    attempt_at: HashMap<AttemptId, usize>,
    /// Stands for a workload without a tenant (the tenancy's default).
    default_tenant: Option<String>,
    /// As a sink: the time of the last batch it saw.
    pub last_at: Option<Millis>,
}

impl LedgerTally {
    pub fn new(tenancy: Option<&Tenancy>) -> LedgerTally {
        LedgerTally {
            default_tenant: tenancy.and_then(|t| t.default_tenant.clone()),
            ..LedgerTally::default()
        }
    }

    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Workload(w) => {
                let row = Work::of(w, self.default_tenant.as_deref());
                match self.work_at.get(&w.id) {
                    Some(&i) => self.work[i] = row,
                    None => {
                        self.work_at.insert(w.id, self.work.len());
                        self.work.push(row);
                    }
                }
            }
            Record::Attempt(a) => match self.attempt_at.get(&a.id) {
                // In place: its strings' buffers are reused.
                Some(&i) => self.attempts[i].clone_from(a),
                None => {
                    self.attempt_at.insert(a.id, self.attempts.len());
                    self.attempts.push((**a).clone());
                }
            },
            Record::Event(_)
            | Record::Health(_)
            | Record::Audit(_)
            | Record::NodeIntent { .. }
            | Record::Delivery(_) => {}
        }
    }

    /// The usage report of the whole run up to `end`, grouped by `by`,
    /// exactly as `GET /v1/usage` would build it from the run's journal
    /// (an admin's view: every workload, every owner).
    pub fn report(&self, fleet: &Fleet, tenancy: Option<&Tenancy>, by: By, end: Millis) -> Report {
        self.window(fleet, tenancy, by, (None, end), end)
    }

    /// The report within `[since, until)` of a run that ended at `end`
    /// (work still running then counts as live up to it), as
    /// `GET /v1/usage?since=…&until=…` would build it.
    pub fn window(
        &self,
        fleet: &Fleet,
        tenancy: Option<&Tenancy>,
        by: By,
        (since, until): (Option<Millis>, Millis),
        end: Millis,
    ) -> Report {
        let none = Tenancy::default();
        let ctx = Context::new(fleet, tenancy.unwrap_or(&none), &self.attempts);
        let rows = ledger::rows(&ctx, &self.work, &self.attempts, end);
        report::report(&rows, &ctx, by, since, until)
    }
}

/// The ledger as a run's sink: `canopy sim`'s examples collect a run's
/// records with it to report any window and grouping.
impl super::RecordSink for LedgerTally {
    fn batch(&mut self, at: Millis, records: &[Record]) {
        self.last_at = Some(at);
        for r in records {
            self.observe(r);
        }
    }
}

/// GPU-ms as GPU-hours, for sums.
pub fn gpu_h(ms: u64) -> f64 {
    ms as f64 / 3_600_000.0
}

/// The ledger's totals per policy, in `canopy usage`'s words and columns:
/// GPU-hours held, useful, lost to the infrastructure, lost to the
/// workload's own errors, stopped by decisions, idle (launch to running),
/// live at the end, and cost.
pub fn totals_table(rows: &[(&str, &Report)]) -> String {
    let lines: Vec<(&str, &Line)> = rows.iter().map(|(p, r)| (*p, &r.total)).collect();
    lines_table("policy", &lines)
}

/// One line per group of `r` and its total, in [`totals_table`]'s columns.
pub fn groups_table(r: &Report) -> String {
    let mut lines: Vec<(&str, &Line)> = r.groups.iter().map(|g| (g.key.as_str(), g)).collect();
    lines.push(("total", &r.total));
    lines_table(r.by.as_str(), &lines)
}

/// Named lines in [`totals_table`]'s columns, `first` naming the first.
pub fn lines_table(first: &str, lines: &[(&str, &Line)]) -> String {
    let mut s = format!(
        "| {first} | attempts | GPU-h | useful | lost: infra | lost: own | decision | idle | live | cost |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (key, l) in lines {
        let _ = writeln!(
            s,
            "| {key} | {} | {} | {} | {} | {} | {} | {} | {} | ${:.2} |",
            l.attempts,
            hours(l.gpu_ms),
            hours(l.useful_gpu_ms),
            hours(l.wasted_infra_gpu_ms),
            hours(l.wasted_own_gpu_ms),
            hours(l.decision_gpu_ms),
            hours(l.idle_gpu_ms),
            hours(l.live_gpu_ms),
            l.cost_micro_usd as f64 / 1e6,
        );
    }
    s
}

/// Adds `b`'s figures to `a`'s (summing runs: seeds, policies).
pub fn add(a: &mut Line, b: &Line) {
    a.attempts += b.attempts;
    a.gpu_ms += b.gpu_ms;
    a.useful_gpu_ms += b.useful_gpu_ms;
    a.wasted_infra_gpu_ms += b.wasted_infra_gpu_ms;
    a.wasted_own_gpu_ms += b.wasted_own_gpu_ms;
    a.decision_gpu_ms += b.decision_gpu_ms;
    a.idle_gpu_ms += b.idle_gpu_ms;
    a.live_gpu_ms += b.live_gpu_ms;
    for (c, ms) in &b.lost_by_class_gpu_ms {
        *a.lost_by_class_gpu_ms.entry(c.clone()).or_default() += ms;
    }
    a.cpu_core_ms += b.cpu_core_ms;
    a.cost_micro_usd += b.cost_micro_usd;
}
