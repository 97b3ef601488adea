//! Canopy as a service: the HTTP/JSON API over the store's socket and,
//! when asked, TCP (with TLS), in front of an engine in this process.
//!
//! It owns authentication (`auth`: tokens, principals), authorization
//! (`authz`: one table, one decision), the API's handlers (`api`), the
//! event stream (`sse`), metrics (`metrics`) and the OpenAPI document
//! (`openapi`). It never decides what happens to work: commands go to the
//! engine through its handle, and a 2xx to one means the change and its
//! audit record are committed to the journal (fsync'd). Reads go to the
//! journal through a pool of reader connections, never through the
//! engine's loop.

pub mod api;
pub mod auth;
pub mod authz;
pub mod conn;
pub mod error;
pub mod http_metrics;
pub mod listen;
pub mod metrics;
pub mod metrics_fleet;
pub mod openapi;
pub mod outcomes;
pub mod process_metrics;
pub mod prom;
pub mod refusals;
pub mod servers;
pub mod sse;
pub mod standby;
pub mod target;
pub mod tenants;
pub mod tokens;
pub mod unavailable;
pub mod usage;
pub mod views;
pub mod visible;

use crate::engine::handle::EngineHandle;
use crate::engine::model::AuditRecord;
use crate::home::Home;
use crate::journal::{Journal, JournalError};
use auth::Tokens;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server listens and paces its clients.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Also listen on TCP here (every other user and application comes in
    /// this way, with a token).
    pub listen: Option<SocketAddr>,
    /// TLS on the TCP listener: certificate and key, PEM.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Allow a non-loopback TCP listener without TLS.
    pub insecure_listen: bool,
    /// Batches one event-stream client may be behind before it is sent a
    /// `resync` and dropped.
    pub stream_buffer: usize,
    /// How long a connection may take to send a whole request head, from
    /// when it opens or its previous response ended (so also how long an
    /// idle keep-alive connection stays open). Never runs while a response
    /// is being sent.
    pub header_read_timeout: Duration,
    /// How long a request body may stop arriving, or a response wait for
    /// the client to read it, before the connection is closed.
    pub idle_timeout: Duration,
    /// TCP connections open at once (the store's socket has no cap);
    /// clamped below the open-file limit (see [`conn::Limits`]).
    pub max_connections: usize,
    /// TCP connections that have not yet sent a request with a valid token;
    /// a new one beyond it takes the place of the oldest idle one.
    pub max_unauthenticated: usize,
    /// The MCP server at `/mcp`: its confirmation threshold and the
    /// browser origins it admits.
    pub mcp: crate::mcp::McpOptions,
    /// The journal lease's term (PostgreSQL): who `GET /v1/servers` counts
    /// as gone.
    pub lease_term: Duration,
    /// Listeners bound already, to accept on instead of binding `listen`
    /// (a server on PostgreSQL keeps its own across leading and standing
    /// by; see [`listen::Bound`]). `None`: bound when serving starts,
    /// closed when it stops.
    pub bound: Option<listen::Bound>,
}

impl ServerOptions {
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(20);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
    pub const DEFAULT_MAX_UNAUTHENTICATED: usize = 256;
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            listen: None,
            tls: None,
            insecure_listen: false,
            stream_buffer: 1024,
            header_read_timeout: Self::DEFAULT_HEADER_READ_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            max_unauthenticated: Self::DEFAULT_MAX_UNAUTHENTICATED,
            mcp: crate::mcp::McpOptions {
                confirm_above_usd: Some(crate::mcp::McpOptions::DEFAULT_CONFIRM_ABOVE_USD),
                allowed_origins: Vec::new(),
            },
            lease_term: crate::journal::LEASE_TERM,
            bound: None,
        }
    }
}

/// What handlers share.
pub struct ServerState {
    /// The engine this server leads with; `None` on a standby, which
    /// serves the routes that read only the journal and forwards the rest
    /// (see [`standby`]).
    pub engine: Option<EngineHandle>,
    /// On a standby: the lease row it last read (who leads, and where).
    pub standby: Option<crate::ha::LeaderView>,
    pub home: Home,
    pub store_id: String,
    pub tokens: Tokens,
    /// Requests refused for their token, counted for the audit trail.
    pub refusals: refusals::Refusals,
    pub options: ServerOptions,
    /// Turns true when the server stops; event streams end on it.
    pub stopping: tokio::sync::watch::Receiver<bool>,
    /// The tenants, quotas and owners in force (empty: no tenants); kept
    /// in step with the engine's by `PUT /v1/tenants`.
    tenancy: std::sync::RwLock<Arc<crate::tenant::Tenancy>>,
    readers: Mutex<Vec<Journal>>,
    /// When the tokens were last read again from the journal (a standby's
    /// copy follows the leader's; see [`ServerState::reload_tokens`]).
    tokens_read: tokio::sync::Mutex<std::time::Instant>,
    /// At most [`READERS`] reads at once: a read past them waits for a
    /// pooled connection instead of opening one to throw away (on
    /// PostgreSQL a connection costs a login and a server process).
    reader_slots: tokio::sync::Semaphore,
    /// The `canopy_usage_*` counters, brought up to date by each scrape.
    pub usage: Arc<Mutex<crate::usage::counters::Counters>>,
    /// The `canopy_retries_total` and completion-time counters, brought
    /// up to date by each scrape.
    pub outcomes: Arc<Mutex<outcomes::Outcomes>>,
    /// The `canopy_http_*` counters, written by a middleware on every route.
    pub http: http_metrics::HttpMetrics,
}

pub type Served = Arc<ServerState>;

/// Reader connections kept open, and reads run at once.
const READERS: usize = 8;

/// The least time between two reads of the tokens on a standby.
const TOKEN_READS_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl ServerState {
    /// The engine, on the server that leads. Routes that need it are not
    /// routed on a standby (it forwards them), so this 503 is a backstop.
    pub fn engine(&self) -> Result<&EngineHandle, error::ApiError> {
        self.engine.as_ref().ok_or_else(|| {
            error::ApiError::unavailable("this server is a standby and runs no engine; ask the leader")
        })
    }

    /// The engine's latest fleet status; `None` before it has published
    /// one, and always on a standby (it runs no engine).
    pub fn fleet_status(&self) -> Option<Arc<crate::engine::handle::FleetStatus>> {
        self.engine.as_ref().and_then(|e| e.status().borrow().clone())
    }

    /// Reads the tokens and the tenancy from the journal again, unless a
    /// read began after `asked` (a caller that waited for another's read
    /// gets that one). A standby does this every second and when a token
    /// it does not know arrives, so tokens made or revoked on the leader
    /// hold on it too; reads run one at a time, and at most one each
    /// [`TOKEN_READS_EVERY`]: a flood of made-up tokens waits in line and
    /// shares the next read instead of costing one each.
    pub async fn reload_tokens(&self, asked: std::time::Instant) -> Result<(), JournalError> {
        let mut last = self.tokens_read.lock().await;
        if *last > asked {
            return Ok(());
        }
        let since = last.elapsed();
        if since < TOKEN_READS_EVERY {
            tokio::time::sleep(TOKEN_READS_EVERY - since).await;
        }
        *last = std::time::Instant::now();
        let (rows, tenancy) = self.read(|j| Ok((j.tokens()?, stored_tenancy(j)?))).await?;
        self.tokens.replace(rows);
        self.set_tenancy(tenancy);
        Ok(())
    }

    /// The tenancy in force.
    pub fn tenancy(&self) -> Arc<crate::tenant::Tenancy> {
        self.tenancy.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the tenancy in force (after the journal holds it).
    pub fn set_tenancy(&self, t: crate::tenant::Tenancy) {
        *self.tenancy.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(t);
    }

    /// Runs a read of the store on a reader connection, off the async loop.
    pub async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Journal) -> Result<T, JournalError> + Send + 'static,
    ) -> Result<T, JournalError> {
        // Never closed, so acquiring cannot fail; the slot is held until
        // the connection is back in the pool.
        let _slot = self.reader_slots.acquire().await.ok();
        let taken = self.readers.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let store = self.home.journal();
        let (j, r) = tokio::task::spawn_blocking(move || {
            let j = match taken {
                Some(j) => j,
                None => store.open()?,
            };
            let r = f(&j);
            Ok::<_, JournalError>((j, r))
        })
        .await
        .map_err(|e| JournalError::Invalid { what: "a read".into(), detail: e.to_string() })??;
        let mut pool = self.readers.lock().unwrap_or_else(|e| e.into_inner());
        if pool.len() < READERS {
            pool.push(j);
        }
        r
    }

    /// Writes an audit record for a request the engine never saw (refused
    /// before it), through the engine's journal, and publishes its batch
    /// like any other.
    /// A standby writes nothing to the journal (the leader owns it): the
    /// record goes to its log instead.
    pub async fn write_audit(&self, a: AuditRecord) {
        let Some(engine) = &self.engine else {
            tracing::warn!(
                principal = %a.principal,
                origin = %a.origin,
                action = %a.action,
                outcome = %a.outcome,
                "standby: refused a request (not in the audit trail: only the leader writes it)"
            );
            return;
        };
        let records = vec![crate::engine::model::Record::Audit(Box::new(a))];
        let r = engine.commit(records, |j, r| Ok((j.append(r)?, ()))).await;
        if let Err(e) = r {
            tracing::error!(error = %e, "could not write an audit record");
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {what}: {source}")]
    Bind {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on {0} without TLS: tokens would cross the network in clear text; give --tls-cert and --tls-key, or --insecure-listen if the network is trusted"
    )]
    Insecure(SocketAddr),
    #[error("{0}")]
    Tls(String),
    #[error(transparent)]
    Journal(#[from] JournalError),
}

/// A running server: where it listens, and how to stop it.
pub struct Serving {
    pub socket: PathBuf,
    /// The TCP address actually bound (port 0 picks one).
    pub tcp: Option<SocketAddr>,
    pub state: Served,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Listening on [`ServerOptions::bound`]: its owner removes the socket.
    kept: bool,
}

impl Serving {
    /// Stops accepting, lets requests in flight finish (event streams end).
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
        }
        if !self.kept {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// The TLS configuration `options` listen with, after refusing a plain
/// TCP listener off loopback that was not asked for: what the engine's
/// server and a standby both check before binding anything.
pub(crate) fn listen_tls(
    options: &ServerOptions,
) -> Result<Option<Arc<tokio_rustls::rustls::ServerConfig>>, ServeError> {
    if let Some(addr) = options.listen
        && !addr.ip().is_loopback()
        && options.tls.is_none()
        && !options.insecure_listen
    {
        return Err(ServeError::Insecure(addr));
    }
    match &options.tls {
        Some((cert, key)) => listen::tls_config(cert, key).map(Some).map_err(ServeError::Tls),
        None => Ok(None),
    }
}

/// Serves the API for `engine`, which owns the store in `home`, on the
/// store's socket and, when asked, on TCP. Returns once listening.
pub async fn serve(
    engine: EngineHandle,
    home: Home,
    store_id: String,
    options: ServerOptions,
) -> Result<Serving, ServeError> {
    let tls = listen_tls(&options)?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let state =
        open_state(Some(engine), None, home.clone(), Some(store_id), options.clone(), stop_rx.clone())
            .await?;
    let nofile = conn::open_file_limit();
    let limits = conn::Limits::new(&options, nofile);
    if limits.max_connections < options.max_connections
        || limits.max_unauthenticated < options.max_unauthenticated
    {
        tracing::info!(
            max_connections = limits.max_connections,
            max_unauthenticated = limits.max_unauthenticated,
            open_file_limit = nofile,
            "TCP connection caps lowered to leave file descriptors for the store and its socket"
        );
    }
    // The API, and the MCP server at /mcp whose tools call it in process.
    let api = api::router(state.clone());
    let router = api.clone().merge(crate::mcp::http::router(state.clone(), api));
    let shared = conn::Shared::new(state.clone(), router, limits);
    let (bound, kept) = listen::Bound::given_or_bind(home.root(), &options).await?;
    let mut tasks = vec![tokio::spawn(flush_refusals(state.clone(), stop_rx.clone()))];
    tasks.extend(conn::accept_loops(&bound, tls, &shared, &stop_rx).into_iter().map(tokio::spawn));
    let (socket, tcp_addr) = (bound.socket.clone(), bound.tcp_addr);
    tracing::info!(socket = %socket.display(), tcp = ?tcp_addr, "serving the API");
    Ok(Serving { socket, tcp: tcp_addr, state, stop, tasks, kept })
}

/// The tenancy the journal holds (the engine's start settled and
/// journalled the one in force); none: no tenants.
fn stored_tenancy(j: &Journal) -> Result<crate::tenant::Tenancy, JournalError> {
    match j.tenancy()? {
        None => Ok(crate::tenant::Tenancy::default()),
        Some(row) => serde_json::from_str::<crate::tenant::TenancyDoc>(&row.document)
            .map_err(|e| e.to_string())
            .and_then(|d| d.tenancy().map_err(|e| e.to_string()))
            .map_err(|e| JournalError::Invalid { what: "the stored tenancy".into(), detail: e }),
    }
}

/// What handlers share, with a first reader open on the journal in
/// `home`: the tokens, the tenancy and (unless given) the store id read
/// from it. `engine` is `None` for a standby (`standby` its view of the
/// lease).
pub(crate) async fn open_state(
    engine: Option<EngineHandle>,
    standby: Option<crate::ha::LeaderView>,
    home: Home,
    store_id: Option<String>,
    options: ServerOptions,
    stopping: tokio::sync::watch::Receiver<bool>,
) -> Result<Served, ServeError> {
    let reader = {
        let store = home.journal();
        tokio::task::spawn_blocking(move || store.open())
            .await
            .map_err(|e| JournalError::Invalid { what: "the store".into(), detail: e.to_string() })??
    };
    let tokens = Tokens::new(reader.tokens()?);
    let tenancy = stored_tenancy(&reader)?;
    let store_id = store_id.unwrap_or_else(|| reader.store_id().to_string());
    Ok(Arc::new(ServerState {
        engine,
        standby,
        home,
        store_id,
        tokens,
        refusals: refusals::Refusals::default(),
        options,
        stopping,
        tenancy: std::sync::RwLock::new(Arc::new(tenancy)),
        readers: Mutex::new(vec![reader]),
        tokens_read: tokio::sync::Mutex::new(std::time::Instant::now()),
        reader_slots: tokio::sync::Semaphore::new(READERS),
        usage: Arc::default(),
        outcomes: Arc::default(),
        http: http_metrics::HttpMetrics::default(),
    }))
}

/// Writes the counted repeats of refused tokens once their minute is over
/// (see [`refusals`]), until the server stops; then once more.
async fn flush_refusals(state: Served, mut stopping: tokio::sync::watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
            _ = stopping.wait_for(|s| *s) => break,
        }
        state.refusals.flush(&state, authz::now(), false).await;
    }
    state.refusals.flush(&state, authz::now(), true).await;
}
