//! What the tests of several `canopy serve` on one PostgreSQL journal
//! share (`serve_standby`, `serve_standby_reads`, `serve_ssh_failover`,
//! `console_failover`): servers on homes of their own, killed (resumed
//! first, if frozen) when dropped; three of them as a [`Cluster`] whose
//! leader can be killed; the CLI and plain HTTP against one of them or
//! through `CANOPY_SERVER` listing several. Nothing here asserts on
//! elapsed time, only bounded waits.

#![allow(dead_code)]

use super::journal_support::Store;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_canopy");
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const PW_ENV: &str = "CANOPY_TEST_JOURNAL_PW";
/// Short, so a takeover takes seconds; the shortest the setting allows.
pub const TERM_S: u64 = 3;

/// A `canopy serve` this test started, on its own home; killed (and
/// resumed first, if frozen) when dropped.
pub struct Server {
    pub root: PathBuf,
    pub child: Child,
    pub stderr: PathBuf,
    /// Killed by [`Server::kill9`]: whatever it said, it leads no more.
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
    /// journal is `s`'s schema.
    pub fn start(dir: &Path, name: &str, s: &Store) -> Server {
        Server::start_with(dir, name, s, "", TERM_S)
    }

    /// [`Server::start`] with `config` (top-level keys and tables, such
    /// as tenants) before the journal's table in its `canopy.toml`, and a
    /// lease term of `term_s` seconds.
    pub fn start_with(dir: &Path, name: &str, s: &Store, config: &str, term_s: u64) -> Server {
        Server::start_at(dir, name, &s.url(), &password(s), config, term_s)
    }

    /// [`Server::start_with`] on the journal at `url` (a PostgreSQL
    /// database of the test's own, say) with `password`.
    pub fn start_at(dir: &Path, name: &str, url: &str, password: &str, config: &str, term_s: u64) -> Server {
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        let toml = format!(
            "{config}\n[journal]\nurl = {url:?}\npassword_env = {PW_ENV:?}\nlease_term = \"{term_s}s\"\n"
        );
        std::fs::write(root.join("canopy.toml"), toml).unwrap();
        let stderr = root.join("serve.stderr");
        let child = Command::new(BIN)
            .arg("--store")
            .arg(&root)
            .args(["serve", "--no-faults", "--listen", "127.0.0.1:0"])
            .env(PW_ENV, password)
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

    /// Waits until stderr has said `what` `times` times.
    pub fn wait_to_say(&mut self, what: &str, times: usize) {
        let deadline = Instant::now() + DEADLINE;
        while self.said().matches(what).count() < times {
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

    pub fn signal(&self, sig: i32) {
        // SAFETY: signals only the server this test started.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// `kill -9`, and reaped.
    pub fn kill9(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        self.killed = true;
    }

    /// Leads: it said it serves the store, and it was not killed.
    pub fn leads(&self) -> bool {
        !self.killed && self.said().contains("canopy serve: store")
    }
}

pub fn password(s: &Store) -> String {
    let Store::Postgres { password, .. } = s else { unreachable!("a PostgreSQL store") };
    password.clone()
}

/// `canopy` against `server`'s address with `token`.
pub fn remote(url: &str, token: &str, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(BIN)
        .arg("--store")
        .arg(home.path())
        .arg("--server")
        .arg(url)
        .args(args)
        .env("CANOPY_TOKEN", token)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A plain HTTP/1.1 GET with a bearer token: the whole response, head
/// and body.
pub fn get(url: &str, token: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    out
}

/// A GET whose answer does not end (an event stream): what arrived until
/// `until` did (or 10 s passed).
pub fn read_until(url: &str, token: &str, path: &str, until: &str) -> String {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    write!(c, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\r\n").unwrap();
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && !String::from_utf8_lossy(&got).contains(until) {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&got).into_owned()
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

/// An operator token made on `server`'s socket (it must lead).
pub fn token(server: &Server) -> String {
    token_as(server, &["--name", "ops", "--role", "operator"])
}

/// A token made on `server`'s socket (it must lead) with `args`
/// (`--name`, `--role`, `--tenant`).
pub fn token_as(server: &Server, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .arg("--store")
        .arg(&server.root)
        .args(["token", "create"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    String::from_utf8(ok(out, "token create")).unwrap().trim().to_string()
}

pub fn spec(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n"
        ),
    )
    .unwrap();
    path
}

pub fn submit(url: &str, token: &str, spec: &Path) -> String {
    let out = ok(remote(url, token, &["submit", spec.to_str().unwrap(), "--json"]), "submit");
    serde_json::from_slice::<Value>(&out).unwrap()["id"].as_str().unwrap().to_string()
}

/// Every workload the server at `url` lists, by id.
pub fn listed(url: &str, token: &str) -> Vec<(String, String)> {
    let out = ok(remote(url, token, &["status", "--json"]), "status");
    let v: Value = serde_json::from_slice(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|w| (w["id"].as_str().unwrap().to_string(), w["name"].as_str().unwrap().to_string()))
        .collect()
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
    /// `config` goes in each one's `canopy.toml` before the journal's
    /// table (as [`Server::start_with`]).
    pub fn start(dir: &Path, s: &Store, config: &str) -> Cluster {
        let mut servers = vec![Server::start_with(dir, "host-a", s, config, TERM_S)];
        servers[0].wait_to_say("canopy serve: store", 1);
        let token = token(&servers[0]);
        for name in ["host-b", "host-c"] {
            let mut x = Server::start_with(dir, name, s, config, TERM_S);
            x.wait_to_say("canopy serve: standing by", 1);
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

/// Attempt directories under a home, by name (one per attempt its local
/// provider launched): the provider's own count.
pub fn launched(root: &Path) -> Vec<String> {
    std::fs::read_dir(root.join("attempts"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}
