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

/// A mistyped `--store` is named as such: reading or submitting creates
/// nothing there, and the answer says no store exists (exit 4).
#[test]
fn a_mistyped_store_is_named_and_nothing_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("s.toml");
    std::fs::write(&spec, "name = \"s\"\n[runtime]\ncommand = [\"true\"]\n").unwrap();
    let typo = tmp.path().join("stroe");
    for args in [vec!["status"], vec!["submit", spec.to_str().unwrap()], vec!["cancel", "w-1"]] {
        let out = Command::new(BIN).arg("--store").arg(&typo).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{args:?}: {err}");
        assert!(err.contains("there is no Canopy store at") && err.contains("stroe"), "{args:?}: {err}");
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
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
fn control_characters_in_labels_env_and_argv_are_refused_with_where() {
    // TOML basic strings take `\u001b` escapes: the spec is well formed.
    let (code, err) = validate(
        "name = \"x\"\nlabels = { team = \"ml\\u001b[2J\" }\n\n[runtime]\n\
         command = [\"sh\", \"-c\", \"echo \\u009b31m\"]\nenv = { MODE = \"a\\u0007\" }\n",
    );
    assert_eq!(code, Some(1), "{err}");
    for (field, line) in [("labels.team", 2), ("runtime.command[2]", 5), ("runtime.env.MODE", 6)] {
        let at = err.find(&format!("`{field}` contains the control character")).unwrap_or_else(|| {
            panic!("no error for {field}:\n{err}");
        });
        assert!(
            err[at..].contains(&format!("spec.toml:{line}:")),
            "{field} not located on line {line}:\n{err}"
        );
    }
    assert!(!err.contains('\x1b') && !err.contains('\x07'), "{err:?}");

    // Tabs and newlines in an argument are a multi-line program: fine.
    let (code, err) = validate(
        "name = \"x\"\n[runtime]\ncommand = [\"python\", \"-c\", \"import sys\\nif True:\\n\\tprint(1)\"]\n",
    );
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_nul_in_an_output_path_is_refused() {
    let (code, err) = validate(
        "name = \"x\"\n[runtime]\ncommand = [\"true\"]\n\n[[outputs]]\nname = \"o\"\npath = \"/out/a\\u0000b\"\n",
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("`outputs[0].path` contains a NUL character"), "{err}");
    assert!(err.contains("spec.toml:7:"), "{err}");
}

#[test]
fn validate_prints_every_problem_with_where_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(
        &path,
        "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = \"two\"\n[retry]\nmax_attempts = 0\n",
    )
    .unwrap();
    let out = canopy(&dir.path().join("home"), &["validate", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    let summary = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for (line, what) in [
        (2, "unknown field `prority` at the top level"),
        (6, "`resources.gpus` must be a whole number, not a string"),
        (8, "`retry.max_attempts` is 0"),
    ] {
        let at = err.find(what).unwrap_or_else(|| panic!("{what:?} missing from\n{err}"));
        assert!(err[at..].contains(&format!("spec.toml:{line}:")), "{what} not at line {line}:\n{err}");
    }
    assert!(summary.contains("3 errors"), "{summary}");
}

#[test]
fn a_gpu_count_past_the_range_says_the_range() {
    let (code, err) =
        validate("name = \"x\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = 99999999999999999999\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "`resources.gpus` must be a whole number from 0 to 4294967295, not 99999999999999999999"
        ),
        "{err}"
    );
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
