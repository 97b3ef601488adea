//! A standby tries the journal's lease every third of its term, for as
//! long as it stands by. Each try used to open a new database connection
//! (PostgreSQL starts a process for each): a standby on the default 6 s
//! term made 30 a minute, forever. It keeps one connection now, and opens
//! another only after an error. Counted on a PostgreSQL cluster of the
//! test's own (`pg_stat_database.sessions`), so nothing else connects.

mod journal_support;
mod pg_cluster;
mod standby_support;

use standby_support::{Server, TERM_S};
use std::time::Duration;

#[test]
fn a_standby_keeps_one_database_connection_for_its_lease_tries() {
    let Some(pg) = pg_cluster::Cluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut a = Server::start_at(dir.path(), "host-a", &pg.url, &pg.password, "", TERM_S);
    a.wait_to_say("canopy serve: store", 1);
    let mut b = Server::start_at(dir.path(), "host-b", &pg.url, &pg.password, "", TERM_S);
    b.wait_to_say("canopy serve: standing by", 1);
    // Settled: the standby's first tries (and the leader's start) are done.
    std::thread::sleep(Duration::from_secs(TERM_S));
    let before = pg.sessions();
    // Six terms: eighteen lease tries by the standby.
    std::thread::sleep(Duration::from_secs(6 * TERM_S));
    let after = pg.sessions();
    assert!(a.leads() && b.child.try_wait().unwrap().is_none(), "{}\n{}", a.said(), b.said());
    // The second count's own psql session, and a little room for the
    // leader (its pooled readers are opened once, not per request).
    let opened = after - before;
    assert!(opened <= 3, "{opened} sessions opened in {} s of standing by", 6 * TERM_S);
}
