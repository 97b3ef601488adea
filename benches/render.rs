//! Rendering each console view with 10,000 workloads and 2,000 nodes into a
//! 120×40 buffer (target: ≤ 2 ms a frame), and the sort and filter keys on
//! the workloads list (target: ≤ 16 ms a key).

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
    sort_and_filter_keys(c);
}

fn key(app: &mut App, code: KeyCode) {
    app.update(Msg::Key(KeyEvent::new(code, KeyModifiers::NONE)));
}

/// What an operator waits for on the workloads list of 10,000 rows: one
/// `s` (the next sort column) and one key typed into the `/` filter, each
/// through `App::update` until the list is derived again. Target: ≤ 16 ms.
fn sort_and_filter_keys(c: &mut Criterion) {
    let fleet = canopy::fleet::synth::synth_fleet(2_000, 7);
    let mut app = App::new(Config::default(), model(fleet, 10_000), NOW);
    app.update(Msg::Resize(120, 40));
    key(&mut app, KeyCode::Char('4'));
    c.bench_function("keys/sort-10k", |b| b.iter(|| key(&mut app, KeyCode::Char('s'))));
    key(&mut app, KeyCode::Char('/'));
    // One key typed at the end of a filter (the typing is timed, the
    // erasing that resets it is not), for a few kinds of filter.
    for (typed, next, name) in
        [("", 'w', "first"), ("w-1", '2', "text"), ("state=f", 'a', "field"), ("tr.i", 'n', "regex")]
    {
        for ch in typed.chars() {
            key(&mut app, KeyCode::Char(ch));
        }
        c.bench_function(&format!("keys/filter-{name}-10k"), |b| {
            b.iter_custom(|iters| {
                let mut spent = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let t = std::time::Instant::now();
                    key(&mut app, KeyCode::Char(next));
                    spent += t.elapsed();
                    key(&mut app, KeyCode::Backspace);
                }
                spent
            })
        });
        for _ in typed.chars() {
            key(&mut app, KeyCode::Backspace);
        }
    }
    // Erasing the last key: the filter widens.
    for ch in "w-12".chars() {
        key(&mut app, KeyCode::Char(ch));
    }
    c.bench_function("keys/filter-erase-10k", |b| {
        b.iter_custom(|iters| {
            let mut spent = std::time::Duration::ZERO;
            for _ in 0..iters {
                let t = std::time::Instant::now();
                key(&mut app, KeyCode::Backspace);
                spent += t.elapsed();
                key(&mut app, KeyCode::Char('2'));
            }
            spent
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).warm_up_time(std::time::Duration::from_millis(300)).measurement_time(std::time::Duration::from_secs(1));
    targets = render
}
criterion_main!(benches);
