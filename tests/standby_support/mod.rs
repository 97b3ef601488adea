//! What the tests of several `canopy serve` on one PostgreSQL journal
//! share (`serve_standby`, `serve_standby_reads`): servers on homes of
//! their own, killed (resumed first, if frozen) when dropped; the CLI and
//! plain HTTP against one of them.

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
        let root = dir.join(name);
        std::fs::create_dir_all(&root).unwrap();
        let toml = format!(
            "{config}\n[journal]\nurl = {:?}\npassword_env = {PW_ENV:?}\nlease_term = \"{term_s}s\"\n",
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
        Server { root, child, stderr }
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
