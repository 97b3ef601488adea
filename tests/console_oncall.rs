//! Whole-app tests of what an on-call operator reached for in #23 item 11
//! and did not find: earlier attempts' logs, the retry link both ways, a
//! bulk acknowledgement over a filter, unquarantine and drain with
//! eviction, a workload's spec with edit-and-resubmit, an events view, and
//! nodes whose FAILURES are the node's own faults. Keys and commands go
//! through `App::update` as the terminal sends them; screens are drawn
//! into a `TestBackend`.

use canopy::console::app::{App, Config, Effect, Msg, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use canopy::engine::command::Command;
use canopy::engine::model::{
    AttemptId, EventKind, EventRecord, HealthObservation, Millis, RETRY_OF, Record, WorkloadId,
};
use canopy::failure::FailureClass;
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

fn enter(app: &mut App) -> Vec<Effect> {
    code(app, KeyCode::Enter, KeyModifiers::NONE)
}

fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t
}

fn screen(app: &App) -> String {
    render(app, 80, 24).backend().to_string()
}

/// A wide screen, for questions longer than 80 columns.
fn wide(app: &App) -> String {
    render(app, 200, 24).backend().to_string()
}

/// The column (in characters) where `needle` starts in `line`.
fn col(line: &str, needle: &str) -> Option<usize> {
    line.find(needle).map(|b| line[..b].chars().count())
}

fn tails(fx: &[Effect]) -> Vec<AttemptId> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::TailLogs(Some(a)) => Some(*a),
            _ => None,
        })
        .collect()
}

fn apply(a: &mut App, records: Vec<Record>) {
    a.update(Msg::Records(Arc::new(canopy::engine::model::Batch { seq: 0, records })));
}

/// `:logs w-4.1` opens attempt 1 of a workload with two; `]` and `[`
/// switch to the next and previous attempt (tailing each), and say so at
/// either end; `?` lists the keys.
#[test]
fn an_earlier_attempts_logs_open_by_id_and_brackets_switch_attempts() {
    let mut a = app(false);
    let w4 = WorkloadId(4);
    assert_eq!(a.model.workloads[&w4].attempts.len(), 2, "the fixture's failed workloads tried twice");
    let fx = a.run_command("logs w-4.1");
    assert_eq!(tails(&fx), [AttemptId { workload: w4, n: 1 }], "{fx:?}");
    assert_eq!(a.view, View::Logs);
    assert!(screen(&a).contains("logs w-4.1"), "{}", screen(&a));

    let fx = keys(&mut a, "]");
    assert_eq!(tails(&fx), [AttemptId { workload: w4, n: 2 }]);
    assert!(screen(&a).contains("logs w-4.2"), "{}", screen(&a));
    assert!(tails(&keys(&mut a, "]")).is_empty());
    assert!(screen(&a).contains("w-4.2 is w-4's last attempt (of 2)"), "{}", screen(&a));
    assert_eq!(tails(&keys(&mut a, "[")), [AttemptId { workload: w4, n: 1 }]);
    assert!(tails(&keys(&mut a, "[")).is_empty());
    assert!(screen(&a).contains("first attempt"), "{}", screen(&a));

    // Without a number, the last attempt; a number it does not have says so.
    assert_eq!(tails(&a.run_command("logs w-4")), [AttemptId { workload: w4, n: 2 }]);
    assert!(a.run_command("logs w-4.3").is_empty());
    assert!(screen(&a).contains("w-4 has no attempt 3: it has 2"), "{}", screen(&a));

    let help: Vec<String> =
        canopy::console::keymap::help_lines().into_iter().map(|(_, k, h)| format!("{k} {h}")).collect();
    assert!(help.iter().any(|l| l == "[ the previous attempt's logs"), "{help:?}");
    assert!(help.iter().any(|l| l == "] the next attempt's logs"), "{help:?}");
}

/// The detail pane says "retried as w-N" on the original and "retry of
/// w-M" on the retry: linked live when the retry arrives, and from the
/// engine's record for an original whose retry the console does not hold.
#[test]
fn the_detail_pane_links_a_retry_both_ways() {
    let mut a = app(false);
    let old = a.model.workloads[&WorkloadId(4)].rec.clone();
    let mut new = old.clone();
    new.id = WorkloadId(41);
    std::sync::Arc::make_mut(&mut new.spec).labels.insert(RETRY_OF.into(), "w-4".into());
    apply(&mut a, vec![Record::Workload(Box::new(new))]);
    a.run_command("describe w-4");
    assert!(screen(&a).contains("retried as w-41"), "{}", screen(&a));
    a.run_command("describe w-41");
    let s = screen(&a);
    assert!(s.contains("retry of w-4"), "{s}");
    assert!(!s.contains("retried as"), "{s}");

    // An original fetched from the engine, its retry not held here.
    let mut older = old;
    older.id = WorkloadId(2);
    older.retried_as = Some(WorkloadId(900));
    let mut b = app(false);
    b.model.workloads.remove(&WorkloadId(2));
    b.run_command("describe w-2");
    b.update(Msg::Workload(WorkloadId(2), Box::new(Ok(Some((older, Vec::new()))))));
    assert!(screen(&b).contains("retried as w-900"), "{}", screen(&b));
}

/// In triage with a filter, `A` asks once, with the count, for one
/// reason, and sends one audited acknowledgement per unresolved failure
/// the filter shows (not the live ones it also shows); `:ack-all` does
/// the same.
#[test]
fn ack_all_acknowledges_every_unresolved_failure_the_filter_shows_after_one_question() {
    let mut a = app(false);
    keys(&mut a, "5/class=gpu-oom");
    enter(&mut a);
    let want: Vec<WorkloadId> = a
        .derived
        .faults
        .iter()
        .copied()
        .filter(|id| a.model.workloads[id].rec.state.as_str() == "failed")
        .collect();
    assert!(want.len() >= 2 && want.len() < a.derived.faults.len(), "{want:?} of {:?}", a.derived.faults);
    assert!(keys(&mut a, "A").is_empty(), "nothing is sent before the answer");
    let s = wide(&a);
    let n = want.len();
    assert!(s.contains(&format!("acknowledge {n} unresolved failures matching /class=gpu-oom")), "{s}");
    assert!(enter(&mut a).is_empty(), "a reason is required");
    keys(&mut a, "known bad image");
    let fx = enter(&mut a);
    let sent: Vec<(WorkloadId, Option<String>)> = fx
        .iter()
        .map(|e| match e {
            Effect::Command { cmd: Command::Acknowledge { id }, reason, .. } => (*id, reason.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    let want_sent: Vec<_> = want.iter().map(|id| (*id, Some("known bad image".to_string()))).collect();
    assert_eq!(sent, want_sent);

    // The command, over the workloads view's filter; esc declines.
    keys(&mut a, "4/state=failed");
    enter(&mut a);
    a.run_command("ack-all");
    let failed = a.model.workloads.values().filter(|w| w.rec.state.as_str() == "failed").count();
    let s = wide(&a);
    assert!(s.contains(&format!("acknowledge {failed} unresolved failures matching /state=failed")), "{s}");
    assert!(code(&mut a, KeyCode::Esc, KeyModifiers::NONE).is_empty());
    assert!(a.confirm.is_none());
    // Read-only refuses it.
    let mut r = app(true);
    keys(&mut r, "5");
    assert!(keys(&mut r, "A").is_empty());
    assert!(r.confirm.is_none());
}

/// `:unquarantine NODE`, `U` in the nodes view, `:drain NODE --evict` and
/// `D` ask first (with a reason) and send through the action layer.
#[test]
fn unquarantine_and_drain_with_eviction_ask_and_send() {
    let mut a = app(false);
    let node = a.model.fleet().unwrap().nodes[3].name.clone();
    assert!(a.run_command(&format!("unquarantine {node}")).is_empty());
    assert!(wide(&a).contains(&format!("unquarantine {node} — why?")), "{}", wide(&a));
    keys(&mut a, "replaced the GPU");
    let fx = enter(&mut a);
    assert!(
        matches!(&fx[..], [Effect::Command { cmd: Command::Unquarantine { node: n }, reason: Some(r), .. }]
            if *n == node && r == "replaced the GPU"),
        "{fx:?}"
    );
    assert!(a.run_command(&format!("drain {node} --evict")).is_empty());
    assert!(wide(&a).contains(&format!("drain {node} and evict its work")), "{}", wide(&a));
    let fx = enter(&mut a);
    assert!(
        matches!(&fx[..], [Effect::Command { cmd: Command::Drain { node: n, evict: true, .. }, .. }] if *n == node),
        "{fx:?}"
    );
    // The keys in the nodes view, on the selected node.
    keys(&mut a, "3");
    let first = a.current_node().unwrap();
    keys(&mut a, "D");
    let fx = enter(&mut a);
    assert!(
        matches!(&fx[..], [Effect::Command { cmd: Command::Drain { node: n, evict: true, .. }, .. }] if *n == first),
        "{fx:?}"
    );
    keys(&mut a, "U");
    let fx = enter(&mut a);
    assert!(matches!(&fx[..], [Effect::Command { cmd: Command::Unquarantine { .. }, .. }]), "{fx:?}");
    // A plain drain stays a drain.
    a.run_command(&format!("drain {node}"));
    let fx = enter(&mut a);
    assert!(matches!(&fx[..], [Effect::Command { cmd: Command::Drain { evict: false, .. }, .. }]), "{fx:?}");
    let mut r = app(true);
    assert!(r.run_command(&format!("unquarantine {node}")).is_empty());
    assert!(r.confirm.is_none());
}

/// `v` shows a workload's spec as submitted, as TOML; `e` opens a copy in
/// the editor (without the retry label) and ctrl-s submits it as a new
/// workload.
#[test]
fn the_spec_view_shows_the_toml_and_e_edits_a_copy_to_resubmit() {
    let mut a = app(false);
    let mut retried = a.model.workloads[&WorkloadId(40)].rec.clone();
    std::sync::Arc::make_mut(&mut retried.spec).labels.insert(RETRY_OF.into(), "w-33".into());
    apply(&mut a, vec![Record::Workload(Box::new(retried.clone()))]);
    keys(&mut a, "4");
    assert_eq!(a.current_workload(), Some(WorkloadId(40)));
    keys(&mut a, "v");
    assert_eq!(a.view, View::Spec);
    insta::assert_snapshot!("oncall_spec_view", render(&a, 80, 24).backend());
    let s = screen(&a);
    assert!(s.contains("spec w-40 (as submitted)"), "{s}");
    assert!(s.contains("[runtime]") && s.contains("command = "), "{s}");

    keys(&mut a, "e");
    assert_eq!(a.view, View::Editor);
    let text = a.editor.contents();
    assert!(text.contains("A copy of w-40's spec"), "{text}");
    assert!(!text.contains(RETRY_OF), "a resubmission is not a retry: {text}");
    let fx = code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL);
    let mut want = canopy::spec::Spec::clone(&retried.spec);
    want.labels.remove(RETRY_OF);
    assert!(
        matches!(&fx[..], [Effect::Command { cmd: Command::Submit { spec, idempotency_key: Some(_) }, .. }]
            if **spec == want),
        "{fx:?}"
    );
    // `:spec w-N` opens it too.
    a.run_command("spec w-4");
    assert!(screen(&a).contains("spec w-4"), "{}", screen(&a));
}

fn event(id: u64, mins_ago: i64, kind: EventKind, message: &str) -> Record {
    Record::Event(EventRecord {
        at: Millis(NOW.0 - mins_ago * 60_000),
        workload: WorkloadId(id),
        attempt: None,
        kind,
        message: message.into(),
    })
}

/// `:events` lists the recent events newest first, `/` filters them
/// (`kind=retry`), Enter opens the event's workload; `E` on a workload
/// asks the engine for all of its events and shows them as they arrive.
#[test]
fn the_events_view_lists_filters_and_opens_events() {
    let mut a = app(false);
    apply(
        &mut a,
        vec![
            event(4, 30, EventKind::Failed, "attempt 2 failed: gpu-oom"),
            event(4, 20, EventKind::Retry, "retried as w-41"),
            event(11, 10, EventKind::Failed, "attempt 2 failed: node"),
        ],
    );
    a.run_command("events");
    assert_eq!(a.view, View::Events);
    insta::assert_snapshot!("oncall_events_view", render(&a, 80, 24).backend());
    let s = screen(&a);
    let (newest, older) = (s.find("attempt 2 failed: node").unwrap(), s.find("retried as w-41").unwrap());
    assert!(newest < older, "newest first: {s}");
    keys(&mut a, "/kind=retry");
    enter(&mut a);
    let fx = keys(&mut a, "y");
    assert!(matches!(&fx[..], [Effect::Copy(id)] if id == "w-4"), "y copies the event's workload: {fx:?}");
    let s = screen(&a);
    assert!(s.contains("retried as w-41") && !s.contains("attempt 2 failed"), "{s}");
    let fx = enter(&mut a);
    assert_eq!(a.view, View::Detail);
    assert_eq!(a.detail.id, Some(WorkloadId(4)));
    assert!(fx.iter().any(|e| matches!(e, Effect::FetchEvents(WorkloadId(4)))), "{fx:?}");

    keys(&mut a, "4");
    let id = a.current_workload().unwrap();
    let fx = keys(&mut a, "E");
    assert!(matches!(&fx[..], [Effect::FetchEvents(w)] if *w == id), "{fx:?}");
    let Record::Event(e) = event(id.0, 1, EventKind::Submitted, "submitted long ago, from the journal")
    else {
        unreachable!()
    };
    a.update(Msg::Events(id, vec![e]));
    let s = screen(&a);
    assert!(s.contains(&format!("events of {id}")) && s.contains("from the journal"), "{s}");
}

/// The nodes view's FAILURES are the node's infrastructure faults as the
/// engine's health keeps them; the workloads' own errors there are shown
/// apart (OTHER), not as the node's failures.
#[test]
fn the_nodes_failures_are_the_nodes_own_faults_and_the_rest_apart() {
    let mut a = app(false);
    let mut status = (**a.model.status.as_ref().unwrap()).clone();
    let (faulty, blameless) = (status.fleet.nodes[5].name.clone(), status.fleet.nodes[6].name.clone());
    let pool = status.fleet.pool_label(status.fleet.nodes[5].pool);
    status.health.faults.insert(
        faulty.clone(),
        vec![canopy::health::NodeFault { at: Millis(NOW.0 - 60_000), class: FailureClass::Node, pool }],
    );
    a.update(Msg::Status(Arc::new(status)));
    let obs = |node: &str, class| {
        Record::Health(HealthObservation {
            at: NOW,
            provider: "p".into(),
            pool: "p/q".into(),
            node: node.into(),
            class: Some(class),
            ran_s: 1.0,
            free: false,
            lift: false,
        })
    };
    apply(&mut a, vec![obs(&blameless, FailureClass::App), obs(&blameless, FailureClass::GpuOom)]);
    keys(&mut a, "3");
    let t = render(&a, 160, 40);
    let s = t.backend().to_string();
    let header = s.lines().find(|l| l.contains("FAILURES")).unwrap_or_else(|| panic!("{s}"));
    let (fail_col, other_col) =
        (col(header, "FAILURES").unwrap(), col(header, "OTHER").expect("an OTHER column"));
    let row = |node: &str| {
        s.lines().find(|l| l.contains(node)).unwrap_or_else(|| panic!("{node}: {s}")).to_string()
    };
    let r = row(&blameless);
    let app_at = col(&r, "gpu-oom,app").unwrap_or_else(|| panic!("{r}"));
    assert!(app_at >= other_col, "the workloads' errors are not the node's failures:\n{header}\n{r}");
    let r = row(&faulty);
    let chars: String = r.chars().skip(fail_col).collect();
    let node_at = col(&chars, "node").map(|i| i + fail_col).unwrap_or_else(|| panic!("{r}"));
    assert!(node_at < other_col, "the node's own fault is a FAILURE:\n{header}\n{r}");
}
