//! A standby answers reads itself, from the database, with the leader's
//! authentication and authorization (issue 33): while the leader is
//! frozen or dead and before any takeover, `canopy status` and `canopy
//! audit` through the standby answer with the acknowledged workloads, a
//! tenant's token sees only its tenant's, an unknown token is 401, and
//! writes are still the leader's (503 while none answers, naming no
//! address).

use journal_support::Store;
use serde_json::Value;
use standby_support::*;
use std::time::Duration;

mod journal_support;
mod standby_support;

/// Long, so nothing takes over while the test reads through the standby.
const LONG_TERM_S: u64 = 120;

const TENANTS: &str = "[[tenant]]\nname = \"team-a\"\n[[tenant]]\nname = \"team-b\"\n";

/// A plain HTTP/1.1 request with a bearer token and a TOML body: the
/// whole response, head and body.
fn post(url: &str, token: &str, path: &str, body: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/toml\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

fn ids(out: std::process::Output, what: &str) -> Vec<String> {
    let v: Value = serde_json::from_slice(&ok(out, what)).unwrap();
    v.as_array().unwrap().iter().map(|w| w["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn a_standby_serves_reads_with_the_leaders_authorization_while_no_leader_answers() {
    let Some(s) = Store::postgres("standby_reads") else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut a = Server::start_with(dir.path(), "host-a", &s, TENANTS, LONG_TERM_S);
    a.wait_to_say("canopy serve: store", 1);
    let mut b = Server::start_with(dir.path(), "host-b", &s, TENANTS, LONG_TERM_S);
    b.wait_to_say("canopy serve: standing by", 1);
    // Made on the leader after the standby started: the standby reads
    // them from the journal when they first arrive.
    let root = token_as(&a, &["--name", "root", "--role", "admin"]);
    let a_sub = token_as(&a, &["--name", "a-sub", "--role", "submitter", "--tenant", "team-a"]);
    let b_sub = token_as(&a, &["--name", "b-sub", "--role", "submitter", "--tenant", "team-b"]);
    let a_view = token_as(&a, &["--name", "a-view", "--role", "viewer", "--tenant", "team-a"]);
    let standby = b.url();
    let a_work = submit(&standby, &a_sub, &spec(dir.path(), "a-work"));
    let b_work = submit(&standby, &b_sub, &spec(dir.path(), "b-secret"));

    // The leader freezes: its lease runs on, nothing answers at its
    // address, and no standby may take over yet.
    a.signal(libc::SIGSTOP);

    // The standby lists every acknowledged workload to the admin…
    let all = ids(remote(&standby, &root, &["status", "--json"]), "status as root");
    assert!(all.contains(&a_work) && all.contains(&b_work), "{all:?}");
    // …and only team-a's to team-a's viewer: authorization holds here.
    assert_eq!(
        ids(remote(&standby, &a_view, &["status", "--json"]), "status as a-view"),
        std::slice::from_ref(&a_work)
    );
    let shown = ok(remote(&standby, &a_view, &["status", &a_work, "--json"]), "show a-work");
    assert!(String::from_utf8_lossy(&shown).contains("a-work"));
    let hidden = remote(&standby, &a_view, &["status", &b_work, "--json"]);
    assert!(!hidden.status.success(), "team-b's workload is hidden from team-a");
    let said =
        format!("{}{}", String::from_utf8_lossy(&hidden.stdout), String::from_utf8_lossy(&hidden.stderr));
    assert!(!said.contains("b-secret"), "{said}");
    let raw = get(&standby, &a_view, &format!("/v1/workloads/{b_work}"));
    assert!(raw.starts_with("HTTP/1.1 404"), "{raw}");
    // Answered here, and marked so.
    let raw = get(&standby, &a_view, &format!("/v1/workloads/{a_work}"));
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    let by = raw.lines().find(|l| l.to_lowercase().starts_with("canopy-served-by:")).unwrap_or_default();
    assert!(by.contains(": standby ") && by.contains(&format!("pid {};", b.child.id())), "{raw}");
    assert!(by.contains("; leader ") && by.ends_with(&format!(" pid {}", a.child.id())), "{by}");

    // The audit trail: the admin reads the submits; a viewer may not.
    let audit = String::from_utf8(ok(remote(&standby, &root, &["audit", "--json"]), "audit")).unwrap();
    assert!(audit.contains(&a_work) && audit.contains(&b_work), "{audit}");
    let refused = get(&standby, &a_view, "/v1/audit");
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    // An unknown token is refused by the standby itself.
    let unknown = get(&standby, "canopy_000000000000_nope", "/v1/workloads");
    assert!(unknown.starts_with("HTTP/1.1 401") && unknown.contains("not valid"), "{unknown}");
    // Its own role, from the journal.
    let metrics = get(&standby, &root, "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200") && metrics.contains("canopy_leader 0"), "{metrics}");
    let health = get(&standby, &root, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200") && health.contains("\"standby\""), "{health}");
    let servers = get(&standby, &root, "/v1/servers");
    assert!(servers.contains(&format!("pid {}", a.child.id())), "the frozen leader still holds: {servers}");

    // Dead: writes are still the leader's, and none answers. The 503
    // says to retry and never where the leader was.
    a.signal(libc::SIGKILL);
    let _ = a.child.wait();
    let body = std::fs::read_to_string(spec(dir.path(), "after-kill")).unwrap();
    let write = post(&standby, &a_sub, "/v1/workloads", &body);
    assert!(write.starts_with("HTTP/1.1 503") && write.contains("no-leader"), "{write}");
    assert!(!write.contains(a.url().trim_start_matches("http://")), "{write}");
    // Reads go on.
    let all = ids(remote(&standby, &root, &["status", "--json"]), "status after the kill");
    assert!(all.contains(&a_work) && all.contains(&b_work) && all.len() == 2, "{all:?}");
}
