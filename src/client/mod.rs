//! The API client the CLI and an attached console use: HTTP/JSON over the
//! store's socket, or over TCP (with a bearer token) to a remote server.
//!
//! [`Client`] makes requests and turns the API's error shape back into a
//! [`ClientError`]; [`attach`] builds an [`EngineHandle`] on a server, fed
//! by its event stream, so a console reads a remote engine exactly as it
//! reads one in its own process. It holds no state of its own.

mod attach;
mod backoff;
mod servers;
mod sse;

pub use attach::attach;
pub use backoff::Backoff;
pub use servers::{FAILOVER_WAIT, split as split_servers};

use crate::engine::command::{Command, CommandResult, Refusal};
use crate::engine::handle::{Held, LogBytes, Recent, Remote, StateCounts, Stream};
use crate::engine::model::{AttemptId, AuditRecord, EventRecord, WorkloadId, WorkloadState};
use crate::journal::AuditFilter;
use crate::server::api::{LOG_TIMES, NEXT_OFFSET, Page, WorkloadView};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The store's socket: the caller is the store's owner.
    Socket(PathBuf),
    /// `http://host:port` or `https://…`, with a token; several servers
    /// of one control plane separated by commas (see [`FAILOVER_WAIT`]).
    Url { base: String, token: Option<String> },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Socket(p) => write!(f, "{}", p.display()),
            Target::Url { base, .. } => f.write_str(base),
        }
    }
}

/// Why a request did not get an answer it could use.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens there: no engine owns the store, or the server is
    /// down. The request was never sent.
    #[error("no Canopy server answers at {target}: {detail}")]
    Unreachable { target: String, detail: String },
    /// The request went out but its answer did not come back whole: the
    /// connection broke or timed out. The server may have carried it out.
    #[error(
        "the connection to {target} broke before the server answered ({detail}); whether the request was \
         carried out is unknown"
    )]
    Interrupted { target: String, detail: String },
    /// The server answered with an error.
    #[error("{message}")]
    Api { status: u16, code: String, message: String, field: Option<String>, body: serde_json::Value },
    #[error("the server's answer could not be read: {0}")]
    Decode(String),
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the server went away (or is restarting) rather than refused
    /// the request: asking again later may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable { .. } | ClientError::Interrupted { .. } => true,
            ClientError::Api { status, .. } => *status == StatusCode::SERVICE_UNAVAILABLE.as_u16(),
            ClientError::Decode(_) => false,
        }
    }
}

/// A connection to one Canopy server.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    servers: std::sync::Arc<servers::Servers>,
    token: Option<String>,
    target: Target,
}

/// How long a request (not a stream) may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long an idle connection is kept for the next request: under the
/// server's header read timeout, which closes idle keep-alive connections,
/// so the client drops one before the server can close it under a request.
const POOL_IDLE: Duration = Duration::from_secs(15);
const _: () =
    assert!(POOL_IDLE.as_secs() < crate::server::ServerOptions::DEFAULT_HEADER_READ_TIMEOUT.as_secs());

impl Client {
    /// A client for `target`. Over the socket no TLS is set up at all (a
    /// CLI command pays nothing for certificates it will not use); over
    /// https the system's roots are trusted, plus the PEM certificates in
    /// `$CANOPY_CA_CERT` (a server with a private CA or a self-signed one).
    pub fn new(target: Target) -> Result<Client, ClientError> {
        let config = |e: String| ClientError::Decode(format!("cannot set up the HTTP client: {e}"));
        let mut b =
            reqwest::Client::builder().connect_timeout(Duration::from_secs(5)).pool_idle_timeout(POOL_IDLE);
        let (bases, token) = match &target {
            Target::Socket(p) => {
                b = b.unix_socket(p.clone()).no_proxy().tls_certs_only(std::iter::empty());
                (vec!["http://canopy".to_string()], None)
            }
            Target::Url { base, token } => {
                if let Some(path) = std::env::var_os("CANOPY_CA_CERT") {
                    let pem = std::fs::read(&path).map_err(|e| {
                        config(format!("cannot read $CANOPY_CA_CERT ({}): {e}", path.display()))
                    })?;
                    let certs = reqwest::Certificate::from_pem_bundle(&pem)
                        .map_err(|e| config(format!("$CANOPY_CA_CERT ({}): {e}", path.display())))?;
                    b = b.tls_certs_merge(certs);
                }
                let bases = servers::split(base);
                if bases.is_empty() {
                    return Err(config(format!("{base:?} names no server (http://HOST:PORT or https://…)")));
                }
                (bases, token.clone())
            }
        };
        let http = b.build().map_err(|e| config(e.to_string()))?;
        Ok(Client { http, servers: std::sync::Arc::new(servers::Servers::new(bases)), token, target })
    }

    /// The store's socket under `root`.
    pub fn for_store(root: &Path) -> Result<Client, ClientError> {
        Client::new(Target::Socket(crate::server::listen::socket_path(root)))
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// A request; `streaming` ones (logs followed, the event stream) have
    /// no overall time limit.
    fn request(&self, streaming: bool, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, format!("{}{path}", self.servers.current()));
        if !streaming {
            r = r.timeout(REQUEST_TIMEOUT);
        }
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        r
    }

    async fn send(&self, r: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
        let resp = self.execute(r).await?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        Err(api_error(resp).await)
    }

    /// A request that got no answer: never sent when the connection could
    /// not be made (TLS refused included), otherwise perhaps carried out.
    fn send_failed(&self, e: &reqwest::Error) -> ClientError {
        self.send_failed_at(e, &self.target.to_string())
    }

    /// [`send_failed`](Self::send_failed), naming the server `target`.
    fn send_failed_at(&self, e: &reqwest::Error, target: &str) -> ClientError {
        let (target, detail) = (target.to_string(), root_cause(e));
        if e.is_connect() || e.is_builder() {
            ClientError::Unreachable { target, detail }
        } else {
            ClientError::Interrupted { target, detail }
        }
    }

    /// An answer whose body could not be read: cut off on the way
    /// (the connection broke) or not what was expected.
    fn read_failed(&self, e: &reqwest::Error) -> ClientError {
        let not_json = std::error::Error::source(e).is_some_and(|s| s.is::<serde_json::Error>());
        if not_json {
            ClientError::Decode(e.to_string())
        } else {
            ClientError::Interrupted { target: self.target.to_string(), detail: root_cause(e) }
        }
    }

    async fn json<T: DeserializeOwned>(&self, resp: reqwest::Response) -> Result<T, ClientError> {
        resp.json().await.map_err(|e| self.read_failed(&e))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let resp = self.send(self.request(false, Method::GET, path)).await?;
        self.json(resp).await
    }

    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let resp = self.send(self.request(false, Method::POST, path).json(body)).await?;
        self.json(resp).await
    }

    /// `PUT` of a text body (`content_type`).
    pub async fn put_text<T: DeserializeOwned>(
        &self,
        path: &str,
        content_type: &str,
        body: String,
    ) -> Result<T, ClientError> {
        let rb = self.request(false, Method::PUT, path).header("content-type", content_type).body(body);
        let resp = self.send(rb).await?;
        self.json(resp).await
    }

    pub async fn delete<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        let resp = self.send(self.request(false, Method::DELETE, path)).await?;
        self.json(resp).await
    }

    /// Every API token, revoked and expired ones too (never a secret).
    pub async fn tokens(&self) -> Result<Vec<TokenView>, ClientError> {
        self.get("/v1/tokens").await
    }

    /// Submits spec text (`json`: JSON, else TOML) with an idempotency key,
    /// for `tenant` when given (admins only). Returns the workload and
    /// whether the key matched an earlier submit.
    pub async fn submit(
        &self,
        spec: &str,
        json: bool,
        key: &str,
        tenant: Option<&str>,
    ) -> Result<WorkloadView, ClientError> {
        let ct = if json { "application/json" } else { "application/toml" };
        let path = match tenant {
            Some(t) => format!("/v1/workloads?tenant={}", encode(t)),
            None => "/v1/workloads".to_string(),
        };
        let r = self
            .request(false, Method::POST, &path)
            .header("content-type", ct)
            .header("idempotency-key", key)
            .body(spec.to_string());
        let resp = self.send(r).await?;
        self.json(resp).await
    }

    pub async fn workload(&self, id: WorkloadId) -> Result<WorkloadView, ClientError> {
        self.get(&format!("/v1/workloads/{id}")).await
    }

    /// A page of workloads; `query` is the URL's query string (without `?`).
    pub async fn workloads(&self, query: &str) -> Result<Page, ClientError> {
        self.get(&format!("/v1/workloads?{query}")).await
    }

    /// Every workload matching `query`, page by page.
    pub async fn all_pages(&self, query: &str) -> Result<Vec<WorkloadView>, ClientError> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut q = format!("{query}&limit=1000");
            if let Some(c) = &cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            let page = self.workloads(&q).await?;
            all.extend(page.workloads);
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => return Ok(all),
            }
        }
    }

    /// A command, as the API carries it.
    pub async fn run(&self, cmd: &Command, reason: Option<String>) -> Result<CommandResult, ClientError> {
        let mut body = serde_json::json!({ "reason": reason });
        if let Command::Cordon { until: Some(t), .. } = cmd {
            body["until"] = serde_json::json!(t.0);
        }
        if let Command::Drain { evict, grace_s, .. } = cmd {
            body["evict"] = serde_json::json!(evict);
            if let Some(g) = grace_s {
                body["grace"] = serde_json::json!(g);
            }
        }
        if let Command::Unexclude { target: Some(t), .. } = cmd {
            body["node"] = serde_json::json!(t);
        }
        let (path, spec) = match cmd {
            Command::Submit { spec, idempotency_key } => {
                let text = serde_json::to_string(spec).map_err(|e| ClientError::Decode(e.to_string()))?;
                let key = idempotency_key.clone().unwrap_or_else(new_key);
                let v = self.submit(&text, true, &key, None).await?;
                return Ok(CommandResult::Submitted { id: v.workload.id, existing: v.existing });
            }
            Command::Cancel { id } => (format!("/v1/workloads/{id}/cancel"), None::<()>),
            Command::Retry { id } => (format!("/v1/workloads/{id}/retry"), None),
            Command::Acknowledge { id } => (format!("/v1/workloads/{id}/acknowledge"), None),
            Command::Unexclude { id, .. } => (format!("/v1/workloads/{id}/unexclude"), None),
            Command::Cordon { node, .. } => (format!("/v1/nodes/{node}/cordon"), None),
            Command::Uncordon { node } => (format!("/v1/nodes/{node}/uncordon"), None),
            Command::Drain { node, .. } => (format!("/v1/nodes/{node}/drain"), None),
            Command::Unquarantine { node } => (format!("/v1/nodes/{node}/unquarantine"), None),
        };
        let _ = spec;
        let v: serde_json::Value = self.post(&path, &body).await?;
        if let Some(id) = v.get("id").and_then(|x| x.as_str()).and_then(|x| x.parse().ok()) {
            return Ok(CommandResult::Submitted { id, existing: v["existing"].as_bool().unwrap_or(false) });
        }
        Ok(CommandResult::Ok { message: v["message"].as_str().unwrap_or("done").to_string() })
    }

    /// Up to `max` bytes of a log from `offset`.
    pub async fn log_bytes(
        &self,
        attempt: AttemptId,
        stream: Stream,
        offset: u64,
        max: usize,
    ) -> Result<LogBytes, ClientError> {
        let s = match stream {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        };
        let path = format!(
            "/v1/workloads/{}/logs?attempt={}&stream={s}&offset={offset}&limit={max}",
            attempt.workload, attempt.n
        );
        let resp = self.send(self.request(false, Method::GET, &path)).await?;
        let next = resp.headers().get(NEXT_OFFSET).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
        // An older server sends no times.
        let times = resp
            .headers()
            .get(LOG_TIMES)
            .and_then(|v| v.to_str().ok())
            .map(crate::engine::log_times::from_header)
            .unwrap_or_default();
        let data = resp.bytes().await.map_err(|e| self.read_failed(&e))?.to_vec();
        Ok(LogBytes { next_offset: next.unwrap_or(offset + data.len() as u64), data, times })
    }

    /// A request as it is, for a thin client of the API (`canopy mcp`):
    /// the answer's status, headers and body whatever the status, the body
    /// cut at `max` bytes. Only a request that got no answer is an error.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
        max: usize,
    ) -> Result<(u16, reqwest::header::HeaderMap, Vec<u8>), ClientError> {
        let mut r = self.request(false, method, path);
        for (k, v) in headers {
            r = r.header(*k, v);
        }
        if !body.is_empty() {
            r = r.body(body);
        }
        let mut resp = self.execute(r).await?;
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        let mut out = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| self.read_failed(&e))? {
            let room = max.saturating_sub(out.len());
            out.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if out.len() >= max {
                break;
            }
        }
        Ok((status, headers, out))
    }

    /// A streaming GET (logs with follow, the event stream).
    pub async fn open_stream(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Result<reqwest::Response, ClientError> {
        let mut r = self.request(true, Method::GET, path);
        if let Some(id) = last_event_id {
            r = r.header("last-event-id", id);
        }
        self.send(r).await
    }
}

/// One API token as `GET /v1/tokens` lists it.
pub use crate::server::api::TokenView;

/// An idempotency key no one else will make: time, process and randomness.
pub fn new_key() -> String {
    let mut b = [0u8; 8];
    let _ = getrandom::fill(&mut b);
    format!("k-{}-{}", std::process::id(), hex::encode(b))
}

fn root_cause(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg = s.to_string();
        src = s.source();
    }
    msg
}

async fn api_error(resp: reqwest::Response) -> ClientError {
    let status = resp.status();
    let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
    let e = &body["error"];
    let message = e["message"].as_str().map(str::to_string).unwrap_or_else(|| {
        format!(
            "the server answered {status}{}",
            if status == StatusCode::NOT_FOUND { " (is it a Canopy server?)" } else { "" }
        )
    });
    ClientError::Api {
        status: status.as_u16(),
        code: e["code"].as_str().unwrap_or("unknown").to_string(),
        message,
        field: e["field"].as_str().map(str::to_string),
        body,
    }
}

fn refusal(status: u16) -> Refusal {
    match status {
        404 => Refusal::NotFound,
        409 => Refusal::Conflict,
        503 => Refusal::Unavailable,
        _ => Refusal::Invalid,
    }
}

#[async_trait::async_trait]
impl Remote for Client {
    async fn command(&self, cmd: Command, reason: Option<String>) -> CommandResult {
        match self.run(&cmd, reason).await {
            Ok(r) => r,
            Err(ClientError::Api { status, message, .. }) => CommandResult::error(refusal(status), message),
            Err(e) => CommandResult::error(Refusal::Unavailable, e.to_string()),
        }
    }

    async fn recent(&self, limit: usize, events: usize) -> Result<Recent, String> {
        // Every live workload and every unresolved failure whatever their
        // age, the newest `limit`, and the newest events, asked for at once.
        let live = self.all_pages("state=queued,placing,launching,running");
        let unresolved = self.all_pages("unresolved=true");
        let (newest_q, events_q) =
            (format!("limit={}", limit.clamp(1, 1000)), format!("/v1/events?limit={events}"));
        let newest = self.workloads(&newest_q);
        let events = self.get::<Vec<EventRecord>>(&events_q);
        let (live, unresolved, newest, events) = tokio::join!(live, unresolved, newest, events);
        let (live, unresolved, newest, events) = (
            live.map_err(|e| e.to_string())?,
            unresolved.map_err(|e| e.to_string())?,
            newest.map_err(|e| e.to_string())?,
            events.map_err(|e| e.to_string())?,
        );
        let total = newest.total;
        let next_page =
            newest.workloads.last().map(|v| v.workload.id).filter(|_| newest.next_cursor.is_some());
        // Every live workload is in `live`; the final states are counted
        // by the server (a page's `total` is what matches its filter).
        let mut counts = StateCounts::default();
        for v in &live {
            *counts.of_mut(v.workload.state) += 1;
        }
        for state in [WorkloadState::Succeeded, WorkloadState::Failed, WorkloadState::Cancelled] {
            let q = format!("state={}&limit=1", state.as_str());
            *counts.of_mut(state) = self.workloads(&q).await.map_err(|e| e.to_string())?.total;
        }
        let mut seen = std::collections::HashSet::new();
        let mut workloads = Vec::new();
        let mut attempts = Vec::new();
        for v in live.into_iter().chain(unresolved).chain(newest.workloads) {
            if seen.insert(v.workload.id) {
                attempts.extend(v.attempts);
                workloads.push(v.workload);
            }
        }
        workloads.sort_by_key(|w| std::cmp::Reverse(w.id));
        Ok(Recent { workloads, attempts, events, total, counts: Some(counts), next_page })
    }

    async fn older(&self, before: WorkloadId, limit: usize) -> Result<Recent, String> {
        let q = format!("limit={}&cursor={before}", limit.clamp(1, 1000));
        let page = self.workloads(&q).await.map_err(|e| e.to_string())?;
        let next_page = page.workloads.last().map(|v| v.workload.id).filter(|_| page.next_cursor.is_some());
        let mut workloads = Vec::new();
        let mut attempts = Vec::new();
        for v in page.workloads {
            attempts.extend(v.attempts);
            workloads.push(v.workload);
        }
        Ok(Recent { workloads, attempts, events: Vec::new(), total: page.total, counts: None, next_page })
    }

    async fn events(&self, id: WorkloadId) -> Result<Vec<EventRecord>, String> {
        self.get(&format!("/v1/workloads/{id}/events")).await.map_err(|e| e.to_string())
    }

    async fn workload(&self, id: WorkloadId) -> Result<Option<Held>, String> {
        match Client::workload(self, id).await {
            Ok(v) => Ok(Some((v.workload, v.attempts))),
            Err(e) if e.status() == Some(StatusCode::NOT_FOUND.as_u16()) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn logs(
        &self,
        attempt: AttemptId,
        stream: Stream,
        offset: u64,
        max: usize,
    ) -> Result<LogBytes, String> {
        self.log_bytes(attempt, stream, offset, max).await.map_err(|e| e.to_string())
    }

    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, String> {
        self.get(&format!("/v1/audit?{}", audit_query(filter))).await.map_err(|e| e.to_string())
    }
}

/// `GET /v1/audit`'s query string for `filter`.
pub fn audit_query(f: &AuditFilter) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    let text =
        [("principal", &f.principal), ("action", &f.action), ("outcome", &f.outcome), ("target", &f.target)];
    for (k, v) in text {
        if let Some(v) = v {
            q.append_pair(k, v);
        }
    }
    let numbers = [
        ("limit", f.limit.map(|l| l as i64)),
        ("since", f.since.map(|m| m.0)),
        ("until", f.until.map(|m| m.0)),
    ];
    for (k, v) in numbers {
        if let Some(v) = v {
            q.append_pair(k, &v.to_string());
        }
    }
    q.finish()
}

/// `s` percent-encoded for a URL's query (everything but unreserved bytes).
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
