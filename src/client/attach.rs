//! An [`EngineHandle`] on a remote server: commands and reads are API
//! calls; batches and fleet status come from `GET /v1/stream`. When the
//! server goes away the handle says so (its link goes down) and keeps
//! trying; when it is back the stream resumes after the last batch seen,
//! so nothing is missed. A `resync` from the server (this client fell
//! behind) bumps the link's reload count: the reader reloads.

use super::sse::SseReader;
use super::{Backoff, Client, ClientError};
use crate::engine::handle::{EngineHandle, FleetStatus, Link, LinkSender, RecordSender, StatusSender};
use crate::engine::model::{Batch, Millis};
use futures::StreamExt;
use std::sync::Arc;

/// Attaches to the server `client` reaches. Fails when it does not answer.
pub async fn attach(client: Client) -> Result<EngineHandle, ClientError> {
    let _: serde_json::Value = client.get("/v1/whoami").await?;
    let (handle, records, status, link) = EngineHandle::remote(Arc::new(client.clone()));
    tokio::spawn(feed(client, records, status, link));
    Ok(handle)
}

fn now() -> Millis {
    use crate::engine::clock::{Clock, SystemClock};
    SystemClock.now()
}

async fn feed(client: Client, records: RecordSender, status: StatusSender, link: LinkSender) {
    let mut last: Option<String> = None;
    let mut reloads = 0u64;
    let mut backoff = Backoff::default();
    loop {
        let error = match client.open_stream("/v1/stream", last.as_deref()).await {
            Ok(resp) => {
                backoff.reset();
                // Connected: the server is back (a fresh stream says hello
                // and bumps `reloads`; a resumed one replays what was missed).
                if !matches!(*link.borrow(), Link::Up { .. }) {
                    link.send_replace(Link::Up { reloads });
                }
                let mut body = resp.bytes_stream();
                let mut reader = SseReader::default();
                let mut error = "the server closed the event stream".to_string();
                'stream: while let Some(chunk) = body.next().await {
                    let chunk = match chunk {
                        Ok(c) => c,
                        Err(e) => {
                            error = e.to_string();
                            break;
                        }
                    };
                    let events = match reader.push(&chunk) {
                        Ok(e) => e,
                        Err(e) => {
                            error = e;
                            break;
                        }
                    };
                    for ev in events {
                        match ev.event.as_str() {
                            "hello" | "resync" => {
                                let v: serde_json::Value = serde_json::from_str(&ev.data).unwrap_or_default();
                                if let (Some(store), Some(seq)) = (v["store_id"].as_str(), v["seq"].as_u64())
                                {
                                    last = Some(format!("{store}:{seq}"));
                                }
                                // A fresh stream (hello) or one this client
                                // fell behind on (resync): load afresh.
                                reloads += 1;
                                link.send_replace(Link::Up { reloads });
                                if ev.event == "resync" {
                                    break 'stream;
                                }
                            }
                            "batch" => match serde_json::from_str::<Batch>(&ev.data) {
                                Ok(b) => {
                                    last = ev.id.clone().or(last);
                                    let _ = records.send(Arc::new(b));
                                }
                                Err(e) => tracing::warn!(error = %e, "an unreadable batch from the server"),
                            },
                            "status" => {
                                if let Ok(s) = serde_json::from_str::<FleetStatus>(&ev.data) {
                                    status.send_replace(Some(Arc::new(s)));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                error
            }
            Err(e) => e.to_string(),
        };
        if records.receiver_count() == 0 && status.is_closed() {
            return; // nobody reads any more
        }
        if matches!(*link.borrow(), Link::Up { .. }) {
            link.send_replace(Link::Down { since: now(), error });
        }
        tokio::time::sleep(backoff.next_wait()).await;
    }
}
