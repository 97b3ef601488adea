//! The engine shell: runs the core on a tokio task and performs its
//! actions.
//!
//! Owns the loop that turns the outside world into core events — provider
//! results, commands from the handle (the API server, an in-process
//! console), status polls and timer wake-ups — and the core's actions into
//! effects. Every batch of records is written to the journal (one
//! transaction, fsync'd) *before* any effect of the same batch is
//! performed, any update is published or any command is answered: durable
//! before visible. Everything that arrived together shares that one commit
//! (group commit), with the audit record of each command it answers.
//! Provider calls run as spawned tasks that report back; nothing slow runs
//! on the loop itself. It never decides: the core does.

use super::clock::Clock;
use super::command::{Caller, Command, CommandResult, Refusal, shown_key};
use super::core::{Action, Core, Event, NodeNote, OutputsResult, Reply};
pub use super::handle::{EngineHandle, FleetStatus, REPLAY_READ_ONLY, Recent, RecordSender, StatusSender};
use super::handle::{Msg, Query};
use super::metrics::EngineMetrics;
use super::model::{
    AttemptId, AuditRecord, Batch, RETRY_OF, Record, WorkloadId, WorkloadRecord, WorkloadState,
};
use crate::failure::ProviderEnd;
use crate::fleet::NodeState;
use crate::journal::{Journal, JournalError, OwnerLock};
use crate::providers::{LaunchError, LaunchRequest, LogStream, Provider, SecretValue, secrets};
use crate::spec::Spec;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// How the shell paces itself.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// Where collected outputs go: `<artifacts>/w-17/2/…`.
    pub artifacts: PathBuf,
    /// Where logs are shipped while attempts run: `<logs>/w-17/2/stdout.log`.
    /// Every provider's logs end up here the same way, and stay after the
    /// provider has cleaned up.
    pub logs: PathBuf,
    /// Where workloads' checkpoints live between attempts:
    /// `<checkpoints>/w-17/…` (see [`crate::engine::checkpoint`]).
    pub checkpoints: PathBuf,
    /// Status of every live attempt is polled this often.
    pub poll_every: Duration,
    /// A running attempt whose provider copies checkpoints
    /// ([`Provider::copies_checkpoints`]) has its newest complete one
    /// copied into the store at most this often (and once at its end).
    pub checkpoint_sync_every: Duration,
    /// Providers are asked for what they own (leak detection) this often.
    pub reconcile_every: Duration,
    /// Each provider's inventory is taken again this often.
    pub inventory_every: Duration,
    /// A provider call taking longer than this counts as no answer.
    pub call_timeout: Duration,
    /// Lines of log tail handed to the classifier.
    pub tail_lines: usize,
}

impl ShellConfig {
    pub fn new(artifacts: PathBuf, logs: PathBuf) -> Self {
        let checkpoints =
            artifacts.parent().map_or_else(|| PathBuf::from("checkpoints"), |p| p.join("checkpoints"));
        Self {
            artifacts,
            logs,
            checkpoints,
            poll_every: Duration::from_millis(500),
            checkpoint_sync_every: Duration::from_secs(5),
            reconcile_every: Duration::from_secs(60),
            inventory_every: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            tail_lines: 200,
        }
    }
}

/// The providers the engine can drive, by provider name.
pub type Providers = HashMap<String, Arc<dyn Provider>>;

/// The longest the engine stays silent on its fleet status; a read model
/// that hears nothing for longer should call its data stale.
pub const STATUS_HEARTBEAT_S: f64 = 3.0;

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("journal write failed, so the engine stopped to keep the store consistent: {0}")]
    Journal(#[from] JournalError),
    #[error("journal writer task failed: {0}")]
    Join(String),
}

/// Who waits for a command's answer, and what the audit trail says of it.
struct Pending {
    reply: oneshot::Sender<CommandResult>,
    caller: Caller,
    action: &'static str,
    target: Option<String>,
}

struct Shell {
    core: Core,
    journal: Option<Journal>,
    _lock: OwnerLock,
    providers: Arc<Providers>,
    config: ShellConfig,
    clock: Arc<dyn Clock>,
    tx: mpsc::UnboundedSender<Msg>,
    updates: RecordSender,
    replies: HashMap<u64, Pending>,
    /// Answers decided outside the core (from the journal), sent with the
    /// next batch so their audit records commit with it.
    early_replies: Vec<(u64, Reply)>,
    next_request: u64,
    polling: HashSet<AttemptId>,
    /// Specs of live attempts, for output collection.
    specs: HashMap<WorkloadId, Arc<Spec>>,
    /// Commands received, waiting for `resolve_commands`.
    pending_commands: Vec<(u64, Command)>,
    /// Journal reads received, run after the batch.
    pending_queries: Vec<Query>,
    /// Where fleet status goes, and whether it changed since last sent.
    status: watch::Sender<Option<Arc<FleetStatus>>>,
    status_dirty: bool,
    /// A node command was handled in this batch: publish the status now.
    fleet_commanded: bool,
    metrics: Arc<EngineMetrics>,
    /// The provider each polled attempt belongs to, and who did not answer.
    polled: HashMap<AttemptId, String>,
    unreachable: BTreeMap<String, String>,
    /// Since when each unreachable provider has not answered.
    unreachable_since: BTreeMap<String, super::model::Millis>,
    /// Checkpoints copied through the store, per workload and attempt.
    checkpoints: CheckpointSyncs,
}

/// What the shell keeps to copy checkpoints through the store for
/// providers without shared storage.
#[derive(Default)]
struct CheckpointSyncs {
    /// Held while a workload's checkpoint directory is prepared and handed
    /// to a launch, or a checkpoint is copied into it: one at a time.
    locks: HashMap<WorkloadId, Arc<tokio::sync::Mutex<()>>>,
    /// Attempts seen running (a sync asks where they run).
    running: HashSet<AttemptId>,
    /// When each attempt's last sync started.
    last: HashMap<AttemptId, std::time::Instant>,
    /// Attempts with a sync under way.
    busy: Arc<std::sync::Mutex<HashSet<AttemptId>>>,
    /// What was last said of each attempt's syncs, said once.
    said: Arc<std::sync::Mutex<HashMap<AttemptId, String>>>,
}

impl CheckpointSyncs {
    fn lock(&mut self, w: WorkloadId) -> Arc<tokio::sync::Mutex<()>> {
        self.locks.entry(w).or_default().clone()
    }
}

/// Starts the engine on the current tokio runtime. The core must already
/// be restored from `journal`; `restored` are the actions that returned.
/// The returned future ends when the engine stops.
pub fn start(
    core: Core,
    journal: Journal,
    lock: OwnerLock,
    providers: Providers,
    config: ShellConfig,
    clock: Arc<dyn Clock>,
    restored: Vec<Action>,
) -> (EngineHandle, tokio::task::JoinHandle<Result<(), ShellError>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (updates, _) = broadcast::channel(super::handle::BACKLOG);
    let (status, status_rx) = watch::channel(None);
    let metrics = Arc::new(EngineMetrics::default());
    let handle =
        EngineHandle::local(tx.clone(), config.logs.clone(), updates.clone(), status_rx, metrics.clone());
    let shell = Shell {
        core,
        journal: Some(journal),
        _lock: lock,
        providers: Arc::new(providers),
        config,
        clock,
        tx,
        updates,
        replies: HashMap::new(),
        early_replies: Vec::new(),
        next_request: 1,
        polling: HashSet::new(),
        specs: HashMap::new(),
        pending_commands: Vec::new(),
        pending_queries: Vec::new(),
        status,
        status_dirty: true,
        fleet_commanded: false,
        metrics: metrics.clone(),
        polled: HashMap::new(),
        unreachable: BTreeMap::new(),
        unreachable_since: BTreeMap::new(),
        checkpoints: CheckpointSyncs::default(),
    };
    let task = tokio::spawn(shell.run(rx, restored));
    (handle, task)
}

impl Shell {
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        restored: Vec<Action>,
    ) -> Result<(), ShellError> {
        self.perform(restored).await?;
        for p in self.providers.keys().cloned().collect::<Vec<_>>() {
            self.spawn_reconcile(p);
        }
        let mut poll = tokio::time::interval(self.config.poll_every);
        let mut reconcile = tokio::time::interval(self.config.reconcile_every);
        let mut publish = tokio::time::interval(Duration::from_secs(1));
        let mut inventory = tokio::time::interval(self.config.inventory_every);
        for t in [&mut poll, &mut reconcile, &mut publish, &mut inventory] {
            t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        reconcile.reset();
        inventory.reset();
        loop {
            let wake = self.core.next_wake().map(|t| {
                let ms = (t.0 - self.clock.now().0).max(0) as u64;
                tokio::time::Instant::now() + Duration::from_millis(ms)
            });
            let sleep_until = wake.unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600));
            let mut events = Vec::new();
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { return Ok(()) };
                    if !self.accept(msg, &mut events) {
                        return self.stop().await;
                    }
                    // Take whatever else is already waiting: one journal
                    // transaction for the lot.
                    while events.len() < 512 {
                        match rx.try_recv() {
                            Ok(m) => if !self.accept(m, &mut events) { return self.stop().await },
                            Err(_) => break,
                        }
                    }
                }
                _ = tokio::time::sleep_until(sleep_until) => events.push(Event::Tick),
                _ = poll.tick() => { self.spawn_polls(); continue; }
                _ = publish.tick() => { self.publish_status(); continue; }
                _ = reconcile.tick() => {
                    for p in self.providers.keys().cloned().collect::<Vec<_>>() {
                        self.spawn_reconcile(p);
                    }
                    continue;
                }
                _ = inventory.tick() => {
                    for p in self.providers.keys().cloned().collect::<Vec<_>>() {
                        self.spawn_inventory(p);
                    }
                    continue;
                }
            }
            self.resolve_commands(&mut events).await?;
            let mut actions = Vec::new();
            let unknown = self.core.unknown_attempts().len();
            for ev in events {
                let now = self.clock.now();
                actions.extend(self.core.handle(ev, now));
            }
            if self.core.unknown_attempts().len() != unknown {
                self.status_dirty = true;
                let list: Vec<String> =
                    self.core.unknown_attempts().iter().map(|(t, p)| format!("{t} at {p}")).collect();
                tracing::error!(
                    "providers run {} attempt(s) under this store's tokens that the journal has no record of \
                     (it was restored from an older copy, lost its last commits, or was started over): {}. \
                     Canopy leaves them alone; stop them at their provider if they are not wanted",
                    list.len(),
                    list.join(", ")
                );
            }
            self.perform(actions).await?;
            self.run_queries().await?;
        }
    }

    /// Answers journal reads that arrived with this batch.
    async fn run_queries(&mut self) -> Result<(), ShellError> {
        if self.pending_queries.is_empty() {
            return Ok(());
        }
        let queries = std::mem::take(&mut self.pending_queries);
        self.with_journal(move |j| {
            for q in queries {
                q(j);
            }
            Ok(())
        })
        .await
    }

    /// Sends the fleet status when something changed since the last one,
    /// and at least every [`STATUS_HEARTBEAT_S`] seconds regardless, so a
    /// read model can tell a quiet engine from a stuck one.
    fn publish_status(&mut self) {
        let now = self.clock.now();
        let last = self.status.borrow().as_ref().map(|s| s.at);
        let due = last.is_none_or(|t| now.secs_since(t) >= STATUS_HEARTBEAT_S);
        if !self.status_dirty && !due {
            return;
        }
        self.status_dirty = false;
        let mut status = FleetStatus::of(&self.core, now, self.unreachable.clone());
        status.unreachable_since = self.unreachable_since.clone();
        self.status.send_replace(Some(Arc::new(status)));
    }

    async fn stop(&mut self) -> Result<(), ShellError> {
        tracing::info!("engine stopping; running attempts stay with their providers");
        Ok(())
    }

    /// Turns a message into core events; false on shutdown.
    fn accept(&mut self, msg: Msg, events: &mut Vec<Event>) -> bool {
        match msg {
            Msg::Event(e) => {
                if let Event::Status { attempt, .. } | Event::StatusFailed { attempt, .. } = &e {
                    self.polling.remove(attempt);
                }
                if let Event::Status {
                    attempt,
                    status:
                        crate::providers::AttemptStatus::Running
                        | crate::providers::AttemptStatus::Reclaiming { .. },
                } = &e
                {
                    self.checkpoints.running.insert(*attempt);
                }
                if let Event::Status { attempt, status: crate::providers::AttemptStatus::Ended(end) } = &e
                    && matches!(
                        end.inner(),
                        crate::failure::ProviderEnd::NodeLost { .. }
                            | crate::failure::ProviderEnd::Evicted { .. }
                    )
                    && let Some(provider) = self.polled.get(attempt).cloned()
                {
                    // A node is gone or out of service: the provider's own
                    // view of its nodes now, not at the next scheduled
                    // inventory, so the work is not placed there again.
                    self.spawn_inventory(provider);
                }
                self.note_reachability(&e);
                events.push(e);
            }
            Msg::Polled { token, event } => {
                if let Event::Status { attempt, .. } | Event::StatusFailed { attempt, .. } = &event
                    && self.core.live_token(*attempt).as_deref() != Some(token.as_str())
                {
                    self.polling.remove(attempt);
                    tracing::debug!(%attempt, "status of a placement that is no longer live: dropped");
                    return true;
                }
                return self.accept(Msg::Event(event), events);
            }
            Msg::Command { cmd, caller, reply } => {
                let request = self.next_request;
                self.next_request += 1;
                let (action, target) = (cmd.action(), cmd.target());
                self.replies.insert(request, Pending { reply, caller, action, target });
                self.pending_commands.push((request, cmd));
            }
            Msg::Query(q) => self.pending_queries.push(q),
            Msg::Shutdown => return false,
        }
        true
    }

    /// Tracks which providers answer status calls, for [`FleetStatus`].
    fn note_reachability(&mut self, e: &Event) {
        self.status_dirty = true;
        let (attempt, error) = match e {
            Event::Status { attempt, .. } => (attempt, None),
            Event::StatusFailed { attempt, error } => (attempt, Some(error.clone())),
            _ => return,
        };
        let Some(provider) = self.polled.remove(attempt) else { return };
        match error {
            Some(err) => {
                let now = self.clock.now();
                self.unreachable_since.entry(provider.clone()).or_insert(now);
                self.unreachable.insert(provider, err);
            }
            None => {
                self.unreachable.remove(&provider);
                self.unreachable_since.remove(&provider);
            }
        }
    }

    /// Turns commands into core events. Two need the journal first: a
    /// submit whose key belongs to a workload that already ended (the core
    /// only knows live ones), and a retry of an ended workload. Whatever
    /// arrived together is looked up in one read.
    async fn resolve_commands(&mut self, events: &mut Vec<Event>) -> Result<(), ShellError> {
        let pending = std::mem::take(&mut self.pending_commands);
        if pending.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = pending
            .iter()
            .filter_map(|(_, c)| match c {
                Command::Submit { idempotency_key: Some(k), .. } => Some(k.clone()),
                _ => None,
            })
            .collect();
        let retries: Vec<WorkloadId> = pending
            .iter()
            .filter_map(|(_, c)| if let Command::Retry { id } = c { Some(*id) } else { None })
            .collect();
        // An acknowledgement needs the ended workload's row (the core only
        // holds live ones).
        let acks: Vec<WorkloadId> = pending
            .iter()
            .filter_map(|(_, c)| if let Command::Acknowledge { id } = c { Some(*id) } else { None })
            .collect();
        let looked_up: Vec<WorkloadId> = retries.iter().chain(&acks).copied().collect();
        // A retry is keyed by what it retries: a second one finds the first.
        let keys: Vec<String> = keys.into_iter().chain(retries.iter().map(|id| retry_key(*id))).collect();
        let (by_key, by_id) = if keys.is_empty() && looked_up.is_empty() {
            (HashMap::new(), HashMap::new())
        } else {
            self.with_journal(move |j| {
                let mut by_key: HashMap<String, WorkloadRecord> = HashMap::new();
                for k in keys {
                    if let Some(w) = j.workload_by_key(&k)? {
                        by_key.insert(k, w);
                    }
                }
                let mut by_id: HashMap<WorkloadId, WorkloadRecord> = HashMap::new();
                for id in looked_up {
                    if let Some(w) = j.workload(id)? {
                        by_id.insert(id, w);
                    }
                }
                Ok((by_key, by_id))
            })
            .await?
        };
        for (request, cmd) in pending {
            let by = self.replies.get(&request).map(|p| p.caller.principal.clone());
            // Without tenants nobody has one; with them, the caller's, else
            // the default tenant (the socket owner's, the console's).
            let tenancy = self.core.tenancy();
            let tenant = if tenancy.is_empty() {
                None
            } else {
                self.replies
                    .get(&request)
                    .and_then(|p| p.caller.tenant.clone())
                    .or_else(|| tenancy.default_tenant.clone())
            };
            match cmd {
                Command::Submit { spec, idempotency_key: Some(key) } => {
                    let hash = spec.content_hash();
                    match by_key.get(&key) {
                        Some(w) if w.state.is_final() && w.spec_hash == hash => {
                            self.early_replies.push((request, Reply::Submitted { id: w.id, existing: true }))
                        }
                        Some(w) if w.state.is_final() => {
                            let message = format!(
                                "idempotency key {:?} was already used for {} with a different spec; \
                                 use a new key to submit a different workload",
                                shown_key(&key),
                                w.id
                            );
                            self.early_replies
                                .push((request, Reply::Error { code: Refusal::Conflict, message }))
                        }
                        _ => events.push(Event::Submit {
                            request,
                            spec,
                            spec_hash: hash,
                            idempotency_key: Some(key),
                            by,
                            tenant,
                        }),
                    }
                }
                Command::Retry { id } => match by_id.get(&id) {
                    Some(w) if w.state.is_final() => {
                        let mut spec = w.spec.clone();
                        spec.labels.insert(RETRY_OF.into(), id.to_string());
                        let spec_hash = spec.content_hash();
                        let key = retry_key(id);
                        match by_key.get(&key) {
                            // Retried before, and that retry has ended too:
                            // the same answer, not a second copy.
                            Some(done) => self
                                .early_replies
                                .push((request, Reply::Submitted { id: done.id, existing: true })),
                            // A live retry the core finds by its key.
                            None => events.push(Event::Submit {
                                request,
                                spec: Box::new(spec),
                                spec_hash,
                                idempotency_key: Some(key),
                                by,
                                tenant: w.tenant.clone(),
                            }),
                        }
                    }
                    Some(w) => {
                        let message =
                            format!("{id} is still {}; cancel it first or wait for it to end", w.state);
                        self.early_replies.push((request, Reply::Error { code: Refusal::Conflict, message }))
                    }
                    None => {
                        let message = format!("no workload {id} in this store");
                        self.early_replies.push((request, Reply::Error { code: Refusal::NotFound, message }))
                    }
                },
                Command::Acknowledge { id } => match by_id.get(&id) {
                    Some(w) if w.state == WorkloadState::Failed => {
                        let reason = self.replies.get(&request).and_then(|p| p.caller.reason.clone());
                        let by = by.unwrap_or_else(|| "unknown".into());
                        events.push(Event::Acknowledge { request, rec: Box::new(w.clone()), by, reason })
                    }
                    Some(w) => {
                        let message = format!(
                            "{id} is {}; only failed workloads are acknowledged (nothing to resolve)",
                            w.state
                        );
                        self.early_replies.push((request, Reply::Error { code: Refusal::Conflict, message }))
                    }
                    None => {
                        let message = format!("no workload {id} in this store");
                        self.early_replies.push((request, Reply::Error { code: Refusal::NotFound, message }))
                    }
                },
                other => {
                    self.fleet_commanded |= matches!(
                        other,
                        Command::Cordon { .. }
                            | Command::Uncordon { .. }
                            | Command::Drain { .. }
                            | Command::Unquarantine { .. }
                    );
                    let reason = self.replies.get(&request).and_then(|p| p.caller.reason.clone());
                    events.extend(command_event(request, other, by, reason, tenant))
                }
            }
        }
        Ok(())
    }

    /// Runs a blocking journal call off the async loop and waits for it.
    async fn with_journal<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Journal) -> Result<T, JournalError> + Send + 'static,
    ) -> Result<T, ShellError> {
        // On a multi-threaded runtime the call runs right here, with this
        // worker's other tasks moved to another thread: no hand-off to the
        // blocking pool and back, which is most of a short commit's latency.
        let multi =
            tokio::runtime::Handle::current().runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
        if multi && let Some(j) = self.journal.as_mut() {
            return Ok(tokio::task::block_in_place(|| f(j))?);
        }
        let Some(mut j) = self.journal.take() else {
            return Err(ShellError::Join("journal handle missing".into()));
        };
        let (j, r) = tokio::task::spawn_blocking(move || {
            let r = f(&mut j);
            (j, r)
        })
        .await
        .map_err(|e| ShellError::Join(e.to_string()))?;
        self.journal = Some(j);
        Ok(r?)
    }

    /// Records first, in one transaction with the audit records of the
    /// commands it answers; then updates, replies and effects.
    async fn perform(&mut self, actions: Vec<Action>) -> Result<(), ShellError> {
        if actions.is_empty() && self.early_replies.is_empty() {
            return Ok(());
        }
        self.status_dirty = true;
        let mut records = Vec::new();
        let mut replies = std::mem::take(&mut self.early_replies);
        let mut effects = Vec::new();
        for a in actions {
            match a {
                Action::Record(r) => records.push(r),
                Action::Reply { request, reply } => replies.push((request, reply)),
                other => effects.push(other),
            }
        }
        let now = self.clock.now();
        let mut answers = Vec::with_capacity(replies.len());
        for (request, reply) in replies {
            let result = match reply {
                Reply::Submitted { id, existing } => CommandResult::Submitted { id, existing },
                Reply::Done { message } => CommandResult::Ok { message },
                Reply::Error { code, message } => CommandResult::Error { code, message },
            };
            if let Some(p) = self.replies.remove(&request) {
                let target = match &result {
                    CommandResult::Submitted { id, .. } => Some(id.to_string()),
                    _ => p.target.clone(),
                };
                records.push(Record::Audit(Box::new(AuditRecord {
                    at: now,
                    principal: p.caller.principal.clone(),
                    origin: p.caller.origin.clone(),
                    action: p.action.to_string(),
                    target,
                    outcome: result.outcome(),
                    reason: p.caller.reason.clone(),
                })));
                answers.push((p.reply, result));
            }
        }
        if !records.is_empty() {
            let started = std::time::Instant::now();
            let (seq, records) = self
                .with_journal(move |j| {
                    let seq = j.append(&records)?;
                    Ok((seq, records))
                })
                .await?;
            self.metrics.journal_write.observe(started.elapsed());
            for r in &records {
                if let Record::Attempt(a) = r
                    && a.id.n == 1
                    && a.state == super::model::AttemptState::Placing
                    && let Some(w) = self.core.workload(a.id.workload)
                {
                    let ms = u64::try_from(a.placed_at.0 - w.submitted_at.0).unwrap_or(0);
                    self.metrics.placement.observe(Duration::from_millis(ms));
                }
            }
            let _ = self.updates.send(Arc::new(Batch { seq, records }));
        }
        if std::mem::take(&mut self.fleet_commanded) {
            // An operator changed a node: the status is published before
            // the answer, so whoever reads the fleet next (the CLI right
            // after, a console) sees the change, not a second-old status.
            self.status_dirty = true;
            self.publish_status();
        }
        for (reply, result) in answers {
            let _ = reply.send(result);
        }
        for a in effects {
            match a {
                Action::Record(_) | Action::Reply { .. } => {}
                Action::Launch { attempt, provider, token, pool, nodes, spec } => {
                    self.specs.insert(attempt.workload, spec.clone());
                    self.spawn_launch(attempt, provider, token, pool, nodes, spec);
                }
                Action::Terminate { attempt, provider, token } => {
                    self.spawn_terminate(attempt, provider, token)
                }
                Action::Collect { attempt, provider, token, end, outputs } => {
                    self.spawn_collect(attempt, provider, token, end, outputs)
                }
            }
        }
        Ok(())
    }

    fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    fn send(tx: &mpsc::UnboundedSender<Msg>, e: Event) {
        let _ = tx.send(Msg::Event(e));
    }

    #[allow(clippy::too_many_arguments)]
    fn spawn_launch(
        &mut self,
        attempt: AttemptId,
        provider: String,
        token: String,
        pool: String,
        nodes: Vec<String>,
        spec: Arc<Spec>,
    ) {
        let tx = self.tx.clone();
        let artifact_dir =
            self.config.artifacts.join(attempt.workload.to_string()).join(attempt.n.to_string());
        let checkpoint_dir =
            spec.checkpoint.as_ref().map(|_| self.config.checkpoints.join(attempt.workload.to_string()));
        let timeout = self.config.call_timeout;
        let Some(p) = self.provider(&provider) else {
            let err = LaunchError::Rejected(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
        };
        let lock = checkpoint_dir.as_ref().map(|_| self.checkpoints.lock(attempt.workload));
        tokio::spawn(async move {
            // The directory stays as prepared until the launch has taken
            // what it needs (a provider that copies reads it).
            let _held = match &lock {
                Some(l) => Some(l.lock().await),
                None => None,
            };
            let secrets = match secrets::resolve_secrets(&spec.runtime.secrets, |k| std::env::var(k).ok()) {
                Ok(s) => s,
                Err(e) => {
                    let err = LaunchError::Invalid(e.to_string());
                    return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
                }
            };
            // Only the newest complete checkpoint is handed on.
            if let Some(dir) = &checkpoint_dir {
                let prepared = {
                    let dir = dir.clone();
                    tokio::task::spawn_blocking(move || crate::engine::checkpoint::prepare(&dir)).await
                };
                match prepared.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())) {
                    Err(e) => {
                        let err = LaunchError::Rejected(format!(
                            "cannot prepare the checkpoint directory {}: {e}",
                            dir.display()
                        ));
                        return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
                    }
                    // Handed in place, any size; copied, within the cap.
                    Ok(Some(f)) if p.copies_checkpoints() => {
                        if let Some(ck) = &spec.checkpoint
                            && crate::engine::checkpoint::over_cap(ck, f.bytes)
                        {
                            let message = format!(
                                "checkpoint {} ({}) is over the checkpoint cap ({}, checkpoint.max_gb) for \
                                 copying to {provider}; attempt {} starts without it",
                                f.name,
                                crate::units::human_bytes(f.bytes),
                                cap_text(ck),
                                attempt.n
                            );
                            Self::send(&tx, Event::CheckpointNotCopied { attempt, message });
                        }
                    }
                    Ok(_) => {}
                }
            }
            let node = nodes.first().cloned().unwrap_or_default();
            let req = LaunchRequest {
                attempt,
                token,
                spec,
                pool,
                node,
                secrets,
                artifact_dir,
                nodes,
                checkpoint_dir,
            };
            let result = match tokio::time::timeout(timeout, p.launch(&req)).await {
                Ok(r) => r,
                Err(_) => Err(LaunchError::Timeout),
            };
            Self::send(&tx, Event::LaunchResult { attempt, result });
        });
    }

    fn spawn_terminate(&self, attempt: AttemptId, provider: String, token: String) {
        let tx = self.tx.clone();
        // A stop may wait the workload's grace before it SIGKILLs.
        let grace = self
            .with_spec(attempt.workload, |s| s.runtime.stop_grace())
            .unwrap_or(crate::spec::Runtime::DEFAULT_STOP_GRACE);
        // An evicting drain may set its own; a preemption notice leaves at
        // most its own time; an owner's reclaim, what is left of its grace
        // (a stop carried out again after a restart does not start it
        // over). Each is given to the provider as a bound.
        let bounded = match self.core.stop_reason(attempt) {
            Some(ProviderEnd::Evicted { grace_s: Some(g), .. }) => Some(Duration::from_secs(*g)),
            Some(ProviderEnd::Reclaimed { grace_s, .. }) => Some(grace.min(Duration::from_secs(*grace_s))),
            Some(ProviderEnd::OwnerReclaim { grace_s, kill_at_ms, .. }) => {
                let left = kill_at_ms.map_or(Duration::MAX, |at| {
                    Duration::from_millis(u64::try_from(at - self.clock.now().0).unwrap_or(0))
                });
                Some(grace.min(Duration::from_secs(*grace_s)).min(left))
            }
            _ => None,
        };
        let grace = bounded.unwrap_or(grace);
        let timeout = self.config.call_timeout + grace;
        let Some(p) = self.provider(&provider) else {
            let result = Err(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::Terminated { attempt, result });
        };
        tokio::spawn(async move {
            let stop = async {
                match bounded {
                    Some(g) => p.terminate_within(&token, g).await,
                    None => p.terminate(&token).await,
                }
            };
            let result = match tokio::time::timeout(timeout, stop).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("terminate timed out".to_string()),
            };
            Self::send(&tx, Event::Terminated { attempt, result });
        });
    }

    /// `f` of a live workload's spec: the one this shell launched, else the
    /// core's (restored after a restart).
    fn with_spec<T>(&self, w: WorkloadId, f: impl Fn(&Spec) -> T) -> Option<T> {
        match self.specs.get(&w) {
            Some(s) => Some(f(s)),
            None => self.core.workload(w).map(|r| f(&r.spec)),
        }
    }

    /// The values of a workload's secrets, to mask them in shipped logs
    /// should the workload print one. Read from the engine's environment,
    /// as at launch; never stored.
    fn secret_values(&self, w: WorkloadId) -> Arc<Vec<SecretValue>> {
        let names = self.with_spec(w, |s| s.runtime.secrets.clone()).unwrap_or_default();
        let values = names.iter().filter_map(|n| std::env::var(n).ok()).map(SecretValue::new).collect();
        Arc::new(values)
    }

    fn spawn_polls(&mut self) {
        let live = self.core.live_attempts();
        self.spawn_checkpoint_syncs(&live);
        for (attempt, provider, token) in live {
            if !self.polling.insert(attempt) {
                continue;
            }
            let tx = self.tx.clone();
            let timeout = self.config.call_timeout;
            let Some(p) = self.provider(&provider) else {
                self.polling.remove(&attempt);
                continue;
            };
            let logs = log_dir(&self.config.logs, attempt);
            let mask = self.secret_values(attempt.workload);
            let clock = self.clock.clone();
            self.polled.insert(attempt, provider.clone());
            tokio::spawn(async move {
                ship_logs(&*p, &token, &logs, &mask, &*clock).await;
                let e = match tokio::time::timeout(timeout, p.status(&token)).await {
                    Ok(Ok(status)) => Event::Status { attempt, status },
                    Ok(Err(e)) => Event::StatusFailed { attempt, error: e.to_string() },
                    Err(_) => Event::StatusFailed { attempt, error: "status call timed out".into() },
                };
                let _ = tx.send(Msg::Polled { token, event: e });
            });
        }
    }

    /// Copies each running attempt's newest complete checkpoint into the
    /// store where its provider copies checkpoints: at most every
    /// `checkpoint_sync_every`, one copy at a time per workload, so a host
    /// that dies mid-run has left its last checkpoint with Canopy.
    fn spawn_checkpoint_syncs(&mut self, live: &[(AttemptId, String, String)]) {
        let ids: HashSet<AttemptId> = live.iter().map(|(a, _, _)| *a).collect();
        let workloads: HashSet<WorkloadId> = ids.iter().map(|a| a.workload).collect();
        let c = &mut self.checkpoints;
        c.running.retain(|a| ids.contains(a));
        c.last.retain(|a, _| ids.contains(a));
        c.locks.retain(|w, _| workloads.contains(w));
        c.said.lock().unwrap_or_else(|e| e.into_inner()).retain(|a, _| ids.contains(a));
        let now = std::time::Instant::now();
        for (attempt, provider, token) in live {
            let attempt = *attempt;
            if !self.checkpoints.running.contains(&attempt)
                || self
                    .checkpoints
                    .last
                    .get(&attempt)
                    .is_some_and(|t| now - *t < self.config.checkpoint_sync_every)
            {
                continue;
            }
            let Some(p) = self.provider(provider).filter(|p| p.copies_checkpoints()) else { continue };
            let Some(Some(ck)) = self.with_spec(attempt.workload, |s| s.checkpoint.clone()) else { continue };
            if !self.checkpoints.busy.lock().unwrap_or_else(|e| e.into_inner()).insert(attempt) {
                continue;
            }
            self.checkpoints.last.insert(attempt, now);
            let lock = self.checkpoints.lock(attempt.workload);
            let busy = self.checkpoints.busy.clone();
            let said = self.checkpoints.said.clone();
            let dir = self.config.checkpoints.join(attempt.workload.to_string());
            let tx = self.tx.clone();
            let (provider, token) = (provider.clone(), token.clone());
            tokio::spawn(async move {
                let r = {
                    let _held = lock.lock().await;
                    p.sync_checkpoint(&token, &dir, crate::engine::checkpoint::cap_bytes(&ck)).await
                };
                report_sync(&tx, &said, attempt, &provider, &ck, r);
                busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&attempt);
            });
        }
    }

    fn spawn_reconcile(&self, provider: String) {
        let Some(p) = self.provider(&provider) else { return };
        let tx = self.tx.clone();
        let store = self.core.store_id().to_string();
        tokio::spawn(async move {
            match p.list_owned(&store).await {
                Ok(owned) => {
                    let tokens = owned.into_iter().filter(|o| o.running).map(|o| o.token).collect();
                    Self::send(&tx, Event::Owned { provider, tokens });
                }
                Err(e) => tracing::warn!(%provider, error = %e, "could not list owned resources"),
            }
        });
    }

    /// Takes a provider's inventory again and hands it to the core, which
    /// replaces that provider's pools and nodes (keeping Canopy's own use).
    fn spawn_inventory(&self, provider: String) {
        let Some(p) = self.provider(&provider) else { return };
        let tx = self.tx.clone();
        let timeout = self.config.call_timeout;
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, p.inventory()).await {
                Ok(Ok(inv)) => {
                    Self::send(&tx, Event::Inventory { provider, pools: inv.into_pool_defs() });
                }
                Ok(Err(e)) => tracing::warn!(%provider, error = %e, "could not refresh the inventory"),
                Err(_) => tracing::warn!(%provider, "inventory refresh timed out"),
            }
        });
    }

    fn spawn_collect(
        &mut self,
        attempt: AttemptId,
        provider: String,
        token: String,
        end: ProviderEnd,
        outputs: bool,
    ) {
        let tx = self.tx.clone();
        let tail_lines = self.config.tail_lines;
        let spec = self
            .specs
            .get(&attempt.workload)
            .cloned()
            .or_else(|| self.core.workload(attempt.workload).map(|w| Arc::new(w.spec.clone())));
        let dest = self.config.artifacts.join(attempt.workload.to_string()).join(attempt.n.to_string());
        let Some(p) = self.provider(&provider) else {
            return Self::send(
                &tx,
                Event::Collected { attempt, end, log_tail: Vec::new(), outputs: OutputsResult::Skipped },
            );
        };
        let logs = log_dir(&self.config.logs, attempt);
        let mask = self.secret_values(attempt.workload);
        let clock = self.clock.clone();
        let checkpoints = spec
            .as_ref()
            .and_then(|s| s.checkpoint.clone())
            .map(|ck| (self.config.checkpoints.join(attempt.workload.to_string()), ck));
        let lock = self.checkpoints.lock(attempt.workload);
        let said = self.checkpoints.said.clone();
        tokio::spawn(async move {
            if let Some((dir, ck)) = checkpoints {
                let _held = lock.lock().await;
                // Copied through the store: what the attempt wrote last
                // comes in before the store is read (an attempt that never
                // launched wrote nothing; a lost node has nothing to give:
                // what it had was copied while it ran).
                let reachable = !matches!(
                    end,
                    ProviderEnd::LaunchRejected { .. }
                        | ProviderEnd::LaunchTimeout
                        | ProviderEnd::BootFailed { .. }
                        | ProviderEnd::NodeLost { .. }
                );
                if reachable && p.copies_checkpoints() {
                    let r = p.sync_checkpoint(&token, &dir, crate::engine::checkpoint::cap_bytes(&ck)).await;
                    report_sync(&tx, &said, attempt, &provider, &ck, r);
                }
                let found =
                    tokio::task::spawn_blocking(move || crate::engine::checkpoint::newest_complete(&dir))
                        .await
                        .ok()
                        .and_then(|r| {
                            r.map_err(|e| tracing::warn!(%attempt, "cannot read its checkpoints: {e}")).ok()
                        })
                        .flatten();
                Self::send(&tx, Event::CheckpointFound { attempt, found });
            }
            ship_logs(&*p, &token, &logs, &mask, &*clock).await;
            let mut log_tail = tail_lines_of(&logs.join("stdout.log"), tail_lines).await;
            log_tail.extend(tail_lines_of(&logs.join("stderr.log"), tail_lines).await);
            let outputs = match (outputs, spec) {
                (true, Some(spec)) => match p.outputs(&token, &spec, &dest).await {
                    Ok(c) => {
                        // What was left behind, and why, is in the manifest
                        // for the user (`skipped`), and in the engine's log.
                        for s in &c.skipped {
                            tracing::warn!(%attempt, output = %s.name, path = %s.path, "output not collected: {}", s.reason);
                        }
                        let manifest = serde_json::to_vec_pretty(&c).unwrap_or_default();
                        let at = dest.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            crate::private::dir_all(&at)?;
                            crate::private::write_replacing(&at.join("manifest.json"), &manifest)
                        })
                        .await;
                        OutputsResult::Collected { count: c.artifacts.len() }
                    }
                    Err(e) => OutputsResult::Failed { message: e.to_string() },
                },
                _ => OutputsResult::Skipped,
            };
            // Logs and outputs are Canopy's now: what the attempt left at
            // its provider may go (only providers on others' machines
            // remove anything).
            if let Err(e) = p.release(&token).await {
                tracing::warn!(%attempt, "could not remove what the attempt left at its provider: {e}");
            }
            Self::send(&tx, Event::Collected { attempt, end, log_tail, outputs });
        });
    }
}

/// The spec's checkpoint cap, as the operator wrote it and in bytes.
fn cap_text(ck: &crate::spec::Checkpoint) -> String {
    let gb = ck.max_gb.unwrap_or(crate::spec::Checkpoint::DEFAULT_MAX_GB);
    format!("{gb} GB, {}", crate::units::human_bytes(crate::engine::checkpoint::cap_bytes(ck)))
}

/// Says what a checkpoint sync found that matters, once: a checkpoint
/// over the cap in the workload's events, a failure in the engine's log.
fn report_sync(
    tx: &mpsc::UnboundedSender<Msg>,
    said: &std::sync::Mutex<HashMap<AttemptId, String>>,
    attempt: AttemptId,
    provider: &str,
    ck: &crate::spec::Checkpoint,
    r: Result<crate::providers::CheckpointCopy, crate::providers::ProviderError>,
) {
    use crate::providers::CheckpointCopy;
    let note = match &r {
        Ok(CheckpointCopy::UpToDate | CheckpointCopy::Copied(_)) => return,
        Ok(CheckpointCopy::OverCap(f)) => format!("over:{}:{}", f.name, f.at_ms),
        Err(e) => format!("error:{e}"),
    };
    let mut said = said.lock().unwrap_or_else(|e| e.into_inner());
    if said.get(&attempt) == Some(&note) {
        return;
    }
    said.insert(attempt, note);
    match r {
        Ok(CheckpointCopy::OverCap(f)) => {
            let message = format!(
                "checkpoint {} ({}) written on {provider} is over the checkpoint cap ({}, checkpoint.max_gb): \
                 it is not copied into Canopy's store, so a later attempt cannot resume from it",
                f.name,
                crate::units::human_bytes(f.bytes),
                cap_text(ck)
            );
            let _ = tx.send(Msg::Event(Event::CheckpointNotCopied { attempt, message }));
        }
        Err(e) => tracing::warn!(%attempt, "could not copy its newest checkpoint into the store: {e}"),
        Ok(_) => {}
    }
}

/// Where an attempt's shipped logs live.
pub fn log_dir(root: &std::path::Path, attempt: AttemptId) -> PathBuf {
    root.join(attempt.workload.to_string()).join(attempt.n.to_string())
}

/// Copies what is new in an attempt's logs since the last call into the
/// log store. The shipped file's length is the offset, so shipping resumes
/// where it stopped after a restart. At most 8 MiB per stream per call, so
/// one chatty workload cannot hog the engine. Secret values the workload
/// prints are masked byte for byte (`*`), keeping lengths and offsets.
/// Each chunk's offset and the time it was first read go in the index
/// beside the log ([`super::log_times`]) before the chunk does, so every
/// line keeps the time it was written (to within a poll), however late
/// it is read.
async fn ship_logs(
    p: &dyn Provider,
    token: &str,
    dir: &std::path::Path,
    mask: &[SecretValue],
    clock: &dyn Clock,
) {
    use tokio::io::AsyncWriteExt;
    const CHUNK: usize = 256 * 1024;
    // Private (0700 directories, 0600 files): logs may hold what no other
    // user of this host should read.
    if crate::private::dir_all_async(dir).await.is_err() {
        return;
    }
    for (stream, file) in [(LogStream::Stdout, "stdout.log"), (LogStream::Stderr, "stderr.log")] {
        let path = dir.join(file);
        let Ok(mut f) = crate::private::append_async(&path).await else {
            continue;
        };
        let mut offset = f.metadata().await.map(|m| m.len()).unwrap_or(0);
        // Where the next chunk lands in the shipped file (the provider's
        // offsets could skip).
        let mut at = offset;
        let mut times: Option<super::log_times::Writer> = None;
        for _ in 0..32 {
            match p.logs(token, stream, offset, CHUNK).await {
                Ok(mut c) if !c.data.is_empty() => {
                    let read_at = clock.now();
                    if times.is_none() {
                        times = super::log_times::Writer::open(&path).await.ok();
                    }
                    let Some(t) = times.as_mut() else { break };
                    if t.record(at, read_at).await.is_err() {
                        break;
                    }
                    mask_secrets(&mut c.data, mask);
                    if f.write_all(&c.data).await.is_err() {
                        break;
                    }
                    at += c.data.len() as u64;
                    offset = c.next_offset;
                }
                Ok(_) => break,
                Err(e) => {
                    tracing::debug!(%token, error = %e, "log shipping paused");
                    break;
                }
            }
        }
        let _ = f.flush().await;
    }
}

/// Overwrites every occurrence of each secret value with `*`. Values
/// shorter than 4 bytes are left alone: masking them would shred ordinary
/// text and protect nothing. (A value split across two chunks is not seen;
/// chunks are 256 KiB, so that takes a workload printing it at a boundary.)
pub fn mask_secrets(data: &mut [u8], secrets: &[SecretValue]) {
    for s in secrets {
        let v = s.expose().as_bytes();
        if v.len() < 4 || data.len() < v.len() {
            continue;
        }
        let mut i = 0;
        while i + v.len() <= data.len() {
            if &data[i..i + v.len()] == v {
                data[i..i + v.len()].fill(b'*');
                i += v.len();
            } else {
                i += 1;
            }
        }
    }
}

/// The last `lines` lines of a file, reading at most its last 256 KiB.
pub async fn tail_lines_of(path: &std::path::Path, lines: usize) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    const WINDOW: u64 = 256 * 1024;
    let Ok(mut f) = tokio::fs::File::open(path).await else { return Vec::new() };
    let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    if f.seek(std::io::SeekFrom::Start(start)).await.is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).await.is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut all: Vec<&str> = text.lines().collect();
    if start > 0 && !all.is_empty() {
        all.remove(0); // a partial first line
    }
    all[all.len().saturating_sub(lines)..].iter().map(|s| s.to_string()).collect()
}

/// The idempotency key of the retry of `id`: one retry per workload, so a
/// second `retry` (a double key press, a CLI run twice) answers with the
/// first.
fn retry_key(id: WorkloadId) -> String {
    format!("{RETRY_OF}:{id}")
}

/// Commands that need no journal look-up; `None` for those that do
/// (keyed submits and retries, which `resolve_commands` handles itself).
fn command_event(
    request: u64,
    cmd: Command,
    by: Option<String>,
    reason: Option<String>,
    tenant: Option<String>,
) -> Option<Event> {
    let note = |until| NodeNote {
        by: by.clone().unwrap_or_default(),
        reason: reason.clone(),
        until,
        ..NodeNote::default()
    };
    Some(match cmd {
        Command::Submit { idempotency_key: Some(_), .. } => return None,
        Command::Submit { spec, idempotency_key } => {
            let spec_hash = spec.content_hash();
            Event::Submit { request, spec, spec_hash, idempotency_key, by, tenant }
        }
        Command::Cancel { id } => Event::Cancel { request, id },
        Command::Cordon { node, until } => {
            Event::SetNodeState { request, node, state: NodeState::Cordoned, note: Some(note(until)) }
        }
        Command::Uncordon { node } => {
            Event::SetNodeState { request, node, state: NodeState::Ready, note: Some(note(None)) }
        }
        Command::Drain { node, evict, grace_s } => {
            let note = NodeNote { evict, grace_s, ..note(None) };
            Event::SetNodeState { request, node, state: NodeState::Draining, note: Some(note) }
        }
        Command::Unquarantine { node } => Event::Unquarantine { request, node },
        Command::Unexclude { id, target } => {
            Event::Unexclude { request, id, target, by: by.unwrap_or_default(), reason }
        }
        Command::Retry { .. } | Command::Acknowledge { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_secrets_are_masked_in_place() {
        let mut data = b"token=hf_abcdef123 and again hf_abcdef123.".to_vec();
        let len = data.len();
        mask_secrets(&mut data, &[SecretValue::new("hf_abcdef123"), SecretValue::new("ab")]);
        assert_eq!(data.len(), len, "offsets stay valid");
        assert_eq!(String::from_utf8(data).unwrap(), "token=************ and again ************.");
    }
}
