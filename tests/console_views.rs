//! Snapshot tests of every console view with fixed data (80×24, the
//! monochrome theme), plus the style rules snapshots cannot see.

use canopy::console::app::{App, Config, Msg, View};
use canopy::console::fixture::{NOW, model};
use canopy::console::logs::LogLine;
use canopy::console::views;
use canopy::engine::model::{AttemptId, WorkloadId};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Modifier;

fn app() -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = App::new(Config::default(), model(fleet, 40), NOW);
    app.update(Msg::Resize(80, 24));
    app
}

fn key(app: &mut App, c: char) {
    app.update(Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)));
}

fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| views::draw(f, app)).unwrap();
    t
}

fn snap(name: &str, app: &App) {
    insta::assert_snapshot!(name, render(app, 80, 24).backend());
}

#[test]
fn overview() {
    snap("overview", &app());
}

#[test]
fn capacity() {
    let mut a = app();
    key(&mut a, '2');
    snap("capacity", &a);
}

#[test]
fn nodes() {
    let mut a = app();
    key(&mut a, '3');
    snap("nodes", &a);
}

#[test]
fn workloads() {
    let mut a = app();
    key(&mut a, '4');
    snap("workloads", &a);
}

#[test]
fn triage() {
    let mut a = app();
    key(&mut a, '5');
    snap("triage", &a);
}

#[test]
fn detail() {
    let mut a = app();
    key(&mut a, '4');
    for _ in 0..3 {
        key(&mut a, 'j');
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    assert_eq!(a.view, View::Detail);
    snap("detail", &a);
}

#[test]
fn logs() {
    let mut a = app();
    a.update(Msg::Key(KeyEvent::new(KeyCode::Char(':'), KeyModifiers::NONE)));
    for c in "logs w-4".chars() {
        key(&mut a, c);
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    assert_eq!(a.view, View::Logs);
    let attempt = AttemptId { workload: WorkloadId(4), n: 2 };
    let lines = (0..30)
        .map(|i| LogLine {
            at: NOW,
            stderr: i % 7 == 0,
            text: if i == 20 {
                "torch.OutOfMemoryError: CUDA out of memory".into()
            } else {
                format!("step {i} loss=0.{i}")
            },
        })
        .collect();
    a.update(Msg::Log(attempt, lines));
    snap("logs", &a);
}

#[test]
fn editor_with_a_mistake() {
    let mut a = app();
    key(&mut a, '6');
    for c in "oops ".chars() {
        key(&mut a, c);
    }
    assert!(a.editor.problems.iter().any(|p| p.error && p.line == 1));
    snap("editor_error", &a);
}

#[test]
fn editor_preview() {
    let mut a = app();
    key(&mut a, '6');
    snap("editor_preview", &a);
}

#[test]
fn help() {
    let mut a = app();
    key(&mut a, '?');
    snap("help", &a);
}

#[test]
fn selection_is_reverse_video_not_colour_alone() {
    let mut a = app();
    key(&mut a, '4');
    let t = render(&a, 80, 24);
    let buf = t.backend().buffer();
    // Row 3 is the first data row (header line, border, column header).
    let cell = &buf[(1, 3)];
    assert_eq!(cell.symbol(), ">");
    assert!(cell.modifier.contains(Modifier::REVERSED));
}

#[test]
fn small_and_tiny_screens_do_not_panic() {
    let mut a = app();
    for v in ['1', '2', '3', '4', '5', '6', '?'] {
        key(&mut a, v);
        for (w, h) in [(80, 24), (60, 15), (30, 8), (10, 3), (1, 1)] {
            a.update(Msg::Resize(w, h));
            render(&a, w, h);
        }
        key(&mut a, '\u{1b}');
        a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    }
}
