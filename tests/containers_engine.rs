//! Container workloads through the engine, as a user runs them (issue 29):
//! a container that survives the engine's `kill -9` is adopted by the
//! restarted engine, not run again; and `max_runtime` stops a container
//! (class `timeout`). Skips visibly where no container can run, except
//! under `CANOPY_ENGINES=require` (CI), where it fails.

use canopy::engine::model::{AttemptRecord, WorkloadId, WorkloadRecord, WorkloadState};
use canopy::failure::FailureClass;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const DEADLINE: Duration = Duration::from_secs(60);

fn image() -> String {
    std::env::var("CANOPY_TEST_IMAGE").unwrap_or_else(|_| "localhost/canopy-test:latest".into())
}

/// Whether `podman run --rm IMAGE true` works; else the skip (or, where
/// containers are required, the failure) says why.
fn containers_run(test: &str) -> bool {
    let why = match Command::new("podman").args(["run", "--rm", "--pull=never", &image(), "true"]).output() {
        Ok(out) if out.status.success() => return true,
        Ok(out) => format!(
            "`podman run --rm {} true` failed: {}",
            image(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("podman could not start: {e}"),
    };
    let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require")
        || std::env::var_os("CANOPY_TEST_REQUIRE_CONTAINERS").is_some();
    assert!(!require, "{test}: containers are required here but {why}; run scripts/containers/setup.sh");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
    false
}

struct Engine(Option<Child>);

impl Engine {
    fn start(store: &Path, log: &Path) -> Engine {
        let child = Command::new(BIN)
            .arg("--store")
            .arg(store)
            .args(["engine", "--no-faults"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        wait_for("the engine to start", || {
            std::fs::read_to_string(log).unwrap_or_default().contains("canopy serve: store")
        });
        Engine(Some(child))
    }

    fn kill9(mut self) {
        let mut c = self.0.take().unwrap();
        unsafe { libc::kill(c.id() as i32, libc::SIGKILL) };
        let _ = c.wait();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn canopy(store: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN).arg("--store").arg(store).args(args).output().unwrap();
    assert!(out.status.success(), "canopy {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn submit(store: &Path, dir: &Path, name: &str, script: &str, constraints: &str) -> WorkloadId {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = {name:?}\n[runtime]\nimage = {:?}\nstop_grace = \"2s\"\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n{constraints}\n",
        image()
    );
    std::fs::write(&path, text).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&canopy(store, &["submit", path.to_str().unwrap(), "--json"])).unwrap();
    v["id"].as_str().unwrap().parse().unwrap()
}

fn status(store: &Path, id: WorkloadId) -> (WorkloadRecord, Vec<AttemptRecord>) {
    let v: serde_json::Value =
        serde_json::from_str(&canopy(store, &["status", &id.to_string(), "--json"])).unwrap();
    (
        serde_json::from_value(v["workload"].clone()).unwrap(),
        serde_json::from_value(v["attempts"].clone()).unwrap(),
    )
}

fn wait_final(store: &Path, id: WorkloadId) -> (WorkloadRecord, Vec<AttemptRecord>) {
    let mut last = None;
    wait_for("the workload to end", || {
        let s = status(store, id);
        let done = s.0.state.is_final();
        last = Some(s);
        done
    });
    last.unwrap()
}

/// Every file named `name` under `dir`.
fn find(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            find(&p, name, out);
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push(p);
        }
    }
}

#[test]
fn a_container_survives_the_engines_kill_9_and_is_adopted_not_run_again() {
    if !containers_run("a_container_survives_the_engines_kill_9_and_is_adopted_not_run_again") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("home");
    let engine = Engine::start(&store, &t.path().join("engine-1.log"));
    let id = submit(
        &store,
        t.path(),
        "adopt",
        "echo start >> $CANOPY_OUTPUT_DIR/starts; while [ ! -e $CANOPY_OUTPUT_DIR/go ]; do sleep 0.2; done; echo done",
        "",
    );
    let mut starts = Vec::new();
    wait_for("the container to start", || {
        starts.clear();
        find(&store, "starts", &mut starts);
        !starts.is_empty()
    });
    engine.kill9();
    let _engine = Engine::start(&store, &t.path().join("engine-2.log"));
    std::fs::write(starts[0].with_file_name("go"), "").unwrap();
    let (w, attempts) = wait_final(&store, id);
    assert_eq!(w.state, WorkloadState::Succeeded, "{attempts:?}");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    let mut all = Vec::new();
    find(&store, "starts", &mut all);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(std::fs::read_to_string(&all[0]).unwrap(), "start\n", "run once");
}

#[test]
fn max_runtime_stops_a_container_as_timeout() {
    if !containers_run("max_runtime_stops_a_container_as_timeout") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let store = t.path().join("home");
    let _engine = Engine::start(&store, &t.path().join("engine.log"));
    let id = submit(&store, t.path(), "slow", "while :; do sleep 0.2; done", "max_runtime = \"3s\"");
    let (w, attempts) = wait_final(&store, id);
    assert_eq!(w.state, WorkloadState::Failed, "{attempts:?}");
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0].class, Some(FailureClass::Timeout), "{attempts:?}");
}
