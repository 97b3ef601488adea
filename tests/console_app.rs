//! Whole-app tests: feed key events and engine updates into the console's
//! `update` and check what the operator would see and what it would send.

use canopy::console::app::{App, Config, Effect, Msg, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use canopy::engine::model::{Record, WorkloadId};
use canopy::journal::{Command, CommandResult};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::sync::Arc;

fn app(read_only: bool) -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let config = Config { read_only, ..Config::default() };
    let mut app = App::new(config, model(fleet, 40), NOW);
    app.update(Msg::Resize(80, 24));
    app
}

fn keys(app: &mut App, s: &str) -> Vec<Effect> {
    s.chars()
        .flat_map(|c| app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))))
        .collect()
}

fn code(app: &mut App, c: KeyCode, m: KeyModifiers) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(c, m)))
}

fn screen(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}

#[test]
fn filter_and_faults_only_combine() {
    let mut a = app(false);
    keys(&mut a, "4/state=failed");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    let failed = a.derived.workloads.len();
    assert!(failed > 0);
    assert!(a.derived.workloads.iter().all(|id| a.model.workloads[id].rec.state.as_str() == "failed"));
    keys(&mut a, "F");
    assert!(a.faults_only);
    assert_eq!(a.derived.workloads.len(), failed, "faults-only keeps the filter");
    keys(&mut a, "/");
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert!(a.derived.workloads.len() > failed, "clearing the filter keeps faults-only");
    assert!(screen(&a).contains("faults-only"));
}

#[test]
fn sorting_by_any_column() {
    let mut a = app(false);
    keys(&mut a, "4");
    a.run_command("sort cost");
    let costs: Vec<f64> = a.derived.workloads.iter().map(|id| a.model.workloads[id].rec.cost_usd).collect();
    assert!(costs.windows(2).all(|w| w[0] >= w[1]), "descending by cost");
    keys(&mut a, "S");
    let first = a.model.workloads[&a.derived.workloads[0]].rec.cost_usd;
    assert!(first <= costs[0]);
}

#[test]
fn cancel_asks_first_and_sends_on_yes() {
    let mut a = app(false);
    keys(&mut a, "4");
    let fx = code(&mut a, KeyCode::Char('k'), KeyModifiers::CONTROL);
    assert!(fx.is_empty());
    assert!(screen(&a).contains("cancel w-40? y/n"));
    let fx = keys(&mut a, "y");
    assert!(
        matches!(&fx[..], [Effect::Command { cmd: Command::Cancel { id: WorkloadId(40) }, .. }]),
        "{fx:?}"
    );
    keys(&mut a, "3");
    keys(&mut a, "c");
    assert!(keys(&mut a, "n").is_empty(), "n declines");
    assert!(a.confirm.is_none());
}

#[test]
fn read_only_is_enforced_for_every_path() {
    let mut a = app(true);
    keys(&mut a, "4");
    assert!(code(&mut a, KeyCode::Char('k'), KeyModifiers::CONTROL).is_empty());
    assert!(keys(&mut a, "r").is_empty());
    assert!(a.run_command("drain fra-h100-01").is_empty());
    assert!(a.run_command("retry w-4").is_empty());
    keys(&mut a, "6");
    assert!(code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty());
    assert!(a.confirm.is_none());
    let s = screen(&a);
    assert!(s.contains("READ-ONLY"));
}

#[test]
fn editor_errors_then_submit_with_an_idempotency_key() {
    let mut a = app(false);
    keys(&mut a, "6");
    keys(&mut a, "x");
    assert!(screen(&a).contains("error 1:2"), "{}", screen(&a));
    assert!(code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty(), "invalid specs are not sent");
    code(&mut a, KeyCode::Backspace, KeyModifiers::NONE);
    assert!(screen(&a).contains("placement preview"));
    let fx = code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL);
    let Some(Effect::Command { cmd: Command::Submit { idempotency_key: Some(k), .. }, what }) = fx.first()
    else {
        panic!("{fx:?}")
    };
    assert!(k.starts_with("console-"));
    a.update(Msg::Done {
        what: what.clone(),
        result: CommandResult::Submitted { id: WorkloadId(41), existing: false },
    });
    assert!(screen(&a).contains("submitted as w-41"));
    let again = code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL);
    let Some(Effect::Command { cmd: Command::Submit { idempotency_key: Some(k2), .. }, .. }) = again.first()
    else {
        panic!()
    };
    assert_eq!(k, k2, "resubmitting the same text reuses the key");
}

#[test]
fn engine_updates_reach_the_views() {
    let mut a = app(false);
    keys(&mut a, "4");
    let mut w = a.model.workloads[&WorkloadId(1)].rec.clone();
    w.id = WorkloadId(99);
    w.name = "fresh-one".into();
    a.update(Msg::Records(Arc::new(vec![Record::Workload(Box::new(w))])));
    assert!(screen(&a).contains("fresh-one"));
}

#[test]
fn command_line_completes_and_remembers() {
    let mut a = app(false);
    keys(&mut a, ":tri");
    code(&mut a, KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(a.input.as_ref().unwrap().text, "triage ");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage);
    keys(&mut a, ":");
    code(&mut a, KeyCode::Up, KeyModifiers::NONE);
    assert_eq!(a.input.as_ref().unwrap().text, "triage");
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    a.run_command("bogus");
    assert!(screen(&a).contains("unknown command"));
}

#[test]
fn triage_opens_logs_at_the_evidence_line() {
    let mut a = app(false);
    keys(&mut a, "5");
    let fx = keys(&mut a, "l");
    assert!(matches!(fx.first(), Some(Effect::TailLogs(Some(_)))), "{fx:?}");
    assert_eq!(a.view, View::Logs);
    assert!(a.logs.as_ref().unwrap().evidence.is_some());
    let fx = code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert!(matches!(fx.first(), Some(Effect::TailLogs(None))));
    assert_eq!(a.view, View::Triage);
}

#[test]
fn stale_fleet_status_is_marked_and_the_console_keeps_working() {
    let mut a = app(false);
    assert!(!screen(&a).contains("STALE"));
    a.update(Msg::Tick(canopy::engine::model::Millis(NOW.0 + 60_000)));
    assert!(screen(&a).contains("STALE (60s old)"));
    keys(&mut a, "2");
    assert!(screen(&a).contains("capacity"));
}

#[test]
fn a_busy_large_store_folds_updates_into_one_recompute_per_tick_but_filters_apply_at_once() {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut a = App::new(Config::default(), model(fleet, 3_000), NOW);
    a.update(Msg::Resize(80, 24));
    keys(&mut a, "4");
    let rows = a.derived.workloads.len();
    let mut w = a.model.workloads[&WorkloadId(1)].rec.clone();
    w.id = WorkloadId(99_999);
    w.name = "fresh-one".into();
    a.update(Msg::Records(Arc::new(vec![Record::Workload(Box::new(w))])));
    assert_eq!(a.derived.workloads.len(), rows, "folded until the next tick");
    a.update(Msg::Tick(canopy::engine::model::Millis(NOW.0 + 1_000)));
    assert_eq!(a.derived.workloads.len(), rows + 1, "shown on the tick");
    // The operator's own filter is never held back.
    keys(&mut a, "/fresh-one");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.derived.workloads.len(), 1);
}
