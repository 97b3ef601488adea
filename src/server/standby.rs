//! The API of a standby server: every request, on the store's socket and
//! on TCP, is forwarded to the leader the lease row names (method, path
//! and query, headers with Authorization, body), and its response streamed
//! back (so event streams and `canopy console` work through it), marked
//! `Canopy-Served-By: standby <this server>; leader <holder>`.
//!
//! The standby decides nothing itself: the leader authenticates and
//! authorizes every request, so the standby answers only 503 (with
//! `Retry-After: 1`) when no leader is serving or reachable, and says
//! no more in it than that (who leads and where goes to its log and to
//! the `Canopy-Served-By` of forwarded answers). A request on the
//! standby's socket carries no token and arrives at the leader as an
//! anonymous TCP request: the leader refuses it unless it carries one
//! (`CANOPY_TOKEN`).

use super::listen::{bind_socket, socket_path};
use super::{ServeError, ServerOptions};
use crate::ha::LeaderView;
use crate::home::Home;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::task::JoinSet;

/// The header every forwarded response carries.
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

/// A standby's listeners; [`Standby::stop`] frees its addresses for the
/// engine that takes over.
pub struct Standby {
    pub socket: PathBuf,
    /// The TCP address actually bound.
    pub tcp: Option<SocketAddr>,
    tasks: JoinSet<()>,
}

impl Standby {
    /// Stops listening and ends every forwarded request in flight (event
    /// streams included: their clients reconnect to the new leader).
    pub async fn stop(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Listens where the engine would (the store's socket, `options.listen`)
/// and forwards to the leader `leader` names.
pub async fn listen(home: &Home, options: &ServerOptions, leader: LeaderView) -> Result<Standby, ServeError> {
    let tls = super::listen_tls(options)?;
    let forward = Forward::new(leader).map_err(ServeError::Tls)?;
    let socket = socket_path(home.root());
    let uds = bind_socket(&socket)
        .map_err(|source| ServeError::Bind { what: socket.display().to_string(), source })?;
    let mut tasks = JoinSet::new();
    let f = forward.clone();
    tasks.spawn(async move {
        let mut conns = JoinSet::new();
        loop {
            match uds.accept().await {
                Ok((s, _)) => {
                    conns.spawn(connection(s, f.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "standby: accepting on the store's socket failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            while conns.try_join_next().is_some() {}
        }
    });
    let mut tcp_addr = None;
    if let Some(addr) = options.listen {
        let tcp = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ServeError::Bind { what: addr.to_string(), source })?;
        tcp_addr = tcp.local_addr().ok();
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let (f, timeout) = (forward, options.header_read_timeout);
        tasks.spawn(async move {
            let mut conns = JoinSet::new();
            loop {
                let s = match tcp.accept().await {
                    Ok((s, _)) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "standby: accepting on TCP failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (f, acceptor) = (f.clone(), acceptor.clone());
                conns.spawn(async move {
                    match acceptor {
                        None => connection(s, f).await,
                        Some(a) => {
                            if let Ok(Ok(s)) = tokio::time::timeout(timeout, a.accept(s)).await {
                                connection(s, f).await
                            }
                        }
                    }
                });
                while conns.try_join_next().is_some() {}
            }
        });
    }
    tracing::info!(socket = %socket.display(), tcp = ?tcp_addr, "standing by: forwarding the API to the leader");
    Ok(Standby { socket, tcp: tcp_addr, tasks })
}

async fn connection<IO>(io: IO, f: Forward)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let f = f.clone();
        async move { Ok::<_, std::convert::Infallible>(f.forward(req.map(Body::new)).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(ServerOptions::DEFAULT_HEADER_READ_TIMEOUT);
    if let Err(e) = builder.serve_connection(TokioIo::new(io), service).await {
        tracing::debug!(error = %e, "standby: connection ended");
    }
}

/// Forwards requests to the leader of the moment.
#[derive(Clone)]
struct Forward {
    leader: LeaderView,
    http: reqwest::Client,
    me: String,
}

impl Forward {
    /// A client with no overall time limit (event streams last), trusting
    /// the system's roots and `$CANOPY_CA_CERT` (a leader with a private CA).
    fn new(leader: LeaderView) -> Result<Forward, String> {
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
        Ok(Forward { leader, http, me: crate::journal::this_server() })
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
        let sent = self
            .http
            .request(parts.method, &url)
            .headers(headers)
            .body(reqwest::Body::wrap_stream(body.into_data_stream()))
            .send()
            .await;
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
        out = out.header(SERVED_BY, self.served_by(&row.holder));
        out.body(Body::from_stream(resp.bytes_stream())).unwrap_or_else(|_| {
            self.unavailable("the leader's response could not be passed on; retry".into())
        })
    }

    fn served_by(&self, leader: &str) -> HeaderValue {
        HeaderValue::from_str(&format!("standby {}; leader {leader}", self.me))
            .unwrap_or_else(|_| HeaderValue::from_static("standby"))
    }

    fn unavailable(&self, message: String) -> Response<Body> {
        let body = serde_json::json!({ "error": { "code": "no-leader", "message": message } });
        let mut r = Response::new(Body::from(body.to_string()));
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("retry-after", HeaderValue::from_static("1"));
        h.insert(
            SERVED_BY,
            HeaderValue::from_str(&format!("standby {}", self.me))
                .unwrap_or(HeaderValue::from_static("standby")),
        );
        r
    }
}
