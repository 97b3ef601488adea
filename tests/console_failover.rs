//! A console attached to a control plane of three `canopy serve` on one
//! PostgreSQL journal (issue 33), through `CANOPY_SERVER` listing all
//! three: the real binary in tmux keeps showing new workloads after the
//! leader it reads is killed with `kill -9`, and again after the next
//! leader is. Skipped (with a visible line) without tmux or PostgreSQL;
//! waits for screen content, never for fixed times.

mod journal_support;
mod reap_support;
mod standby_support;

use journal_support::Store;
use reap_support::Reaper;
use standby_support::{BIN, Cluster, DEADLINE};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn has_tmux() -> bool {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("SKIPPED console_failover: tmux is not installed");
        return false;
    }
    true
}

/// A detached 100×30 tmux session running one command; killed when
/// dropped.
struct Session {
    name: String,
}

impl Session {
    fn start(prefix: &str, cmd: &str) -> Session {
        let name = format!("{prefix}-{}", std::process::id());
        // With no tmux server running yet, parallel tests race to start
        // one; a second try joins the one that won.
        let mut last = String::new();
        for _ in 0..10 {
            let out = Command::new("tmux")
                .args(["new-session", "-d", "-s", &name, "-x", "100", "-y", "30", cmd])
                .output()
                .unwrap();
            if out.status.success() {
                return Session { name };
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("tmux cannot start session {name}: {last}");
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux").args(["capture-pane", "-p", "-t", &self.name]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn keys(&self, keys: &str) {
        Command::new("tmux").args(["send-keys", "-t", &self.name, keys]).output().unwrap();
    }

    fn wait_for(&self, what: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what:?}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        for _ in 0..50 {
            let _ = Command::new("tmux").args(["kill-session", "-t", &self.name]).output();
            let alive = Command::new("tmux").args(["has-session", "-t", &self.name]).output();
            if !alive.is_ok_and(|o| o.status.success()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A spec file for quick work named `name`.
fn spec(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!("name = \"{name}\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n"),
    )
    .unwrap();
    path
}

#[test]
fn an_attached_console_follows_the_leader_across_two_kill_9s() {
    if !has_tmux() {
        return;
    }
    let Some(s) = Store::postgres("console_failover") else { return };
    let dir = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(dir.path());
    let mut c = Cluster::start(dir.path(), &s, "");
    let console = Session::start(
        "canopy-failover",
        &format!(
            "env CANOPY_SERVER={} CANOPY_TOKEN={} {BIN} --store {} --color=none; echo CONSOLE-EXITED-$?; sleep 60",
            c.all,
            c.token,
            dir.path().join("console").display()
        ),
    );
    console.wait_for("attached to");
    console.keys("4");
    assert!(c.submit(&spec(dir.path(), "before-any-kill")).is_some());
    console.wait_for("before-any-kill");

    for n in 1..=2 {
        c.kill_leader();
        let name = format!("after-kill-{n}");
        assert!(c.submit(&spec(dir.path(), &name)).is_some(), "a submit through all three after kill {n}");
        let screen = console.wait_for(&name);
        assert!(screen.contains("before-any-kill"), "what it showed stays:\n{screen}");
    }
    // It reads the new leader, so it no longer says it is disconnected.
    let deadline = Instant::now() + DEADLINE;
    while console.screen().contains("disconnected") {
        assert!(Instant::now() < deadline, "still disconnected:\n{}", console.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
    console.keys("q");
    console.wait_for("CONSOLE-EXITED-0");
}
