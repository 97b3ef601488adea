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
use crate::journal::{Journal, JournalError, Ownership};
use crate::providers::{LaunchError, LaunchRequest, LogStream, Provider, SecretValue, secrets};
use crate::spec::Spec;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

mod commands;
mod effects;
mod logs;
use logs::ship_logs;
pub use logs::{log_dir, mask_secrets, tail_lines_of};

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
    /// How webhook deliveries are signed and sent; `None`: webhooks are
    /// off (and the core refuses specs that ask for them).
    pub webhooks: Option<crate::notify::send::Sender>,
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
            webhooks: None,
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
    _lock: Ownership,
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
    lock: Ownership,
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
            self.spawn_reconcile(p, true);
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
                        self.spawn_reconcile(p, false);
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
                if let Record::Delivery(d) = r {
                    self.metrics.webhook_try(d);
                }
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
                Action::Release { attempt, provider, token } => self.spawn_release(attempt, provider, token),
                Action::Deliver(d) => self.spawn_deliver(*d),
            }
        }
        Ok(())
    }
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
