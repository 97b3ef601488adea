//! Serving connections: one accept loop per listener, each connection on
//! hyper's HTTP/1 with timeouts, and the limits that keep slow, idle or
//! hostile TCP clients from taking the server's file descriptors, so the
//! store's socket always answers its owner.
//!
//! - **Header read timeout** (hyper's own): a connection must send a whole
//!   request head within it of opening, or of its previous response
//!   ending. It covers a connection that never sends a byte, one that
//!   trickles its headers, and an idle keep-alive connection. It does not
//!   run while a response is being sent, so a long response (the event
//!   stream, a followed log) is never cut by it.
//! - **Idle timeout**: a request body that stops arriving, or a response
//!   the client stops reading (writes that cannot proceed), for this long
//!   closes the connection. A quiet response (a followed log with nothing
//!   new) waits on the server, not the client, and is not idle.
//! - **Connection caps** (TCP only; the socket is the owner's): at most
//!   `max_connections` open, of which at most `max_unauthenticated` have
//!   not yet sent a request with a valid token. A connection beyond a cap
//!   takes the place of the oldest unauthenticated one that is only
//!   waiting to send a request; when there is none it is closed at once.
//!   Both caps are clamped below the process's open-file limit.
//!
//! This module owns connections only: who a request is from and what it
//! may do stay with `auth` and `authz` (a connection counts as
//! authenticated once a request on it carried a token `Tokens::verify`
//! accepts).

use super::listen::Peer;
use super::{ServerOptions, ServerState};
use axum::extract::ConnectInfo;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Notify, watch};
use tokio::time::Sleep;

/// File descriptors kept for everything but TCP clients (the journal and
/// its readers, logs, workloads' pipes, the owner's socket): at least
/// this many, or a quarter of the limit when that is more.
const RESERVED_FDS: u64 = 128;

/// The limits in force, after clamping to the open-file limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
    pub max_unauthenticated: usize,
}

impl Limits {
    /// The options' limits with the caps clamped so that TCP clients can
    /// hold at most the open-file limit `nofile` less what the rest of
    /// the server needs; `None`: no limit.
    pub fn new(o: &ServerOptions, nofile: Option<u64>) -> Limits {
        let budget = nofile.map(|n| {
            let left = n.saturating_sub(RESERVED_FDS.max(n / 4)).max(16);
            usize::try_from(left).unwrap_or(usize::MAX)
        });
        let max_connections = budget.map_or(o.max_connections, |b| o.max_connections.min(b)).max(1);
        Limits {
            header_read_timeout: o.header_read_timeout,
            idle_timeout: o.idle_timeout,
            max_connections,
            max_unauthenticated: o.max_unauthenticated.min(max_connections).max(1),
        }
    }
}

/// The soft RLIMIT_NOFILE of this process; `None` when unlimited or
/// unknown.
pub fn open_file_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct it is given.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    (r == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

// ── What the connections share ──────────────────────────────────────────

/// What every connection task needs.
pub struct Shared {
    /// The server's state, whose tokens authenticate a connection; none
    /// while it waits for its journal (see `unavailable`): then no
    /// connection counts as authenticated.
    state: Option<Arc<ServerState>>,
    router: axum::Router,
    limits: Limits,
    registry: Registry,
}

impl Shared {
    pub fn new(state: Arc<ServerState>, router: axum::Router, limits: Limits) -> Arc<Shared> {
        Arc::new(Shared { state: Some(state), router, limits, registry: Registry::default() })
    }

    /// Serving `router` with no state: it authenticates no one.
    pub fn without_state(router: axum::Router, limits: Limits) -> Arc<Shared> {
        Arc::new(Shared { state: None, router, limits, registry: Registry::default() })
    }
}

/// One connection's signals.
#[derive(Default)]
struct ConnSignals {
    /// Close the connection now (given way to a newer one, or its request
    /// body stalled).
    close: Notify,
    /// Set (under the registry's lock) when it was told to give way: it
    /// no longer counts as open.
    evicted: AtomicBool,
    /// A request on it carried a valid token.
    authenticated: AtomicBool,
    /// Its first request has arrived (notified once, then set).
    began: AtomicBool,
    first_request: Notify,
}

/// The TCP connections open now.
#[derive(Default)]
struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Open and counted (not told to give way).
    open: usize,
    /// Told to give way and not yet closed: each still holds its file
    /// until its task runs and drops it.
    closing: usize,
    /// The unauthenticated ones, oldest first.
    unauthenticated: BTreeMap<u64, Waiting>,
    /// Since the last report in the log.
    refused: u64,
    evicted: u64,
}

struct Waiting {
    /// Requests being answered now.
    in_flight: u32,
    signals: Arc<ConnSignals>,
}

/// A TCP connection's place under the caps; given back when dropped.
struct Slot {
    id: u64,
    shared: Arc<Shared>,
    signals: Arc<ConnSignals>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A place for a new TCP connection, or `None`: close it at once.
fn admit(shared: &Arc<Shared>) -> Option<Slot> {
    let limits = shared.limits;
    let mut g = shared.registry.lock();
    if g.open + g.closing >= limits.max_connections || g.unauthenticated.len() >= limits.max_unauthenticated {
        // While connections told to give way still hold their files, a
        // flood must not tell more: their files would pile up past the
        // cap (the accept loop outruns their tasks) and the server would
        // run out of descriptors. The newcomer is refused until they close.
        if g.closing > 0 && g.open + g.closing >= limits.max_connections {
            g.refused += 1;
            return None;
        }
        // The oldest unauthenticated connection that is only waiting to
        // send a request gives way: a client that has just connected and
        // sends its request at once gets in however many idle ones there
        // are.
        let victim = g.unauthenticated.iter().find(|(_, w)| w.in_flight == 0).map(|(id, _)| *id);
        let Some(w) = victim.and_then(|id| g.unauthenticated.remove(&id)) else {
            g.refused += 1;
            return None;
        };
        w.signals.evicted.store(true, Ordering::Relaxed);
        w.signals.close.notify_one();
        g.open -= 1;
        g.closing += 1;
        g.evicted += 1;
    }
    let id = g.next;
    g.next += 1;
    g.open += 1;
    let signals = Arc::new(ConnSignals::default());
    g.unauthenticated.insert(id, Waiting { in_flight: 0, signals: signals.clone() });
    Some(Slot { id, shared: shared.clone(), signals })
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.shared.registry.lock();
        if self.signals.evicted.load(Ordering::Relaxed) {
            g.closing -= 1;
        } else {
            g.open -= 1;
        }
        g.unauthenticated.remove(&self.id);
    }
}

impl Slot {
    /// Called as a request arrives: a valid token makes the connection
    /// authenticated; otherwise the request is in flight (and its
    /// connection may not give way) until the returned guard drops.
    fn on_request(self: &Arc<Self>, headers: &axum::http::HeaderMap, addr: &str) -> Option<InFlight> {
        if self.signals.authenticated.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(b) = bearer(headers) {
            use crate::engine::clock::{Clock, SystemClock};
            if self.shared.state.as_ref().is_some_and(|s| s.tokens.verify(b, addr, SystemClock.now()).is_ok())
            {
                self.signals.authenticated.store(true, Ordering::Relaxed);
                self.shared.registry.lock().unauthenticated.remove(&self.id);
                return None;
            }
        }
        let mut g = self.shared.registry.lock();
        let w = g.unauthenticated.get_mut(&self.id)?;
        w.in_flight += 1;
        Some(InFlight(self.clone()))
    }
}

/// An unauthenticated request being answered.
struct InFlight(Arc<Slot>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(w) = self.0.shared.registry.lock().unauthenticated.get_mut(&self.0.id) {
            w.in_flight = w.in_flight.saturating_sub(1);
        }
    }
}

/// The bearer token of a request, as `authz` reads it.
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
}

// ── Accept loops ────────────────────────────────────────────────────────

/// The accept loops on `bound` (the store's socket; TCP, with TLS when
/// `tls` is given, when bound), each serving until `stop`; to spawn.
pub fn accept_loops(
    bound: &super::listen::Bound,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    shared: &Arc<Shared>,
    stop: &watch::Receiver<bool>,
) -> Vec<Pin<Box<dyn Future<Output = ()> + Send>>> {
    let mut loops: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> =
        vec![Box::pin(serve_socket(bound.uds.clone(), shared.clone(), stop.clone()))];
    if let Some(tcp) = &bound.tcp {
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        loops.push(Box::pin(serve_tcp(tcp.clone(), acceptor, shared.clone(), stop.clone())));
    }
    loops
}

/// Says `stop` to `tasks` and waits up to 5 s for them to end (requests in
/// flight finishing); aborts what is left.
pub async fn stop_all(stop: &watch::Sender<bool>, tasks: &mut tokio::task::JoinSet<()>) {
    let _ = stop.send(true);
    let drained =
        tokio::time::timeout(Duration::from_secs(5), async { while tasks.join_next().await.is_some() {} })
            .await;
    if drained.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// Serves the store's socket until `stop`, then waits for its
/// connections to finish. No caps: only the owner can connect. The
/// listener stays bound for whoever else holds it (see `listen::Bound`).
pub async fn serve_socket(listener: Arc<UnixListener>, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let (alive, _) = watch::channel(());
    let mut errors = Reports::default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                accept_failed(&e, "the store's socket", &mut errors).await;
                continue;
            }
        };
        // No credentials means the kernel could not say: treat as nobody's,
        // which the socket's owner-only mode makes unreachable anyway.
        let uid = stream.peer_cred().map(|c| c.uid()).unwrap_or(u32::MAX);
        let (shared, stop, alive) = (shared.clone(), stop.clone(), alive.subscribe());
        tokio::spawn(async move {
            connection(stream, Peer::Socket { uid }, &shared, None, stop).await;
            drop(alive);
        });
    }
    drop(listener);
    alive.closed().await;
}

/// Serves TCP (TLS when `tls` is given) under the caps until `stop`, then
/// waits for its connections to finish.
pub async fn serve_tcp(
    listener: Arc<TcpListener>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let (alive, _) = watch::channel(());
    let mut errors = Reports::default();
    let mut turned_away = Reports::default();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, addr) = match accepted {
            Ok(x) => x,
            Err(e) => {
                accept_failed(&e, "TCP", &mut errors).await;
                continue;
            }
        };
        let slot = admit(&shared);
        report_turned_away(&shared, &mut turned_away);
        // Refused: dropped here, closed at once.
        let Some(slot) = slot else { continue };
        let (shared, mut stop, alive, tls) = (shared.clone(), stop.clone(), alive.subscribe(), tls.clone());
        tokio::spawn(async move {
            let peer = Peer::Tcp { addr, tls: tls.is_some() };
            match tls {
                None => connection(stream, peer, &shared, Some(slot), stop).await,
                Some(acceptor) => {
                    let signals = slot.signals.clone();
                    let handshake =
                        tokio::time::timeout(shared.limits.header_read_timeout, acceptor.accept(stream));
                    let done = tokio::select! {
                        r = handshake => r,
                        _ = signals.close.notified() => return,
                        _ = stop.wait_for(|s| *s) => return,
                    };
                    match done {
                        Ok(Ok(tls)) => connection(tls, peer, &shared, Some(slot), stop).await,
                        Ok(Err(e)) => tracing::debug!(%addr, error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%addr, "TLS handshake timed out"),
                    }
                }
            }
            drop(alive);
        });
    }
    drop(listener);
    alive.closed().await;
}

/// Says in the log, at most every 10 s, how many connections the caps
/// turned away.
fn report_turned_away(shared: &Shared, last: &mut Reports) {
    if !last.due() {
        return;
    }
    let (refused, evicted, open, unauth) = {
        let mut g = shared.registry.lock();
        let counts = (g.refused, g.evicted, g.open, g.unauthenticated.len());
        (g.refused, g.evicted) = (0, 0);
        counts
    };
    if refused + evicted > 0 {
        last.sent();
        tracing::warn!(
            refused,
            closed_idle = evicted,
            open,
            unauthenticated = unauth,
            max_connections = shared.limits.max_connections,
            max_unauthenticated = shared.limits.max_unauthenticated,
            "TCP connections over the limits: new ones refused, or idle unauthenticated ones closed to make room"
        );
    }
}

/// When a kind of message was last logged.
#[derive(Default)]
struct Reports {
    last: Option<Instant>,
}

impl Reports {
    fn due(&self) -> bool {
        self.last.is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
    }
    fn sent(&mut self) {
        self.last = Some(Instant::now());
    }
}

/// After a failed accept: a connection that went away before it was
/// accepted is nothing; anything else (out of file descriptors) is logged
/// at most every 10 s and waited out a little, so the loop never spins.
async fn accept_failed(e: &io::Error, what: &str, last: &mut Reports) {
    use io::ErrorKind::*;
    if matches!(e.kind(), ConnectionAborted | ConnectionReset | ConnectionRefused | Interrupted) {
        return;
    }
    if last.due() {
        last.sent();
        tracing::warn!(listener = what, error = %e, "cannot accept a connection; retrying");
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
}

// ── One connection ──────────────────────────────────────────────────────

/// Serves HTTP/1 on `io` until the client or a limit closes it; on `stop`,
/// finishes what is in flight and closes.
async fn connection<IO>(
    io: IO,
    peer: Peer,
    shared: &Arc<Shared>,
    slot: Option<Slot>,
    mut stop: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let slot = slot.map(Arc::new);
    let signals = slot.as_ref().map_or_else(|| Arc::new(ConnSignals::default()), |s| s.signals.clone());
    let service = Service { shared: shared.clone(), peer, slot, signals: signals.clone() };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(shared.limits.header_read_timeout).keep_alive(true);
    let conn =
        builder.serve_connection(TokioIo::new(WriteStall::new(io, shared.limits.idle_timeout)), service);
    tokio::pin!(conn);
    // Stopping: a connection that has had no request yet was opened while
    // the server served, and its first request may be on the way; it is
    // let arrive (for at most FIRST_REQUEST_GRACE) and answered, not
    // closed unanswered. Graceful shutdown then finishes what is in flight.
    let mut stopping = false;
    let mut draining = false;
    let grace = tokio::time::sleep(Duration::MAX);
    tokio::pin!(grace);
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended");
                }
                break;
            }
            _ = signals.close.notified() => break,
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                if signals.began.load(Ordering::Relaxed) {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                } else {
                    grace.as_mut().reset(tokio::time::Instant::now() + FIRST_REQUEST_GRACE);
                }
            }
            _ = signals.first_request.notified(), if stopping && !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = grace.as_mut(), if stopping && !draining => {
                draining = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// How long a stopping server waits for the first request of a
/// connection it accepted (see [`connection`]).
const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

/// The router behind one connection: each request gets the connection's
/// `ConnectInfo<Peer>` (what `authz` reads) and a body that may not stall.
#[derive(Clone)]
struct Service {
    shared: Arc<Shared>,
    peer: Peer,
    slot: Option<Arc<Slot>>,
    signals: Arc<ConnSignals>,
}

impl hyper::service::Service<axum::http::Request<Incoming>> for Service {
    type Response = axum::response::Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn call(&self, req: axum::http::Request<Incoming>) -> Self::Future {
        if !self.signals.began.swap(true, Ordering::Relaxed) {
            self.signals.first_request.notify_one();
        }
        let in_flight = match (&self.slot, &self.peer) {
            (Some(slot), Peer::Tcp { addr, .. }) => slot.on_request(req.headers(), &addr.to_string()),
            _ => None,
        };
        let (idle, signals) = (self.shared.limits.idle_timeout, self.signals.clone());
        let mut req =
            req.map(|b| axum::body::Body::new(BodyStall { inner: b, idle, waiting: None, signals }));
        req.extensions_mut().insert(ConnectInfo(self.peer.clone()));
        let router = self.shared.router.clone();
        Box::pin(async move {
            use tower::ServiceExt;
            let r = router.oneshot(req).await;
            drop(in_flight);
            r
        })
    }
}

/// A request body that closes its connection when it stops arriving for
/// the idle timeout while a handler waits for it.
struct BodyStall {
    inner: Incoming,
    idle: Duration,
    waiting: Option<Pin<Box<Sleep>>>,
    signals: Arc<ConnSignals>,
}

impl hyper::body::Body for BodyStall {
    type Data = hyper::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting = None;
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                let idle = this.idle;
                let timer = this.waiting.get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        this.signals.close.notify_one();
                        Poll::Ready(Some(Err(stalled("the request body stopped arriving", idle).into())))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn stalled(what: &str, idle: Duration) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("{what} for {}", crate::units::HumanDuration(idle)))
}

/// A connection's stream whose writes fail once they have been unable to
/// proceed (the client reads nothing) for the idle timeout. Reads pass
/// through: hyper's header read timeout bounds waiting for a request.
struct WriteStall<IO> {
    io: IO,
    idle: Duration,
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<IO> WriteStall<IO> {
    fn new(io: IO, idle: Duration) -> Self {
        WriteStall { io, idle, stalled: None }
    }

    /// After a write that could not proceed: pending until the idle
    /// timeout, then the error that closes the connection.
    fn stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let idle = self.idle;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(stalled("the client has read nothing", idle))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progress<T>(&mut self, r: Poll<io::Result<T>>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending => self.stall(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteStall<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteStall<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.progress(r, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.progress(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.progress(r, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_shutdown(cx);
        this.progress(r, cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(max_connections: usize, max_unauthenticated: usize) -> ServerOptions {
        ServerOptions { max_connections, max_unauthenticated, ..ServerOptions::default() }
    }

    #[test]
    fn the_caps_leave_file_descriptors_for_the_rest_of_the_server() {
        let o = options(1024, 256);
        let at = |n| Limits::new(&o, n);
        assert_eq!((at(None).max_connections, at(None).max_unauthenticated), (1024, 256));
        // 1,024 (a common default): a quarter kept.
        assert_eq!((at(Some(1024)).max_connections, at(Some(1024)).max_unauthenticated), (768, 256));
        // 256: 128 kept, and no more unauthenticated than connections.
        assert_eq!((at(Some(256)).max_connections, at(Some(256)).max_unauthenticated), (128, 128));
        assert_eq!(at(Some(1 << 20)).max_connections, 1024, "a high limit leaves the option");
        assert!(at(Some(10)).max_connections >= 1);
    }

    /// A connection the server accepted before it was told to stop, whose
    /// request arrives only after: answered, not closed unanswered (the
    /// client could not know whether it was received). One that never
    /// sends anything is closed after the grace.
    #[tokio::test]
    async fn a_request_on_its_way_when_the_server_stops_is_answered() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = Arc::new(TcpListener::bind("127.0.0.1:0").await.unwrap());
        let addr = listener.local_addr().unwrap();
        let router = axum::Router::new().fallback(|| async { "answered" });
        let shared = Shared::without_state(router, Limits::new(&options(8, 8), None));
        let (stop, stop_rx) = watch::channel(false);
        let serving = tokio::spawn(serve_tcp(listener, None, shared, stop_rx));
        let mut late = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
        // Accepted (the accept loop runs between the connects and here).
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.send(true).unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        late.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut out = String::new();
        late.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200") && out.ends_with("answered"), "{out:?}");
        let mut nothing = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut nothing)).await;
        assert!(matches!(closed, Ok(Ok(0))), "{closed:?}");
        tokio::time::timeout(Duration::from_secs(5), serving).await.expect("the loop ends").unwrap();
    }

    #[tokio::test]
    async fn a_write_the_client_never_reads_fails_after_the_idle_timeout() {
        use tokio::io::AsyncWriteExt;
        let (near, _far) = tokio::io::duplex(64);
        let mut w = WriteStall::new(near, Duration::from_millis(50));
        let big = vec![7u8; 4096];
        // Bounded: a write that never failed would hang the test.
        let r = tokio::time::timeout(Duration::from_secs(20), w.write_all(&big)).await;
        let e = r.expect("the stalled write ends").expect_err("with an error");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("has read nothing"), "{e}");
    }

    #[tokio::test]
    async fn a_write_that_keeps_moving_never_times_out() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(64);
        let mut w = WriteStall::new(near, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = [0u8; 16];
            // A slow reader: the writer waits on it many times, each time
            // far less than the timeout.
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                match far.read(&mut buf).await {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        });
        w.write_all(&[1u8; 1024]).await.expect("a client that reads is never cut");
        w.shutdown().await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap().len(), 1024);
    }
}
