//! The crash test: `canopy engine` is killed with SIGKILL at seeded random
//! moments, many times, while workloads are being submitted and run, and
//! restarted each time. At the end every workload has succeeded, none was
//! submitted twice (submits are retried with an idempotency key), and none
//! ran twice: each appends its name to a shared marker file, and each name
//! appears there exactly once.
//!
//! Set `CANOPY_CRASH_SEED` to replay another sequence of kills.

mod reap_support;

use canopy::engine::model::{WorkloadRecord, WorkloadState};
use reap_support::Reaper;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const WORKLOADS: usize = 200;
const SUBMITTERS: usize = 4;
const KILLS: usize = 20;

/// splitmix64: a seeded sequence, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn start_engine(store: &Path, scratch: &Path, n: usize) -> Child {
    let stderr = scratch.join(format!("engine-{n}.stderr"));
    let mut child = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(["engine", "--no-faults"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("engine #{n} exited ({status}): {}", std::fs::read_to_string(&stderr).unwrap_or_default());
        }
        if std::fs::read_to_string(&stderr).unwrap_or_default().contains("canopy serve: store") {
            return child;
        }
        assert!(Instant::now() < deadline, "engine #{n} did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Submits through the CLI until the engine answers. A submit that found
/// no engine exits 4 having done nothing, and one interrupted by a kill may
/// or may not have been committed: sending it again with the same key is
/// safe either way.
fn submit(store: &Path, spec: &Path, key: &str, stop: &AtomicBool) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        assert!(!stop.load(Ordering::Relaxed), "stopped");
        let out = Command::new(BIN)
            .arg("--store")
            .arg(store)
            .arg("submit")
            .arg(spec)
            .args(["--idempotency-key", key, "--json"])
            .output()
            .unwrap();
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            return v["id"].as_str().unwrap().to_string();
        }
        assert!(
            Instant::now() < deadline,
            "submitting {key} kept failing: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn all_workloads(store: &Path) -> Vec<WorkloadRecord> {
    let out = Command::new(BIN)
        .arg("--store")
        .arg(store)
        .args(["status", "--json", "--limit", "100000"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `CANOPY_CRASH_SEED`, else the default sequence.
fn crash_seed() -> u64 {
    std::env::var("CANOPY_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20_241)
}

/// A temporary directory with the store, scratch (engine logs, the marker
/// file) and specs paths; the first holds them all.
fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let (store, scratch, specs) =
        (tmp.path().join("home"), tmp.path().join("scratch"), tmp.path().join("specs"));
    for d in [&scratch, &specs] {
        std::fs::create_dir_all(d).unwrap();
    }
    (tmp, store, scratch, specs)
}

/// Writes a small spec pinned to the local provider that runs `script`
/// with `sh -c`; `runtime` adds lines to its `[runtime]`.
fn write_spec(specs: &Path, name: &str, script: &str, runtime: &str) -> PathBuf {
    let text = format!(
        "name = {name:?}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n{runtime}\n\
         [resources]\ncpu_cores = 0.05\nmemory_gb = 0.01\n\n[constraints]\nproviders = [\"local\"]\n"
    );
    let path = specs.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn killing_the_engine_at_random_never_loses_or_repeats_a_workload() {
    let seed = crash_seed();
    eprintln!("crash test seed {seed} (CANOPY_CRASH_SEED)");
    let mut rng = Rng(seed);
    let (_tmp, store, scratch, specs) = dirs();
    let _reaper = Reaper::new(_tmp.path());
    let marker = scratch.join("ran");

    let mut names = Vec::new();
    let mut paths: Vec<PathBuf> = Vec::new();
    for i in 0..WORKLOADS {
        let name = format!("crash-{i:03}");
        let script = format!("sleep 0.{:03}; echo {name} >> {}", rng.below(301), marker.display());
        paths.push(write_spec(&specs, &name, &script, ""));
        names.push(name);
    }

    let mut engine = start_engine(&store, &scratch, 0);
    let stop = Arc::new(AtomicBool::new(false));
    let ids: Arc<Mutex<BTreeMap<String, String>>> = Arc::default();
    let submitters: Vec<_> = (0..SUBMITTERS)
        .map(|t| {
            let (store, stop, ids) = (store.clone(), stop.clone(), ids.clone());
            let mine: Vec<(String, PathBuf)> =
                names.iter().cloned().zip(paths.iter().cloned()).skip(t).step_by(SUBMITTERS).collect();
            std::thread::spawn(move || {
                for (name, path) in mine {
                    let id = submit(&store, &path, &format!("key-{name}"), &stop);
                    ids.lock().unwrap().insert(name, id);
                }
            })
        })
        .collect();

    // Kill at random moments while submissions and runs are in flight.
    for k in 1..=KILLS {
        std::thread::sleep(Duration::from_millis(100 + rng.below(900)));
        engine.kill().unwrap();
        engine.wait().unwrap();
        // Sometimes stay down a moment: submits then find no engine and retry.
        if rng.below(3) == 0 {
            std::thread::sleep(Duration::from_millis(rng.below(500)));
        }
        engine = start_engine(&store, &scratch, k);
    }
    for s in submitters {
        if let Err(e) = s.join() {
            stop.store(true, Ordering::Relaxed);
            std::panic::resume_unwind(e);
        }
    }

    let deadline = Instant::now() + Duration::from_secs(90);
    let list = loop {
        let list = all_workloads(&store);
        if list.len() >= WORKLOADS && list.iter().all(|w| w.state.is_final()) {
            break list;
        }
        if Instant::now() > deadline {
            let stuck: Vec<_> = list
                .iter()
                .filter(|w| !w.state.is_final())
                .map(|w| (w.id, w.state, w.reason.clone()))
                .collect();
            panic!("{} of {} workloads not final: {stuck:?}", stuck.len(), list.len());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    engine.kill().unwrap();
    engine.wait().unwrap();

    // Nothing was submitted twice: one workload per name, with the id the
    // submitter was told.
    let ids = ids.lock().unwrap();
    assert_eq!(list.len(), WORKLOADS, "duplicate submissions");
    let by_name: BTreeMap<&str, &WorkloadRecord> = list.iter().map(|w| (w.name.as_str(), w)).collect();
    assert_eq!(by_name.len(), WORKLOADS);
    for (name, id) in ids.iter() {
        assert_eq!(by_name[name.as_str()].id.to_string(), *id, "{name}");
    }
    // Every one succeeded.
    let failed: Vec<_> = list.iter().filter(|w| w.state != WorkloadState::Succeeded).collect();
    assert!(failed.is_empty(), "not succeeded: {failed:#?}");
    // And none ran twice.
    let ran = std::fs::read_to_string(&marker).unwrap();
    let mut seen = BTreeMap::<&str, usize>::new();
    for line in ran.lines() {
        *seen.entry(line).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
    let expected: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let got: BTreeSet<&str> = seen.keys().copied().collect();
    assert_eq!(got, expected, "every workload ran");
}

/// The cancel round: running work is cancelled while the engine is killed
/// again and again before the stops are confirmed (each workload ignores
/// SIGTERM, so every stop waits out its grace). A cancel the CLI saw
/// accepted is kept: every workload ends cancelled, none is relaunched,
/// and none runs a second time.
#[test]
fn cancels_survive_kills_before_the_stop_is_confirmed() {
    const N: usize = 20;
    let mut rng = Rng(crash_seed() ^ 0xca9ce1);
    let (_tmp, store, scratch, specs) = dirs();
    let _reaper = Reaper::new(_tmp.path());
    let marker = scratch.join("ran");
    let mut engine = start_engine(&store, &scratch, 0);
    let stop = AtomicBool::new(false);
    let mut ids = Vec::new();
    for i in 0..N {
        let name = format!("stubborn-{i:02}");
        let script = format!("trap '' TERM; echo {name} >> {}; sleep 60", marker.display());
        let path = write_spec(&specs, &name, &script, "stop_grace = \"2s\"");
        ids.push(submit(&store, &path, &format!("key-{name}"), &stop));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&marker).map_or(0, |s| s.lines().count()) < N {
        assert!(Instant::now() < deadline, "the workloads did not all start");
        std::thread::sleep(Duration::from_millis(50));
    }

    let mut kills = 0;
    for (i, id) in ids.iter().enumerate() {
        // Cancel until the engine answers; an answer means journalled.
        loop {
            let out = Command::new(BIN).arg("--store").arg(&store).args(["cancel", id]).output().unwrap();
            if out.status.success() {
                break;
            }
            assert_eq!(out.status.code(), Some(4), "{}", String::from_utf8_lossy(&out.stderr));
            std::thread::sleep(Duration::from_millis(50));
        }
        if i % 4 == 3 || rng.below(4) == 0 {
            engine.kill().unwrap();
            engine.wait().unwrap();
            kills += 1;
            engine = start_engine(&store, &scratch, kills);
        }
    }
    engine.kill().unwrap();
    engine.wait().unwrap();
    kills += 1;
    engine = start_engine(&store, &scratch, kills);

    let deadline = Instant::now() + Duration::from_secs(120);
    let list = loop {
        let list = all_workloads(&store);
        if list.len() >= N && list.iter().all(|w| w.state.is_final()) {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "not final: {:?}",
            list.iter().map(|w| (w.id, w.state)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    engine.kill().unwrap();
    engine.wait().unwrap();
    let ran = std::fs::read_to_string(&marker).unwrap();
    let lost = N.saturating_sub(list.len());
    let duplicated = list.len().saturating_sub(N);
    let not_cancelled: Vec<_> = list.iter().filter(|w| w.state != WorkloadState::Cancelled).collect();
    let again = ran.lines().count().saturating_sub(N);
    eprintln!(
        "cancel round: {kills} kills, {N} workloads, {lost} lost, {duplicated} duplicated, \
         {} not cancelled, {again} cancelled-then-ran",
        not_cancelled.len()
    );
    assert_eq!((lost, duplicated, again), (0, 0, 0), "{ran}");
    assert!(not_cancelled.is_empty(), "{not_cancelled:#?}");
    assert!(list.iter().all(|w| w.attempts == 1), "relaunched: {list:#?}");
}
