//! PostgreSQL restarted under load (issue 33): two `canopy serve` (a
//! leader and a standby) on a private PostgreSQL cluster while a client
//! keeps submitting keyed workloads and cancelling some through
//! `CANOPY_SERVER` listing both; mid-burst the cluster is stopped (fast
//! shutdown) and started again. The service pauses and resumes: submits
//! are acknowledged again after the restart, every acknowledged submit is
//! there exactly once, every acknowledged cancel took, nothing unsubmitted
//! appears, no attempt is launched twice, and one server leads.
//!
//! The cluster is this test's own (`scripts/engines/postgres.sh` under a
//! temporary `CANOPY_ENGINES_DIR`, on a free port), never the shared one.
//! Without PostgreSQL installed (or able to start) the test says
//! "skipped: …" and passes, unless `CANOPY_ENGINES=require`.

mod journal_support;
mod pg_cluster;
mod standby_support;

use pg_cluster::Cluster;
use serde_json::Value;
use standby_support::{DEADLINE, Server, TERM_S, launched, ok, remote, through, token};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long PostgreSQL stays down.
const DOWN: Duration = Duration::from_secs(3);
/// Clients submitting at once.
const CLIENTS: u32 = 3;

/// Spec `name`: a quick run, or (`waiting`) one that waits queued for
/// 2 TB of memory, so a cancel has something to cancel.
fn spec(dir: &Path, name: &str, waiting: bool) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let (memory, wait) =
        if waiting { (2000.0, "\n[constraints]\nwait_for_capacity = true\n") } else { (0.1, "") };
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = {memory}\n{wait}"
        ),
    )
    .unwrap();
    path
}

/// What the client saw: each submit by its number, acknowledged (with its
/// id, when) or not; the cancels acknowledged.
#[derive(Default)]
struct Seen {
    acked: BTreeMap<u32, (String, Instant)>,
    failed: Vec<u32>,
    /// What the CLI said when a submit was not acknowledged.
    why: Vec<String>,
    cancelled: Vec<String>,
    /// The highest submit number tried.
    highest: u32,
}

/// The first server on `pg`, leading once it says so, and its token.
fn leader(dir: &Path, pg: &Cluster) -> (Server, String) {
    let mut a = Server::start_at(dir, "host-a", &pg.url, &pg.password, "", TERM_S);
    a.wait_to_say("canopy serve: store", 1);
    let t = token(&a);
    (a, t)
}

#[test]
fn postgres_restarted_under_load_pauses_the_service_and_loses_no_acknowledged_request() {
    let Some(pg) = Cluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut a, t) = leader(dir.path(), &pg);
    let mut b = Server::start_at(dir.path(), "host-b", &pg.url, &pg.password, "", TERM_S);
    b.wait_to_say("canopy serve: standing by", 1);
    let all = format!("{},{}", a.url(), b.url());

    // The burst: CLIENTS clients, each sending keyed submits one after
    // another (submit n from client c: n = c, c + CLIENTS, …), every third
    // one a waiting workload that is then cancelled.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let bursts = (1..=CLIENTS).map(|c| {
        let (all, t, stop, seen) = (all.clone(), t.clone(), stop.clone(), seen.clone());
        let dir = dir.path().to_path_buf();
        std::thread::spawn(move || {
            let mut n = c;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let waiting = n % 3 == 0;
                let path = spec(&dir, &format!("burst-{n}"), waiting);
                {
                    let mut seen = seen.lock().unwrap();
                    seen.highest = seen.highest.max(n);
                }
                let key = format!("pg-restart-{n}");
                let out = through(
                    &all,
                    &t,
                    &["submit", "--json", "--idempotency-key", &key, path.to_str().unwrap()],
                );
                let id = out
                    .status
                    .success()
                    .then(|| serde_json::from_slice::<Value>(&out.stdout).ok())
                    .flatten()
                    .and_then(|v| v["id"].as_str().map(str::to_string));
                let this = n;
                n += CLIENTS;
                let Some(id) = id else {
                    let mut seen = seen.lock().unwrap();
                    seen.failed.push(this);
                    seen.why.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
                    continue;
                };
                seen.lock().unwrap().acked.insert(this, (id.clone(), Instant::now()));
                if waiting && through(&all, &t, &["cancel", &id]).status.success() {
                    seen.lock().unwrap().cancelled.push(id);
                }
            }
        })
    });
    let bursts: Vec<_> = bursts.collect();
    let acked = |seen: &Arc<Mutex<Seen>>| seen.lock().unwrap().acked.len();
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + DEADLINE;
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for("submits before the restart", &|| acked(&seen) >= 4);

    // Mid-burst: PostgreSQL stopped (fast shutdown), down a while, started.
    let before = acked(&seen);
    let stopped = Instant::now();
    pg.stop();
    std::thread::sleep(DOWN);
    pg.start_again();
    let back = Instant::now();
    // The service resumes: submits acknowledged again, within the
    // client's failover wait.
    wait_for("submits acknowledged after the restart", &|| {
        seen.lock().unwrap().acked.values().filter(|(_, at)| *at > back).count() >= 3
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for b in bursts {
        b.join().unwrap();
    }
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    // The pause: the longest time without an acknowledgement, and from
    // PostgreSQL's start to the next one.
    let mut times: Vec<Instant> = seen.acked.values().map(|(_, at)| *at).collect();
    times.sort();
    let paused = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
    let resumed = times.iter().find(|at| **at > back).map(|at| *at - back).unwrap_or_default();
    eprintln!(
        "PostgreSQL down {:.1} s (stop to started); longest time without an acknowledged submit {:.1} s; \
         first one {:.1} s after PostgreSQL was back; {} submits tried, {} acknowledged ({before} before the stop), \
         {} not, {} cancels acknowledged",
        (back - stopped).as_secs_f64(),
        paused.as_secs_f64(),
        resumed.as_secs_f64(),
        seen.acked.len() + seen.failed.len(),
        seen.acked.len(),
        seen.failed.len(),
        seen.cancelled.len(),
    );
    for why in &seen.why {
        eprintln!("a submit not acknowledged: {why}");
    }
    // Neither server exited.
    for s in [&mut a, &mut b] {
        assert!(s.child.try_wait().unwrap().is_none(), "a server exited: {}", s.said());
        let said = s.said();
        let roles: Vec<_> = said.lines().filter_map(|l| l.strip_prefix("canopy serve: ")).collect();
        eprintln!("{}: {roles:#?}", s.root.file_name().unwrap().to_string_lossy());
    }

    // An acknowledged cancel of a workload whose attempt was launching
    // ends it once the attempt has stopped: after the new leader's hold
    // on its predecessor's host-bound attempts, when the restart caught
    // one (term + a third, the stop grace and 6 s).
    let listing = || -> Vec<Value> {
        let out = ok(through(&all, &t, &["status", "--json", "--limit", "1000"]), "status");
        serde_json::from_slice(&out).unwrap()
    };
    let deadline = Instant::now() + 2 * DEADLINE;
    let now = loop {
        let now = listing();
        let pending: Vec<_> = seen
            .cancelled
            .iter()
            .filter(|id| now.iter().any(|w| w["id"] == id.as_str() && w["state"] != "cancelled"))
            .collect();
        if pending.is_empty() || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let named = |name: &str| now.iter().filter(|w| w["name"] == name).collect::<Vec<_>>();
    for (n, (id, _)) in &seen.acked {
        let there = named(&format!("burst-{n}"));
        assert_eq!(there.len(), 1, "acknowledged submit burst-{n} ({id}) exactly once: {there:?}");
        assert_eq!(there[0]["id"], id.as_str(), "burst-{n} under the id acknowledged");
    }
    for n in &seen.failed {
        assert!(named(&format!("burst-{n}")).len() <= 1, "burst-{n} (not acknowledged) at most once");
    }
    for id in &seen.cancelled {
        let w = now.iter().find(|w| w["id"] == id.as_str()).unwrap();
        assert_eq!(w["state"], "cancelled", "{id}'s acknowledged cancel took: {w}");
    }
    // Nothing that was never submitted.
    let submitted = |name: &str| {
        name.strip_prefix("burst-")
            .and_then(|n| n.parse::<u32>().ok())
            .is_some_and(|n| n >= 1 && n <= seen.highest)
    };
    let strangers: Vec<_> = now.iter().filter(|w| !submitted(w["name"].as_str().unwrap_or(""))).collect();
    assert!(strangers.is_empty(), "workloads never submitted: {strangers:?}");

    // No attempt launched by two servers, or twice by one.
    let mut count = BTreeMap::new();
    for s in [&a, &b] {
        for name in launched(&s.root) {
            *count.entry(name).or_insert(0) += 1;
        }
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "attempts launched twice: {twice:?}");

    // Exactly one leader, as `status --servers` shows it (the roles are
    // heartbeats: a server that stepped down says so within a third of
    // the term).
    let leaders = || {
        let out = ok(through(&all, &t, &["status", "--servers", "--json"]), "status --servers");
        let v: Value = serde_json::from_slice(&out).unwrap();
        let n = v["servers"].as_array().unwrap().iter().filter(|s| s["role"] == "leader").count();
        (n, v)
    };
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (n, v) = leaders();
        if n == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "{n} leaders: {v}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One server alone, idle while PostgreSQL restarts: it stays up and
/// answers again once PostgreSQL is back, reads and submits, with what
/// it had before (its pooled connections, which PostgreSQL closed, are
/// not reused). It keeps its addresses all along: while the journal is
/// out of reach, and while it goes from leader to standing by and back,
/// a request is answered 503 (which clients retry) or in full, never
/// refused (a lone `--server` client would be told nothing runs there)
/// and never 500 (the journal out of reach is the service unavailable,
/// not broken).
#[test]
fn a_lone_idle_server_answers_again_after_postgres_restarts() {
    let Some(pg) = Cluster::start() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (mut a, t) = leader(dir.path(), &pg);
    let url = a.url();
    let first = ok(
        remote(&url, &t, &["submit", "--json", spec(dir.path(), "before", false).to_str().unwrap()]),
        "submit",
    );
    let first = serde_json::from_slice::<Value>(&first).unwrap()["id"].as_str().unwrap().to_string();
    // Several reads, so the server pools reader connections.
    for _ in 0..3 {
        ok(remote(&url, &t, &["status", "--json"]), "status");
    }

    // A client asking all along, from before the stop to the end.
    let asking = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let poller = {
        let (url, t, asking) = (url.clone(), t.clone(), asking.clone());
        std::thread::spawn(move || {
            let mut heads = Vec::new();
            while asking.load(std::sync::atomic::Ordering::Relaxed) {
                heads.push(head_of(&url, &t, "/v1/workloads"));
                std::thread::sleep(Duration::from_millis(20));
            }
            heads
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    pg.stop();
    std::thread::sleep(DOWN);
    pg.start_again();
    // Reads answer again (each try one request; the server may be
    // standing by a moment, which a lone `--server` client is told).
    let deadline = Instant::now() + DEADLINE;
    let listed = loop {
        let out = remote(&url, &t, &["status", "--json"]);
        if out.status.success() {
            break serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "status never answered again: {} / {}",
            String::from_utf8_lossy(&out.stderr),
            a.said()
        );
        assert!(a.child.try_wait().unwrap().is_none(), "the server exited: {}", a.said());
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(listed.iter().any(|w| w["id"] == first.as_str()), "{listed:?}");
    // Leading again (a standby answers reads too, but takes no submit
    // while no leader is there: it says 503, which is retried here).
    let deadline = Instant::now() + DEADLINE;
    let second = loop {
        let after =
            remote(&url, &t, &["submit", "--json", spec(dir.path(), "after", false).to_str().unwrap()]);
        if after.status.success() {
            break after.stdout;
        }
        let why = String::from_utf8_lossy(&after.stderr).to_string();
        assert!(
            why.contains("503") && Instant::now() < deadline,
            "submit after: {why}\nthe server said:\n{}",
            a.said()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let second = serde_json::from_slice::<Value>(&second).unwrap()["id"].as_str().unwrap().to_string();
    let listed: Vec<Value> =
        serde_json::from_slice(&ok(remote(&url, &t, &["status", "--json"]), "status")).unwrap();
    for id in [&first, &second] {
        assert_eq!(listed.iter().filter(|w| w["id"] == id.as_str()).count(), 1, "{id} once: {listed:?}");
    }
    asking.store(false, std::sync::atomic::Ordering::Relaxed);
    let heads = poller.join().unwrap();
    let answered = |s: &String| s.contains(" 200") || s.contains(" 503");
    assert!(
        heads.iter().all(answered),
        "every request answered 200 or 503, none refused, none 500: {heads:?}\nthe server said:\n{}",
        a.said()
    );
    assert!(heads.iter().any(|s| s.contains(" 503")), "the restart was seen: {heads:?}");
    assert!(a.child.try_wait().unwrap().is_none(), "the server exited: {}", a.said());
}

/// The status line of a GET of `path`, or "refused" when nothing listens.
fn head_of(url: &str, token: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let Ok(mut c) = std::net::TcpStream::connect(addr) else { return "refused".into() };
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let asked = write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    if asked.is_ok() {
        let _ = c.read_to_string(&mut out);
    }
    out.lines().next().unwrap_or("no answer").to_string()
}
