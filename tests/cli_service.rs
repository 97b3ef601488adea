//! The CLI as its users meet it against a real `canopy serve` (the binary,
//! over a fresh store): `canopy token list` with tokens in the store; and
//! the spec `examples/api_bench` submits is accepted.
//!
//! Every wait is a bounded poll for a condition; nothing is timed. Every
//! test stops the servers and the workloads it started.

use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const DEADLINE: Duration = Duration::from_secs(60);

/// `canopy serve` over one store, stopped with SIGTERM (as systemd stops
/// it) when dropped.
struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT` with `--listen`.
    url: Option<String>,
}

impl Server {
    fn start(store: &Path, listen: bool) -> Server {
        let stderr = store.with_extension(format!("serve-{}.stderr", unique()));
        let mut cmd = Command::new(BIN);
        cmd.arg("--store").arg(store).args(["serve", "--no-faults"]);
        if listen {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut s = Server { child, url: None };
        wait_for("canopy serve to start", || {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!("canopy serve exited ({status}): {}", read(&stderr));
            }
            read(&stderr).contains("canopy serve: store")
        });
        let text = read(&stderr);
        s.url = text
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .map(|u| u.trim_end_matches(['.', ',']).to_string());
        s
    }

    fn terminate(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            // SAFETY: signals only the server this test started.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        }
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.terminate();
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
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

/// `canopy --store STORE ARGS` with `env`, to its end (within the deadline).
fn canopy(store: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, &format!("canopy {args:?}"))
}

/// Waits for `child` to end (killed past the deadline); its output.
fn finish(mut child: Child, what: &str) -> Output {
    let deadline = Instant::now() + DEADLINE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("{what} did not end: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn submit(store: &Path, spec: &Path) -> String {
    let out = canopy(store, &["submit", spec.to_str().unwrap(), "--json"], &[]);
    let v: Value = serde_json::from_str(&ok(&out)).unwrap();
    v["id"].as_str().unwrap().to_string()
}

fn state(store: &Path, id: &str) -> String {
    let out = canopy(store, &["status", id, "--json"], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["workload"]["state"].as_str().unwrap_or("").to_string()
}

// ── canopy token list ───────────────────────────────────────────────────

/// With tokens in the store the list is a table and a JSON array (it was
/// "error decoding response body" as soon as one token existed): names,
/// roles, scopes and states, and never a secret, a salt or a hash.
#[test]
fn token_list_shows_the_tokens_that_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let _server = Server::start(&store, false);
    let mut secrets = Vec::new();
    for args in [
        &["--name", "ci", "--role", "submitter"][..],
        &["--name", "fra-owner", "--role", "operator", "--scope", "provider=onprem-fra", "--expires", "30d"],
        &["--name", "old", "--role", "viewer"],
    ] {
        let out = canopy(&store, &[&["token", "create"][..], args].concat(), &[]);
        secrets.push(ok(&out).trim().to_string());
    }
    ok(&canopy(&store, &["token", "revoke", "old"], &[]));

    let table = ok(&canopy(&store, &["token", "list"], &[]));
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{table}"))
            .to_string()
    };
    assert!(row("ci").contains("submitter") && row("ci").contains("active"), "{table}");
    let fra = row("fra-owner");
    assert!(
        fra.contains("operator") && fra.contains("provider=onprem-fra") && fra.contains("expires"),
        "{fra}"
    );
    assert!(row("old").contains("revoked"), "{table}");
    assert!(row("ci").contains("local:"), "created by the store's owner: {table}");

    let json = ok(&canopy(&store, &["token", "list", "--json"], &[]));
    let rows: Vec<Value> = serde_json::from_str(&json).unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ci", "fra-owner", "old"]);
    for r in &rows {
        assert!(r.get("salt").is_none() && r.get("hash").is_none(), "{r}");
    }
    for s in &secrets {
        assert!(!table.contains(s.as_str()) && !json.contains(s.as_str()), "a secret was listed");
    }
}

// ── examples/api_bench ──────────────────────────────────────────────────

/// The bench's workload (64 GPUs, which nothing in the demo fleet has) is
/// accepted and waits queued; it was refused as never fitting, so the
/// bench stopped at its first submit.
#[test]
fn the_api_bench_workload_is_accepted_and_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("store");
    let _server = Server::start(&store, false);
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/api_bench.toml");
    let id = submit(&store, Path::new(spec));
    assert_eq!(state(&store, &id), "queued");
    ok(&canopy(&store, &["cancel", &id], &[]));
}
