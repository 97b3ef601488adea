//! `canopy serve` with its journal on PostgreSQL (`[journal] url`): what
//! it commits is in the database, not in a file of its home, so another
//! host's server over the same database sees it; one engine owns the
//! journal at a time (the lease); the password is never shown.

use journal_support::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod journal_support;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const DEADLINE: Duration = Duration::from_secs(60);
const PW_ENV: &str = "CANOPY_TEST_JOURNAL_PW";

/// A home whose canopy.toml puts the journal in `s`'s schema.
fn home(dir: &Path, name: &str, s: &Store) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let toml = format!("[journal]\nurl = {:?}\npassword_env = {PW_ENV:?}\n", s.url());
    std::fs::write(root.join("canopy.toml"), toml).unwrap();
    root
}

fn password(s: &Store) -> String {
    let Store::Postgres { password, .. } = s else { unreachable!("a PostgreSQL store") };
    password.clone()
}

fn serve(root: &Path, s: &Store) -> (Child, PathBuf) {
    let stderr = root.join("serve.stderr");
    let child = Command::new(BIN)
        .arg("--store")
        .arg(root)
        .args(["serve", "--no-faults"])
        .env(PW_ENV, password(s))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    (child, stderr)
}

/// Kills the server it holds when dropped (a failed assertion included).
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if self.0.try_wait().unwrap().is_none() {
            // SAFETY: signals only the server this test started.
            unsafe {
                libc::kill(self.0.id() as i32, libc::SIGCONT);
                libc::kill(self.0.id() as i32, libc::SIGKILL);
            }
        }
        let _ = self.0.wait();
    }
}

/// How a standby names the leader: `led by HOST pid N;`.
fn said_holder(child: &Child) -> String {
    format!(" pid {};", child.id())
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn started(child: &mut Child, stderr: &Path) {
    wait_for("canopy serve to start", || {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("canopy serve exited ({status}): {}", read(stderr));
        }
        read(stderr).contains("canopy serve: store")
    });
}

fn terminate(child: &mut Child) {
    if child.try_wait().unwrap().is_none() {
        // SAFETY: signals only the server this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    }
    let _ = child.wait();
}

fn canopy(root: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .arg("--store")
        .arg(root)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "canopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn state(root: &Path, id: &str) -> String {
    let out = canopy(root, &["status", id, "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["workload"]["state"].as_str().unwrap_or("").to_string()
}

#[test]
fn a_server_on_postgres_commits_there_and_owns_the_journal_alone() {
    let Some(s) = Store::postgres("serve_postgres") else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = home(dir.path(), "host-a", &s);
    let b = home(dir.path(), "host-b", &s);

    let (first, stderr) = serve(&a, &s);
    let mut first = Reap(first);
    started(&mut first.0, &stderr);
    let said = read(&stderr);
    assert!(said.contains("store postgres://canopy@"), "names the database: {said}");
    assert!(!said.contains(&password(&s)), "never the password: {said}");
    assert!(!a.join("canopy.db").exists(), "no SQLite journal beside it");

    let spec = dir.path().join("hello.toml");
    std::fs::write(
        &spec,
        "name = \"hello\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let out = canopy(&a, &["submit", spec.to_str().unwrap(), "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["id"].as_str().unwrap().to_string();
    wait_for("the workload to succeed", || state(&a, &id) == "succeeded");

    // A second server on another host, same database: it does not lead
    // while the first holds the lease; it stands by, saying who leads.
    let (second, stderr_b) = serve(&b, &s);
    let mut second = Reap(second);
    wait_for("the second server to stand by", || read(&stderr_b).contains("canopy serve: standing by"));
    let said = read(&stderr_b);
    assert!(said.contains(&said_holder(&first.0)), "{said}");
    assert!(!said.contains(&password(&s)), "{said}");
    terminate(&mut second.0);

    // The first stops (and gives the lease up); the other host's server
    // takes over and reads what the first committed, from the database.
    terminate(&mut first.0);
    let (second, stderr_b) = serve(&b, &s);
    let mut second = Reap(second);
    started(&mut second.0, &stderr_b);
    assert_eq!(state(&b, &id), "succeeded");
    assert!(!b.join("canopy.db").exists());
    terminate(&mut second.0);
}

/// The fence with real processes: a server frozen (SIGSTOP) while its
/// lease lapses and another server takes the journal over is, once
/// resumed, refused its writes: a submit to it is not acknowledged,
/// nothing of it reaches the database, and it steps down to a standby.
#[test]
fn a_frozen_server_that_lost_its_lease_cannot_write_once_resumed() {
    let Some(mut s) = Store::postgres("serve_fence") else { return };
    let dir = tempfile::tempdir().unwrap();
    let a = home(dir.path(), "host-a", &s);
    let b = home(dir.path(), "host-b", &s);
    let (first, stderr_a) = serve(&a, &s);
    let mut first = Reap(first);
    started(&mut first.0, &stderr_a);

    // Frozen past its lease: the lapse is written into the row rather than
    // waited for (the term is 15 s).
    // SAFETY: signals only the server this test started.
    unsafe { libc::kill(first.0.id() as i32, libc::SIGSTOP) };
    s.raw("UPDATE leadership SET expires_at = 0");
    let (second, stderr_b) = serve(&b, &s);
    let mut second = Reap(second);
    started(&mut second.0, &stderr_b);
    // SAFETY: as above.
    unsafe { libc::kill(first.0.id() as i32, libc::SIGCONT) };

    let spec = dir.path().join("hello.toml");
    std::fs::write(
        &spec,
        "name = \"hello\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("--store")
        .arg(&a)
        .args(["submit", spec.to_str().unwrap(), "--json"])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "not acknowledged: {}", String::from_utf8_lossy(&out.stdout));
    // It steps down to a standby rather than exiting.
    wait_for("the frozen server to step down", || read(&stderr_a).contains("canopy serve: standing by"));
    assert!(first.0.try_wait().unwrap().is_none(), "still running");
    let said = read(&stderr_a);
    assert!(said.contains("canopy serve: stepping down"), "{said}");
    terminate(&mut first.0);
    assert_eq!(s.raw_i64("SELECT count(*) FROM workloads"), 0, "nothing of the refused submit");
    // The new owner writes.
    let out = canopy(&b, &["submit", spec.to_str().unwrap(), "--json"]);
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string();
    wait_for("the workload to succeed", || state(&b, &id) == "succeeded");
    terminate(&mut second.0);
}

/// `canopy migrate --to URL`: a store whose journal is a SQLite file,
/// copied into PostgreSQL; then a server with `[journal] url` (on another
/// home) shows the workload the SQLite one ran. The file stays as it was.
#[test]
fn canopy_migrate_moves_a_sqlite_store_into_postgres() {
    let Some(s) = Store::postgres("serve_migrate") else { return };
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old");
    let (mut sqlite, stderr) = serve_sqlite(&old);
    started(&mut sqlite, &stderr);
    let spec = dir.path().join("hello.toml");
    std::fs::write(
        &spec,
        "name = \"hello\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let out = canopy(&old, &["submit", spec.to_str().unwrap(), "--json"]);
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string();
    wait_for("the workload to succeed", || state(&old, &id) == "succeeded");

    // Refused while the engine owns the file.
    let busy = migrate(&old, &s);
    assert!(!busy.status.success());
    assert!(String::from_utf8_lossy(&busy.stderr).contains("stop `canopy serve`"));
    terminate(&mut sqlite);

    let done = migrate(&old, &s);
    let said = String::from_utf8_lossy(&done.stdout).into_owned();
    assert!(done.status.success(), "{said}{}", String::from_utf8_lossy(&done.stderr));
    assert!(said.contains("workloads") && said.contains("counted again"), "{said}");
    assert!(!said.contains(&password(&s)), "{said}");

    let new = home(dir.path(), "new", &s);
    let (mut pg, stderr) = serve(&new, &s);
    started(&mut pg, &stderr);
    assert_eq!(state(&new, &id), "succeeded");
    terminate(&mut pg);
    // Into a database that already holds a journal: refused.
    let again = migrate(&old, &s);
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds"), "{again:?}");
}

fn serve_sqlite(root: &Path) -> (Child, PathBuf) {
    std::fs::create_dir_all(root).unwrap();
    let stderr = root.join("serve.stderr");
    let child = Command::new(BIN)
        .arg("--store")
        .arg(root)
        .args(["serve", "--no-faults"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    (child, stderr)
}

fn migrate(root: &Path, s: &Store) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(root)
        .args(["migrate", "--to", &s.url(), "--password-env", PW_ENV])
        .env(PW_ENV, password(s))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
