//! End to end: the real binary in tmux on the demo fleet (the console,
//! consoles attached to a running engine, a console's engine handed over
//! to `canopy serve` when its terminal goes, and `canopy sim --watch`).
//! Waits for screen content or process state, never for fixed times.
//! Skipped (with a visible line) when tmux is not installed. Every test
//! reaps what it started: a [`Reaper`] on its directory fails it if a
//! process naming that directory (a console, an engine handed over to
//! `canopy serve`, a workload) outlives its teardown.

mod reap_support;
mod tmux_support;

use reap_support::Reaper;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tmux_support::{Session, WAIT};

/// Polls `f` until it returns `Some`, failing with `what` after [`WAIT`].
fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `canopy --store ROOT serve --no-faults`, stopped (SIGTERM) when dropped.
struct Server {
    child: Child,
    /// What it said when it was ready.
    said: String,
}

impl Server {
    /// Starts it and waits until it says it serves.
    fn start(root: &Path, n: u32) -> Server {
        Server::start_with(root, n, &[])
    }

    fn start_with(root: &Path, n: u32, extra: &[&str]) -> Server {
        let err = root.join(format!("serve-{n}.err"));
        let child = Command::new(env!("CARGO_BIN_EXE_canopy"))
            .arg("--store")
            .arg(root)
            .args(["serve", "--no-faults"])
            .args(extra)
            .env_remove("CANOPY_SERVER")
            .env_remove("CANOPY_HOME")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        let mut s = Server { child, said: String::new() };
        s.said = wait_until("canopy serve to start", || {
            if let Ok(Some(status)) = s.child.try_wait() {
                panic!(
                    "canopy serve exited ({status}): {}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            std::fs::read_to_string(&err).ok().filter(|t| t.contains("canopy serve: store"))
        });
        s
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM, then waits for it to exit.
    fn stop(&mut self) {
        if self.running() {
            terminate(self.child.id());
            let _ = self.child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn terminate(pid: u32) {
    // SAFETY: kill(2) with a pid this test started and SIGTERM.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
}

/// `canopy --store ROOT ARGS…`: (success, stdout + stderr).
fn cli(root: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .arg("--store")
        .arg(root)
        .args(args)
        .env_remove("CANOPY_SERVER")
        .env_remove("CANOPY_HOME")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A spec file `NAME.toml` running `command` on this host.
fn spec(dir: &Path, name: &str, command: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n[runtime]\ncommand = [\"sh\", \"-c\", \"{command}\"]\n[resources]\ngpus = 0\n"
        ),
    )
    .unwrap();
    path
}

/// The console, on the store at `root`, with what it exits with.
fn console_cmd(root: &Path) -> String {
    format!(
        "{} --store {} --no-faults --color=none; echo CONSOLE-EXITED-$?; sleep 60",
        env!("CARGO_BIN_EXE_canopy"),
        root.display()
    )
}

/// The pid the store's lock file names as its owner (the engine's process).
fn owner_pid(root: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(root.join("canopy.db.lock")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("pid="))?.trim().parse().ok()
}

/// The command line of a live process, words joined by spaces.
fn cmdline(pid: u32) -> Option<String> {
    // A zombie's is empty: it has ended.
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok().filter(|r| !r.is_empty())?;
    Some(String::from_utf8_lossy(&raw).replace('\0', " "))
}

#[test]
fn the_console_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
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
    // F8 reaches the app through tmux; ctrl-z takes the typing back (the
    // space, then the word).
    s.keys(&["F8"]);
    s.wait_for("problem 1 of 1 at 1:6");
    s.keys(&["C-z"]);
    s.keys(&["C-z"]);
    s.wait_for("placement preview");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-1");
    s.escape();
    s.keys(&["4"]);
    s.wait_for("succeeded");
    s.keys(&["l"]);
    s.wait_for("hello from canopy");
    s.escape();

    // A failing workload shows in triage with its class.
    s.text(&format!(":open {}", fail.display()));
    s.keys(&["Enter"]);
    s.wait_for("breaks");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-2");
    s.escape();
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
    let _reaper = Reaper::new(dir.path());
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

#[test]
fn consoles_attach_to_a_running_engine_and_ride_out_its_restart() {
    if !tmux_support::has_tmux("console_tmux") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    let mut server = Server::start(root, 1);

    // Two consoles attach: neither starts an engine of its own.
    let one = Session::start("canopy-attach-a", &console_cmd(root)).unwrap();
    let two = Session::start("canopy-attach-b", &console_cmd(root)).unwrap();
    for s in [&one, &two] {
        s.wait_for("attached to");
        s.keys(&["4"]);
        s.wait_for("[4 workloads]");
    }

    // Submitted from the CLI: both consoles show it.
    let (ok, out) = cli(root, &["submit", spec(root, "from-cli", "echo hi").to_str().unwrap()]);
    assert!(ok, "{out}");
    one.wait_for("from-cli");
    two.wait_for("from-cli");

    // Quitting an attached console asks nothing and leaves the engine and
    // the other console as they were.
    one.keys(&["q"]);
    one.wait_for("CONSOLE-EXITED-0");
    assert!(server.running(), "quitting an attached console stopped the engine");
    let (ok, out) = cli(root, &["status"]);
    assert!(ok && out.contains("from-cli"), "{out}");
    assert!(!two.screen().contains("disconnected"));

    // The engine goes away: the console says so, in words.
    server.stop();
    let screen = two.wait_for("disconnected");
    assert!(screen.contains("reconnecting (since "), "{screen}");
    assert!(screen.contains("from-cli"), "the data stays on screen:\n{screen}");

    // It comes back: the console reconnects by itself and follows again.
    let _server = Server::start(root, 2);
    two.wait_gone("disconnected");
    let (ok, out) = cli(root, &["submit", spec(root, "after-restart", "echo again").to_str().unwrap()]);
    assert!(ok, "{out}");
    let screen = two.wait_for("after-restart");
    assert!(screen.contains("from-cli"), "{screen}");
    two.keys(&["q"]);
    two.wait_for("CONSOLE-EXITED-0");
}

/// Cancels the workload and stops the background engine, however the test
/// ends. Made before the console's session, so dropped after it: a test
/// that fails before the handover finished still waits for the console to
/// finish it (a hung-up console hands over in its own time), then stops
/// the engine that took over, instead of stopping nothing and leaving a
/// `canopy serve` behind.
struct Handed<'a> {
    root: &'a Path,
}

impl Drop for Handed<'_> {
    fn drop(&mut self) {
        let root = self.root.display().to_string();
        let console =
            |pid: &u32| cmdline(*pid).is_some_and(|c| c.contains("--color=none") && c.contains(&root));
        let start = Instant::now();
        while start.elapsed() < WAIT && pids().iter().any(console) {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = cli(self.root, &["cancel", "w-1"]);
        if let Some(pid) = owner_pid(self.root)
            && cmdline(pid).is_some_and(|c| c.contains(" serve") && c.contains(&root))
        {
            terminate(pid);
            let start = Instant::now();
            while start.elapsed() < WAIT && cmdline(pid).is_some() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Every process id in /proc.
fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

#[test]
fn a_console_that_loses_its_terminal_hands_its_engine_over() {
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    if !tmux_support::has_tmux("console_tmux") {
        return;
    }
    let _cleanup = Handed { root };
    let s = Session::start("canopy-hangup", &console_cmd(root)).unwrap();
    s.wait_for("broken first");
    let console = owner_pid(root).expect("the console's engine owns the store");

    // Work that outlives the console, submitted through the console's own
    // engine (which serves the store's socket).
    let (ok, out) = cli(root, &["submit", spec(root, "long-one", "sleep 60").to_str().unwrap()]);
    assert!(ok, "{out}");
    s.keys(&["4"]);
    s.wait_for("long-one");
    s.wait_for("▶ running");

    // The terminal goes (tmux sends SIGHUP): no question asked, a
    // background `canopy serve` takes the engine over.
    drop(s);
    let serve = wait_until("a background `canopy serve` to own the store", || {
        owner_pid(root).filter(|pid| *pid != console && cmdline(*pid).is_some_and(|c| c.contains(" serve")))
    });
    let out = wait_until("`canopy status` from the new engine", || {
        let (ok, out) = cli(root, &["status"]);
        (ok && out.contains("long-one")).then_some(out)
    });
    let row = out.lines().find(|l| l.contains("long-one")).unwrap();
    assert!(row.contains("running") || row.contains("succeeded"), "{out}");
    wait_until("the console to exit", || {
        cmdline(console).is_none_or(|c| !c.contains("--color=none")).then_some(())
    });
    let log = std::fs::read_to_string(root.join("canopy.log")).unwrap();
    assert!(log.contains("handing the engine over"), "{log}");

    // A new console attaches to it and shows the work.
    let again = Session::start("canopy-hangup-again", &console_cmd(root)).unwrap();
    again.wait_for("attached to");
    again.keys(&["4"]);
    again.wait_for("long-one");
    again.wait_for("▶ running");
    assert_eq!(owner_pid(root), Some(serve));
}

#[test]
fn a_console_with_a_viewer_token_is_read_only_by_itself() {
    if !tmux_support::has_tmux("console_tmux") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    let server = Server::start_with(root, 1, &["--listen", "127.0.0.1:0"]);
    let url = server
        .said
        .split([',', ' ', ';'])
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no TCP address in {:?}", server.said))
        .trim_end_matches('.')
        .to_string();
    let (ok, token) = cli(root, &["token", "create", "--name", "watcher", "--role", "viewer"]);
    assert!(ok, "{token}");
    let token = token.lines().next().unwrap().trim().to_string();
    let (ok, out) = cli(root, &["submit", spec(root, "watched", "echo hi").to_str().unwrap()]);
    assert!(ok, "{out}");

    // No --read-only: the token's role decides.
    let cmd = format!(
        "CANOPY_TOKEN={token} {} --server {url} --color=none; echo CONSOLE-EXITED-$?; sleep 60",
        env!("CARGO_BIN_EXE_canopy")
    );
    let s = Session::start("canopy-viewer", &cmd).unwrap();
    let screen = s.wait_for("attached to");
    assert!(screen.contains(&format!("attached to {url} as watcher (viewer); read-only")), "{screen}");
    assert!(screen.lines().next().unwrap().contains("READ-ONLY"), "{screen}");
    s.keys(&["4"]);
    s.wait_for("watched");
    s.keys(&["C-k"]);
    s.wait_for("read-only: cancel w-1 is disabled");
    s.keys(&["q"]);
    s.wait_for("CONSOLE-EXITED-0");
}

/// The 3 a.m. path, on the real binary: a node starts failing workloads
/// → the overview shows it → into triage → the evidence line in the logs
/// → the node cordoned with a reason → the console restarted → the
/// cordon, its reason and the node's fault history are still there, and
/// the node takes no new work. Keys from the overview to the cordon: 5,
/// l, Esc, c, the reason, Enter.
#[test]
fn the_3am_path_survives_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    let xid = root.join("xid.toml");
    std::fs::write(
        &xid,
        "name = \"xid\"\n[runtime]\ncommand = [\"sh\", \"-c\", \
         \"echo 'NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.' >&2; exit 1\"]\n\
         [resources]\ngpus = 0\ncpu_cores = 0.1\nmemory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n\
         [retry]\nmax_attempts = 1\n",
    )
    .unwrap();
    let Some(s) = Session::start("canopy-3am", &console_cmd(root)) else { return };
    s.wait_for("broken first");
    for _ in 0..2 {
        let (ok, out) = cli(root, &["submit", xid.to_str().unwrap()]);
        assert!(ok, "{out}");
    }
    // The overview says two failed, and the node they failed on stands out.
    s.wait_for("2 workloads failed");
    s.keys(&["5"]);
    let triage = s.wait_for("node:2");
    assert!(triage.contains("fallen off the bus"), "{triage}");
    s.keys(&["l"]);
    s.wait_for("Xid (PCI:0000:3b:00): 79");
    s.escape();
    s.wait_for("by node");
    s.keys(&["c"]);
    s.wait_for("— why?");
    s.text("xid 79 on gpu 3, RMA ticket 4411");
    s.keys(&["Enter"]);
    let (_, fleet) = wait_until("the cordon to be recorded", || {
        let (ok, out) = cli(root, &["fleet"]);
        (ok && out.contains("RMA ticket 4411")).then_some((ok, out))
    });
    let node = fleet
        .lines()
        .find(|l| l.contains("RMA ticket 4411"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("which node? {fleet}"))
        .to_string();
    // The two wait to run elsewhere (a node fault is not theirs): quit
    // asks whether to keep the engine; no, it stops with the console.
    s.keys(&["q"]);
    s.wait_for("keep the engine running");
    s.keys(&["n"]);
    s.wait_for("CONSOLE-EXITED-0");
    drop(s);

    // The next console finds all of it.
    let Some(s) = Session::start("canopy-3am-again", &console_cmd(root)) else { return };
    s.wait_for("broken first");
    s.keys(&["5"]);
    s.wait_for("node:2");
    s.keys(&["3", "/"]);
    s.text(&node);
    s.keys(&["Enter"]);
    s.wait_for("RMA ticket 4411");
    let job = root.join("after.toml");
    std::fs::write(
        &job,
        "name = \"after\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = 0\ncpu_cores = 0.1\n\
         memory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let (ok, out) = cli(root, &["submit", job.to_str().unwrap()]);
    assert!(ok, "{out}");
    let status = wait_until("the new work to be judged", || {
        let (ok, out) = cli(root, &["status", "w-3"]);
        (ok && out.contains("cordoned")).then_some(out)
    });
    assert!(status.contains("queued"), "the cordoned node took new work: {status}");
    // w-3 waits for a node: quitting asks about the engine; it stops with
    // the console (closing the terminal instead would hand it over to a
    // background `canopy serve` that outlives the test).
    s.keys(&["q"]);
    s.wait_for("keep the engine running");
    s.keys(&["n"]);
    s.wait_for("CONSOLE-EXITED-0");
}

/// The on-call extras on the real binary (#23 item 11): a failure
/// retried from the console says "retried as" on the original; an
/// earlier attempt's logs open by id; the spec view's copy is edited and
/// submitted as a new workload; the events view shows the retry; and one
/// bulk acknowledgement with one reason empties triage.
#[test]
fn the_on_call_extras_end_to_end() {
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    let fail = root.join("fail.toml");
    std::fs::write(
        &fail,
        "name = \"breaks\"\n[runtime]\ncommand = [\"sh\", \"-c\", \"echo 'ValueError: bad config' >&2; exit 3\"]\n\
         [resources]\ngpus = 0\ncpu_cores = 0.1\nmemory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let Some(s) = Session::start("canopy-oncall", &console_cmd(root)) else { return };
    s.wait_for("broken first");
    s.text(&format!(":open {}", fail.display()));
    s.keys(&["Enter"]);
    s.wait_for("breaks");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-1");
    s.escape();
    s.keys(&["5"]);
    s.wait_for("ValueError: bad config");

    // Retry it; the original says what retried it.
    s.text(":retry w-1");
    s.keys(&["Enter"]);
    s.wait_for("retry w-1? y/n");
    s.keys(&["y"]);
    s.wait_for("submitted as w-2");
    s.text(":describe w-1");
    s.keys(&["Enter"]);
    s.wait_for("retried as w-2");
    s.text(":logs w-1.1");
    s.keys(&["Enter"]);
    s.wait_for("logs w-1.1");
    s.wait_for("ValueError: bad config");
    s.escape();

    // The retry's spec, a copy edited and submitted as a new workload.
    s.text(":describe w-2");
    s.keys(&["Enter"]);
    s.wait_for("retry of w-1");
    s.keys(&["v"]);
    s.wait_for("spec w-2 (as submitted)");
    s.keys(&["e"]);
    s.wait_for("editing a copy of w-2's spec");
    s.keys(&["C-s"]);
    s.wait_for("submitted as w-3");
    s.escape();

    // The events view has the retry.
    s.text(":events");
    s.keys(&["Enter"]);
    s.wait_for("retried as w-2");

    // w-2 and w-3 fail too: one question, one reason, both acknowledged.
    s.keys(&["5"]);
    wait_until("w-2 and w-3 to fail", || {
        let (_, out) = cli(root, &["status", "--unresolved"]);
        (out.contains("w-2") && out.contains("w-3")).then_some(())
    });
    s.keys(&["A"]);
    s.wait_for("acknowledge 2 unresolved failures");
    s.text("known bad config");
    s.keys(&["Enter"]);
    wait_until("both acknowledged", || {
        let (_, out) = cli(root, &["status", "--unresolved"]);
        (!out.contains("w-2") && !out.contains("w-3")).then_some(())
    });
    let (_, out) = cli(root, &["status", "w-3"]);
    assert!(out.contains("acknowledged by") && out.contains("known bad config"), "{out}");
    s.keys(&["q"]);
    s.keys(&["n"]);
    s.wait_for("CONSOLE-EXITED-0");
}

/// Tenants made by an admin over the API (`canopy tenants apply`), seen
/// in a console attached to `canopy serve`: the tenants view, the change
/// of tables shown at once, and the TENANT column in workloads.
#[test]
fn the_tenants_view_end_to_end() {
    if !tmux_support::has_tmux("console_tmux") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(home.path());
    let root = home.path();
    let _server = Server::start(root, 1);
    let tables = |extra: &str| {
        let path = root.join("tenants.toml");
        let text = format!(
            "default_tenant = \"team-a\"\n[[flavor]]\nname = \"any\"\n\
             [[tenant]]\nname = \"team-a\"\ncohort = \"lab\"\n[tenant.quota.any]\ngpus = 8\n\
             [[tenant]]\nname = \"team-b\"\ncohort = \"lab\"\n[tenant.quota.any]\ngpus = 4\n{extra}"
        );
        std::fs::write(&path, text).unwrap();
        let (ok, out) = cli(root, &["tenants", "apply", path.to_str().unwrap()]);
        assert!(ok, "{out}");
    };
    tables("");
    let job = spec(root, "b-job", "sleep 30");
    let (ok, out) = cli(root, &["submit", "--tenant", "team-b", job.to_str().unwrap()]);
    assert!(ok, "{out}");

    let s = Session::start("canopy-tenants", &console_cmd(root)).unwrap();
    s.wait_for("attached to");
    // Tenants are configured: the tab shows.
    s.wait_for("8 tenants");
    s.keys(&["8"]);
    s.wait_for("RECLAIMS");
    // The selected row's detail follows the table (a moment later on a
    // loaded machine): team-a, the default tenant, is selected.
    let screen = s.wait_for("(the default tenant)");
    assert!(screen.contains("team-a") && screen.contains("team-b"), "{screen}");

    // Past the view's first periodic refresh (5 s), whose request a tick
    // once asked for and then dropped, leaving every later load waiting on
    // it: the view froze.
    std::thread::sleep(Duration::from_secs(6));
    // An admin adds a tenant: the view shows it without a key.
    tables("[[tenant]]\nname = \"team-c\"\n[tenant.quota.any]\ngpus = 2\n");
    s.wait_for("team-c");

    // The workloads table has a TENANT column, and tenant: filters it.
    s.keys(&["4"]);
    s.wait_for("[4 workloads]");
    let screen = s.wait_for("b-job");
    assert!(screen.contains(" TENANT "), "{screen}");
    let row = screen.lines().find(|l| l.contains("b-job")).unwrap_or_else(|| panic!("{screen}"));
    assert!(row.contains("team-b"), "{screen}");
    s.keys(&["/"]);
    s.text("tenant:team-a");
    s.keys(&["Enter"]);
    s.wait_gone("b-job");
    s.keys(&["q"]);
    s.wait_for("CONSOLE-EXITED-0");
    // The engine's stop leaves work running at its provider (by design):
    // the test ends its own.
    let (ok, out) = cli(root, &["cancel", "w-1"]);
    assert!(ok, "{out}");
    wait_until("b-job to end", || {
        let (_, out) = cli(root, &["status", "w-1"]);
        out.contains("cancelled").then_some(())
    });
}
