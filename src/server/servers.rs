//! `GET /v1/servers`: the servers on this journal — the leader holding
//! the lease, the standbys (each with when it was last seen), the lease's
//! epoch, age and expiry, and the last failover — read from the database.
//! Also the lease's gauges in `/metrics`.
//!
//! On a SQLite journal there is one server, this one, holding the file
//! lock: it is listed alone, as leader at epoch 0. A standby forwards this
//! request like any other, so the leader answers it.

use super::Served;
use super::error::{ApiError, ApiResult};
use crate::journal::{Leadership, ServerRow};
use axum::Json;
use axum::extract::State;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Servers seen within this many lease terms are `alive`.
const ALIVE_TERMS: i64 = 3;

/// `GET /v1/servers`'s answer. Times are Unix milliseconds on the
/// database's clock.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ServersView {
    /// `postgres` or `sqlite`.
    pub journal: String,
    /// The server that answered: `host pid N`.
    pub answered_by: String,
    /// The lease's epoch (0 on SQLite).
    pub epoch: i64,
    /// Who holds the lease (`host pid N`), when someone does.
    pub leader: Option<String>,
    /// The API URL the leader advertises to standbys (empty: none).
    pub leader_address: String,
    /// When the leader took the lease.
    pub lease_taken_at: Option<i64>,
    /// When the lease runs out unless renewed.
    pub lease_expires_at: Option<i64>,
    /// The database's clock when this was read.
    pub now: i64,
    /// Every server heard from in the last day, the most recently seen
    /// first.
    pub servers: Vec<ServerEntry>,
    /// The last time the lease went from one server to another.
    pub last_failover: Option<Failover>,
}

/// One server in [`ServersView`].
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ServerEntry {
    /// `host pid N`.
    pub id: String,
    /// The API URL it serves on (empty: only its socket).
    pub address: String,
    /// `leader` (it holds the lease now) or `standby`; `gone` when it has
    /// not been heard from for three lease terms.
    pub role: String,
    pub last_seen: i64,
    pub started_at: i64,
}

/// A takeover: `to` took the lease at `epoch`, `at`, from `from`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Failover {
    pub from: String,
    pub to: String,
    pub epoch: i64,
    pub at: i64,
    /// When `from`'s lease had expired (0: it gave the lease up).
    pub from_expired_at: i64,
}

/// Builds the view from the lease row and the `servers` rows; `term_ms`
/// decides who counts as gone.
pub fn view(
    me: &str,
    lease: Option<Leadership>,
    rows: Vec<ServerRow>,
    now_ms: i64,
    term_ms: i64,
) -> ServersView {
    let Some(l) = lease else {
        return ServersView {
            journal: "sqlite".into(),
            answered_by: me.into(),
            epoch: 0,
            leader: Some(me.into()),
            leader_address: String::new(),
            lease_taken_at: None,
            lease_expires_at: None,
            now: now_ms,
            servers: vec![ServerEntry {
                id: me.into(),
                address: String::new(),
                role: "leader".into(),
                last_seen: now_ms,
                started_at: now_ms,
            }],
            last_failover: None,
        };
    };
    let held = l.held();
    let servers = rows
        .into_iter()
        .map(|r| {
            let role = if held && r.id == l.holder {
                "leader"
            } else if r.last_seen < l.now - ALIVE_TERMS * term_ms {
                "gone"
            } else {
                "standby"
            };
            ServerEntry {
                role: role.into(),
                id: r.id,
                address: r.address,
                last_seen: r.last_seen,
                started_at: r.started_at,
            }
        })
        .collect();
    let last_failover = (!l.previous.is_empty() && l.previous != l.holder).then(|| Failover {
        from: l.previous.clone(),
        to: l.holder.clone(),
        epoch: l.epoch,
        at: l.taken_at,
        from_expired_at: l.previous_expired,
    });
    ServersView {
        journal: "postgres".into(),
        answered_by: me.into(),
        epoch: l.epoch,
        leader: held.then(|| l.holder.clone()),
        leader_address: if held { l.address.clone() } else { String::new() },
        lease_taken_at: held.then_some(l.taken_at),
        lease_expires_at: held.then_some(l.expires_at),
        now: l.now,
        servers,
        last_failover,
    }
}

/// `GET /v1/servers`.
pub async fn servers(State(s): State<Served>) -> ApiResult<Json<ServersView>> {
    let me = crate::journal::this_server();
    let term_ms = i64::try_from(s.options.lease_term.as_millis()).unwrap_or(i64::MAX);
    let now_ms = super::authz::now().0;
    let (lease, rows) = s.read(|j| Ok((j.leadership()?, j.servers()?))).await.map_err(|e| {
        ApiError::unavailable(format!("cannot read the servers from the journal: {e}; retry"))
    })?;
    Ok(Json(view(&me, lease, rows, now_ms, term_ms)))
}

/// The lease's gauges: whether this server leads, the epoch, and how long
/// the lease has been held and has left. Nothing on SQLite.
pub async fn metrics(s: &Served, out: &mut String) {
    use super::prom::family;
    use std::fmt::Write;
    let Ok(Some(l)) = s.read(|j| j.leadership()).await else { return };
    let me = crate::journal::this_server();
    family(
        out,
        "canopy_leader",
        "gauge",
        "1 when this server holds the journal's lease (PostgreSQL journal).",
    );
    let _ = writeln!(out, "canopy_leader {}", u8::from(l.held() && l.holder == me));
    family(
        out,
        "canopy_lease_epoch",
        "gauge",
        "The journal lease's epoch: it grows by one at each takeover.",
    );
    let _ = writeln!(out, "canopy_lease_epoch {}", l.epoch);
    family(out, "canopy_lease_age_seconds", "gauge", "How long the current leader has held the lease.");
    let _ = writeln!(out, "canopy_lease_age_seconds {:.3}", (l.now - l.taken_at).max(0) as f64 / 1000.0);
    family(
        out,
        "canopy_lease_remaining_seconds",
        "gauge",
        "How long the lease lasts unless renewed (0: expired).",
    );
    let _ =
        writeln!(out, "canopy_lease_remaining_seconds {:.3}", (l.expires_at - l.now).max(0) as f64 / 1000.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, last_seen: i64) -> ServerRow {
        ServerRow {
            id: id.into(),
            address: String::new(),
            role: "standby".into(),
            epoch: 0,
            last_seen,
            started_at: 0,
        }
    }

    #[test]
    fn the_view_names_the_leader_the_standbys_the_gone_and_the_last_failover() {
        let l = Leadership {
            holder: "b pid 2".into(),
            epoch: 3,
            address: "http://b:7878".into(),
            expires_at: 100_000 + 15_000,
            taken_at: 90_000,
            previous: "a pid 1".into(),
            previous_expired: 89_000,
            now: 100_000,
        };
        let rows = vec![row("b pid 2", 99_000), row("c pid 3", 98_000), row("a pid 1", 50_000)];
        let v = view("c pid 3", Some(l), rows, 0, 15_000);
        assert_eq!(v.leader.as_deref(), Some("b pid 2"));
        let roles: Vec<_> = v.servers.iter().map(|s| (s.id.as_str(), s.role.as_str())).collect();
        assert_eq!(roles, [("b pid 2", "leader"), ("c pid 3", "standby"), ("a pid 1", "gone")]);
        let f = v.last_failover.unwrap();
        assert_eq!((f.from.as_str(), f.to.as_str(), f.epoch), ("a pid 1", "b pid 2", 3));
        let sqlite = view("me pid 9", None, Vec::new(), 5, 15_000);
        assert_eq!((sqlite.journal.as_str(), sqlite.servers.len(), sqlite.epoch), ("sqlite", 1, 0));
    }
}
