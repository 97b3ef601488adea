//! The engine core: `(state, event, now) -> (state, actions)`.
//!
//! Owns the lifecycle of every live workload: queueing by priority,
//! placement through the scheduler, attempts and their deadlines, failure
//! classification, retry decisions, health observations and the allocation
//! of capacity on the fleet. It performs no I/O and never reads a clock:
//! the shell (or the simulator) delivers [`Event`]s with the current time
//! and performs the returned [`Action`]s, writing every [`Record`] to the
//! journal before it performs anything else from the same batch.
//!
//! Invariants:
//! - a workload has at most one live (non-final) attempt;
//! - a new attempt is never launched while the previous one may still be
//!   running: only a confirmed end (status, terminate, or not-found) closes
//!   an attempt;
//! - capacity allocated to a live attempt is released exactly once, when
//!   the attempt closes.

mod attempt;
mod budget;
mod counts;
mod deadline;
mod exclusion;
mod fair;
mod fair_gap;
mod hold;
mod inventory;
mod live_set;
mod messages;
mod operator;
mod outbox;
mod patience;
mod policy;
mod queue;
mod reconcile;
mod refused;
mod restore;
mod retrying;
mod room;
mod self_check;
mod submit;
mod tenancy;
mod waiting;

pub use super::command::Refusal;
use super::model::*;
use crate::failure::ProviderEnd;
use crate::fleet::{Fleet, Free, NodeIdx, NodeState, ProviderIdx};
use crate::health::{HealthConfig, HealthTracker};
use crate::providers::sim::rng::Rng;
use crate::providers::{AttemptStatus, LaunchAck, LaunchError};
use crate::schedule::{Snapshot, UnfitCache};
use crate::spec::Spec;
use queue::Queue;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use budget::{Closed, HORIZON_MS};
pub use counts::WorkCounts;
pub use messages::{Action, CoreConfig, Event, HostBound, NodeNote, OutputsResult, Reply};
pub use outbox::DeliveryOutcome;
pub use policy::{Patience, PlacementPolicy};
pub use restore::Restore;

/// Runtime facts about a live attempt that are not part of its record.
#[derive(Debug, Clone)]
struct Live {
    /// Index into `Entry::attempts`.
    idx: usize,
    /// Every node it holds, in rank order (one, unless a gang); a node the
    /// fleet no longer lists is `NodeIdx(u32::MAX)` and holds nothing.
    nodes: Vec<NodeIdx>,
    alloc: Free,
    launch_sent_at: Millis,
    launch_resends: u32,
    acked: bool,
    unreachable_since: Option<Millis>,
    /// When its provider last stopped answering during this attempt (kept
    /// after it answers again): an attempt that vanished across an outage
    /// is the provider's loss, not the node's.
    outage_at: Option<Millis>,
    /// Why Canopy is terminating it, when it is; decides the class.
    terminating: Option<ProviderEnd>,
    terminate_sent_at: Option<Millis>,
    /// Collect was requested; waiting for `Collected`.
    collecting: bool,
    /// What it counts against its tenant's quota (`tenancy.rs`).
    charged: Option<tenancy::Charge>,
}

#[derive(Debug, Clone)]
struct Entry {
    /// Its record, whose spec (`rec.spec`) every decision reads.
    rec: WorkloadRecord,
    attempts: Vec<AttemptRecord>,
    live: Option<Live>,
    exclude_nodes: BTreeSet<String>,
    exclude_pools: BTreeSet<String>,
    /// When the last exclusion was added; all expire together
    /// ([`CoreConfig::exclusion_ttl_s`] later).
    excluded_at: Option<Millis>,
    /// Pools that said "no capacity"; forgotten when capacity changes.
    capacity_misses: BTreeSet<String>,
    min_gpu_memory_exclusive: Option<f64>,
    cancel_requested: bool,
    /// The last explanation journalled while unschedulable (to journal
    /// changes only).
    last_explanation: Option<String>,
    /// What placement depends on in the spec (kind, resources, constraints,
    /// preferences), hashed: workloads with equal keys and no history of
    /// their own are placed alike, so one that cannot be placed speaks
    /// for the others.
    shape: u64,
    /// Since when it has waited for cheaper capacity ([`Patience`]), if it has.
    waiting_since: Option<Millis>,
    /// The prices and pool its waiting reason was last written from
    /// (`patience.rs`): asked again with the same, the text stands.
    wait_key: Option<[u64; 5]>,
}

impl Entry {
    fn new(rec: WorkloadRecord, attempts: Vec<AttemptRecord>) -> Self {
        Self {
            shape: shape_key(&rec.spec),
            rec,
            attempts,
            live: None,
            exclude_nodes: BTreeSet::new(),
            exclude_pools: BTreeSet::new(),
            excluded_at: None,
            capacity_misses: BTreeSet::new(),
            min_gpu_memory_exclusive: None,
            cancel_requested: false,
            last_explanation: None,
            waiting_since: None,
            wait_key: None,
        }
    }

    /// When its live attempt is expected to end: its start (its placement,
    /// until it starts) plus its spec's `expected_runtime`. Work past its
    /// estimate is still filed at it; readers skip what is past.
    fn expected_end(&self) -> Option<Millis> {
        let live = self.live.as_ref()?;
        let d = self.rec.spec.expected_runtime?;
        let att = self.attempts.get(live.idx)?;
        Some(att.started_at.unwrap_or(att.placed_at).plus_secs(d.0.as_secs_f64()))
    }

    /// The request class for capacity-aware unblocking: the shape, unless
    /// this workload's own exclusions set it apart.
    fn class(&self, id: WorkloadId) -> (u64, u64) {
        if self.exclude_nodes.is_empty() && self.exclude_pools.is_empty() && self.capacity_misses.is_empty() {
            (self.shape, 0)
        } else {
            (self.shape, id.0)
        }
    }
}

/// The purpose tag of the token-nonce stream.
const NONCE_STREAM: &str = "token-nonce";

/// 64 bits from the OS for the nonce stream; without OS randomness, the
/// clock and pid still separate stores and restarts (never a constant).
fn os_seed() -> u64 {
    let mut b = [0u8; 8];
    match getrandom::fill(&mut b) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            t ^ u64::from(std::process::id()).rotate_left(32)
        }
    }
}

/// The largest GPU memory of any pool (0 without GPU pools).
fn max_gpu_memory(fleet: &Fleet) -> f64 {
    fleet.pools.iter().map(|p| p.gpu_memory_gb()).fold(0.0, f64::max)
}

/// How many copies of a request fit in `room`, or `None` when not one does.
/// Requests of nothing are capped, so a freed node never wakes a whole queue.
fn copies_that_fit(room: &Free, gpus: u32, cpu: f64, mem: f64, disk: f64) -> Option<u32> {
    const CAP: u32 = 64;
    let per = |have: f64, want: f64| {
        if want <= 1e-9 { CAP } else { ((have + 1e-9) / want).floor().min(CAP as f64) as u32 }
    };
    let g = room.gpus.checked_div(gpus).map_or(CAP, |n| n.min(CAP));
    let n = g.min(per(room.cpu_cores, cpu)).min(per(room.memory_gb, mem)).min(per(room.disk_gb, disk));
    (n > 0).then_some(n)
}

/// A stable hash of what placement reads from a spec.
fn shape_key(spec: &Spec) -> u64 {
    let text = serde_json::to_string(&(&spec.kind, &spec.resources, &spec.constraints, &spec.preferences))
        .unwrap_or_default();
    // FNV-1a: stable across runs and Rust versions.
    text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The engine core. See the module docs.
pub struct Core {
    store_id: String,
    config: CoreConfig,
    fleet: Fleet,
    snapshot: Option<Snapshot>,
    health: HealthTracker,
    entries: BTreeMap<WorkloadId, Entry>,
    /// Nodes held for the first waiting gang (see `hold.rs`).
    hold: Option<hold::Hold>,
    /// Workloads with a live attempt: what the shell polls, without a scan
    /// of every queued workload.
    live_ids: live_set::LiveSet,
    /// Operators' standing cordons and drains, by node (journalled).
    intents: BTreeMap<String, NodeIntent>,
    keys: HashMap<String, WorkloadId>,
    queue: Queue,
    next_id: u64,
    /// Finished workloads kept for idempotent-submit lookups by key: the
    /// spec hash and id.
    finished_keys: HashMap<String, (WorkloadId, String)>,
    /// The time of the previous event, to notice quarantines ending.
    last_now: Millis,
    out: Vec<Action>,
    inventory: inventory::Reported,
    /// The largest GPU memory of any pool, for retry decisions after an
    /// out-of-memory failure.
    max_gpu_memory: f64,
    /// Live attempts by their next deadline ([`Core::attempt_deadline`]),
    /// and each one's entry there, so `next_wake` and `Tick` do not visit
    /// every workload.
    deadlines: BTreeSet<(Millis, WorkloadId)>,
    deadline_of: FxHashMap<WorkloadId, Millis>,
    /// Host-bound attempts a lost leader ran, held until this time before
    /// a provider that does not know them counts as their loss
    /// ([`CoreConfig::host_bound`]).
    held: BTreeMap<AttemptId, Millis>,
    /// Workloads whose live attempt may have changed during this event;
    /// their deadlines are recomputed before the event returns.
    touched: Vec<WorkloadId>,
    /// Workloads that may hold capacity misses, to forget them without
    /// visiting every workload.
    with_misses: Vec<WorkloadId>,
    /// Requests nothing fitted, for as long as that provably still holds.
    /// Follows `snapshot`; cleared with it.
    unfit: UnfitCache,
    /// Verify every answer taken from `unfit` against a fresh decision
    /// ([`Core::set_self_check`]); the first mismatch.
    self_check: bool,
    check_failure: Option<String>,
    /// The generator of token nonces, seeded from the OS at construction;
    /// the simulator seeds it for determinism.
    nonces: Rng,
    /// The largest workload id the journal knew at restore: provider-side
    /// attempts of higher ids are unknown to this store's history.
    journal_max_id: u64,
    /// The first id given out after the restore.
    first_new_id: u64,
    /// Provider-side attempts of this store the journal does not know:
    /// token → provider.
    unknown: BTreeMap<String, String>,
    /// When workloads' exclusions expire, soonest first.
    expiries: BTreeSet<(Millis, WorkloadId)>,
    /// The fleet as if every node were ready and empty, to tell work that
    /// cannot run *now* from work that never could; rebuilt when the
    /// fleet's shape changes.
    ideal: Option<Snapshot>,
    /// [`Core::ideal`] with one node per pool (`patience.rs`).
    ideal_per_pool: Option<Snapshot>,
    /// Requests priced on the ideal fleet for patience, with the prices
    /// found (`patience.rs`). Cleared with the ideal fleet.
    prices: patience::PriceMemo,
    /// When waiting work's patience runs out ([`Patience`]), soonest first.
    patient: BTreeSet<(Millis, WorkloadId)>,
    /// Nodes that count as full after refusing a launch (`refused.rs`).
    beliefs: refused::Beliefs,
    /// Tenants, quotas and owners; empty when none are configured.
    tenancy: crate::tenant::Tenancy,
    /// Usage per tenant and flavor, and reclaims in flight (`tenancy.rs`).
    quota: tenancy::QuotaBook,
    /// What scheduling did, counted ([`WorkCounts`]).
    counts: WorkCounts,
    /// Tenants' decayed usage and serving order (`fair.rs`).
    fair: fair::FairState,
    /// Budgets' spend per period and the work they hold (`budget.rs`).
    budget_book: budget::BudgetBook,
    /// Webhook deliveries not yet delivered or given up (`outbox.rs`).
    outbox: outbox::Outbox,
    /// The widths of every workload in `entries` (waiting or running),
    /// which the fit factor reads from the snapshot.
    demand: crate::schedule::DemandMix,
}

impl Core {
    pub fn new(store_id: impl Into<String>, fleet: Fleet, config: CoreConfig) -> Self {
        Self {
            store_id: store_id.into(),
            health: HealthTracker::new(config.health.clone()),
            inventory: inventory::Reported::from_fleet(&fleet),
            max_gpu_memory: max_gpu_memory(&fleet),
            config,
            fleet,
            snapshot: None,
            entries: BTreeMap::new(),
            live_ids: live_set::LiveSet::default(),
            intents: BTreeMap::new(),
            keys: HashMap::new(),
            queue: Queue::default(),
            next_id: 1,
            finished_keys: HashMap::new(),
            last_now: Millis(i64::MIN),
            out: Vec::new(),
            deadlines: BTreeSet::new(),
            held: BTreeMap::new(),
            deadline_of: FxHashMap::default(),
            touched: Vec::new(),
            with_misses: Vec::new(),
            unfit: UnfitCache::new(),
            self_check: false,
            check_failure: None,
            hold: None,
            nonces: Rng::stream(os_seed(), NONCE_STREAM, ""),
            journal_max_id: 0,
            first_new_id: 1,
            unknown: BTreeMap::new(),
            expiries: BTreeSet::new(),
            ideal: None,
            ideal_per_pool: None,
            prices: Default::default(),
            patient: BTreeSet::new(),
            beliefs: refused::Beliefs::default(),
            tenancy: crate::tenant::Tenancy::default(),
            quota: tenancy::QuotaBook::default(),
            counts: WorkCounts::default(),
            fair: fair::FairState::default(),
            budget_book: budget::BudgetBook::default(),
            outbox: outbox::Outbox::default(),
            demand: Default::default(),
        }
    }

    /// Makes token nonces a function of `seed` (the simulator's replays
    /// must be identical run to run).
    pub fn seed_nonces(&mut self, seed: u64) {
        self.nonces = Rng::stream(seed, NONCE_STREAM, "");
    }

    /// 64 fresh bits for an attempt's token, as 16 hex digits.
    fn next_nonce(&mut self) -> String {
        format!("{:016x}", self.nonces.next_u64())
    }

    /// Attempts carrying this store's tokens that providers still run but
    /// the journal has no record of (token → provider): left alone, for an
    /// operator to look at.
    pub fn unknown_attempts(&self) -> &BTreeMap<String, String> {
        &self.unknown
    }

    /// The largest workload id the journal held when the core was
    /// restored.
    pub fn journal_max_id(&self) -> u64 {
        self.journal_max_id
    }

    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    pub fn health(&self) -> &HealthTracker {
        &self.health
    }

    /// Live workloads (not final), in id order.
    pub fn live_workloads(&self) -> impl Iterator<Item = &WorkloadRecord> {
        self.entries.values().map(|e| &e.rec)
    }

    pub fn workload(&self, id: WorkloadId) -> Option<&WorkloadRecord> {
        self.entries.get(&id).map(|e| &e.rec)
    }

    /// The attempts of a live workload.
    pub fn attempts(&self, id: WorkloadId) -> &[AttemptRecord] {
        self.entries.get(&id).map_or(&[], |e| &e.attempts)
    }

    /// The nodes that count as full because they refused a launch for
    /// capacity, with when that belief expires at the latest (an
    /// inventory that reports them anew, or a release there, comes first).
    pub fn full_after_refusal(&self) -> Vec<(String, Millis)> {
        let mut v: Vec<(String, Millis)> = self.beliefs.full().map(|(n, t)| (n.to_string(), t)).collect();
        v.sort();
        v
    }

    /// What scheduling has done since the core was built, counted.
    pub fn work_counts(&self) -> WorkCounts {
        self.counts
    }

    /// How many workloads wait because nothing fits them now.
    pub fn blocked_count(&self) -> usize {
        self.queue.blocked_len()
    }

    /// Whether a workload waits because nothing fits it now (as opposed to
    /// backing off before a retry, or running).
    pub fn is_blocked(&self, id: WorkloadId) -> bool {
        self.queue.is_blocked(id)
    }

    /// Why Canopy is stopping this live attempt, if it is.
    pub fn stop_reason(&self, a: AttemptId) -> Option<&ProviderEnd> {
        let e = self.entries.get(&a.workload)?;
        let live = e.live.as_ref()?;
        (e.attempts[live.idx].id == a).then_some(live.terminating.as_ref()?)
    }

    /// The token of `a`'s placement while `a` is live. A placement its
    /// provider refused for capacity gives its attempt id to the next one,
    /// under a new token: a late answer about the old one is told apart.
    pub fn live_token(&self, a: AttemptId) -> Option<String> {
        let e = self.entries.get(&a.workload)?;
        let att = e.attempts.get(e.live.as_ref()?.idx).filter(|t| t.id == a)?;
        Some(att.token(&self.store_id))
    }

    /// Live attempts with their provider and token, for the shell's
    /// status polling.
    pub fn live_attempts(&self) -> Vec<(AttemptId, String, String)> {
        self.live_ids
            .iter()
            .filter_map(|id| self.entries.get(id))
            .filter_map(|e| e.live.as_ref().map(|l| &e.attempts[l.idx]))
            .map(|a| (a.id, a.provider.clone(), a.token(&self.store_id)))
            .collect()
    }

    /// Handles one event at `now` and returns what to do.
    pub fn handle(&mut self, event: Event, now: Millis) -> Vec<Action> {
        self.fair_accrue(now);
        // A quarantine that ended since the last event frees its node.
        if self.health.next_release(self.last_now).is_some_and(|t| t <= now) {
            let released: BTreeSet<String> =
                self.health.released(self.last_now, now).map(str::to_string).collect();
            if self.config.placement.uses_health()
                && let Some(snap) = self.snapshot.as_mut()
            {
                for name in &released {
                    if let Some(n) = snap.node_by_name(name) {
                        snap.set_node_health(n, self.health.node(name, now));
                    }
                }
            }
            self.capacity_changed();
            self.nodes_recovered(&released, "its quarantine ended", now);
        }
        self.lapse_intents(now);
        self.last_now = self.last_now.max(now);
        match event {
            Event::Submit { request, spec, spec_hash, idempotency_key, by, tenant } => {
                self.submit(request, *spec, spec_hash, idempotency_key, (by, tenant), now)
            }
            Event::Cancel { request, id } => self.cancel(request, id, now),
            Event::SetNodeState { request, node, state, note } => {
                self.set_node_state(request, &node, state, note, now)
            }
            Event::Unquarantine { request, node } => self.unquarantine(request, &node, now),
            Event::Unexclude { request, id, target, by, reason } => {
                self.unexclude(request, id, target, by, reason, now)
            }
            Event::Acknowledge { request, rec, by, reason } => {
                self.acknowledge(request, *rec, by, reason, now)
            }
            Event::SetTenancy { tenancy } => self.set_tenancy(*tenancy),
            Event::LaunchResult { attempt, result } => self.on_launch_result(attempt, result, now),
            Event::Status { attempt, status } => self.on_status(attempt, status, now),
            Event::StatusFailed { attempt, error } => self.on_status_failed(attempt, &error, now),
            Event::Collected { attempt, end, log_tail, outputs } => {
                self.on_collected(attempt, end, &log_tail, outputs, now)
            }
            Event::Terminated { attempt, result } => self.on_terminated(attempt, result, now),
            Event::CheckpointFound { attempt, found } => self.on_checkpoint(attempt, found, now),
            Event::CheckpointNotCopied { attempt, message } => {
                self.on_checkpoint_not_copied(attempt, message, now)
            }
            Event::Owned { provider, tokens, ended } => self.on_owned(&provider, &tokens, &ended, now),
            Event::Inventory { provider, pools } => self.on_inventory(&provider, pools, now),
            Event::Delivered { id, outcome } => self.on_delivered(id, outcome, now),
            Event::Tick => self.on_tick(now),
        }
        self.schedule_pass(now);
        self.forget_emptied_groups();
        self.update_deadlines();
        self.dispatch_deliveries(now);
        std::mem::take(&mut self.out)
    }

    /// When the core next needs a `Tick`, if anything is waiting on time.
    pub fn next_wake(&self) -> Option<Millis> {
        let mut next = self.queue.next_backoff();
        let mut consider = |t: Millis| next = Some(next.map_or(t, |n: Millis| n.min(t)));
        if let Some(t) = self.health.next_release(self.last_now) {
            consider(t);
        }
        if let Some(&(t, _)) = self.deadlines.first() {
            consider(t);
        }
        if let Some(t) = self.intents.values().filter_map(|i| i.until).min() {
            consider(t);
        }
        if let Some(&(t, _)) = self.patient.first() {
            consider(t);
        }
        // Work kept out only by its exclusions may go when they expire.
        if let Some(&(t, _)) = self.expiries.first() {
            consider(t);
        }
        // A node that refused a launch is asked again when its belief expires.
        if let Some(t) = self.beliefs.next_expiry() {
            consider(t);
        }
        if let Some(t) = self.budget_next_wake().into_iter().chain(self.rooms_next_end()).min() {
            consider(t);
        }
        if let Some(t) =
            self.config.webhooks.as_ref().and_then(|r| self.outbox.next_due(r.max_in_flight.max(1)))
        {
            consider(t);
        }
        next
    }

    /// Operators' standing cordons and drains, by node.
    /// Tenants, quotas and owners in force.
    pub fn tenancy(&self) -> &crate::tenant::Tenancy {
        &self.tenancy
    }

    fn set_tenancy(&mut self, tenancy: crate::tenant::Tenancy) {
        self.tenancy = tenancy;
        self.rebuild_quota();
        self.fair_rerank();
        self.budgets_reset(self.last_now);
        // What quotas allowed or refused may have changed for anyone.
        self.queue.unblock_all();
    }

    pub fn intents(&self) -> &BTreeMap<String, NodeIntent> {
        &self.intents
    }

    /// Re-files the deadlines of the workloads this event touched.
    fn update_deadlines(&mut self) {
        let mut touched = std::mem::take(&mut self.touched);
        touched.sort_unstable();
        touched.dedup();
        for id in touched.drain(..) {
            let next = self.entries.get(&id).and_then(|e| self.attempt_deadline(e));
            let before = self.deadline_of.get(&id).copied();
            if before == next {
                continue;
            }
            if let Some(t) = before {
                self.deadlines.remove(&(t, id));
                self.deadline_of.remove(&id);
            }
            if let Some(t) = next {
                self.deadlines.insert((t, id));
                self.deadline_of.insert(id, t);
            }
        }
        self.touched = touched;
    }

    /// Workloads whose live attempt is due at or before `now`, in id order.
    fn due(&self, now: Millis) -> Vec<WorkloadId> {
        let mut due: Vec<WorkloadId> =
            self.deadlines.iter().take_while(|(t, _)| *t <= now).map(|(_, id)| *id).collect();
        due.sort_unstable();
        due
    }

    fn record(&mut self, r: Record) {
        self.out.push(Action::Record(r));
    }

    fn event(
        &mut self,
        now: Millis,
        workload: WorkloadId,
        attempt: Option<AttemptId>,
        kind: EventKind,
        msg: String,
    ) {
        self.record(Record::Event(EventRecord { at: now, workload, attempt, kind, message: msg }));
    }

    fn save_workload(&mut self, id: WorkloadId, now: Millis) {
        let ttl = self.config.exclusion_ttl_s;
        if let Some(e) = self.entries.get_mut(&id) {
            e.rec.updated_at = now;
            e.rec.exclusions = Some(e.exclusions(ttl));
            let rec = Box::new(e.rec.clone());
            self.out.push(Action::Record(Record::Workload(rec)));
        }
    }

    fn save_attempt(&mut self, id: WorkloadId, idx: usize) {
        if let Some(a) = self.entries.get(&id).and_then(|e| e.attempts.get(idx)) {
            let rec = Box::new(a.clone());
            self.out.push(Action::Record(Record::Attempt(rec)));
        }
    }

    fn reply(&mut self, request: u64, reply: Reply) {
        self.out.push(Action::Reply { request, reply });
    }

    /// Ends a workload for good and forgets it (the journal remembers).
    fn finish_workload(
        &mut self,
        id: WorkloadId,
        state: WorkloadState,
        class: Option<crate::failure::FailureClass>,
        reason: String,
        now: Millis,
    ) {
        self.touched.push(id);
        self.reclaim_done(id);
        let Some(e) = self.entries.get_mut(&id) else { return };
        e.rec.state = state;
        e.rec.class = class;
        e.rec.reason = Some(reason.clone());
        e.rec.not_before = None;
        let (kind, on) = match state {
            WorkloadState::Succeeded => (EventKind::Succeeded, crate::spec::NotifyOn::Succeeded),
            WorkloadState::Cancelled => (EventKind::Cancelled, crate::spec::NotifyOn::Cancelled),
            _ => (EventKind::Failed, crate::spec::NotifyOn::Failed),
        };
        self.save_workload(id, now);
        self.event(now, id, None, kind, reason);
        self.notify(id, on, now);
        self.live_ids.remove(id);
        self.release_hold(id);
        self.release_room(id);
        let removed = self.entries.remove(&id);
        if let Some(e) = &removed {
            self.demand_changed(&e.rec.spec, false);
        }
        if let Some(e) = removed
            && let Some(k) = e.rec.idempotency_key
        {
            self.keys.remove(&k);
            self.finished_keys.insert(k, (id, e.rec.spec_hash));
        }
        self.queue.remove(id);
    }

    /// Mirrors a health observation into the snapshot, when there is one
    /// and the policy reads health: the node's, its pool's and its
    /// provider's health as the tracker now has them.
    fn observed(&mut self, obs: &HealthObservation, now: Millis) {
        if !self.config.placement.uses_health() {
            return;
        }
        let Some(snap) = self.snapshot.as_mut() else { return };
        if let Some(i) = self.fleet.providers.iter().position(|p| p.name == obs.provider) {
            snap.set_provider_health(ProviderIdx(i as u32), self.health.provider(&obs.provider, now));
        }
        if let Some(p) = snap.pool_by_label(&obs.pool) {
            snap.set_pool_health(p, self.health.pool(&obs.pool, now));
        }
        if let Some(n) = snap.node_by_name(&obs.node) {
            snap.set_node_health(n, self.health.node(&obs.node, now));
        }
    }

    /// Capacity appeared: blocked workloads get another chance, and "no
    /// capacity" answers from before are forgotten.
    fn capacity_changed(&mut self) {
        self.unblock_all();
        self.forget_capacity_misses();
    }

    fn forget_capacity_misses(&mut self) {
        for id in std::mem::take(&mut self.with_misses) {
            if let Some(e) = self.entries.get_mut(&id)
                && !e.capacity_misses.is_empty()
            {
                e.capacity_misses.clear();
                // It may go where the misses kept it out: placed again, not
                // left blocked until a node it fits on is released (none
                // may ever be, when the pools it was missing are idle).
                self.queue.unblock(id);
            }
        }
    }

    /// Forgets the remembered answers no blocked workload waits on.
    fn forget_emptied_groups(&mut self) {
        for g in self.queue.take_emptied() {
            self.unfit.remove(g);
        }
    }

    /// One node's capacity was released: unblock only the blocked
    /// workloads that the node's free resources can now host, oldest of
    /// the highest priority first, and no more than those resources could
    /// host together. Workloads that do not fit it stay blocked, waiting
    /// for a node where they do (or for a fleet-wide change, which
    /// unblocks everyone), so a large request is never overtaken by
    /// smaller ones on capacity it could use. Where a lend limit applies to
    /// the node, what Canopy released there also makes room under the
    /// limit elsewhere in its pool or provider ([`Core::lend_released`]).
    fn node_released(&mut self, node: NodeIdx) {
        let Some(n) = self.fleet.nodes.get(node.0 as usize) else { return };
        if n.state != NodeState::Ready {
            return;
        }
        let room = n.free;
        let entries = &self.entries;
        let fits = |id: &WorkloadId| {
            let r = &entries.get(id)?.rec.spec.resources;
            copies_that_fit(&room, r.gpus, r.cpu_cores, r.memory_gb, r.disk_gb)
        };
        // The blocked workloads that fit the room, in queue order, with how
        // many copies of each fit. A group's members ask for the same
        // resources, so its first member answers for the group.
        // Work waiting for cheaper capacity is asked only by a release in
        // a pool it waits on (`patience.rs`).
        let mut scanned = 0u64;
        let mut fitting: Vec<(queue::Key, u32)> = self
            .queue
            .blocked_in_order()
            .chain(self.queue.waiting_in(n.pool.0))
            .inspect(|_| scanned += 1)
            .filter_map(|k| fits(&k.1).map(|most| (k, most)))
            .collect();
        for members in self.queue.groups() {
            scanned += 1;
            let Some(most) = members.first().and_then(|k| fits(&k.1)) else { continue };
            scanned += members.len() as u64;
            fitting.extend(members.iter().map(|&k| (k, most)));
        }
        self.counts.release_scanned += scanned;
        // Queue order, except that the node's owner comes first on its own
        // capacity: its work asks before older borrowed work takes the
        // room (and, finding none, takes it back).
        let pool = n.pool;
        fitting.sort_unstable_by_key(|&(k, _)| (!self.owns_pool(k.1, pool), k));
        // Per request class, how many more the freed room could host.
        let mut left: HashMap<(u64, u64), u32> = HashMap::new();
        let mut wake = Vec::new();
        for ((_, id), most) in fitting {
            let Some(e) = self.entries.get(&id) else { continue };
            let n = left.entry(e.class(id)).or_insert(most);
            if *n > 0 {
                *n -= 1;
                wake.push(id);
            }
        }
        for id in wake {
            self.queue.unblock(id);
        }
    }

    /// The pool of `e`'s live attempt (of its first node the fleet still
    /// lists).
    fn live_pool(&self, e: &Entry) -> Option<crate::fleet::PoolIdx> {
        self.pool_of(e.live.as_ref()?)
    }

    /// The pool of attempt `live` (of its first node the fleet still lists).
    fn pool_of(&self, live: &Live) -> Option<crate::fleet::PoolIdx> {
        live.nodes.iter().find_map(|n| self.fleet.nodes.get(n.0 as usize)).map(|n| n.pool)
    }

    /// Files `id`'s live attempt, if it has one, in the live-attempt index
    /// by its pool and expected end (again, where either may have moved).
    fn file_live(&mut self, id: WorkloadId) {
        let Some(e) = self.entries.get(&id).filter(|e| e.live.is_some()) else { return };
        let (pool, due) = (self.live_pool(e), e.expected_end());
        self.live_ids.insert(id, pool, due);
    }

    /// Canopy released `freed` GPUs it held in pool `pool` (under a lend
    /// limit there or at its provider): the limit's headroom grew from
    /// `h − freed` to `h`, so the blocked and waiting work it now admits,
    /// of `h − freed < GPUs ≤ h`, is asked again. Work of fewer GPUs was
    /// admitted before; work of more is still refused.
    fn lend_released(&mut self, pool: crate::fleet::PoolIdx, freed: u64) {
        let p = self.fleet.pool(pool);
        let limited =
            p.lend_limit_gpus.is_some() || self.fleet.provider(p.provider).lend_limit_gpus.is_some();
        if !limited || freed == 0 {
            return;
        }
        let Some(snap) = self.snapshot.as_ref() else { return self.unblock_all() };
        let (held_pool, held_provider) = snap.held(pool);
        let headroom = |limit: Option<u32>, held: u64| limit.map(|l| u64::from(l).saturating_sub(held));
        let limits = [
            headroom(p.lend_limit_gpus, held_pool),
            headroom(self.fleet.provider(p.provider).lend_limit_gpus, held_provider),
        ];
        let lo = limits.iter().flatten().min().map_or(0, |h| h.saturating_sub(freed));
        let hi = limits.iter().flatten().max().copied().unwrap_or(0);
        let entries = &self.entries;
        let admitted = |id: &WorkloadId| {
            entries.get(id).is_some_and(|e| {
                let want = u64::from(e.rec.spec.resources.gpus) * u64::from(e.rec.spec.nodes().max(1));
                want > lo && want <= hi
            })
        };
        let mut wake: Vec<WorkloadId> = Vec::new();
        let mut scanned = 0u64;
        for k in self.queue.blocked_in_order().chain(self.queue.waiting_all()) {
            scanned += 1;
            if admitted(&k.1) {
                wake.push(k.1);
            }
        }
        for members in self.queue.groups() {
            scanned += 1;
            if members.first().is_some_and(|k| admitted(&k.1)) {
                wake.extend(members.iter().map(|k| k.1));
            }
        }
        self.counts.release_scanned += scanned;
        self.counts.lend_woken += wake.len() as u64;
        for id in wake {
            self.queue.unblock(id);
        }
    }

    /// Every blocked workload is ready again (groups woken, to be checked
    /// as their members come up).
    fn unblock_all(&mut self) {
        self.counts.woken_all += self.queue.blocked_len() as u64;
        self.queue.unblock_all();
    }

    /// Forgets the scheduler's view (the fleet itself changed); the next
    /// placement builds a new one.
    fn drop_snapshot(&mut self) {
        self.snapshot = None;
        self.unfit.clear();
        self.queue.ungroup_all();
        self.queue.take_emptied();
    }

    /// The scheduler's view, rebuilt after the fleet or health changed.
    /// Policies without health see a neutral view: no scores, no quarantine.
    fn snapshot(&mut self, now: Millis) -> &Snapshot {
        let (fleet, health, demand) = (&self.fleet, &self.health, &self.demand);
        let with_health = self.config.placement.uses_health();
        self.snapshot.get_or_insert_with(|| {
            let view = if with_health { health.view(now) } else { crate::health::HealthView::default() };
            let mut snap = Snapshot::new(fleet, &view);
            snap.set_demand(demand);
            snap
        })
    }

    /// The widths of every workload the core knows (waiting or running).
    pub fn demand(&self) -> &crate::schedule::DemandMix {
        &self.demand
    }

    /// Counts a workload entering (`added`) or leaving `entries` in the
    /// demand mix, and tells the snapshot.
    fn demand_changed(&mut self, spec: &Spec, added: bool) {
        let r = &spec.resources;
        if added {
            self.demand.add(r.gpus, r.nodes);
        } else {
            self.demand.remove(r.gpus, r.nodes);
        }
        if r.gpus > 0
            && let Some(snap) = self.snapshot.as_mut()
        {
            snap.set_demand(&self.demand);
        }
    }
}
