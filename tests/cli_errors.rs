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
