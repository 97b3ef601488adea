//! The confirmation book: destructive tools (`cancel`, a `submit` above
//! the cost threshold) act in two steps. The first call answers what would
//! happen and a short-lived confirmation id bound to who asked, the tool
//! and its target; the second call, with that id, acts. An id is good
//! once, for [`TTL_MS`], for that caller, tool and target only: a stale,
//! used, unknown or foreign one is refused and nothing happens.
//!
//! Pure but for the random ids: time comes in as an argument.

use crate::engine::model::Millis;
use std::collections::HashMap;
use std::sync::Mutex;

/// How long a confirmation id is good for.
pub const TTL_MS: i64 = 120_000;

/// The most ids outstanding at once; the oldest goes first beyond it.
const MAX_PENDING: usize = 4096;

/// What a confirmation id is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The principal (and its token's id) that asked.
    pub caller: String,
    pub tool: String,
    /// What it acts on: a workload's id, or a hash of the spec and key.
    pub target: String,
}

#[derive(Debug, Clone)]
struct Pending {
    binding: Binding,
    issued: Millis,
}

/// Why a confirmation id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "confirmation id {0:?} is unknown or already used; call the tool again without `confirm` for a new one"
    )]
    Unknown(String),
    #[error(
        "confirmation id {0:?} expired (they last {ttl}s); call the tool again without `confirm` for a new one",
        ttl = TTL_MS / 1000
    )]
    Expired(String),
    #[error("confirmation id {id:?} was issued for {issued}, not for this call ({asked}); nothing was done")]
    Foreign { id: String, issued: String, asked: String },
}

/// The outstanding confirmation ids.
#[derive(Debug, Default)]
pub struct Book {
    pending: Mutex<HashMap<String, Pending>>,
}

fn describe(b: &Binding) -> String {
    format!("{} on {} by {}", b.tool, b.target, b.caller)
}

impl Book {
    /// A new id for `binding`, good until `now + TTL_MS`.
    pub fn issue(&self, binding: Binding, now: Millis) -> String {
        let mut bytes = [0u8; 12];
        // Unguessable ids; were the system's randomness ever to fail, the
        // binding still holds the id to its caller, tool and target.
        let _ = getrandom::fill(&mut bytes);
        let id = format!("confirm-{}", hex::encode(bytes));
        let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        g.retain(|_, p| now.0 - p.issued.0 < TTL_MS);
        if g.len() >= MAX_PENDING
            && let Some(oldest) = g.iter().min_by_key(|(_, p)| p.issued).map(|(k, _)| k.clone())
        {
            g.remove(&oldest);
        }
        g.insert(id.clone(), Pending { binding, issued: now });
        id
    }

    /// Takes `id` for `asked`: once, in time, and only for what it was
    /// issued for. A foreign id stays with its owner (it is not used up).
    pub fn redeem(&self, id: &str, asked: &Binding, now: Millis) -> Result<(), Refused> {
        let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let Some(p) = g.get(id) else { return Err(Refused::Unknown(id.to_string())) };
        if now.0 - p.issued.0 >= TTL_MS {
            g.remove(id);
            return Err(Refused::Expired(id.to_string()));
        }
        if &p.binding != asked {
            return Err(Refused::Foreign {
                id: id.to_string(),
                issued: describe(&p.binding),
                asked: describe(asked),
            });
        }
        g.remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(caller: &str, tool: &str, target: &str) -> Binding {
        Binding { caller: caller.into(), tool: tool.into(), target: target.into() }
    }

    #[test]
    fn an_id_acts_once_for_its_caller_tool_and_target() {
        let book = Book::default();
        let id = book.issue(b("alice", "cancel", "w-1"), Millis(1_000));
        assert!(id.starts_with("confirm-") && id.len() > 20);
        assert_eq!(book.redeem(&id, &b("alice", "cancel", "w-1"), Millis(2_000)), Ok(()));
        // Used: the same id again is stale.
        assert_eq!(book.redeem(&id, &b("alice", "cancel", "w-1"), Millis(2_001)), Err(Refused::Unknown(id)));
    }

    #[test]
    fn a_foreign_id_is_refused_and_stays_with_its_owner() {
        let book = Book::default();
        let id = book.issue(b("alice", "cancel", "w-1"), Millis(0));
        for other in [b("bob", "cancel", "w-1"), b("alice", "cancel", "w-2"), b("alice", "submit", "w-1")] {
            assert!(
                matches!(book.redeem(&id, &other, Millis(10)), Err(Refused::Foreign { .. })),
                "{other:?}"
            );
        }
        assert_eq!(book.redeem(&id, &b("alice", "cancel", "w-1"), Millis(20)), Ok(()));
    }

    #[test]
    fn an_id_expires_after_its_ttl() {
        let book = Book::default();
        let id = book.issue(b("alice", "cancel", "w-1"), Millis(0));
        assert_eq!(
            book.redeem(&id, &b("alice", "cancel", "w-1"), Millis(TTL_MS)),
            Err(Refused::Expired(id.clone()))
        );
        assert_eq!(book.redeem(&id, &b("alice", "cancel", "w-1"), Millis(1)), Err(Refused::Unknown(id)));
        let fresh = book.issue(b("alice", "cancel", "w-1"), Millis(0));
        assert_eq!(book.redeem(&fresh, &b("alice", "cancel", "w-1"), Millis(TTL_MS - 1)), Ok(()));
    }

    #[test]
    fn unknown_ids_are_refused() {
        let book = Book::default();
        assert!(matches!(
            book.redeem("confirm-nope", &b("a", "cancel", "w-1"), Millis(0)),
            Err(Refused::Unknown(_))
        ));
    }
}
