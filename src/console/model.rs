//! The console's read model: what the engine has told the console, kept in
//! shapes the views can draw without searching.
//!
//! Owns workload rows (with their attempts), recent events, the last fleet
//! status and short histories (free GPUs per pool, health per node). It is
//! built only from engine updates ([`Record`] batches, [`FleetStatus`],
//! [`Recent`]) or, in tests, from the same plain data. It must not do I/O,
//! read a clock or talk to the engine.

use crate::engine::handle::StateCounts;
use crate::engine::model::{
    AttemptRecord, AuditRecord, EventRecord, Millis, RETRY_OF, Record, WorkloadId, WorkloadRecord,
    WorkloadState,
};
use crate::engine::shell::{FleetStatus, Recent};
use crate::failure::FailureClass;
use crate::fleet::Fleet;
use crate::health::HealthView;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// Samples kept per history (one per fleet status, about a second apart).
pub const HISTORY: usize = 60;
/// Events kept for the overview and triage.
const EVENTS: usize = 5_000;
/// Failure classes remembered per node.
const NODE_CLASSES: usize = 5;

/// One workload and its attempts.
///
/// Attempts are kept at their length: a row's one attempt is not given
/// room for four (at 10,000 rows, that room was 14 of the 46 MB held).
#[derive(Debug, Clone)]
pub struct WorkloadRow {
    pub rec: WorkloadRecord,
    pub attempts: Vec<AttemptRecord>,
    /// The operator's retry of it (`canopy retry`), when one is known.
    pub retried_as: Option<WorkloadId>,
}

impl WorkloadRow {
    pub fn last_attempt(&self) -> Option<&AttemptRecord> {
        self.attempts.last()
    }
    /// Needs attention: failed and not resolved (acknowledged or
    /// retried), or waiting to retry after a failed attempt.
    pub fn is_fault(&self) -> bool {
        match self.rec.state {
            WorkloadState::Failed => self.rec.acknowledged.is_none() && self.retried_as.is_none(),
            s if s.is_final() => false,
            // A live workload is a fault once an attempt failed.
            _ => self.attempts.iter().any(failed),
        }
    }
    /// Failed and waiting to run again: queued after its newest ended
    /// attempt failed. Routine re-placements are not failures: a launch
    /// the provider refused for want of room (`capacity`), an operator's
    /// eviction (a drain) and a cancel.
    pub fn waiting_to_retry(&self) -> bool {
        if self.rec.state != WorkloadState::Queued {
            return false;
        }
        self.attempts.iter().rev().find(|a| a.state.is_final()).is_some_and(failed)
    }
    /// The class of the newest failed attempt, or of the workload.
    pub fn fault_class(&self) -> Option<FailureClass> {
        self.attempts.iter().rev().find_map(|a| a.class).or(self.rec.class)
    }
}

/// An attempt that failed, as an operator means it: an eviction by a
/// drain, a cancel or a launch refused for room is routine, not a failure.
fn failed(a: &AttemptRecord) -> bool {
    let routine = a.rule.as_deref() == Some(crate::engine::EVICTED_RULE);
    a.class.is_some_and(|c| !matches!(c, FailureClass::Cancelled | FailureClass::Capacity)) && !routine
}

/// Everything the views draw from.
#[derive(Debug, Clone, Default)]
pub struct Model {
    pub workloads: BTreeMap<WorkloadId, WorkloadRow>,
    /// Oldest first, capped.
    pub events: VecDeque<EventRecord>,
    pub status: Option<Arc<FleetStatus>>,
    /// Free GPUs per pool label, oldest first.
    pub free_history: HashMap<String, VecDeque<u32>>,
    /// Health score per node, oldest first.
    pub health_history: HashMap<String, VecDeque<f64>>,
    /// Newest failure classes seen per node, newest last.
    pub node_classes: HashMap<String, VecDeque<FailureClass>>,
    /// Audit records seen since the console started, oldest first, capped.
    pub audit: VecDeque<AuditRecord>,
    /// Where the server this console reads stands in its HA set (`GET
    /// /v1/servers`); `None` when it is not part of one (a SQLite
    /// journal) or never said.
    pub place: Option<HaPlace>,
    /// Bumped on every change, so views can cache derived rows.
    pub generation: u64,
    /// Workloads in the journal, as far as this console knows: more than
    /// `workloads` holds when older ones are left for paging.
    pub total: u64,
    /// Workloads in the journal by state, as the engine counted them at
    /// the last load and kept current from then on by the changes of
    /// rows that arrive (`None`: the engine never said; a replay or a
    /// fixture, whose rows are all held).
    pub counts: Option<StateCounts>,
    /// Where the next older page of workloads starts; `None`: nothing
    /// older is left in the journal that the console does not hold.
    pub next_page: Option<WorkloadId>,
    /// Whether a page older than the first load was taken: a reload of
    /// the newest then leaves the paging cursor where it is.
    paged: bool,
    /// Operator retries seen: what each retried workload was retried as.
    retries: HashMap<WorkloadId, WorkloadId>,
    /// Changes per part, for caches of what is derived from one part.
    parts: Versions,
    /// The changes to `generation` made here; any other (a test that
    /// edits a row and bumps `generation`) counts as a change of every part.
    tracked: u64,
}

/// Where the server a console reads stands among the servers on its
/// PostgreSQL journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaPlace {
    pub role: HaRole,
    /// The last takeover: who took the lease from whom, and when.
    pub last_failover: Option<LastFailover>,
}

/// Leader, or a standby (of the lease's holder, when one holds it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HaRole {
    Leader,
    Standby { of: Option<String> },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailover {
    pub from: String,
    pub to: String,
    pub at: Millis,
}

impl HaPlace {
    /// From `GET /v1/servers`: the server that answered leads when it
    /// holds the lease; `None` on SQLite (one server, no HA set).
    pub fn of(v: &crate::server::servers::ServersView) -> Option<HaPlace> {
        if v.journal != "postgres" {
            return None;
        }
        let role = match &v.leader {
            Some(l) if *l == v.answered_by => HaRole::Leader,
            of => HaRole::Standby { of: of.clone() },
        };
        let last_failover = v.last_failover.as_ref().map(|f| LastFailover {
            from: f.from.clone(),
            to: f.to.clone(),
            at: Millis(f.at),
        });
        Some(HaPlace { role, last_failover })
    }
}

/// How many times each part of the model changed: what is derived from
/// one part is recomputed only when that part changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versions {
    /// Workload rows and their attempts, retries and the journal's counts.
    pub rows: u64,
    /// The fleet status (nodes, health, providers).
    pub status: u64,
    /// The audit records held.
    pub audit: u64,
}

/// The parts a change touched.
#[derive(Debug, Clone, Copy, Default)]
struct Touched {
    rows: bool,
    status: bool,
    audit: bool,
}

/// Audit records a console keeps (the audit view pages older ones in).
const AUDIT_KEPT: usize = 20_000;

impl Model {
    /// A model from plain data: how tests and benchmarks build one.
    pub fn from_parts(
        fleet: Fleet,
        health: HealthView,
        workloads: Vec<WorkloadRecord>,
        attempts: Vec<AttemptRecord>,
        at: Millis,
    ) -> Self {
        let mut m = Model::default();
        let total = workloads.len() as u64;
        m.load_recent(Recent {
            workloads,
            attempts,
            events: Vec::new(),
            total,
            counts: None,
            next_page: None,
        });
        m.set_status(Arc::new(FleetStatus {
            at,
            fleet,
            health,
            blocked: 0,
            unreachable: BTreeMap::new(),
            intents: BTreeMap::new(),
            unknown_attempts: BTreeMap::new(),
            unreachable_since: BTreeMap::new(),
            fair_share: Vec::new(),
            budgets: Vec::new(),
            deliveries_pending: 0,
            deliveries_in_flight: 0,
            demand: Default::default(),
        }));
        m
    }

    pub fn fleet(&self) -> Option<&Fleet> {
        self.status.as_ref().map(|s| &s.fleet)
    }

    /// How many times each part changed (a change this model did not make
    /// itself counts for every part).
    pub fn versions(&self) -> Versions {
        let other = self.generation.wrapping_sub(self.tracked);
        let p = self.parts;
        Versions {
            rows: p.rows.wrapping_add(other),
            status: p.status.wrapping_add(other),
            audit: p.audit.wrapping_add(other),
        }
    }

    /// Counts one change, of the parts it touched.
    fn changed(&mut self, t: Touched) {
        self.generation += 1;
        self.tracked += 1;
        self.parts.rows += u64::from(t.rows);
        self.parts.status += u64::from(t.status);
        self.parts.audit += u64::from(t.audit);
    }

    /// Takes the engine's starting point, or a fresh load of it (after a
    /// remote engine came back, or when this console fell behind). A row
    /// already held is replaced only by a newer one (`updated_at`): a batch
    /// applied while the load was on its way may be newer than the load.
    /// Events already held are not added twice.
    pub fn load_recent(&mut self, recent: Recent) {
        if !self.paged {
            self.next_page = recent.next_page;
        }
        if let Some(c) = recent.counts {
            self.counts = Some(c);
        }
        self.take(recent);
    }

    /// Takes a page of older workloads ([`EngineHandle::older`]'s answer)
    /// and where the next one starts.
    ///
    /// [`EngineHandle::older`]: crate::engine::handle::EngineHandle::older
    pub fn load_older(&mut self, page: Recent) {
        self.paged = true;
        self.next_page = page.next_page;
        self.take(page);
    }

    /// Holds one workload fetched on its own (opened by id), whatever its
    /// age: the counts already have it.
    pub fn hold(&mut self, rec: WorkloadRecord, mut attempts: Vec<AttemptRecord>) {
        if !self.workloads.contains_key(&rec.id) {
            attempts.sort_by_key(|a| a.id.n);
            self.insert_row(rec, attempts);
            self.changed(Touched { rows: true, ..Touched::default() });
        }
    }

    fn take(&mut self, recent: Recent) {
        let mut attempts: HashMap<WorkloadId, Vec<AttemptRecord>> = HashMap::new();
        for a in recent.attempts {
            attempts.entry(a.id.workload).or_default().push(a);
        }
        for rec in recent.workloads {
            let id = rec.id;
            let mut atts = attempts.remove(&id).unwrap_or_default();
            atts.sort_by_key(|a| a.id.n);
            match self.workloads.get_mut(&id) {
                Some(row) if rec.updated_at > row.rec.updated_at => {
                    // Attempts the load lacks (newer than it) stay.
                    for a in std::mem::take(&mut row.attempts) {
                        if !atts.iter().any(|x| x.id == a.id) {
                            atts.push(a);
                        }
                    }
                    atts.sort_by_key(|a| a.id.n);
                    atts.shrink_to_fit();
                    row.rec = rec;
                    row.attempts = atts;
                }
                Some(_) => {}
                None => {
                    self.insert_row(rec, atts);
                }
            }
        }
        self.total = self.total.max(recent.total).max(self.workloads.len() as u64);
        if !recent.events.is_empty() {
            let held: std::collections::HashSet<(i64, WorkloadId, String)> =
                self.events.iter().map(|e| (e.at.0, e.workload, e.message.clone())).collect();
            let fresh = !held.is_empty();
            for e in recent.events {
                if !held.contains(&(e.at.0, e.workload, e.message.clone())) {
                    self.push_event(e);
                }
            }
            if fresh {
                // Loaded events may be older than those the stream brought.
                self.events.make_contiguous().sort_by_key(|e| e.at);
            }
        }
        self.changed(Touched { rows: true, ..Touched::default() });
    }

    /// Takes the engine's newest audit records (newest first, as
    /// `EngineHandle::audit` answers) into those held: a record already
    /// held (the same time, principal, action and target) is not added
    /// twice, the list stays oldest first and keeps the newest
    /// [`AUDIT_KEPT`].
    /// Returns how many records were new.
    pub fn load_audit(&mut self, newest_first: Vec<AuditRecord>) -> usize {
        type Key = (Millis, String, String, Option<String>);
        let key =
            |a: &AuditRecord| -> Key { (a.at, a.principal.clone(), a.action.clone(), a.target.clone()) };
        let held: std::collections::HashSet<Key> = self.audit.iter().map(key).collect();
        let before = self.audit.len();
        for a in newest_first.into_iter().rev() {
            if !held.contains(&key(&a)) {
                self.audit.push_back(a);
            }
        }
        let added = self.audit.len() - before;
        if added > 0 {
            // Loaded records may be older than those the stream brought;
            // the sort is stable, so records of one millisecond keep
            // their order.
            self.audit.make_contiguous().sort_by_key(|a| a.at);
            while self.audit.len() > AUDIT_KEPT {
                self.audit.pop_front();
            }
        }
        self.changed(Touched { audit: true, ..Touched::default() });
        added
    }

    /// Workloads that are not final yet (queued, placing, launching,
    /// running): work an engine still has to see through.
    pub fn live(&self) -> usize {
        self.workloads.values().filter(|w| !w.rec.state.is_final()).count()
    }

    /// Applies one durable batch from the engine.
    pub fn apply(&mut self, records: &[Record]) {
        let mut touched = Touched::default();
        for r in records {
            match r {
                Record::Workload(w) => {
                    touched.rows = true;
                    let w = (**w).clone();
                    match self.workloads.get_mut(&w.id) {
                        Some(row) => {
                            if let Some(c) = self.counts.as_mut().filter(|_| row.rec.state != w.state) {
                                let old = c.of_mut(row.rec.state);
                                *old = old.saturating_sub(1);
                                *c.of_mut(w.state) += 1;
                            }
                            row.rec = w;
                        }
                        None => {
                            // A submission is newer than every workload
                            // held; an older row (an acknowledgement of a
                            // failure not loaded: every live one is held,
                            // so its state is final and counted) is not
                            // new to the journal.
                            let newest = self.workloads.keys().next_back().copied();
                            if newest.is_none_or(|n| w.id > n) {
                                self.total += 1;
                                if let Some(c) = &mut self.counts {
                                    *c.of_mut(w.state) += 1;
                                }
                            }
                            self.insert_row(w, Vec::new());
                        }
                    }
                }
                Record::Attempt(a) => {
                    touched.rows = true;
                    if let Some(row) = self.workloads.get_mut(&a.id.workload) {
                        match row.attempts.iter_mut().find(|x| x.id == a.id) {
                            Some(x) => *x = (**a).clone(),
                            None => {
                                row.attempts.reserve_exact(1);
                                row.attempts.push((**a).clone());
                                row.attempts.sort_by_key(|x| x.id.n);
                            }
                        }
                    }
                }
                Record::Event(e) => self.push_event(e.clone()),
                // The fleet status carries node intents.
                Record::NodeIntent { .. } | Record::Delivery(_) => {}
                Record::Audit(a) => {
                    touched.audit = true;
                    self.audit.push_back((**a).clone());
                    if self.audit.len() > AUDIT_KEPT {
                        self.audit.pop_front();
                    }
                }
                Record::Health(h) => {
                    if let Some(c) = h.class {
                        let q = self.node_classes.entry(h.node.clone()).or_default();
                        q.push_back(c);
                        if q.len() > NODE_CLASSES {
                            q.pop_front();
                        }
                    }
                }
            }
        }
        self.changed(touched);
    }

    /// Adds a row, linking it with its operator retry either way.
    fn insert_row(&mut self, rec: WorkloadRecord, mut attempts: Vec<AttemptRecord>) {
        attempts.shrink_to_fit();
        let id = rec.id;
        let retry_of = rec.spec.labels.get(RETRY_OF).and_then(|o| o.parse::<WorkloadId>().ok());
        let retried_as = self.retries.get(&id).copied().or(rec.retried_as);
        self.workloads.insert(id, WorkloadRow { rec, attempts, retried_as });
        if let Some(old) = retry_of {
            self.retries.insert(old, id);
            if let Some(row) = self.workloads.get_mut(&old) {
                row.retried_as = Some(id);
            }
        }
    }

    fn push_event(&mut self, e: EventRecord) {
        self.events.push_back(e);
        if self.events.len() > EVENTS {
            self.events.pop_front();
        }
    }

    /// Takes a new fleet status and extends the histories.
    pub fn set_status(&mut self, s: Arc<FleetStatus>) {
        let fleet = &s.fleet;
        for (i, pool) in fleet.pools.iter().enumerate() {
            let free: u32 = fleet
                .pool_nodes(crate::fleet::PoolIdx(i as u32))
                .iter()
                .filter(|n| n.state == crate::fleet::NodeState::Ready)
                .map(|n| n.free.gpus)
                .sum();
            let label = fleet.pool_label(crate::fleet::PoolIdx(i as u32));
            let _ = pool;
            push_capped(self.free_history.entry(label).or_default(), free);
        }
        for (name, h) in &s.health.nodes {
            push_capped(self.health_history.entry(name.clone()).or_default(), h.score);
        }
        self.status = Some(s);
        self.changed(Touched { status: true, ..Touched::default() });
    }

    /// How old the fleet status is at `now`, in seconds; `None` before the first.
    pub fn status_age(&self, now: Millis) -> Option<f64> {
        self.status.as_ref().map(|s| now.secs_since(s.at).max(0.0))
    }

    /// Live workloads per node they run on, for the nodes view.
    pub fn by_node(&self) -> HashMap<String, Vec<WorkloadId>> {
        let mut m: HashMap<String, Vec<WorkloadId>> = HashMap::new();
        for w in self.workloads.values().filter(|w| !w.rec.state.is_final()) {
            if let Some(a) = w.last_attempt().filter(|a| !a.state.is_final()) {
                m.entry(a.node.clone()).or_default().push(w.rec.id);
            }
        }
        m
    }
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T) {
    q.push_back(v);
    if q.len() > HISTORY {
        q.pop_front();
    }
}
