//! The API's handlers: `/v1` routes over the engine handle and the
//! journal's readers. Each handler parses, calls, and shapes the answer;
//! who may call it was settled by `authz` before it runs.

use super::auth::Principal;
use super::authz;
use super::error::{ApiError, ApiResult, Query};
use super::target::Target;
use super::{Served, ServerState};
use crate::engine::command::{Caller, Command, CommandResult, scoped_key, shown_key};
use crate::engine::handle::Stream as LogStream;
use crate::engine::model::{
    AttemptRecord, EventRecord, Millis, Record, WorkloadId, WorkloadRecord, WorkloadState,
};
use crate::journal::{AuditFilter, WorkloadFilter};
use crate::spec::load::{self, Format};
use crate::spec::validate::MAX_SPEC_BYTES;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};

pub use super::tokens::{NewTokenRequest, NewTokenResponse, TokenView};
pub use super::views::*;

/// The API's router, every route behind the authorization middleware.
pub fn router(state: Served) -> Router {
    routes(&state)
        .fallback(not_found)
        // Outermost, around the fallback too: every request is counted.
        .layer(axum::middleware::from_fn_with_state(state.clone(), super::http_metrics::record))
        .with_state(state)
}

/// The routes this server answers itself, behind the authorization
/// middleware, without a fallback. A standby (no engine) gets only
/// [`STANDBY_ROUTES`]: those whose handlers read only the journal; it
/// forwards the rest to the leader.
pub fn routes(state: &Served) -> Router<Served> {
    let reads = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(super::metrics::metrics))
        .route("/v1/openapi.json", get(super::openapi::serve))
        .route("/v1/whoami", get(whoami))
        .route("/v1/workloads", get(list))
        .route("/v1/workloads/{id}", get(show))
        .route("/v1/workloads/{id}/events", get(events))
        .route("/v1/events", get(recent_events))
        .route("/v1/audit", get(audit))
        .route("/v1/servers", get(super::servers::servers));
    let routes = if state.engine.is_none() {
        reads
    } else {
        reads
            .route("/v1/workloads", post(submit))
            .route("/v1/workloads/{id}/logs", get(logs))
            .route("/v1/workloads/{id}/artifacts", get(artifacts))
            .route("/v1/workloads/{id}/artifacts/{attempt}/{name}", get(artifact))
            .route("/v1/workloads/{id}/{op}", post(command))
            .route("/v1/plan", post(plan))
            .route("/v1/fleet", get(fleet))
            .route("/v1/nodes/{name}/{op}", post(command))
            .route("/v1/stream", get(super::sse::stream))
            .route("/v1/tokens", get(super::tokens::tokens).post(super::tokens::create_token))
            .route("/v1/tokens/{name}", delete(super::tokens::revoke_token))
            .route("/v1/tenants", get(super::tenants::list).put(super::tenants::put))
            .route("/v1/usage", get(super::usage::usage))
    };
    routes
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), authz::middleware))
        // Bodies are read by the handlers with the spec's own limit.
        .layer(axum::extract::DefaultBodyLimit::disable())
}

/// The routes (method, path as [`authz::ROUTES`] spells it) a standby
/// answers itself from the journal, with the leader's authentication and
/// authorization; it forwards every other request to the leader.
pub const STANDBY_ROUTES: &[(&str, &str)] = &[
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/v1/openapi.json"),
    ("GET", "/v1/whoami"),
    ("GET", "/v1/workloads"),
    ("GET", "/v1/workloads/{id}"),
    ("GET", "/v1/workloads/{id}/events"),
    ("GET", "/v1/events"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/servers"),
];

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; GET /v1/openapi.json lists them")
}

async fn healthz(State(s): State<Served>) -> Response {
    let (up, status) = match &s.engine {
        // A standby is up while it serves: reads from the journal, the
        // rest forwarded.
        None => (true, HealthState::Standby),
        Some(e) if e.status().borrow().is_some() => (true, HealthState::Ok),
        Some(_) => (false, HealthState::Starting),
    };
    let body = Health { status, store_id: s.store_id.clone() };
    (if up { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, Json(body)).into_response()
}

async fn whoami(State(s): State<Served>, Extension(p): Extension<Principal>) -> Json<WhoAmI> {
    Json(WhoAmI {
        principal: p.name.clone(),
        role: p.role,
        scopes: p.scopes.iter().map(ToString::to_string).collect(),
        origin: p.origin.clone(),
        store_id: s.store_id.clone(),
        tenant: p.tenant.clone(),
    })
}

fn view(mut w: WorkloadRecord, attempts: Vec<AttemptRecord>, existing: bool) -> WorkloadView {
    // Keys are scoped to their principal inside the store; show them as sent.
    w.idempotency_key = w.idempotency_key.as_deref().map(|k| shown_key(k).to_string());
    WorkloadView { workload: w, attempts, existing, queue_position: None }
}

/// Reads a body of at most the spec size limit; one byte more is 413.
async fn spec_body(body: Body) -> ApiResult<Bytes> {
    axum::body::to_bytes(body, MAX_SPEC_BYTES).await.map_err(|_| {
        ApiError::too_large(format!(
            "the spec is larger than {} KiB, the most a spec may be; move data to inputs",
            MAX_SPEC_BYTES / 1024
        ))
    })
}

/// Parses and validates a spec body: JSON when the Content-Type says so,
/// TOML otherwise. Every problem comes back with its line and column.
fn parse_spec(headers: &HeaderMap, body: &[u8]) -> ApiResult<load::Loaded> {
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let format = if ct.contains("json") { Format::Json } else { Format::Toml };
    let file = if format == Format::Json { "request.json" } else { "request.toml" };
    let text = std::str::from_utf8(body)
        .map_err(|e| ApiError::unprocessable(format!("the spec is not UTF-8 (byte {})", e.valid_up_to())))?;
    load::parse(text, file, format).map_err(|e| {
        let first = e.diagnostics.first();
        let message = match first {
            Some(d) if d.line > 0 => format!("{}:{}:{}: {}", d.file, d.line, d.col, d.message),
            Some(d) => d.message.clone(),
            None => "the spec is not valid".into(),
        };
        let mut err = ApiError::unprocessable(message);
        if let Some(d) = first.filter(|d| !d.path.is_empty()) {
            err = err.field(&d.path);
        }
        err.body.problems = Some(e.diagnostics);
        err
    })
}

fn caller(p: &Principal, reason: Option<String>) -> Caller {
    Caller { principal: p.name.clone(), origin: p.origin.clone(), reason, tenant: p.tenant.clone() }
}

async fn load_view(s: &ServerState, id: WorkloadId) -> ApiResult<WorkloadView> {
    let found = s
        .read(move |j| {
            let Some(w) = j.workload(id)? else { return Ok(None) };
            let at = j.tenant_queue_position(&w)?;
            Ok(Some((w, j.attempts(id), at)))
        })
        .await
        .map_err(ApiError::journal)?;
    match found {
        Some((w, attempts, at)) => {
            let standings = super::tenants::fair_standings(s, &s.tenancy());
            let queue_position = at.zip(w.tenant.clone()).map(|((ahead, of), tenant)| QueuePosition {
                fair_share: crate::tenant::fair::standing_text(&standings, &tenant),
                tenant,
                position: ahead + 1,
                of,
            });
            let attempts = attempts.map_err(ApiError::journal)?;
            Ok(WorkloadView { queue_position, ..view(w, attempts, false) })
        }
        None => Err(ApiError::not_found(format!("no workload {id} in this store"))),
    }
}

async fn submit(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Query(q): Query<SubmitQuery>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let tenant = match authz::submit_tenant(&p, q.tenant.as_deref(), &s.tenancy()) {
        Ok(t) => t,
        Err(d) => {
            // Refused after the middleware's decision: audited here, as
            // every refused state-changing request is.
            let e = d.into_error();
            let outcome = format!("denied: {}", e.body.message);
            let target = q.tenant.as_ref().map(|t| format!("tenant {t}"));
            s.write_audit(crate::server::auth::audit(
                &p,
                "POST /v1/workloads",
                target,
                outcome,
                authz::now(),
            ))
            .await;
            return Err(e);
        }
    };
    let body = spec_body(body).await?;
    let loaded = parse_spec(&headers, &body)?;
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let k = v.to_str().ok().filter(|k| !k.is_empty() && k.len() <= 256).ok_or_else(|| {
                ApiError::bad_request("the Idempotency-Key header must be 1 to 256 visible ASCII characters")
                    .field("Idempotency-Key")
            })?;
            Some(scoped_key(&p.name, k))
        }
    };
    let cmd = Command::Submit { spec: Box::new(loaded.spec), idempotency_key: key };
    let mut by = caller(&p, None);
    by.tenant = tenant;
    match s.engine()?.command_as(cmd, by).await {
        CommandResult::Submitted { id, existing } => {
            let mut v = load_view(&s, id).await?;
            v.existing = existing;
            let status = if existing { StatusCode::OK } else { StatusCode::CREATED };
            let location = HeaderValue::from_str(&format!("/v1/workloads/{id}")).ok();
            let mut resp = (status, Json(v)).into_response();
            if let Some(l) = location {
                resp.headers_mut().insert(header::LOCATION, l);
            }
            Ok(resp)
        }
        CommandResult::Error { code, message } => Err(ApiError::refused(code, message)),
        CommandResult::Ok { message } => {
            Err(ApiError::internal(format!("unexpected answer to a submit: {message}")))
        }
    }
}

/// `queued,running` → the states.
pub fn parse_states(s: &str) -> Result<Vec<WorkloadState>, String> {
    s.split(',').filter(|x| !x.is_empty()).map(str::parse).collect()
}

async fn list(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Query(mut q): Query<ListQuery>,
) -> ApiResult<Json<Page>> {
    blank_is_absent([&mut q.state, &mut q.name, &mut q.label, &mut q.provider, &mut q.submitted_by]);
    blank_is_absent([&mut q.tenant, &mut q.cursor]);
    let tenancy = s.tenancy();
    let mut tenants: Vec<crate::journal::TenantFilter> = authz::listing(&p, &tenancy).into_iter().collect();
    if let Some(t) = &q.tenant {
        if tenancy.is_empty() {
            return Err(ApiError::bad_request(format!(
                "tenant {t:?} is given but no tenants are configured; leave it out"
            ))
            .field("tenant"));
        }
        tenants.push(crate::journal::TenantFilter::of(Some(t), tenancy.default_tenant.as_deref()));
    }
    let states = parse_states(q.state.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(e).field("state"))?;
    let label = match &q.label {
        None => None,
        Some(l) => Some(
            l.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| ApiError::bad_request("label must be KEY=VALUE").field("label"))?,
        ),
    };
    let before = match &q.cursor {
        None => None,
        Some(c) => Some(c.parse::<WorkloadId>().map_err(|e| ApiError::bad_request(e).field("cursor"))?),
    };
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let filter = WorkloadFilter {
        states,
        name_contains: q.name.clone(),
        limit: Some(limit + 1),
        before,
        label,
        provider: q.provider.clone(),
        submitted_by: q.submitted_by.clone(),
        unresolved: q.unresolved,
        tenants,
        ..WorkloadFilter::default()
    };
    let (rows, total) = s
        .read(move |j| {
            let total = j.count_workloads(&filter)?;
            let ws = j.workloads(&filter)?;
            Ok((with_attempts(j, ws)?, total))
        })
        .await
        .map_err(ApiError::journal)?;
    let more = rows.len() > limit;
    let workloads: Vec<WorkloadView> = rows.into_iter().take(limit).map(|(w, a)| view(w, a, false)).collect();
    let next_cursor = if more { workloads.last().map(|v| v.workload.id.to_string()) } else { None };
    Ok(Json(Page { workloads, next_cursor, total, limit }))
}

/// Each workload with its attempts ([`Journal::attempts_of`]).
///
/// [`Journal::attempts_of`]: crate::journal::Journal::attempts_of
fn with_attempts(
    j: &crate::journal::Journal,
    ws: Vec<WorkloadRecord>,
) -> Result<Vec<(WorkloadRecord, Vec<AttemptRecord>)>, crate::journal::JournalError> {
    let ids: Vec<WorkloadId> = ws.iter().map(|w| w.id).collect();
    let mut by_id: std::collections::HashMap<WorkloadId, Vec<AttemptRecord>> = Default::default();
    for a in j.attempts_of(&ids)? {
        by_id.entry(a.id.workload).or_default().push(a);
    }
    Ok(ws
        .into_iter()
        .map(|w| {
            let a = by_id.remove(&w.id).unwrap_or_default();
            (w, a)
        })
        .collect())
}

async fn show(State(s): State<Served>, Extension(t): Extension<Target>) -> ApiResult<Json<WorkloadView>> {
    Ok(Json(load_view(&s, t.workload()?).await?))
}

async fn events(
    State(s): State<Served>,
    Extension(t): Extension<Target>,
) -> ApiResult<Json<Vec<EventRecord>>> {
    let id = t.workload()?;
    load_view(&s, id).await?;
    s.read(move |j| j.events(id)).await.map(Json).map_err(ApiError::journal)
}

/// The header carrying where the next read of a log should start.
pub const NEXT_OFFSET: &str = "x-canopy-next-offset";
/// The header carrying when the bytes of a log read were written:
/// `OFFSET:MILLIS` pairs, comma-separated, each a chunk's first byte and
/// when the engine first read it, the first covering the read's start
/// (see [`crate::engine::log_times`]). Absent when the log has no times.
pub const LOG_TIMES: &str = "x-canopy-log-times";

async fn logs(
    State(s): State<Served>,
    Extension(t): Extension<Target>,
    Query(q): Query<LogQuery>,
) -> ApiResult<Response> {
    let id = t.workload()?;
    let stream = match q.stream.as_deref().unwrap_or("stdout") {
        "stdout" => LogStream::Stdout,
        "stderr" => LogStream::Stderr,
        other => {
            return Err(
                ApiError::bad_request(format!("unknown stream {other:?}; stdout or stderr")).field("stream")
            );
        }
    };
    let v = load_view(&s, id).await?;
    let n = match q.attempt {
        Some(n) => n,
        None => v
            .attempts
            .last()
            .map(|a| a.id.n)
            .ok_or_else(|| ApiError::not_found(format!("{id} has no attempts yet")))?,
    };
    let Some(attempt) = v.attempts.iter().find(|a| a.id.n == n).map(|a| a.id) else {
        return Err(ApiError::not_found(format!("{id} has no attempt {n}")).field("attempt"));
    };
    let offset = q.offset.unwrap_or(0);
    let headers =
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")];
    if !q.follow.unwrap_or(false) {
        let max = q.limit.unwrap_or(1 << 20).min(8 << 20);
        let chunk = s.engine()?.logs(attempt, stream, offset, max).await.map_err(ApiError::internal)?;
        let times = crate::engine::log_times::to_header(&chunk.times);
        let mut resp = (headers, chunk.data).into_response();
        resp.headers_mut().insert(NEXT_OFFSET, HeaderValue::from(chunk.next_offset));
        if !times.is_empty()
            && let Ok(v) = HeaderValue::from_str(&times)
        {
            resp.headers_mut().insert(LOG_TIMES, v);
        }
        return Ok(resp);
    }
    // Follow: what is there, then what comes, until the attempt has ended
    // and everything shipped has been sent.
    let (st, engine) = (s.clone(), s.engine()?.clone());
    let body = async_stream(move |tx| async move {
        let mut offset = offset;
        loop {
            let ended = st
                .read(move |j| {
                    Ok(j.attempts(id)?
                        .into_iter()
                        .find(|a| a.id == attempt)
                        .is_none_or(|a| a.state.is_final()))
                })
                .await
                .unwrap_or(true);
            loop {
                match engine.logs(attempt, stream, offset, 256 * 1024).await {
                    Ok(c) if !c.data.is_empty() => {
                        offset = c.next_offset;
                        if tx.send(Ok(Bytes::from(c.data))).await.is_err() {
                            return;
                        }
                    }
                    _ => break,
                }
            }
            if ended || *st.stopping.borrow() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    });
    Ok((headers, body).into_response())
}

/// A response body fed by a task through a small channel.
fn async_stream<F, Fut>(f: F) -> Body
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(f(tx));
    Body::from_stream(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

async fn manifest(s: &ServerState, id: WorkloadId) -> ApiResult<Vec<(u32, crate::providers::Artifact)>> {
    let v = load_view(s, id).await?;
    let mut out = Vec::new();
    for a in &v.attempts {
        let path = s.home.artifacts().join(id.to_string()).join(a.id.n.to_string()).join("manifest.json");
        if let Ok(text) = tokio::fs::read_to_string(&path).await {
            // A `Collection` (artifacts and what was skipped); a bare list
            // of artifacts in stores of older versions.
            #[derive(serde::Deserialize)]
            #[serde(untagged)]
            enum Manifest {
                Collection(crate::providers::Collection),
                Artifacts(Vec<crate::providers::Artifact>),
            }
            let arts = match serde_json::from_str(&text)
                .map_err(|e| ApiError::internal(format!("reading {}: {e}", path.display())))?
            {
                Manifest::Collection(c) => c.artifacts,
                Manifest::Artifacts(a) => a,
            };
            out.extend(arts.into_iter().map(|x| (a.id.n, x)));
        }
    }
    Ok(out)
}

async fn artifacts(
    State(s): State<Served>,
    Extension(t): Extension<Target>,
) -> ApiResult<Json<Vec<ArtifactView>>> {
    let id = t.workload()?;
    let all = manifest(&s, id).await?;
    let views = all
        .into_iter()
        .map(|(n, a)| {
            let is_file = std::fs::symlink_metadata(&a.path).is_ok_and(|m| m.is_file());
            ArtifactView {
                attempt: n,
                download: is_file.then(|| format!("/v1/workloads/{id}/artifacts/{n}/{}", a.name)),
                name: a.name,
                bytes: a.bytes,
                sha256: a.sha256,
                path: a.path,
            }
        })
        .collect();
    Ok(Json(views))
}

async fn artifact(State(s): State<Served>, Extension(t): Extension<Target>) -> ApiResult<Response> {
    let Target::Artifact { workload: id, attempt, name } = t else {
        return Err(ApiError::internal(format!("the artifact endpoint's path named {t:?}")));
    };
    let all = manifest(&s, id).await?;
    let Some((_, a)) = all.into_iter().find(|(n, a)| *n == attempt && a.name == name) else {
        return Err(ApiError::not_found(format!("{id} attempt {attempt} has no output {name:?}")));
    };
    // Only regular files inside this workload's part of the artifact
    // store; never a link, whatever the manifest says.
    let root = s.home.artifacts().join(id.to_string()).join(attempt.to_string());
    let meta = tokio::fs::symlink_metadata(&a.path)
        .await
        .map_err(|_| ApiError::not_found("the output file is gone"))?;
    if !meta.is_file() {
        return Err(ApiError::unprocessable(format!(
            "{name:?} is a directory; download its files one by one"
        )));
    }
    let (canon, canon_root) = (std::fs::canonicalize(&a.path), std::fs::canonicalize(&root));
    if !matches!((&canon, &canon_root), (Ok(c), Ok(r)) if c.starts_with(r)) {
        return Err(ApiError::forbidden("the output is outside the artifact store"));
    }
    let file = tokio::fs::File::open(&a.path).await.map_err(|e| ApiError::internal(e.to_string()))?;
    let body = file_body(file);
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_string()),
            (header::CONTENT_LENGTH, meta.len().to_string()),
        ],
        body,
    )
        .into_response())
}

/// A file as a response body, in chunks.
fn file_body(mut f: tokio::fs::File) -> Body {
    use tokio::io::AsyncReadExt;
    async_stream(move |tx| async move {
        loop {
            let mut buf = vec![0u8; 64 * 1024];
            match f.read(&mut buf).await {
                Ok(0) => return,
                Ok(n) => {
                    buf.truncate(n);
                    if tx.send(Ok(Bytes::from(buf))).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            }
        }
    })
}

/// An evicting drain's grace in whole seconds, from `30s`, `2m` or a number.
fn grace_s(r: &Reason) -> ApiResult<Option<u64>> {
    let bad = |v: &serde_json::Value| {
        ApiError::unprocessable(format!(
            "grace {v} is not a duration; give one like \"30s\" or \"2m\" (at most 1h)"
        ))
        .field("grace")
    };
    let Some(v) = &r.grace else { return Ok(None) };
    let secs = match v {
        serde_json::Value::Number(n) => n.as_u64().ok_or_else(|| bad(v))?,
        serde_json::Value::String(t) => {
            t.parse::<crate::units::HumanDuration>().map_err(|_| bad(v))?.0.as_secs()
        }
        _ => return Err(bad(v)),
    };
    if secs > crate::spec::Runtime::MAX_STOP_GRACE.as_secs() {
        return Err(bad(v));
    }
    Ok(Some(secs))
}

/// `until` as milliseconds since the epoch.
pub fn parse_until(v: &serde_json::Value, now: Millis) -> Result<Millis, String> {
    let bad = || {
        format!("until {v} is not a time; give RFC 3339 (2026-12-02T08:00:00Z), a duration (2h) or epoch ms")
    };
    let at = match v {
        serde_json::Value::Number(n) => n.as_i64().map(Millis).ok_or_else(bad)?,
        serde_json::Value::String(s) => match s.parse::<crate::units::HumanDuration>() {
            Ok(d) => now.plus_secs(d.0.as_secs_f64()),
            Err(_) => crate::units::parse_timestamp_ms(s).map(Millis).ok_or_else(bad)?,
        },
        _ => return Err(bad()),
    };
    if at <= now {
        return Err(format!("until {v} is not in the future"));
    }
    Ok(at)
}

async fn reason_body(body: Bytes) -> ApiResult<Reason> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Reason::default());
    }
    serde_json::from_slice(&body).map_err(|e| {
        ApiError::unprocessable(format!(
            "the body is not JSON of the form {{\"reason\": \"…\"}}: {e} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

async fn run_command(
    s: &ServerState,
    p: &Principal,
    cmd: Command,
    r: Reason,
) -> ApiResult<Json<CommandAnswer>> {
    match s.engine()?.command_as(cmd, caller(p, r.reason)).await {
        CommandResult::Ok { message } => Ok(Json(CommandAnswer { message, id: None, existing: None })),
        CommandResult::Submitted { id, existing } => Ok(Json(CommandAnswer {
            message: format!("submitted {id}"),
            id: Some(id),
            existing: Some(existing),
        })),
        CommandResult::Error { code, message } => Err(ApiError::refused(code, message)),
    }
}

pub(super) async fn body_bytes(req: Request) -> ApiResult<Bytes> {
    axum::body::to_bytes(req.into_body(), 64 * 1024)
        .await
        .map_err(|_| ApiError::too_large("the body is over 64 KiB"))
}

/// A command on the workload or node the path names, with the body's
/// reason: one handler for cancel, retry, acknowledge, unexclude, cordon,
/// uncordon, drain and unquarantine.
async fn command(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Extension(target): Extension<Target>,
    Extension(route): Extension<&'static authz::Route>,
    req: Request,
) -> ApiResult<Json<CommandAnswer>> {
    // The command is the route authorization matched, never the raw path.
    let op = route.path.rsplit('/').next().unwrap_or_default();
    let r = reason_body(body_bytes(req).await?).await?;
    let until = match &r.until {
        None => None,
        Some(_) if op != "cordon" => {
            return Err(ApiError::unprocessable("until applies to a cordon only").field("until"));
        }
        Some(v) => Some(parse_until(v, authz::now()).map_err(|e| ApiError::unprocessable(e).field("until"))?),
    };
    if (r.evict || r.grace.is_some()) && op != "drain" {
        return Err(ApiError::unprocessable("evict and grace apply to a drain only").field("evict"));
    }
    if r.grace.is_some() && !r.evict {
        return Err(
            ApiError::unprocessable("grace applies to an evicting drain (evict: true)").field("grace")
        );
    }
    if r.node.is_some() && op != "unexclude" {
        return Err(ApiError::unprocessable("node applies to an unexclude only").field("node"));
    }
    let cmd = match op {
        "cancel" => Command::Cancel { id: target.workload()? },
        "unexclude" => Command::Unexclude { id: target.workload()?, target: r.node.clone() },
        "retry" => Command::Retry { id: target.workload()? },
        "acknowledge" => Command::Acknowledge { id: target.workload()? },
        "cordon" => Command::Cordon { node: target.node()?.to_string(), until },
        "uncordon" => Command::Uncordon { node: target.node()?.to_string() },
        "drain" => Command::Drain { node: target.node()?.to_string(), evict: r.evict, grace_s: grace_s(&r)? },
        "unquarantine" => Command::Unquarantine { node: target.node()?.to_string() },
        other => return Err(ApiError::not_found(format!("no command {other:?}"))),
    };
    run_command(&s, &p, cmd, r).await
}

async fn plan(State(s): State<Served>, headers: HeaderMap, body: Body) -> ApiResult<Json<serde_json::Value>> {
    use crate::schedule::{Decision, Policy, Requirements, Snapshot, place};
    let body = spec_body(body).await?;
    let loaded = parse_spec(&headers, &body)?;
    let status = s.fleet_status().ok_or_else(|| {
        ApiError::unavailable("the engine has not published its fleet yet; try again in a second")
    })?;
    let spec = &loaded.spec;
    let req = Requirements::from_spec(spec);
    let policy = Policy::for_optimize(spec.preferences.optimize);
    let snap = Snapshot::for_plan(&status.fleet, &status.health, Some(&status.demand), &req);
    let decision = place(&req, &snap, &policy);
    let fits = matches!(decision, Decision::Placed(_));
    let mut v = serde_json::to_value(&decision).map_err(|e| ApiError::internal(e.to_string()))?;
    if let Some(o) = v.as_object_mut() {
        o.insert("spec".into(), spec.name.clone().into());
        o.insert("fits".into(), fits.into());
        o.insert("warnings".into(), serde_json::to_value(&loaded.warnings).unwrap_or_default());
    }
    Ok(Json(v))
}

async fn fleet(State(s): State<Served>) -> ApiResult<Json<serde_json::Value>> {
    let status = s.fleet_status().ok_or_else(|| {
        ApiError::unavailable("the engine has not published its fleet yet; try again in a second")
    })?;
    serde_json::to_value(&*status).map(Json).map_err(|e| ApiError::internal(e.to_string()))
}

async fn recent_events(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Query(q): Query<EventsQuery>,
) -> ApiResult<Json<Vec<EventRecord>>> {
    let limit = q.limit.unwrap_or(200).min(10_000);
    let events: Vec<EventRecord> = s
        .read(move |j| {
            let last = j.last_event_seq()?;
            let since = last.saturating_sub(i64::try_from(limit).unwrap_or(i64::MAX));
            Ok(j.events_since(since, limit)?.into_iter().map(|(_, e)| e).collect())
        })
        .await
        .map_err(ApiError::journal)?;
    // With tenants: only the events of workloads the caller may see.
    let batch = std::sync::Arc::new(crate::engine::model::Batch {
        seq: 0,
        records: events.into_iter().map(Record::Event).collect(),
    });
    let seen = super::visible::Seen::default().filter(&s, &p, &s.tenancy(), false, batch).await;
    Ok(Json(
        seen.records
            .iter()
            .filter_map(|r| if let Record::Event(e) = r { Some(e.clone()) } else { None })
            .collect(),
    ))
}

/// The most audit records one `GET /v1/audit` reads to fill the page of
/// a principal that sees only some of them.
const AUDIT_SCAN: usize = 100_000;

async fn audit(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Query(q): Query<AuditQuery>,
) -> ApiResult<Json<Vec<crate::engine::model::AuditRecord>>> {
    let f = AuditFilter {
        since: q.since.map(Millis),
        principal: q.principal.filter(|s| !s.is_empty()),
        limit: Some(q.limit.unwrap_or(200).min(10_000)),
        action: q.action.filter(|s| !s.is_empty()),
        outcome: q.outcome.filter(|s| !s.is_empty()),
        target: q.target.filter(|s| !s.is_empty()),
        until: q.until.map(Millis),
    };
    let tenancy = s.tenancy();
    if authz::listing(&p, &tenancy).is_none() {
        let all = s.read(move |j| j.audit(&f)).await.map_err(ApiError::journal)?;
        return Ok(Json(all));
    }
    // With tenants, a scoped or tenant-bound operator's share: read on
    // past what it may not see until the page is full, the trail ends, or
    // AUDIT_SCAN records were read (a bound on one request's work).
    let want = f.limit.unwrap_or(200);
    let mut seen = super::visible::Seen::default();
    let mut out = Vec::with_capacity(want);
    let (mut before, mut scanned) = (None, 0usize);
    loop {
        let page = f.clone();
        let batch = s.read(move |j| j.audit_before(&page, before)).await.map_err(ApiError::journal)?;
        let ended = batch.is_empty() || batch.len() < want;
        for (seq, a) in batch {
            before = Some(seq);
            scanned += 1;
            if seen.sees_audit(&s, &p, &a, &tenancy).await {
                out.push(a);
                if out.len() == want {
                    return Ok(Json(out));
                }
            }
        }
        if ended || scanned >= AUDIT_SCAN {
            break;
        }
    }
    Ok(Json(out))
}
