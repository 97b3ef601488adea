//! The one seam every client reads an engine through: commands, a stream
//! of durable record batches, fleet status, journal queries and logs.
//!
//! Three things sit behind an [`EngineHandle`]: the engine shell in this
//! process, a simulator replay (`canopy sim --watch`), or a remote server
//! reached over HTTP (`client::attach`). Views never know which.

use super::command::{Caller, Command, CommandResult, Refusal};
use super::core::Core;
use super::metrics::EngineMetrics;
use super::model::{
    AttemptId, AttemptRecord, AuditRecord, Batch, EventRecord, Millis, NodeIntent, Record, WorkloadId,
    WorkloadRecord, WorkloadState,
};
use crate::fleet::Fleet;
use crate::health::HealthView;
use crate::journal::{AuditFilter, Journal, JournalError, WorkloadFilter};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc, oneshot, watch};

/// The fleet as the engine sees it now, published for read models (the
/// console) when it changes, at most about once a second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Since when each of those has not answered.
    #[serde(default)]
    pub unreachable_since: BTreeMap<String, Millis>,
    /// Operators' standing cordons and drains: who, when, why, until.
    #[serde(default)]
    pub intents: BTreeMap<String, NodeIntent>,
    /// Attempts providers run under this store's tokens that the journal
    /// has no record of (token → provider): Canopy leaves them alone.
    #[serde(default)]
    pub unknown_attempts: BTreeMap<String, String>,
    /// Where each tenant stands in the fair-share order, served first
    /// first (empty without `[fair_share]`).
    #[serde(default)]
    pub fair_share: Vec<crate::tenant::fair::Standing>,
    /// Where each budget stands in its current period (empty without
    /// `[[budget]]`).
    #[serde(default)]
    pub budgets: Vec<crate::tenant::budget::Standing>,
    /// Webhook deliveries not yet delivered or given up, and how many of
    /// them are being tried now.
    #[serde(default)]
    pub deliveries_pending: usize,
    #[serde(default)]
    pub deliveries_in_flight: usize,
    /// The widths of the work the engine knows, which placement's fit
    /// factor reads ([`crate::schedule::DemandMix`]); a plan reads it too.
    #[serde(default)]
    pub demand: crate::schedule::DemandMix,
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
            intents: core.intents().clone(),
            unknown_attempts: core.unknown_attempts().clone(),
            unreachable_since: BTreeMap::new(),
            fair_share: core.fair_standings(),
            budgets: core.budget_standings(now),
            deliveries_pending: core.deliveries().0,
            deliveries_in_flight: core.deliveries().1,
            demand: core.demand().clone(),
        }
    }
}

/// What a read model starts from: recent workloads (final ones too), their
/// attempts, and the newest events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recent {
    /// Newest first: the newest `limit`, every live one and every
    /// unresolved failure, whatever their age.
    pub workloads: Vec<WorkloadRecord>,
    pub attempts: Vec<AttemptRecord>,
    /// Oldest first.
    pub events: Vec<EventRecord>,
    /// Workloads in the journal: more than `workloads` when the load is
    /// partial (the rest are paged on demand).
    pub total: u64,
    /// Workloads in the journal by state, as the engine counts them when
    /// it answers (`None`: a page, which does not recount).
    #[serde(default)]
    pub counts: Option<StateCounts>,
    /// Where the next older page starts: the oldest workload of the
    /// newest (or this) page, below which the journal holds more that this
    /// load left out. `None`: nothing older is left out.
    #[serde(default)]
    pub next_page: Option<WorkloadId>,
}

/// Workloads by state, counted over the whole journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCounts {
    pub queued: u64,
    pub placing: u64,
    pub launching: u64,
    pub running: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub cancelled: u64,
}

impl StateCounts {
    /// From `(state, count)` rows ([`Journal::count_by_state`]); a state
    /// this build does not know is left out.
    pub fn from_rows(rows: &[(String, u64)]) -> Self {
        let mut c = StateCounts::default();
        for (state, n) in rows {
            if let Ok(s) = state.parse() {
                *c.of_mut(s) += n;
            }
        }
        c
    }

    pub fn of(&self, s: WorkloadState) -> u64 {
        let mut c = *self;
        *c.of_mut(s)
    }

    pub fn of_mut(&mut self, s: WorkloadState) -> &mut u64 {
        match s {
            WorkloadState::Queued => &mut self.queued,
            WorkloadState::Placing => &mut self.placing,
            WorkloadState::Launching => &mut self.launching,
            WorkloadState::Running => &mut self.running,
            WorkloadState::Succeeded => &mut self.succeeded,
            WorkloadState::Failed => &mut self.failed,
            WorkloadState::Cancelled => &mut self.cancelled,
        }
    }

    pub fn total(&self) -> u64 {
        self.queued
            + self.placing
            + self.launching
            + self.running
            + self.succeeded
            + self.failed
            + self.cancelled
    }
}

/// Which of an attempt's log streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn file_name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout.log",
            Stream::Stderr => "stderr.log",
        }
    }
}

/// Bytes of a shipped log from an offset: `data` ends at `next_offset`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogBytes {
    pub data: Vec<u8>,
    pub next_offset: u64,
    /// When the bytes were written, as the engine knows it: (offset where
    /// a chunk starts, when it was first read), oldest first, the first
    /// covering the read's start ([`super::log_times`]). Empty for a log
    /// shipped before times were kept, or from a server that sends none.
    pub times: Vec<(u64, Millis)>,
}

impl LogBytes {
    /// When the byte at `offset` (a line's first) was written, if known.
    pub fn time_at(&self, offset: u64) -> Option<Millis> {
        super::log_times::time_at(&self.times, offset)
    }
}

/// Whether a handle can reach its engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// In-process, or connected to the server. `reloads` counts the times
    /// the reader must load its data afresh (on connecting, and when the
    /// server said this client fell behind); watch it and reload when it
    /// changes.
    Up { reloads: u64 },
    /// The server went away at `since`; the handle reconnects by itself.
    Down { since: Millis, error: String },
}

/// What a remote engine (an HTTP server) does for a handle; implemented by
/// `client::Client`.
#[async_trait::async_trait]
pub trait Remote: Send + Sync {
    async fn command(&self, cmd: Command, reason: Option<String>) -> CommandResult;
    async fn recent(&self, limit: usize, events: usize) -> Result<Recent, String>;
    /// Up to `limit` workloads older than `before`, with their attempts.
    async fn older(&self, before: WorkloadId, limit: usize) -> Result<Recent, String>;
    async fn events(&self, id: WorkloadId) -> Result<Vec<EventRecord>, String>;
    /// One workload with its attempts, whatever its age (`None`: no such
    /// workload).
    async fn workload(&self, id: WorkloadId) -> Result<Option<Held>, String>;
    async fn logs(
        &self,
        attempt: AttemptId,
        stream: Stream,
        offset: u64,
        max: usize,
    ) -> Result<LogBytes, String>;
    /// Audit records as `filter` selects them, newest first.
    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, String>;
}

/// One workload and its attempts, first to last.
pub type Held = (WorkloadRecord, Vec<AttemptRecord>);

/// A read of the journal, run between batches; it answers on its own
/// channel and never fails the engine.
pub(super) type Query = Box<dyn FnOnce(&mut Journal) + Send>;

pub(super) enum Msg {
    Event(super::core::Event),
    /// A status poll's answer (`Status` or `StatusFailed`) and the token
    /// it asked about: dropped when the attempt's live placement has
    /// another token by then (its provider refused the polled placement
    /// for capacity, and the attempt id went to the next placement).
    Polled {
        token: String,
        event: super::core::Event,
    },
    Command {
        cmd: Command,
        caller: Caller,
        reply: oneshot::Sender<CommandResult>,
    },
    Query(Query),
    Shutdown,
}

#[derive(Clone)]
enum Backend {
    /// The engine shell in this process, its log store and its counters.
    Local {
        tx: mpsc::UnboundedSender<Msg>,
        logs: PathBuf,
        metrics: Arc<EngineMetrics>,
    },
    /// Fed by a replay: no core to command, no journal to read.
    Replay,
    Remote(Arc<dyn Remote>),
}

/// A handle on a running engine: send commands, watch records go by.
#[derive(Clone)]
pub struct EngineHandle {
    backend: Backend,
    updates: broadcast::Sender<Arc<Batch>>,
    status: watch::Receiver<Option<Arc<FleetStatus>>>,
    link: watch::Receiver<Link>,
}

/// Where a replay's or a remote's batches go (as [`EngineHandle::subscribe`] hands them on).
pub type RecordSender = broadcast::Sender<Arc<Batch>>;
/// Where a replay's fleet status goes (as [`EngineHandle::status`] hands it on).
pub type StatusSender = watch::Sender<Option<Arc<FleetStatus>>>;
/// Where a remote handle's connection state goes.
pub type LinkSender = watch::Sender<Link>;

/// Batches a records channel holds for a slow subscriber before it lags.
pub const BACKLOG: usize = 4096;

/// What a command gets from a replay.
pub const REPLAY_READ_ONLY: &str = "replay: read-only (this is `canopy sim --watch`, not an engine)";

impl EngineHandle {
    pub(super) fn local(
        tx: mpsc::UnboundedSender<Msg>,
        logs: PathBuf,
        updates: RecordSender,
        status: watch::Receiver<Option<Arc<FleetStatus>>>,
        metrics: Arc<EngineMetrics>,
    ) -> EngineHandle {
        let (_, link) = watch::channel(Link::Up { reloads: 0 });
        EngineHandle { backend: Backend::Local { tx, logs, metrics }, updates, status, link }
    }

    /// The in-process engine's own counters (`None` for a replay or remote).
    pub fn metrics(&self) -> Option<Arc<EngineMetrics>> {
        match &self.backend {
            Backend::Local { metrics, .. } => Some(metrics.clone()),
            _ => None,
        }
    }

    /// A handle fed by a replay (`canopy sim --watch`) instead of an engine:
    /// records and fleet status arrive from the returned senders, commands
    /// are refused with [`REPLAY_READ_ONLY`], and journal reads
    /// ([`recent`](Self::recent), [`events`](Self::events)) fail: a replay
    /// keeps no journal.
    pub fn replay() -> (EngineHandle, RecordSender, StatusSender) {
        let (updates, _) = broadcast::channel(BACKLOG);
        let (status, status_rx) = watch::channel(None);
        let (_, link) = watch::channel(Link::Up { reloads: 0 });
        (
            EngineHandle { backend: Backend::Replay, updates: updates.clone(), status: status_rx, link },
            updates,
            status,
        )
    }

    /// A handle on a remote engine: commands and reads go to `remote`;
    /// batches, fleet status and the connection's state arrive from the
    /// returned senders, which the caller feeds from the server's stream.
    pub fn remote(remote: Arc<dyn Remote>) -> (EngineHandle, RecordSender, StatusSender, LinkSender) {
        let (updates, _) = broadcast::channel(BACKLOG);
        let (status, status_rx) = watch::channel(None);
        let (link, link_rx) = watch::channel(Link::Up { reloads: 0 });
        let handle = EngineHandle {
            backend: Backend::Remote(remote),
            updates: updates.clone(),
            status: status_rx,
            link: link_rx,
        };
        (handle, updates, status, link)
    }

    /// Whether this handle is fed by a replay.
    pub fn is_replay(&self) -> bool {
        matches!(self.backend, Backend::Replay)
    }

    /// Whether this handle talks to a server in another process.
    pub fn is_remote(&self) -> bool {
        matches!(self.backend, Backend::Remote(_))
    }

    /// Sends a command as the user running this process and waits for the
    /// engine's answer.
    pub async fn command(&self, cmd: Command) -> CommandResult {
        self.command_as(cmd, Caller::local("console")).await
    }

    /// Sends a command on behalf of `caller` and waits for the engine's
    /// answer, which comes once the change and its audit record are
    /// durable. A remote server decides the caller itself from the
    /// connection; only the reason travels.
    pub async fn command_as(&self, cmd: Command, caller: Caller) -> CommandResult {
        match &self.backend {
            Backend::Replay => CommandResult::error(Refusal::Unavailable, REPLAY_READ_ONLY),
            Backend::Remote(r) => r.command(cmd, caller.reason).await,
            Backend::Local { tx, .. } => {
                let (reply, rx) = oneshot::channel();
                if tx.send(Msg::Command { cmd, caller, reply }).is_err() {
                    return CommandResult::error(Refusal::Unavailable, "the engine has stopped");
                }
                rx.await.unwrap_or(CommandResult::error(
                    Refusal::Unavailable,
                    "the engine stopped before answering",
                ))
            }
        }
    }

    /// Every batch of records, after it is durable.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Batch>> {
        self.updates.subscribe()
    }

    /// The fleet status as last published (`None` until the first one).
    pub fn status(&self) -> watch::Receiver<Option<Arc<FleetStatus>>> {
        self.status.clone()
    }

    /// Whether the engine can be reached (always, in-process).
    pub fn link(&self) -> watch::Receiver<Link> {
        self.link.clone()
    }

    /// The newest `limit` workloads with their attempts — and every
    /// workload that is not final, whatever its age — and the newest
    /// `events` events.
    pub async fn recent(&self, limit: usize, events: usize) -> Result<Recent, String> {
        if let Backend::Remote(r) = &self.backend {
            return r.recent(limit, events).await;
        }
        self.read(move |j| recent(j, limit, events)).await
    }

    /// Up to `limit` workloads older than `before` with their attempts:
    /// the next page of a console's list (no events).
    pub async fn older(&self, before: WorkloadId, limit: usize) -> Result<Recent, String> {
        if let Backend::Remote(r) = &self.backend {
            return r.older(before, limit).await;
        }
        self.read(move |j| older(j, before, limit)).await
    }

    /// One workload with its attempts, whatever its age: what a console
    /// opens when it does not hold the workload.
    pub async fn workload(&self, id: WorkloadId) -> Result<Option<Held>, String> {
        if let Backend::Remote(r) = &self.backend {
            return r.workload(id).await;
        }
        self.read(move |j| held(j, id)).await
    }

    /// Every event of one workload, oldest first.
    pub async fn events(&self, id: WorkloadId) -> Result<Vec<EventRecord>, String> {
        if let Backend::Remote(r) = &self.backend {
            return r.events(id).await;
        }
        self.read(move |j| j.events(id)).await
    }

    /// Audit records as `filter` selects them, newest first.
    pub async fn audit(&self, filter: AuditFilter) -> Result<Vec<AuditRecord>, String> {
        if let Backend::Remote(r) = &self.backend {
            return r.audit(&filter).await;
        }
        self.read(move |j| j.audit(&filter)).await
    }

    /// Up to `max` bytes of an attempt's shipped log from `offset`.
    pub async fn logs(
        &self,
        attempt: AttemptId,
        stream: Stream,
        offset: u64,
        max: usize,
    ) -> Result<LogBytes, String> {
        match &self.backend {
            Backend::Remote(r) => r.logs(attempt, stream, offset, max).await,
            Backend::Replay => Err("replay: no logs".into()),
            Backend::Local { logs, .. } => {
                let path = super::shell::log_dir(logs, attempt).join(stream.file_name());
                read_log(&path, offset, max).await
            }
        }
    }

    /// Runs a read of the journal between the engine's batches (in-process
    /// engines only).
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Journal) -> Result<T, JournalError> + Send + 'static,
    ) -> Result<T, String> {
        let tx = match &self.backend {
            Backend::Local { tx, .. } => tx,
            Backend::Replay => return Err("replay: no journal to read".into()),
            Backend::Remote(_) => return Err("a remote engine's journal is read through its API".into()),
        };
        let (reply, rx) = oneshot::channel();
        let q: Query = Box::new(move |j| {
            let _ = reply.send(f(j).map_err(|e| e.to_string()));
        });
        if tx.send(Msg::Query(q)).is_err() {
            return Err("the engine has stopped".into());
        }
        rx.await.unwrap_or_else(|_| Err("the engine stopped before answering".into()))
    }

    /// Commits a batch the engine's core did not make (audit records of
    /// requests refused before the engine, token changes) in the engine's
    /// journal, between its own batches, and publishes it to subscribers
    /// like any other: no reader of the stream misses it. `write` makes
    /// exactly `records` durable (with whatever else belongs in the same
    /// transaction) and returns the batch's sequence number.
    pub async fn commit<T: Send + 'static>(
        &self,
        records: Vec<Record>,
        write: impl FnOnce(&mut Journal, &[Record]) -> Result<(u64, T), JournalError> + Send + 'static,
    ) -> Result<T, String> {
        let updates = self.updates.clone();
        self.read(move |j| {
            let (seq, out) = write(j, &records)?;
            if seq > 0 {
                let _ = updates.send(Arc::new(Batch { seq, records }));
            }
            Ok(out)
        })
        .await
    }

    /// Puts a new tenancy in force in the engine's core (after the journal
    /// holds it). A no-op on a replay or remote handle.
    pub fn set_tenancy(&self, tenancy: crate::tenant::Tenancy) {
        if let Backend::Local { tx, .. } = &self.backend {
            let _ = tx.send(Msg::Event(super::core::Event::SetTenancy { tenancy: Box::new(tenancy) }));
        }
    }

    /// Asks the engine to stop after the current batch. Running attempts
    /// keep running at their providers and are re-adopted on the next start.
    /// A no-op on a replay or remote handle.
    pub fn shutdown(&self) {
        if let Backend::Local { tx, .. } = &self.backend {
            let _ = tx.send(Msg::Shutdown);
        }
    }
}

/// The newest `limit` workloads, every live one and every unresolved
/// failure whatever its age, their attempts, the newest `events` events
/// and how many workloads the journal holds.
pub fn recent(j: &mut Journal, limit: usize, events: usize) -> Result<Recent, JournalError> {
    use super::model::WorkloadState as S;
    let filter = WorkloadFilter { limit: Some(limit), ..WorkloadFilter::default() };
    let mut workloads = j.workloads(&filter)?;
    let next_page = workloads.last().map(|w| w.id).filter(|_| workloads.len() >= limit);
    let live = WorkloadFilter {
        states: vec![S::Queued, S::Placing, S::Launching, S::Running],
        ..WorkloadFilter::default()
    };
    let unresolved = WorkloadFilter { unresolved: true, ..WorkloadFilter::default() };
    let mut seen: std::collections::HashSet<WorkloadId> = workloads.iter().map(|w| w.id).collect();
    for w in j.workloads(&live)?.into_iter().chain(j.workloads(&unresolved)?) {
        if seen.insert(w.id) {
            workloads.push(w);
        }
    }
    workloads.sort_by_key(|w| std::cmp::Reverse(w.id));
    let total = j.count_workloads(&WorkloadFilter::default())?;
    let ids: Vec<WorkloadId> = workloads.iter().map(|w| w.id).collect();
    let attempts = j.attempts_of(&ids)?;
    let last = j.last_event_seq()?;
    let since = last.saturating_sub(i64::try_from(events).unwrap_or(i64::MAX));
    let events = j.events_since(since, events)?.into_iter().map(|(_, e)| e).collect();
    let counts = Some(StateCounts::from_rows(&j.count_by_state()?));
    Ok(Recent { workloads, attempts, events, total, counts, next_page })
}

/// Up to `limit` workloads older than `before` with their attempts (no
/// events): the next page of a console's list.
pub fn older(j: &mut Journal, before: WorkloadId, limit: usize) -> Result<Recent, JournalError> {
    let filter = WorkloadFilter { before: Some(before), limit: Some(limit), ..WorkloadFilter::default() };
    let workloads = j.workloads(&filter)?;
    let total = j.count_workloads(&WorkloadFilter::default())?;
    let ids: Vec<WorkloadId> = workloads.iter().map(|w| w.id).collect();
    let attempts = j.attempts_of(&ids)?;
    let next_page = workloads.last().map(|w| w.id).filter(|_| workloads.len() >= limit);
    Ok(Recent { workloads, attempts, events: Vec::new(), total, counts: None, next_page })
}

/// One workload and its attempts, first to last.
pub fn held(j: &mut Journal, id: WorkloadId) -> Result<Option<Held>, JournalError> {
    let Some(w) = j.workload(id)? else { return Ok(None) };
    Ok(Some((w, j.attempts(id)?)))
}

/// Up to `max` bytes of a shipped log from `offset`, with the times they
/// were written (cut short where more than
/// [`super::log_times::MAX_PER_READ`] chunks would need them); an absent
/// file is empty.
pub async fn read_log(path: &std::path::Path, offset: u64, max: usize) -> Result<LogBytes, String> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogBytes { data: Vec::new(), next_offset: offset, times: Vec::new() });
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    // Past the end there is nothing yet (the log may still grow): reading
    // there is not tried, since an offset beyond what the file system can
    // hold fails (EINVAL) instead of reading nothing.
    let len = f.metadata().await.map_err(|e| format!("cannot read {}: {e}", path.display()))?.len();
    if offset >= len {
        return Ok(LogBytes { data: Vec::new(), next_offset: offset, times: Vec::new() });
    }
    f.seek(std::io::SeekFrom::Start(offset)).await.map_err(|e| e.to_string())?;
    let mut data = Vec::new();
    (&mut f).take(max as u64).read_to_end(&mut data).await.map_err(|e| e.to_string())?;
    let mut next_offset = offset + data.len() as u64;
    let mut times = Vec::new();
    if !data.is_empty() {
        // The index is written before the bytes: all read here have theirs.
        let (log, end) = (path.to_path_buf(), next_offset);
        // Bytes without their times are still the log: a bad index costs
        // only the times.
        let (t, cut) =
            match tokio::task::spawn_blocking(move || super::log_times::read(&log, offset, end)).await {
                Ok(Ok(found)) => found,
                Ok(Err(e)) => {
                    tracing::debug!(path = %path.display(), error = %e, "cannot read a log's times");
                    (Vec::new(), None)
                }
                Err(e) => return Err(e.to_string()),
            };
        if let Some(cut) = cut.filter(|c| *c > offset && *c < next_offset) {
            data.truncate((cut - offset) as usize);
            next_offset = cut;
        }
        times = t;
    }
    Ok(LogBytes { data, next_offset, times })
}
