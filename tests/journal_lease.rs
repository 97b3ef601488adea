//! One owner per PostgreSQL journal: the lease row (holder, expiry, epoch).

use canopy::engine::model::Millis;
use canopy::journal::{JournalError, Location, Ownership};
use journal_support::Store;

mod journal_support;

fn location(s: &Store) -> Location {
    let Store::Postgres { password, .. } = s else { unreachable!("a PostgreSQL store") };
    Location::Postgres { url: s.url(), password: Some(password.clone()) }
}

fn epoch(o: &Ownership) -> i64 {
    match o {
        Ownership::Lease(l) => l.epoch(),
        Ownership::File(_) => panic!("a PostgreSQL journal is owned by a lease"),
    }
}

/// A second engine is refused, saying who holds the lease; once the first
/// gives it up the next owner gets a higher epoch.
#[test]
fn a_second_engine_is_refused_until_the_owner_gives_the_lease_up() {
    let Some(mut s) = Store::postgres("lease_second_engine") else { return };
    let at = location(&s);
    drop(at.open().unwrap());
    let first = at.acquire_owner(Millis(0)).unwrap();
    let e1 = epoch(&first);
    // Another process: a different holder. Simulated by renaming ours.
    s.raw("UPDATE leadership SET holder = 'other-host pid 1'");
    let err = at.acquire_owner(Millis(0)).unwrap_err();
    assert!(matches!(err, JournalError::Leased { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("other-host pid 1") && msg.contains("lease runs until"), "{msg}");
    // The owner's lease lapses (a frozen or dead process): taken over.
    s.raw("UPDATE leadership SET expires_at = 0");
    let second = at.acquire_owner(Millis(0)).unwrap();
    assert!(epoch(&second) > e1, "epochs only grow: {} then {}", e1, epoch(&second));
    drop(first);
    drop(second);
    // Given up on drop: the next takes it at once.
    s.raw("UPDATE leadership SET holder = 'other-host pid 1' WHERE expires_at = 0");
    let third = at.acquire_owner(Millis(0)).unwrap();
    assert_eq!(epoch(&third), e1 + 2);
}

/// The password reaches neither an error nor Debug output.
#[test]
fn the_password_is_never_shown() {
    let Some((url, _)) = journal_support::postgres_env() else {
        eprintln!("skipped: the_password_is_never_shown: CANOPY_TEST_POSTGRES is not set");
        return;
    };
    let secret = "n0t-the-Password-4711";
    let at = Location::Postgres { url: url.clone(), password: Some(secret.into()) };
    let err = at.open().unwrap_err();
    let shown = format!("{err} {err:?} {at:?}");
    assert!(!shown.contains(secret), "{shown}");
    assert!(err.to_string().contains("password"), "says what to check: {err}");
    // A password written into the URL is not shown either.
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    let inline = format!("{scheme}://{user}:{secret}@{host}");
    let at = Location::Postgres { url: inline, password: None };
    let err = at.open().unwrap_err();
    let shown = format!("{err} {err:?} {at:?} {}", at.shown());
    assert!(!shown.contains(secret), "{shown}");
}
