//! `GET /v1/stream`: server-sent events carrying every durable batch of
//! records (`event: batch`, id `STORE:SEQ`) and the fleet status whenever
//! it is published (`event: status`, no id).
//!
//! A client resumes with `Last-Event-ID` and misses nothing: the stream
//! first replays the batches after that number from the journal, then
//! goes live, skipping what it already sent. Each client has its own
//! bounded buffer filled without waiting; one that falls behind it, or
//! asks for a batch older than the store keeps, is sent `event: resync`
//! (data: the newest sequence number) and the stream ends: it reloads and
//! reconnects. No client can slow the engine.
//!
//! Each subscriber sees what the endpoints serving the same records would
//! show it, decided by the same rule: audit records only when
//! `GET /v1/audit` would answer this principal (see [`Visibility`]), and
//! with tenants only the workloads `GET /v1/workloads/{id}` would show it
//! and the audit records `GET /v1/audit` would list for it
//! ([`super::visible`]). A
//! stream opened with a token ends within [`RECHECK`] of that token being
//! revoked or expiring, with a last `event: unauthorized`.

use super::Served;
use super::auth::Principal;
use super::authz::{self, Facts};
use crate::engine::model::{Batch, Record};
use axum::Extension;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How often an open stream checks that its token still stands.
pub const RECHECK: Duration = Duration::from_millis(250);

/// What goes to one client, in order.
enum Item {
    Batch(Arc<Batch>),
    Status(String),
    /// First on a fresh stream: the sequence number it starts after.
    Hello(u64),
    Resync(u64),
    /// The token was revoked or expired: the last item.
    Unauthorized(String),
}

/// What of each batch one subscriber may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    /// Audit records: exactly when `GET /v1/audit` would answer.
    pub audit: bool,
}

impl Visibility {
    /// Decided by the rules of the endpoints that serve the same records.
    pub fn of(p: &Principal) -> Visibility {
        let need =
            |path: &str| authz::ROUTES.iter().find(|r| r.method == "GET" && r.path == path).map(|r| r.need);
        let audit = need("/v1/audit").is_some_and(|n| authz::decide(p, n, &Facts::None).is_ok());
        Visibility { audit }
    }

    /// The batch as this subscriber may see it: the same sequence number,
    /// so resuming works alike for all, with what it may not see left out.
    pub fn filter(&self, b: Arc<Batch>) -> Arc<Batch> {
        if self.audit || !b.records.iter().any(|r| matches!(r, Record::Audit(_))) {
            return b;
        }
        let records = b.records.iter().filter(|r| !matches!(r, Record::Audit(_))).cloned().collect();
        Arc::new(Batch { seq: b.seq, records })
    }
}

/// `STORE:SEQ` → the sequence number, when it is this store's.
pub fn parse_event_id(id: &str, store_id: &str) -> Option<u64> {
    let (store, seq) = id.rsplit_once(':')?;
    if store != store_id {
        return None;
    }
    seq.parse().ok()
}

pub async fn stream(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    headers: HeaderMap,
) -> super::error::ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let visible = Visibility::of(&p);
    let token = p.token_id.clone();
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_string);
    // Subscribed before reading the journal: nothing committed from here
    // on can fall between the replay and the live feed.
    let engine = s.engine()?;
    let mut live = engine.subscribe();
    let mut status = engine.status();
    let mut stopping = s.stopping.clone();
    let cap = s.options.stream_buffer.max(1);
    // One slot more than the client's share, kept for the `resync` that
    // tells it it fell behind: a full buffer must still carry that.
    let (tx, mut rx) = mpsc::channel::<Item>(cap + 1);
    let store_id = s.store_id.clone();
    let st = s.clone();
    tokio::spawn(async move {
        // With tenants, which workloads' records this subscriber sees.
        let mut seen = super::visible::Seen::default();
        let (oldest, newest) = st.read(|j| j.batch_range()).await.unwrap_or((0, 0));
        let mut sent = newest;
        let mut hello = true;
        match last.as_deref().map(|l| parse_event_id(l, &store_id)) {
            // No Last-Event-ID: live from now; the client loads the rest.
            None => {}
            // Another store's id, or one we no longer keep: reload.
            Some(None) => {
                let _ = tx.try_send(Item::Resync(newest));
                return;
            }
            Some(Some(from)) if from < newest && from + 1 < oldest => {
                let _ = tx.try_send(Item::Resync(newest));
                return;
            }
            Some(Some(from)) => {
                hello = false;
                let mut at = from;
                while at < newest {
                    let batches = match st.read(move |j| j.batches_since(at, 256)).await {
                        Ok(b) if !b.is_empty() => b,
                        _ => break,
                    };
                    for b in batches {
                        at = b.seq;
                        if b.seq > newest {
                            break;
                        }
                        let b = seen.filter(&st, &p, &st.tenancy(), visible.audit, Arc::new(b)).await;
                        if tx.send(Item::Batch(b)).await.is_err() {
                            return;
                        }
                    }
                }
                sent = at.max(from);
            }
        }
        if hello {
            // Tells a fresh client where the stream starts.
            let _ = tx.try_send(Item::Hello(sent));
        }
        // A status is replaced by the next one: dropping it when the
        // buffer is nearly full costs nothing (the last slot is the resync's).
        let send_status = |s: Option<Arc<crate::engine::handle::FleetStatus>>| {
            if let Some(s) = s
                && tx.capacity() > 1
                && let Ok(json) = serde_json::to_string(&*s)
            {
                let _ = tx.try_send(Item::Status(json));
            }
        };
        send_status(status.borrow_and_update().clone());
        let mut recheck = tokio::time::interval(RECHECK);
        loop {
            let b = tokio::select! {
                _ = recheck.tick() => {
                    if let Some(why) = token.as_deref().and_then(|id| st.tokens.no_longer_valid(id, authz::now())) {
                        let _ = tx.try_send(Item::Unauthorized(why));
                        return;
                    }
                    continue;
                }
                r = live.recv() => match r {
                    Ok(b) if b.seq <= sent => continue,
                    Ok(b) => b,
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.try_send(Item::Resync(sent));
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                r = status.changed() => {
                    if r.is_err() {
                        return;
                    }
                    send_status(status.borrow_and_update().clone());
                    continue;
                }
                _ = stopping.wait_for(|s| *s) => return,
                _ = tx.closed() => return,
            };
            // Every commit is broadcast in order, those the core did not
            // make too (`EngineHandle::commit`), so batches come gap-free.
            sent = b.seq;
            // The last free slot is the resync's.
            let b = seen.filter(&st, &p, &st.tenancy(), visible.audit, b).await;
            if tx.capacity() <= 1 || tx.try_send(Item::Batch(b)).is_err() {
                // Full: this client is too slow. Closed: gone.
                let _ = tx.try_send(Item::Resync(sent));
                return;
            }
        }
    });
    let store_id = s.store_id.clone();
    let events = futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).map(move |item| {
        Ok(match item {
            Item::Batch(b) => Event::default()
                .event("batch")
                .id(format!("{store_id}:{}", b.seq))
                .data(serde_json::to_string(&*b).unwrap_or_default()),
            Item::Status(json) => Event::default().event("status").data(json),
            Item::Hello(seq) => Event::default()
                .event("hello")
                .data(serde_json::json!({ "seq": seq, "store_id": store_id }).to_string()),
            Item::Resync(seq) => Event::default()
                .event("resync")
                .data(serde_json::json!({ "seq": seq, "store_id": store_id }).to_string()),
            Item::Unauthorized(message) => Event::default().event("unauthorized").data(
                serde_json::json!({ "error": { "code": "unauthorized", "message": message } }).to_string(),
            ),
        })
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
