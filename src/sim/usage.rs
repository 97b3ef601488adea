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
use rustc_hash::FxHashMap;
use std::fmt::Write;

/// The newest record of every workload and attempt of one run, in the
/// order they first appeared (the report's figures do not depend on the
/// rows' order, so the ledger reads them in place, without a copy).
#[derive(Debug, Default)]
pub struct LedgerTally {
    work: Vec<Work>,
    work_at: FxHashMap<WorkloadId, usize>,
    attempts: Vec<AttemptRecord>,
    attempt_at: FxHashMap<AttemptId, usize>,
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

/// The usage ledger's report of a run, summed as the run goes ([`LedgerTally`]
/// keeps every workload and attempt to report any window; a run reports
/// only the whole of it, by tenant): a workload's rows are added to the
/// report's sums when it ends, and its records dropped, so what is kept
/// grows with the work in flight, not with the run. The report is the one
/// [`LedgerTally::report`] gives for the same records (`tests/sim_ledger.rs`).
#[derive(Debug)]
pub struct RunLedger {
    /// Workloads not summed yet: those in flight, and the few that ended
    /// with a row that a later end of the run could still change.
    open: FxHashMap<WorkloadId, Open>,
    ctx: Context,
    sums: report::Tally,
    default_tenant: Option<String>,
    /// Workloads summed and dropped.
    summed: usize,
    /// Records about a workload after it was summed (none are written so;
    /// counted, so a test can tell).
    late: usize,
    /// Workloads that reached a final state in the batch being read.
    ending: Vec<WorkloadId>,
}

#[derive(Debug, Default)]
struct Open {
    work: Option<Work>,
    attempts: Vec<AttemptRecord>,
    ended: bool,
}

impl RunLedger {
    pub fn new(fleet: &Fleet, tenancy: Option<&Tenancy>) -> RunLedger {
        let none = Tenancy::default();
        RunLedger {
            open: FxHashMap::default(),
            ctx: Context::new(fleet, tenancy.unwrap_or(&none), &[]),
            sums: report::Tally::new(By::Tenant),
            default_tenant: tenancy.and_then(|t| t.default_tenant.clone()),
            summed: 0,
            late: 0,
            ending: Vec::new(),
        }
    }

    /// Takes in one record of a batch; [`RunLedger::settle`] after the
    /// batch sums the workloads it ended.
    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Workload(w) => {
                let o = self.open.entry(w.id).or_default();
                o.work = Some(Work::of(w, self.default_tenant.as_deref()));
                if w.state.is_final() && !o.ended {
                    o.ended = true;
                    self.ending.push(w.id);
                }
            }
            Record::Attempt(a) => {
                let Some(o) = self.open.get_mut(&a.id.workload) else {
                    self.late += 1;
                    return;
                };
                match o.attempts.iter_mut().find(|t| t.id == a.id) {
                    Some(t) => slim_from(t, a),
                    None => {
                        let mut t = slim(a);
                        slim_from(&mut t, a);
                        o.attempts.push(t);
                    }
                }
            }
            Record::Event(_)
            | Record::Health(_)
            | Record::Audit(_)
            | Record::NodeIntent { .. }
            | Record::Delivery(_) => {}
        }
    }

    /// The batch written at `now` is read: the workloads it ended are
    /// summed and dropped.
    pub fn settle(&mut self, now: Millis, fleet: &Fleet, tenancy: Option<&Tenancy>) {
        for id in std::mem::take(&mut self.ending) {
            self.sum(id, now, fleet, tenancy);
        }
    }

    /// Sums workload `id`'s rows when none of them can change with the
    /// end of the run ([`report::Tally::settled_by`] at `now`).
    fn sum(&mut self, id: WorkloadId, now: Millis, fleet: &Fleet, tenancy: Option<&Tenancy>) {
        let Some(o) = self.open.get(&id) else { return };
        let Some(work) = &o.work else { return };
        let none = Tenancy::default();
        self.ctx.learn(fleet, tenancy.unwrap_or(&none), &o.attempts);
        let rows = ledger::rows(&self.ctx, std::slice::from_ref(work), &o.attempts, now);
        if !rows.iter().all(|r| report::Tally::settled_by(r, now)) {
            return;
        }
        for r in &rows {
            self.sums.add(r, Millis(i64::MIN), now);
        }
        self.open.remove(&id);
        self.summed += 1;
    }

    /// Workloads summed and dropped so far.
    pub fn summed(&self) -> usize {
        self.summed
    }

    /// Workloads whose records are still kept.
    pub fn kept(&self) -> usize {
        self.open.len()
    }

    /// Attempt records that came after their workload was summed.
    pub fn late(&self) -> usize {
        self.late
    }

    /// The usage report of the whole run, ended at `end`, by tenant: what
    /// [`LedgerTally::report`] gives.
    pub fn report(&self, fleet: &Fleet, tenancy: Option<&Tenancy>, end: Millis) -> Report {
        let none = Tenancy::default();
        let mut ctx = self.ctx.clone();
        let mut sums = self.sums.clone();
        let mut ids: Vec<&WorkloadId> = self.open.keys().collect();
        ids.sort();
        for id in ids {
            let o = &self.open[id];
            let Some(work) = &o.work else { continue };
            ctx.learn(fleet, tenancy.unwrap_or(&none), &o.attempts);
            for r in &ledger::rows(&ctx, std::slice::from_ref(work), &o.attempts, end) {
                sums.add(r, Millis(i64::MIN), end);
            }
        }
        sums.report(&ctx, None, end)
    }
}

/// An empty copy of what the ledger reads of `a` ([`slim_from`] fills it).
fn slim(a: &AttemptRecord) -> AttemptRecord {
    AttemptRecord {
        id: a.id,
        provider: String::new(),
        pool: String::new(),
        node: String::new(),
        region: String::new(),
        state: a.state,
        price_per_hour: 0.0,
        est_cost_usd: 0.0,
        gpus: 0,
        gpu_memory_gb: 0.0,
        score: 0.0,
        score_breakdown: String::new(),
        placed_at: a.placed_at,
        started_at: None,
        ended_at: None,
        exit_code: None,
        class: None,
        rule: None,
        evidence: None,
        cost_usd: 0.0,
        provider_ref: None,
        nonce: String::new(),
        stop: None,
        nodes: Vec::new(),
        checkpoint: None,
    }
}

/// Copies into `t` what the ledger's rows read of `a` (`ledger::row`,
/// `Context::learn`), and nothing else: no score breakdown, evidence,
/// nonce or provider handle.
fn slim_from(t: &mut AttemptRecord, a: &AttemptRecord) {
    t.id = a.id;
    t.provider.clone_from(&a.provider);
    t.pool.clone_from(&a.pool);
    t.node.clone_from(&a.node);
    t.state = a.state;
    t.price_per_hour = a.price_per_hour;
    t.gpus = a.gpus;
    t.placed_at = a.placed_at;
    t.started_at = a.started_at;
    t.ended_at = a.ended_at;
    t.class = a.class;
    t.rule.clone_from(&a.rule);
    t.stop.clone_from(&a.stop);
    t.nodes.clone_from(&a.nodes);
    t.checkpoint = a.checkpoint.as_ref().and_then(|c| {
        c.resumed
            .as_ref()
            .map(|r| crate::engine::model::CheckpointNote { resumed: Some(r.clone()), saved: None })
    });
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
