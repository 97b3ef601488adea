//! The console's header says where the server it reads stands among the
//! servers on a PostgreSQL journal (issue 33): `leader`, or `standby of
//! <holder>`, with the last failover's time when there is room; nothing
//! on a SQLite journal (one server, no HA set). Snapshots of the header
//! line (monochrome theme, fixed data).

use canopy::console::app::{App, Config, Effect, Msg, SERVERS_EVERY_MS};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use canopy::engine::model::Millis;
use canopy::server::servers::ServersView;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;

fn app(width: u16) -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = App::new(Config::default(), model(fleet, 4), NOW);
    app.update(Msg::Resize(width, 24));
    app
}

/// The header line as drawn at `width` columns.
fn header(app: &App, width: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(width, 24)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    let buf = t.backend().buffer();
    (0..width).map(|x| buf[(x, 0)].symbol().to_string()).collect::<String>().trim_end().to_string()
}

/// `GET /v1/servers` as `answered_by` would answer it.
fn servers(journal: &str, answered_by: &str, leader: Option<&str>, failover: bool) -> ServersView {
    let last_failover = failover.then(|| {
        json!({ "from": "db-a pid 11", "to": "db-b pid 22", "epoch": 2, "at": NOW.0 - 60_000, "from_expired_at": 0 })
    });
    serde_json::from_value(json!({
        "journal": journal,
        "answered_by": answered_by,
        "epoch": 2,
        "leader": leader,
        "leader_address": "",
        "lease_taken_at": null,
        "lease_expires_at": null,
        "now": NOW.0,
        "servers": [],
        "last_failover": last_failover,
    }))
    .unwrap()
}

fn with(width: u16, v: ServersView) -> String {
    let mut a = app(width);
    a.update(Msg::Servers(Box::new(Ok(v))));
    header(&a, width)
}

#[test]
fn the_header_shows_the_servers_role_and_the_last_failover() {
    let b = "db-b pid 22";
    let lines = [
        ("sqlite", with(120, servers("sqlite", "me pid 1", Some("me pid 1"), false))),
        ("leader", with(120, servers("postgres", b, Some(b), true))),
        ("standby", with(120, servers("postgres", "db-c pid 33", Some(b), true))),
        ("standby_no_failover", with(120, servers("postgres", "db-c pid 33", Some(b), false))),
        ("standby_no_leader", with(120, servers("postgres", "db-c pid 33", None, true))),
        ("standby_narrow", with(90, servers("postgres", "db-c pid 33", Some(b), true))),
    ];
    let text: Vec<String> = lines.iter().map(|(k, l)| format!("{k:>20} |{l}|")).collect();
    insta::assert_snapshot!("header_roles", text.join("\n"));
    assert!(!lines[0].1.contains("leader") && !lines[0].1.contains("standby"), "no HA set on SQLite");
    assert!(lines[2].1.contains("standby of db-b pid 22"), "{}", lines[2].1);
}

#[test]
fn the_console_asks_which_server_leads_at_once_and_then_every_ten_seconds() {
    let mut a = app(120);
    let asks = |fx: &[Effect]| fx.iter().filter(|e| matches!(e, Effect::LoadServers)).count();
    assert_eq!(asks(&a.update(Msg::Tick(NOW))), 1, "at the first tick");
    assert_eq!(asks(&a.update(Msg::Tick(Millis(NOW.0 + 1_000)))), 0, "one in flight");
    a.update(Msg::Servers(Box::new(Err("no server answers".into()))));
    assert_eq!(asks(&a.update(Msg::Tick(Millis(NOW.0 + 2_000)))), 0, "not yet due");
    assert_eq!(asks(&a.update(Msg::Tick(Millis(NOW.0 + SERVERS_EVERY_MS)))), 1);
    // A failed ask leaves what was shown: nothing yet here.
    assert!(!header(&a, 120).contains("standby"));
}
