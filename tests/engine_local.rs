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

use local_support::{BIN, Cli, Engine, setup, spec, wait_for};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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
