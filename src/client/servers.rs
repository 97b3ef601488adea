//! Several servers of one control plane (issue 33): `CANOPY_SERVER` (or
//! `--server`, or a profile context's `servers`) may list them, separated
//! by commas. Requests go to one of them; when it does not answer, or
//! answers that no leader is serving, the client moves to the next and
//! tries again, for as long as a failover takes ([`FAILOVER_WAIT`]).
//!
//! What is sent again, and where:
//! - a request that never reached a server (nothing accepted the
//!   connection): any request, to the next server at once;
//! - a request whose answer was lost on the way, or answered 503 (the
//!   server is a standby with no leader to hand it to, or its engine
//!   stopped): only a request that is safe to repeat, a read (`GET`,
//!   `HEAD`) or one that carries an idempotency key (a submit), so a
//!   failover never runs anything twice;
//! - after a round of every server, the client waits as [`Backoff`]
//!   says before the next round.
//!
//! With one server nothing changes: its first answer, or its failure, is
//! the caller's to handle (the CLI prints the key to retry a lost submit
//! with).

use super::{Backoff, ClientError};
use reqwest::{Method, StatusCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long requests keep being tried across the servers: a lapsed lease
/// (15 s by default) plus a new leader's start, with room to spare.
pub const FAILOVER_WAIT: Duration = Duration::from_secs(60);

/// The servers a client may use, and which of them it uses now (shared by
/// the client's clones, so one that found the leader tells the others).
#[derive(Debug)]
pub(super) struct Servers {
    bases: Vec<String>,
    current: AtomicUsize,
}

/// The base URLs of `list`: comma-separated, each without a trailing `/`.
pub fn split(list: &str) -> Vec<String> {
    list.split(',').map(|s| s.trim().trim_end_matches('/').to_string()).filter(|s| !s.is_empty()).collect()
}

impl Servers {
    pub(super) fn new(bases: Vec<String>) -> Servers {
        Servers { bases, current: AtomicUsize::new(0) }
    }

    /// The server requests go to now.
    pub(super) fn current(&self) -> &str {
        &self.bases[self.current.load(Ordering::Relaxed) % self.bases.len()]
    }

    /// More than one: failing over is possible.
    pub(super) fn several(&self) -> bool {
        self.bases.len() > 1
    }

    /// Moves on from `from` (unless another request already did); says
    /// whether a round of every server has just been completed.
    fn advance(&self, from: usize) -> bool {
        let next = (from + 1) % self.bases.len();
        let _ = self.current.compare_exchange(from, next, Ordering::Relaxed, Ordering::Relaxed);
        next == 0
    }

    /// `url` (built on one of the bases) on `base` instead.
    fn rebase(&self, url: &reqwest::Url, base: &str) -> Option<reqwest::Url> {
        let s = url.as_str();
        let rest = self.bases.iter().find_map(|b| s.strip_prefix(b.as_str()))?;
        reqwest::Url::parse(&format!("{base}{rest}")).ok()
    }
}

/// Whether sending `req` twice cannot do anything twice.
fn repeatable(req: &reqwest::Request) -> bool {
    matches!(*req.method(), Method::GET | Method::HEAD) || req.headers().contains_key("idempotency-key")
}

impl super::Client {
    /// Sends `r` and returns the answer whatever its status; across the
    /// servers when there are several (see the module's documentation).
    pub(super) async fn execute(&self, r: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
        if !self.servers.several() {
            return r.send().await.map_err(|e| self.send_failed(&e));
        }
        let req = r.build().map_err(|e| self.send_failed(&e))?;
        let again = repeatable(&req);
        let deadline = Instant::now() + FAILOVER_WAIT;
        let mut backoff = Backoff::default();
        loop {
            let at = self.servers.current.load(Ordering::Relaxed) % self.servers.bases.len();
            let base = self.servers.bases[at].clone();
            let Some(mut attempt) = req.try_clone() else {
                // A streamed body cannot be sent twice: once, as it is.
                return self.http.execute(req).await.map_err(|e| self.send_failed(&e));
            };
            if let Some(url) = self.servers.rebase(req.url(), &base) {
                *attempt.url_mut() = url;
            }
            let (failed, retry) = match self.http.execute(attempt).await {
                Ok(resp) if resp.status() != StatusCode::SERVICE_UNAVAILABLE || !again => return Ok(resp),
                Ok(resp) => (super::api_error(resp).await, true),
                Err(e) => {
                    let failed = self.send_failed_at(&e, &base);
                    let retry = matches!(failed, ClientError::Unreachable { .. }) || again;
                    (failed, retry)
                }
            };
            if !retry || Instant::now() >= deadline {
                return Err(failed);
            }
            tracing::info!(server = %base, error = %failed, "trying the next server");
            if self.servers.advance(at) {
                tokio::time::sleep(
                    backoff.next_wait().min(deadline.saturating_duration_since(Instant::now())),
                )
                .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_split_on_commas_and_trimmed() {
        assert_eq!(split("http://a:1, http://b:2/ ,,"), ["http://a:1", "http://b:2"]);
        assert_eq!(split("https://one"), ["https://one"]);
    }

    #[test]
    fn a_request_is_moved_to_another_server_whole() {
        let s = Servers::new(split("http://a:1,http://b:2"));
        let url = reqwest::Url::parse("http://a:1/v1/workloads?state=queued&limit=5").unwrap();
        assert_eq!(
            s.rebase(&url, "http://b:2").unwrap().as_str(),
            "http://b:2/v1/workloads?state=queued&limit=5"
        );
    }

    #[test]
    fn moving_on_goes_round_and_says_when_a_round_is_done() {
        let s = Servers::new(split("http://a,http://b,http://c"));
        assert_eq!(s.current(), "http://a");
        assert!(!s.advance(0));
        assert_eq!(s.current(), "http://b");
        // A request that failed on `a` after another moved on moves nothing.
        assert!(!s.advance(0));
        assert_eq!(s.current(), "http://b");
        assert!(!s.advance(1));
        assert!(s.advance(2));
        assert_eq!(s.current(), "http://a");
    }

    #[test]
    fn only_reads_and_keyed_requests_are_repeatable() {
        let c = reqwest::Client::new();
        let get = c.get("http://a/v1/workloads").build().unwrap();
        let post = c.post("http://a/v1/workloads/w-1/cancel").build().unwrap();
        let keyed = c.post("http://a/v1/workloads").header("idempotency-key", "k").build().unwrap();
        assert!(repeatable(&get));
        assert!(!repeatable(&post));
        assert!(repeatable(&keyed));
    }
}
