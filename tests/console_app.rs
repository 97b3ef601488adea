//! Whole-app tests: feed key events and engine updates into the console's
//! `update` and check what the operator would see and what it would send.

use canopy::console::app::{App, Config, Effect, Msg, View};
use canopy::console::fixture::{NOW, model};
use canopy::engine::command::Command;
use canopy::engine::model::{Batch, Record, WorkloadId};
use ratatui::crossterm::event::{KeyCode, KeyModifiers};
use std::sync::Arc;

mod console_support;
use console_support::{app, code, keys, screen};

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
    assert!(screen(&a).contains("— why?"), "a cordon asks why: {}", screen(&a));
    assert!(code(&mut a, KeyCode::Esc, KeyModifiers::NONE).is_empty(), "esc declines");
    assert!(a.confirm.is_none());
}

#[test]
fn retry_asks_first_too() {
    let mut a = app(false);
    let fx = a.run_command("retry w-4");
    assert!(fx.is_empty(), "nothing is sent before the answer: {fx:?}");
    assert!(screen(&a).contains("retry w-4? y/n"));
    let fx = keys(&mut a, "y");
    assert!(matches!(&fx[..], [Effect::Command { cmd: Command::Retry { id: WorkloadId(4) }, .. }]), "{fx:?}");
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
fn engine_updates_reach_the_views() {
    let mut a = app(false);
    keys(&mut a, "4");
    let mut w = a.model.workloads[&WorkloadId(1)].rec.clone();
    w.id = WorkloadId(99);
    w.name = "fresh-one".into();
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records: vec![Record::Workload(Box::new(w))] })));
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
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records: vec![Record::Workload(Box::new(w))] })));
    assert_eq!(a.derived.workloads.len(), rows, "folded until the next tick");
    a.update(Msg::Tick(canopy::engine::model::Millis(NOW.0 + 1_000)));
    assert_eq!(a.derived.workloads.len(), rows + 1, "shown on the tick");
    // The operator's own filter is never held back.
    keys(&mut a, "/fresh-one");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.derived.workloads.len(), 1);
}

#[test]
fn quitting_a_console_that_runs_the_engine_asks_whether_to_leave_it_running() {
    let mut a = app(false);
    a.owns_engine = true;
    let live = a.model.live();
    assert!(live > 0, "the fixture has live work");
    // q asks instead of quitting; esc stays.
    assert!(keys(&mut a, "q").is_empty());
    assert!(!a.quit);
    let s = screen(&a);
    assert!(
        s.contains(&format!(
            "{live} live workloads: keep the engine running in the background? y/n (esc: stay)"
        )),
        "{s}"
    );
    assert!(code(&mut a, KeyCode::Esc, KeyModifiers::NONE).is_empty());
    assert!(!a.quit && a.leave_running.is_none());
    // Other keys do nothing while it asks.
    keys(&mut a, "q");
    assert!(keys(&mut a, "4").is_empty());
    assert_eq!(a.view, View::Overview);
    // y: quit, leaving the engine in the background.
    assert!(matches!(keys(&mut a, "y")[..], [Effect::Detach]));
    assert!(a.quit);
    // n: quit, stopping it.
    let mut b = app(false);
    b.owns_engine = true;
    b.run_command("quit");
    assert!(b.leave_running.is_some(), ":quit asks too");
    assert!(matches!(keys(&mut b, "n")[..], [Effect::Quit]));
}

#[test]
fn quitting_asks_nothing_when_attached_or_when_nothing_is_live() {
    // Attached: the engine is not this console's to stop or keep.
    let mut a = app(false);
    assert!(matches!(keys(&mut a, "q")[..], [Effect::Quit]));
    // Owned, but only final work.
    let mut b = App::new(Config::default(), Default::default(), NOW);
    b.owns_engine = true;
    assert_eq!(b.model.live(), 0);
    assert!(matches!(keys(&mut b, "q")[..], [Effect::Quit]));
}

#[test]
fn a_lost_engine_is_said_in_words_and_clears_when_it_is_back() {
    use canopy::engine::handle::Link;
    use canopy::engine::model::Millis;
    let mut a = app(false);
    let since = Millis(NOW.0 + 3_723_000); // 01:02:03 UTC after NOW's 23:20:00
    a.update(Msg::Link(Link::Down { since, error: "connection refused".into() }));
    let at = canopy::console::logs::clock(since, 0);
    let s = screen(&a);
    assert!(s.contains(&format!("disconnected — reconnecting (since {at})")), "{s}");
    assert!(s.contains("lost the engine: connection refused"), "{s}");
    // Time passes: the status gets old, but the header says why.
    a.update(Msg::Tick(Millis(NOW.0 + 60_000)));
    let s = screen(&a);
    assert!(s.contains("disconnected") && !s.contains("STALE"), "{s}");
    // Commands still go to the handle, which answers for itself.
    keys(&mut a, "4");
    assert!(screen(&a).lines().next().unwrap().contains("disconnected"));
    a.update(Msg::Link(Link::Up { reloads: 2 }));
    let s = screen(&a);
    assert!(!s.contains("disconnected"), "{s}");
    assert!(s.contains("reconnected"), "{s}");
}

#[test]
fn a_reload_takes_newer_rows_keeps_newer_ones_and_adds_no_event_twice() {
    use canopy::engine::model::{EventKind, EventRecord, Millis, WorkloadState};
    use canopy::engine::shell::Recent;
    let mut a = app(false);
    let mut newer = a.model.workloads[&WorkloadId(1)].rec.clone();
    newer.state = WorkloadState::Succeeded;
    newer.updated_at = Millis(newer.updated_at.0 + 1_000);
    let mut older = a.model.workloads[&WorkloadId(2)].rec.clone();
    older.state = WorkloadState::Queued;
    older.updated_at = Millis(older.updated_at.0 - 1_000);
    let held = a.model.workloads[&WorkloadId(2)].rec.state;
    let ev = EventRecord {
        at: NOW,
        workload: WorkloadId(1),
        attempt: None,
        kind: EventKind::Submitted,
        message: "submitted".into(),
    };
    let recent =
        Recent { workloads: vec![newer, older], events: vec![ev.clone()], total: 2, ..Recent::default() };
    a.update(Msg::Recent(recent.clone()));
    assert_eq!(a.model.workloads[&WorkloadId(1)].rec.state, WorkloadState::Succeeded, "newer wins");
    assert!(!a.model.workloads[&WorkloadId(1)].attempts.is_empty(), "attempts the load lacks stay");
    assert_eq!(a.model.workloads[&WorkloadId(2)].rec.state, held, "older loses");
    a.update(Msg::Recent(recent));
    assert_eq!(a.model.events.iter().filter(|e| **e == ev).count(), 1);
}

#[test]
fn the_audit_view_loads_once_and_lists_newest_first_without_duplicates() {
    use canopy::console::app::{AUDIT_PAGE, Load};
    use canopy::console::fixture::audit;
    use canopy::engine::handle::Link;
    let mut a = app(false);
    a.update(Msg::Link(Link::Up { reloads: 0 }));
    let trail = audit();
    // One record arrived live before the view was opened: the load holds
    // it too, and it shows once.
    let live = trail[1].clone();
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records: vec![Record::Audit(Box::new(live))] })));
    let fx = keys(&mut a, "7");
    assert!(matches!(&fx[..], [Effect::LoadAudit(f)] if f.limit == Some(AUDIT_PAGE)), "{fx:?}");
    assert_eq!(a.view, View::Audit);
    assert!(screen(&a).contains("loading"), "{}", screen(&a));
    a.update(Msg::Audit(Ok(trail.clone())));
    assert_eq!(a.audit.load, Load::Loaded);
    assert_eq!(a.model.audit.len(), trail.len(), "no record twice");
    let s = screen(&a);
    let row =
        |needle: &str| s.lines().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}: {s}"));
    // Newest first: ops' refused retry, alice's cordon, ci's denied
    // cancel, then the day before's token.
    assert!(row("ops-oncall") < row("fra-h100-04"), "{s}");
    assert!(row("fra-h100-04") < row("cleanup"), "{s}");
    assert!(row("cleanup") < row("token-create"), "{s}");
    assert!(s.contains(&format!("audit {n}/{n} newest first", n = trail.len())), "{s}");
    // A record that arrives live goes on top.
    let mut newer = trail[2].clone();
    newer.at = canopy::engine::model::Millis(NOW.0 + 1_000);
    newer.action = "uncordon".into();
    a.update(Msg::Records(Arc::new(Batch { seq: 2, records: vec![Record::Audit(Box::new(newer))] })));
    assert!(screen(&a).lines().nth(3).unwrap().contains("uncordon"), "{}", screen(&a));
    // Leaving and coming back does not load again; `:audit` neither.
    keys(&mut a, "1");
    assert!(keys(&mut a, "7").is_empty());
    assert!(a.run_command("audit").is_empty());
    // Only denied ones: the filter reuses the lists' `/`.
    keys(&mut a, "/outcome=denied");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.derived.audit.len(), 2);
    assert!(a.derived.audit.iter().all(|r| r.outcome.starts_with("denied")));
    // A reconnection loads it again (records may have been missed).
    a.update(Msg::Link(Link::Down { since: NOW, error: "gone".into() }));
    let fx = a.update(Msg::Link(Link::Up { reloads: 1 }));
    assert!(matches!(fx[..], [Effect::LoadAudit(_)]), "{fx:?}");
}

#[test]
fn a_failed_audit_load_is_tried_again_on_the_next_visit() {
    let mut a = app(false);
    assert!(matches!(keys(&mut a, "7")[..], [Effect::LoadAudit(_)]));
    a.update(Msg::Audit(Err("the operator role is needed".into())));
    assert!(screen(&a).contains("the operator role is needed"));
    keys(&mut a, "1");
    assert!(matches!(keys(&mut a, "7")[..], [Effect::LoadAudit(_)]));
}

/// Records that add workload `to` as a copy of `from` (with its attempts).
fn copy_of(a: &App, from: u64, to: u64) -> Vec<Record> {
    let row = &a.model.workloads[&WorkloadId(from)];
    let mut rec = row.rec.clone();
    rec.id = WorkloadId(to);
    let mut out = vec![Record::Workload(Box::new(rec))];
    for at in &row.attempts {
        let mut at = at.clone();
        at.id.workload = WorkloadId(to);
        out.push(Record::Attempt(Box::new(at)));
    }
    out
}

/// Workload `id` finished well (it leaves triage).
fn succeeded(a: &App, id: u64) -> Record {
    let mut rec = a.model.workloads[&WorkloadId(id)].rec.clone();
    rec.state = canopy::engine::model::WorkloadState::Succeeded;
    Record::Workload(Box::new(rec))
}

fn apply(a: &mut App, records: Vec<Record>) {
    a.update(Msg::Records(Arc::new(Batch { seq: 1, records })));
}

/// The row the cursor is on, as drawn.
fn cursor_row(a: &App) -> String {
    screen(a).lines().find(|l| l.contains("│>")).unwrap_or_default().to_string()
}

#[test]
fn the_cursor_stays_on_its_workload_while_rows_move_above_it() {
    let mut a = app(false);
    keys(&mut a, "5jjj");
    let target = a.current_workload().unwrap();
    assert_eq!(target, WorkloadId(4), "{}", screen(&a));
    assert!(cursor_row(&a).contains("w-4 "), "{}", screen(&a));
    // A retry resolves above it (w-18 leaves triage) and two new faults
    // of a class that sorts first arrive: its row moves down one.
    let mut r = vec![succeeded(&a, 18)];
    r.extend(copy_of(&a, 39, 41));
    r.extend(copy_of(&a, 39, 42));
    apply(&mut a, r);
    assert_eq!(a.derived.faults.iter().position(|id| *id == target), Some(4), "it moved");
    assert_eq!(a.current_workload(), Some(target));
    assert!(cursor_row(&a).contains("w-4 "), "{}", screen(&a));
    // `l` opens its logs, not those of whatever took its old row.
    let fx = keys(&mut a, "l");
    assert!(matches!(fx.first(), Some(Effect::TailLogs(Some(at))) if at.workload == target), "{fx:?}");
    // More arrive while reading them; esc comes back to it.
    let r = copy_of(&a, 39, 43);
    apply(&mut a, r);
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage);
    assert_eq!(a.current_workload(), Some(target));
    assert!(cursor_row(&a).contains("w-4 "), "{}", screen(&a));
}

#[test]
fn the_cursor_stays_on_its_workload_through_new_rows_a_sort_and_a_filter() {
    let mut a = app(false);
    keys(&mut a, "4jjj");
    let target = a.current_workload().unwrap();
    assert_eq!(target, WorkloadId(37));
    // New workloads sort above it (newest first).
    let r = [copy_of(&a, 1, 41), copy_of(&a, 2, 42)].concat();
    apply(&mut a, r);
    assert_eq!(a.derived.workloads[0], WorkloadId(42));
    assert_eq!(a.current_workload(), Some(target));
    // Another sort, and a filter it passes.
    keys(&mut a, "s");
    assert_eq!(a.current_workload(), Some(target));
    keys(&mut a, "/job");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.current_workload(), Some(target));
    // Its detail, and back to it.
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!((a.view, a.detail.id), (View::Detail, Some(target)));
    let r = copy_of(&a, 3, 43);
    apply(&mut a, r);
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!((a.view, a.current_workload()), (View::Workloads, Some(target)));
    assert!(cursor_row(&a).contains(&format!("{target} ")), "{}", screen(&a));
}

#[test]
fn when_its_workload_is_gone_the_cursor_stays_at_its_row() {
    let mut a = app(false);
    keys(&mut a, "5jjj");
    let next = a.derived.faults[4];
    let r = succeeded(&a, 4);
    apply(&mut a, vec![r]);
    assert_eq!(a.sel(View::Triage), 3);
    assert_eq!(a.current_workload(), Some(next), "the one that took its row");
    // The last row gone: the new last one.
    keys(&mut a, "G");
    let last = a.derived.faults.len() - 1;
    let before_last = a.derived.faults[last - 1];
    let r = succeeded(&a, a.derived.faults[last].0);
    apply(&mut a, vec![r]);
    assert_eq!(a.current_workload(), Some(before_last));
}

#[test]
fn the_nodes_cursor_follows_its_node_through_a_filter() {
    let mut a = app(false);
    keys(&mut a, "3jj");
    assert_eq!(a.current_node().as_deref(), Some("fra-h100-03"));
    keys(&mut a, "/03");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.sel(View::Nodes), 0, "its row moved up");
    assert_eq!(a.current_node().as_deref(), Some("fra-h100-03"));
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.current_node().as_deref(), Some("fra-h100-03"));
    assert_eq!(a.sel(View::Nodes), 2);
}

#[test]
fn the_audit_cursor_stays_on_its_record_when_newer_ones_arrive() {
    let mut a = app(false);
    keys(&mut a, "7");
    let trail = canopy::console::fixture::audit();
    a.update(Msg::Audit(Ok(trail.clone())));
    keys(&mut a, "jj");
    let picked = a.current_audit().cloned().unwrap();
    let mut newer = trail[0].clone();
    newer.at = canopy::engine::model::Millis(NOW.0 + 1_000);
    newer.action = "uncordon".into();
    apply(&mut a, vec![Record::Audit(Box::new(newer))]);
    assert_eq!(a.sel(View::Audit), 3);
    assert_eq!(a.current_audit(), Some(&picked));
}

#[test]
fn slash_filters_triage_shows_it_and_esc_clears_it() {
    use canopy::failure::FailureClass;
    let mut a = app(false);
    keys(&mut a, "5");
    let all = a.derived.faults.len();
    keys(&mut a, "/class=node");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    let shown = a.derived.faults.len();
    assert!(0 < shown && shown < all, "{shown} of {all}");
    assert!(
        a.derived.faults.iter().all(|id| a.model.workloads[id].fault_class() == Some(FailureClass::Node))
    );
    let s = screen(&a);
    assert!(s.contains(&format!("faults {shown}/{all} /class=node")), "{s}");
    // The groups count what the filter keeps.
    assert_eq!(a.derived.by_class.len(), 1);
    assert!(!s.contains("gpu-oom"), "{s}");
    // Text matches what a row shows, the evidence too.
    a.filter_text.insert(View::Triage, "fallen off".into());
    a.refresh();
    assert_eq!(a.derived.faults.len(), shown);
    // The workloads' filter is their own.
    keys(&mut a, "4");
    assert_eq!(a.derived.workloads.len(), 40);
    keys(&mut a, "5");
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage, "esc clears the filter first");
    assert_eq!(a.derived.faults.len(), all);
    assert!(screen(&a).contains(&format!("faults {all} —")), "{}", screen(&a));
    // Esc while typing clears it too.
    keys(&mut a, "/app");
    assert!(a.derived.faults.len() < all, "as you type");
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.derived.faults.len(), all);
}

#[test]
fn help_scrolls_and_lists_every_key_and_command() {
    use canopy::console::keymap::{BINDINGS, COMMANDS};
    let mut a = app(false);
    keys(&mut a, "?");
    let top = screen(&a);
    assert!(top.contains("help 1-20 of "), "{top}");
    assert!(!top.contains(":quit"), "taller than the screen:\n{top}");
    let mut seen = top.clone();
    for _ in 0..20 {
        code(&mut a, KeyCode::PageDown, KeyModifiers::NONE);
        seen.push_str(&screen(&a));
    }
    let bottom = screen(&a);
    assert!(bottom.contains(":quit"), "{bottom}");
    // Replay keys show in a replay only.
    for b in BINDINGS.iter().filter(|b| b.scope != canopy::console::keymap::Scope::Replay) {
        // Long ones wrap: their start is on one line.
        let start: String = b.help.chars().take(30).collect();
        assert!(seen.contains(start.trim_end()), "{}", b.help);
    }
    for (c, _) in COMMANDS {
        assert!(seen.contains(&format!(":{c} ")), ":{c}");
    }
    assert!(seen.contains("input line") && seen.contains("/ filter"), "{seen}");
    // k, g and G move; q closes (it does not quit).
    keys(&mut a, "k");
    assert_ne!(screen(&a), bottom);
    keys(&mut a, "g");
    assert_eq!(screen(&a), top);
    keys(&mut a, "G");
    assert_eq!(screen(&a), bottom);
    assert!(keys(&mut a, "q").is_empty());
    assert_eq!(a.view, View::Overview);
    // Opened again, it starts at the top.
    keys(&mut a, "?");
    assert_eq!(screen(&a), top);
}

#[test]
fn tab_on_an_ambiguous_command_lists_the_choices() {
    let mut a = app(false);
    keys(&mut a, ":c");
    code(&mut a, KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(a.input.as_ref().unwrap().text, "c");
    let footer = screen(&a).lines().last().unwrap().to_string();
    assert!(footer.contains("capacity  cordon  cancel"), "{footer}");
    keys(&mut a, "o");
    assert!(!screen(&a).contains("capacity  cordon"), "the choices go with the next key");
    code(&mut a, KeyCode::Tab, KeyModifiers::NONE);
    assert_eq!(a.input.as_ref().unwrap().text, "cordon ");
    // Arguments too: the sort columns.
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    keys(&mut a, ":sort a");
    code(&mut a, KeyCode::Tab, KeyModifiers::NONE);
    assert!(screen(&a).lines().last().unwrap().contains("attempt  age"), "{}", screen(&a));
}

#[test]
fn the_sorted_column_is_marked_in_its_header() {
    let mut a = app(false);
    keys(&mut a, "4");
    assert!(screen(&a).lines().nth(2).unwrap().contains("ID▼"), "{}", screen(&a));
    a.run_command("sort age");
    let header = screen(&a).lines().nth(2).unwrap().to_string();
    assert!(header.contains("AGE▼") && !header.contains("ID▼"), "{header}");
    keys(&mut a, "S");
    assert!(screen(&a).lines().nth(2).unwrap().contains("AGE▲"), "{}", screen(&a));
}

/// `a` on a failure asks why, sends the acknowledgement with the reason,
/// and once the engine's record says so the failure leaves triage.
#[test]
fn a_acknowledges_a_failure_with_a_reason_and_it_leaves_triage() {
    let mut a = app(false);
    keys(&mut a, "5");
    let id = a.current_workload().expect("triage has a failure selected");
    let before = a.derived.faults.len();
    assert!(keys(&mut a, "a").is_empty(), "nothing is sent before the reason");
    assert!(screen(&a).contains(&format!("acknowledge {id} — why? (required)")), "{}", screen(&a));
    assert!(code(&mut a, KeyCode::Enter, KeyModifiers::NONE).is_empty(), "a reason is required");
    assert!(a.confirm.is_some(), "still asking");
    let fx = keys(&mut a, "bad input, fixed");
    assert!(fx.is_empty());
    let fx = code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    match &fx[..] {
        [Effect::Command { cmd: Command::Acknowledge { id: sent }, reason: Some(r), .. }] => {
            assert_eq!((*sent, r.as_str()), (id, "bad input, fixed"));
        }
        other => panic!("{other:?}"),
    }
    let mut rec = a.model.workloads[&id].rec.clone();
    rec.acknowledged = Some(canopy::engine::model::Acknowledgement {
        by: "local:op".into(),
        at: rec.updated_at,
        reason: Some("bad input, fixed".into()),
    });
    a.update(Msg::Records(Arc::new(Batch { seq: 99, records: vec![Record::Workload(Box::new(rec))] })));
    assert_eq!(a.derived.faults.len(), before - 1, "{}", screen(&a));
    assert!(!a.derived.faults.contains(&id));
}

/// A console holding part of a long history says so, and asks for the
/// next older page at the end of the list.
#[test]
fn a_partial_list_says_n_of_m_and_pages_older_at_its_end() {
    let mut a = app(false);
    let held = a.model.workloads.len() as u64;
    let oldest = *a.model.workloads.keys().next().unwrap();
    a.update(Msg::Recent(canopy::engine::shell::Recent {
        total: held + 3_000,
        next_page: Some(oldest),
        ..Default::default()
    }));
    keys(&mut a, "4");
    assert!(screen(&a).contains(&format!("/{held} of {}", held + 3_000)), "{}", screen(&a));
    let fx = keys(&mut a, "G");
    assert!(matches!(&fx[..], [Effect::LoadOlder(w)] if *w == oldest), "{fx:?}");
    assert!(keys(&mut a, "j").is_empty(), "one page at a time");
}

/// A node's faults stay in triage's "by node" after the work that met
/// them moved and succeeded: with a count, how long ago, and when they
/// clear.
#[test]
fn a_nodes_fault_history_outlives_the_work_that_moved() {
    use canopy::failure::FailureClass;
    use canopy::health::NodeFault;
    let mut a = app(false);
    let mut status = (**a.model.status.as_ref().unwrap()).clone();
    let node = status.fleet.nodes[5].name.clone();
    let pool = status.fleet.pool_label(status.fleet.nodes[5].pool);
    let at = |mins: i64| canopy::engine::model::Millis(NOW.0 - mins * 60_000);
    status.health.faults.insert(
        node.clone(),
        vec![
            NodeFault { at: at(90), class: FailureClass::Node, pool: pool.clone() },
            NodeFault { at: at(3), class: FailureClass::Node, pool },
        ],
    );
    a.update(Msg::Status(Arc::new(status)));
    keys(&mut a, "5");
    let g = a.derived.by_fault_node.iter().find(|g| g.node == node).expect("the node is in triage");
    assert_eq!(g.count, 2);
    let s = screen(&a);
    let line = s.lines().find(|l| l.contains("node:2")).unwrap_or_else(|| panic!("{s}"));
    assert!(line.contains("3m ago, clears 22h"), "{line}");
}

/// `n` goes from a fault to the node it happened on; Esc comes back to
/// the same fault.
#[test]
fn n_goes_from_a_fault_to_its_node_and_esc_comes_back() {
    let mut a = app(false);
    keys(&mut a, "5j");
    let fault = a.current_workload().unwrap();
    let w = &a.model.workloads[&fault];
    let node = w.attempts.iter().rev().find(|x| x.class.is_some()).unwrap().node.clone();
    keys(&mut a, "n");
    assert_eq!(a.view, View::Nodes);
    assert_eq!(a.current_node().as_deref(), Some(node.as_str()));
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage);
    assert_eq!(a.current_workload(), Some(fault));
    // And from the workloads list.
    keys(&mut a, "4");
    let id = a.current_workload().unwrap();
    let last = a.model.workloads[&id].last_attempt().map(|x| x.node.clone());
    keys(&mut a, "n");
    assert_eq!((a.view, a.current_node()), (View::Nodes, last));
}

fn troubled() -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = App::new(Config::default(), canopy::console::fixture::troubled(fleet), NOW);
    app.update(Msg::Resize(80, 24));
    app
}

#[test]
fn enter_on_a_broken_first_line_opens_what_it_names() {
    // The overview's lines: ray-iad unreachable, 1 quarantined, 1 node
    // down, 6 failed, 2 retrying.
    let mut a = troubled();
    assert_eq!(a.view, View::Overview);
    keys(&mut a, "jj");
    assert!(cursor_row(&a).contains("1 node down"), "{}", screen(&a));
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Nodes);
    assert_eq!(a.current_node().as_deref(), Some("fra-h100-06"), "the down node is open");
    assert!(cursor_row(&a).contains("fra-h100-06") && cursor_row(&a).contains("down"), "{}", screen(&a));

    // Back, then the failed workloads open in triage, and the provider
    // that does not answer opens its pools in the capacity view.
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    assert_eq!(a.view, View::Overview);
    keys(&mut a, "j");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage);
    assert_eq!(a.derived.faults.len(), 6, "the failed ones");
    assert!(a.derived.faults.iter().all(|id| a.model.workloads[id].rec.state.as_str() == "failed"));
    keys(&mut a, "1");
    keys(&mut a, "j");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Triage);
    let mut ids: Vec<u64> = a.derived.faults.iter().map(|id| id.0).collect();
    ids.sort();
    assert_eq!(ids, [19, 22], "the two waiting to retry, not the routine re-placements");
    keys(&mut a, "1");
    keys(&mut a, "g");
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Capacity);
    assert!(cursor_row(&a).contains("ray-iad/"), "{}", screen(&a));

    // Two quarantined nodes open as a filter on the nodes view.
    let mut a = troubled();
    let mut s = (**a.model.status.as_ref().unwrap()).clone();
    s.health.nodes.insert("fra-a100-02".into(), canopy::health::Health::new(0.1, 0.1, 4).quarantined());
    a.update(Msg::Status(Arc::new(s)));
    keys(&mut a, "j");
    assert!(cursor_row(&a).contains("2 quarantined"), "{}", screen(&a));
    code(&mut a, KeyCode::Enter, KeyModifiers::NONE);
    assert_eq!(a.view, View::Nodes);
    let shown: Vec<String> = (0..a.derived.nodes.len())
        .map(|i| a.model.fleet().unwrap().nodes[a.derived.nodes[i] as usize].name.clone())
        .collect();
    assert_eq!(shown, ["fra-h100-04", "fra-a100-02"]);
}

#[test]
fn retrying_counts_only_failed_workloads_waiting_to_run_again() {
    // w-19 and w-22 wait after a failure; w-1 (evicted by a drain) and
    // w-40 (a launch refused for want of room) are routine re-placements,
    // and the running ones that failed once before are running.
    let a = troubled();
    let o = &a.derived.overview;
    assert_eq!(o.counts.retrying, 2);
    let waiting: Vec<u64> =
        a.model.workloads.values().filter(|w| w.waiting_to_retry()).map(|w| w.rec.id.0).collect();
    assert_eq!(waiting, [19, 22]);
    assert!(screen(&a).contains("↻ 2 workloads failed and waiting to retry"));
    // The plain fixture has none waiting (its retried ones run again).
    let plain = app(false);
    assert_eq!(plain.derived.overview.counts.retrying, 0);
    assert!(!screen(&plain).contains("retry"), "{}", screen(&plain));
}

/// Work moved off a drained node, or refused for room, waits to run again
/// without being a fault: triage lists failures, not routine moves.
#[test]
fn an_evicted_or_refused_attempt_is_not_a_fault() {
    use canopy::engine::model::{AttemptId, AttemptState};
    use canopy::failure::FailureClass;
    let mut a = app(false);
    let (id, row) = a
        .model
        .workloads
        .iter()
        .find(|(_, w)| w.rec.state == canopy::engine::model::WorkloadState::Running && w.attempts.len() == 1)
        .map(|(id, w)| (*id, w.clone()))
        .expect("a running workload with one attempt");
    let mut rec = row.rec.clone();
    rec.state = canopy::engine::model::WorkloadState::Queued;
    let mut evicted = row.attempts[0].clone();
    evicted.state = AttemptState::Failed;
    evicted.class = Some(FailureClass::Preempted);
    evicted.rule = Some(canopy::engine::EVICTED_RULE.into());
    let mut refused = evicted.clone();
    refused.id = AttemptId { workload: id, n: 2 };
    refused.class = Some(FailureClass::Capacity);
    refused.rule = Some("provider.capacity".into());
    let records = vec![
        Record::Workload(Box::new(rec)),
        Record::Attempt(Box::new(evicted)),
        Record::Attempt(Box::new(refused)),
    ];
    a.update(Msg::Records(Arc::new(Batch { seq: 98, records })));
    assert!(!a.model.workloads[&id].is_fault());
    assert!(!a.derived.faults.contains(&id), "{id} is in triage");
}
