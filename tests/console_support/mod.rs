//! What the whole-app console tests share: an app over the demo fleet's
//! fixture model, keys typed into it, and the screen it draws.
#![allow(dead_code)]

use canopy::console::app::{App, Config, Effect, Msg};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

pub fn app(read_only: bool) -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let config = Config { read_only, ..Config::default() };
    let mut app = App::new(config, model(fleet, 40), NOW);
    app.update(Msg::Resize(80, 24));
    app
}

pub fn keys(app: &mut App, s: &str) -> Vec<Effect> {
    s.chars()
        .flat_map(|c| app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))))
        .collect()
}

pub fn code(app: &mut App, c: KeyCode, m: KeyModifiers) -> Vec<Effect> {
    app.update(Msg::Key(KeyEvent::new(c, m)))
}

pub fn screen(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t.backend().to_string()
}
