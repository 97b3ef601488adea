//! A console attached to a control plane of three `canopy serve` on one
//! PostgreSQL journal (issue 33), through `CANOPY_SERVER` listing all
//! three: the real binary in tmux keeps showing new workloads after the
//! leader it reads is killed with `kill -9`, and again after the next
//! leader is. Skipped (with a visible line) without tmux or PostgreSQL;
//! waits for screen content, never for fixed times.

mod journal_support;
mod reap_support;
mod standby_support;
mod tmux_support;

use journal_support::Store;
use reap_support::Reaper;
use standby_support::{BIN, Cluster, DEADLINE};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tmux_support::Session;

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
    if !tmux_support::has_tmux("console_failover") {
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
    )
    .expect("tmux was found a moment ago");
    console.wait_for("attached to");
    console.keys(&["4"]);
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
    console.keys(&["q"]);
    console.wait_for("CONSOLE-EXITED-0");
}
