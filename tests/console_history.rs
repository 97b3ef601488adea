//! Whole-app tests of a console over a store with history: more
//! workloads and audit records than one load brings. The store is a real
//! journal; the console's effects are answered by the same reads the
//! engine handle runs for it (`engine::handle::{recent, older, held}`,
//! `Journal::audit`), as an engine in this process does.

use canopy::console::app::{App, Config, Effect, Msg, PAGE, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use canopy::engine::handle;
use canopy::engine::model::{
    AttemptId, AttemptState, AuditRecord, Batch, EventKind, EventRecord, Millis, Record, WorkloadId,
    WorkloadState,
};
use canopy::failure::FailureClass;
use canopy::journal::Journal;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::sync::Arc;

fn keys(app: &mut App, s: &str) -> Vec<Effect> {
    s.chars()
        .flat_map(|c| app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))))
        .collect()
}

fn code(app: &mut App, c: KeyCode) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}

/// A journal holding the fixture's `n` workloads (every state, failures
/// among them unresolved, so old ones are held besides the newest page).
fn store(n: usize) -> Journal {
    let fleet = canopy::fleet::load::demo().unwrap();
    let m = model(fleet, n);
    let mut records = Vec::new();
    for row in m.workloads.values() {
        records.push(Record::Workload(Box::new(row.rec.clone())));
        records.extend(row.attempts.iter().map(|a| Record::Attempt(Box::new(a.clone()))));
    }
    let mut j = Journal::open_in_memory().unwrap();
    j.append(&records).unwrap();
    j
}

/// A console (at 80×24) that loaded what the engine's first load gives.
fn attached(j: &mut Journal) -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = App::new(Config::default(), model(fleet, 0), NOW);
    app.update(Msg::Resize(80, 24));
    app.update(Msg::Recent(handle::recent(j, PAGE, 2_000).unwrap()));
    app
}

/// Answers the console's effects from the journal, as the run loop does
/// with an engine in this process, until it asks nothing more.
fn serve(app: &mut App, j: &mut Journal, fx: Vec<Effect>) {
    let mut queue = fx;
    for _ in 0..100 {
        let Some(fx) = queue.pop() else { return };
        let msg = match fx {
            Effect::LoadOlder(before) => Msg::Older(Ok(handle::older(j, before, PAGE).unwrap())),
            Effect::FetchWorkload(id) => Msg::Workload(id, Box::new(Ok(handle::held(j, id).unwrap()))),
            Effect::FetchEvents(id) => Msg::Events(id, j.events(id).unwrap()),
            Effect::LoadAudit(f) => Msg::Audit(Ok(j.audit(&f).unwrap())),
            _ => continue,
        };
        queue.extend(app.update(msg));
    }
    panic!("the console kept asking");
}

#[test]
fn the_overview_counts_what_the_engine_counts_not_what_the_console_holds() {
    let mut j = store(2_500);
    let mut a = attached(&mut j);
    assert!(a.model.workloads.len() < 2_500, "only part of the history is held");
    let counts = handle::StateCounts::from_rows(&j.count_by_state().unwrap());
    let want = |c: &handle::StateCounts| {
        format!(
            "{} running · {} queued · {} starting · {} succeeded · {} failed · {} cancelled",
            c.running,
            c.queued,
            c.placing + c.launching,
            c.succeeded,
            c.failed,
            c.cancelled
        )
    };
    let s = screen(&a, 120, 40);
    assert!(s.contains(&want(&counts)), "{}\n{s}", want(&counts));
    // A live change moves a workload from one count to the other.
    let mut rec =
        a.model.workloads.values().rev().find(|w| w.rec.state == WorkloadState::Running).unwrap().rec.clone();
    rec.state = WorkloadState::Succeeded;
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records: vec![Record::Workload(Box::new(rec))] })));
    let mut after = counts;
    after.running -= 1;
    after.succeeded += 1;
    let s = screen(&a, 120, 40);
    assert!(s.contains(&want(&after)), "{}\n{s}", want(&after));
}

#[test]
fn describe_opens_a_workload_the_console_does_not_hold() {
    let mut j = store(2_500);
    let mut a = attached(&mut j);
    // w-2 succeeded long ago: neither in the newest page, nor live, nor
    // an unresolved failure.
    let old = WorkloadId(2);
    assert!(!a.model.workloads.contains_key(&old));
    let fx = a.run_command("describe w-2");
    assert!(fx.iter().any(|f| matches!(f, Effect::FetchWorkload(id) if *id == old)), "{fx:?}");
    assert_eq!(a.view, View::Detail);
    assert!(screen(&a, 80, 24).contains("loading w-2…"), "{}", screen(&a, 80, 24));
    serve(&mut a, &mut j, fx);
    let s = screen(&a, 80, 24);
    assert!(s.contains("w-2 job-1"), "{s}");
    assert!(s.contains("✓ succeeded"), "{s}");
    // Its logs too, from the command line.
    keys(&mut a, "4");
    let fx = a.run_command("logs w-6");
    assert!(fx.iter().any(|f| matches!(f, Effect::FetchWorkload(WorkloadId(6)))), "{fx:?}");
    let mut got = Vec::new();
    for f in fx {
        got.extend(match f {
            Effect::FetchWorkload(id) => {
                a.update(Msg::Workload(id, Box::new(Ok(handle::held(&mut j, id).unwrap()))))
            }
            _ => Vec::new(),
        });
    }
    assert_eq!(a.view, View::Logs);
    assert!(
        got.iter().any(|f| matches!(f, Effect::TailLogs(Some(at)) if at.workload == WorkloadId(6))),
        "{got:?}"
    );
    // No such workload: said so, not a blank pane.
    let fx = a.run_command("describe w-99999");
    serve(&mut a, &mut j, fx);
    assert!(screen(&a, 80, 24).contains("no workload w-99999 in the journal"), "{}", screen(&a, 80, 24));
}

#[test]
fn the_workloads_list_pages_to_the_oldest() {
    let mut j = store(2_500);
    let mut a = attached(&mut j);
    keys(&mut a, "4");
    assert!(screen(&a, 80, 24).contains(" of 2500"), "{}", screen(&a, 80, 24));
    for _ in 0..10 {
        let fx = keys(&mut a, "G");
        if fx.is_empty() {
            break;
        }
        serve(&mut a, &mut j, fx);
        // From 2,000 rows on, the list is derived again on the next tick.
        a.update(Msg::Tick(Millis(a.now.0 + 1_000)));
    }
    let ids = &a.derived.workloads;
    assert_eq!(ids.len(), 2_500, "no hole left in the list");
    assert_eq!(ids.last(), Some(&WorkloadId(1)), "the oldest is at the end");
    let s = screen(&a, 80, 24);
    assert!(s.contains("workloads 2500/2500 "), "{s}");
    assert!(!s.contains("loading"), "nothing is left loading: {s}");
    assert!(keys(&mut a, "G").is_empty(), "nothing more to ask for");
}

/// A workload that failed 108 times, each with its evidence, and an
/// artifact at the very end of its detail.
fn many_attempts(a: &mut App) -> WorkloadId {
    let id = WorkloadId(7_000);
    let base = a.model.workloads.values().find(|w| !w.attempts.is_empty()).unwrap();
    let mut rec = base.rec.clone();
    rec.id = id;
    rec.name = "flaky-train".into();
    rec.state = WorkloadState::Failed;
    rec.attempts = 108;
    let mut records = vec![Record::Workload(Box::new(rec))];
    for n in 1..=108 {
        let mut at = base.attempts[0].clone();
        at.id = AttemptId { workload: id, n };
        at.state = AttemptState::Failed;
        at.class = Some(FailureClass::App);
        at.evidence = Some(format!("Traceback: step {n} failed"));
        records.push(Record::Attempt(Box::new(at)));
    }
    let event = |kind, message: &str| {
        Record::Event(EventRecord { at: NOW, workload: id, attempt: None, kind, message: message.into() })
    };
    records.push(event(EventKind::Failed, "gave up after 108 attempts"));
    records.push(event(EventKind::Outputs, "collected s3://runs/flaky/last-checkpoint.pt"));
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records })));
    id
}

#[test]
fn the_detail_pane_scrolls_to_its_last_line_at_80x24() {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut a = App::new(Config::default(), model(fleet, 10), NOW);
    a.update(Msg::Resize(80, 24));
    let id = many_attempts(&mut a);
    a.run_command(&format!("describe {id}"));
    let top = screen(&a, 80, 24);
    assert!(top.contains("flaky-train"), "{top}");
    assert!(!top.contains("last-checkpoint.pt"), "{top}");
    assert!(top.contains("rows 1-20/"), "where the screen is: {top}");
    // G (and End) to the last line: the failure, the events, the artifacts.
    keys(&mut a, "G");
    let end = screen(&a, 80, 24);
    assert!(end.contains("collected s3://runs/flaky/last-checkpoint.pt"), "{end}");
    assert!(end.contains("gave up after 108 attempts"), "{end}");
    assert!(end.contains("100%"), "{end}");
    assert!(end.contains("step 108 failed"), "{end}");
    // k one up, g to the top, j one down, PgDn a screenful.
    keys(&mut a, "k");
    assert!(!screen(&a, 80, 24).contains("100%"), "one row up: {}", screen(&a, 80, 24));
    keys(&mut a, "g");
    assert!(screen(&a, 80, 24).contains("rows 1-20/"));
    keys(&mut a, "j");
    assert!(screen(&a, 80, 24).contains("rows 2-21/"), "{}", screen(&a, 80, 24));
    code(&mut a, KeyCode::PageDown);
    assert!(screen(&a, 80, 24).contains("rows 22-41/"), "{}", screen(&a, 80, 24));
    code(&mut a, KeyCode::End);
    assert!(screen(&a, 80, 24).contains("last-checkpoint.pt"));
    code(&mut a, KeyCode::Home);
    assert!(screen(&a, 80, 24).contains("rows 1-20/"));
    // Another workload opens at its top.
    code(&mut a, KeyCode::End);
    a.run_command("describe w-1");
    assert_eq!(a.detail.top, 0);
}

/// A journal whose oldest audit record, an hour old, is a cordon; then
/// 1,199 submits, newer.
fn audit_store() -> Journal {
    let rec = |at: i64, action: &str, target: &str| AuditRecord {
        at: Millis(at),
        principal: "alice".into(),
        origin: "10.0.0.7:5500".into(),
        action: action.into(),
        target: Some(target.into()),
        outcome: "ok".into(),
        reason: None,
    };
    let mut records = vec![Record::Audit(Box::new(AuditRecord {
        reason: Some("bad fans".into()),
        ..rec(NOW.0 - 3_600_000, "cordon", "fra-h100-04")
    }))];
    for i in 0..1_199 {
        records.push(Record::Audit(Box::new(rec(
            NOW.0 - 3_000_000 + i * 1_000,
            "submit",
            &format!("w-{i}"),
        ))));
    }
    let mut j = Journal::open_in_memory().unwrap();
    j.append(&records).unwrap();
    j
}

#[test]
fn an_old_cordon_is_found_by_the_audit_filter() {
    let mut j = audit_store();
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut a = App::new(Config::default(), model(fleet, 0), NOW);
    a.update(Msg::Resize(80, 24));
    let fx = keys(&mut a, "7");
    serve(&mut a, &mut j, fx);
    assert!(!a.model.audit.iter().any(|r| r.action == "cordon"), "older than the first page");
    let mut fx = keys(&mut a, "/action=cordon");
    fx.extend(code(&mut a, KeyCode::Enter));
    serve(&mut a, &mut j, fx);
    assert_eq!(a.derived.audit.len(), 1, "{}", screen(&a, 80, 24));
    let s = screen(&a, 80, 24);
    assert!(s.contains("fra-h100-04"), "{s}");
    assert!(s.contains("bad fans"), "{s}");
}

#[test]
fn the_audit_view_pages_to_the_oldest_record() {
    let mut j = audit_store();
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut a = App::new(Config::default(), model(fleet, 0), NOW);
    a.update(Msg::Resize(80, 24));
    let fx = keys(&mut a, "7");
    serve(&mut a, &mut j, fx);
    assert!(screen(&a, 80, 24).contains("(older: G)"), "{}", screen(&a, 80, 24));
    for _ in 0..10 {
        let fx = keys(&mut a, "G");
        if fx.is_empty() {
            break;
        }
        serve(&mut a, &mut j, fx);
    }
    assert_eq!(a.model.audit.len(), 1_200, "every record, once");
    assert_eq!(a.derived.audit.last().map(|r| r.action.as_str()), Some("cordon"));
    assert!(!screen(&a, 80, 24).contains("older"), "{}", screen(&a, 80, 24));
}
