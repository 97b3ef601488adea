//! The engine shell: runs the core on a tokio task and performs its
//! actions.
//!
//! Owns the loop that turns the outside world into core events — provider
//! results, the store's inbox, in-process commands, status polls and timer
//! wake-ups — and the core's actions into effects. Every batch of records is
//! written to the journal (one transaction) *before* any effect of the same
//! batch is performed or any update is published: durable before visible.
//! Provider calls run as spawned tasks that report back; nothing slow runs
//! on the loop itself. It never decides: the core does.

use super::clock::Clock;
use super::core::{Action, Core, Event, OutputsResult, Reply};
use super::model::{AttemptId, AttemptRecord, EventRecord, Millis, Record, WorkloadId, WorkloadRecord};
use crate::failure::ProviderEnd;
use crate::fleet::{Fleet, NodeState};
use crate::health::HealthView;
use crate::journal::{Command, CommandResult, Journal, JournalError, OwnerLock, WorkloadFilter};
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
    /// Status of every live attempt is polled this often.
    pub poll_every: Duration,
    /// The store's inbox is read this often.
    pub inbox_every: Duration,
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
        Self {
            artifacts,
            logs,
            poll_every: Duration::from_millis(500),
            inbox_every: Duration::from_millis(100),
            reconcile_every: Duration::from_secs(60),
            inventory_every: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            tail_lines: 200,
        }
    }
}

/// The longest the engine stays silent on its fleet status; a read model
/// that hears nothing for longer should call its data stale.
pub const STATUS_HEARTBEAT_S: f64 = 3.0;

/// The providers the engine can drive, by provider name.
pub type Providers = HashMap<String, Arc<dyn Provider>>;

/// A read of the journal, run between batches; it answers on its own
/// channel and never fails the engine.
type Query = Box<dyn FnOnce(&mut Journal) + Send>;

enum Msg {
    Event(Event),
    Command { cmd: Command, reply: oneshot::Sender<CommandResult> },
    Query(Query),
    Shutdown,
}

/// The fleet as the engine sees it now, published for read models (the
/// console) when it changes, at most about once a second.
#[derive(Debug, Clone)]
pub struct FleetStatus {
    pub at: Millis,
    /// Node states and allocations as the core holds them.
    pub fleet: Fleet,
    pub health: HealthView,
    /// Workloads waiting because nothing fits them now.
    pub blocked: usize,
    /// Providers whose last status call failed, with the error; cleared
    /// when one answers again.
    pub unreachable: BTreeMap<String, String>,
}

impl FleetStatus {
    /// The fleet status of `core` at `now`: what the shell publishes, and
    /// what a replay (`canopy sim --watch`) publishes from the simulator's
    /// core.
    pub fn of(core: &Core, now: Millis, unreachable: BTreeMap<String, String>) -> Self {
        FleetStatus {
            at: now,
            fleet: core.fleet().clone(),
            health: core.health().view(now),
            blocked: core.blocked_count(),
            unreachable,
        }
    }
}

/// What a read model starts from: recent workloads (final ones too), their
/// attempts, and the newest events.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// Newest first.
    pub workloads: Vec<WorkloadRecord>,
    pub attempts: Vec<AttemptRecord>,
    /// Oldest first.
    pub events: Vec<EventRecord>,
}

/// A handle on a running engine: send commands, watch records go by.
#[derive(Clone)]
pub struct EngineHandle {
    tx: mpsc::UnboundedSender<Msg>,
    updates: broadcast::Sender<Arc<Vec<Record>>>,
    status: watch::Receiver<Option<Arc<FleetStatus>>>,
    /// Fed by a replay: no core to command, no journal to read.
    replay: bool,
}

/// Where a replay's records go (as [`EngineHandle::subscribe`] hands them on).
pub type RecordSender = broadcast::Sender<Arc<Vec<Record>>>;
/// Where a replay's fleet status goes (as [`EngineHandle::status`] hands it on).
pub type StatusSender = watch::Sender<Option<Arc<FleetStatus>>>;

/// Messages a replay's records channel holds for a slow subscriber.
const REPLAY_BACKLOG: usize = 4096;

/// What a command gets from a replay.
pub const REPLAY_READ_ONLY: &str = "replay: read-only (this is `canopy sim --watch`, not an engine)";

impl EngineHandle {
    /// A handle fed by a replay (`canopy sim --watch`) instead of an engine:
    /// records and fleet status arrive from the returned senders, commands
    /// are refused with [`REPLAY_READ_ONLY`], and journal reads
    /// ([`recent`](Self::recent), [`events`](Self::events)) fail: a replay
    /// keeps no journal.
    pub fn replay() -> (EngineHandle, RecordSender, StatusSender) {
        let (tx, _) = mpsc::unbounded_channel();
        let (updates, _) = broadcast::channel(REPLAY_BACKLOG);
        let (status, status_rx) = watch::channel(None);
        (EngineHandle { tx, updates: updates.clone(), status: status_rx, replay: true }, updates, status)
    }

    /// Whether this handle is fed by a replay.
    pub fn is_replay(&self) -> bool {
        self.replay
    }

    /// Sends a command and waits for the core's answer.
    pub async fn command(&self, cmd: Command) -> CommandResult {
        if self.replay {
            return CommandResult::Error { message: REPLAY_READ_ONLY.into() };
        }
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Command { cmd, reply }).is_err() {
            return CommandResult::Error { message: "the engine has stopped".into() };
        }
        rx.await.unwrap_or(CommandResult::Error { message: "the engine stopped before answering".into() })
    }

    /// Every batch of records, after it is durable.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Vec<Record>>> {
        self.updates.subscribe()
    }

    /// The fleet status as last published (`None` until the first one).
    pub fn status(&self) -> watch::Receiver<Option<Arc<FleetStatus>>> {
        self.status.clone()
    }

    /// The newest `limit` workloads with their attempts, and the newest
    /// `events` events, read from the journal between batches.
    pub async fn recent(&self, limit: usize, events: usize) -> Result<Recent, String> {
        self.query(move |j| {
            let filter = WorkloadFilter { limit: Some(limit), ..WorkloadFilter::default() };
            let workloads = j.workloads(&filter)?;
            let mut attempts = Vec::new();
            for w in &workloads {
                attempts.extend(j.attempts(w.id)?);
            }
            let last = j.last_event_seq()?;
            let since = last.saturating_sub(i64::try_from(events).unwrap_or(i64::MAX));
            let events = j.events_since(since, events)?.into_iter().map(|(_, e)| e).collect();
            Ok(Recent { workloads, attempts, events })
        })
        .await
    }

    /// Every event of one workload, oldest first.
    pub async fn events(&self, id: WorkloadId) -> Result<Vec<EventRecord>, String> {
        self.query(move |j| j.events(id)).await
    }

    async fn query<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Journal) -> Result<T, JournalError> + Send + 'static,
    ) -> Result<T, String> {
        if self.replay {
            return Err("replay: no journal to read".into());
        }
        let (reply, rx) = oneshot::channel();
        let q: Query = Box::new(move |j| {
            let _ = reply.send(f(j).map_err(|e| e.to_string()));
        });
        if self.tx.send(Msg::Query(q)).is_err() {
            return Err("the engine has stopped".into());
        }
        rx.await.unwrap_or_else(|_| Err("the engine stopped before answering".into()))
    }

    /// Asks the engine to stop after the current batch. Running attempts
    /// keep running at their providers and are re-adopted on the next start.
    pub fn shutdown(&self) {
        let _ = self.tx.send(Msg::Shutdown);
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error("journal write failed, so the engine stopped to keep the store consistent: {0}")]
    Journal(#[from] JournalError),
    #[error("journal writer task failed: {0}")]
    Join(String),
}

enum ReplyTo {
    Inbox(i64),
    Chan(oneshot::Sender<CommandResult>),
}

struct Shell {
    core: Core,
    journal: Option<Journal>,
    _lock: OwnerLock,
    providers: Arc<Providers>,
    config: ShellConfig,
    clock: Arc<dyn Clock>,
    tx: mpsc::UnboundedSender<Msg>,
    updates: broadcast::Sender<Arc<Vec<Record>>>,
    replies: HashMap<u64, ReplyTo>,
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
    /// The provider each polled attempt belongs to, and who did not answer.
    polled: HashMap<AttemptId, String>,
    unreachable: BTreeMap<String, String>,
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
    let (updates, _) = broadcast::channel(1024);
    let (status, status_rx) = watch::channel(None);
    let handle = EngineHandle { tx: tx.clone(), updates: updates.clone(), status: status_rx, replay: false };
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
        next_request: 1,
        polling: HashSet::new(),
        specs: HashMap::new(),
        pending_commands: Vec::new(),
        pending_queries: Vec::new(),
        status,
        status_dirty: true,
        polled: HashMap::new(),
        unreachable: BTreeMap::new(),
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
        let mut inbox = tokio::time::interval(self.config.inbox_every);
        let mut reconcile = tokio::time::interval(self.config.reconcile_every);
        let mut publish = tokio::time::interval(Duration::from_secs(1));
        let mut inventory = tokio::time::interval(self.config.inventory_every);
        for t in [&mut poll, &mut inbox, &mut reconcile, &mut publish, &mut inventory] {
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
                _ = inbox.tick() => { self.read_inbox(&mut events).await?; }
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
            for ev in events {
                let now = self.clock.now();
                actions.extend(self.core.handle(ev, now));
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
        let status = FleetStatus::of(&self.core, now, self.unreachable.clone());
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
                self.note_reachability(&e);
                events.push(e);
            }
            Msg::Command { cmd, reply } => {
                let request = self.next_request;
                self.next_request += 1;
                self.replies.insert(request, ReplyTo::Chan(reply));
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
                self.unreachable.insert(provider, err);
            }
            None => {
                self.unreachable.remove(&provider);
            }
        }
    }

    async fn read_inbox(&mut self, events: &mut Vec<Event>) -> Result<(), ShellError> {
        let now = self.clock.now();
        let taken = self.with_journal(move |j| j.take_commands(256, now)).await?;
        for (seq, cmd) in taken {
            let request = self.next_request;
            self.next_request += 1;
            self.replies.insert(request, ReplyTo::Inbox(seq));
            self.pending_commands.push((request, cmd));
        }
        self.resolve_commands(events).await
    }

    /// Turns commands into core events. Two need the journal first: a
    /// submit whose key belongs to a workload that already ended (the core
    /// only knows live ones), and a retry of an ended workload.
    async fn resolve_commands(&mut self, events: &mut Vec<Event>) -> Result<(), ShellError> {
        for (request, cmd) in std::mem::take(&mut self.pending_commands) {
            match cmd {
                Command::Submit { spec, idempotency_key: Some(key) } => {
                    let k = key.clone();
                    let known = self.with_journal(move |j| j.workload_by_key(&k)).await?;
                    let hash = spec.content_hash();
                    match known {
                        Some(w) if w.state.is_final() && w.spec_hash == hash => {
                            self.send_reply(request, Reply::Submitted { id: w.id, existing: true }).await?
                        }
                        Some(w) if w.state.is_final() => {
                            let message = format!(
                                "idempotency key {key:?} was already used for {} with a different spec; \
                                 use a new key to submit a different workload",
                                w.id
                            );
                            self.send_reply(request, Reply::Error { message }).await?
                        }
                        _ => events.push(Event::Submit {
                            request,
                            spec,
                            spec_hash: hash,
                            idempotency_key: Some(key),
                        }),
                    }
                }
                Command::Retry { id } => {
                    let old = self.with_journal(move |j| j.workload(id)).await?;
                    match old {
                        Some(w) if w.state.is_final() => {
                            let mut spec = w.spec;
                            spec.labels.insert("canopy.retry-of".into(), id.to_string());
                            let spec_hash = spec.content_hash();
                            events.push(Event::Submit {
                                request,
                                spec: Box::new(spec),
                                spec_hash,
                                idempotency_key: None,
                            })
                        }
                        Some(w) => {
                            let message =
                                format!("{id} is still {}; cancel it first or wait for it to end", w.state);
                            self.send_reply(request, Reply::Error { message }).await?
                        }
                        None => {
                            let message = format!("no workload {id} in this store");
                            self.send_reply(request, Reply::Error { message }).await?
                        }
                    }
                }
                other => events.extend(command_event(request, other)),
            }
        }
        Ok(())
    }

    /// Runs a blocking journal call off the async loop and waits for it.
    async fn with_journal<T: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut Journal) -> Result<T, JournalError> + Send + 'static,
    ) -> Result<T, ShellError> {
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

    /// Records first, in one transaction; then replies, updates and effects.
    async fn perform(&mut self, actions: Vec<Action>) -> Result<(), ShellError> {
        if actions.is_empty() {
            return Ok(());
        }
        self.status_dirty = true;
        let (records, effects): (Vec<Action>, Vec<Action>) =
            actions.into_iter().partition(|a| matches!(a, Action::Record(_)));
        let records: Vec<Record> = records
            .into_iter()
            .filter_map(|a| if let Action::Record(r) = a { Some(r) } else { None })
            .collect();
        if !records.is_empty() {
            let batch = records.clone();
            self.with_journal(move |j| j.append(&batch)).await?;
            let _ = self.updates.send(Arc::new(records));
        }
        for a in effects {
            match a {
                Action::Record(_) => {}
                Action::Reply { request, reply } => self.send_reply(request, reply).await?,
                Action::Launch { attempt, provider, pool, node, spec } => {
                    self.specs.insert(attempt.workload, spec.clone());
                    self.spawn_launch(attempt, provider, pool, node, spec);
                }
                Action::Terminate { attempt, provider } => self.spawn_terminate(attempt, provider),
                Action::Collect { attempt, provider, end, outputs } => {
                    self.spawn_collect(attempt, provider, end, outputs)
                }
            }
        }
        Ok(())
    }

    async fn send_reply(&mut self, request: u64, reply: Reply) -> Result<(), ShellError> {
        let result = match reply {
            Reply::Submitted { id, existing } => CommandResult::Submitted { id, existing },
            Reply::Done { message } => CommandResult::Ok { message },
            Reply::Error { message } => CommandResult::Error { message },
        };
        match self.replies.remove(&request) {
            Some(ReplyTo::Chan(tx)) => {
                let _ = tx.send(result);
            }
            Some(ReplyTo::Inbox(seq)) => {
                let now = self.clock.now();
                self.with_journal(move |j| j.complete_command(seq, &result, now)).await?
            }
            None => {}
        }
        Ok(())
    }

    fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    fn send(tx: &mpsc::UnboundedSender<Msg>, e: Event) {
        let _ = tx.send(Msg::Event(e));
    }

    fn spawn_launch(
        &self,
        attempt: AttemptId,
        provider: String,
        pool: String,
        node: String,
        spec: Arc<Spec>,
    ) {
        let tx = self.tx.clone();
        let token = attempt.token(self.core.store_id());
        let artifact_dir =
            self.config.artifacts.join(attempt.workload.to_string()).join(attempt.n.to_string());
        let timeout = self.config.call_timeout;
        let Some(p) = self.provider(&provider) else {
            let err = LaunchError::Rejected(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
        };
        tokio::spawn(async move {
            let secrets = match secrets::resolve_secrets(&spec.runtime.secrets, |k| std::env::var(k).ok()) {
                Ok(s) => s,
                Err(e) => {
                    let err = LaunchError::Invalid(e.to_string());
                    return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
                }
            };
            let req = LaunchRequest { attempt, token, spec, pool, node, secrets, artifact_dir };
            let result = match tokio::time::timeout(timeout, p.launch(&req)).await {
                Ok(r) => r,
                Err(_) => Err(LaunchError::Timeout),
            };
            Self::send(&tx, Event::LaunchResult { attempt, result });
        });
    }

    fn spawn_terminate(&self, attempt: AttemptId, provider: String) {
        let tx = self.tx.clone();
        let token = attempt.token(self.core.store_id());
        let timeout = self.config.call_timeout;
        let Some(p) = self.provider(&provider) else {
            let result = Err(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::Terminated { attempt, result });
        };
        tokio::spawn(async move {
            let result = match tokio::time::timeout(timeout, p.terminate(&token)).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("terminate timed out".to_string()),
            };
            Self::send(&tx, Event::Terminated { attempt, result });
        });
    }

    /// The values of a workload's secrets, to mask them in shipped logs
    /// should the workload print one. Read from the engine's environment,
    /// as at launch; never stored.
    fn secret_values(&self, w: WorkloadId) -> Arc<Vec<SecretValue>> {
        let names = self
            .specs
            .get(&w)
            .map(|s| s.runtime.secrets.clone())
            .or_else(|| self.core.workload(w).map(|r| r.spec.runtime.secrets.clone()))
            .unwrap_or_default();
        let values = names.iter().filter_map(|n| std::env::var(n).ok()).map(SecretValue::new).collect();
        Arc::new(values)
    }

    fn spawn_polls(&mut self) {
        for (attempt, provider) in self.core.live_attempts() {
            if !self.polling.insert(attempt) {
                continue;
            }
            let tx = self.tx.clone();
            let token = attempt.token(self.core.store_id());
            let timeout = self.config.call_timeout;
            let Some(p) = self.provider(&provider) else {
                self.polling.remove(&attempt);
                continue;
            };
            let logs = log_dir(&self.config.logs, attempt);
            let mask = self.secret_values(attempt.workload);
            self.polled.insert(attempt, provider.clone());
            tokio::spawn(async move {
                ship_logs(&*p, &token, &logs, &mask).await;
                let e = match tokio::time::timeout(timeout, p.status(&token)).await {
                    Ok(Ok(status)) => Event::Status { attempt, status },
                    Ok(Err(e)) => Event::StatusFailed { attempt, error: e.to_string() },
                    Err(_) => Event::StatusFailed { attempt, error: "status call timed out".into() },
                };
                Self::send(&tx, e);
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

    fn spawn_collect(&mut self, attempt: AttemptId, provider: String, end: ProviderEnd, outputs: bool) {
        let tx = self.tx.clone();
        let token = attempt.token(self.core.store_id());
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
        tokio::spawn(async move {
            ship_logs(&*p, &token, &logs, &mask).await;
            let mut log_tail = tail_lines_of(&logs.join("stdout.log"), tail_lines).await;
            log_tail.extend(tail_lines_of(&logs.join("stderr.log"), tail_lines).await);
            let outputs = match (outputs, spec) {
                (true, Some(spec)) => match p.outputs(&token, &spec, &dest).await {
                    Ok(arts) => {
                        let manifest = serde_json::to_vec_pretty(&arts).unwrap_or_default();
                        let _ = tokio::fs::create_dir_all(&dest).await;
                        let _ = tokio::fs::write(dest.join("manifest.json"), manifest).await;
                        OutputsResult::Collected { count: arts.len() }
                    }
                    Err(e) => OutputsResult::Failed { message: e.to_string() },
                },
                _ => OutputsResult::Skipped,
            };
            Self::send(&tx, Event::Collected { attempt, end, log_tail, outputs });
        });
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
async fn ship_logs(p: &dyn Provider, token: &str, dir: &std::path::Path, mask: &[SecretValue]) {
    use tokio::io::AsyncWriteExt;
    const CHUNK: usize = 256 * 1024;
    if tokio::fs::create_dir_all(dir).await.is_err() {
        return;
    }
    for (stream, file) in [(LogStream::Stdout, "stdout.log"), (LogStream::Stderr, "stderr.log")] {
        let path = dir.join(file);
        let Ok(mut f) = tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await else {
            continue;
        };
        let mut offset = f.metadata().await.map(|m| m.len()).unwrap_or(0);
        for _ in 0..32 {
            match p.logs(token, stream, offset, CHUNK).await {
                Ok(mut c) if !c.data.is_empty() => {
                    mask_secrets(&mut c.data, mask);
                    if f.write_all(&c.data).await.is_err() {
                        break;
                    }
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

/// Commands that need no journal look-up; `None` for those that do
/// (keyed submits and retries, which `resolve_commands` handles itself).
fn command_event(request: u64, cmd: Command) -> Option<Event> {
    Some(match cmd {
        Command::Submit { idempotency_key: Some(_), .. } => return None,
        Command::Submit { spec, idempotency_key } => {
            let spec_hash = spec.content_hash();
            Event::Submit { request, spec, spec_hash, idempotency_key }
        }
        Command::Cancel { id } => Event::Cancel { request, id },
        Command::Cordon { node } => Event::SetNodeState { request, node, state: NodeState::Cordoned },
        Command::Uncordon { node } => Event::SetNodeState { request, node, state: NodeState::Ready },
        Command::Drain { node } => Event::SetNodeState { request, node, state: NodeState::Draining },
        Command::Retry { .. } => return None,
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
