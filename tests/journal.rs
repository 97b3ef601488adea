//! The journal as the engine, the CLI and a second console use it.

use canopy::engine::model::*;
use canopy::failure::FailureClass;
use canopy::journal::{HealthWindow, Journal, JournalError, SCHEMA_VERSION, WorkloadFilter};
use canopy::spec::Spec;
use journal_support::Store;

mod journal_support;

on_both_stores!(
    a_sqlite_store_is_copied_whole,
    every_record_kind_round_trips,
    the_last_write_of_a_workload_or_attempt_wins,
    events_come_back_in_append_order_and_can_be_tailed,
    load_live_brings_back_exactly_the_unfinished_work,
    an_idempotency_key_finds_the_earlier_submission,
    a_batch_that_fails_halfway_leaves_nothing_behind,
    an_event_naming_another_workloads_attempt_is_refused,
    workloads_can_be_listed_by_state_name_and_time,
    every_commit_is_a_numbered_batch_a_reader_can_resume_from,
    audit_records_and_who_submitted_are_kept,
    the_audit_trail_is_filtered_by_action_outcome_target_and_paged_until,
    a_new_store_is_created_migrated_and_reopened,
    a_store_from_a_newer_canopy_is_refused_clearly,
    stores_that_are_not_canopy_stores_are_refused_untouched,
    an_operators_node_intent_is_kept_until_lifted,
    unresolved_failures_are_found_whatever_their_age,
    the_tenancy_in_force_token_tenants_and_tenant_listings_are_kept,
    a_webhook_delivery_is_pending_until_its_try_is_written_and_survives_a_reopen,
    a_batch_costs_the_same_round_trips_whatever_its_size,
);

fn spec(name: &str) -> Spec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "priority": 70,
        "runtime": { "command": ["python", "train.py"], "env": { "EPOCHS": "3" }, "secrets": ["HF_TOKEN"] },
        "resources": { "gpus": 2, "gpu_memory_gb": { "min": 40 } },
        "retry": { "max_attempts": 4, "app_errors": 1 },
    }))
    .unwrap()
}

fn workload(id: u64, state: WorkloadState) -> WorkloadRecord {
    WorkloadRecord {
        id: WorkloadId(id),
        name: format!("train-{id}"),
        spec: spec(&format!("train-{id}")).into(),
        spec_hash: format!("{id:064x}"),
        submitted_by: None,
        acknowledged: None,
        exclusions: None,
        retried_as: None,
        tenant: None,
        idempotency_key: None,
        priority: 70,
        state,
        submitted_at: Millis(1_000 + id as i64),
        updated_at: Millis(2_000 + id as i64),
        attempts: 0,
        app_failures: 0,
        not_before: None,
        cost_usd: 0.0,
        est_cost_usd: 1.5,
        reason: None,
        class: None,
    }
}

fn attempt(w: u64, n: u32, state: AttemptState) -> AttemptRecord {
    AttemptRecord {
        id: AttemptId { workload: WorkloadId(w), n },
        provider: "sim".into(),
        pool: "sim/h100-eu".into(),
        node: format!("node-{n}"),
        region: "eu-west".into(),
        state,
        price_per_hour: 4.25,
        est_cost_usd: 8.5,
        gpus: 2,
        gpu_memory_gb: 80.0,
        score: 87.5,
        score_breakdown: "cost=30 speed=25 health=32.5".into(),
        placed_at: Millis(3_000),
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
    }
}

fn event(w: u64, attempt: Option<u32>, kind: EventKind, message: &str) -> Record {
    Record::Event(EventRecord {
        at: Millis(5_000),
        workload: WorkloadId(w),
        attempt: attempt.map(|n| AttemptId { workload: WorkloadId(w), n }),
        kind,
        message: message.into(),
    })
}

fn health(at: i64, node: &str, class: Option<FailureClass>) -> HealthObservation {
    HealthObservation {
        at: Millis(at),
        provider: "sim".into(),
        pool: "sim/h100-eu".into(),
        node: node.into(),
        class,
        ran_s: 60.0,
        free: false,
        lift: false,
    }
}

fn w(r: WorkloadRecord) -> Record {
    Record::Workload(Box::new(r))
}

fn a(r: AttemptRecord) -> Record {
    Record::Attempt(Box::new(r))
}

fn ids(ws: &[WorkloadRecord]) -> Vec<u64> {
    ws.iter().map(|w| w.id.0).collect()
}

fn every_record_kind_round_trips(s: &mut Store) {
    let mut j = s.open();
    let mut full = workload(7, WorkloadState::Failed);
    full.idempotency_key = Some("nightly-2026-11-29".into());
    full.attempts = 2;
    full.app_failures = 1;
    full.not_before = Some(Millis(9_000));
    full.cost_usd = 12.75;
    full.reason = Some("gpu-oom on every pool with 80 GB".into());
    full.class = Some(FailureClass::GpuOom);
    full.exclusions = Some(canopy::engine::model::Exclusions {
        nodes: vec!["node-1".into()],
        pools: vec!["cloud/h100".into()],
        since: Some(Millis(4_500)),
        until: Some(Millis(1_804_500)),
    });
    let bare = workload(8, WorkloadState::Queued);
    let mut ended = attempt(7, 1, AttemptState::Failed);
    ended.started_at = Some(Millis(3_500));
    ended.ended_at = Some(Millis(4_500));
    ended.exit_code = Some(-9);
    ended.class = Some(FailureClass::GpuOom);
    ended.rule = Some("gpu-oom/cuda-oom".into());
    ended.evidence = Some("CUDA out of memory. Tried to allocate 2.00 GiB".into());
    ended.cost_usd = 1.25;
    ended.provider_ref = Some("pid 4242".into());
    ended.nonce = "00ff00ff00ff00ff".into();
    let mut pending = attempt(7, 2, AttemptState::Terminating);
    pending.nonce = "0123456789abcdef".into();
    pending.stop = Some(canopy::failure::ProviderEnd::Cancelled);
    // A free stop keeps that it was free: a restart must not hold it
    // against the pool it once did not count against.
    let free = HealthObservation { free: true, ..health(12, "node-3", Some(FailureClass::Preempted)) };
    let observations = [health(10, "node-1", Some(FailureClass::Node)), health(11, "node-2", None), free];

    j.append(&[
        w(full.clone()),
        w(bare.clone()),
        a(ended.clone()),
        a(pending.clone()),
        event(7, None, EventKind::Submitted, "submitted by alice"),
        event(7, Some(1), EventKind::Failed, "gpu-oom (rule gpu-oom/cuda-oom)"),
        Record::Health(observations[0].clone()),
        Record::Health(observations[1].clone()),
        Record::Health(observations[2].clone()),
    ])
    .unwrap();

    assert_eq!(j.workload(WorkloadId(7)).unwrap(), Some(full));
    assert_eq!(j.workload(WorkloadId(8)).unwrap(), Some(bare));
    assert_eq!(j.workload(WorkloadId(9)).unwrap(), None);
    assert_eq!(j.attempts(WorkloadId(7)).unwrap(), vec![ended, pending]);
    let events = j.events(WorkloadId(7)).unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].attempt, None);
    assert_eq!(events[1].attempt, Some(AttemptId { workload: WorkloadId(7), n: 1 }));
    assert_eq!(events[1].kind, EventKind::Failed);
    assert_eq!(events[1].message, "gpu-oom (rule gpu-oom/cuda-oom)");
    assert_eq!(j.health_observations(Millis(0)).unwrap(), observations.to_vec());
}

fn the_last_write_of_a_workload_or_attempt_wins(s: &mut Store) {
    let mut j = s.open();
    j.append(&[w(workload(1, WorkloadState::Queued)), a(attempt(1, 1, AttemptState::Placing))]).unwrap();
    let mut running = workload(1, WorkloadState::Running);
    running.attempts = 1;
    let mut launched = attempt(1, 1, AttemptState::Launching);
    launched.provider_ref = Some("job 991".into());
    let mut started = launched.clone();
    started.state = AttemptState::Running;
    started.started_at = Some(Millis(3_100));
    // Two writes of the same rows in one batch: the later one stays.
    j.append(&[w(workload(1, WorkloadState::Placing)), a(launched), w(running.clone()), a(started.clone())])
        .unwrap();

    assert_eq!(j.workload(WorkloadId(1)).unwrap(), Some(running));
    assert_eq!(j.attempts(WorkloadId(1)).unwrap(), vec![started]);
}

fn events_come_back_in_append_order_and_can_be_tailed(s: &mut Store) {
    let mut j = s.open();
    assert_eq!(j.last_event_seq().unwrap(), 0);
    j.append(&[w(workload(1, WorkloadState::Queued)), w(workload(2, WorkloadState::Queued))]).unwrap();
    // Same timestamp throughout: order must come from the append, not `at`.
    let kinds =
        [EventKind::Submitted, EventKind::Placed, EventKind::Launched, EventKind::Running, EventKind::Ended];
    for (i, kind) in kinds.iter().enumerate() {
        j.append(&[
            event(1, Some(1), *kind, &format!("one {i}")),
            event(2, None, *kind, &format!("two {i}")),
        ])
        .unwrap();
    }
    let ones: Vec<String> = j.events(WorkloadId(1)).unwrap().into_iter().map(|e| e.message).collect();
    assert_eq!(ones, ["one 0", "one 1", "one 2", "one 3", "one 4"]);

    // A console tails in pages of 3 from the start.
    let mut seen = Vec::new();
    let mut last = 0;
    loop {
        let page = j.events_since(last, 3).unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 3);
        last = page.last().unwrap().0;
        seen.extend(page.into_iter().map(|(_, e)| e.message));
    }
    assert_eq!(seen.len(), 10);
    assert_eq!(seen[..4], ["one 0", "two 0", "one 1", "two 1"]);
    assert_eq!(last, j.last_event_seq().unwrap());
    j.append(&[event(2, None, EventKind::Succeeded, "done")]).unwrap();
    let new = j.events_since(last, 100).unwrap();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].1.message, "done");
}

fn load_live_brings_back_exactly_the_unfinished_work(s: &mut Store) {
    let mut j = s.open();
    let states = [
        (1, WorkloadState::Succeeded),
        (2, WorkloadState::Queued),
        (3, WorkloadState::Failed),
        (4, WorkloadState::Running),
        (5, WorkloadState::Placing),
        (6, WorkloadState::Launching),
        (7, WorkloadState::Cancelled),
    ];
    let mut records = Vec::new();
    for (id, state) in states {
        records.push(w(workload(id, state)));
        records.push(a(attempt(id, 1, AttemptState::Failed)));
        records.push(a(attempt(id, 2, AttemptState::Running)));
    }
    for at in 0..10 {
        records.push(Record::Health(health(at * 100, &format!("node-{at}"), None)));
    }
    j.append(&records).unwrap();
    // Workload 4 finishes later: it must drop out of the live set.
    j.append(&[w(workload(4, WorkloadState::Succeeded))]).unwrap();

    let got = j.load_live(HealthWindow { since: Millis(300), limit: 4 }).unwrap();
    assert_eq!(ids(&got.workloads), [2, 5, 6]);
    assert_eq!(got.workloads[0], workload(2, WorkloadState::Queued));
    let attempt_ids: Vec<String> = got.attempts.iter().map(|a| a.id.to_string()).collect();
    assert_eq!(attempt_ids, ["w-2.1", "w-2.2", "w-5.1", "w-5.2", "w-6.1", "w-6.2"]);
    // The highest id is a finished workload's: the next id must still pass it.
    assert_eq!(got.max_workload_id, Some(WorkloadId(7)));
    // The 4 newest observations at or after 300, oldest first.
    let nodes: Vec<&str> = got.health.iter().map(|h| h.node.as_str()).collect();
    assert_eq!(nodes, ["node-6", "node-7", "node-8", "node-9"]);

    let empty = s.another().open().load_live(HealthWindow { since: Millis(0), limit: 10 }).unwrap();
    assert_eq!(empty.max_workload_id, None);
    assert!(empty.workloads.is_empty() && empty.attempts.is_empty() && empty.health.is_empty());
}

fn an_idempotency_key_finds_the_earlier_submission(s: &mut Store) {
    let mut j = s.open();
    let mut first = workload(1, WorkloadState::Running);
    first.idempotency_key = Some("nightly-eval".into());
    j.append(&[w(first.clone()), w(workload(2, WorkloadState::Queued))]).unwrap();
    assert_eq!(j.workload_by_key("nightly-eval").unwrap(), Some(first));
    assert_eq!(j.workload_by_key("other").unwrap(), None);
}

fn a_batch_that_fails_halfway_leaves_nothing_behind(s: &mut Store) {
    let mut j = s.open();
    let mut first = workload(1, WorkloadState::Queued);
    first.idempotency_key = Some("k".into());
    j.append(&[w(first)]).unwrap();

    // The third record reuses a key: the store refuses the whole batch.
    let mut dup = workload(3, WorkloadState::Queued);
    dup.idempotency_key = Some("k".into());
    let err = j
        .append(&[w(workload(2, WorkloadState::Queued)), event(2, None, EventKind::Submitted, "x"), w(dup)])
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("could not append records") && msg.contains("idempotency_key"), "{msg}");

    assert_eq!(j.workload(WorkloadId(2)).unwrap(), None);
    assert!(j.events(WorkloadId(2)).unwrap().is_empty());
    let live = j.load_live(HealthWindow { since: Millis(0), limit: 1 }).unwrap();
    assert_eq!(ids(&live.workloads), [1]);
    assert_eq!(live.max_workload_id, Some(WorkloadId(1)));
    // And the handle keeps working.
    j.append(&[w(workload(2, WorkloadState::Queued))]).unwrap();
}

fn an_event_naming_another_workloads_attempt_is_refused(s: &mut Store) {
    let mut j = s.open();
    let bad = Record::Event(EventRecord {
        at: Millis(1),
        workload: WorkloadId(1),
        attempt: Some(AttemptId { workload: WorkloadId(2), n: 1 }),
        kind: EventKind::Placed,
        message: String::new(),
    });
    let err = j.append(&[bad]).unwrap_err();
    assert!(matches!(err, JournalError::Invalid { .. }), "{err}");
    assert!(err.to_string().contains("w-2.1"), "{err}");
}

fn workloads_can_be_listed_by_state_name_and_time(s: &mut Store) {
    let mut j = s.open();
    let mut records = Vec::new();
    for id in 1..=6 {
        let state = if id % 2 == 0 { WorkloadState::Running } else { WorkloadState::Succeeded };
        let mut r = workload(id, state);
        r.name = if id <= 3 { format!("Eval-{id}") } else { format!("train-{id}") };
        records.push(w(r));
    }
    j.append(&records).unwrap();

    assert_eq!(ids(&j.workloads(&WorkloadFilter::default()).unwrap()), [6, 5, 4, 3, 2, 1]);
    let running = WorkloadFilter { states: vec![WorkloadState::Running], ..Default::default() };
    assert_eq!(ids(&j.workloads(&running).unwrap()), [6, 4, 2]);
    let evals = WorkloadFilter { name_contains: Some("eval".into()), ..Default::default() };
    assert_eq!(ids(&j.workloads(&evals).unwrap()), [3, 2, 1]);
    let recent = WorkloadFilter { updated_since: Some(Millis(2_004)), limit: Some(2), ..Default::default() };
    assert_eq!(ids(&j.workloads(&recent).unwrap()), [6, 5]);
    let both = WorkloadFilter {
        states: vec![WorkloadState::Running, WorkloadState::Queued],
        name_contains: Some("EVAL".into()),
        ..Default::default()
    };
    assert_eq!(ids(&j.workloads(&both).unwrap()), [2]);
}

fn every_commit_is_a_numbered_batch_a_reader_can_resume_from(s: &mut Store) {
    let mut j = s.open();
    assert_eq!(j.append(&[]).unwrap(), 0, "an empty batch writes nothing");
    let s1 = j.append(&[w(workload(1, WorkloadState::Queued))]).unwrap();
    let s2 =
        j.append(&[w(workload(2, WorkloadState::Queued)), w(workload(1, WorkloadState::Running))]).unwrap();
    let s3 = j.append(&[w(workload(2, WorkloadState::Failed))]).unwrap();
    assert!(s1 < s2 && s2 < s3, "sequence numbers only grow: {s1} {s2} {s3}");
    // A second connection (another process) reads them back in order.
    let reader = s.open();
    let after_first = reader.batches_since(s1, 100).unwrap();
    assert_eq!(after_first.iter().map(|b| b.seq).collect::<Vec<_>>(), [s2, s3]);
    assert_eq!(after_first[0].records.len(), 2, "a batch keeps every record of its commit");
    assert_eq!(reader.batch_range().unwrap(), (s1, s3));
}

fn audit_records_and_who_submitted_are_kept(s: &mut Store) {
    use canopy::engine::model::AuditRecord;
    let mut j = s.open();
    let mut rec = workload(1, WorkloadState::Queued);
    rec.submitted_by = Some("ci-bot".into());
    let audit = AuditRecord {
        at: Millis(5),
        principal: "ci-bot".into(),
        origin: "127.0.0.1:5000".into(),
        action: "submit".into(),
        target: Some("w-1".into()),
        outcome: "ok".into(),
        reason: None,
    };
    j.append(&[w(rec), Record::Audit(Box::new(audit.clone()))]).unwrap();
    assert_eq!(j.workload(WorkloadId(1)).unwrap().unwrap().submitted_by.as_deref(), Some("ci-bot"));
    let trail = j.audit(&canopy::journal::AuditFilter::default()).unwrap();
    assert_eq!(trail, [audit]);
}

fn the_audit_trail_is_filtered_by_action_outcome_target_and_paged_until(s: &mut Store) {
    use canopy::engine::model::AuditRecord;
    use canopy::journal::AuditFilter;
    let rec = |at: i64, action: &str, target: &str, outcome: &str| AuditRecord {
        at: Millis(at),
        principal: "alice".into(),
        origin: "local".into(),
        action: action.into(),
        target: Some(target.into()),
        outcome: outcome.into(),
        reason: None,
    };
    let records = [
        rec(1, "cordon", "fra-01", "ok"),
        rec(2, "uncordon", "fra-01", "ok"),
        rec(3, "cancel", "w_1", "denied: not yours"),
        rec(4, "cordon", "fra-02", "ok"),
    ];
    j_append_audit(s, &records, |j| {
        let got = |f: AuditFilter| j.audit(&f).unwrap().iter().map(|a| a.at.0).collect::<Vec<_>>();
        assert_eq!(got(AuditFilter { action: Some("CORD".into()), ..Default::default() }), [4, 1]);
        assert_eq!(got(AuditFilter { outcome: Some("denied".into()), ..Default::default() }), [3]);
        assert_eq!(got(AuditFilter { target: Some("fra-01".into()), ..Default::default() }), [2, 1]);
        // `_` is a character, not LIKE's wildcard.
        assert_eq!(got(AuditFilter { target: Some("w_".into()), ..Default::default() }), [3]);
        assert_eq!(got(AuditFilter { target: Some("w".into()), ..Default::default() }), [3]);
        assert!(got(AuditFilter { target: Some("wx".into()), ..Default::default() }).is_empty());
        assert_eq!(got(AuditFilter { until: Some(Millis(3)), limit: Some(2), ..Default::default() }), [3, 2]);
    });
}

fn j_append_audit(s: &Store, records: &[canopy::engine::model::AuditRecord], check: impl FnOnce(&Journal)) {
    let mut j = s.open();
    let rs: Vec<Record> = records.iter().map(|a| Record::Audit(Box::new(a.clone()))).collect();
    j.append(&rs).unwrap();
    check(&j);
}

fn a_new_store_is_created_migrated_and_reopened(s: &mut Store) {
    let id = {
        let mut j = s.open();
        assert_eq!(j.store_id().len(), 6);
        assert!(j.store_id().chars().all(|c| c.is_ascii_hexdigit()));
        j.append(&[w(workload(1, WorkloadState::Running))]).unwrap();
        j.store_id().to_string()
    };
    let j = s.open();
    assert_eq!(j.store_id(), id);
    assert_eq!(ids(&j.workloads(&WorkloadFilter::default()).unwrap()), [1]);
    let version = s.raw_i64("SELECT CAST(value AS BIGINT) FROM meta WHERE key = 'schema_version'");
    assert_eq!(version, SCHEMA_VERSION);
    // Two stores get different ids.
    assert_ne!(s.another().open().store_id(), id);
}

/// SQLite's own: the file's directories are made, and it is in WAL mode.
#[test]
fn a_new_sqlite_store_makes_its_directories_and_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/nested/canopy.db");
    drop(Journal::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

fn a_store_from_a_newer_canopy_is_refused_clearly(s: &mut Store) {
    drop(s.open());
    s.raw(&format!("UPDATE meta SET value = {} WHERE key = 'schema_version'", SCHEMA_VERSION + 1));
    let err = s.try_open().unwrap_err();
    assert!(matches!(err, JournalError::NewerSchema { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("newer Canopy") && msg.contains("upgrade Canopy"), "{msg}");
    let shown = if s.is_postgres() { canopy::journal::shown_url(&s.url()) } else { s.url() };
    assert!(msg.contains(&shown), "{msg}");
}

fn stores_that_are_not_canopy_stores_are_refused_untouched(s: &mut Store) {
    s.raw("CREATE TABLE users (name TEXT)");
    let err = s.try_open().unwrap_err();
    assert!(matches!(err, JournalError::NotAStore { .. }), "{err}");
    assert_eq!(s.tables(), 1);
}

#[test]
fn a_file_that_is_not_a_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "x".repeat(4096)).unwrap();
    let err = Journal::open(&text).unwrap_err();
    assert!(err.to_string().contains("not a Canopy store"), "{err}");
}

fn an_operators_node_intent_is_kept_until_lifted(s: &mut Store) {
    let mut j = s.open();
    let intent = NodeIntent {
        node: "gpu-7".into(),
        state: canopy::fleet::NodeState::Cordoned,
        by: "ops-alice".into(),
        reason: Some("fan noise".into()),
        at: Millis(10),
        until: Some(Millis(99)),
    };
    j.append(&[Record::NodeIntent { node: "gpu-7".into(), intent: Some(Box::new(intent.clone())) }]).unwrap();
    let window = HealthWindow { since: Millis(0), limit: 10 };
    assert_eq!(j.load_live(window).unwrap().intents, [intent]);
    j.append(&[Record::NodeIntent { node: "gpu-7".into(), intent: None }]).unwrap();
    assert!(j.load_live(window).unwrap().intents.is_empty(), "lifted");
}

/// The console loads every failure nobody resolved, however old: one
/// 2,100 workloads back is found; acknowledged and retried ones are not.
fn unresolved_failures_are_found_whatever_their_age(s: &mut Store) {
    let mut j = s.open();
    let w = |r: WorkloadRecord| Record::Workload(Box::new(r));
    let mut records = vec![w(workload(1, WorkloadState::Failed))];
    let mut acked = workload(2, WorkloadState::Failed);
    acked.acknowledged =
        Some(Acknowledgement { by: "alice".into(), at: Millis(5), reason: Some("known".into()) });
    records.push(w(acked));
    records.push(w(workload(3, WorkloadState::Failed)));
    for id in 4..=2_100 {
        records.push(w(workload(id, WorkloadState::Succeeded)));
    }
    let mut retry = workload(2_101, WorkloadState::Succeeded);
    retry.idempotency_key = Some(format!("{RETRY_OF}:w-3"));
    records.push(w(retry));
    j.append(&records).unwrap();

    let found = j.workloads(&WorkloadFilter { unresolved: true, ..WorkloadFilter::default() }).unwrap();
    assert_eq!(found.iter().map(|w| w.id).collect::<Vec<_>>(), vec![WorkloadId(1)]);
    let recent = canopy::engine::handle::recent(&mut j, 2_000, 10).unwrap();
    assert!(recent.workloads.iter().any(|w| w.id == WorkloadId(1)), "the old failure is loaded");
    assert_eq!(recent.total, 2_101);
    assert_eq!(j.workload(WorkloadId(2)).unwrap().unwrap().acknowledged.unwrap().by, "alice");
    let failed =
        WorkloadFilter { states: vec![WorkloadState::Failed], limit: Some(1), ..WorkloadFilter::default() };
    assert_eq!(j.count_workloads(&failed).unwrap(), 3, "a count ignores the limit");
}

fn the_tenancy_in_force_token_tenants_and_tenant_listings_are_kept(s: &mut Store) {
    use canopy::journal::{TenancyRow, TenantFilter, TokenRow};
    let mut j = s.open();
    assert_eq!(j.tenancy().unwrap(), None);
    let audit = |by: &str| AuditRecord {
        at: Millis(5),
        principal: by.into(),
        origin: "test".into(),
        action: "tenants-set".into(),
        target: None,
        outcome: "ok".into(),
        reason: None,
    };
    let row = |doc: &str, by: &str| TenancyRow {
        document: doc.into(),
        seeded_from: "{}".into(),
        set_by: by.into(),
        set_at: Millis(5),
    };
    j.set_tenancy(&row("{\"tenant\":[]}", "canopy.toml"), &audit("canopy.toml")).unwrap();
    j.set_tenancy(&row("{\"tenant\":[{\"name\":\"a\"}]}", "local:me"), &audit("local:me")).unwrap();
    assert_eq!(j.tenancy().unwrap(), Some(row("{\"tenant\":[{\"name\":\"a\"}]}", "local:me")));
    let trail = j.audit(&canopy::journal::AuditFilter::default()).unwrap();
    assert_eq!(trail.len(), 2, "each change is audited in its own transaction");

    let token = TokenRow {
        id: "abc".into(),
        name: "b-ci".into(),
        role: "submitter".into(),
        scopes: vec![],
        salt: "s".into(),
        hash: "h".into(),
        created_at: Millis(1),
        created_by: "local:me".into(),
        expires_at: None,
        revoked_at: None,
        tenant: Some("team-b".into()),
    };
    j.insert_token(&token, &audit("local:me")).unwrap();
    assert_eq!(j.tokens().unwrap()[0].tenant.as_deref(), Some("team-b"));

    // Listings by tenant: a row without one counts as the default tenant's.
    let mut recs = Vec::new();
    for (id, tenant) in [(1, Some("team-a")), (2, Some("team-b")), (3, None)] {
        let mut r = workload(id, WorkloadState::Queued);
        r.tenant = tenant.map(str::to_string);
        recs.push(w(r));
    }
    j.append(&recs).unwrap();
    let of = |t: &str, default: Option<&str>| WorkloadFilter {
        tenants: vec![TenantFilter::of(Some(t), default)],
        ..WorkloadFilter::default()
    };
    assert_eq!(ids(&j.workloads(&of("team-b", None)).unwrap()), vec![2]);
    assert_eq!(ids(&j.workloads(&of("team-a", Some("team-a"))).unwrap()), vec![3, 1]);
    assert_eq!(j.count_workloads(&of("team-a", None)).unwrap(), 1);
}

/// A webhook delivery is written with the change it tells of and read
/// back pending by a fresh reader (as after a `kill -9`); after its try it
/// is no longer pending, keeps its id and body, and the next id is above
/// every id used.
fn a_webhook_delivery_is_pending_until_its_try_is_written_and_survives_a_reopen(s: &mut Store) {
    let mut j = s.open();
    assert_eq!(j.last_delivery_id().unwrap(), 0);
    let d = DeliveryRecord {
        id: 1,
        workload: WorkloadId(3),
        event: "succeeded".into(),
        url: "https://hooks.example.com/canopy".into(),
        body: r#"{"workload":"w-3","event":"succeeded"}"#.into(),
        created_at: Millis(5_000),
        state: DeliveryState::Pending,
        tries: 0,
        next_at: Some(Millis(5_000)),
        last: None,
    };
    j.append(&[w(workload(3, WorkloadState::Succeeded)), Record::Delivery(Box::new(d.clone()))]).unwrap();
    drop(j);

    let mut j = s.open();
    assert_eq!(j.pending_deliveries().unwrap(), vec![d.clone()]);
    let tried = DeliveryRecord {
        state: DeliveryState::Delivered,
        tries: 1,
        next_at: None,
        last: Some("200".into()),
        // What a try writes again must not change what was signed.
        body: "ignored".into(),
        ..d.clone()
    };
    j.append(&[Record::Delivery(Box::new(tried))]).unwrap();
    assert!(j.pending_deliveries().unwrap().is_empty());
    let all = j.deliveries(WorkloadId(3)).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].state, all[0].tries, all[0].last.as_deref()),
        (DeliveryState::Delivered, 1, Some("200"))
    );
    assert_eq!(all[0].body, d.body, "the body is the one first written");
    assert_eq!(j.last_delivery_id().unwrap(), 1);
    assert!(j.deliveries(WorkloadId(4)).unwrap().is_empty());
}

/// `canopy migrate`'s copy: a SQLite store with every kind of row (taken
/// from the tests above) copied into an empty store reads back the same,
/// keeps its id, and numbers new commits after the copied ones. A second
/// copy into the now-full store is refused.
fn a_sqlite_store_is_copied_whole(s: &mut Store) {
    let mut src = Store::sqlite();
    the_tenancy_in_force_token_tenants_and_tenant_listings_are_kept(&mut src);
    a_webhook_delivery_is_pending_until_its_try_is_written_and_survives_a_reopen(&mut src);
    an_operators_node_intent_is_kept_until_lifted(&mut src);
    let mut from = src.open();
    from.append(&[
        event(1, None, EventKind::Submitted, "submitted"),
        Record::Health(health(20, "node-9", Some(FailureClass::Node))),
    ])
    .unwrap();

    let mut to = s.open();
    let counts = from.copy_into(&mut to).unwrap();
    assert_eq!(counts.len(), canopy::journal::TABLES.len());
    assert!(counts.iter().any(|(t, n)| *t == "tokens" && *n == 1), "{counts:?}");
    let to = s.open();
    let all = WorkloadFilter::default();
    assert_eq!(to.store_id(), from.store_id());
    assert_eq!(to.workloads(&all).unwrap(), from.workloads(&all).unwrap());
    let ids: Vec<WorkloadId> = from.workloads(&all).unwrap().iter().map(|w| w.id).collect();
    assert_eq!(to.attempts_of(&ids).unwrap(), from.attempts_of(&ids).unwrap());
    assert_eq!(to.events_since(0, 1000).unwrap(), from.events_since(0, 1000).unwrap());
    assert_eq!(to.batches_since(0, 1000).unwrap(), from.batches_since(0, 1000).unwrap());
    assert_eq!(to.audit(&Default::default()).unwrap(), from.audit(&Default::default()).unwrap());
    assert_eq!(to.tokens().unwrap(), from.tokens().unwrap());
    assert_eq!(to.tenancy().unwrap(), from.tenancy().unwrap());
    assert_eq!(to.deliveries(WorkloadId(3)).unwrap(), from.deliveries(WorkloadId(3)).unwrap());
    let window = HealthWindow { since: Millis(0), limit: 100 };
    assert_eq!(to.load_live(window).unwrap(), from.load_live(window).unwrap());
    assert_eq!(to.last_event_seq().unwrap(), from.last_event_seq().unwrap());

    // New commits follow the copied ones.
    let (_, last) = from.batch_range().unwrap();
    let mut to = s.open();
    let next = to.append(&[event(1, None, EventKind::Running, "running")]).unwrap();
    assert!(next > last, "batch {next} after {last}");
    assert!(to.last_event_seq().unwrap() > from.last_event_seq().unwrap());

    let err = from.copy_into(&mut to).unwrap_err();
    assert!(matches!(err, JournalError::NotEmpty { .. }), "{err}");
}

/// Issue 33: on PostgreSQL a batch is written with one statement per table
/// (not one per record), so a group commit of many submits costs no more
/// round trips than one submit; every row still lands, in order.
fn a_batch_costs_the_same_round_trips_whatever_its_size(s: &mut Store) {
    use canopy::engine::model::AuditRecord;
    let batch = |from: u64, n: u64| -> Vec<Record> {
        let mut records = Vec::new();
        for id in from..from + n {
            let mut rec = workload(id, WorkloadState::Queued);
            rec.idempotency_key = Some(format!("key-{id}"));
            records.push(w(rec.clone()));
            records.push(event(id, None, EventKind::Submitted, &format!("submitted {id}")));
            records.push(a(attempt(id, 1, AttemptState::Placing)));
            records.push(Record::Health(health(9_000 + id as i64, &format!("n{id}"), None)));
            records.push(Record::Audit(Box::new(AuditRecord {
                at: Millis(id as i64),
                principal: "ci-bot".into(),
                origin: "socket".into(),
                action: "submit".into(),
                target: Some(format!("w-{id}")),
                outcome: "ok".into(),
                reason: None,
            })));
            // The same workload again later in the batch: the last wins.
            rec.priority = 90;
            records.push(w(rec));
        }
        records
    };
    let mut j = s.open();
    let before = j.statements_run();
    j.append(&batch(1, 1)).unwrap();
    let one = j.statements_run() - before;
    let before = j.statements_run();
    j.append(&batch(2, 50)).unwrap();
    let fifty = j.statements_run() - before;
    assert_eq!(one, fifty, "a batch of 50 submits took {fifty} statements, one took {one}");
    if s.is_postgres() {
        // The fence is off here; the tables written, the max id, the batch row.
        assert!(one <= 8, "one submit took {one} statements");
    }
    // The next group commit's keyed submits are looked up together.
    let mut keys: Vec<String> = (1..=51).map(|id| format!("key-{id}")).collect();
    keys.push("never-used".into());
    let before = j.statements_run();
    let mut found: Vec<u64> = j.workloads_by_keys(&keys).unwrap().into_iter().map(|w| w.id.0).collect();
    found.sort();
    assert_eq!(found, (1..=51).collect::<Vec<_>>());
    if s.is_postgres() {
        assert_eq!(j.statements_run() - before, 1, "52 keys looked up one by one");
    }
    for id in 1..=51 {
        let got = j.workload(WorkloadId(id)).unwrap().unwrap();
        assert_eq!((got.priority, got.idempotency_key), (90, Some(format!("key-{id}"))));
        assert_eq!(j.attempts(WorkloadId(id)).unwrap(), vec![attempt(id, 1, AttemptState::Placing)]);
    }
    let messages: Vec<String> = j.events_since(0, 100).unwrap().into_iter().map(|(_, e)| e.message).collect();
    assert_eq!(messages, (1..=51).map(|id| format!("submitted {id}")).collect::<Vec<_>>());
    let trail = j.audit(&canopy::journal::AuditFilter::default()).unwrap();
    assert_eq!(trail.len(), 51);
    assert_eq!(j.health_observations(Millis(0)).unwrap().len(), 51);
}
