//! The audit trail of requests refused for their token: missing, not
//! valid, revoked or expired. A replayed revoked token is exactly what an
//! audit trail is for, but a flood of them must not fill the journal, so
//! refusals are counted per key — the token's id when the bearer names a
//! token this server knows, else the client's address — and each key gets
//! at most one audit record a minute: the first refusal is written at
//! once, the repeats inside its minute are counted and written as one
//! record with their count when the minute is over (by the next refusal or
//! by [`Refusals::flush`], which the server runs every few seconds).
//! The secret is never part of a record, a key or a message.

use super::ServerState;
use super::auth::TokenError;
use super::authz::Route;
use crate::engine::model::{AuditRecord, Millis};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;

/// One audit record per key at most this often.
pub const WINDOW_MS: i64 = 60_000;
/// Keys kept at most; past it, refusals of new keys share one.
const MAX_KEYS: usize = 4096;
/// The principal named when no token could be read.
pub const UNAUTHENTICATED: &str = "unauthenticated";

/// One key's minute.
#[derive(Debug, Clone)]
struct Window {
    /// When its last record was written.
    written_at: Millis,
    /// Refusals since, not yet in a record.
    repeats: u32,
    /// The last of them, to write with their count.
    last: Refused,
}

/// One refusal, as it will be audited.
#[derive(Debug, Clone)]
struct Refused {
    principal: String,
    origin: String,
    action: String,
    why: String,
}

/// The counts, shared by every connection.
#[derive(Debug, Default)]
pub struct Refusals {
    windows: Mutex<HashMap<String, Window>>,
}

impl Refusals {
    /// Counts a refusal of `bearer` from `addr` on `route`, and writes the
    /// audit record when this key has had none for a minute.
    pub async fn refused(
        &self,
        state: &ServerState,
        bearer: Option<&str>,
        addr: SocketAddr,
        route: &Route,
        error: &TokenError,
        now: Millis,
    ) {
        let known = bearer.and_then(token_id).and_then(|id| state.tokens.name_of(id).map(|n| (id, n)));
        let (key, principal) = match known {
            Some((id, name)) => (format!("token:{id}"), name),
            // The address without its port: one key per host, however
            // many connections it opens.
            None => (format!("origin:{}", addr.ip()), UNAUTHENTICATED.to_string()),
        };
        let refused = Refused {
            principal,
            origin: addr.to_string(),
            action: format!("{} {}", route.method, route.path),
            why: error.to_string(),
        };
        if let Some(record) = self.count(key, refused, now) {
            state.write_audit(record).await;
        }
    }

    /// The pure half of [`refused`](Self::refused): the record to write now, if any.
    fn count(&self, key: String, refused: Refused, now: Millis) -> Option<AuditRecord> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let key =
            if windows.len() >= MAX_KEYS && !windows.contains_key(&key) { "overflow".into() } else { key };
        match windows.get_mut(&key) {
            Some(w) if now.0 - w.written_at.0 < WINDOW_MS => {
                w.repeats += 1;
                w.last = refused;
                None
            }
            Some(w) => {
                // A minute or more since the last record: this refusal and
                // the repeats before it, in one.
                let repeats = std::mem::take(&mut w.repeats) + 1;
                w.written_at = now;
                w.last = refused.clone();
                Some(record(&refused, repeats, now))
            }
            None => {
                windows.insert(key, Window { written_at: now, repeats: 0, last: refused.clone() });
                Some(record(&refused, 1, now))
            }
        }
    }

    /// The records of every key whose minute is over (every key, when
    /// `all`: the server is stopping) with repeats not yet written;
    /// forgets keys quiet for two minutes.
    pub fn due(&self, now: Millis, all: bool) -> Vec<AuditRecord> {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        windows.retain(|_, w| {
            let age = now.0 - w.written_at.0;
            if w.repeats > 0 && (all || age >= WINDOW_MS) {
                out.push(record(&w.last, w.repeats, now));
                w.repeats = 0;
                w.written_at = now;
                return true;
            }
            age < 2 * WINDOW_MS
        });
        out
    }

    /// Writes what [`due`](Self::due) holds.
    pub async fn flush(&self, state: &ServerState, now: Millis, all: bool) {
        for r in self.due(now, all) {
            state.write_audit(r).await;
        }
    }
}

fn record(r: &Refused, count: u32, now: Millis) -> AuditRecord {
    let outcome = if count == 1 {
        format!("denied: {}", r.why)
    } else {
        format!("denied ×{count} within a minute: {}", r.why)
    };
    AuditRecord {
        at: now,
        principal: r.principal.clone(),
        origin: r.origin.clone(),
        action: r.action.clone(),
        target: None,
        outcome,
        reason: None,
    }
}

/// The id part of `canopy_<id>_<secret>`: never the secret.
fn token_id(bearer: &str) -> Option<&str> {
    let (id, _) = bearer.strip_prefix("canopy_")?.split_once('_')?;
    (!id.is_empty() && id.len() <= 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(why: &str) -> Refused {
        Refused {
            principal: "ci".into(),
            origin: "127.0.0.1:5000".into(),
            action: "GET /v1/workloads".into(),
            why: why.into(),
        }
    }

    #[test]
    fn a_key_gets_at_most_one_record_a_minute_with_the_repeats_counted() {
        let r = Refusals::default();
        let first = r.count("token:ab".into(), refused("revoked"), Millis(0)).unwrap();
        assert_eq!(first.outcome, "denied: revoked");
        for t in 1..=500 {
            assert!(r.count("token:ab".into(), refused("revoked"), Millis(t * 10)).is_none());
        }
        // Another key is its own.
        assert!(r.count("origin:10.0.0.1".into(), refused("missing"), Millis(6_000)).is_some());
        assert!(r.due(Millis(59_999), false).is_empty(), "the minute is not over");
        let due = r.due(Millis(60_000), false);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!(due[0].outcome, "denied ×500 within a minute: revoked");
        assert_eq!(due[0].principal, "ci");
        assert!(r.due(Millis(61_000), false).is_empty(), "written once");
        // Quiet keys are forgotten; the next refusal is written at once.
        assert!(r.due(Millis(200_000), false).is_empty());
        assert_eq!(r.windows.lock().unwrap().len(), 0);
        assert!(r.count("token:ab".into(), refused("revoked"), Millis(200_001)).is_some());
    }

    #[test]
    fn only_the_id_of_a_bearer_is_ever_read() {
        assert_eq!(token_id("canopy_0a1b2c_secretsecret"), Some("0a1b2c"));
        assert_eq!(token_id("canopy_zz_secret"), None);
        assert_eq!(token_id("nonsense"), None);
    }
}
