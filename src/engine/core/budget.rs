//! Budgets in the core: what each budget's tenant or token has spent in
//! its current period, what its running work is expected to spend still,
//! and the work it holds. The arithmetic and periods are
//! `crate::tenant::budget`'s; spend is counted as the usage ledger counts
//! it (`usage::ledger::spend`), so a budget and `canopy usage` agree.
//!
//! - Admission: a placement whose estimate (the chosen pool's price over
//!   the spec's `expected_runtime`, else `max_runtime`; nothing when it
//!   has neither) would take more than is left after what was spent and
//!   what running work is expected to spend still is not started: the
//!   workload waits, told the budget and the numbers. It is not in the
//!   placement queue meanwhile (capacity changes do not wake it); it goes
//!   back when the period rolls over, when work the budget counts ends, or
//!   when the budgets change.
//! - At 80 % and 100 % of a period's limit an event is raised, once per
//!   period (a restart does not raise it again).
//! - A `hard` budget that is spent stops the running work it counts, with
//!   its grace, class `cost-cap` (rule `canopy.budget`); otherwise running
//!   work is never stopped by a budget.
//! - Ended attempts' spend is kept for the longest period (a closed-attempt
//!   history), so budgets set later, or after a restart (from the journal,
//!   [`Core::restore_budgets`]), count what was already spent. Unless
//!   the core was told no budget will be set later
//!   (`CoreConfig::budget_history` off) and none is set: then nothing
//!   could read them, and none is kept.

use super::{Core, Entry};
use crate::engine::model::{AttemptRecord, EventKind, Millis, WorkloadId, WorkloadState};
use crate::failure::ProviderEnd;
use crate::schedule::Candidate;
use crate::tenant::budget::{Budget, Spend, Standing};
use crate::usage::ledger::spend;
use std::collections::{BTreeMap, VecDeque};

/// How far back ended attempts are kept: the longest period (a month of
/// 31 days) and a day's margin for time-zone changes.
pub const HORIZON_MS: i64 = 32 * 24 * 3600 * 1000;

/// An ended attempt, as budgets need it.
#[derive(Debug, Clone)]
pub struct Closed {
    pub tenant: Option<String>,
    pub user: Option<String>,
    pub attempt: AttemptRecord,
}

impl Closed {
    /// Only what its spend is counted from (times, state, class and rule,
    /// GPUs per node and how many nodes, price): a month of ended
    /// attempts stays small.
    fn trimmed(self) -> Closed {
        let a = self.attempt;
        let attempt = AttemptRecord {
            id: a.id,
            provider: String::new(),
            pool: String::new(),
            node: String::new(),
            region: String::new(),
            state: a.state,
            price_per_hour: a.price_per_hour,
            est_cost_usd: 0.0,
            gpus: a.gpus,
            gpu_memory_gb: 0.0,
            score: 0.0,
            score_breakdown: String::new(),
            placed_at: a.placed_at,
            started_at: a.started_at,
            ended_at: a.ended_at,
            exit_code: None,
            class: a.class,
            rule: a.rule,
            evidence: None,
            cost_usd: 0.0,
            provider_ref: None,
            nonce: String::new(),
            stop: None,
            nodes: vec![String::new(); a.nodes.len()],
            checkpoint: None,
        };
        Closed { attempt, ..self }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct State {
    start: Millis,
    end: Millis,
    /// Ended attempts' spend within `[start, end)`.
    closed: Spend,
    /// The highest alert raised in this period: 0, 80 or 100 (percent).
    alerted: u8,
}

/// The core's books on budgets.
#[derive(Debug, Clone, Default)]
pub(super) struct BudgetBook {
    /// Ended attempts within [`HORIZON_MS`], oldest end first.
    history: VecDeque<Closed>,
    /// Per budget (index into `Tenancy::budgets`).
    state: Vec<State>,
    /// Workloads a budget holds, and which.
    held: BTreeMap<WorkloadId, usize>,
}

fn level(fraction: f64) -> u8 {
    if fraction >= 1.0 {
        100
    } else if fraction >= 0.8 {
        80
    } else {
        0
    }
}

impl Core {
    fn budgets(&self) -> &[Budget] {
        &self.tenancy.budgets
    }

    /// Whether budget `b` counts workload entry `e`.
    fn counts(&self, b: &Budget, e: &Entry) -> bool {
        let tenant = e.rec.tenant.as_deref().or(self.tenancy.default_tenant.as_deref());
        b.applies(tenant, e.rec.submitted_by.as_deref())
    }

    /// Live entries budget `bi` counts.
    fn counted_live(&self, bi: usize) -> impl Iterator<Item = &Entry> + '_ {
        let b = &self.tenancy.budgets[bi];
        self.live_ids.ids().iter().filter_map(|id| self.entries.get(id)).filter(move |e| self.counts(b, e))
    }

    /// Spent in budget `bi`'s period up to `now`: ended attempts, and the
    /// live ones so far.
    fn budget_spent(&self, bi: usize, now: Millis) -> Spend {
        let st = self.budget_book.state[bi];
        let mut s = st.closed;
        for e in self.counted_live(bi) {
            if let Some(l) = &e.live {
                s.add(spend(&e.attempts[l.idx], st.start, st.end, now));
            }
        }
        s
    }

    /// What live work budget `bi` counts is expected to spend still.
    fn budget_committed(&self, bi: usize, now: Millis) -> Spend {
        let mut s = Spend::default();
        for e in self.counted_live(bi) {
            let Some(l) = &e.live else { continue };
            let a = &e.attempts[l.idx];
            let so_far = spend(a, a.placed_at, Millis(i64::MAX), now);
            let total = estimate(e, a.price_per_hour, a.nodes.len().max(1), a.gpus);
            s.add(Spend {
                micro_usd: total.micro_usd.saturating_sub(so_far.micro_usd),
                gpu_ms: total.gpu_ms.saturating_sub(so_far.gpu_ms),
            });
        }
        s
    }

    /// Whether workload `id` may start on `c` as far as budgets go. When it
    /// may not, it waits, told which budget and the numbers.
    pub(super) fn budget_admits(&mut self, id: WorkloadId, c: &Candidate, now: Millis) -> bool {
        if self.budgets().is_empty() {
            return true;
        }
        self.roll_periods(now);
        let Some(e) = self.entries.get(&id) else { return true };
        let est = estimate(e, c.hourly_usd, c.node_names().len().max(1), e.rec.spec.resources.gpus);
        let refused = (0..self.budgets().len()).find_map(|bi| {
            let b = &self.tenancy.budgets[bi];
            if !self.counts(b, e) {
                return None;
            }
            let why = b.refuses(self.budget_spent(bi, now), self.budget_committed(bi, now), est)?;
            Some((bi, why))
        });
        let Some((bi, why)) = refused else { return true };
        let renews = self.tenancy.budgets[bi].local_time(self.budget_book.state[bi].end);
        let reason = format!("held by {why}; the period renews {renews}");
        let changed = self.entries.get_mut(&id).is_some_and(|e| {
            e.rec.state = WorkloadState::Queued;
            let changed = e.rec.reason.as_deref() != Some(reason.as_str());
            e.rec.reason = Some(reason.clone());
            changed
        });
        self.budget_book.held.insert(id, bi);
        if changed {
            self.save_workload(id, now);
            self.event(now, id, None, EventKind::Budget, reason);
        }
        false
    }

    /// Puts work budget `bi` holds (every budget's when `None`) back in the
    /// placement queue.
    fn release_budget_holds(&mut self, bi: Option<usize>) {
        let ids: Vec<WorkloadId> = self
            .budget_book
            .held
            .iter()
            .filter(|(_, b)| bi.is_none_or(|x| x == **b))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.budget_book.held.remove(&id);
            if self.entries.get(&id).is_some_and(|e| e.live.is_none() && !e.cancel_requested) {
                self.queue.push_ready(self.queue_priority(id), id);
            }
        }
    }

    /// A workload that ended while held (cancelled) is held no more.
    pub(super) fn budget_forget(&mut self, id: WorkloadId) {
        self.budget_book.held.remove(&id);
    }

    /// Starts each budget's books over for its current period from the
    /// closed-attempt history, with the alerts its spend already passed
    /// counted as raised; releases what budgets held. After the budgets
    /// change, and at start.
    pub(super) fn budgets_reset(&mut self, now: Millis) {
        let n = self.budgets().len();
        self.budget_book.state = vec![State::default(); n];
        for bi in 0..n {
            self.start_period(bi, now);
            let f = self.budgets()[bi].fraction(self.budget_spent(bi, now));
            self.budget_book.state[bi].alerted = level(f);
        }
        self.release_budget_holds(None);
    }

    /// Budget `bi`'s books for the period `now` is in.
    fn start_period(&mut self, bi: usize, now: Millis) {
        let b = &self.tenancy.budgets[bi];
        let (start, end) = b.period_at(now);
        let mut closed = Spend::default();
        for c in &self.budget_book.history {
            if b.applies(c.tenant.as_deref(), c.user.as_deref()) {
                closed.add(spend(&c.attempt, start, end, now));
            }
        }
        self.budget_book.state[bi] = State { start, end, closed, alerted: 0 };
    }

    /// Rolls every budget whose period ended into its next one, releasing
    /// what it held.
    fn roll_periods(&mut self, now: Millis) {
        for bi in 0..self.budget_book.state.len() {
            if now >= self.budget_book.state[bi].end {
                self.start_period(bi, now);
                self.release_budget_holds(Some(bi));
            }
        }
    }

    /// Ended attempts from the journal (those that ended within
    /// [`HORIZON_MS`] of `now`, oldest end first), then every budget's
    /// books: what a restart reconstructs budgets' consumption from.
    pub fn restore_budgets(&mut self, closed: Vec<Closed>, now: Millis) {
        self.budget_book.history = closed.into_iter().map(Closed::trimmed).collect();
        self.budgets_reset(now);
    }

    /// The attempt `idx` of `id` ended: it joins the history, counts in
    /// its budgets' periods, and what those budgets held may go (what it
    /// was expected to spend is no longer committed).
    pub(super) fn budget_closed(&mut self, id: WorkloadId, idx: usize, now: Millis) {
        if !self.config.budget_history && self.budgets().is_empty() {
            return;
        }
        let Some(e) = self.entries.get(&id) else { return };
        let c = Closed {
            tenant: e.rec.tenant.clone().or_else(|| self.tenancy.default_tenant.clone()),
            user: e.rec.submitted_by.clone(),
            attempt: e.attempts[idx].clone(),
        }
        .trimmed();
        self.roll_periods(now);
        let mut touched = Vec::new();
        for (bi, b) in self.tenancy.budgets.iter().enumerate() {
            if b.applies(c.tenant.as_deref(), c.user.as_deref()) {
                let st = &mut self.budget_book.state[bi];
                st.closed.add(spend(&c.attempt, st.start, st.end, now));
                touched.push(bi);
            }
        }
        self.budget_book.history.push_back(c);
        while self.budget_book.history.front().is_some_and(|c| {
            c.attempt.ended_at.unwrap_or(c.attempt.placed_at).0 < now.0.saturating_sub(HORIZON_MS)
        }) {
            self.budget_book.history.pop_front();
        }
        for bi in touched {
            let spent = self.budget_spent(bi, now);
            self.budget_alert(bi, Some(id), spent, now);
            self.release_budget_holds(Some(bi));
        }
    }

    /// On a tick: periods roll, alerts are raised as spend passes 80 % and
    /// 100 %, and spent hard budgets stop the work they count.
    pub(super) fn budget_tick(&mut self, now: Millis) {
        if self.budgets().is_empty() {
            return;
        }
        self.roll_periods(now);
        for bi in 0..self.budgets().len() {
            let spent = self.budget_spent(bi, now);
            self.budget_alert(bi, None, spent, now);
            let b = &self.tenancy.budgets[bi];
            if !b.hard || !b.spent_out(spent) {
                continue;
            }
            let (name, text) = (b.name.clone(), b.spent_text(spent));
            let stop: Vec<WorkloadId> = self
                .counted_live(bi)
                .filter(|e| e.live.as_ref().is_some_and(|l| l.terminating.is_none()))
                .map(|e| e.rec.id)
                .collect();
            for id in stop {
                let message = format!("{text} spent this {}", self.tenancy.budgets[bi].period.as_str());
                self.terminate_live(id, ProviderEnd::BudgetSpent { budget: name.clone(), message }, now);
            }
        }
    }

    /// Raises budget `bi`'s 80 % or 100 % event when its spend (`spent`
    /// at `now`) passed it this period, on `on` (else on a workload it
    /// counts that is live).
    fn budget_alert(&mut self, bi: usize, on: Option<WorkloadId>, spent: Spend, now: Millis) {
        let st = self.budget_book.state[bi];
        let lv = level(self.tenancy.budgets[bi].fraction(spent));
        if lv <= st.alerted {
            return;
        }
        let Some(id) = on.or_else(|| self.counted_live(bi).next().map(|e| e.rec.id)) else { return };
        self.budget_book.state[bi].alerted = lv;
        let b = &self.tenancy.budgets[bi];
        let then = if lv == 100 {
            if b.hard {
                "running work it counts is stopped"
            } else {
                "new work it counts waits until the period renews"
            }
        } else {
            "work still starts"
        };
        let msg = format!(
            "budget {} ({}, per {}) passed {lv}%: {} spent; {then}",
            b.name,
            b.scope,
            b.period.as_str(),
            b.spent_text(spent)
        );
        self.event(now, id, None, EventKind::Budget, msg);
    }

    /// When budgets next need a tick: a period's end, or when running work
    /// is expected to pass an alert (or a hard budget's limit).
    pub(super) fn budget_next_wake(&self) -> Option<Millis> {
        let now = self.last_now;
        let mut next: Option<Millis> = None;
        let mut consider = |t: Millis| next = Some(next.map_or(t, |n: Millis| n.min(t)));
        for (bi, b) in self.budgets().iter().enumerate() {
            let st = self.budget_book.state[bi];
            consider(st.end);
            // Spend grows at what running work costs and holds, per ms.
            let (mut usd_rate, mut gpu_rate) = (0.0, 0.0);
            for e in self.counted_live(bi) {
                let Some(l) = &e.live else { continue };
                let a = &e.attempts[l.idx];
                gpu_rate += f64::from(a.gpus) * a.nodes.len().max(1) as f64;
                if a.started_at.is_some() {
                    usd_rate += a.price_per_hour.max(0.0) / 3.6;
                }
            }
            let spent = self.budget_spent(bi, now);
            let goal = if st.alerted >= 80 { 1.0 } else { 0.8 };
            if st.alerted >= 100 && !b.hard {
                continue;
            }
            let mut when = |limit: Option<u64>, have: u64, rate: f64| {
                let Some(l) = limit else { return };
                let target = (l as f64 * goal).ceil();
                if rate > 0.0 && (have as f64) < target {
                    // A second late, so the tick finds it passed.
                    consider(Millis(now.0 + ((target - have as f64) / rate).ceil() as i64 + 1000));
                }
            };
            when(b.micro_usd, spent.micro_usd, usd_rate);
            when(b.gpu_ms, spent.gpu_ms, gpu_rate);
        }
        next
    }

    /// Where budget `bi` stands at `now`.
    fn budget_standing(&self, bi: usize, now: Millis) -> Standing {
        let b = &self.tenancy.budgets[bi];
        let st = self.budget_book.state[bi];
        Standing {
            name: b.name.clone(),
            scope: b.scope.to_string(),
            period: b.period,
            time_zone: b.time_zone.clone(),
            start: st.start,
            end: st.end,
            limit_micro_usd: b.micro_usd,
            limit_gpu_ms: b.gpu_ms,
            spent: self.budget_spent(bi, now),
            committed: self.budget_committed(bi, now),
            holding: self.budget_book.held.values().filter(|x| **x == bi).count() as u64,
            hard: b.hard,
        }
    }

    /// How many ended attempts are kept for budgets (the closed-attempt
    /// history): what a budget set now would count.
    pub fn budget_history_len(&self) -> usize {
        self.budget_book.history.len()
    }

    /// Where every budget stands, in the tenancy's order.
    pub fn budget_standings(&self, now: Millis) -> Vec<Standing> {
        (0..self.budget_book.state.len().min(self.budgets().len()))
            .map(|bi| self.budget_standing(bi, now))
            .collect()
    }
}

/// What an attempt of `e` is estimated to spend at `hourly` (the whole
/// attempt's price) on `nodes` nodes of `gpus` each: over the spec's
/// expected runtime, else its maximum; nothing when it gives neither.
fn estimate(e: &Entry, hourly: f64, nodes: usize, gpus: u32) -> Spend {
    let runtime =
        e.rec.spec.expected_runtime.map(|d| d.0).or(e.rec.spec.constraints.max_runtime.map(|d| d.0));
    crate::tenant::budget::estimate(runtime, hourly, nodes, gpus)
}
