//! The engine end to end with real processes, through the real `canopy`
//! binary: `canopy engine --no-faults` runs as a child process over a
//! temporary store, and the tests drive it the way an operator would, with
//! `canopy submit`, `status`, `logs`, `artifacts` and `cancel`. Workloads
//! are pinned to the local provider, so their commands really run here.
//!
//! Every wait is a bounded poll for a condition; nothing is timed.

use canopy::engine::model::{AttemptState, WorkloadId, WorkloadState};
use sha2::{Digest, Sha256};
mod local_support;
mod reap_support;

use local_support::{BIN, Cli, Engine, live_fleet, wait_for};
use reap_support::Reaper;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Writes a spec pinned to the local provider that runs `script` with `sh -c`.
fn spec(dir: &Path, name: &str, script: &str, extra: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = {name:?}\n{extra}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

struct Setup {
    /// Dropped first: fails the test if anything it started outlives it.
    _reaper: Reaper,
    _tmp: tempfile::TempDir,
    store: PathBuf,
    scratch: PathBuf,
    specs: PathBuf,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (store, scratch, specs) =
        (tmp.path().join("home"), tmp.path().join("scratch"), tmp.path().join("specs"));
    for d in [&scratch, &specs] {
        std::fs::create_dir_all(d).unwrap();
    }
    Setup { _reaper: Reaper::new(tmp.path()), store, scratch, specs, _tmp: tmp }
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            files_under(&p, out);
        } else if p.is_file() {
            out.push(p);
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn logs_come_back_outputs_are_collected_and_secrets_never_leak() {
    let s = setup();
    let secret = format!("hf_canopy_test_{}_{}", std::process::id(), hex_sha256(b"not a real token"));
    let engine = Engine::start(&s.store, &s.scratch, &[("HF_TOKEN", &secret)]);
    let cli = Cli::new(&s.store);

    let script = r#"echo "hello from stdout"; echo "hello from stderr" >&2
printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1 > "$CANOPY_OUTPUT_DIR/outputs/token.sha"
printf 'weights' > "$CANOPY_OUTPUT_DIR/outputs/model.bin""#;
    let extra = "[[outputs]]\nname = \"token\"\npath = \"/outputs/token.sha\"\nrequired = true\n\n\
                 [[outputs]]\nname = \"model\"\npath = \"/outputs/model.bin\"\nrequired = true\n";
    let path = spec(&s.specs, "with-secret", script, extra);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, text.replace("[resources]", "secrets = [\"HF_TOKEN\"]\n\n[resources]")).unwrap();

    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].provider, "local");

    // Logs, both streams, through the CLI.
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("hello from stdout"), "{logs}");
    assert!(logs.contains("hello from stderr"), "{logs}");
    let stderr_only = cli.ok(&["logs", &id.to_string(), "--stream", "stderr"]);
    assert!(stderr_only.contains("hello from stderr") && !stderr_only.contains("hello from stdout"));

    // Outputs, with checksums that match what landed in the artifact store.
    let arts: serde_json::Value =
        serde_json::from_str(&cli.ok(&["artifacts", &id.to_string(), "--json"])).unwrap();
    let arts = arts.as_array().unwrap();
    assert_eq!(arts.len(), 2, "{arts:?}");
    for art in arts {
        assert_eq!(art["attempt"], 1);
        let file = PathBuf::from(art["path"].as_str().unwrap());
        let bytes = std::fs::read(&file).unwrap();
        assert!(file.starts_with(s.store.join("artifacts")), "{file:?}");
        assert_eq!(art["bytes"].as_u64().unwrap(), bytes.len() as u64);
        assert_eq!(art["sha256"].as_str().unwrap(), hex_sha256(&bytes));
        match art["name"].as_str().unwrap() {
            "model" => assert_eq!(bytes, b"weights"),
            // The workload saw the secret: it hashed the right value.
            "token" => assert_eq!(String::from_utf8(bytes).unwrap().trim(), hex_sha256(secret.as_bytes())),
            other => panic!("unexpected output {other}"),
        }
    }
    let table = cli.ok(&["artifacts", &id.to_string()]);
    assert!(table.contains("token") && table.contains("model"), "{table}");

    // The secret's value appears nowhere: not in the store (SQLite files
    // included), the logs, the artifacts, the engine's own output, or
    // anything the CLI printed.
    cli.ok(&["events", &id.to_string()]);
    cli.ok(&["status"]);
    engine.stop();
    let mut files = Vec::new();
    files_under(&s.store, &mut files);
    files_under(&s.scratch, &mut files);
    assert!(files.iter().any(|f| f.ends_with("canopy.db")), "{files:?}");
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        assert!(!contains(&bytes, secret.as_bytes()), "the secret leaked into {}", f.display());
    }
    assert!(!contains(&cli.outputs.borrow(), secret.as_bytes()), "the secret leaked into CLI output");
}

#[test]
fn cancel_ends_the_workload_and_its_process() {
    let s = setup();
    let _engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let pid_file = s.scratch.join("sleeper.pid");
    let script = format!("echo $$ > {}.tmp && mv {0}.tmp {0}; exec sleep 600", pid_file.display());
    let id = cli.submit(&spec(&s.specs, "sleeper", &script, ""));
    wait_for("the workload to write its pid", || pid_file.exists());
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    assert!(std::fs::read(proc_dir.join("cmdline")).map(|c| contains(&c, b"sleep")).unwrap_or(false));
    cli.wait_state(id, |s| s == WorkloadState::Running);

    let out = cli.ok(&["cancel", &id.to_string()]);
    assert!(out.contains(&id.to_string()), "{out}");
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Cancelled, "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 1, "a cancelled workload is not retried");
    assert_eq!(attempts[0].state, AttemptState::Cancelled);
    // The process is gone (or at most a zombie nobody runs anymore).
    wait_for("the cancelled process to be gone", || match std::fs::read_to_string(proc_dir.join("stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z')),
    });
    let again = cli.run(&["cancel", &id.to_string()]);
    assert!(!again.status.success(), "cancelling a final workload is an error");
}

#[test]
fn a_running_workload_survives_an_engine_restart_and_runs_once() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let marker = s.scratch.join("started");
    let script = format!("echo started >> {}; sleep 3; echo done", marker.display());
    let id = cli.submit(&spec(&s.specs, "survivor", &script, ""));
    cli.wait_state(id, |s| s == WorkloadState::Running);
    let first = engine.pid();
    engine.stop();
    // With no engine the CLI says so (exit 4) rather than guess; the store
    // still holds the workload as live.
    let out = cli.run(&["status", &id.to_string()]);
    assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no engine owns the store"));
    let w =
        canopy::journal::Journal::open(&s.store.join("canopy.db")).unwrap().workload(id).unwrap().unwrap();
    assert!(!w.state.is_final(), "{w:?}");

    let engine = Engine::start(&s.store, &s.scratch, &[]);
    assert_ne!(engine.pid(), first);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 1, "re-adopted, not relaunched: {attempts:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "started\n", "the command ran exactly once");
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert_eq!(logs.matches("done").count(), 1, "{logs}");
    engine.stop();
}

fn node_state(fleet: &serde_json::Value, name: &str) -> String {
    let node = fleet["fleet"]["nodes"].as_array().unwrap().iter().find(|n| n["name"] == name).unwrap();
    node["state"].as_str().unwrap().to_string()
}

#[test]
fn an_operators_cordon_outlives_the_engine_with_who_and_why() {
    const NODE: &str = "fra-h100-01";
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let said = cli.ok(&["cordon", NODE, "--reason", "fan noise, ticket OPS-12", "--until", "2h"]);
    assert!(said.contains("cordoned"), "{said}");
    engine.stop();

    // A new engine: the cordon, who set it and why are still there.
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let fleet = live_fleet(&s.store);
    assert_eq!(node_state(&fleet, NODE), "cordoned");
    let intent = &fleet["intents"][NODE];
    assert_eq!(intent["reason"], "fan noise, ticket OPS-12", "{intent}");
    assert!(intent["by"].as_str().unwrap().starts_with("local:"), "{intent}");
    assert!(intent["until"].as_i64().unwrap() > intent["at"].as_i64().unwrap());
    // The audit trail has it too.
    let audit = cli.ok(&["audit", "--json"]);
    assert!(audit.contains("fan noise, ticket OPS-12") && audit.contains("\"cordon\""), "{audit}");

    // Uncordon lifts it, and that is kept as well.
    cli.ok(&["uncordon", NODE, "--reason", "fan replaced"]);
    engine.stop();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let fleet = live_fleet(&s.store);
    assert_eq!(node_state(&fleet, NODE), "ready");
    assert!(fleet["intents"].get(NODE).is_none(), "{}", fleet["intents"]);
    engine.stop();
}

#[test]
fn a_retry_is_asked_once_and_links_both_ways() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let id = cli.submit(&spec(&s.specs, "flaky", "echo broken; exit 3", "[retry]\nmax_attempts = 1\n"));
    assert_eq!(cli.wait_final(id).state, WorkloadState::Failed);
    // Retried twice (a double key press, a script run again): one retry.
    let first = cli.ok(&["retry", &id.to_string(), "--reason", "fixed the input"]);
    let second = cli.ok(&["retry", &id.to_string()]);
    assert_eq!(first.trim(), second.trim(), "the second retry answers with the first");
    let retry: WorkloadId = first.trim().parse().unwrap();
    assert_ne!(retry, id);
    assert_eq!(cli.wait_final(retry).state, WorkloadState::Failed);
    // Still one retry after it ended, and after the engine restarted.
    assert_eq!(cli.ok(&["retry", &id.to_string()]).trim(), retry.to_string());
    engine.stop();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    assert_eq!(cli.ok(&["retry", &id.to_string()]).trim(), retry.to_string());
    // Each names the other.
    assert!(cli.ok(&["events", &id.to_string()]).contains(&format!("retried as {retry}")));
    assert!(cli.ok(&["events", &retry.to_string()]).contains(&format!("retry of {id}")));
    engine.stop();
}

/// Whether the process `pid` still runs (a zombie does not).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn a_cancel_is_kept_when_the_engine_dies_before_the_stop_is_confirmed() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let marker = s.scratch.join("ran");
    // Each ignores SIGTERM, so the stop is still waiting out its grace
    // when the engine dies; each records that it ran and its pid.
    let ids: Vec<(WorkloadId, PathBuf)> = (0..3)
        .map(|i| {
            let pid = s.scratch.join(format!("stubborn-{i}.pid"));
            let script = format!(
                "trap '' TERM; echo stubborn-{i} >> {}; echo $$ > {p}.tmp && mv {p}.tmp {p}; sleep 120",
                marker.display(),
                p = pid.display()
            );
            let extra = "[runtime]\nstop_grace = \"3s\"\n";
            let path = spec(&s.specs, &format!("stubborn-{i}"), &script, "");
            // `[runtime]` is written by `spec`; add the grace to it.
            let text = std::fs::read_to_string(&path).unwrap().replace("[runtime]\n", extra);
            std::fs::write(&path, text).unwrap();
            (cli.submit(&path), pid)
        })
        .collect();
    for (id, pid) in &ids {
        cli.wait_state(*id, |s| s == WorkloadState::Running);
        wait_for("the workload to write its pid", || pid.exists());
    }
    for (id, _) in &ids {
        let said = cli.ok(&["cancel", &id.to_string(), "--reason", "wrong dataset"]);
        assert!(said.contains("terminating"), "{said}");
    }
    // Accepted means journalled: the engine dies before any stop is done.
    engine.kill();

    let engine = Engine::start(&s.store, &s.scratch, &[]);
    for (id, pid) in &ids {
        let w = cli.wait_final(*id);
        assert_eq!(w.state, WorkloadState::Cancelled, "{w:?}");
        let (_, attempts) = cli.status(*id);
        assert_eq!(attempts.len(), 1, "a cancelled workload never runs again: {attempts:?}");
        assert_eq!(attempts[0].state, AttemptState::Cancelled, "{attempts:?}");
        let pid: i32 = std::fs::read_to_string(pid).unwrap().trim().parse().unwrap();
        wait_for("the stubborn workload to be killed", || !alive(pid));
    }
    let ran = std::fs::read_to_string(&marker).unwrap();
    for i in 0..3 {
        assert_eq!(ran.matches(&format!("stubborn-{i}\n")).count(), 1, "ran twice: {ran}");
    }
    engine.stop();
}

#[test]
fn a_journal_restored_from_an_older_copy_never_hands_new_work_an_old_attempt() {
    let s = setup();
    let cli = Cli::new(&s.store);
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let first = cli.submit(&spec(&s.specs, "first", "echo first", ""));
    assert_eq!(cli.wait_final(first).state, WorkloadState::Succeeded);
    engine.stop();
    // The backup an operator will restore: the journal as of now.
    let backup = s.scratch.join("backup");
    std::fs::create_dir_all(&backup).unwrap();
    for f in ["canopy.db", "canopy.db-wal"] {
        if s.store.join(f).exists() {
            std::fs::copy(s.store.join(f), backup.join(f)).unwrap();
        }
    }

    // Work the backup will not know: still running when the journal rolls back.
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let old_pid = s.scratch.join("old.pid");
    let script =
        format!("echo $$ > {p}.tmp && mv {p}.tmp {p}; echo old-output; sleep 120", p = old_pid.display());
    let lost = cli.submit(&spec(&s.specs, "lost", &script, ""));
    cli.wait_state(lost, |s| s == WorkloadState::Running);
    wait_for("the old workload's pid", || old_pid.exists());
    engine.stop();
    for f in ["canopy.db", "canopy.db-wal", "canopy.db-shm"] {
        let _ = std::fs::remove_file(s.store.join(f));
        if backup.join(f).exists() {
            std::fs::copy(backup.join(f), s.store.join(f)).unwrap();
        }
    }

    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let stderr = engine.stderr();
    assert!(stderr.contains("restored from an older copy"), "{stderr}");
    let marker = s.scratch.join("new-ran");
    let fresh =
        cli.submit(&spec(&s.specs, "fresh", &format!("echo fresh-output; touch {}", marker.display()), ""));
    assert_ne!(fresh, lost, "a new workload never takes an id whose logs exist");
    assert_eq!(cli.wait_final(fresh).state, WorkloadState::Succeeded);
    assert!(marker.exists(), "the new workload's own command ran");
    let logs = cli.ok(&["logs", &fresh.to_string()]);
    assert!(logs.contains("fresh-output") && !logs.contains("old-output"), "{logs}");
    // The old attempt is left alone, and the store says it does not know it.
    let pid: i32 = std::fs::read_to_string(&old_pid).unwrap().trim().parse().unwrap();
    assert!(alive(pid), "Canopy stopped work its journal does not know");
    wait_for("the unknown attempt to be listed", || {
        let fleet = cli.ok(&["fleet"]);
        fleet.contains("unknown to the journal") && fleet.contains(&format!("-w{}-a1", lost.0))
    });
    unsafe { libc::kill(pid, libc::SIGKILL) };
    engine.stop();
}

#[test]
fn a_lost_journal_is_not_started_over_silently_and_the_store_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let s = setup();
    let cli = Cli::new(&s.store);
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let id = cli.submit(&spec(&s.specs, "one", "echo one", ""));
    assert_eq!(cli.wait_final(id).state, WorkloadState::Succeeded);
    // Still running when the journal is lost.
    let running = cli.submit(&spec(&s.specs, "survivor", "sleep 3; echo survived", ""));
    cli.wait_state(running, |s| s == WorkloadState::Running);
    engine.stop();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&s.store), 0o700, "the store is private to its owner");
    assert_eq!(mode(&s.store.join("canopy.db")), 0o600);

    // The journal is truncated to nothing: the engine refuses, says what
    // it found and what to do.
    for f in ["canopy.db-wal", "canopy.db-shm"] {
        let _ = std::fs::remove_file(s.store.join(f));
    }
    std::fs::write(s.store.join("canopy.db"), b"").unwrap();
    let out = Command::new(BIN).arg("--store").arg(&s.store).args(["serve", "--no-faults"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("missing or empty") && err.contains("--new-journal") && err.contains("w-1"),
        "{err}"
    );

    // Asked explicitly, it starts over; new ids start above the old ones.
    let engine = Engine::start_with(&s.store, &s.scratch, &["serve", "--no-faults", "--new-journal"], &[]);
    let next = cli.submit(&spec(&s.specs, "two", "echo two", ""));
    assert!(next.0 > running.0, "{next} reuses the id of old work");
    // What still ran on this host was adopted and is followed to its end.
    let w = cli.wait_final(running);
    assert_eq!((w.state, w.name.as_str()), (WorkloadState::Succeeded, "survivor"), "{w:?}");
    assert!(cli.ok(&["logs", &running.to_string()]).contains("survived"));
    engine.stop();

    // A store someone opened up is flagged on start.
    std::fs::set_permissions(&s.store, std::fs::Permissions::from_mode(0o755)).unwrap();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    assert!(engine.stderr().contains("readable by other users"), "{}", engine.stderr());
    engine.stop();
}

#[test]
fn submit_wait_notices_when_the_engine_dies() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let path = spec(&s.specs, "long", "sleep 20", "");
    let mut wait = Command::new(BIN)
        .arg("--store")
        .arg(&s.store)
        .args(["submit", path.to_str().unwrap(), "--wait"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cli = Cli::new(&s.store);
    wait_for("the workload to run", || cli.ok(&["status"]).contains("running"));
    engine.kill();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = wait.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "submit --wait kept waiting on a dead engine");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = wait.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(status.code(), Some(4), "{err}");
    assert!(err.contains("the engine went away"), "{err}");
    // The work outlived its engine, as it should: an engine ends it.
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    cli.ok(&["cancel", "w-1"]);
    assert_eq!(cli.wait_final(WorkloadId(1)).state, WorkloadState::Cancelled);
    engine.stop();
}

#[test]
fn a_missing_secret_is_a_configuration_error_never_retried() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let name = "CANOPY_TEST_SECRET_NOBODY_SET";
    let path = spec(&s.specs, "needs-secret", "echo ran", "[retry]\napp_errors = 1\n");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("[runtime]\n", &format!("[runtime]\nsecrets = [\"{name}\"]\n"));
    std::fs::write(&path, text).unwrap();
    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Failed, "{w:?}");
    assert_eq!(w.class, Some(canopy::failure::FailureClass::Config), "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 1, "a configuration error is not retried, app_errors or not: {attempts:?}");
    let evidence = attempts[0].evidence.clone().unwrap_or_default();
    assert!(evidence.contains(name) && evidence.contains("export"), "{evidence}");
    engine.stop();
}

/// `canopy <args>` with its stdout a pipe that nobody reads any more: the
/// first write fails with EPIPE, as under `| head -1` once head is done.
fn into_a_closed_pipe(store: &Path, args: &[&str]) -> Output {
    use std::os::fd::{FromRawFd, OwnedFd};
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::from(write))
        .output()
        .unwrap()
}

#[test]
fn a_workloads_stderr_never_drives_the_operators_terminal() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    // Clear the screen, write the operator's clipboard (OSC 52), ring.
    let hostile = b"\x1b[2J\x1b]52;c;aGk=\x07";
    let script = r"printf '\033[2J\033]52;c;aGk=\007\n' >&2; exit 1";
    let id = cli.submit(&spec(&s.specs, "hostile", script, "[retry]\nmax_attempts = 1\n"));
    assert_eq!(cli.wait_final(id).state, WorkloadState::Failed);
    let (_, attempts) = cli.status(id);
    let evidence = attempts[0].evidence.clone().unwrap_or_default();
    assert!(contains(evidence.as_bytes(), hostile), "the classifier kept the line: {evidence:?}");

    let id = id.to_string();
    for args in [&["status", &id][..], &["events", &id], &["status"], &["status", &id, "--json"]] {
        let out = cli.run(args);
        assert!(out.status.success(), "canopy {args:?}: {out:?}");
        for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            assert!(
                !bytes.iter().any(|b| matches!(b, 0x1b | 0x07)),
                "canopy {args:?} wrote a control byte to {name}:\n{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    let shown = cli.ok(&["events", &id]);
    assert!(shown.contains("\u{FFFD}[2J\u{FFFD}]52;c;aGk=\u{FFFD}"), "shown, not acted on:\n{shown}");

    // To a pipe (and with --raw) the log is the workload's bytes, as written.
    for args in [&["logs", &id][..], &["logs", &id, "--raw"]] {
        let out = cli.run(args);
        assert!(out.status.success() && contains(&out.stdout, hostile), "canopy {args:?}: {out:?}");
    }

    // A reader that stops early (`| head -1`): a quiet end, not a panic.
    for args in [&["status"][..], &["status", &id], &["events", &id], &["logs", &id]] {
        let out = into_a_closed_pipe(&s.store, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "canopy {args:?} said something:\n{err}");
        assert_eq!(out.status.code(), Some(141), "canopy {args:?}: {:?}", out.status);
    }
    engine.stop();
}

#[test]
fn draining_a_node_lets_work_finish_and_evicting_moves_it_without_a_failure() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    // A plain drain: the running workload finishes where it is.
    let finishing = cli.submit(&spec(&s.specs, "finishing", "sleep 1; echo finished", ""));
    cli.wait_state(finishing, |s| s == WorkloadState::Running);
    let node = cli.status(finishing).1[0].node.clone();
    cli.ok(&["drain", &node, "--reason", "kernel update"]);
    assert_eq!(cli.wait_final(finishing).state, WorkloadState::Succeeded);
    cli.ok(&["uncordon", &node]);

    // An evicting drain: the workload (which ignores SIGTERM) is stopped
    // after the drain's grace and waits to be placed again; its one
    // allowed attempt is not spent (with nothing checkpointed to resume
    // from, the move comes out of infra_retries, as a preemption's would),
    // and the node's health is untouched.
    let marker = s.scratch.join("moved");
    let script = format!("trap '' TERM; echo run >> {}; sleep 60", marker.display());
    let path = spec(&s.specs, "moved", &script, "[retry]\nmax_attempts = 1\ninfra_retries = 1\n");
    // A short grace, so that the cancel at the end ends it soon.
    let text =
        std::fs::read_to_string(&path).unwrap().replace("[runtime]\n", "[runtime]\nstop_grace = \"1s\"\n");
    std::fs::write(&path, text).unwrap();
    let moved = cli.submit(&path);
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    let said = cli.ok(&["drain", &node, "--evict", "--grace", "1s", "--reason", "disk swap"]);
    assert!(said.contains("drain"), "{said}");
    let w = cli.wait_state(moved, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(moved);
    assert_eq!(attempts[0].rule.as_deref(), Some("canopy.evicted"), "{attempts:?}");
    assert!(w.reason.as_deref().unwrap_or("").contains("draining"), "{w:?}");
    let events = cli.ok(&["events", &moved.to_string()]);
    assert!(events.contains("retry.evicted") && events.contains("disk swap"), "{events}");
    // One outcome on the node (the finished workload's), a perfect score.
    let health = &live_fleet(&s.store)["health"]["nodes"][node.as_str()];
    assert_eq!((health["samples"].as_u64(), health["score"].as_f64()), (Some(1), Some(1.0)), "{health}");
    // The node back: the workload runs again, its second run.
    cli.ok(&["uncordon", &node]);
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    wait_for("the second run", || std::fs::read_to_string(&marker).unwrap_or_default().lines().count() == 2);
    cli.ok(&["cancel", &moved.to_string()]);
    // Ended before the engine stops: a stopped engine leaves work running.
    assert_eq!(cli.wait_final(moved).state, WorkloadState::Cancelled);
    engine.stop();
}

#[test]
fn a_spec_no_pool_could_ever_run_is_refused_at_submit_with_exit_3() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let path = spec(&s.specs, "huge", "true", "");
    let text = std::fs::read_to_string(&path).unwrap().replace("memory_gb = 0.1", "memory_gb = 2000");
    std::fs::write(&path, text).unwrap();
    let out = cli.run(&["submit", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("could ever run") && err.contains("RAM"), "{err}");
    assert!(cli.ok(&["status"]).lines().count() <= 1, "nothing was queued");
    engine.stop();
}

/// `canopy fleet` and `canopy plan` see the fleet the engine would run
/// with: the engine's own when one runs, else the configured providers
/// taken live, and the demo fleet only when canopy.toml includes it.
#[test]
fn fleet_and_plan_follow_the_configuration_with_or_without_an_engine() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n").unwrap();
    let gpu = s.specs.join("gpu.toml");
    std::fs::write(&gpu, "name = \"gpu\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = 8\n").unwrap();
    let cli = Cli::new(&s.store);
    let check = |when: &str| {
        let fleet = cli.ok(&["fleet", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&fleet).unwrap();
        let providers: std::collections::BTreeSet<String> =
            v.as_array().unwrap().iter().map(|p| p["provider"].as_str().unwrap().to_string()).collect();
        assert_eq!(providers.into_iter().collect::<Vec<_>>(), ["local"], "{when}: {fleet}");
        let out = cli.run(&["plan", gpu.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(3), "{when}: an 8-GPU plan on this host alone cannot fit");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("0/1 nodes fit"), "{when}: {text}");
    };
    check("without an engine");
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    check("with the engine running");
    engine.stop();
}

/// A drain is kept across a restart like a cordon, and an evicting drain's
/// stop already decided is carried out after one: the moved workload
/// waits to be placed again, its stop (no checkpointed progress) charged
/// to its one infrastructure retry, never to `max_attempts`.
#[test]
fn a_drain_and_its_eviction_survive_an_engine_restart() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = "trap '' TERM; sleep 60";
    let moved =
        cli.submit(&spec(&s.specs, "moved", script, "[retry]\nmax_attempts = 1\ninfra_retries = 1\n"));
    cli.wait_state(moved, |s| s == WorkloadState::Running);
    let node = cli.status(moved).1[0].node.clone();
    // A long grace: the engine dies before the stop is done.
    cli.ok(&["drain", &node, "--evict", "--grace", "3s", "--reason", "disk swap"]);
    engine.kill();

    let engine = Engine::start(&s.store, &s.scratch, &[]);
    assert_eq!(node_state(&live_fleet(&s.store), &node), "draining", "the drain outlived the engine");
    let w = cli.wait_state(moved, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(moved);
    assert_eq!(attempts[0].rule.as_deref(), Some("canopy.evicted"), "{w:?} {attempts:?}");
    cli.ok(&["cancel", &moved.to_string()]);
    // Ended before the engine stops: a stopped engine leaves work running.
    assert_eq!(cli.wait_final(moved).state, WorkloadState::Cancelled);
    engine.stop();
}

#[test]
fn log_lines_keep_the_time_they_were_written_not_when_they_are_read() {
    use canopy::engine::handle::{LogBytes, Stream};
    use canopy::engine::model::{AttemptId, Millis};
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    // Four lines a second or more apart, each printed only once the one
    // before has been shipped (the test opens a gate when it sees it), so
    // no two are first read in the same poll however busy the machine.
    let gate = s.scratch.join("gate");
    let script = format!(
        "for i in 1 2 3 4; do echo \"line $i\"; while [ ! -e {g}.$i ]; do sleep 0.05; done; sleep 1; done",
        g = gate.display()
    );
    let id = cli.submit(&spec(&s.specs, "ticker", &script, ""));
    let shipped = s.store.join("logs").join(id.to_string()).join("1").join("stdout.log");
    for i in 1..=4 {
        wait_for(&format!("line {i} to be shipped"), || {
            std::fs::read_to_string(&shipped).unwrap_or_default().contains(&format!("line {i}\n"))
        });
        std::fs::write(format!("{}.{i}", gate.display()), b"").unwrap();
    }
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    let attempt = AttemptId { workload: id, n: 1 };

    // Each line's time: that of the chunk holding its first byte.
    let lines = |got: &LogBytes| -> Vec<(String, Millis)> {
        let mut out = Vec::new();
        let mut start = 0usize;
        for (i, b) in got.data.iter().enumerate() {
            if *b == b'\n' {
                let text = String::from_utf8_lossy(&got.data[start..i]).into_owned();
                out.push((text, got.time_at(start as u64).expect("every shipped line has a time")));
                start = i + 1;
            }
        }
        out
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    // Through the API (what an attached console reads) ...
    let api = rt.block_on(async {
        let c = canopy::client::Client::for_store(&s.store).unwrap();
        c.log_bytes(attempt, Stream::Stdout, 0, 1 << 20).await.unwrap()
    });
    let api_lines = lines(&api);
    let texts: Vec<&str> = api_lines.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, ["line 1", "line 2", "line 3", "line 4"]);
    for pair in api_lines.windows(2) {
        let gap = pair[1].1.0 - pair[0].1.0;
        assert!(gap >= 1_000, "lines printed a second apart show it: {api_lines:?}");
    }
    // ... and, read again later from the store (an embedded console),
    // the same times: when they were written, not when they are read.
    std::thread::sleep(Duration::from_millis(1_100));
    let local = rt.block_on(canopy::engine::handle::read_log(&shipped, 0, 1 << 20)).unwrap();
    assert_eq!(lines(&local), api_lines);
    let now = Millis(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
    );
    assert!(api_lines.iter().all(|(_, t)| now.0 - t.0 >= 2_000), "{api_lines:?}");
    // A read from the middle of a line still knows when it began.
    let from_middle = rt.block_on(canopy::engine::handle::read_log(&shipped, 9, 1 << 20)).unwrap();
    assert_eq!(from_middle.time_at(9), Some(api_lines[1].1), "byte 9 is in `line 2`");
    engine.stop();
}

/// The script of a workload that counts to 5, saving each step as a
/// checkpoint (`step-N/` with `COMPLETE` last) and resuming from the
/// newest it finds. `$1` is a marker file; the first run leaves step-4
/// half-written and kills itself.
const COUNTING: &str = r#"d="$CANOPY_CHECKPOINT_DIR"; start=0
for c in "$d"/step-*/COMPLETE; do [ -e "$c" ] || continue; n=$(basename "$(dirname "$c")"); n=${n#step-}; [ "$n" -gt "$start" ] && start=$n; done
echo "resumed at step $start"; echo "run from $start" >> "$MARK"
s=$start
while [ $s -lt 5 ]; do
  s=$((s+1)); mkdir -p "$d/step-$s"; echo $s > "$d/step-$s/state"
  if [ $s = 4 ] && [ $start = 0 ]; then kill -9 $$; fi
  touch "$d/step-$s/COMPLETE"
done
echo "finished at step $s""#;

#[test]
fn a_checkpointed_workload_killed_mid_run_resumes_from_its_last_complete_checkpoint() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let mark = s.scratch.join("runs");
    let extra = format!(
        "[checkpoint]\npath = \"/ckpt\"\n\n[retry]\napp_errors = 1\nbackoff = \"1s\"\n\n\
         [runtime.env]\nMARK = {:?}\n",
        mark.display().to_string()
    );
    let path = s.specs.join("counting.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"counting\"\n[runtime]\ncommand = [\"sh\", \"-c\", {COUNTING:?}]\n{}\n\
             [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n",
            extra
        ),
    )
    .unwrap();
    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    // The second run started at step 3, the last complete one; the
    // half-written step 4 was never handed on.
    assert_eq!(std::fs::read_to_string(&mark).unwrap(), "run from 0\nrun from 3\n");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 2);
    let resumed = attempts[1].checkpoint.as_ref().and_then(|c| c.resumed.as_ref()).expect("resumed");
    assert_eq!((resumed.name.as_str(), resumed.attempt), ("step-3", 1));
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("resumed at step 3") && logs.contains("finished at step 5"), "{logs}");
    let events = cli.ok(&["events", &id.to_string()]);
    assert!(events.contains("resumes from checkpoint step-3 of attempt 1 (saved"), "{events}");
    engine.stop();
}

/// An evicting drain sends SIGTERM and waits its grace: the workload
/// saves a checkpoint in that time, and its next run resumes from it.
#[test]
fn sigterm_with_grace_reaches_the_workload_before_an_evicting_drain_kills_it() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = r#"d="$CANOPY_CHECKPOINT_DIR"
if [ -e "$d/on-term/COMPLETE" ]; then echo "resumed from on-term"; exit 0; fi
trap 'mkdir -p "$d/on-term"; echo 42 > "$d/on-term/state"; touch "$d/on-term/COMPLETE"; echo saved on SIGTERM; exit 143' TERM
echo started; sleep 60 & wait"#;
    let path = spec(&s.specs, "graceful", script, "[checkpoint]\npath = \"/ckpt\"\n");
    let id = cli.submit(&path);
    cli.wait_state(id, |s| s == WorkloadState::Running);
    let node = cli.status(id).1[0].node.clone();
    wait_for("the workload to start", || cli.ok(&["logs", &id.to_string()]).contains("started"));
    cli.ok(&["drain", &node, "--evict", "--grace", "30s", "--reason", "reboot"]);
    cli.wait_state(id, |s| s == WorkloadState::Queued);
    let (_, attempts) = cli.status(id);
    let saved = attempts[0].checkpoint.as_ref().and_then(|c| c.saved.as_ref()).expect("a checkpoint saved");
    assert_eq!(saved.name, "on-term");
    cli.ok(&["uncordon", &node]);
    assert_eq!(cli.wait_final(id).state, WorkloadState::Succeeded);
    let logs = cli.ok(&["logs", &id.to_string(), "--attempt", "1"]);
    assert!(logs.contains("saved on SIGTERM"), "{logs}");
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("resumed from on-term"), "{logs}");
    engine.stop();
}

/// A gang of two on this machine offered as three nodes, through the
/// engine: the first run's rank 1 fails with an NCCL error, which stops
/// rank 0 too (SIGTERM first); the gang runs again once — one retry, not
/// two — away from the node that failed, which alone is charged.
#[test]
fn one_failing_rank_stops_the_gang_and_it_runs_again_once_elsewhere() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n\n[local]\nnodes = 3\n")
        .unwrap();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let script = r#"case "$CANOPY_ATTEMPT.$NODE_RANK" in
  *.1.1) echo "NCCL WARN Net/Socket : peer closed connection; NCCL error: unhandled system error" >&2; exit 1 ;;
  *.1.0) trap 'echo "rank 0 stopped by SIGTERM"; exit 143' TERM; sleep 60 & wait ;;
  *) echo "rank $NODE_RANK of $NNODES on $CANOPY_NODE_NAME, master $MASTER_ADDR:$MASTER_PORT" ;;
esac"#;
    let path = spec(&s.specs, "gang", script, "");
    let text = std::fs::read_to_string(&path).unwrap().replace("[resources]\n", "[resources]\nnodes = 2\n");
    std::fs::write(&path, text).unwrap();
    let id = cli.submit(&path);
    let w = cli.wait_final(id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?}");
    let (_, attempts) = cli.status(id);
    assert_eq!(attempts.len(), 2, "one relaunch of the whole gang: {attempts:?}");
    let first = &attempts[0];
    assert_eq!(first.nodes.len(), 2, "{first:?}");
    let culprit = &first.nodes[1];
    assert_eq!(first.class, Some(canopy::failure::FailureClass::Comm), "{first:?}");
    let evidence = first.evidence.clone().unwrap_or_default();
    assert!(evidence.starts_with(&format!("rank 1 on {culprit}: ")), "{evidence}");
    assert!(!attempts[1].nodes.contains(culprit), "the rerun avoids {culprit}: {:?}", attempts[1]);
    let logs = cli.ok(&["logs", &id.to_string(), "--attempt", "1"]);
    assert!(logs.contains("rank 0 stopped by SIGTERM"), "{logs}");
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("rank 0 of 2") && logs.contains("rank 1 of 2"), "{logs}");
    // Only the failing rank's node is charged with the fault (the fleet
    // status is published a moment after the change).
    let mut fleet = live_fleet(&s.store);
    wait_for("the fault on the failing rank's node", || {
        fleet = live_fleet(&s.store);
        fleet["health"]["faults"][culprit.as_str()].is_array()
    });
    let faults = &fleet["health"]["faults"];
    assert_eq!(faults[culprit.as_str()][0]["class"], "comm", "{faults}");
    assert!(faults[first.nodes[0].as_str()].is_null(), "rank 0's node is not blamed: {faults}");
    engine.stop();
}

/// The launchers of a gang meet over TCP through the engine.
#[test]
fn a_gangs_launchers_rendezvous_over_tcp_through_the_engine() {
    let s = setup();
    std::fs::create_dir_all(&s.store).unwrap();
    std::fs::write(s.store.join("canopy.toml"), "include_demo_fleet = false\n\n[local]\nnodes = 2\n")
        .unwrap();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = Cli::new(&s.store);
    let py = "import os, socket, time\n\
rank = int(os.environ['NODE_RANK']); port = int(os.environ['MASTER_PORT']); host = os.environ['MASTER_ADDR']\n\
if rank == 0:\n    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n    s.bind((host, port)); s.listen(1); s.settimeout(30)\n    c, _ = s.accept(); print('rank 0 heard:', c.recv(100).decode(), flush=True)\n\
else:\n    for _ in range(300):\n        try:\n            c = socket.create_connection((host, port), timeout=1); break\n        except OSError:\n            time.sleep(0.1)\n    c.sendall(b'hello from rank 1'); c.close()\n";
    let path = s.specs.join("rendezvous.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"rendezvous\"\n[runtime]\ncommand = [\"python3\", \"-c\", {py:?}]\n\n\
             [resources]\nnodes = 2\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n"
        ),
    )
    .unwrap();
    let id = cli.submit(&path);
    assert_eq!(cli.wait_final(id).state, WorkloadState::Succeeded);
    let logs = cli.ok(&["logs", &id.to_string()]);
    assert!(logs.contains("rank 0 heard: hello from rank 1"), "{logs}");
    engine.stop();
}
