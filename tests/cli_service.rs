//! The CLI as its users meet it against a real `canopy serve` (the binary,
//! over a fresh store): `canopy token list` with tokens in the store;
//! `canopy logs --follow` across an engine restart (it reconnects and
//! resumes, nothing twice, nothing lost) and giving up after its bound;
//! a submit whose answer is lost on the way (a proxy in front of the real
//! server forwards the request, so the workload is committed, and drops
//! the answer): the outcome is unknown and the key to retry with is
//! printed; and the spec `examples/api_bench` submits is accepted.
//!
//! Every wait is a bounded poll for a condition; nothing is timed. Every
//! test stops the servers and the workloads it started.

mod reap_support;

use reap_support::Reaper;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
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

    /// Stops it as an operator restarting the service does, and waits.
    fn stop(mut self) {
        self.terminate();
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

/// A spec pinned to this host that runs `script` with `sh -c`.
fn local_spec(dir: &Path, name: &str, script: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let body = format!(
        "name = {name:?}\n\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n"
    );
    std::fs::write(&path, body).unwrap();
    path
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

// ── canopy retry: the link both ways ──────────────────────────────────

/// After `canopy retry w-1`, `canopy status w-1` says what retried it and
/// the retry says what it retries, in text and in JSON, through a real
/// `canopy serve`, and still after a restart (the link is read from the
/// journal, not remembered by the process).
#[test]
fn status_shows_retried_as_on_the_original_and_retry_of_on_the_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (store, dir) = (tmp.path().join("store"), tmp.path());
    let server = Server::start(&store, false);
    let id = submit(&store, &local_spec(dir, "fails", "exit 3"));
    wait_for(&format!("{id} to fail"), || state(&store, &id) == "failed");
    ok(&canopy(&store, &["retry", &id], &[]));
    server.stop();
    let _server = Server::start(&store, false);

    let v: Value = serde_json::from_str(&ok(&canopy(&store, &["status", &id, "--json"], &[]))).unwrap();
    let new =
        v["workload"]["retried_as"].as_str().unwrap_or_else(|| panic!("no retried_as: {v}")).to_string();
    assert_ne!(new, id);
    // Timestamps in --json come with an RFC 3339 twin beside the epoch ms.
    let ms = v["workload"]["submitted_at"].as_i64().unwrap();
    let twin = v["workload"]["submitted_at_rfc3339"].as_str().unwrap_or_else(|| panic!("no twin: {v}"));
    assert_eq!(twin.parse::<jiff::Timestamp>().unwrap().as_millisecond(), ms, "{twin}");
    let text = ok(&canopy(&store, &["status", &id], &[]));
    assert!(text.contains(&format!("retried as {new}")), "{text}");
    let text = ok(&canopy(&store, &["status", &new], &[]));
    assert!(text.contains(&format!("retry of {id}")), "{text}");
    assert!(!text.contains("retried as"), "{text}");
}

// ── canopy token list ───────────────────────────────────────────────────

/// With tokens in the store the list is a table and a JSON array (it was
/// "error decoding response body" as soon as one token existed): names,
/// roles, scopes and states, and never a secret, a salt or a hash.
#[test]
fn token_list_shows_the_tokens_that_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
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

// ── canopy logs --follow across an engine restart ───────────────────────

/// A workload that prints `line-1`…`line-50`, waits for the gate to
/// open, prints `line-51`…`line-100`, then says it is done.
fn gated_lines(dir: &Path, g: &Gate) -> PathBuf {
    let (gate, done) = (&g.gate, &g.done);
    let script = format!(
        "i=1; while [ $i -le 50 ]; do echo line-$i; i=$((i+1)); done; \
         while [ ! -e {gate:?} ]; do sleep 0.05; done; \
         while [ $i -le 100 ]; do echo line-$i; i=$((i+1)); done; touch {done:?}"
    );
    local_spec(dir, "gated", &script)
}

/// The gate of a gated workload. Dropped, it opens and waits (bounded)
/// for the workload to finish, so the workload ends even when its test
/// fails half way, before the test's directory goes.
struct Gate {
    gate: PathBuf,
    done: PathBuf,
}

impl Gate {
    fn new(dir: &Path) -> Gate {
        Gate { gate: dir.join("gate"), done: dir.join("done") }
    }

    fn open(&self) {
        std::fs::write(&self.gate, "").unwrap();
    }

    fn wait_done(&self) {
        wait_for("the workload to finish", || self.done.exists());
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.gate, "");
        let deadline = Instant::now() + DEADLINE;
        while !self.done.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A process in the background, killed when dropped unless it ended.
struct Background(Child);

impl Background {
    /// Waits for it to end (killed past the deadline).
    fn wait(&mut self, what: &str) -> std::process::ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "{what} did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if self.0.try_wait().unwrap().is_none() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// `canopy logs ID --follow --stream stdout ARGS` in the background, its
/// stdout and stderr in files.
fn follow(store: &Path, dir: &Path, id: &str, args: &[&str]) -> (Background, PathBuf, PathBuf) {
    let (out, err) =
        (dir.join(format!("follow-{}.out", unique())), dir.join(format!("follow-{}.err", unique())));
    let child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(["logs", id, "--follow", "--stream", "stdout"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    (Background(child), out, err)
}

/// The engine stops while an attempt is followed, the attempt prints the
/// rest of its output and ends while no engine runs, and the engine comes
/// back: the follow says once that it reconnects, resumes from where it
/// was, and ends with the attempt. Every line once, in order (it exited 4
/// at the restart before).
#[test]
fn logs_follow_reconnects_across_an_engine_restart_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (store, dir) = (tmp.path().join("store"), tmp.path());
    let gate = Gate::new(dir);
    let server = Server::start(&store, false);
    let id = submit(&store, &gated_lines(dir, &gate));
    wait_for(&format!("{id} to run"), || state(&store, &id) == "running");
    let (mut child, out, err) = follow(&store, dir, &id, &[]);
    wait_for("the first 50 lines to be followed", || read(&out).contains("line-50\n"));

    server.stop();
    wait_for("the follow to notice the engine is gone", || {
        if let Some(status) = child.0.try_wait().unwrap() {
            panic!("the follow ended ({status}) instead of reconnecting:\n{}", read(&err));
        }
        read(&err).contains("reconnecting")
    });
    // The rest is written, and the attempt ends, while no engine runs.
    gate.open();
    gate.wait_done();
    let _server = Server::start(&store, false);

    let end = child.wait("canopy logs --follow");
    let (out, err) = (read(&out), read(&err));
    assert_eq!(end.code(), Some(0), "{err}");
    let want: Vec<String> = (1..=100).map(|i| format!("line-{i}")).collect();
    assert_eq!(out.lines().collect::<Vec<_>>(), want, "stderr:\n{err}");
    assert_eq!(err.matches("reconnecting").count(), 1, "said once:\n{err}");
    assert_eq!(err.matches("reconnected").count(), 1, "{err}");
    assert!(err.contains("for up to 5m"), "the bound is named: {err}");
    wait_for(&format!("{id} to succeed"), || state(&store, &id) == "succeeded");
}

/// With no engine back within `--reconnect-for`, the follow gives up with
/// exit 4 and says how to take it up again.
#[test]
fn logs_follow_gives_up_after_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (store, dir) = (tmp.path().join("store"), tmp.path());
    let gate = Gate::new(dir);
    let server = Server::start(&store, false);
    let id = submit(&store, &gated_lines(dir, &gate));
    wait_for(&format!("{id} to run"), || state(&store, &id) == "running");
    let (mut child, out, err) = follow(&store, dir, &id, &["--reconnect-for", "1s"]);
    wait_for("the first 50 lines to be followed", || read(&out).contains("line-50\n"));
    server.stop();

    let end = child.wait("canopy logs --follow");
    let err = read(&err);
    assert_eq!(end.code(), Some(4), "{err}");
    assert_eq!(err.matches("reconnecting for up to 1s").count(), 1, "{err}");
    assert!(err.contains(&format!("gave up following {id}.1 after 1s")), "{err}");
    assert!(err.contains(&format!("`canopy logs {id} --follow`")), "{err}");
    // Reap the workload: it ends once the gate is open.
    gate.open();
    gate.wait_done();
}

// ── a submit whose answer is lost ───────────────────────────────────────

/// One request as a proxy saw it: its idempotency key and the status the
/// real server answered (which the client never got).
#[derive(Debug)]
struct Forwarded {
    idempotency_key: Option<String>,
    status_line: String,
}

/// Reads one HTTP/1.1 request (headers, then a Content-Length body).
fn read_request(r: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap();
        }
        raw.extend_from_slice(line.as_bytes());
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).unwrap();
    raw.extend(body);
    raw
}

/// Listens on loopback; for each of `n` connections, reads the request,
/// forwards it to `upstream` (the real server, which commits it), reads
/// the answer's status line, and closes the client's connection without
/// a byte of it: the answer is lost on the way.
fn lossy_proxy(upstream: &str, n: usize) -> (String, std::thread::JoinHandle<Vec<Forwarded>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    let thread = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for conn in listener.incoming().take(n) {
            let conn = conn.unwrap();
            let mut r = BufReader::new(conn);
            let request = read_request(&mut r);
            let head = String::from_utf8_lossy(&request).into_owned();
            let idempotency_key = head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("idempotency-key").then(|| v.trim().to_string())
            });
            let mut up = TcpStream::connect(&upstream).unwrap();
            up.write_all(&request).unwrap();
            let mut status_line = String::new();
            BufReader::new(up).read_line(&mut status_line).unwrap();
            drop(r); // closes the client's connection, unanswered
            seen.push(Forwarded { idempotency_key, status_line: status_line.trim().to_string() });
        }
        seen
    });
    (url, thread)
}

/// The connection breaks after the request reached the server (which
/// committed the workload): the CLI says the outcome is unknown and
/// prints the key to retry with (exit 7), not "no engine" (exit 4), and
/// retrying with that key returns the one workload instead of a second.
/// The key is the one the CLI generated, or the one given.
#[test]
fn a_submit_whose_answer_is_lost_prints_the_key_to_retry_with() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let server = Server::start(&store, true);
    let real = server.url.clone().expect("a TCP address");
    let token = ok(&canopy(&store, &["token", "create", "--name", "app", "--role", "submitter"], &[]));
    let token = token.trim();
    let spec = local_spec(tmp.path(), "lost", "echo hi");
    let spec = spec.to_str().unwrap();
    let (proxy, seen) = lossy_proxy(&real, 2);
    let elsewhere = tmp.path().join("elsewhere");
    let via_proxy = [("CANOPY_SERVER", proxy.as_str()), ("CANOPY_TOKEN", token)];

    let lost = canopy(&elsewhere, &["submit", spec], &via_proxy);
    let err = text(&lost.stderr);
    assert_eq!(lost.status.code(), Some(7), "{err}");
    assert!(err.contains("whether the workload was submitted is unknown"), "{err}");
    assert!(!err.contains("no engine owns") && !err.contains("no Canopy server answers"), "{err}");
    let retry = err
        .lines()
        .find_map(|l| l.trim().strip_prefix("canopy submit --idempotency-key "))
        .unwrap_or_else(|| panic!("no retry command:\n{err}"));
    let (key, file) = retry.split_once(' ').unwrap();
    assert_eq!(file, spec);

    // The same, for a script, with the key it gave.
    let lost = canopy(&elsewhere, &["submit", spec, "--idempotency-key", "given-1", "--json"], &via_proxy);
    assert_eq!(lost.status.code(), Some(7), "{}", text(&lost.stderr));
    let v: Value = serde_json::from_slice(&lost.stdout).unwrap();
    assert_eq!(v, serde_json::json!({ "outcome": "unknown", "idempotency_key": "given-1" }));

    let seen = seen.join().unwrap();
    assert_eq!(seen[0].idempotency_key.as_deref(), Some(key), "the key printed is the key sent");
    assert_eq!(seen[1].idempotency_key.as_deref(), Some("given-1"));
    for f in &seen {
        assert!(f.status_line.contains(" 201 "), "the server committed it: {f:?}");
    }

    // Retried with the printed key: the workload it committed, not a new one.
    let direct = [("CANOPY_SERVER", real.as_str()), ("CANOPY_TOKEN", token)];
    let again = ok(&canopy(&elsewhere, &["submit", "--idempotency-key", key, spec], &direct));
    assert_eq!(again.trim(), "w-1 (already submitted with this idempotency key)");
    let all: Vec<Value> = serde_json::from_str(&ok(&canopy(&store, &["status", "--json"], &[]))).unwrap();
    assert_eq!(all.len(), 2, "one workload per key: {all:?}");
    for id in ["w-1", "w-2"] {
        wait_for(&format!("{id} to succeed"), || state(&store, id) == "succeeded");
    }
}

// ── examples/api_bench ──────────────────────────────────────────────────

/// The bench's workload (64 GPUs, which nothing in the demo fleet has) is
/// accepted and waits queued; it was refused as never fitting, so the
/// bench stopped at its first submit.
#[test]
fn the_api_bench_workload_is_accepted_and_waits() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let _server = Server::start(&store, false);
    let spec = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/api_bench.toml");
    let id = submit(&store, Path::new(spec));
    assert_eq!(state(&store, &id), "queued");
    ok(&canopy(&store, &["cancel", &id], &[]));
}
