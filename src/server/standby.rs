//! The API of a standby server, on the store's socket and on TCP.
//!
//! It answers itself, from the journal, the routes whose handlers read
//! only the journal ([`api::STANDBY_ROUTES`]: lists, a workload, its
//! events, recent events, the audit trail, whoami, the servers, health,
//! metrics with its own role, the OpenAPI document), through the same
//! router, authentication and authorization as the leader (the server's
//! state without an engine: see [`ServerState::engine`]); so reads keep
//! working while no leader answers. Its tokens and tenancy are read again
//! from the journal every second and whenever a token it does not know
//! arrives, so what the leader made or revoked holds here too. A token
//! the standby refuses is logged, not audited: only the leader writes the
//! journal.
//!
//! Every other request (writes, the live fleet, logs and artifacts, the
//! event stream, tokens, tenants, usage, `/mcp`) is forwarded to the
//! leader the lease row names (method, path and query, headers with
//! Authorization, body), and its response streamed back (so event streams
//! and `canopy console` work through it). Every answer is marked
//! `Canopy-Served-By: standby <this server>; leader <holder>` (no leader
//! named when none holds the lease).
//!
//! A forwarded request decides nothing here: the leader authenticates and
//! authorizes it, so the standby answers only 503 (with `Retry-After: 1`)
//! when no leader is serving or reachable, and says no more in it than
//! that (who leads and where goes to its log and to the `Canopy-Served-By`
//! of answers). A request on the standby's socket carries no token and
//! arrives at the leader as an anonymous TCP request: the leader refuses
//! it unless it carries one (`CANOPY_TOKEN`); read here, it is the
//! store's owner's, as on the leader's socket.
//!
//! [`ServerState::engine`]: super::ServerState::engine

use super::{ServeError, ServerOptions, api, conn};
use crate::ha::LeaderView;
use crate::home::Home;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The header every answer of a standby carries.
pub const SERVED_BY: &str = "canopy-served-by";

/// Headers that belong to one connection, never forwarded.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// How long a forwarded read waits for the leader to begin its answer.
const READ_HEAD_TIMEOUT: Duration = Duration::from_secs(5);

/// How often a standby reads its tokens and tenancy again.
const RELOAD: Duration = Duration::from_secs(1);

/// A standby serving; [`Standby::stop`] ends it, for the engine that takes
/// over (which accepts on the same listeners when they were
/// [`ServerOptions::bound`], and binds the same addresses otherwise).
pub struct Standby {
    pub socket: PathBuf,
    /// The TCP address actually bound.
    pub tcp: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
    /// Listening on [`ServerOptions::bound`]: its owner removes the socket.
    kept: bool,
}

impl Standby {
    /// Stops listening and ends every request in flight (forwarded event
    /// streams included: their clients reconnect to the new leader).
    pub async fn stop(mut self) {
        conn::stop_all(&self.stop, &mut self.tasks).await;
        if !self.kept {
            let _ = std::fs::remove_file(&self.socket);
        }
    }
}

/// Listens where the engine would (the store's socket, `options.listen`),
/// answers the journal's reads from the journal in `home` and forwards
/// the rest to the leader `leader` names.
pub async fn listen(home: &Home, options: &ServerOptions, leader: LeaderView) -> Result<Standby, ServeError> {
    let tls = super::listen_tls(options)?;
    let (stop, stop_rx) = watch::channel(false);
    let forward = Forward::new(leader.clone(), stop_rx.clone()).map_err(ServeError::Tls)?;
    let state =
        super::open_state(None, Some(leader), home.clone(), None, options.clone(), stop_rx.clone()).await?;
    let f = forward.clone();
    let to_leader = move |req: axum::extract::Request| {
        let f = f.clone();
        async move { f.forward(req).await }
    };
    let f = forward.clone();
    let router = api::routes(&state)
        .fallback(to_leader.clone())
        .method_not_allowed_fallback(to_leader)
        .layer(axum::middleware::map_response(move |mut r: Response<Body>| {
            let f = f.clone();
            async move {
                // Forwarded answers are marked already.
                if !r.headers().contains_key(SERVED_BY) {
                    let by = f.served_by(
                        f.leader.borrow().as_ref().filter(|l| l.held()).map(|l| l.holder.as_str()),
                    );
                    r.headers_mut().insert(SERVED_BY, by);
                }
                r
            }
        }))
        .layer(axum::middleware::from_fn_with_state(state.clone(), super::http_metrics::record))
        .with_state(state.clone());
    let limits = conn::Limits::new(options, conn::open_file_limit());
    let shared = conn::Shared::new(state.clone(), router, limits);
    let (bound, kept) = super::listen::Bound::given_or_bind(home.root(), options).await?;
    let mut tasks = JoinSet::new();
    for accepting in conn::accept_loops(&bound, tls, &shared, &stop_rx) {
        tasks.spawn(accepting);
    }
    let (socket, tcp_addr) = (bound.socket.clone(), bound.tcp_addr);
    let mut stopping = stop_rx;
    tasks.spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(RELOAD) => {}
                _ = stopping.wait_for(|s| *s) => return,
            }
            if let Err(e) = state.reload_tokens(Instant::now()).await {
                tracing::warn!(error = %e, "standby: cannot read the tokens and tenancy again; retrying");
            }
        }
    });
    tracing::info!(socket = %socket.display(), tcp = ?tcp_addr, "standing by: serving reads, forwarding the rest of the API to the leader");
    Ok(Standby { socket, tcp: tcp_addr, stop, tasks, kept })
}

/// Forwards requests to the leader of the moment.
#[derive(Clone)]
struct Forward {
    leader: LeaderView,
    http: reqwest::Client,
    me: String,
    /// Turns true when the standby stops: requests in flight end.
    stopping: watch::Receiver<bool>,
}

impl Forward {
    /// A client with no overall time limit (event streams last), trusting
    /// the system's roots and `$CANOPY_CA_CERT` (a leader with a private CA).
    fn new(leader: LeaderView, stopping: watch::Receiver<bool>) -> Result<Forward, String> {
        let mut b = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy();
        if let Some(path) = std::env::var_os("CANOPY_CA_CERT") {
            let pem = std::fs::read(&path)
                .map_err(|e| format!("cannot read $CANOPY_CA_CERT ({}): {e}", path.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("$CANOPY_CA_CERT ({}): {e}", path.display()))?;
            b = b.tls_certs_merge(certs);
        }
        let http = b.build().map_err(|e| format!("cannot set up the standby's HTTP client: {e}"))?;
        Ok(Forward { leader, http, me: crate::journal::this_server(), stopping })
    }

    async fn forward(&self, req: Request<Body>) -> Response<Body> {
        // Just started: the first read of the lease row is on its way.
        if self.leader.borrow().is_none() {
            let mut first = self.leader.clone();
            let _ = tokio::time::timeout(Duration::from_secs(2), first.wait_for(Option::is_some)).await;
        }
        let Some(row) = self.leader.borrow().clone().filter(|r| r.held()) else {
            return self.unavailable(
                "no leader is serving now (the journal's lease is free or expired); retry in a moment".into(),
            );
        };
        if row.address.is_empty() {
            tracing::warn!(leader = %row.holder, "standby: the leader advertises no API address to forward to");
            return self.unavailable(
                "the leader advertises no API address to forward to (it serves no TCP, or was started without --advertise); retry later or ask it directly".into(),
            );
        }
        let (parts, body) = req.into_parts();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let url = format!("{}{path}", row.address);
        let mut headers = HeaderMap::new();
        for (k, v) in &parts.headers {
            if !HOP_BY_HOP.contains(&k.as_str()) {
                headers.append(k.clone(), v.clone());
            }
        }
        // A read the leader has not begun to answer in this long is given
        // up (a frozen leader accepts connections and answers nothing):
        // the client may ask again, here or elsewhere. Writes wait, as
        // their outcome would be unknown.
        let read = parts.method == axum::http::Method::GET || parts.method == axum::http::Method::HEAD;
        let head_limit = if read { READ_HEAD_TIMEOUT } else { Duration::MAX };
        let send = self
            .http
            .request(parts.method, &url)
            .headers(headers)
            .body(reqwest::Body::wrap_stream(body.into_data_stream()))
            .send();
        let mut stopping = self.stopping.clone();
        let sent = tokio::select! {
            r = tokio::time::timeout(head_limit, send) => match r {
                Ok(r) => r,
                Err(_) => {
                    tracing::warn!(leader = %row.holder, address = %row.address, "standby: the leader did not begin to answer a read in time");
                    return self.unavailable(
                        "the leader does not answer; retry in a moment: a standby takes over once its lease runs out"
                            .into(),
                    );
                }
            },
            _ = stopping.wait_for(|s| *s) => {
                return self.unavailable("this standby is stopping (taking over, or shutting down); retry in a moment".into());
            }
        };
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(leader = %row.holder, address = %row.address, error = %e, "standby: the leader did not answer");
                return self.unavailable(
                    "the leader does not answer; retry in a moment: a standby takes over once its lease runs out"
                        .into(),
                );
            }
        };
        let mut out = Response::builder().status(resp.status().as_u16());
        for (k, v) in resp.headers() {
            if !HOP_BY_HOP.contains(&k.as_str())
                && let (Ok(k), Ok(v)) =
                    (HeaderName::from_bytes(k.as_str().as_bytes()), HeaderValue::from_bytes(v.as_bytes()))
            {
                out = out.header(k, v);
            }
        }
        out = out.header(SERVED_BY, self.served_by(Some(&row.holder)));
        // Cut when the standby stops, so the connection can close.
        let mut stopping = self.stopping.clone();
        let stopped = Box::pin(async move {
            let _ = stopping.wait_for(|s| *s).await;
        });
        let stream = futures::StreamExt::take_until(resp.bytes_stream(), stopped);
        out.body(Body::from_stream(stream)).unwrap_or_else(|_| {
            self.unavailable("the leader's response could not be passed on; retry".into())
        })
    }

    /// `standby <me>; leader <holder>`, or `standby <me>` with no leader.
    fn served_by(&self, leader: Option<&str>) -> HeaderValue {
        let text = match leader {
            Some(l) => format!("standby {}; leader {l}", self.me),
            None => format!("standby {}", self.me),
        };
        HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("standby"))
    }

    fn unavailable(&self, message: String) -> Response<Body> {
        let body = serde_json::json!({ "error": { "code": "no-leader", "message": message } });
        let mut r = Response::new(Body::from(body.to_string()));
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("retry-after", HeaderValue::from_static("1"));
        h.insert(SERVED_BY, self.served_by(None));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authz::ROUTES;
    use tower::ServiceExt;

    /// Every route of the table, as a standby's router takes it: those in
    /// [`api::STANDBY_ROUTES`] reach its own handlers (behind
    /// authorization), every other one falls through to the forwarder.
    #[tokio::test]
    async fn a_standby_routes_exactly_the_journals_reads_and_forwards_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let (_stop, stopping) = watch::channel(false);
        let (_tx, leader) = watch::channel(None);
        let home = Home::new(dir.path());
        let state =
            super::super::open_state(None, Some(leader), home, None, ServerOptions::default(), stopping)
                .await
                .unwrap();
        let forwarded = || async { (StatusCode::IM_A_TEAPOT, "forwarded") };
        let router = api::routes(&state)
            .fallback(forwarded)
            .method_not_allowed_fallback(forwarded)
            .with_state(state.clone());
        for r in ROUTES {
            let path = r.path.replace("{id}", "w-1").replace("{name}", "n1").replace("{attempt}", "1");
            let req = Request::builder().method(r.method).uri(&path).body(Body::empty()).unwrap();
            let status = router.clone().oneshot(req).await.unwrap().status();
            let here = api::STANDBY_ROUTES.contains(&(r.method, r.path));
            assert_eq!(status != StatusCode::IM_A_TEAPOT, here, "{} {}: {status}", r.method, r.path);
        }
    }
}
