//! Ownership of a PostgreSQL journal: a lease row, not a session lock.
//!
//! One row, `leadership (holder, epoch, expires_at, address, …)`: an
//! engine takes it when nobody holds it or its holder let it expire,
//! raising the epoch by one (so epochs only grow, and each owner has its
//! own), and renews it every third of its term from a thread of its own
//! with its own connection. Times are the database server's clock
//! (`clock_timestamp()`), so servers' clocks need not agree. Dropping the
//! [`Lease`] gives it up at once (expiry set to 0); a process that dies,
//! freezes or is cut off loses it when the term runs out, and another
//! engine may then take it. The row also says where the holder serves its
//! API (`address`, so standbys can forward to it), when it took the lease,
//! and from whom (the last failover).
//!
//! An advisory lock is deliberately not used: it stays with a frozen
//! process's session and nobody could take over. The epoch fences
//! writes: the owner's journal ([`super::Journal::fence`]) checks it at
//! the start of every write transaction (`db::Db::write`), so a paused old
//! owner cannot write after losing the lease.
//!
//! Every server on the journal, leader or standby, also heartbeats a row
//! of `servers` (id, address, role, epoch, last seen, started), which
//! `GET /v1/servers` lists. Both tables exist on PostgreSQL only: a SQLite
//! journal has one server, the one holding its file lock.

use super::db::{DbError, Exec};
use super::{JournalError, failed};
use std::sync::mpsc;
use std::time::Duration;

/// How long a lease lasts without renewal unless `[journal] lease_term`
/// says otherwise.
pub const LEASE_TERM: Duration = Duration::from_secs(15);

/// The shortest term `[journal] lease_term` accepts: renewals come every
/// third of it, and a database round trip must fit comfortably.
pub const MIN_LEASE_TERM: Duration = Duration::from_secs(3);

const CREATE: &str = "CREATE TABLE IF NOT EXISTS leadership (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    holder     TEXT   NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL   -- ms since the Unix epoch, the database's clock
);
ALTER TABLE leadership ADD COLUMN IF NOT EXISTS address TEXT NOT NULL DEFAULT '';
ALTER TABLE leadership ADD COLUMN IF NOT EXISTS taken_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE leadership ADD COLUMN IF NOT EXISTS previous TEXT NOT NULL DEFAULT '';
ALTER TABLE leadership ADD COLUMN IF NOT EXISTS previous_expired BIGINT NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS servers (
    id         TEXT   PRIMARY KEY,
    address    TEXT   NOT NULL,
    role       TEXT   NOT NULL,
    epoch      BIGINT NOT NULL,
    last_seen  BIGINT NOT NULL,
    started_at BIGINT NOT NULL
)";

const NOW: &str = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)";

/// Rows of servers not heard from for this long are removed.
const FORGET_AFTER_MS: i64 = 24 * 3600 * 1000;

/// Held by the engine that owns a PostgreSQL journal; dropping it gives
/// the journal up.
#[derive(Debug)]
pub struct Lease {
    holder: String,
    epoch: i64,
    /// Who held it before, and when their lease expired (ms, the
    /// database's clock); `None` when nobody had held it.
    previous: Option<(String, i64)>,
    lost: tokio::sync::watch::Receiver<bool>,
    /// The host's local lease file, renewed with this lease (see
    /// [`Lease::vouch_locally`]).
    local: LocalLease,
    term: Duration,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// Where the holder's local lease file is, once it has one.
type LocalLease = std::sync::Arc<std::sync::Mutex<Option<std::path::PathBuf>>>;

impl Lease {
    /// Renews the local lease file at `path` (the one this host's local
    /// attempts run under, `providers/local/lease.rs`) for a term each time
    /// the journal's lease is renewed, starting now; once the journal's
    /// lease is lost or given up, the file is made to lapse at once. So a
    /// server that cannot renew its journal lease stops vouching for its
    /// host's work within a term, and its local attempts stop with it.
    pub fn vouch_locally(&self, path: &std::path::Path) -> std::io::Result<()> {
        crate::providers::local::lease::renew(path, self.term)?;
        *self.local.lock().unwrap_or_else(|p| p.into_inner()) = Some(path.to_path_buf());
        Ok(())
    }

    /// Who holds it: `host pid N`.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// This owner's epoch: higher than every earlier owner's.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// The holder before this one and when its lease expired (ms since
    /// the Unix epoch, the database's clock), if anyone held it.
    pub fn previous(&self) -> Option<(&str, i64)> {
        self.previous.as_ref().map(|(h, t)| (h.as_str(), *t))
    }

    /// Turns true when the renewing thread finds the lease taken by
    /// another server.
    pub fn lost(&self) -> tokio::sync::watch::Receiver<bool> {
        self.lost.clone()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Closing the channel wakes the renewer, which releases the lease.
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
    }
}

/// This process, as a lease holder and in `servers`: its host name and pid.
pub fn this_server() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into());
    format!("{host} pid {}", std::process::id())
}

/// Takes the lease on the journal at `at` for `term`, advertising
/// `address` (the API URL standbys forward to; empty when it has none),
/// or says who holds it. One connection takes the lease, another stays
/// with the renewing thread (which connects again when it loses it, as
/// when the server restarts).
pub(super) fn acquire(at: &super::Location, term: Duration, address: &str) -> Result<Lease, JournalError> {
    acquire_on(at, at.open()?, term, address).map_err(|n| n.error)
}

/// Why the lease was not taken on a connection, with the connection when
/// it is good for another try (the lease was held by another server).
pub struct NotTaken {
    pub error: JournalError,
    pub conn: Option<super::Journal>,
}

/// [`acquire`] on the connection `j`, which goes to the renewing thread
/// once the lease is taken, and comes back with the error when it is held
/// by another server (a standby trying again keeps one connection).
pub(super) fn acquire_on(
    at: &super::Location,
    mut j: super::Journal,
    term: Duration,
    address: &str,
) -> Result<Lease, Box<NotTaken>> {
    let store = &at.shown();
    let holder = this_server();
    let term_ms = i64::try_from(term.as_millis()).unwrap_or(i64::MAX);
    type Taken = Result<(i64, Option<(String, i64)>), (String, i64)>;
    let taken = j
        .conn
        .write(|tx| -> Result<Taken, DbError> {
            tx.batch(CREATE)?;
            tx.execute("INSERT INTO leadership VALUES (1, '', 0, 0) ON CONFLICT (id) DO NOTHING", &[])?;
            let (current, expires, now): (String, i64, i64) = tx.query_one(
                &format!("SELECT holder, expires_at, {NOW} FROM leadership WHERE id = 1 FOR UPDATE"),
                &[],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            if expires > now && current != holder {
                return Ok(Err((current, expires)));
            }
            let epoch = tx.query_one(
                &format!(
                    "UPDATE leadership SET holder = ?1, epoch = epoch + 1, expires_at = {NOW} + ?2, \
                     address = ?3, taken_at = {NOW}, previous = ?4, previous_expired = ?5 \
                     WHERE id = 1 RETURNING epoch"
                ),
                &[&holder, &term_ms, &address, &current, &expires],
                |r| r.get(0),
            )?;
            let previous = (!current.is_empty()).then_some((current, expires));
            Ok(Ok((epoch, previous)))
        })
        .map_err(failed(store, "take the journal's lease"))
        .map_err(|error| Box::new(NotTaken { error, conn: None }))?;
    let (epoch, previous) = match taken {
        Ok(taken) => taken,
        Err((owner, until)) => {
            let e = JournalError::Leased {
                store: store.to_string(),
                owner,
                until: crate::units::utc_seconds(until),
            };
            return Err(Box::new(NotTaken { error: e, conn: Some(j) }));
        }
    };
    let (stop, stopped) = mpsc::channel::<()>();
    let (lost_tx, lost) = tokio::sync::watch::channel(false);
    let (h, at, address) = (holder.clone(), at.clone(), address.to_string());
    let local = LocalLease::default();
    let vouched = local.clone();
    let renewer = std::thread::Builder::new()
        .name("canopy-lease".into())
        .spawn(move || {
            let me = Holding { holder: &h, epoch, address: &address, term };
            renew(j, &at, &me, stopped, lost_tx, &vouched);
            // No longer vouched for: the host's local work stops now.
            let path = vouched.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some(path) = path
                && let Err(e) = crate::providers::local::lease::renew(&path, Duration::ZERO)
            {
                tracing::warn!(path = %path.display(), error = %e, "could not end the local lease; it lapses by itself");
            }
        })
        .map_err(|e| {
            let error = JournalError::Invalid { what: "the lease's renewing thread".into(), detail: e.to_string() };
            Box::new(NotTaken { error, conn: None })
        })?;
    tracing::info!(store, epoch, "took the journal's lease");
    Ok(Lease { holder, epoch, previous, lost, local, term, stop: Some(stop), renewer: Some(renewer) })
}

/// What the renewing thread renews.
struct Holding<'a> {
    holder: &'a str,
    epoch: i64,
    address: &'a str,
    term: Duration,
}

/// Renews every third of the term until told to stop, then gives the
/// lease up. Says on `lost` when another server took it.
fn renew(
    mut j: super::Journal,
    at: &super::Location,
    me: &Holding<'_>,
    stop: mpsc::Receiver<()>,
    lost: tokio::sync::watch::Sender<bool>,
    local: &LocalLease,
) {
    let store = &at.shown();
    let (holder, epoch) = (me.holder, me.epoch);
    let term_ms = i64::try_from(me.term.as_millis()).unwrap_or(i64::MAX);
    let _ = j.heartbeat(holder, me.address, "leader", epoch);
    // Until stopped (or the lease dropped): then it is given up below.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(me.term / 3) {
        let renewed = j.conn.execute(
            &format!(
                "UPDATE leadership SET expires_at = {NOW} + ?3 WHERE id = 1 AND holder = ?1 AND epoch = ?2"
            ),
            &[&holder, &epoch, &term_ms],
        );
        match renewed {
            Ok(1) => {
                let path = local.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let Some(path) = path
                    && let Err(e) = crate::providers::local::lease::renew(&path, me.term)
                {
                    tracing::warn!(path = %path.display(), error = %e, "could not renew the local lease");
                }
                if let Err(e) = j.heartbeat(holder, me.address, "leader", epoch) {
                    tracing::warn!(store, error = %e, "could not record this server's heartbeat");
                }
            }
            Ok(_) => {
                tracing::error!(store, epoch, "lost the journal's lease: another engine took it");
                let _ = lost.send(true);
                return;
            }
            Err(e) => {
                tracing::warn!(store, epoch, error = %e, "could not renew the journal's lease; connecting again");
                match at.open() {
                    Ok(fresh) => j = fresh,
                    Err(e) => tracing::warn!(store, epoch, error = %e, "cannot reach the journal; retrying"),
                }
            }
        }
    }
    if let Err(e) = j.conn.execute(
        "UPDATE leadership SET expires_at = 0 WHERE id = 1 AND holder = ?1 AND epoch = ?2",
        &[&holder, &epoch],
    ) {
        tracing::warn!(store, epoch, error = %e, "could not give the journal's lease up; it expires by itself");
    }
}

/// The lease row as a standby or an operator sees it. Times are ms since
/// the Unix epoch on the database's clock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Leadership {
    /// `host pid N`; empty when nobody ever held it.
    pub holder: String,
    pub epoch: i64,
    /// The API URL the holder advertised (empty: none).
    pub address: String,
    pub expires_at: i64,
    pub taken_at: i64,
    /// The holder before this one (empty: none) and when its lease expired.
    pub previous: String,
    pub previous_expired: i64,
    /// The database's clock when this was read.
    pub now: i64,
}

impl Leadership {
    /// Whether someone holds an unexpired lease.
    pub fn held(&self) -> bool {
        !self.holder.is_empty() && self.expires_at > self.now
    }
}

/// One server's row in `servers`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerRow {
    pub id: String,
    pub address: String,
    /// `leader` or `standby`.
    pub role: String,
    pub epoch: i64,
    pub last_seen: i64,
    pub started_at: i64,
}

impl super::Journal {
    fn ensure_lease_tables(&self) -> Result<(), DbError> {
        // A standby may read before any server ever took the lease.
        let exists: Option<i64> = self.conn.query_opt(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'servers' AND table_schema = current_schema()",
            &[],
            |r| r.get(0),
        )?;
        if exists.is_none() {
            self.conn.batch(CREATE)?;
        }
        Ok(())
    }

    /// The lease row (PostgreSQL only; `None` on SQLite or when nobody
    /// ever took it).
    pub fn leadership(&self) -> Result<Option<Leadership>, JournalError> {
        if !self.is_postgres() {
            return Ok(None);
        }
        let store = &self.store;
        self.ensure_lease_tables().map_err(failed(store, "read the journal's lease"))?;
        self.conn
            .query_opt(
                &format!(
                    "SELECT holder, epoch, address, expires_at, taken_at, previous, previous_expired, {NOW} \
                     FROM leadership WHERE id = 1"
                ),
                &[],
                |r| {
                    Ok(Leadership {
                        holder: r.get(0)?,
                        epoch: r.get(1)?,
                        address: r.get(2)?,
                        expires_at: r.get(3)?,
                        taken_at: r.get(4)?,
                        previous: r.get(5)?,
                        previous_expired: r.get(6)?,
                        now: r.get(7)?,
                    })
                },
            )
            .map_err(failed(store, "read the journal's lease"))
    }

    /// Records that server `id` (serving at `address`, as `role`, at
    /// `epoch`) is alive now; forgets servers silent for a day. Nothing on
    /// SQLite.
    pub fn heartbeat(&self, id: &str, address: &str, role: &str, epoch: i64) -> Result<(), JournalError> {
        if !self.is_postgres() {
            return Ok(());
        }
        let store = &self.store;
        self.ensure_lease_tables().map_err(failed(store, "record this server's heartbeat"))?;
        self.conn
            .execute(
                &format!(
                    "INSERT INTO servers VALUES (?1, ?2, ?3, ?4, {NOW}, {NOW}) ON CONFLICT (id) DO UPDATE \
                     SET address = CASE WHEN excluded.address = '' THEN servers.address ELSE excluded.address END, role = excluded.role, epoch = excluded.epoch, \
                     last_seen = excluded.last_seen"
                ),
                &[&id, &address, &role, &epoch],
            )
            .and_then(|_| {
                self.conn.execute(&format!("DELETE FROM servers WHERE last_seen < {NOW} - ?1"), &[&FORGET_AFTER_MS])
            })
            .map(|_| ())
            .map_err(failed(store, "record this server's heartbeat"))
    }

    /// Writes `address` as the API URL of the lease holder at `epoch` (the
    /// address is known only once its listener is bound); nothing when
    /// another server holds the lease now, or on SQLite.
    pub fn advertise(&self, epoch: i64, address: &str) -> Result<(), JournalError> {
        if !self.is_postgres() {
            return Ok(());
        }
        let store = &self.store;
        self.conn
            .execute("UPDATE leadership SET address = ?2 WHERE id = 1 AND epoch = ?1", &[&epoch, &address])
            .and_then(|_| {
                self.conn.execute("UPDATE servers SET address = ?2 WHERE epoch = ?1", &[&epoch, &address])
            })
            .map(|_| ())
            .map_err(failed(store, "advertise this server's address"))
    }

    /// Every server heard from in the last day, most recently seen first
    /// (empty on SQLite).
    pub fn servers(&self) -> Result<Vec<ServerRow>, JournalError> {
        if !self.is_postgres() {
            return Ok(Vec::new());
        }
        let store = &self.store;
        self.ensure_lease_tables().map_err(failed(store, "list the servers"))?;
        self.conn
            .query_map(
                "SELECT id, address, role, epoch, last_seen, started_at FROM servers ORDER BY last_seen DESC, id",
                &[],
                |r| {
                    Ok(ServerRow {
                        id: r.get(0)?,
                        address: r.get(1)?,
                        role: r.get(2)?,
                        epoch: r.get(3)?,
                        last_seen: r.get(4)?,
                        started_at: r.get(5)?,
                    })
                },
            )
            .map_err(failed(store, "list the servers"))
    }
}
