//! A user's mistake gets an answer, not a bug report: with RUST_BACKTRACE=1
//! (common on operators' machines) a CLI error is its lines and nothing
//! more; `--debug` asks for the full report.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

fn plan_missing_spec(extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .args(extra)
        .args(["plan", "/no/such/spec.toml"])
        .env("RUST_BACKTRACE", "1")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn user_errors_come_without_a_backtrace_even_when_one_is_asked_for() {
    let (code, err) = plan_missing_spec(&[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no file exists there"), "{err}");
    assert!(err.contains("error: /no/such/spec.toml is not a valid spec"), "{err}");
    for noise in ["Backtrace", "Location:", "stack backtrace", "color_eyre", "RUST_BACKTRACE"] {
        assert!(!err.contains(noise), "{noise:?} in a user error:\n{err}");
    }
    assert!(err.lines().count() <= 6, "a short answer, not a report:\n{err}");
}

#[test]
fn debug_asks_for_the_full_report() {
    let (code, err) = plan_missing_spec(&["--debug"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("Location:"), "{err}");
}

// ── Hostile specs and paths, early readers ──────────────────────────────

/// Runs `canopy <args>` over an empty store (no engine answers), with a
/// deadline: a command that blocks fails the test instead of hanging it.
fn canopy(store: &std::path::Path, args: &[&str]) -> std::process::Output {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let mut child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("canopy {args:?} did not answer within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn validate(text: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, text).unwrap();
    let out = canopy(&dir.path().join("home"), &["validate", path.to_str().unwrap()]);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_spec_file_with_raw_escape_bytes_is_shown_safely() {
    // TOML refuses a raw ESC in a comment; the diagnostic quotes the line.
    let (code, err) = validate("name = \"x\" # \x1b]52;c;aGk=\x07\x1b[2J\n[runtime]\ncommand = [\"true\"]\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("spec.toml:1:"), "{err}");
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");
}

#[test]
fn dev_zero_and_a_fifo_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("spec.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let store = dir.path().join("home");
    for (path, what) in [("/dev/zero", "a character device"), (fifo.to_str().unwrap(), "a FIFO")] {
        for cmd in ["validate", "submit", "plan"] {
            let out = canopy(&store, &[cmd, path]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "canopy {cmd} {path}: {err}");
            assert!(err.contains(&format!("the path names {what}")), "canopy {cmd} {path}: {err}");
            assert!(err.contains("not a regular file") && err.contains("save it to a file"), "{err}");
        }
    }
}

/// `canopy <args>` with its stdout a pipe that nobody reads any more: the
/// first write fails with EPIPE, as under `| head -1` once head is done.
fn into_a_closed_pipe(store: &std::path::Path, args: &[&str]) -> std::process::Output {
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
        .stdout(std::process::Stdio::from(write))
        .output()
        .unwrap()
}

#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("home");
    for args in [&["fleet", "--nodes"][..], &["fleet", "--json"], &["schema"]] {
        let out = into_a_closed_pipe(&store, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.is_empty(), "canopy {args:?} said something:\n{err}");
        assert_eq!(out.status.code(), Some(141), "canopy {args:?}: {:?}", out.status);
    }
}
