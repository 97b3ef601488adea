//! The journal across processes: store ownership, and what a killed engine
//! leaves behind. Child processes re-run this test binary with
//! `CANOPY_JOURNAL_CHILD` set; `child` then plays the part asked of it.

use canopy::engine::model::*;
use canopy::journal::{Journal, JournalError, WorkloadFilter, acquire_owner};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "CANOPY_JOURNAL_CHILD";
const STORE: &str = "CANOPY_JOURNAL_STORE";

/// Not a test of its own: the body of the child processes below. (libtest
/// prints `test child ... ` first, so the child's line ends with its word.)
#[test]
fn child() {
    let (Ok(role), Ok(store)) = (std::env::var(ROLE), std::env::var(STORE)) else { return };
    let store = Path::new(&store);
    match role.as_str() {
        "own" => {
            let _lock = acquire_owner(store, Millis(1_795_976_411_000)).unwrap();
            println!("owned");
            std::thread::sleep(Duration::from_secs(60));
        }
        "append" => {
            let mut j = Journal::open(store).unwrap();
            for id in 1.. {
                j.append(&batch(id)).unwrap();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn(role: &str, store: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(STORE, store)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// What the engine writes when a workload is submitted: its row, an
/// attempt, and two events, in one append.
fn batch(id: u64) -> Vec<Record> {
    let spec = serde_json::from_value(serde_json::json!({
        "name": "train", "runtime": { "command": ["python", "train.py"] },
    }))
    .unwrap();
    let workload = WorkloadRecord {
        id: WorkloadId(id),
        name: "train".into(),
        spec,
        spec_hash: "0".repeat(64),
        submitted_by: None,
        acknowledged: None,
        exclusions: None,
        retried_as: None,
        tenant: None,
        idempotency_key: Some(format!("key-{id}")),
        priority: 50,
        state: WorkloadState::Placing,
        submitted_at: Millis(1),
        updated_at: Millis(1),
        attempts: 1,
        app_failures: 0,
        not_before: None,
        cost_usd: 0.0,
        est_cost_usd: 0.0,
        reason: None,
        class: None,
    };
    let attempt = AttemptRecord {
        id: AttemptId { workload: WorkloadId(id), n: 1 },
        provider: "sim".into(),
        pool: "sim/a".into(),
        node: "n1".into(),
        region: "eu".into(),
        state: AttemptState::Placing,
        price_per_hour: 1.0,
        est_cost_usd: 1.0,
        gpus: 1,
        gpu_memory_gb: 80.0,
        score: 50.0,
        score_breakdown: String::new(),
        placed_at: Millis(1),
        started_at: None,
        ended_at: None,
        exit_code: None,
        class: None,
        rule: None,
        evidence: None,
        cost_usd: 0.0,
        provider_ref: None,
        nonce: String::new(),
        stop: None,
        nodes: Vec::new(),
        checkpoint: None,
    };
    let event = |kind, attempt| {
        Record::Event(EventRecord {
            at: Millis(1),
            workload: WorkloadId(id),
            attempt,
            kind,
            message: String::new(),
        })
    };
    vec![
        Record::Workload(Box::new(workload)),
        event(EventKind::Submitted, None),
        Record::Attempt(Box::new(attempt)),
        event(EventKind::Placed, Some(AttemptId { workload: WorkloadId(id), n: 1 })),
    ]
}

#[test]
fn one_owner_at_a_time_within_a_process() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("canopy.db");
    let lock = acquire_owner(&store, Millis(0)).unwrap();
    let err = acquire_owner(&store, Millis(0)).unwrap_err();
    assert!(matches!(err, JournalError::Owned { .. }), "{err}");
    assert!(err.to_string().contains(&format!("pid {}", std::process::id())), "{err}");
    drop(lock);
    acquire_owner(&store, Millis(0)).unwrap();
}

#[test]
fn another_process_owning_the_store_is_named_and_kill_9_frees_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("canopy.db");
    let mut owner = spawn("own", &store);
    let stdout = BufReader::new(owner.stdout.take().unwrap());
    assert!(
        stdout.lines().map_while(Result::ok).any(|l| l.ends_with("owned")),
        "the child never took the store"
    );

    let err = acquire_owner(&store, Millis(0)).unwrap_err();
    let msg = err.to_string();
    let expected = format!(
        "the store {} is owned by another engine (pid {}, since 2026-11-29 18:20:11 UTC); \
         stop it or use --store to pick another store",
        store.display(),
        owner.id()
    );
    assert_eq!(msg, expected);

    owner.kill().unwrap(); // SIGKILL on Unix: no destructors run.
    owner.wait().unwrap();
    let lock = acquire_owner(&store, Millis(5)).unwrap();
    let contents = std::fs::read_to_string(lock.path()).unwrap();
    assert_eq!(contents, format!("pid={}\nsince=5\n", std::process::id()));
}

#[test]
fn an_engine_killed_mid_append_leaves_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("canopy.db");
    drop(Journal::open(&store).unwrap());
    let mut writer = spawn("append", &store);
    let reader = Journal::open(&store).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while reader.last_event_seq().unwrap() < 2_000 {
        assert!(Instant::now() < deadline, "the writer made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    writer.kill().unwrap();
    writer.wait().unwrap();

    let j = Journal::open(&store).unwrap();
    let raw = rusqlite::Connection::open(&store).unwrap();
    let check: String = raw.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
    let count = |table: &str| -> u64 {
        raw.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get::<_, i64>(0)).unwrap() as u64
    };
    let workloads = count("workloads");
    assert!(workloads >= 1_000);
    // Every batch is all there or not there at all.
    assert_eq!(count("attempts"), workloads);
    assert_eq!(count("events"), 2 * workloads);
    let live = j.load_live(canopy::journal::HealthWindow { since: Millis(0), limit: 0 }).unwrap();
    assert_eq!(live.max_workload_id, Some(WorkloadId(workloads)));
    assert_eq!(live.workloads.len() as u64, workloads);
    let newest = j.workloads(&WorkloadFilter { limit: Some(1), ..Default::default() }).unwrap();
    assert_eq!(j.events(newest[0].id).unwrap().len(), 2);
}
