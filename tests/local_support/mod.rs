//! The real `canopy` binary over a temporary store, driven as an operator
//! drives it: `canopy engine --no-faults` as a child process ([`Engine`])
//! and the CLI ([`Cli`]) for `submit`, `status`, `logs` and the rest.
//! Shared by the tests that run real processes on the local provider
//! (`engine_local`, `tenants_local`).
//!
//! Every wait is a bounded poll for a condition ([`DEADLINE`], generous
//! for a loaded CI machine); nothing is timed.
#![allow(dead_code)]

use canopy::engine::model::{AttemptRecord, WorkloadId, WorkloadRecord, WorkloadState};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_canopy");
pub const DEADLINE: Duration = Duration::from_secs(90);

/// A `canopy engine` child process over one store; killed if dropped.
pub struct Engine {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Engine {
    /// Starts the engine and waits until it owns the store and says so;
    /// its output goes to numbered files under `scratch`.
    pub fn start(store: &Path, scratch: &Path, env: &[(&str, &str)]) -> Engine {
        Self::start_with(store, scratch, &["engine", "--no-faults"], env)
    }

    /// The same with other arguments after `--store STORE` (`serve
    /// --new-journal`, ...).
    pub fn start_with(store: &Path, scratch: &Path, args: &[&str], env: &[(&str, &str)]) -> Engine {
        let n = std::fs::read_dir(scratch).map(|d| d.count()).unwrap_or(0);
        let stderr = scratch.join(format!("engine-{n}.stderr"));
        let stdout = scratch.join(format!("engine-{n}.stdout"));
        let child = Command::new(BIN)
            .arg("--store")
            .arg(store)
            .args(args)
            .envs(env.iter().copied())
            .env("CANOPY_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let mut e = Engine { child: Some(child), stderr };
        let path = e.stderr.clone();
        wait_for("the engine to start", || {
            if let Some(status) = e.child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "the engine exited ({status}): {}",
                    std::fs::read_to_string(&path).unwrap_or_default()
                );
            }
            std::fs::read_to_string(&path).unwrap_or_default().contains("canopy serve: store")
        });
        e
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// SIGTERM, and wait for it to exit.
    pub fn stop(mut self) {
        let mut child = self.child.take().unwrap();
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        assert!(status.success(), "the engine exited with {status} after SIGTERM");
    }

    /// SIGKILL: the engine dies with whatever it had in hand.
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// What the engine has written to its standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls `ok` until it holds; fails the test naming `what` after
/// [`DEADLINE`].
pub fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `canopy --store <store> <args>` as the store's owner (an admin);
/// every output is kept so a test can search all it was shown.
pub struct Cli {
    store: PathBuf,
    pub outputs: std::cell::RefCell<Vec<u8>>,
}

impl Cli {
    pub fn new(store: &Path) -> Cli {
        Cli { store: store.to_path_buf(), outputs: Default::default() }
    }

    pub fn run(&self, args: &[&str]) -> Output {
        let out = Command::new(BIN).arg("--store").arg(&self.store).args(args).output().unwrap();
        let mut all = self.outputs.borrow_mut();
        all.extend_from_slice(&out.stdout);
        all.extend_from_slice(&out.stderr);
        out
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "canopy {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// `canopy submit SPEC --json` with `more` arguments; the new id.
    pub fn submit_with(&self, spec: &Path, more: &[&str]) -> WorkloadId {
        let mut args = vec!["submit", spec.to_str().unwrap(), "--json"];
        args.extend_from_slice(more);
        let out = self.ok(&args);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["id"].as_str().unwrap().parse().unwrap()
    }

    pub fn submit(&self, spec: &Path) -> WorkloadId {
        self.submit_with(spec, &[])
    }

    pub fn status(&self, id: WorkloadId) -> (WorkloadRecord, Vec<AttemptRecord>) {
        let out = self.ok(&["status", &id.to_string(), "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        (
            serde_json::from_value(v["workload"].clone()).unwrap(),
            serde_json::from_value(v["attempts"].clone()).unwrap(),
        )
    }

    /// Polls `canopy status` until `ok` holds of the workload and its
    /// attempts.
    pub fn wait(
        &self,
        id: WorkloadId,
        what: &str,
        ok: impl Fn(&WorkloadRecord, &[AttemptRecord]) -> bool,
    ) -> (WorkloadRecord, Vec<AttemptRecord>) {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let (w, attempts) = self.status(id);
            if ok(&w, &attempts) {
                return (w, attempts);
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what} of {id}: {w:?} {attempts:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_state(&self, id: WorkloadId, ok: impl Fn(WorkloadState) -> bool) -> WorkloadRecord {
        self.wait(id, "its state", |w, _| ok(w.state)).0
    }

    pub fn wait_final(&self, id: WorkloadId) -> WorkloadRecord {
        self.wait_state(id, |s| s.is_final())
    }

    /// `canopy logs ID --attempt N`.
    pub fn logs(&self, id: WorkloadId, attempt: u32) -> String {
        self.ok(&["logs", &id.to_string(), "--attempt", &attempt.to_string()])
    }
}

/// The live fleet as `GET /v1/fleet` on the store's socket shows it, once
/// the engine has published it (a just-started engine answers 503 until
/// then, for longer on a loaded machine).
pub fn live_fleet(store: &Path) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let deadline = Instant::now() + DEADLINE;
    rt.block_on(async {
        let c = canopy::client::Client::for_store(store).unwrap();
        loop {
            match c.get::<serde_json::Value>("/v1/fleet").await {
                Ok(v) => return v,
                Err(canopy::client::ClientError::Api { status: 503, .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("GET /v1/fleet: {e:?}"),
            }
        }
    })
}

// ── Specs and a test's directories (engine_local, engine_local_nodes) ──

/// Writes a spec pinned to the local provider that runs `script` with `sh -c`.
pub fn spec(dir: &Path, name: &str, script: &str, extra: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = {name:?}\n{extra}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n[constraints]\nproviders = [\"local\"]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

pub struct Setup {
    /// Dropped first: fails the test if anything it started outlives it.
    _reaper: crate::reap_support::Reaper,
    _tmp: tempfile::TempDir,
    pub store: PathBuf,
    pub scratch: PathBuf,
    pub specs: PathBuf,
}

pub fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (store, scratch, specs) =
        (tmp.path().join("home"), tmp.path().join("scratch"), tmp.path().join("specs"));
    for d in [&scratch, &specs] {
        std::fs::create_dir_all(d).unwrap();
    }
    Setup { _reaper: crate::reap_support::Reaper::new(tmp.path()), store, scratch, specs, _tmp: tmp }
}
