//! A console attached to a real `canopy serve` over a store with more
//! history than one load brings: its overview counts what the engine
//! counts, an old id opens, the list pages to the oldest and the audit
//! filter finds an old record. The console's effects are answered through
//! the engine handle on the server's API, as the run loop does.

mod reap_support;
mod serve_support;

use canopy::console::app::{App, Config, Effect, Msg, PAGE, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use canopy::engine::handle::{EngineHandle, StateCounts};
use canopy::engine::model::{Acknowledgement, AuditRecord, Millis, Record, WorkloadId, WorkloadState};
use canopy::journal::Journal;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use reap_support::Reaper;
use serve_support::{Process, Serve};
use std::sync::Arc;

const WORKLOADS: usize = 2_500;

fn keys(app: &mut App, s: &str) -> Vec<Effect> {
    s.chars()
        .flat_map(|c| app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))))
        .collect()
}

fn screen(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(120, 40)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}

/// A store with a finished history: the fixture's workloads, all final
/// (failures acknowledged, but the oldest, w-1, which stays unresolved
/// and so is held whatever its age), and an hour-old cordon under 1,199
/// newer audit records.
fn write_store(store: &std::path::Path) -> StateCounts {
    std::fs::create_dir_all(store).unwrap();
    let m = model(canopy::fleet::load::demo().unwrap(), WORKLOADS);
    let mut records = Vec::new();
    for row in m.workloads.values() {
        let mut rec = row.rec.clone();
        if rec.id == WorkloadId(1) {
            rec.state = WorkloadState::Failed;
        } else if !rec.state.is_final() {
            rec.state = WorkloadState::Succeeded;
        } else if rec.state == WorkloadState::Failed {
            let by = "ops".to_string();
            rec.acknowledged = Some(Acknowledgement { by, at: NOW, reason: Some("known".into()) });
        }
        records.push(Record::Workload(Box::new(rec)));
    }
    let audit = |at: i64, action: &str, target: &str| {
        Record::Audit(Box::new(AuditRecord {
            at: Millis(at),
            principal: "alice".into(),
            origin: "10.0.0.7:5500".into(),
            action: action.into(),
            target: Some(target.into()),
            outcome: "ok".into(),
            reason: None,
        }))
    };
    records.push(audit(NOW.0 - 3_600_000, "cordon", "fra-h100-04"));
    for i in 0..1_199 {
        records.push(audit(NOW.0 - 3_000_000 + i * 1_000, "submit", &format!("w-{i}")));
    }
    let mut j = Journal::open(&store.join("canopy.db")).unwrap();
    j.append(&records).unwrap();
    StateCounts::from_rows(&j.count_by_state().unwrap())
}

/// Answers the console's effects through `engine`, until it asks nothing
/// more.
async fn serve(app: &mut App, engine: &EngineHandle, fx: Vec<Effect>) {
    let mut queue = fx;
    for _ in 0..100 {
        let Some(fx) = queue.pop() else { return };
        let msg = match fx {
            Effect::LoadOlder(before) => Msg::Older(engine.older(before, PAGE).await),
            Effect::FetchWorkload(id) => Msg::Workload(id, Box::new(engine.workload(id).await)),
            Effect::LoadAudit(f) => Msg::Audit(engine.audit(f).await),
            _ => continue,
        };
        queue.extend(app.update(msg));
    }
    panic!("the console kept asking");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attached_console_sees_the_whole_history() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let counts = write_store(&store);
    let server = Serve::start(&store, &[], Process::default());
    let client = canopy::client::Client::for_store(&store).unwrap();
    let (engine, _records, _status, _link) = EngineHandle::remote(Arc::new(client));

    let mut a = App::new(Config::default(), model(canopy::fleet::load::demo().unwrap(), 0), NOW);
    a.update(Msg::Resize(120, 40));
    a.update(Msg::Recent(engine.recent(PAGE, 100).await.unwrap()));
    assert!(a.model.workloads.len() < WORKLOADS, "one load holds part of the history");
    let want = format!(
        "0 running · 0 queued · 0 starting · {} succeeded · {} failed · {} cancelled",
        counts.succeeded, counts.failed, counts.cancelled
    );
    assert!(screen(&a).contains(&want), "{want}\n{}", screen(&a));

    // An old id opens.
    let fx = a.run_command("describe w-2");
    serve(&mut a, &engine, fx).await;
    assert_eq!(a.view, View::Detail);
    assert!(screen(&a).contains("w-2 job-1"), "{}", screen(&a));

    // The list pages past the hole to w-1.
    keys(&mut a, "4");
    for _ in 0..10 {
        let fx = keys(&mut a, "G");
        if fx.is_empty() {
            break;
        }
        serve(&mut a, &engine, fx).await;
        a.update(Msg::Tick(Millis(a.now.0 + 1_000)));
    }
    assert_eq!(a.derived.workloads.len(), WORKLOADS);
    assert_eq!(a.derived.workloads.last(), Some(&WorkloadId(1)));

    // The hour-old cordon, found by the filter on the server.
    let fx = keys(&mut a, "7");
    serve(&mut a, &engine, fx).await;
    assert!(!a.model.audit.iter().any(|r| r.action == "cordon"));
    let mut fx = keys(&mut a, "/action=cordon");
    fx.extend(a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE))));
    serve(&mut a, &engine, fx).await;
    // With 2,000 workloads held, what arrives shows on the next tick.
    a.update(Msg::Tick(Millis(a.now.0 + 1_000)));
    assert_eq!(a.derived.audit.len(), 1, "{}", screen(&a));
    assert!(screen(&a).contains("fra-h100-04"), "{}", screen(&a));
    server.stop();
}
