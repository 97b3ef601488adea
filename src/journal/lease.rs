//! Ownership of a PostgreSQL journal: a lease row, not a session lock.
//!
//! One row, `leadership (holder, epoch, expires_at)`: an engine takes it
//! when nobody holds it or its holder let it expire, raising the epoch by
//! one (so epochs only grow, and each owner has its own), and renews it
//! every third of its term from a thread of its own with its own
//! connection. Times are the database server's clock (`clock_timestamp()`),
//! so servers' clocks need not agree. Dropping the [`Lease`] gives it up at
//! once (expiry set to 0); a process that dies, freezes or is cut off
//! loses it when the term runs out, and another engine may then take it.
//!
//! An advisory lock is deliberately not used: it stays with a frozen
//! process's session and nobody could take over. The epoch fences
//! writes: the owner's journal ([`super::Journal::fence`]) checks it at
//! the start of every write transaction (`db::Db::write`), so a paused old
//! owner cannot write after losing the lease. Standbys that wait for the
//! lease are not built yet.

use super::db::{DbError, Exec};
use super::{JournalError, failed};
use std::sync::mpsc;
use std::time::Duration;

/// How long a lease lasts without renewal.
pub const LEASE_TERM: Duration = Duration::from_secs(15);

const CREATE: &str = "CREATE TABLE IF NOT EXISTS leadership (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    holder     TEXT   NOT NULL,
    epoch      BIGINT NOT NULL,
    expires_at BIGINT NOT NULL   -- ms since the Unix epoch, the database's clock
)";

const NOW: &str = "CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)";

/// Held by the engine that owns a PostgreSQL journal; dropping it gives
/// the journal up.
#[derive(Debug)]
pub struct Lease {
    holder: String,
    epoch: i64,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    /// Who holds it: `host pid N`.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// This owner's epoch: higher than every earlier owner's.
    pub fn epoch(&self) -> i64 {
        self.epoch
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

/// This process, as a lease holder: its host name and pid.
fn holder() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown host".into());
    format!("{host} pid {}", std::process::id())
}

/// Takes the lease on the journal at `at`, or says who holds it. One
/// connection takes the lease, another stays with the renewing thread
/// (which connects again when it loses it, as when the server restarts).
pub(super) fn acquire(at: &super::Location, term: Duration) -> Result<Lease, JournalError> {
    let store = &at.shown();
    let holder = holder();
    let term_ms = i64::try_from(term.as_millis()).unwrap_or(i64::MAX);
    let mut j = at.open()?;
    let taken = j
        .conn
        .write(|tx| -> Result<Result<i64, (String, i64)>, DbError> {
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
                    "UPDATE leadership SET holder = ?1, epoch = epoch + 1, expires_at = {NOW} + ?2 \
                     WHERE id = 1 RETURNING epoch"
                ),
                &[&holder, &term_ms],
                |r| r.get(0),
            )?;
            Ok(Ok(epoch))
        })
        .map_err(failed(store, "take the journal's lease"))?;
    let epoch = match taken {
        Ok(epoch) => epoch,
        Err((owner, until)) => {
            return Err(JournalError::Leased {
                store: store.to_string(),
                owner,
                until: crate::units::utc_seconds(until),
            });
        }
    };
    let (stop, stopped) = mpsc::channel::<()>();
    let (h, at) = (holder.clone(), at.clone());
    let renewer = std::thread::Builder::new()
        .name("canopy-lease".into())
        .spawn(move || renew(j, &at, &h, epoch, term, stopped))
        .map_err(|e| JournalError::Invalid {
            what: "the lease's renewing thread".into(),
            detail: e.to_string(),
        })?;
    tracing::info!(store, epoch, "took the journal's lease");
    Ok(Lease { holder, epoch, stop: Some(stop), renewer: Some(renewer) })
}

/// Renews every third of the term until told to stop, then gives the
/// lease up.
fn renew(
    mut j: super::Journal,
    at: &super::Location,
    holder: &str,
    epoch: i64,
    term: Duration,
    stop: mpsc::Receiver<()>,
) {
    let store = &at.shown();
    let term_ms = i64::try_from(term.as_millis()).unwrap_or(i64::MAX);
    // Until stopped (or the lease dropped): then it is given up below.
    while let Err(mpsc::RecvTimeoutError::Timeout) = stop.recv_timeout(term / 3) {
        let renewed = j.conn.execute(
            &format!(
                "UPDATE leadership SET expires_at = {NOW} + ?3 WHERE id = 1 AND holder = ?1 AND epoch = ?2"
            ),
            &[&holder, &epoch, &term_ms],
        );
        match renewed {
            Ok(1) => {}
            Ok(_) => {
                tracing::error!(store, epoch, "lost the journal's lease: another engine took it");
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
