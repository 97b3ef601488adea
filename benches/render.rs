//! Rendering each console view with 10,000 workloads and 2,000 nodes into a
//! 120×40 buffer. Target: ≤ 2 ms a frame.

use canopy::console::app::{App, Config, Msg};
use canopy::console::fixture::{NOW, model};
use canopy::console::views;
use criterion::{Criterion, criterion_group, criterion_main};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn render(c: &mut Criterion) {
    let fleet = canopy::fleet::synth::synth_fleet(2_000, 7);
    let mut app = App::new(Config::default(), model(fleet, 10_000), NOW);
    app.update(Msg::Resize(120, 40));
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    for (key, name) in [
        ('1', "overview"),
        ('2', "capacity"),
        ('3', "nodes"),
        ('4', "workloads"),
        ('5', "triage"),
        ('6', "editor"),
    ] {
        if name == "editor" {
            app.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
        }
        app.update(Msg::Key(KeyEvent::new(KeyCode::Char(key), KeyModifiers::NONE)));
        c.bench_function(&format!("render/{name}"), |b| {
            b.iter(|| {
                term.draw(|f| views::draw(f, &app)).unwrap();
            });
        });
    }
    app.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    app.update(Msg::Key(KeyEvent::new(KeyCode::Char('4'), KeyModifiers::NONE)));
    app.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    c.bench_function("render/detail", |b| {
        b.iter(|| {
            term.draw(|f| views::draw(f, &app)).unwrap();
        })
    });
    c.bench_function("update/filter-10k", |b| {
        b.iter(|| {
            app.filter_text.insert(canopy::console::View::Workloads, "state=failed".into());
            app.refresh();
            app.filter_text.remove(&canopy::console::View::Workloads);
            app.refresh();
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = render
}
criterion_main!(benches);
