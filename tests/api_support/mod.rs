//! The harness of the HTTP API tests (`api_service`, `api_security`): an
//! engine started in this process with `canopy::app::start` serving the
//! store's socket (the owner, an admin without a token) and TCP on
//! 127.0.0.1 (a bearer token on every request), specs that run here or
//! wait queued, real HTTP clients for both, and an event-stream reader.
//!
//! Each test file compiles this module into its own crate and uses only
//! part of it; what one of them leaves unused would warn as dead code
//! (and fail `cargo clippy -- -D warnings`), hence the allow.
#![allow(dead_code)]
use canopy::app::{self, EngineOptions, Running};
use canopy::home::Home;
use canopy::journal::Journal;
use canopy::providers::local::ShimCommand;
use canopy::providers::sim::SimConfig;
use canopy::server::ServerOptions;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The longest any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A provider of the demo fleet, two of its nodes, and a node elsewhere.
pub const SCOPED_PROVIDER: &str = "onprem-fra";
pub const NODE_IN_SCOPE: &str = "fra-h100-03";
pub const OTHER_NODE_IN_SCOPE: &str = "fra-h100-05";
pub const NODE_OUT_OF_SCOPE: &str = "iad-l40s-03";

// ── Specs ────────────────────────────────────────────────────────────────

/// A spec pinned to this host that runs `script` with `sh -c`; with
/// `output`, the file `$CANOPY_OUTPUT_DIR/outputs/<output>` is collected
/// as the output named `result`.
pub fn local_spec(name: &str, script: &str, output: Option<&str>) -> String {
    let outputs = match output {
        Some(file) => {
            format!("\n[[outputs]]\nname = \"result\"\npath = \"/outputs/{file}\"\nrequired = true\n")
        }
        None => String::new(),
    };
    format!(
        "name = {name:?}\n\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n{outputs}"
    )
}

/// A spec nothing can place (2 TB of memory on this host) that asks to
/// wait for capacity: it waits queued, and a test can cancel it.
pub fn queued_spec(name: &str) -> String {
    format!(
        "name = {name:?}\n\n[runtime]\ncommand = [\"true\"]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 2000\n\n[constraints]\nproviders = [\"local\"]\n\
         wait_for_capacity = true\n"
    )
}

// ── Talking to the server ───────────────────────────────────────────────

/// Who makes a request.
#[derive(Debug, Clone, Copy)]
pub enum Who<'a> {
    /// The store's owner, on the socket: an admin, no token.
    Owner,
    /// TCP without a token.
    Nobody,
    /// TCP with this bearer token.
    Token(&'a str),
}

/// A request body and its content type.
pub enum Body {
    Empty,
    Json(Value),
    Toml(String),
    Raw(&'static str, Vec<u8>),
}

/// What came back.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Asserts the status and the API's error shape when it is an error.
    pub fn expect(self, status: u16) -> Reply {
        assert_eq!(self.status, status, "{}", self.text);
        if status >= 400 {
            let e = &self.json()["error"];
            assert!(e["code"].as_str().is_some_and(|c| !c.is_empty()), "no error code: {}", self.text);
            assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "no error message: {}", self.text);
        }
        self
    }
}

/// An engine serving its API over a fresh store, and HTTP clients for it.
pub struct Api {
    pub _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub running: Option<Running>,
    pub store_id: String,
    pub tcp: SocketAddr,
    /// Plain TCP, no overall timeout (streams); requests set their own.
    pub http: reqwest::Client,
    /// The store's socket.
    pub sock: reqwest::Client,
    /// Every token made, to search the store for afterwards.
    pub secrets: Vec<String>,
}

impl Api {
    pub async fn start() -> Api {
        Api::start_with(ServerOptions::default()).await
    }

    /// Starts an engine (demo fleet, no faults) serving on the socket and
    /// on TCP 127.0.0.1:0; returns once `/healthz` says it is up.
    pub async fn start_with(server: ServerOptions) -> Api {
        Api::start_configured(server, "").await
    }

    /// [`start_with`](Self::start_with), with `config` added to the
    /// store's canopy.toml (tenants, say).
    pub async fn start_configured(server: ServerOptions, config: &str) -> Api {
        Api::start_sim(server, config, SimConfig::no_faults()).await
    }

    /// [`start_configured`](Self::start_configured) over a simulated
    /// market behaving as `sim` says (a faster `time_scale`, say).
    pub async fn start_sim(server: ServerOptions, config: &str, sim: SimConfig) -> Api {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("home");
        let file = tmp.path().join("canopy.toml");
        std::fs::write(&file, format!("include_demo_fleet = true\n{config}")).unwrap();
        let running = Api::run(&root, &file, server, sim).await;
        let tcp = running.serving.tcp.expect("a TCP address");
        let socket = running.serving.socket.clone();
        assert_eq!(socket, root.join("canopy.sock"));
        let api = Api {
            store_id: running.store_id.clone(),
            _tmp: tmp,
            root,
            running: Some(running),
            tcp,
            http: reqwest::Client::builder().build().unwrap(),
            sock: reqwest::Client::builder().unix_socket(socket).build().unwrap(),
            secrets: Vec::new(),
        };
        api.wait_up().await;
        api
    }

    async fn wait_up(&self) {
        wait_until("the engine to publish its fleet", || async {
            self.call(Who::Nobody, "GET", "/healthz", Body::Empty).await.status == 200
        })
        .await;
    }

    /// Stops the engine and starts it again on the same store, with the
    /// store's canopy.toml now `config` (after `include_demo_fleet`).
    pub async fn restart(&mut self, config: &str) {
        let running = self.running.take().unwrap();
        running.stop(Duration::from_secs(10)).await.unwrap();
        let file = self._tmp.path().join("canopy.toml");
        std::fs::write(&file, format!("include_demo_fleet = true\n{config}")).unwrap();
        let running = Api::run(&self.root, &file, ServerOptions::default(), SimConfig::no_faults()).await;
        self.tcp = running.serving.tcp.expect("a TCP address");
        let socket = running.serving.socket.clone();
        self.sock = reqwest::Client::builder().unix_socket(socket).build().unwrap();
        self.running = Some(running);
        self.wait_up().await;
    }

    async fn run(root: &Path, config: &Path, mut server: ServerOptions, sim: SimConfig) -> Running {
        if server.listen.is_none() {
            server.listen = Some("127.0.0.1:0".parse().unwrap());
        }
        let mut opts = EngineOptions::embedded(Home::new(root)).unwrap();
        // The test binary is not `canopy`: the supervisor is the shim binary.
        opts.shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
        opts.sim = sim;
        opts.poll_every = Some(Duration::from_millis(100));
        // Its own configuration, so nothing in the environment changes the fleet.
        opts.config = Some(config.to_path_buf());
        opts.server = server;
        app::start(opts).await.unwrap()
    }

    pub fn request(&self, who: Who<'_>, method: &str, path: &str) -> reqwest::RequestBuilder {
        let method: reqwest::Method = method.parse().unwrap();
        let rb = match who {
            Who::Owner => self.sock.request(method, format!("http://canopy{path}")),
            Who::Nobody | Who::Token(_) => self.http.request(method, format!("http://{}{path}", self.tcp)),
        };
        match who {
            Who::Token(t) => rb.bearer_auth(t),
            _ => rb,
        }
    }

    pub async fn send(&self, rb: reqwest::RequestBuilder, body: Body) -> Reply {
        let rb = match body {
            Body::Empty => rb,
            Body::Json(v) => rb.header("content-type", "application/json").body(v.to_string()),
            Body::Toml(t) => rb.header("content-type", "application/toml").body(t),
            Body::Raw(ct, bytes) => rb.header("content-type", ct).body(bytes),
        };
        let resp = rb.timeout(DEADLINE).send().await.expect("the server answers");
        let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
        Reply { status, headers, text: resp.text().await.expect("a whole body") }
    }

    pub async fn call(&self, who: Who<'_>, method: &str, path: &str, body: Body) -> Reply {
        self.send(self.request(who, method, path), body).await
    }

    pub async fn get(&self, who: Who<'_>, path: &str) -> Reply {
        self.call(who, "GET", path, Body::Empty).await
    }

    /// `POST /v1/workloads` with a TOML spec and, maybe, an idempotency key.
    pub async fn submit(&self, who: Who<'_>, spec: &str, key: Option<&str>) -> Reply {
        let mut rb = self.request(who, "POST", "/v1/workloads");
        if let Some(k) = key {
            rb = rb.header("idempotency-key", k);
        }
        self.send(rb, Body::Toml(spec.to_string())).await
    }

    /// Submits and expects a new workload; its id.
    pub async fn submit_new(&self, who: Who<'_>, spec: &str) -> String {
        let r = self.submit(who, spec, None).await.expect(201);
        id_of(&r.json())
    }

    /// Makes a token as the owner (on the socket); its secret.
    pub async fn token(
        &mut self,
        name: &str,
        role: &str,
        scopes: &[&str],
        expires_at: Option<i64>,
    ) -> String {
        let body = json!({ "name": name, "role": role, "scopes": scopes, "expires_at": expires_at });
        let r = self.call(Who::Owner, "POST", "/v1/tokens", Body::Json(body)).await.expect(201);
        let secret = r.json()["token"].as_str().unwrap().to_string();
        assert!(secret.starts_with("canopy_"), "{secret}");
        self.secrets.push(secret.clone());
        secret
    }

    /// Makes a token of `tenant` as the owner; its secret.
    pub async fn tenant_token(&mut self, name: &str, role: &str, scopes: &[&str], tenant: &str) -> String {
        let body = json!({ "name": name, "role": role, "scopes": scopes, "tenant": tenant });
        let r = self.call(Who::Owner, "POST", "/v1/tokens", Body::Json(body)).await.expect(201);
        let secret = r.json()["token"].as_str().unwrap().to_string();
        self.secrets.push(secret.clone());
        secret
    }

    pub async fn workload(&self, id: &str) -> Value {
        self.get(Who::Owner, &format!("/v1/workloads/{id}")).await.expect(200).json()
    }

    /// Waits until the workload is final; it, with its attempts.
    pub async fn wait_final(&self, id: &str) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let w = self.workload(id).await;
            if ["succeeded", "failed", "cancelled"].contains(&w["workload"]["state"].as_str().unwrap()) {
                return w;
            }
            assert!(Instant::now() < deadline, "{id} did not end: {w}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The event stream, read as it comes.
    pub async fn stream(&self, who: Who<'_>, last_event_id: Option<&str>) -> EventStream {
        let mut rb = self.request(who, "GET", "/v1/stream");
        if let Some(id) = last_event_id {
            rb = rb.header("last-event-id", id);
        }
        let resp = tokio::time::timeout(DEADLINE, rb.send()).await.expect("the stream opens").unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        EventStream { resp, buf: Vec::new() }
    }

    /// Every batch sequence number the journal holds after `after`.
    pub fn journal_seqs(&self, after: u64) -> Vec<u64> {
        let j = Journal::open(&self.root.join("canopy.db")).unwrap();
        j.batches_since(after, 1_000_000).unwrap().into_iter().map(|b| b.seq).collect()
    }

    /// Stops the engine, then searches every file of the store (journal
    /// with its WAL, logs, artifacts, Canopy's own log) for every token's
    /// secret: none may be there.
    pub async fn finish(self) {
        self.finish_then(|_| ()).await
    }

    /// [`finish`](Self::finish), then `f` on the stopped store's root
    /// before it is removed.
    pub async fn finish_then<T>(mut self, f: impl FnOnce(&Path) -> T) -> T {
        let running = self.running.take().unwrap();
        running.stop(Duration::from_secs(10)).await.unwrap();
        let mut files = Vec::new();
        files_under(&self.root, &mut files);
        assert!(files.iter().any(|f| f.ends_with("canopy.db")), "{files:?}");
        for f in &files {
            // Work still running after the engine stopped (it keeps running
            // by design) may replace a file between the listing and here.
            let bytes = match std::fs::read(f) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("cannot read {}: {e}", f.display()),
            };
            for token in &self.secrets {
                // The whole token, and its secret part alone.
                let secret = token.rsplit('_').next().unwrap();
                assert!(!contains(&bytes, token.as_bytes()), "a token leaked into {}", f.display());
                assert!(!contains(&bytes, secret.as_bytes()), "a token's secret leaked into {}", f.display());
            }
        }
        f(&self.root)
    }
}

pub async fn wait_until<F, Fut>(what: &str, mut ok: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + DEADLINE;
    while !ok().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        if meta.is_dir() {
            files_under(&p, out);
        } else if meta.is_file() {
            out.push(p);
        }
    }
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A workload's id as paths and messages show it (`w-17`), from a
/// workload view (`{workload: {id: 17, ..}, attempts}`), a workload record,
/// or a command's answer (`{id: "w-17"}`).
/// A workload's id: the same `"w-17"` string in every answer.
pub fn id_of(v: &Value) -> String {
    let record = v.get("workload").unwrap_or(v);
    match &record["id"] {
        Value::String(s) if s.starts_with("w-") => s.clone(),
        other => panic!("no workload id of the form \"w-17\" in {v}: {other}"),
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

// ── Server-sent events ───────────────────────────────────────────────────

/// One event as the server sent it.
#[derive(Debug, Clone)]
pub struct Sse {
    pub event: String,
    pub id: Option<String>,
    pub data: String,
}

/// Parses whole events out of `buf` (the `text/event-stream` format;
/// comments are keep-alives).
pub fn take_events(buf: &mut Vec<u8>) -> Vec<Sse> {
    let mut out = Vec::new();
    while let Some(at) = buf.windows(2).position(|w| w == b"\n\n") {
        let block: Vec<u8> = buf.drain(..at + 2).collect();
        let text = String::from_utf8_lossy(&block);
        let mut ev = Sse { event: "message".into(), id: None, data: String::new() };
        let mut data = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with(':') && !l.is_empty()) {
            let (field, value) =
                line.split_once(':').map_or((line, ""), |(f, v)| (f, v.strip_prefix(' ').unwrap_or(v)));
            match field {
                "event" => ev.event = value.to_string(),
                "id" => ev.id = Some(value.to_string()),
                "data" => data.push(value),
                _ => {}
            }
        }
        if !data.is_empty() {
            ev.data = data.join("\n");
            out.push(ev);
        }
    }
    out
}

/// `GET /v1/stream`, read event by event.
pub struct EventStream {
    pub resp: reqwest::Response,
    pub buf: Vec<u8>,
}

impl EventStream {
    /// The next event; `None` when the server ended the stream.
    pub async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let mut head: Vec<u8> = self.buf.drain(..at + 2).collect();
                if let Some(e) = take_events(&mut head).pop() {
                    return Some(e);
                }
                continue;
            }
            match tokio::time::timeout(DEADLINE, self.resp.chunk()).await.expect("the stream went quiet") {
                Ok(Some(c)) => self.buf.extend_from_slice(&c),
                Ok(None) => return None,
                Err(e) => panic!("the stream broke: {e}"),
            }
        }
    }

    /// The next `batch` event: its id and its batch (`{seq, records}`).
    pub async fn next_batch(&mut self) -> (String, Value) {
        loop {
            let e = self.next().await.expect("the stream ended");
            assert_ne!(e.event, "resync", "a reading client was told to resync: {}", e.data);
            if e.event == "batch" {
                let batch: Value = serde_json::from_str(&e.data).unwrap();
                return (e.id.expect("a batch has an id"), batch);
            }
        }
    }
}

/// The ids of the workloads whose records a batch carries.
pub fn workload_ids(batch: &Value) -> Vec<String> {
    batch["records"].as_array().unwrap().iter().filter_map(|r| r.get("Workload").map(id_of)).collect()
}
