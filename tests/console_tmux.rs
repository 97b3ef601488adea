//! End to end: the real binary in tmux on the demo fleet (the console,
//! and `canopy sim --watch`). Waits for screen content, never for fixed
//! times. Skipped (with a visible line) when tmux is not installed.

use std::process::Command;
use std::time::{Duration, Instant};

struct Session {
    name: String,
}

impl Session {
    /// Runs `cmd` in a detached 100×30 tmux session; `None` (with a visible
    /// line) when tmux is not installed.
    fn start(prefix: &str, cmd: &str) -> Option<Self> {
        if Command::new("tmux").arg("-V").output().is_err() {
            eprintln!("SKIPPED console_tmux: tmux is not installed");
            return None;
        }
        let name = format!("{prefix}-{}", std::process::id());
        let out = Command::new("tmux")
            .args(["new-session", "-d", "-s", &name, "-x", "100", "-y", "30", cmd])
            .output()
            .unwrap();
        assert!(out.status.success());
        Some(Session { name })
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", &self.name])
    }
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.name];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }
    fn text(&self, s: &str) {
        self.tmux(&["send-keys", "-t", &self.name, "-l", s]);
    }
    fn wait_for(&self, what: &str) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if s.contains(what) {
                return s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for {what:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["kill-session", "-t", &self.name]).output();
    }
}

#[test]
fn the_console_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let fail = home.path().join("fail.toml");
    std::fs::write(
        &fail,
        "name = \"breaks\"\n[runtime]\ncommand = [\"sh\", \"-c\", \"echo 'ValueError: bad config' >&2; exit 3\"]\n[resources]\ngpus = 0\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_canopy");
    let cmd = format!(
        "CANOPY_HOME={} {bin} --no-faults --color=none; echo CONSOLE-EXITED-$?; sleep 60",
        home.path().display()
    );
    let Some(s) = Session::start("canopy-e2e", &cmd) else { return };

    s.wait_for("broken first");
    s.keys(&["2"]);
    s.wait_for("onprem-fra/h100-nvl");

    // The editor: a mistake at its line:col, then the fix and the preview.
    s.keys(&["6"]);
    s.wait_for("placement preview");
    s.text("oops ");
    s.wait_for("error 1:6");
    for _ in 0..5 {
        s.keys(&["BSpace"]);
    }
    s.wait_for("placement preview");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-1");
    s.keys(&["Escape"]);
    s.keys(&["4"]);
    s.wait_for("succeeded");
    s.keys(&["l"]);
    s.wait_for("hello from canopy");
    s.keys(&["Escape"]);

    // A failing workload shows in triage with its class.
    s.text(&format!(":open {}", fail.display()));
    s.keys(&["Enter"]);
    s.wait_for("breaks");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-2");
    s.keys(&["Escape"]);
    s.keys(&["5"]);
    s.wait_for("ValueError: bad config");
    assert!(s.screen().contains("app"));

    // Resize survives; quit restores the terminal.
    s.tmux(&["resize-window", "-t", &s.name, "-x", "60", "-y", "15"]);
    s.wait_for("faults");
    s.keys(&["q"]);
    let after = s.wait_for("CONSOLE-EXITED-0");
    assert!(!after.contains("broken first"), "the alternate screen is gone:\n{after}");
}

#[test]
fn sim_watch_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tiny.csv");
    std::fs::write(
        &trace,
        "submit_s,duration_s,gpus,name,outcome\n0,600,1,warmup,ok\n60,1800,2,train-a,ok\n300,1200,1,bad-config,failed\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_canopy");
    let cmd = format!(
        "{bin} --color=none sim --watch --speed 100000 --trace {}; echo WATCH-EXITED-$?; sleep 60",
        trace.display()
    );
    let Some(s) = Session::start("canopy-watch", &cmd) else { return };

    s.wait_for("REPLAY");
    s.wait_for("REPLAY done");
    s.keys(&["4"]);
    let screen = s.wait_for("train-a");
    assert!(screen.contains("succeeded") && screen.contains("failed"), "{screen}");
    // Read-only: cancel is refused where it is asked for.
    s.keys(&["C-k"]);
    s.wait_for("a replay is read-only");
    s.keys(&["q"]);
    // The console goes; the replayed policy's report follows.
    let after = s.wait_for("WATCH-EXITED-0");
    assert!(after.contains("| canopy |"), "{after}");
    assert!(!after.contains("REPLAY"), "the alternate screen is gone:\n{after}");
}
