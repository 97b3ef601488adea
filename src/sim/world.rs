//! The discrete-event loop: plays the providers' side of the engine core
//! in virtual time, exactly as the scenario tests do by hand.
//!
//! Owns the event queue (ordered by virtual time, then by insertion, so a
//! run is a pure function of its inputs), the simulated attempts and node
//! outages. It hands every core event the virtual time, performs every
//! action the core returns (launch, terminate, collect) by scheduling the
//! provider's answer, and passes each batch of [`Record`]s to the metrics
//! and to a [`RecordSink`]. No processes, no wall clock, no threads.

use super::faults::{self, Fate, FaultModel};
use super::metrics::{PolicyReport, Tally};
use super::tenants::{Refusals, TenantTally};
use super::trace::Job;
use crate::engine::core::{Action, Core, CoreConfig, Event, OutputsResult, PlacementPolicy, Reply};
use crate::engine::model::{AttemptId, Millis, Record, WorkloadId};
use crate::failure::ProviderEnd;
use crate::fleet::{Fleet, Lifecycle, NodeState};
use crate::providers::sim::faults::{FaultContext, LaunchFault, RunFault, launch_fault};
use crate::providers::sim::rng::Rng;
use crate::providers::sim::signature::{SignatureContext, stderr_tail};
use crate::providers::{AttemptStatus, LaunchAck, LaunchError};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap};

/// Where a run's records go besides the metrics: the hook for replaying a
/// run into the console (`canopy sim --watch`). Batches arrive in the
/// order the engine produced them, each with its virtual time, exactly as
/// the engine shell publishes them after journalling.
pub trait RecordSink {
    fn batch(&mut self, at: Millis, records: &[Record]);

    /// Virtual time is about to move on from `at`: every event at `at` or
    /// earlier has been handled and `core` is the state they left. `next`
    /// is when the next event happens, `None` once the run has ended.
    /// Called before the first event (at [`EPOCH`]), whenever time moves
    /// on, and once at the end. A replay paces itself here and publishes
    /// the fleet status from `core`.
    fn settled(&mut self, at: Millis, next: Option<Millis>, core: &Core) {
        let _ = (at, next, core);
    }
}

/// Discards records.
pub struct NoSink;

impl RecordSink for NoSink {
    fn batch(&mut self, _: Millis, _: &[Record]) {}
}

/// Virtual time of the trace's second 0 (2023-11-14T22:13:20Z): any fixed
/// instant does; this one reads well in logs.
pub const EPOCH: Millis = Millis(1_700_000_000_000);

/// Seconds the simulated provider takes to answer a call.
const API_LATENCY_S: f64 = 1.0;
const TERMINATE_S: f64 = 5.0;
/// A run stops this long after the last submit even with work left
/// (work nothing can host stays queued forever).
const HORIZON_AFTER_LAST_SUBMIT_S: f64 = 400.0 * 86_400.0;

/// Everything one run needs.
pub struct Run<'a> {
    pub fleet: &'a Fleet,
    pub jobs: &'a [Job],
    /// Each job's spec, built when it arrives.
    pub specs: &'a super::Specs<'a>,
    pub faults: &'a FaultModel,
    pub seed: u64,
    pub policy: PlacementPolicy,
    /// Tenants, quotas and owners, handed to the core before the first
    /// job arrives; `None` or empty: none.
    pub tenancy: Option<&'a crate::tenant::Tenancy>,
}

#[derive(Debug, Clone)]
enum Ev {
    Arrive(usize),
    LaunchReply(AttemptId, Result<(), LaunchError>),
    Running(AttemptId, u32),
    End(AttemptId, u32),
    Collected(AttemptId, ProviderEnd, bool),
    Terminated(AttemptId),
    /// The provider's notice: it reclaims the attempt's capacity within
    /// this many seconds.
    Notice(AttemptId, u32, u64),
    Down(usize),
    Up(usize),
    Tick,
}

#[derive(Debug, Clone)]
struct Att {
    job: usize,
    /// Its nodes in rank order (one, or a gang's).
    nodes: Vec<usize>,
    /// Bumped when the attempt is stopped, so its pending events lapse.
    epoch: u32,
    running: bool,
    end: Option<(ProviderEnd, Vec<String>)>,
    /// Virtual ms it started running.
    started: i64,
    /// Trace seconds of work per second here ([`super::speed::speedup`]).
    speed: f64,
    /// Whether its end, when it comes on its own, is the job's completion.
    completes: bool,
}

struct World<'a> {
    run: &'a Run<'a>,
    core: Core,
    now: i64,
    seq: u64,
    heap: BinaryHeap<Reverse<(i64, u64)>>,
    evs: FxHashMap<u64, Ev>,
    /// The jobs' arrivals, kept out of `heap` and `evs` (a queued event
    /// costs about 250 bytes, a job index 4): job indices in arrival
    /// order, the next one at `next_arrival`. Arrival `k` in trace order
    /// has the sequence number `arrivals_seq + k + 1`, the one it had when
    /// every arrival was queued up front, so events come in the same order.
    arrivals: Vec<u32>,
    next_arrival: usize,
    arrivals_seq: u64,
    ticks: BTreeSet<i64>,
    atts: FxHashMap<AttemptId, Att>,
    /// Launch calls so far per attempt id.
    calls: FxHashMap<AttemptId, u32>,
    /// Each workload's job, at `id - 1` (the core numbers workloads 1, 2,
    /// … as they are submitted); [`NO_JOB`] where none.
    job_of: Vec<u32>,
    pending_job: Option<usize>,
    mult: Vec<f64>,
    down: Vec<bool>,
    /// Trace seconds of each job's work saved in checkpoints: where its
    /// next attempt resumes.
    done: Vec<f64>,
    /// Each job's newest complete checkpoint: its name and when it was
    /// marked complete (virtual ms). Told to the core after every attempt
    /// of a job with `[checkpoint]`, as the engine shell does.
    ckpt: Vec<Option<(String, i64)>>,
    tally: Tally,
    /// The usage ledger's sums ([`super::usage::RunLedger`]).
    ledger: super::usage::RunLedger,
    /// Per tenant ([`super::tenants`]).
    tenants: TenantTally,
    /// Tenants refused their nominal quota; `None` without a tenancy.
    refusals: Option<Refusals>,
    /// Tenants' shares against their fair shares, sampled.
    fairness: Option<super::fairness::Sampler>,
    /// Node index by name, for the core's launches.
    node_at: HashMap<String, usize>,
    /// The speed model's basis per (model a job was measured on, pool).
    speed_basis: FxHashMap<(&'a str, crate::fleet::PoolIdx), super::speed::Basis>,
    /// Check the core's indexes after every event ([`run_checked`]).
    check: bool,
    /// The first failed check.
    broken: Option<String>,
}

/// Runs one policy over the trace and reports what it achieved.
pub fn run(r: &Run<'_>, sink: &mut dyn RecordSink) -> PolicyReport {
    run_with(r, sink, false).0
}

/// Runs like [`run`], checking after every event that the engine core's
/// incremental indexes (scheduler snapshot, deadlines) match a rebuild
/// ([`Core::check_indexes`]). Slow; for tests. The error is the first
/// mismatch, with the virtual time it was found at.
#[doc(hidden)]
pub fn run_checked(r: &Run<'_>, sink: &mut dyn RecordSink) -> Result<PolicyReport, String> {
    match run_with(r, sink, true) {
        (report, None) => Ok(report),
        (_, Some(e)) => Err(e),
    }
}

fn run_with(r: &Run<'_>, sink: &mut dyn RecordSink, check: bool) -> (PolicyReport, Option<String>) {
    let names: Vec<String> = r.fleet.nodes.iter().map(|n| n.name.clone()).collect();
    let (mult, _) = faults::node_multipliers(r.seed, &names, r.faults);
    // The run's budgets are fixed: without any, ended attempts are kept
    // for none to read.
    let budget_history = r.tenancy.is_some_and(|t| !t.budgets.is_empty());
    let config =
        CoreConfig { placement: r.policy, refuse_never_fits: false, budget_history, ..CoreConfig::default() };
    let mut core = Core::new("sim000", r.fleet.clone(), config);
    core.seed_nonces(0x5eed);
    core.set_self_check(check);
    let mut w = World {
        run: r,
        core,
        now: EPOCH.0,
        seq: 0,
        heap: BinaryHeap::new(),
        evs: FxHashMap::default(),
        arrivals: Vec::new(),
        next_arrival: 0,
        arrivals_seq: 0,
        ticks: BTreeSet::new(),
        atts: FxHashMap::default(),
        calls: FxHashMap::default(),
        job_of: Vec::with_capacity(r.jobs.len()),
        pending_job: None,
        mult,
        down: vec![false; r.fleet.nodes.len()],
        done: vec![0.0; r.jobs.len()],
        ckpt: vec![None; r.jobs.len()],
        tally: Tally::for_fleet(r.fleet),
        ledger: super::usage::RunLedger::new(r.fleet, r.tenancy),
        tenants: TenantTally::new(r.tenancy),
        refusals: r.tenancy.filter(|t| !t.is_empty()).map(|t| Refusals::new(t, r.fleet)),
        fairness: r.tenancy.filter(|t| !t.is_empty()).map(|_| super::fairness::Sampler::default()),
        node_at: r.fleet.nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect(),
        speed_basis: FxHashMap::default(),
        check,
        broken: None,
    };
    w.tally.expect_workloads(r.jobs.len());
    if let Some(t) = r.tenancy.filter(|t| !t.is_empty()) {
        w.send(Event::SetTenancy { tenancy: Box::new(t.clone()) }, sink);
    }
    let last_submit = r.jobs.iter().map(|j| j.submit_s).fold(0.0, f64::max);
    w.arrivals_seq = w.seq;
    w.seq += r.jobs.len() as u64;
    let mut arrivals: Vec<u32> = (0..r.jobs.len() as u32).collect();
    // Stable: equal times keep trace order, as their sequence numbers do.
    arrivals.sort_by_key(|&i| w.arrival_key(i as usize).0);
    w.arrivals = arrivals;
    let horizon = last_submit + HORIZON_AFTER_LAST_SUBMIT_S;
    for (i, n) in r.fleet.nodes.iter().enumerate() {
        if n.state != NodeState::Ready {
            continue;
        }
        for (a, b) in faults::churn_windows(r.seed, &n.name, last_submit, r.faults) {
            w.at(a, Ev::Down(i));
            w.at(b, Ev::Up(i));
        }
    }
    let end = EPOCH.plus_secs(horizon).0;
    let next = |w: &World<'_>| w.peek().map(|k| k.0).filter(|&t| t <= end);
    if let Some(first) = next(&w) {
        sink.settled(Millis(w.now), Some(Millis(first)), &w.core);
    }
    while let Some((t, ev)) = w.pop() {
        if t > end {
            break;
        }
        w.now = t;
        let Some(ev) = ev else { continue };
        w.step(ev, sink);
        if w.broken.is_some() {
            break;
        }
        if let Some(n) = next(&w).filter(|&n| n > w.now) {
            if let Some(refusals) = &mut w.refusals {
                refusals.observe(Millis(w.now), &w.core);
            }
            if let Some(f) = &mut w.fairness {
                f.observe(Millis(w.now), Millis(n), &w.core);
            }
            sink.settled(Millis(w.now), Some(Millis(n)), &w.core);
        }
    }
    sink.settled(Millis(w.now), None, &w.core);
    let end = Millis(w.now);
    let refused = w.refusals.take().map(|x| x.finish(end)).unwrap_or_default();
    let report = PolicyReport {
        tenants: w.tenants.report(end, &refused),
        fairness: w.fairness.take().map(super::fairness::Sampler::finish),
        usage: Some(w.ledger.report(r.fleet, r.tenancy, end)),
        ..w.tally.report(r.policy.name(), end)
    };
    (report, w.broken)
}

/// `World::job_of`'s "no job".
const NO_JOB: u32 = u32::MAX;

impl World<'_> {
    /// The job workload `id` runs.
    fn job_of(&self, id: WorkloadId) -> Option<usize> {
        let i = usize::try_from(id.0.checked_sub(1)?).ok()?;
        self.job_of.get(i).filter(|&&j| j != NO_JOB).map(|&j| j as usize)
    }

    /// Workload `id` runs job `job`.
    fn set_job(&mut self, id: WorkloadId, job: usize) {
        let (Some(i), Ok(job)) =
            (id.0.checked_sub(1).and_then(|i| usize::try_from(i).ok()), u32::try_from(job))
        else {
            return;
        };
        if i >= self.job_of.len() {
            self.job_of.resize(i + 1, NO_JOB);
        }
        if let Some(slot) = self.job_of.get_mut(i) {
            *slot = job;
        }
    }

    /// Schedules `ev` at `secs` from the trace start.
    fn at(&mut self, secs: f64, ev: Ev) {
        let t = EPOCH.plus_secs(secs).0;
        self.push(t, ev);
    }

    fn after(&mut self, secs: f64, ev: Ev) {
        let t = Millis(self.now).plus_secs(secs).0;
        self.push(t, ev);
    }

    /// When job `i` arrives and its sequence number: its place in the
    /// event order.
    fn arrival_key(&self, i: usize) -> (i64, u64) {
        let t = self.run.jobs.get(i).map_or(EPOCH.0, |j| EPOCH.plus_secs(j.submit_s).0);
        (t, self.arrivals_seq + i as u64 + 1)
    }

    /// The next event's time and sequence number, queued or an arrival.
    fn peek(&self) -> Option<(i64, u64)> {
        let queued = self.heap.peek().map(|r| r.0);
        let arrival = self.arrivals.get(self.next_arrival).map(|&i| self.arrival_key(i as usize));
        match (queued, arrival) {
            (Some(q), Some(a)) => Some(q.min(a)),
            (q, a) => q.or(a),
        }
    }

    /// Takes the next event: its time and the event (`None`: one that was
    /// dropped).
    fn pop(&mut self) -> Option<(i64, Option<Ev>)> {
        let arrival = self.arrivals.get(self.next_arrival).map(|&i| (self.arrival_key(i as usize), i));
        match (self.heap.peek().map(|r| r.0), arrival) {
            (q, Some((a, i))) if q.is_none_or(|q| a < q) => {
                self.next_arrival += 1;
                Some((a.0, Some(Ev::Arrive(i as usize))))
            }
            _ => {
                let Reverse((t, seq)) = self.heap.pop()?;
                Some((t, self.evs.remove(&seq)))
            }
        }
    }

    fn push(&mut self, t: i64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq)));
        self.evs.insert(self.seq, ev);
    }

    fn send(&mut self, e: Event, sink: &mut dyn RecordSink) {
        let now = Millis(self.now);
        let actions = self.core.handle(e, now);
        if self.check
            && self.broken.is_none()
            && let Err(e) = self.core.check_indexes(now)
        {
            self.broken = Some(format!("at {} ms: {e}", now.0 - EPOCH.0));
        }
        let mut records = Vec::new();
        for a in actions {
            match a {
                Action::Record(r) => {
                    self.tally.observe(&r);
                    self.ledger.observe(&r);
                    self.tenants.observe(&r);
                    records.push(r);
                }
                Action::Launch { attempt, nodes, .. } => self.launch(attempt, &nodes),
                Action::Terminate { attempt, .. } => {
                    if self.atts.get(&attempt).is_some_and(|a| a.running && a.end.is_some()) {
                        self.checkpointed(attempt, true);
                    }
                    if let Some(a) = self.atts.get_mut(&attempt) {
                        a.epoch += 1;
                        a.end = Some((ProviderEnd::Cancelled, Vec::new()));
                    }
                    self.after(TERMINATE_S, Ev::Terminated(attempt));
                }
                // The simulator sets no webhooks: nothing is delivered.
                Action::Deliver(_) | Action::Release { .. } => {}
                Action::Collect { attempt, end, outputs, .. } => {
                    self.after(API_LATENCY_S, Ev::Collected(attempt, end, outputs));
                }
                Action::Reply { reply: Reply::Submitted { id, .. }, .. } => {
                    if let Some(j) = self.pending_job.take() {
                        self.set_job(id, j);
                        let job = &self.run.jobs[j];
                        let work = f64::from(job.gpus) * job.duration_s / 3600.0;
                        self.tally.work(id, work);
                        self.tenants.work(id, job.tenant.as_deref(), work);
                    }
                }
                Action::Reply { .. } => {}
            }
        }
        self.ledger.settle(now, self.run.fleet, self.run.tenancy);
        if !records.is_empty() {
            sink.batch(now, &records);
        }
        if let Some(t) = self.core.next_wake() {
            let t = t.0.max(self.now);
            if self.ticks.first().is_none_or(|&f| t < f) {
                self.ticks.insert(t);
                self.push(t, Ev::Tick);
            }
        }
    }

    fn step(&mut self, ev: Ev, sink: &mut dyn RecordSink) {
        match ev {
            Ev::Arrive(i) => {
                let Some(spec) = self.run.specs.spec(i) else { return };
                self.pending_job = Some(i);
                let hash = format!("sim-job-{i}");
                self.send(
                    Event::Submit {
                        request: i as u64,
                        spec: Box::new(spec),
                        spec_hash: hash,
                        idempotency_key: None,
                        by: None,
                        tenant: self.run.jobs[i].tenant.as_deref().map(str::to_string),
                    },
                    sink,
                );
            }
            Ev::LaunchReply(a, result) => {
                let ok = result.is_ok();
                let result = result.map(|()| LaunchAck {
                    provider_ref: format!("job {}", 10_000 + a.workload.0),
                    adopted: false,
                });
                if !ok {
                    // A definite refusal: nothing runs here. The core closes
                    // the attempt, or places it again under the same id at
                    // once (a capacity refusal), so it is forgotten first.
                    self.atts.remove(&a);
                }
                self.send(Event::LaunchResult { attempt: a, result }, sink);
                if let (true, Some(att)) = (ok, self.atts.get(&a)) {
                    let node = &self.run.fleet.nodes[att.nodes[0]];
                    let startup = self.run.fleet.pool(node.pool).startup.as_secs_f64();
                    let epoch = att.epoch;
                    self.after(startup, Ev::Running(a, epoch));
                }
            }
            Ev::Running(a, epoch) => self.on_running(a, epoch, sink),
            Ev::End(a, epoch) => {
                let Some(att) = self.atts.get(&a).filter(|x| x.epoch == epoch) else { return };
                let Some((end, _)) = att.end.clone() else { return };
                if !att.completes {
                    self.checkpointed(a, false);
                }
                self.send(Event::Status { attempt: a, status: AttemptStatus::Ended(end) }, sink);
            }
            Ev::Collected(a, end, outputs) => {
                let tail = self.atts.remove(&a).and_then(|x| x.end).map(|(_, t)| t).unwrap_or_default();
                self.calls.remove(&a);
                // What the shell finds in the checkpoint directory after an
                // attempt, before it collects it.
                if let Some(job) = self.job_of(a.workload)
                    && self.run.specs.shape(job).is_some_and(|s| s.checkpoint)
                {
                    let found = self.ckpt[job]
                        .clone()
                        .map(|(name, at_ms)| crate::engine::checkpoint::Found { name, at_ms, bytes: 0 });
                    self.send(Event::CheckpointFound { attempt: a, found }, sink);
                }
                let outputs =
                    if outputs { OutputsResult::Collected { count: 0 } } else { OutputsResult::Skipped };
                self.send(Event::Collected { attempt: a, end, log_tail: tail, outputs }, sink);
            }
            Ev::Terminated(a) => self.send(Event::Terminated { attempt: a, result: Ok(()) }, sink),
            Ev::Notice(a, epoch, within_s) => {
                if self.atts.get(&a).is_some_and(|x| x.epoch == epoch && x.running) {
                    let message = format!("the provider reclaims this interruptible capacity in {within_s}s");
                    let status = AttemptStatus::Reclaiming { within_s, message };
                    self.send(Event::Status { attempt: a, status }, sink);
                }
            }
            Ev::Down(n) => self.node_down(n, sink),
            Ev::Up(n) => {
                self.down[n] = false;
                let node = self.run.fleet.nodes[n].name.clone();
                self.send(
                    Event::SetNodeState { request: 0, node, state: NodeState::Ready, note: None },
                    sink,
                );
            }
            Ev::Tick => {
                self.ticks.remove(&self.now);
                self.send(Event::Tick, sink);
            }
        }
    }

    fn launch(&mut self, a: AttemptId, nodes: &[String]) {
        let Some(idx) =
            nodes.iter().map(|node| self.node_at.get(node).copied()).collect::<Option<Vec<usize>>>()
        else {
            return;
        };
        let Some(&n) = idx.first() else { return };
        let Some(job) = self.job_of(a.workload) else { return };
        // A gang placed on fewer nodes than it asks for cannot run as
        // written (a scheduler that does not place gangs): refused for good.
        let Some(shape) = self.run.specs.shape(job).copied() else { return };
        let want = shape.node_count() as usize;
        if idx.len() != want {
            let e = LaunchError::Invalid(format!("a gang of {want} nodes was placed on {}", idx.len()));
            self.atts.entry(a).or_insert(Att {
                job,
                nodes: idx,
                epoch: 0,
                running: false,
                end: None,
                started: 0,
                speed: 1.0,
                completes: false,
            });
            self.after(API_LATENCY_S, Ev::LaunchReply(a, Err(e)));
            return;
        }
        self.atts.entry(a).or_insert(Att {
            job,
            nodes: idx,
            epoch: 0,
            running: false,
            end: None,
            started: 0,
            speed: 1.0,
            completes: false,
        });
        // Every call draws anew: re-sends, and placements that take over
        // the id of one refused for capacity.
        let calls = self.calls.entry(a).or_default();
        let call = *calls;
        *calls += 1;
        let fleet = self.run.fleet;
        let pool = fleet.pool(fleet.nodes[n].pool);
        let fullness = pool_fullness(self.core.fleet(), fleet.nodes[n].pool);
        let ctx = FaultContext {
            interruptible: pool.interruptible,
            fullness,
            lemon: false,
            lemon_multiplier: 1.0,
            gpus: shape.gpus,
            nvidia: true,
        };
        let token = format!("{job}-{}", a.n);
        match launch_fault(self.run.seed, &token, call, &ctx, &self.run.faults.launch_rates()) {
            None => self.after(API_LATENCY_S, Ev::LaunchReply(a, Ok(()))),
            Some(LaunchFault::Capacity) => {
                let e = LaunchError::Capacity(format!("{}: insufficient capacity", pool.name));
                self.after(API_LATENCY_S, Ev::LaunchReply(a, Err(e)));
            }
            Some(LaunchFault::Api) => {
                let e = LaunchError::Api("503 Service Unavailable: please retry".into());
                self.after(API_LATENCY_S, Ev::LaunchReply(a, Err(e)));
            }
            // No answer: the core re-sends after its launch timeout.
            Some(LaunchFault::Timeout) => {}
        }
    }

    fn on_running(&mut self, a: AttemptId, epoch: u32, sink: &mut dyn RecordSink) {
        let Some(att) = self.atts.get(&a).filter(|x| x.epoch == epoch) else { return };
        let (job, nodes) = (att.job, att.nodes.clone());
        let r = self.run;
        let node = &r.fleet.nodes[nodes[0]];
        let pool = r.fleet.pool(node.pool);
        let per_node = r.specs.shape(job).map_or(0, |s| s.gpus);
        let gpus = per_node * nodes.len() as u32;
        let sig = SignatureContext {
            lifecycle: pool.lifecycle,
            node: &node.name,
            provider_ref: "",
            gpus: per_node,
            nvidia: true,
            gpu_memory_gb: pool.gpu_memory_gb(),
            now: Millis(self.now),
        };
        if let Some(rank) = nodes.iter().position(|&n| self.down[n]) {
            let name = &r.fleet.nodes[nodes[rank]].name;
            let sig = SignatureContext { node: name, ..sig };
            let end = ranked(fault_end(RunFault::NodeLost, &sig, r.seed, a), rank, name, nodes.len());
            self.finish_at(a, 0.0, end);
            return;
        }
        self.send(Event::Status { attempt: a, status: AttemptStatus::Running }, sink);
        // The job's true speed here, not the table the scheduler priced by.
        let measured_on = r.jobs[job].measured_on.as_deref().unwrap_or(super::speed::REFERENCE);
        let speed = self
            .speed_basis
            .entry((measured_on, node.pool))
            .or_insert_with(|| {
                super::speed::Basis::new(measured_on, pool.shape.accelerator.as_ref(), r.faults)
            })
            .truth(r.seed, job);
        let now = self.now;
        let Some(att) = self.atts.get_mut(&a).filter(|x| x.epoch == epoch) else { return };
        att.running = true;
        att.started = now;
        att.speed = speed;
        att.completes = true;
        let dur = r.jobs[job].duration_s;
        // Resumes from its last checkpoint.
        let done = self.done[job].min(dur);
        if done > 0.0 {
            self.tally.resumed(a.workload);
        }
        let mut end_s = (dur - done) / speed;
        let mut end = (ProviderEnd::Exited { code: 0 }, vec![format!("step {0}/{0}: done", dur.round())]);
        let own = match faults::fate(r.seed, job, r.faults, &r.jobs[job]) {
            Fate::Completes => None,
            Fate::UserError { at, kind } => {
                Some((at, (ProviderEnd::Exited { code: 1 }, faults::user_error_tail(kind))))
            }
            Fate::HostOom { at } => Some((at, (ProviderEnd::OutOfMemory, vec!["Killed".into()]))),
        };
        // The job's own error strikes when its work reaches that point.
        if let Some((at, e)) = own {
            end_s = ((at * dur - done).max(0.0) / speed).min(end_s);
            end = e;
            att.completes = false;
        }
        let mult = nodes.iter().map(|&n| self.mult[n]).sum::<f64>() / nodes.len() as f64;
        if let Some(s) = faults::strike(r.seed, job, a.n, gpus, mult, pool.interruptible, r.faults)
            && s.after_s < end_s
        {
            end_s = s.after_s;
            // Which rank it hits, for a gang.
            let rank = if nodes.len() > 1 {
                Rng::stream_n(r.seed, "rank", &job.to_string(), u64::from(a.n)).below(nodes.len() as u64)
                    as usize
            } else {
                0
            };
            let name = &r.fleet.nodes[nodes[rank]].name;
            let sig = SignatureContext { now: Millis(self.now).plus_secs(end_s), node: name, ..sig };
            end = ranked(fault_end(s.fault, &sig, r.seed, a), rank, name, nodes.len());
            // Spot capacity gives notice before it is reclaimed.
            let notice = r.faults.preempt_notice_s;
            if s.fault == RunFault::Preempted && notice > 0.0 {
                let within = notice.min(s.after_s);
                self.after(s.after_s - within, Ev::Notice(a, epoch, within.ceil() as u64));
            }
            if let Some(att) = self.atts.get_mut(&a) {
                att.completes = false;
            }
        }
        self.finish_at(a, end_s, end);
    }

    /// A running attempt stops short of the job's end: the work up to its
    /// last checkpoint is saved for the next attempt, and is not wasted.
    /// Stopped by SIGTERM (`sigterm`), a job that saves on it keeps all
    /// its work.
    fn checkpointed(&mut self, a: AttemptId, sigterm: bool) {
        let Some(att) = self.atts.get(&a).filter(|x| x.running) else { return };
        let Some(shape) = self.run.specs.shape(att.job) else { return };
        let Some(every) = shape.checkpoint_every_s() else { return };
        if every <= 0.0 {
            return;
        }
        let ran = Millis(self.now).secs_since(Millis(att.started)).max(0.0);
        let kept = if sigterm && faults::saves_on_sigterm(self.run.seed, att.job, self.run.faults) {
            ran
        } else {
            (ran / every).floor() * every
        };
        if kept > 0.0 {
            // Named by the work it holds; complete when it was written.
            let at = Millis(att.started).plus_secs(kept).0;
            let name = format!("step-{:.0}", self.done[att.job] + kept * att.speed);
            self.ckpt[att.job] = Some((name, at));
        }
        let dur = self.run.jobs[att.job].duration_s;
        let before = self.done[att.job];
        let after = (before + kept * att.speed).min(dur);
        self.done[att.job] = after;
        let gpus = f64::from(shape.gpus) * att.nodes.len() as f64;
        let kept_here = if att.speed > 0.0 { (after - before) / att.speed } else { 0.0 };
        self.tally.saved(a, gpus * kept_here / 3600.0);
    }

    fn finish_at(&mut self, a: AttemptId, after_s: f64, end: (ProviderEnd, Vec<String>)) {
        let Some(att) = self.atts.get_mut(&a) else { return };
        att.end = Some(end);
        let epoch = att.epoch;
        self.after(after_s, Ev::End(a, epoch));
    }

    /// A node goes away for maintenance: what runs there is lost.
    fn node_down(&mut self, n: usize, sink: &mut dyn RecordSink) {
        self.down[n] = true;
        let name = self.run.fleet.nodes[n].name.clone();
        self.send(
            Event::SetNodeState { request: 0, node: name.clone(), state: NodeState::Down, note: None },
            sink,
        );
        let mut here: Vec<AttemptId> = self
            .atts
            .iter()
            .filter(|(_, x)| x.nodes.contains(&n) && x.running && x.end.is_some())
            .map(|(a, _)| *a)
            .collect();
        here.sort();
        let lifecycle = self.run.fleet.pool(self.run.fleet.nodes[n].pool).lifecycle;
        for a in here {
            let Some(att) = self.atts.get_mut(&a) else { continue };
            att.epoch += 1;
            att.completes = false;
            let (rank, size) = (att.nodes.iter().position(|&x| x == n).unwrap_or(0), att.nodes.len());
            let sig = SignatureContext {
                lifecycle,
                node: &name,
                provider_ref: "",
                gpus: 0,
                nvidia: true,
                gpu_memory_gb: 0.0,
                now: Millis(self.now),
            };
            let end = ranked(fault_end(RunFault::NodeLost, &sig, self.run.seed, a), rank, &name, size);
            self.finish_at(a, 0.0, end);
        }
    }
}

/// A gang's end names the rank it came from, as a provider reports it.
fn ranked(
    end: (ProviderEnd, Vec<String>),
    rank: usize,
    node: &str,
    size: usize,
) -> (ProviderEnd, Vec<String>) {
    if size <= 1 {
        return end;
    }
    let (e, tail) = end;
    (ProviderEnd::Rank { rank: rank as u32, node: node.to_string(), end: Box::new(e) }, tail)
}

/// How a running fault ends the attempt and what its log says.
fn fault_end(f: RunFault, sig: &SignatureContext<'_>, seed: u64, a: AttemptId) -> (ProviderEnd, Vec<String>) {
    let provider_ref = format!("job {}", 10_000 + a.workload.0);
    let sig = SignatureContext { provider_ref: &provider_ref, ..sig.clone() };
    let key = format!("{}-{}", a.workload.0, a.n);
    let tail = stderr_tail(f, &sig, &mut Rng::stream(seed, "signature", &key));
    let mut lines: Vec<String> = tail.lines().map(str::to_string).collect();
    if lines.is_empty() && sig.lifecycle != Lifecycle::Job {
        lines.push("step 1200: loss 2.31".into());
    }
    (f.end(sig.node), lines)
}

/// Share of a pool's GPUs (or CPU cores) in use, 0..=1.
fn pool_fullness(fleet: &Fleet, p: crate::fleet::PoolIdx) -> f64 {
    let pool = fleet.pool(p);
    let nodes = fleet.pool_nodes(p);
    if pool.shape.gpus_per_node > 0 {
        let total = f64::from(pool.shape.gpus_per_node) * nodes.len() as f64;
        let free: f64 =
            nodes.iter().filter(|n| n.state == NodeState::Ready).map(|n| f64::from(n.free.gpus)).sum();
        if total > 0.0 { 1.0 - free / total } else { 1.0 }
    } else {
        let total = pool.shape.cpu_cores * nodes.len() as f64;
        let free: f64 = nodes.iter().filter(|n| n.state == NodeState::Ready).map(|n| n.free.cpu_cores).sum();
        if total > 0.0 { (1.0 - free / total).clamp(0.0, 1.0) } else { 1.0 }
    }
}
