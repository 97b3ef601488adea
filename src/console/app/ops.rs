//! What the app opens and asks for on the operator's behalf: a workload's
//! detail, logs (any attempt), spec and events; the audit trail's and
//! the tenants' and the usage report's loads;
//! and the operations on the selected workload or node, including the
//! bulk acknowledgement over a filter. Every change goes through the
//! action layer ([`action::request`]): read-only, confirmation and the
//! reason are its.

use super::App;
use crate::console::action::{self, Op};
use crate::console::detail::Detail;
use crate::console::logs::Logs;
use crate::console::msg::{Effect, View};
use crate::console::poll::Load;
use crate::engine::model::WorkloadId;

impl App {
    /// Entering the audit view loads the engine's newest records the
    /// first time (and again after a failed load); from then on they
    /// arrive live, and older ones page in. A replay has no audit trail.
    pub(super) fn enter_audit(&mut self) -> Vec<Effect> {
        if self.replay.is_some() {
            self.audit.load = Load::Failed("a replay has no audit trail: the simulator records none".into());
            return Vec::new();
        }
        let filter = self.filter(View::Audit).to_string();
        self.audit.enter(&filter)
    }

    /// Entering the tenants view: the tenants now (a replay has none).
    pub(super) fn enter_tenants(&mut self) -> Vec<Effect> {
        if self.replay.is_some() {
            self.tenants.poll.load =
                Load::Failed("a replay shows no tenants: the simulator reports them itself".into());
            return Vec::new();
        }
        self.tenants.enter(self.now)
    }

    /// Entering the usage view: the report now (a replay has none: `canopy
    /// sim` prints the run's ledger itself).
    pub(super) fn enter_usage(&mut self) -> Vec<Effect> {
        if self.replay.is_some() {
            self.usage.poll.load =
                Load::Failed("a replay has no usage report: canopy sim prints the run's ledger".into());
            return Vec::new();
        }
        self.usage.enter(self.now)
    }

    /// A tick: a shown tenants or usage view keeps its numbers fresh (not
    /// in a replay).
    pub(super) fn shown_view_due(&mut self, now: crate::engine::model::Millis) -> Vec<Effect> {
        match self.view {
            _ if self.replay.is_some() => Vec::new(),
            View::Tenants => self.tenants.due(now),
            View::Usage => self.usage.due(now),
            _ => Vec::new(),
        }
    }

    /// Loads the tenants again (their tables changed, or the link came
    /// back); not in a replay.
    pub(super) fn reload_tenants(&mut self) -> Vec<Effect> {
        if self.replay.is_some() {
            return Vec::new();
        }
        self.tenants.reload(self.now)
    }

    /// Loads the audit trail again if the audit view loaded it (or tried):
    /// after a reconnection, or when this console fell behind the
    /// engine's updates and may have missed records.
    pub fn reload_audit(&mut self) -> Vec<Effect> {
        if self.replay.is_some() {
            return Vec::new();
        }
        let filter = self.filter(View::Audit).to_string();
        self.audit.reload(&filter)
    }

    /// Opens a workload's detail; one the console does not hold is
    /// fetched from the engine.
    pub(super) fn describe(&mut self, id: WorkloadId) -> Vec<Effect> {
        let fx = self.detail.open(id, &self.model);
        self.go(View::Detail);
        fx
    }

    /// Opens the logs of a workload's attempt `n` (`None`: its last).
    pub(super) fn open_logs(&mut self, id: Option<WorkloadId>, n: Option<u32>) -> Vec<Effect> {
        if let Some(id) = id.filter(|id| !self.model.workloads.contains_key(id)) {
            // Older than what the console holds: its logs open once the
            // engine sends it (its detail says why, if it cannot).
            self.logs_wanted = Some((id, n));
            return self.describe(id);
        }
        let Some(w) = id.and_then(|id| self.model.workloads.get(&id)) else {
            self.flash_error("no workload selected".into());
            return Vec::new();
        };
        let attempt = match n {
            None => w.last_attempt(),
            Some(n) => w.attempts.iter().find(|a| a.id.n == n),
        };
        let Some(a) = attempt else {
            let id = w.rec.id;
            let msg = match (n, w.attempts.len()) {
                (_, 0) => format!("{id} has not run yet: no logs"),
                (Some(n), 1) => format!("{id} has no attempt {n}: it has one ({id}.1)"),
                (Some(n), k) => format!("{id} has no attempt {n}: it has {k} ({id}.1 to {id}.{k})"),
                (None, _) => format!("{id} has not run yet: no logs"),
            };
            self.flash_error(msg);
            return Vec::new();
        };
        let logs = Logs::of(a, self.replay.is_some());
        let attempt = a.id;
        if self.detail.id != Some(attempt.workload) {
            self.detail = Detail { id: Some(attempt.workload), ..Detail::default() };
        }
        self.logs = Some(logs);
        self.go(View::Logs);
        if self.replay.is_some() {
            return Vec::new();
        }
        vec![Effect::TailLogs(Some(attempt))]
    }

    /// Opens a workload's spec as submitted; one the console does not
    /// hold is fetched as `:describe` does.
    pub(super) fn open_spec(&mut self, id: Option<WorkloadId>) -> Vec<Effect> {
        let Some(id) = id else {
            self.flash_error("no workload selected".into());
            return Vec::new();
        };
        let fx = if self.model.workloads.contains_key(&id) {
            Vec::new()
        } else {
            self.detail.open(id, &self.model)
        };
        self.spec.open(id);
        self.go(View::Spec);
        fx
    }

    /// Opens the events view: one workload's (fetched from the engine) or
    /// all recent ones, unfiltered.
    pub(super) fn open_events(&mut self, scope: Option<WorkloadId>) -> Vec<Effect> {
        self.filter_text.remove(&View::Events);
        let fx = self.events.open(scope);
        self.go(View::Events);
        fx
    }

    pub(super) fn op_on_workload(&mut self, f: fn(WorkloadId) -> Op) -> Vec<Effect> {
        match self.current_workload() {
            Some(id) => action::request(self, f(id)),
            None => {
                self.flash_error("no workload selected".into());
                Vec::new()
            }
        }
    }

    pub(super) fn op_on_node(&mut self, f: fn(String) -> Op) -> Vec<Effect> {
        match self.current_node() {
            Some(n) => action::request(self, f(n)),
            None => {
                self.flash_error("no node selected".into());
                Vec::new()
            }
        }
    }

    /// Acknowledges every unresolved failure the current list shows (its
    /// filter, faults only), after one question that says how many.
    pub(super) fn acknowledge_all(&mut self) -> Vec<Effect> {
        let shown = match self.view {
            View::Triage => &self.derived.faults,
            View::Workloads => &self.derived.workloads,
            _ => {
                self.flash_error("ack-all works on the list in workloads (4) or triage (5)".into());
                return Vec::new();
            }
        };
        let ids: Vec<WorkloadId> = shown
            .iter()
            .filter(|id| {
                self.model.workloads.get(id).is_some_and(|w| {
                    w.rec.state == crate::engine::model::WorkloadState::Failed && w.is_fault()
                })
            })
            .copied()
            .collect();
        let filter = self.filter(self.view);
        let matching = if filter.is_empty() {
            format!("the {} view (no filter)", self.view.title())
        } else {
            format!("/{filter}")
        };
        if ids.is_empty() {
            self.flash_error(format!("no unresolved failures match {matching}"));
            return Vec::new();
        }
        action::request(self, Op::AcknowledgeAll { ids, matching })
    }
}
