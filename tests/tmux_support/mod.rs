//! The real console in a detached tmux session, driven as a person would:
//! keys in, the screen read back. Shared by the tests that run the binary
//! in a terminal (`console_tmux.rs`, `console_failover.rs`).

#![allow(dead_code)]

use std::process::Command;
use std::time::{Duration, Instant};

/// How long any one wait for the screen may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// Whether tmux is installed; when it is not, says so on a visible line
/// naming `test` (the test then skips).
pub fn has_tmux(test: &str) -> bool {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("SKIPPED {test}: tmux is not installed");
        return false;
    }
    true
}

/// A detached 100×30 tmux session running one command; killed when
/// dropped.
pub struct Session {
    pub name: String,
}

impl Session {
    /// Runs `cmd` in a detached 100×30 tmux session named after `prefix`
    /// and this process. `None` (with a visible line naming `prefix`) when
    /// tmux is not installed.
    pub fn start(prefix: &str, cmd: &str) -> Option<Self> {
        if !has_tmux(prefix) {
            return None;
        }
        let name = format!("{prefix}-{}", std::process::id());
        // Tests start sessions in parallel; when no tmux server runs yet,
        // each races to start one and all but one may fail ("server exited
        // unexpectedly"). A second try joins the server that won.
        let mut last = String::new();
        for _ in 0..10 {
            let out = Command::new("tmux")
                .args(["new-session", "-d", "-s", &name, "-x", "100", "-y", "30", cmd])
                .output()
                .unwrap();
            if out.status.success() {
                return Some(Session { name });
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!("tmux cannot start session {name}: {last}");
    }

    /// Runs `tmux ARGS`; returns what it printed.
    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows now.
    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }

    /// Sends keys by their tmux names ("Enter", "Escape", "q").
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types `s` literally.
    pub fn text(&self, s: &str) {
        self.tmux(&["send-keys", "-t", &self.name, "-l", s]);
    }

    /// Waits until `what` is on the screen; returns the screen.
    pub fn wait_for(&self, what: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(start.elapsed() < WAIT, "timed out waiting for {what:?}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Escape, and waits until the console has redrawn for it. A key sent
    /// right after could otherwise reach the console in the same read as
    /// the escape byte, and a terminal reads ESC then `:` as Alt-`:` (CI
    /// once typed ":events" into the editor that way).
    pub fn escape(&self) {
        let before = self.screen();
        self.keys(&["Escape"]);
        let start = Instant::now();
        while self.screen() == before {
            assert!(start.elapsed() < WAIT, "Escape changed nothing on the screen:\n{before}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `what` is off the screen; returns the screen.
    pub fn wait_gone(&self, what: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if !s.contains(what) {
                return s;
            }
            assert!(start.elapsed() < WAIT, "timed out waiting for {what:?} to go; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    /// Kills the session (its panes get SIGHUP) and makes sure it is gone:
    /// a busy tmux server may answer a kill late or not at all.
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
