//! `canopy import` and `canopy submit --from` through the real binary, as
//! a user runs them: the spec on stdout (or in `-o FILE`), warnings on
//! stderr one per line at FILE:LINE:COL, exit 1 with a positioned error
//! for a file that cannot be converted, and a converted task that really
//! runs on the local provider: SkyPilot's setup then run, dstack's
//! commands in order.
//!
//! Every wait is a bounded poll for a condition; nothing is timed.

mod reap_support;

use reap_support::Reaper;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/import");

fn canopy(store: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn example(rel: &str) -> String {
    format!("{EXAMPLES}/{rel}")
}

#[test]
fn import_prints_a_spec_that_validates_and_plans_with_warnings_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("home");
    let file = example("skypilot/multinode.yaml");
    let out = canopy(&store, &["import", "skypilot", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let spec = text(&out.stdout);
    assert!(spec.starts_with("# Converted from the SkyPilot task `multinode.yaml`"), "{spec}");
    assert!(spec.contains("nodes = 4") && spec.contains("model = \"H100\""), "{spec}");
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0]
            .starts_with(&format!("{file}:9:3: warning: `resources.network_tier` has no Canopy counterpart")),
        "{err}"
    );
    assert!(
        lines[1].starts_with(&format!("{file}:10:3: warning: `resources.any_of` has no Canopy counterpart")),
        "{err}"
    );

    // The printed spec is one `canopy validate` accepts and `plan` places
    // on the demo fleet's H100 pools.
    let saved = tmp.path().join("multinode.toml");
    std::fs::write(&saved, &spec).unwrap();
    let v = canopy(&store, &["validate", saved.to_str().unwrap()]);
    assert_eq!(v.status.code(), Some(0), "{}{}", text(&v.stdout), text(&v.stderr));
    let single = canopy(&store, &["import", "skypilot", &example("skypilot/finetune-h100.yaml")]);
    std::fs::write(&saved, &single.stdout).unwrap();
    let p = canopy(&store, &["plan", saved.to_str().unwrap()]);
    assert_eq!(p.status.code(), Some(0), "{}{}", text(&p.stdout), text(&p.stderr));
    assert!(text(&p.stdout).to_ascii_lowercase().contains("h100"), "{}", text(&p.stdout));
}

#[test]
fn import_writes_the_same_spec_to_a_file_with_o() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("home");
    let file = example("dstack/distributed.dstack.yml");
    let printed = canopy(&store, &["import", "dstack", &file]);
    assert_eq!(printed.status.code(), Some(0), "{}", text(&printed.stderr));
    let out_path = tmp.path().join("train.toml");
    let written = canopy(&store, &["import", "dstack", &file, "-o", out_path.to_str().unwrap()]);
    assert_eq!(written.status.code(), Some(0), "{}", text(&written.stderr));
    assert!(written.stdout.is_empty(), "nothing on stdout with -o");
    assert_eq!(std::fs::read(&out_path).unwrap(), printed.stdout);
    let err = text(&written.stderr);
    assert!(err.contains(&format!("{file}:7:5: warning: `env.HF_TOKEN` has no value")), "{err}");
    assert!(err.ends_with(&format!("wrote {}\n", out_path.display())), "{err}");

    // -o naming the input itself is refused, and the input is untouched.
    let input = tmp.path().join("task.yaml");
    std::fs::write(&input, "run: echo hi\n").unwrap();
    let same =
        canopy(&store, &["import", "skypilot", input.to_str().unwrap(), "--output", input.to_str().unwrap()]);
    assert_eq!(same.status.code(), Some(1));
    assert!(text(&same.stderr).contains("is the file being imported"), "{}", text(&same.stderr));
    assert_eq!(std::fs::read_to_string(&input).unwrap(), "run: echo hi\n");
}

#[test]
fn a_file_that_cannot_be_imported_exits_1_with_a_positioned_error() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("home");
    let bad = tmp.path().join("bad.yaml");
    std::fs::write(&bad, "name: x\nresources:\n  accelerators: \"A100:x\"\nrun: echo\n").unwrap();
    let out = canopy(&store, &["import", "skypilot", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no spec on stdout: {}", text(&out.stdout));
    let err = text(&out.stderr);
    let at = format!(
        "{}:3:17: error: `resources.accelerators` has `A100:x`: the count after `:` must be a number",
        bad.display()
    );
    assert!(err.starts_with(&at), "{err}");
    assert!(err.contains("\n  help: write NAME:COUNT, like A100:8\n"), "{err}");
    assert!(err.contains("could not be imported as a SkyPilot task"), "{err}");

    let dev = tmp.path().join("dev.dstack.yml");
    std::fs::write(&dev, "type: dev-environment\nide: vscode\n").unwrap();
    let out = canopy(&store, &["import", "dstack", dev.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains(":1:7: error: `type: dev-environment` is a dstack dev environment"),
        "{}",
        text(&out.stderr)
    );

    let missing = canopy(&store, &["import", "dstack", "/no/such/.dstack.yml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(text(&missing.stderr).contains("no file exists there"), "{}", text(&missing.stderr));
    // A submit of a file that cannot be converted sends nothing.
    let sub = canopy(&store, &["submit", "--from", "skypilot", bad.to_str().unwrap()]);
    assert_eq!(sub.status.code(), Some(1));
    assert!(text(&sub.stderr).contains(":3:17: error:"), "{}", text(&sub.stderr));
    assert!(!store.exists(), "a refused submit creates no store");
}

// ── submit --from, end to end on the local provider ─────────────────────

/// A `canopy engine` child over one store, stopped when dropped.
struct Engine(Child);

impl Engine {
    fn start(store: &Path, scratch: &Path) -> Engine {
        let stderr = scratch.join("engine.stderr");
        let child = Command::new(BIN)
            .arg("--store")
            .arg(store)
            .args(["engine", "--no-faults"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut e = Engine(child);
        wait_for("the engine to start", || {
            if let Some(status) = e.0.try_wait().unwrap() {
                panic!(
                    "the engine exited ({status}): {}",
                    std::fs::read_to_string(&stderr).unwrap_or_default()
                );
            }
            std::fs::read_to_string(&stderr).unwrap_or_default().contains("canopy serve: store")
        });
        e
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn submit_from(store: &Path, format: &str, file: &Path) -> String {
    let out = canopy(store, &["submit", "--from", format, file.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["id"].as_str().unwrap().to_string()
}

/// The workload's final state and its logs.
fn finish(store: &Path, id: &str) -> (String, String) {
    let mut state = String::new();
    wait_for(&format!("{id} to end"), || {
        let out = canopy(store, &["status", id, "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        state = v["workload"]["state"].as_str().unwrap_or("").to_string();
        matches!(state.as_str(), "succeeded" | "failed" | "cancelled")
    });
    let logs = canopy(store, &["logs", id]);
    (state, text(&logs.stdout))
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

#[test]
fn submit_from_runs_a_skypilot_setup_and_run_and_dstack_commands_on_the_local_provider() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (store, scratch) = (tmp.path().join("home"), tmp.path().join("scratch"));
    std::fs::create_dir_all(&scratch).unwrap();
    let _engine = Engine::start(&store, &scratch);

    let sky = write(
        &scratch,
        "task.yaml",
        "name: sky-hello\nresources:\n  infra: local\n  cpus: 0.1\n  memory: 0.1\n\
         envs:\n  GREETING: hello\n\
         setup: |\n  echo \"setup ran\"\n\
         run: |\n  echo \"run says $GREETING\"\n",
    );
    let id = submit_from(&store, "skypilot", &sky);
    let (state, logs) = finish(&store, &id);
    assert_eq!(state, "succeeded", "{logs}");
    let (setup, run) = (logs.find("setup ran"), logs.find("run says hello"));
    assert!(setup.is_some() && run.is_some() && setup < run, "setup, then run:\n{logs}");

    // A failing setup fails the task and its run never starts.
    let broken = write(
        &scratch,
        "broken.yaml",
        "name: sky-broken\nresources:\n  infra: local\n  cpus: 0.1\n  memory: 0.1\n\
         setup: exit 3\nrun: echo should-not-run\n",
    );
    let id = submit_from(&store, "skypilot", &broken);
    let (state, logs) = finish(&store, &id);
    assert_eq!(state, "failed", "{logs}");
    assert!(!logs.contains("should-not-run"), "{logs}");

    let dstack = write(
        &scratch,
        "hello.dstack.yml",
        "type: task\nname: dstack-hello\nbackends: [local]\n\
         env:\n  - GREETING=hi\n\
         commands:\n  - echo \"first\"\n  - echo \"second $GREETING\"\n\
         resources:\n  cpu: 1\n  memory: 0.1\n",
    );
    let id = submit_from(&store, "dstack", &dstack);
    let (state, logs) = finish(&store, &id);
    assert_eq!(state, "succeeded", "{logs}");
    let (first, second) = (logs.find("first"), logs.find("second hi"));
    assert!(first.is_some() && second.is_some() && first < second, "{logs}");
}
