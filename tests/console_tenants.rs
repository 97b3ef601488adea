//! The console with tenants, as an operator sees it: the tenants view
//! (quota, in use, borrowed, lent, waiting, reclaims in flight, and what
//! binds a tenant), the workloads table's TENANT column and `tenant:`
//! filter, and the quota limit a waiting workload's detail names. The
//! sharing scenario is played by the real engine core (an owner reclaiming
//! its capacity from borrowed work); the console reads its records, and
//! the tenants' numbers are the server's own tally of them (what
//! `GET /v1/tenants` answers). Drawn into a `TestBackend` (monochrome).

mod common;

use canopy::console::app::{App, Config, Effect, Msg, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::model::Model;
use canopy::console::views;
use canopy::engine::core::Event;
use canopy::engine::handle::FleetStatus;
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::server::tenants::{TenantsView, live_usage};
use canopy::tenant::{Tenancy, TenancyDoc};
use common::*;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::BTreeMap;
use std::sync::Arc;

/// team-a owns `cloud/lab` (two nodes of 4 GPUs) with a nominal 8 GPUs;
/// team-b has no quota of its own and may borrow 8 in their cohort.
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
weight = 2.0
[tenant.quota.lab]
gpus = { nominal = 0, borrowing_limit = 8 }
"#;

fn tenancy() -> Tenancy {
    TenancyDoc::parse(TENANTS, false).expect("a valid tenancy").1
}

fn submit_for(w: &mut World, tenant: &str, gpus: u32) -> WorkloadId {
    let mut spec = job_spec(gpus, "");
    spec.runtime.stop_grace = Some(canopy::units::HumanDuration::from_secs(120));
    w.submit_for(&spec, tenant, None)
}

fn start_running(w: &mut World, id: WorkloadId) -> AttemptId {
    let (a, _) = w.last_launch(id);
    w.ack(a);
    w.run(a);
    a
}

/// The scenario: team-b borrows both of team-a's nodes (w-1, w-2); team-a's
/// work (w-3) arrives and reclaims one, whose victim is still stopping;
/// team-b's next (w-4) waits at its borrowing limit.
struct Shared {
    world: World,
    owner: WorkloadId,
    waiting: WorkloadId,
    victim: AttemptId,
}

fn shared() -> Shared {
    let mut w = World::new(cloud_fleet(vec![(gpu_pool("lab", "A100-40", 4, 40.0, 1.0), vec!["n1", "n2"])]));
    w.send(Event::SetTenancy { tenancy: Box::new(tenancy()) });
    let long = submit_for(&mut w, "team-b", 4);
    start_running(&mut w, long);
    w.advance(3600.0);
    let short = submit_for(&mut w, "team-b", 4);
    let victim = start_running(&mut w, short);
    w.advance(600.0);
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.terminated(victim), "the owner's work reclaims a node");
    let waiting = submit_for(&mut w, "team-b", 4);
    assert!(w.launched(waiting).is_none());
    Shared { world: w, owner, waiting, victim }
}

/// The console's read model of everything the core journalled, and its
/// fleet status.
fn read_model(w: &World) -> Model {
    let mut m = Model::default();
    let records: Vec<Record> = w.records().cloned().collect();
    m.apply(&records);
    m.set_status(Arc::new(FleetStatus::of(&w.core, Millis(w.now), BTreeMap::new())));
    m
}

/// What `GET /v1/tenants` answers for the live workloads the model holds.
fn answer(m: &Model) -> TenantsView {
    let tenancy = tenancy();
    let live: Vec<&canopy::console::model::WorkloadRow> =
        m.workloads.values().filter(|w| !w.rec.state.is_final()).collect();
    let workloads: Vec<WorkloadRecord> = live.iter().map(|w| w.rec.clone()).collect();
    let attempts: Vec<AttemptRecord> = live.iter().flat_map(|w| w.attempts.clone()).collect();
    let fleet = m.fleet().expect("a fleet status").clone();
    let (tenants, reclaims) = live_usage(&tenancy, &fleet, &workloads, &attempts);
    TenantsView {
        configured: true,
        default_tenant: tenancy.default_tenant.clone(),
        tenants,
        set_by: Some("canopy.toml".into()),
        set_at: None,
        reclaims,
        fair_share: Vec::new(),
        budgets: Vec::new(),
    }
}

fn app_over(m: Model, now: i64, w: u16, h: u16) -> App {
    let mut app = App::new(Config::default(), m, Millis(now));
    app.update(Msg::Resize(w, h));
    app
}

fn key(app: &mut App, code: KeyCode) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
    key(app, KeyCode::Enter);
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}

/// The cells of the screen line that holds `word` (the row's text split on
/// spaces and the table's border).
fn row_of(text: &str, word: &str) -> Vec<String> {
    let line = text.lines().find(|l| l.contains(word)).unwrap_or_else(|| panic!("no {word} in\n{text}"));
    line.split(['│', ' ', '"', '>']).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

#[test]
fn the_tenants_view_shows_quota_use_borrowing_lending_waiting_and_reclaims() {
    let s = shared();
    let m = read_model(&s.world);
    let view = answer(&m);
    let mut app = app_over(m, s.world.now, 100, 24);
    // 8 opens it and asks the engine; `:tenants` is the same.
    let fx = key(&mut app, KeyCode::Char('8'));
    assert_eq!(app.view, View::Tenants);
    assert!(fx.iter().any(|e| matches!(e, Effect::LoadTenants)), "{fx:?}");
    assert!(screen(&app, 100, 24).contains("loading the tenants…"));
    app.update(Msg::Tenants(Box::new(Ok(view))));
    let text = screen(&app, 100, 24);
    insta::assert_snapshot!("tenants_100x24", text);
    // team-a: quota 8, uses 0 of its own yet, lends the 8 team-b borrows,
    // one workload waiting (its own, reclaiming), one reclaim in flight.
    assert_eq!(
        row_of(&text, "team-a"),
        ["team-a", "lab", "research", "1", "GPU", "8", "0", "-", "8", "1", "1"],
        "{text}"
    );
    // team-b: no quota, 8 in use, all of it borrowed, one waiting.
    assert_eq!(
        row_of(&text, "team-b"),
        ["team-b", "lab", "research", "2", "GPU", "0", "8", "8", "-", "1", "-"],
        "{text}"
    );
    assert!(text.contains("8 tenants"), "the tab shows once tenants are configured:\n{text}");
    // The selected row (team-a) says what binds it: its own work waits,
    // reclaiming.
    assert!(text.contains(&format!("{} waits:", s.owner)), "{text}");
    assert!(text.contains("taking its own capacity back from borrowed work: 1 workload"), "{text}");

    // team-b's row names its borrowing limit in numbers, as `why pending` does.
    key(&mut app, KeyCode::Char('j'));
    let text = screen(&app, 100, 24);
    assert!(text.contains("GPUs: 8 of nominal 0 in use (may borrow 8) — at its limit"), "{text}");
    assert!(text.contains(&format!("{} waits: ", s.waiting)), "{text}");
    assert!(text.contains("team-b: 8/8 lab GPUs in use, 4 more asked"), "{text}");

    // Enter lists the tenant's workloads.
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Workloads);
    assert_eq!(app.filter(View::Workloads), "tenant=team-b");
    assert_eq!(app.derived.workloads.len(), 3);
}

#[test]
fn at_80_columns_the_tenants_view_keeps_every_column() {
    let s = shared();
    let m = read_model(&s.world);
    let view = answer(&m);
    let mut app = app_over(m, s.world.now, 80, 24);
    app.run_command("tenants");
    app.update(Msg::Tenants(Box::new(Ok(view))));
    let text = screen(&app, 80, 24);
    insta::assert_snapshot!("tenants_80x24", text);
    assert_eq!(
        row_of(&text, "team-b"),
        ["team-b", "lab", "research", "2", "GPU", "0", "8", "8", "-", "1", "-"],
        "{text}"
    );
    assert!(text.contains("cohort research, weight 1"), "{text}");
}

#[test]
fn the_reclaim_is_over_once_the_owner_runs() {
    let mut s = shared();
    // While the owner's work waits after its victim stopped (it still
    // does not fit), the reclaim is still in flight; once placed, it is over.
    let mut m = read_model(&s.world);
    let victim = s.victim;
    let owner = s.owner;
    let row = m.workloads.get_mut(&victim.workload).unwrap();
    row.attempts.last_mut().unwrap().ended_at = Some(Millis(s.world.now));
    m.generation += 1;
    assert_eq!(answer(&m).reclaims, BTreeMap::from([("team-a".to_string(), 1)]), "stopped, owner unplaced");
    let placed = AttemptRecord {
        placed_at: Millis(s.world.now + 1),
        ..m.workloads[&victim.workload].attempts[0].clone()
    };
    let row = m.workloads.get_mut(&owner).unwrap();
    row.attempts.push(AttemptRecord { id: AttemptId { workload: owner, n: 1 }, stop: None, ..placed });
    assert!(answer(&m).reclaims.is_empty(), "placed after its victim stopped");

    s.world.confirm_terminated(s.victim, ProviderEnd::Signaled { signal: 15 });
    assert!(s.world.launched(s.owner).is_some(), "the owner's work takes the node");
    let view = answer(&read_model(&s.world));
    assert!(view.reclaims.is_empty(), "{:?}", view.reclaims);
    let a = view.tenants.iter().find(|r| r.tenant == "team-a").unwrap();
    assert_eq!((a.in_use.gpus, a.waiting), (4, 0), "the owner's work holds the node its reclaim freed");
}

#[test]
fn without_tenants_the_view_says_how_to_configure_them_in_one_line() {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = app_over(model(fleet, 40), NOW.0, 80, 24);
    key(&mut app, KeyCode::Char('8'));
    let none = TenantsView {
        configured: false,
        default_tenant: None,
        tenants: Vec::new(),
        set_by: None,
        set_at: None,
        reclaims: BTreeMap::new(),
        fair_share: Vec::new(),
        budgets: Vec::new(),
    };
    app.update(Msg::Tenants(Box::new(Ok(none))));
    insta::assert_snapshot!("tenants_none", screen(&app, 80, 24));
    // Elsewhere, no tenants tab and no TENANT column: the console as it was.
    key(&mut app, KeyCode::Char('4'));
    let text = screen(&app, 80, 24);
    assert!(!text.contains("TENANT") && !text.contains("tenants"), "{text}");
}

#[test]
fn a_failed_load_says_why_and_how_to_try_again() {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = app_over(model(fleet, 4), NOW.0, 80, 24);
    key(&mut app, KeyCode::Char('8'));
    app.update(Msg::Tenants(Box::new(Err("the server is not reachable".into()))));
    let text = screen(&app, 80, 24);
    assert!(
        text.contains("✗ cannot load the tenants: the server is not reachable; 8 (or :tenants)"),
        "{text}"
    );
    let fx = key(&mut app, KeyCode::Char('8'));
    assert!(fx.iter().any(|e| matches!(e, Effect::LoadTenants)), "8 again tries again: {fx:?}");
}

/// The fixture's workloads, every third team-a's, every third team-b's,
/// the rest from before tenants.
fn with_tenants() -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut m = model(fleet, 40);
    for (i, w) in m.workloads.values_mut().enumerate() {
        w.rec.tenant = match i % 3 {
            0 => Some("team-a".into()),
            1 => Some("team-b".into()),
            _ => None,
        };
    }
    m.generation += 1;
    app_over(m, NOW.0, 80, 24)
}

#[test]
fn the_workloads_table_has_a_tenant_column_and_a_tenant_filter() {
    let mut app = with_tenants();
    key(&mut app, KeyCode::Char('4'));
    let text = screen(&app, 80, 24);
    insta::assert_snapshot!("workloads_tenants", text);
    assert!(text.contains(" TENANT "), "{text}");
    assert_eq!(row_of(&text, " w-40 ")[2], "team-a", "{text}");

    // `/tenant:team-a`: only team-a's rows.
    key(&mut app, KeyCode::Char('/'));
    typed(&mut app, "tenant:team-a");
    let text = screen(&app, 80, 24);
    insta::assert_snapshot!("workloads_tenant_filter", text);
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" w-")).collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|l| l.contains("team-a")), "{text}");
    let ids = &app.derived.workloads;
    assert_eq!(ids.len(), 14, "every third of 40, from the first");
    assert!(ids.iter().all(|id| app.model.workloads[id].rec.tenant.as_deref() == Some("team-a")));
    // `tenant=` is the same filter; `!tenant:team-a` the others.
    key(&mut app, KeyCode::Esc);
    key(&mut app, KeyCode::Char('/'));
    typed(&mut app, "!tenant:team-a");
    assert_eq!(app.derived.workloads.len(), 26);
}

#[test]
fn workload_detail_names_the_quota_limit_it_waits_on() {
    let s = shared();
    let mut app = app_over(read_model(&s.world), s.world.now, 100, 30);
    app.run_command(&format!("describe {}", s.waiting));
    assert_eq!(app.view, View::Detail);
    let text = screen(&app, 100, 30);
    // The pane's text, its wrapped lines joined.
    let body: String = text.lines().skip(2).map(|l| l.trim_matches(['"', '│'])).collect();
    let why = &body[body.find("why not running:").unwrap_or_else(|| panic!("{text}"))..];
    let why = &why[..why.find("spec").unwrap_or(why.len())];
    assert!(why.contains("team-b: 8/8 lab GPUs in use, 4 more asked (nominal 0, may borrow 8)"), "{why}");
    assert!(text.contains("tenant: team-b"), "the detail says whose work it is:\n{text}");
}

#[test]
fn the_tenants_are_loaded_again_when_an_admin_changes_the_tables() {
    let s = shared();
    let m = read_model(&s.world);
    let view = answer(&m);
    let mut app = app_over(m, s.world.now, 100, 24);
    key(&mut app, KeyCode::Char('8'));
    app.update(Msg::Tenants(Box::new(Ok(view))));
    let audit = AuditRecord {
        at: Millis(s.world.now),
        principal: "alice".into(),
        origin: "socket".into(),
        action: "tenants-set".into(),
        target: None,
        outcome: "ok: 2 tenants, 1 flavors".into(),
        reason: None,
    };
    let fx =
        app.update(Msg::Records(Arc::new(Batch { seq: 9, records: vec![Record::Audit(Box::new(audit))] })));
    assert!(fx.iter().any(|e| matches!(e, Effect::LoadTenants)), "{fx:?}");
    // And every few seconds while the view is shown, not elsewhere.
    let fx = app.update(Msg::Tick(Millis(s.world.now + 1_000)));
    // (A tick also asks which server leads: not the tenants' load.)
    let no_tenants = |fx: &[Effect]| !fx.iter().any(|e| matches!(e, Effect::LoadTenants));
    assert!(no_tenants(&fx), "one load at a time: {fx:?}");
    app.update(Msg::Tenants(Box::new(Ok(answer(&app.model)))));
    let later = s.world.now + canopy::console::tenants::REFRESH + 1_000;
    let fx = app.update(Msg::Tick(Millis(later)));
    assert!(fx.iter().any(|e| matches!(e, Effect::LoadTenants)), "{fx:?}");
    app.update(Msg::Tenants(Box::new(Ok(answer(&app.model)))));
    key(&mut app, KeyCode::Char('1'));
    let fx = app.update(Msg::Tick(Millis(later + 2 * canopy::console::tenants::REFRESH)));
    assert!(no_tenants(&fx), "{fx:?}");
}

/// With `[fair_share]`, the selected tenant's pane says where it stands in
/// the serving order, as a waiting workload's reason does.
#[test]
fn the_selected_tenant_says_where_it_stands_in_the_fair_share_order() {
    let s = shared();
    let m = read_model(&s.world);
    let mut view = answer(&m);
    let standing = |tenant: &str, share: f64, fair: f64, position: usize| canopy::tenant::fair::Standing {
        tenant: tenant.into(),
        usage_gpu_hours: share * 10.0,
        share,
        fair_share: fair,
        position,
    };
    view.fair_share = vec![standing("team-b", 0.2, 2.0 / 3.0, 1), standing("team-a", 0.8, 1.0 / 3.0, 2)];
    let mut app = app_over(m, s.world.now, 100, 24);
    key(&mut app, KeyCode::Char('8'));
    app.update(Msg::Tenants(Box::new(Ok(view))));
    let text = screen(&app, 100, 24);
    assert!(
        text.contains("fair share: team-a is at 0.80 of its fair share 0.33; next after team-b"),
        "{text}"
    );
}

/// The selected tenant's pane shows its budgets: spent of limit this
/// period, in the numbers `canopy tenants` prints, and what each holds.
#[test]
fn the_selected_tenant_shows_its_budgets_spent_of_limit() {
    use canopy::tenant::budget::{Period, Spend, Standing};
    let s = shared();
    let m = read_model(&s.world);
    let mut view = answer(&m);
    let budget = |name: &str, tenant: &str, spent: u64, holding: u64| Standing {
        name: name.into(),
        scope: format!("tenant {tenant}"),
        period: Period::Month,
        time_zone: "UTC".into(),
        start: Millis(0),
        end: Millis(1),
        limit_micro_usd: Some(500_000_000),
        limit_gpu_ms: None,
        spent: Spend { micro_usd: spent, gpu_ms: 0 },
        committed: Spend::default(),
        holding,
        hard: false,
    };
    view.budgets = vec![budget("a-month", "team-a", 450_000_000, 2), budget("b-month", "team-b", 1, 0)];
    let mut app = app_over(m, s.world.now, 100, 24);
    key(&mut app, KeyCode::Char('8'));
    app.update(Msg::Tenants(Box::new(Ok(view))));
    let text = screen(&app, 100, 24);
    assert!(text.contains("budget a-month per month: $450.00 of $500.00 (90%); holds 2"), "{text}");
    assert!(!text.contains("b-month"), "another tenant's budget: {text}");
}
