//! What a server's kept listeners answer while no role serves them: a
//! server on PostgreSQL that cannot reach its journal (the database
//! restarting, or out of reach) has neither an engine nor a standby's
//! reads to offer, yet keeps its addresses ([`Bound`]). Every request is
//! answered `503 Service Unavailable` with `Retry-After: 1` and the API's
//! error shape (code `journal-unavailable`), which clients retry, instead
//! of a refused connection, which tells a client nothing runs there.
//!
//! The answer says no more than that: where the journal is and why it
//! cannot be reached go to the server's log, not to whoever asks. The
//! connections are served like any other (`conn`: timeouts and caps; none
//! counts as authenticated, as there are no tokens to check).

use super::listen::Bound;
use super::{ServeError, ServerOptions, conn};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// The code of the answer.
pub const CODE: &str = "journal-unavailable";

/// Answering 503 on a server's listeners until [`Unavailable::stop`].
pub struct Unavailable {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// Starts answering 503 on `bound` (TLS on TCP as `options` say).
pub fn answer(bound: &Bound, options: &ServerOptions) -> Result<Unavailable, ServeError> {
    let tls = super::listen_tls(options)?;
    let (stop, stop_rx) = watch::channel(false);
    let router = axum::Router::new().fallback(|| async { unavailable() });
    let shared = conn::Shared::without_state(router, conn::Limits::new(options, conn::open_file_limit()));
    let mut tasks = JoinSet::new();
    for accepting in conn::accept_loops(bound, tls, &shared, &stop_rx) {
        tasks.spawn(accepting);
    }
    Ok(Unavailable { stop, tasks })
}

impl Unavailable {
    /// Stops answering (the listeners stay bound for the role that
    /// follows); requests in flight finish.
    pub async fn stop(mut self) {
        conn::stop_all(&self.stop, &mut self.tasks).await;
    }
}

/// The one answer.
fn unavailable() -> Response {
    let mut r = super::error::ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        CODE,
        "this server cannot reach its journal at the moment (its database may be restarting); retry in a moment",
    )
    .into_response();
    r.headers_mut().insert("retry-after", HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over TCP and on the store's socket, any method and path: 503, the
    /// API's error shape, `Retry-After`; and once stopped the listeners
    /// are still bound (a connection waits for whoever accepts next).
    #[tokio::test]
    async fn every_request_is_answered_503_and_the_listeners_stay_bound() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = tempfile::tempdir().unwrap();
        let options = ServerOptions { listen: Some("127.0.0.1:0".parse().unwrap()), ..Default::default() };
        let bound = Bound::bind(dir.path(), &options).await.unwrap();
        let addr = bound.tcp_addr.unwrap();
        let answering = answer(&bound, &options).unwrap();
        let ask = |path: &'static str| async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(
                format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .as_bytes(),
            )
            .await
            .unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).await.unwrap();
            out
        };
        for path in ["/v1/workloads", "/healthz", "/nowhere"] {
            let out = ask(path).await;
            assert!(out.starts_with("HTTP/1.1 503"), "{path}: {out}");
            assert!(out.to_ascii_lowercase().contains("retry-after: 1"), "{out}");
            let body: serde_json::Value =
                serde_json::from_str(out.split("\r\n\r\n").nth(1).unwrap()).unwrap();
            assert_eq!(body["error"]["code"], CODE, "{out}");
        }
        let mut s = tokio::net::UnixStream::connect(&bound.socket).await.unwrap();
        s.write_all(b"GET /v1/workloads HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 503"), "{out}");

        answering.stop().await;
        // Still bound: the connection is made (and waits in the backlog).
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        assert!(tokio::net::UnixStream::connect(&bound.socket).await.is_ok());
    }
}
