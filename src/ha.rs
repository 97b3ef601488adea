//! Several `canopy serve` processes on one PostgreSQL journal: one leader
//! holding the lease (`journal::lease`), the others standbys that forward
//! the API to it (`server::standby`) and take the lease when it lapses.
//!
//! This module owns the standby's side of the lease: trying to take it
//! every third of its term, heartbeating its row in `servers`, keeping
//! the lease row it read for the forwarder, and writing the takeover into
//! the audit trail once it has the lease.

use crate::engine::model::{AuditRecord, Millis, Record};
use crate::journal::{Journal, JournalError, Leadership, Lease, Location, NotTaken, this_server};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::watch;

/// The audit trail's action for a takeover.
pub const TAKEOVER_ACTION: &str = "lease-taken";

/// The API URL a server advertises in the lease row: `advertise` when
/// given, else derived from the TCP address it listens on (its host name
/// when it listens on every interface); empty without TCP (a standby then
/// cannot forward to it, and says so).
pub fn advertised(advertise: Option<&str>, listen: Option<SocketAddr>, tls: bool) -> String {
    if let Some(a) = advertise {
        return a.trim_end_matches('/').to_string();
    }
    // Port 0: known only once bound (then advertised again).
    let Some(addr) = listen.filter(|a| a.port() != 0) else { return String::new() };
    let scheme = if tls { "https" } else { "http" };
    if addr.ip().is_unspecified() {
        let host = this_server();
        let host = host.rsplit_once(" pid ").map_or(host.as_str(), |(h, _)| h);
        return format!("{scheme}://{host}:{}", addr.port());
    }
    format!("{scheme}://{addr}")
}

/// Writes "took the journal's lease at epoch N from X, whose lease
/// expired at T" into the audit trail (and the log) when the lease was
/// someone else's before: a failover operators can find.
pub fn record_takeover(journal: &mut Journal, lease: &Lease, now: Millis) -> Result<(), JournalError> {
    let Some((from, expired)) = lease.previous() else { return Ok(()) };
    if from == lease.holder() {
        return Ok(());
    }
    let when = if expired == 0 {
        "who had given it up".to_string()
    } else {
        format!("whose lease expired at {}", crate::units::utc_seconds(expired))
    };
    let outcome = format!("ok: took the journal's lease at epoch {} from {from}, {when}", lease.epoch());
    tracing::warn!(epoch = lease.epoch(), from, "{}", &outcome[4..]);
    let audit = AuditRecord {
        at: now,
        principal: "canopy serve".into(),
        origin: lease.holder().to_string(),
        action: TAKEOVER_ACTION.into(),
        target: Some(format!("epoch {}", lease.epoch())),
        outcome,
        reason: None,
    };
    journal.append(&[Record::Audit(Box::new(audit))]).map(|_| ())
}

/// A standby's view: the lease row it last read (`None` before the first
/// read or when it could not be read).
pub type LeaderView = watch::Receiver<Option<Leadership>>;

/// Stands by until this server takes the lease at `at`: every third of
/// `term` it tries to take it (advertising `address`), and otherwise reads
/// the lease row into `leader` and heartbeats its `servers` row as a
/// standby. Database errors are logged and retried: a standby outlives
/// an unreachable database.
pub async fn wait_for_lease(
    at: Location,
    term: Duration,
    address: String,
    leader: watch::Sender<Option<Leadership>>,
) -> Lease {
    let me = this_server();
    // One connection for every try, kept while the lease is held by
    // another server (PostgreSQL starts a process for each new one); it
    // reads the lease row and heartbeats too. Opened again after an error.
    let mut conn: Option<Journal> = None;
    loop {
        let (at2, address2, me2) = (at.clone(), address.clone(), me.clone());
        let kept = conn.take();
        let tried = tokio::task::spawn_blocking(move || {
            let j = match kept {
                Some(j) => j,
                None => match at2.open() {
                    Ok(j) => j,
                    Err(e) => {
                        warn_unreachable(&e);
                        return (None, None, None);
                    }
                },
            };
            match at2.take_on(j, term, &address2).map_err(|n| *n) {
                Ok(lease) => (Some(lease), None, None),
                Err(NotTaken { error: JournalError::Leased { .. }, conn: Some(j) }) => {
                    let _ = j.heartbeat(&me2, &address2, "standby", 0);
                    match j.leadership() {
                        Ok(row) => (None, Some(j), row),
                        Err(e) => {
                            warn_unreachable(&e);
                            (None, None, None)
                        }
                    }
                }
                Err(NotTaken { error, .. }) => {
                    warn_unreachable(&error);
                    (None, None, None)
                }
            }
        })
        .await;
        match tried {
            Ok((Some(lease), ..)) => return lease,
            Ok((None, j, seen)) => {
                conn = j;
                leader.send_replace(seen);
            }
            Err(e) => tracing::warn!(error = %e, "the standby's lease check failed; retrying"),
        }
        tokio::time::sleep(term / 3).await;
    }
}

fn warn_unreachable(e: &JournalError) {
    tracing::warn!(error = %e, "standing by: cannot read the journal's lease; retrying");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advertised_address_comes_from_the_flag_or_the_listener() {
        let l: SocketAddr = "127.0.0.1:7878".parse().unwrap();
        assert_eq!(advertised(None, Some(l), false), "http://127.0.0.1:7878");
        assert_eq!(advertised(None, Some(l), true), "https://127.0.0.1:7878");
        assert_eq!(
            advertised(Some("https://canopy.example:443/"), Some(l), true),
            "https://canopy.example:443"
        );
        assert_eq!(advertised(None, None, false), "");
        let any: SocketAddr = "0.0.0.0:9000".parse().unwrap();
        let a = advertised(None, Some(any), false);
        assert!(a.starts_with("http://") && a.ends_with(":9000") && !a.contains("0.0.0.0"), "{a}");
    }
}
