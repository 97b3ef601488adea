//! Shared by the failover tests with real processes
//! (`tests/serve_ssh_failover.rs`, `tests/console_failover.rs`): three
//! `canopy serve` on one PostgreSQL journal (each test its own schema),
//! `kill -9` of whichever leads, and the CLI through `CANOPY_SERVER`
//! listing all three. Every server is killed when dropped; nothing here
//! asserts on elapsed time, only bounded waits.
#![allow(dead_code)]

use crate::journal_support::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_canopy");
/// How long any one wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(60);
const PW_ENV: &str = "CANOPY_TEST_JOURNAL_PW";
/// The journal's lease: short, so a takeover takes seconds; the shortest
/// the setting allows.
pub const TERM_S: u64 = 3;

/// A `canopy serve` this test started, on its own home; killed (and
/// resumed first, if frozen) when dropped.
pub struct Server {
    pub root: PathBuf,
    pub child: Child,
    stderr: PathBuf,
    killed: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().unwrap().is_none() {
            // SAFETY: signals only the server this test started.
            unsafe {
                libc::kill(self.child.id() as i32, libc::SIGCONT);
                libc::kill(self.child.id() as i32, libc::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

impl Server {
    /// `canopy serve --listen 127.0.0.1:0` on a new home `name` whose
    /// journal is `s`'s schema; `top` goes at the top of its
    /// `canopy.toml` (keys), `tables` after the `[journal]` table.
    pub fn start(dir: &Path, name: &str, s: &Store, top: &str, tables: &str) -> Server {
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        let toml = format!(
            "{top}\n[journal]\nurl = {:?}\npassword_env = {PW_ENV:?}\nlease_term = \"{TERM_S}s\"\n{tables}\n",
            s.url()
        );
        std::fs::write(root.join("canopy.toml"), toml).unwrap();
        let stderr = root.join("serve.stderr");
        let child = Command::new(BIN)
            .arg("--store")
            .arg(&root)
            .args(["serve", "--no-faults", "--listen", "127.0.0.1:0"])
            .env(PW_ENV, password(s))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Server { root, child, stderr, killed: false }
    }

    pub fn said(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Leads: it said it serves the store, and it was not killed.
    pub fn leads(&self) -> bool {
        !self.killed && self.said().contains("canopy serve: store")
    }

    /// Waits until stderr has said `what` once.
    pub fn wait_to_say(&mut self, what: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.said().contains(what) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("canopy serve exited ({status}): {}", self.said());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what:?}: {}", self.said());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The last `http://…` address it said it serves on.
    pub fn url(&self) -> String {
        let said = self.said();
        let at = said.rfind("http://127.0.0.1:").expect("a TCP address");
        said[at..]
            .split([',', ';', '.', ' ', '\n'])
            .take(4)
            .collect::<Vec<_>>()
            .join(".")
            .trim_end_matches('.')
            .to_string()
    }

    /// `kill -9`, and reaped.
    pub fn kill9(&mut self) {
        // SAFETY: signals only the server this test started.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
        self.killed = true;
    }
}

pub fn password(s: &Store) -> String {
    let Store::Postgres { password, .. } = s else { unreachable!("a PostgreSQL store") };
    password.clone()
}

pub fn ok(out: Output, what: &str) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Three servers on `s`: the first leads, the others stand by.
pub struct Cluster {
    pub servers: Vec<Server>,
    /// An operator's token.
    pub token: String,
    /// Which of `servers` leads now.
    pub leader: usize,
    /// `CANOPY_SERVER` listing all three, the first leader first.
    pub all: String,
}

impl Cluster {
    pub fn start(dir: &Path, s: &Store, top: &str, tables: &str) -> Cluster {
        let mut servers = vec![Server::start(dir, "host-a", s, top, tables)];
        servers[0].wait_to_say("canopy serve: store");
        let token = token(&servers[0]);
        for name in ["host-b", "host-c"] {
            let mut x = Server::start(dir, name, s, top, tables);
            x.wait_to_say("canopy serve: standing by");
            servers.push(x);
        }
        let all = servers.iter().map(Server::url).collect::<Vec<_>>().join(",");
        Cluster { servers, token, leader: 0, all }
    }

    /// `kill -9` of the leader; waits until another server leads and
    /// returns which.
    pub fn kill_leader(&mut self) -> usize {
        let old = self.leader;
        self.servers[old].kill9();
        let deadline = Instant::now() + DEADLINE;
        self.leader = loop {
            if let Some(i) = (0..self.servers.len()).find(|&i| self.servers[i].leads()) {
                break i;
            }
            let said: Vec<String> = self.servers.iter().map(Server::said).collect();
            assert!(Instant::now() < deadline, "no server took over from {old}: {said:#?}");
            std::thread::sleep(Duration::from_millis(50));
        };
        self.leader
    }

    /// `canopy ARGS` through `CANOPY_SERVER` listing all three.
    pub fn cli(&self, args: &[&str]) -> Output {
        through(&self.all, &self.token, args)
    }

    /// Submits the spec file through all three; the id it was given, or
    /// `None` when the submit failed (its outcome unknown).
    pub fn submit(&self, spec: &Path) -> Option<String> {
        let out = self.cli(&["submit", "--json", spec.to_str().unwrap()]);
        if !out.status.success() {
            return None;
        }
        Some(serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_str().unwrap().to_string())
    }

    /// Every workload the cluster lists, as `status --json` shows them.
    pub fn listed(&self) -> Vec<Value> {
        serde_json::from_slice(&ok(self.cli(&["status", "--json", "--limit", "1000"]), "status")).unwrap()
    }
}

/// `canopy ARGS` with `CANOPY_SERVER` listing `servers`.
pub fn through(servers: &str, token: &str, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(BIN)
        .arg("--store")
        .arg(home.path())
        .args(args)
        .env("CANOPY_SERVER", servers)
        .env("CANOPY_TOKEN", token)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// An operator token made on `server`'s socket (it must lead).
pub fn token(server: &Server) -> String {
    let out = Command::new(BIN)
        .arg("--store")
        .arg(&server.root)
        .args(["token", "create", "--name", "ops", "--role", "operator"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8(ok(out, "token create")).unwrap().trim().to_string()
}
