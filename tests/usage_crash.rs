//! The usage ledger is derived from the journal alone, so a `kill -9` of
//! `canopy serve` changes nothing it reports: the rows and totals of a
//! fixed window read before the kill and after the restart are identical,
//! a still-running workload's row included (it is re-adopted, not re-run).

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serde_json::Value;
use serve_support::{Process, Serve};
use std::path::Path;
use std::time::{Duration, Instant};

fn spec(dir: &Path, name: &str, script: &str) -> String {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = {name:?}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n[resources]\ncpu_cores = 0.5\n\
             memory_gb = 0.1\n\n[retry]\nmax_attempts = 1\n\n[constraints]\nproviders = [\"local\"]\n"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn state(serve: &Serve, id: &str) -> String {
    let v = json(&serve.canopy(&["status", id, "--json"]));
    v["workload"]["state"].as_str().unwrap_or_default().to_string()
}

fn wait(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_ledger_after_a_kill_9_and_a_restart_is_the_one_before() {
    let tmp = tempfile::tempdir().unwrap();
    let reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &[], Process::default());
    let submit = |serve: &Serve, name: &str, script: &str| {
        json(&serve.canopy(&["submit", &spec(tmp.path(), name, script), "--json"]))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let ok = submit(&serve, "ok", "echo fine");
    let bad = submit(&serve, "bad", "echo 'ValueError' >&2; exit 3");
    let long = submit(&serve, "long", "sleep 300");
    wait("two ends and one running", || {
        state(&serve, &ok) == "succeeded"
            && state(&serve, &bad) == "failed"
            && state(&serve, &long) == "running"
    });
    std::thread::sleep(Duration::from_millis(1500));
    let until = jiff::Timestamp::now().as_millisecond();
    let since = (until - 3_600_000).to_string();
    let until = until.to_string();
    let report = |serve: &Serve| {
        let args = ["usage", "--by", "user", "--rows", "--json", "--since", &since, "--until", &until];
        json(&serve.canopy(&args))
    };
    let before = report(&serve);
    assert_eq!(before["rows"].as_array().map(Vec::len), Some(3), "{before}");
    assert!(before["total"]["cpu_core_ms"].as_u64().unwrap() > 0, "{before}");

    serve.kill9();
    let serve = Serve::start(&store, &[], Process::default());
    wait("the long one re-adopted", || state(&serve, &long) == "running");
    let after = report(&serve);
    assert_eq!(before, after, "the same window after kill -9 and a restart");
    let attempts = json(&serve.canopy(&["status", &long, "--json"]))["attempts"].as_array().unwrap().len();
    assert_eq!(attempts, 1, "re-adopted, not run again");
    assert!(serve.canopy(&["cancel", &long]).status.success());
    wait("the long one cancelled", || state(&serve, &long) == "cancelled");
    serve.stop();
    drop(reaper);
}
