//! The systemd unit Canopy ships (`dist/systemd/canopy.service`), as an
//! operator installing it would check it: `systemd-analyze verify` accepts
//! it, `systemd-analyze security` rates it no worse than docs/api.md says,
//! and docs/api.md shows it verbatim. And the mechanism its
//! `KillMode=process` relies on: a local workload's supervisor is in a
//! session and process group of its own, so a stop signal to the engine's
//! process group leaves the workload running. And `Type=notify`: the
//! readiness message arrives once the API answers.

mod reap_support;

use reap_support::Reaper;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const UNIT: &str = include_str!("../dist/systemd/canopy.service");
/// The exposure docs/api.md states for the unit.
const EXPOSURE: f64 = 4.1;

/// `systemd-analyze`, when it is here and can analyze a unit file offline.
fn analyze() -> Option<&'static str> {
    let ok = Command::new("systemd-analyze").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: systemd-analyze is not installed (Debian: apt-get install systemd)");
    }
    ok.then_some("systemd-analyze")
}

#[test]
fn the_shipped_unit_verifies_its_exposure_is_what_the_docs_say_and_the_docs_show_it() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md")).unwrap();
    assert!(docs.contains(UNIT), "docs/api.md does not show dist/systemd/canopy.service verbatim");
    assert!(docs.contains(&format!("rates the unit\n{EXPOSURE}")), "docs/api.md states another exposure");
    let Some(tool) = analyze() else { return };
    // The unit as installed, running this build's binary.
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("canopy.service");
    std::fs::write(&unit, UNIT.replace("/usr/local/bin/canopy", BIN)).unwrap();
    let out = Command::new(tool).arg("verify").arg(&unit).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "systemd-analyze verify: {said}");
    let out = Command::new(tool).args(["security", "--offline=true"]).arg(&unit).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let level: f64 = text
        .lines()
        .find_map(|l| l.split("Overall exposure level for canopy.service: ").nth(1))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in: {text}"));
    assert!(level <= EXPOSURE, "exposure {level} is above the {EXPOSURE} docs/api.md states");
}

/// PIDs of live processes whose command line names `dir` and contains
/// `word`.
fn processes(dir: &Path, word: &str) -> Vec<i32> {
    let dir = dir.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&dir) && cmd.contains(word) {
            out.push(pid);
        }
    }
    out
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn alive(pid: i32) -> bool {
    // A zombie has no command line left to read.
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| !c.is_empty())
}

#[test]
fn a_stop_signal_to_the_engines_process_group_leaves_local_workloads_running() {
    let tmp = tempfile::tempdir().unwrap();
    let reaper = Reaper::new(tmp.path());
    let store: PathBuf = tmp.path().join("store");
    let spec = tmp.path().join("sleeper.toml");
    std::fs::write(
        &spec,
        "name = \"sleeper\"\n[runtime]\ncommand = [\"sleep\", \"300\"]\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    // The engine leads its own process group, as systemd starts a service.
    let mut engine = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let cli = |args: &[&str]| Command::new(BIN).arg("--store").arg(&store).args(args).output().unwrap();
    wait_for("the engine to answer", || cli(&["status"]).status.success());
    let out = cli(&["submit", spec.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Running: its supervisor has left the engine's session (setsid).
    wait_for("the workload to run", || {
        String::from_utf8_lossy(&cli(&["status", &id]).stdout).contains("running")
    });
    let sup = processes(&store, "__supervise")[0];
    let engine_pgid = engine.id() as i32;
    // SAFETY: getpgid/getsid read another process's ids; no memory effects.
    let (pgid, sid) = unsafe { (libc::getpgid(sup), libc::getsid(sup)) };
    assert_ne!(pgid, engine_pgid, "the supervisor is in the engine's process group");
    // SAFETY: as above, for this process's own session.
    assert_ne!(sid, unsafe { libc::getsid(engine_pgid) }, "the supervisor is in the engine's session");

    // What a group-wide stop does: SIGTERM to the engine's whole group.
    // SAFETY: kill(2) with a negative pid signals the engine's group only.
    unsafe { libc::kill(-engine_pgid, libc::SIGTERM) };
    let status = engine.wait().unwrap();
    assert!(status.success(), "the engine exited with {status} after SIGTERM");
    std::thread::sleep(Duration::from_millis(500));
    assert!(alive(sup), "the workload's supervisor died with the engine's process group");

    // The next start re-adopts it; cancelling ends it (nothing leaks).
    let mut engine = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the engine to answer again", || cli(&["status"]).status.success());
    let status = String::from_utf8_lossy(&cli(&["status", &id]).stdout).into_owned();
    assert!(status.contains("running"), "{status}");
    assert!(cli(&["cancel", &id]).status.success());
    wait_for("the supervisor to end", || !alive(sup));
    // SAFETY: SIGTERM to the engine this test started.
    unsafe { libc::kill(engine.id() as i32, libc::SIGTERM) };
    engine.wait().unwrap();
    drop(reaper);
}

/// `Type=notify`: started the way systemd starts it (a datagram socket in
/// `$NOTIFY_SOCKET`), `canopy serve` says `READY=1` once its API answers,
/// not before, and `STOPPING=1` when it is stopped.
#[test]
fn serve_tells_systemd_it_is_ready_once_its_api_answers_and_when_it_stops() {
    let tmp = tempfile::tempdir().unwrap();
    let reaper = Reaper::new(tmp.path());
    let store: PathBuf = tmp.path().join("store");
    let path = tmp.path().join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut engine = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        .env("NOTIFY_SOCKET", &path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a readiness message within a minute");
    let ready = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(ready.starts_with("READY=1\nSTATUS=serving store "), "{ready}");
    // Ready means answering: the very next request is served.
    let out = Command::new(BIN).arg("--store").arg(&store).arg("status").output().unwrap();
    assert!(out.status.success(), "not answering after READY=1: {}", String::from_utf8_lossy(&out.stderr));
    // SAFETY: SIGTERM to the engine this test started.
    unsafe { libc::kill(engine.id() as i32, libc::SIGTERM) };
    let n = sock.recv(&mut buf).expect("a stopping message");
    assert_eq!(String::from_utf8_lossy(&buf[..n]), "STOPPING=1");
    assert!(engine.wait().unwrap().success());
    drop(reaper);
}

/// Where systemd is PID 1 (and the test runs as root): the shipped unit's
/// settings as a transient unit (`systemd-run`), a local workload started
/// under it, `systemctl restart`, and the workload is still running and
/// re-adopted, not run again. Skipped, saying so, elsewhere (containers,
/// CI runners without systemd).
#[test]
fn restarting_the_unit_leaves_a_local_workload_running() {
    // SAFETY: getuid reads this process's user id.
    let root = unsafe { libc::getuid() } == 0;
    if !Path::new("/run/systemd/system").is_dir() || !root {
        eprintln!(
            "SKIPPED restarting_the_unit_leaves_a_local_workload_running: needs systemd as PID 1 and root"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let reaper = Reaper::new(tmp.path());
    let store: PathBuf = tmp.path().join("store");
    let unit = format!("canopy-test-{}", std::process::id());
    let systemctl = |args: &[&str]| Command::new("systemctl").args(args).output().unwrap();
    let started = Command::new("systemd-run")
        .args(["--unit", &unit, "--property", "Type=notify", "--property", "NotifyAccess=main"])
        .args(["--property", "KillMode=process", "--property", "Restart=on-failure"])
        .arg(BIN)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        .output()
        .unwrap();
    assert!(started.status.success(), "systemd-run: {}", String::from_utf8_lossy(&started.stderr));
    let cli = |args: &[&str]| Command::new(BIN).arg("--store").arg(&store).args(args).output().unwrap();
    let spec = tmp.path().join("sleeper.toml");
    std::fs::write(
        &spec,
        "name = \"sleeper\"\n[runtime]\ncommand = [\"sleep\", \"300\"]\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let out = cli(&["submit", spec.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    wait_for("the workload to run", || {
        String::from_utf8_lossy(&cli(&["status", &id]).stdout).contains("running")
    });
    let sup = processes(&store, "__supervise")[0];
    let restarted = systemctl(&["restart", &unit]);
    assert!(restarted.status.success(), "systemctl restart: {}", String::from_utf8_lossy(&restarted.stderr));
    assert!(alive(sup), "the workload's supervisor died with the unit's restart");
    wait_for("the engine to answer again", || cli(&["status"]).status.success());
    let status = String::from_utf8_lossy(&cli(&["status", &id, "--json"]).stdout).into_owned();
    let v: serde_json::Value = serde_json::from_str(&status).unwrap_or_default();
    assert_eq!(v["workload"]["state"], "running", "{status}");
    assert_eq!(v["attempts"].as_array().map(Vec::len), Some(1), "re-adopted, not run again: {status}");
    assert!(cli(&["cancel", &id]).status.success());
    wait_for("the supervisor to end", || !alive(sup));
    systemctl(&["stop", &unit]);
    drop(reaper);
}
