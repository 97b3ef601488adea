//! The console's usage view, as an operator sees it: GPU-hours held per
//! day for the selected group, the table by tenant (b: owner, provider,
//! …) in `canopy usage`'s columns, and the waste split by whose fault.
//! The work is played by the real engine core (a success across midnight,
//! a workload's own error, a node fault and its retry); the report is
//! built from the core's records by the ledger and report code
//! `GET /v1/usage` runs, for the path the view asked for. Drawn into a
//! `TestBackend` (monochrome).

mod common;

use canopy::console::app::{App, Config, Effect, Msg};
use canopy::console::model::Model;
use canopy::console::views;
use canopy::engine::core::Event;
use canopy::engine::handle::FleetStatus;
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::tenant::{Tenancy, TenancyDoc};
use canopy::usage::report::{self, By, Report};
use canopy::usage::{Context, Work, ledger};
use common::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// team-a owns `cloud/lab` (two nodes of 4 GPUs); team-b borrows.
const TENANTS: &str = r#"
default_tenant = "team-a"
[[flavor]]
name = "lab"
providers = ["cloud"]
[[tenant]]
name = "team-a"
cohort = "research"
owns = ["cloud/lab"]
max_reclaim_delay = "10m"
[tenant.quota.lab]
gpus = 8
[[tenant]]
name = "team-b"
cohort = "research"
[tenant.quota.lab]
gpus = { nominal = 0, borrowing_limit = 8 }
"#;

fn tenancy() -> Tenancy {
    TenancyDoc::parse(TENANTS, false).expect("a valid tenancy").1
}

fn submit_for(w: &mut World, tenant: &str, gpus: u32, extra: &str) -> WorkloadId {
    w.submit_for(&job_spec(gpus, extra), tenant, None)
}

fn start_running(w: &mut World, id: WorkloadId) -> AttemptId {
    let (a, _) = w.last_launch(id);
    w.run(a);
    a
}

/// From T0 (22:13 UTC): team-a's w-1 runs 2 h across midnight and
/// succeeds; team-b's w-2 runs 1 h and fails on its own (a ValueError,
/// no retry); the next day team-a's w-3 loses its node after 30 min and
/// its retry runs 1 h and succeeds.
fn played() -> World {
    let mut w = World::new(cloud_fleet(vec![(gpu_pool("lab", "A100-40", 4, 40.0, 2.0), vec!["n1", "n2"])]));
    w.send(Event::SetTenancy { tenancy: Box::new(tenancy()) });
    let ok = submit_for(&mut w, "team-a", 4, "");
    let bad = submit_for(&mut w, "team-b", 4, "[retry]\nmax_attempts = 1\n");
    let ok_a = start_running(&mut w, ok);
    let bad_a = start_running(&mut w, bad);
    w.advance(3600.0);
    w.end(bad_a, ProviderEnd::Exited { code: 1 }, &["Traceback (most recent call last):", "ValueError: bad"]);
    w.advance(3600.0);
    w.end(ok_a, ProviderEnd::Exited { code: 0 }, &[]);
    w.advance(12.0 * 3600.0);
    let faulty = submit_for(&mut w, "team-a", 4, "");
    let lost = start_running(&mut w, faulty);
    w.advance(1800.0);
    w.end(lost, ProviderEnd::NodeLost { message: "n1 stopped answering".into() }, &[]);
    for _ in 0..20 {
        if w.try_last_launch(faulty).is_some_and(|(a, _)| a != lost) {
            break;
        }
        w.advance(60.0);
    }
    let retry = start_running(&mut w, faulty);
    assert_ne!(retry, lost, "the node fault is retried");
    w.advance(3600.0);
    w.end(retry, ProviderEnd::Exited { code: 0 }, &[]);
    w.advance(60.0);
    w
}

/// The console's read model of everything the core journalled.
fn read_model(w: &World) -> Model {
    let mut m = Model::default();
    let records: Vec<Record> = w.records().cloned().collect();
    m.apply(&records);
    m.set_status(Arc::new(FleetStatus::of(&w.core, Millis(w.now), BTreeMap::new())));
    m
}

/// What `GET /v1/usage` answers an admin for `path` (`by`, `since`,
/// `per_day`) over the core's records: the journal's newest record of
/// each workload and attempt, through the ledger and the report.
fn answer(w: &World, path: &str) -> Report {
    let query: HashMap<&str, &str> =
        path.split_once('?').unwrap().1.split('&').filter_map(|kv| kv.split_once('=')).collect();
    let by: By = query["by"].parse().unwrap();
    let since = Some(Millis(query["since"].parse().unwrap()));
    assert_eq!(query["per_day"], "true");
    let tenancy = tenancy();
    let (mut work, mut attempts) = (BTreeMap::new(), BTreeMap::new());
    for r in w.records() {
        match r {
            Record::Workload(x) => {
                work.insert(x.id, Work::of(x, tenancy.default_tenant.as_deref()));
            }
            Record::Attempt(a) => {
                attempts.insert((a.id.workload, a.id.n), (**a).clone());
            }
            _ => {}
        }
    }
    let work: Vec<Work> = work.into_values().collect();
    let attempts: Vec<AttemptRecord> = attempts.into_values().collect();
    let now = Millis(w.now);
    let ctx = Context::new(w.core.fleet(), &tenancy, &attempts);
    let rows = ledger::rows(&ctx, &work, &attempts, now);
    let mut r = report::report(&rows, &ctx, by, since, now);
    r.days = report::days(&rows, by, since, now);
    r
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}

/// The cells of the screen line inside a pane that holds `word` (split
/// on spaces and the borders; the panes' titles are not rows).
fn row_of(text: &str, word: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("\"│") && l.contains(word))
        .unwrap_or_else(|| panic!("no {word} in\n{text}"));
    line.split(['│', ' ', '"', '>']).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// The path the view asked for.
fn asked(fx: &[Effect]) -> String {
    fx.iter()
        .find_map(|e| if let Effect::LoadUsage(p) = e { Some(p.clone()) } else { None })
        .unwrap_or_else(|| panic!("the view asks for the usage: {fx:?}"))
}

/// The app on the usage view, answered.
fn opened(w: &World, width: u16, height: u16) -> App {
    let mut app = App::new(Config::default(), read_model(w), Millis(w.now));
    app.update(Msg::Resize(width, height));
    let path = asked(&key(&mut app, KeyCode::Char('9')));
    app.update(Msg::Usage(Box::new(Ok(answer(w, &path)))));
    app
}

#[test]
fn the_usage_view_shows_the_days_the_groups_and_the_waste_as_canopy_usage_counts_them() {
    let w = played();
    let mut app = opened(&w, 110, 32);
    let r = app.usage.report.clone().unwrap();
    let text = screen(&app, 110, 32);
    insta::assert_snapshot!("usage_110x32", text);

    // Every group and the total, cell for cell `canopy usage`'s.
    assert_eq!(r.groups.iter().map(|g| g.key.as_str()).collect::<Vec<_>>(), ["team-a", "team-b"]);
    for (name, l) in [("team-a", &r.groups[0]), ("team-b", &r.groups[1]), ("TOTAL", &r.total)] {
        let mut want = vec![name.to_string()];
        want.extend(report::table_cells(l));
        assert_eq!(row_of(&text, &format!(" {name} ")), want, "{text}");
    }
    let head = row_of(&text, " ATTEMPTS ");
    assert_eq!(head[0], "TENANT");
    assert_eq!(head[1..], report::TABLE_COLUMNS, "{text}");

    // The figures the fixture made: 4 GPUs each, 2 h useful (w-1), 1 h
    // lost to team-b's own error (w-2), 30 min lost to the node (w-3.1),
    // 1 h useful again (w-3.2); the launches were never idle.
    let h = |x: u64| x * 3_600_000;
    let t = &r.total;
    assert_eq!(t.useful_gpu_ms, h(4 * 3));
    assert_eq!(t.wasted_own_gpu_ms, h(4));
    assert_eq!(t.wasted_infra_gpu_ms, h(2));
    assert_eq!(t.lost_by_class_gpu_ms.keys().collect::<Vec<_>>(), ["app", "node"]);

    // The waste split of the selected row (team-a), in the same words.
    let split = |text: &str, col: &str| row_of(text, &format!("│{col} "))[1].clone();
    let a = &r.groups[0];
    assert_eq!(split(&text, "USEFUL"), report::hours(a.useful_gpu_ms));
    assert_eq!(split(&text, "LOST:INFRA"), report::hours(a.wasted_infra_gpu_ms));
    assert_eq!(split(&text, "LOST:OWN"), "0.00");
    assert!(text.contains(&format!("lost GPU-hours by class: {}", report::lost_by_class(a))), "{text}");
    assert!(text.contains("GPU-hours held per day (UTC), team-a"), "{text}");

    // The chart: team-a's days. w-1 ran 4 GPUs from T0 (22:13 UTC) for
    // 2 h: its share before midnight on the 14th, the rest and all of
    // w-3 (0.5 h lost, 1 h useful) on the 15th.
    let days = app.usage.per_day();
    assert_eq!(days.len(), 14);
    let midnight = days[13].0;
    let before = 4 * u64::try_from(midnight.0 - T0).unwrap();
    assert_eq!((days[12].1, days[13].1), (before, a.gpu_ms - before), "{days:?}");
    assert!(days[..12].iter().all(|d| d.1 == 0), "{days:?}");
    assert!(text.contains("█7.1██ █6.9██"), "the bars say their GPU-hours: {text}");

    // j: team-b, whose loss is its own.
    key(&mut app, KeyCode::Char('j'));
    let text = screen(&app, 110, 32);
    assert!(text.contains("GPU-hours held per day (UTC), team-b"), "{text}");
    assert_eq!(split(&text, "LOST:OWN"), report::hours(r.groups[1].wasted_own_gpu_ms));
    assert!(text.contains("lost GPU-hours by class: app 4.00"), "{text}");
}

#[test]
fn at_80_columns_it_keeps_the_chart_the_figures_and_the_split() {
    let w = played();
    let app = opened(&w, 80, 24);
    let text = screen(&app, 80, 24);
    insta::assert_snapshot!("usage_80x24", text);
    let r = app.usage.report.as_ref().unwrap();
    let total = row_of(&text, " TOTAL ");
    assert_eq!(total[0], "TOTAL");
    for cell in [report::hours(r.total.useful_gpu_ms), report::usd(r.total.cost_micro_usd)] {
        assert!(total.contains(&cell), "{cell} in {total:?}\n{text}");
    }
    for col in ["USEFUL", "LOST:INFRA", "LOST:OWN", "DECISION", "IDLE", "LIVE"] {
        assert!(text.lines().any(|l| l.contains(&format!("│{col} "))), "{col}\n{text}");
    }
}

#[test]
fn b_groups_by_the_next_dimension_and_asks_again() {
    let w = played();
    let mut app = opened(&w, 110, 32);
    let path = asked(&key(&mut app, KeyCode::Char('b')));
    assert!(path.contains("by=owner"), "{path}");
    // Until the answer comes, the tenants' figures stay, saying so.
    assert!(screen(&app, 110, 32).contains("loading by owner…"));
    app.update(Msg::Usage(Box::new(Ok(answer(&w, &path)))));
    let text = screen(&app, 110, 32);
    let r = app.usage.report.as_ref().unwrap();
    assert_eq!(r.by, By::Owner);
    assert_eq!(row_of(&text, " ATTEMPTS ")[0], "OWNER");
    // team-a owns the lab: everything ran there; as an owner it lent
    // team-b's hour.
    let mut want = vec!["team-a".to_string()];
    want.extend(report::table_cells(&r.groups[0]));
    assert_eq!(row_of(&text, " team-a "), want, "{text}");
    assert!(text.contains("as an owner: lent 4.00 GPU-h"), "{text}");
    // Through the command line too, and on a tick it refreshes.
    let fx = app.update(Msg::Tick(Millis(w.now + canopy::console::usage::REFRESH)));
    assert!(asked(&fx).contains("by=owner"), "{fx:?}");
}

#[test]
fn a_failed_load_says_why_and_how_to_try_again() {
    let w = played();
    let mut app = App::new(Config::default(), read_model(&w), Millis(w.now));
    app.update(Msg::Resize(80, 24));
    key(&mut app, KeyCode::Char(':'));
    for c in "usage".chars() {
        key(&mut app, KeyCode::Char(c));
    }
    let fx = key(&mut app, KeyCode::Enter);
    asked(&fx);
    app.update(Msg::Usage(Box::new(Err("the server is not reachable".into()))));
    let text = screen(&app, 80, 24);
    assert!(text.contains("✗ cannot load the usage: the server is not reachable; 9 (or :usage)"), "{text}");
    assert!(text.contains("9 usage"), "the tab shows while the view does: {text}");
}
