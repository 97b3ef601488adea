//! Shell completions and manual pages, as a user installs them: the bash
//! script is loaded by a real bash and completes subcommands and options;
//! `canopy man` prints a roff page with its header, and `--out` writes a
//! page per command that groff (when installed) formats without a warning.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

fn canopy(args: &[&str]) -> Output {
    let out = Command::new(BIN).args(args).output().unwrap();
    assert!(out.status.success(), "canopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn has(program: &str) -> bool {
    let found = Command::new("sh").args(["-c", &format!("command -v {program}")]).output();
    if !found.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED part of cli_completions: {program} is not installed");
        return false;
    }
    true
}

/// Runs `script` in bash with the completion loaded; its stdout.
fn bash(script: &str) -> String {
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &format!("source <(\"$CANOPY\" completions bash) && {script}")])
        .env("CANOPY", BIN)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "bash failed: {stderr}\n{stdout}");
    assert!(stderr.is_empty(), "bash complained loading the completion: {stderr}");
    stdout.into_owned()
}

/// What bash offers after `line` (the completion function called as bash
/// calls it on TAB).
fn complete(line: &str) -> Vec<String> {
    let words: Vec<&str> = line.split(' ').collect();
    let script = format!(
        "COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
         _canopy canopy '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words.iter().map(|w| format!("'{w}'")).collect::<Vec<_>>().join(" "),
        words.len() - 1,
        words[words.len() - 1],
        words.get(words.len().wrapping_sub(2)).copied().unwrap_or(""),
    );
    bash(&script).lines().map(str::to_string).collect()
}

#[test]
fn the_bash_completion_loads_in_bash_and_completes_commands_and_options() {
    if !has("bash") {
        return;
    }
    let registered = bash("complete -p canopy");
    assert!(registered.contains("_canopy") && registered.trim_end().ends_with("canopy"), "{registered}");

    let subcommands = complete("canopy su");
    assert_eq!(subcommands, ["submit"], "{subcommands:?}");
    let all = complete("canopy ");
    for c in ["submit", "status", "logs", "completions", "man", "token"] {
        assert!(all.iter().any(|w| w == c), "{c} is not offered: {all:?}");
    }
    let options = complete("canopy submit --");
    for o in ["--wait", "--idempotency-key", "--store", "--server"] {
        assert!(options.iter().any(|w| w == o), "{o} is not offered: {options:?}");
    }
    let shells = complete("canopy completions ");
    for s in ["bash", "zsh", "fish", "elvish", "powershell"] {
        assert!(shells.iter().any(|w| w == s), "{s} is not offered: {shells:?}");
    }
}

#[test]
fn every_shell_gets_a_script_naming_canopy() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = String::from_utf8(canopy(&["completions", shell]).stdout).unwrap();
        assert!(out.contains("canopy") && out.contains("submit"), "{shell}:\n{out}");
    }
    let bad = Command::new(BIN).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

#[test]
fn canopy_man_prints_a_roff_page_and_writes_one_per_command() {
    let page = String::from_utf8(canopy(&["man"]).stdout).unwrap();
    // The title line comes first after clap_mangen's quote-macro preamble:
    // `.TH canopy 1 …`, then NAME.
    let mut lines = page.lines().skip_while(|l| l.starts_with(".ie ") || l.starts_with(".el "));
    let th = lines.next().unwrap_or_default();
    assert!(th.starts_with(".TH canopy 1 "), "{th:?} is not a roff title line:\n{page}");
    assert_eq!(lines.next(), Some(".SH NAME"), "{page}");
    assert!(page.contains(".SH SYNOPSIS") && page.contains("submit"), "{page}");

    let dir = tempfile::tempdir().unwrap();
    let out = canopy(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("manual pages in"));
    for name in ["canopy.1", "canopy-submit.1", "canopy-token-create.1", "canopy-completions.1"] {
        let text = std::fs::read_to_string(dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let stem = name.trim_end_matches(".1");
        assert!(text.contains(&format!(".TH {stem} 1 ")), "{name}:\n{text}");
    }
    if has("groff") {
        for e in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let out = Command::new("groff")
                .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
                .arg(e.path())
                .output()
                .unwrap();
            let warnings = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && warnings.is_empty(), "{}: {warnings}", e.path().display());
        }
    }
}
