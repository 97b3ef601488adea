//! Snapshot tests of every console view with fixed data (80×24, the
//! monochrome theme), plus the style rules snapshots cannot see.

use canopy::console::app::{App, Config, Msg, View};
use canopy::console::backend::DepthBackend;
use canopy::console::fixture::{NOW, model};
use canopy::console::logs::LogLine;
use canopy::console::replay::ReplayStatus;
use canopy::console::theme::{ColorDepth, Theme};
use canopy::console::views;
use canopy::engine::model::{AttemptId, WorkloadId};
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::{Terminal, TerminalOptions, Viewport};

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

/// The fixture with more trouble ([`canopy::console::fixture::troubled`]).
fn troubled(w: u16, h: u16) -> App {
    let fleet = canopy::fleet::load::demo().unwrap();
    let mut app = App::new(Config::default(), canopy::console::fixture::troubled(fleet), NOW);
    app.update(Msg::Resize(w, h));
    app
}

#[test]
fn overview_answers_capacity_health_and_what_runs_on_one_screen() {
    // Broken first (a provider that does not answer, a quarantined and a
    // down node, failed workloads and the two that wait to retry after a
    // failure, not the two re-placed for routine reasons); the capacity per
    // provider, free of total with whether it answers; the nodes with the
    // lowest health scores; what runs; and, with room, the newest events
    // with w-2's success once.
    let a = troubled(120, 40);
    insta::assert_snapshot!("overview_120x40", render(&a, 120, 40).backend());
    let text = render(&a, 120, 40).backend().to_string();
    assert!(text.contains("2 workloads failed and waiting to retry"), "{text}");
    let w2: Vec<&str> = text.lines().filter(|l| l.contains(" w-2 ")).collect();
    assert_eq!(w2.len(), 1, "one success, not `ended` and `succeeded`: {w2:?}");
    assert!(w2[0].contains("succeeded"), "{w2:?}");
    let w4 = text.lines().filter(|l| l.contains(" w-4 ")).count();
    assert_eq!(w4, 3, "a failure keeps its ended, retry and failed lines");
    // The same three answers at 80×24, the events left out.
    let a = troubled(80, 24);
    insta::assert_snapshot!("overview_80x24", render(&a, 80, 24).backend());
}

#[test]
fn overview_counts_nodes_in_english() {
    let mut a = troubled(80, 24);
    let text = render(&a, 80, 24).backend().to_string();
    assert!(text.contains("✗ 1 node down: fra-h100-06"), "{text}");
    let mut s = (**a.model.status.as_ref().unwrap()).clone();
    let n = s.fleet.nodes.iter().position(|n| n.name == "fra-a100-02").unwrap();
    s.fleet.nodes[n].state = canopy::fleet::NodeState::Down;
    a.update(Msg::Status(std::sync::Arc::new(s)));
    let text = render(&a, 80, 24).backend().to_string();
    assert!(text.contains("✗ 2 nodes down: fra-h100-06 fra-a100-02"), "{text}");
    assert!(text.contains("1 quarantined: fra-h100-04"), "{text}");
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
fn logs_show_when_each_line_was_written() {
    // A finished attempt's log, read in one go long after: each line shows
    // the time the engine first read it (a second apart, as it printed
    // them), not when the console fetched it; `z` turns times on.
    let mut a = app();
    a.run_command("logs w-1");
    assert_eq!(a.view, View::Logs);
    let attempt = a.logs.as_ref().unwrap().attempt;
    let text: String = (1..=6).map(|i| format!("step {i} loss=0.{i}\n")).collect();
    // One chunk per line, shipped a second apart; NOW is 08:00:00 UTC.
    let times = (0..6)
        .map(|i| (i * 16, canopy::engine::model::Millis(NOW.0 - 3_600_000 + i as i64 * 1_000)))
        .collect();
    let got =
        canopy::engine::handle::LogBytes { next_offset: text.len() as u64, data: text.into_bytes(), times };
    let lines = canopy::console::logs::StreamTail::default().take(got, false, NOW);
    a.update(Msg::Log(attempt, lines));
    key(&mut a, 'z');
    snap("logs_times", &a);
    let screen = render(&a, 80, 24).backend().to_string();
    for (i, t) in ["07:00:00", "07:00:01", "07:00:02", "07:00:05"].iter().enumerate() {
        assert!(screen.contains(t), "line {i}: {t} in {screen}");
    }
    assert!(!screen.contains("08:00:00"), "not when the console read them: {screen}");
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
fn editor_with_several_problems() {
    let mut a = app();
    let text = "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"a\"]\n[resources]\ngpus = \"two\"\n[retry]\nmax_attempts = 0\n";
    a.update(Msg::Loaded { path: "three.toml".into(), result: Ok(text.into()) });
    // The cursor on the second problem: it is marked, with its help.
    for _ in 0..2 {
        a.update(Msg::Key(KeyEvent::new(KeyCode::F(8), KeyModifiers::NONE)));
    }
    assert_eq!(a.editor.problems.len(), 3);
    snap("editor_problems", &a);
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
    a.update(Msg::Audit(Ok(canopy::console::fixture::audit())));
    for v in ['1', '2', '3', '4', '5', '6', '7', '?'] {
        key(&mut a, v);
        for (w, h) in [(80, 24), (60, 15), (30, 8), (10, 3), (1, 1)] {
            a.update(Msg::Resize(w, h));
            render(&a, w, h);
        }
        key(&mut a, '\u{1b}');
        a.update(Msg::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    }
}

#[test]
fn disconnected() {
    // An attached console whose engine went away: said in words in the
    // header (reverse video, not colour alone), and the quit prompt of a
    // console that runs the engine itself in the footer.
    let mut a = app();
    let since = canopy::engine::model::Millis(NOW.0 - 5_000);
    a.update(Msg::Link(canopy::engine::handle::Link::Down { since, error: "connection refused".into() }));
    a.owns_engine = true;
    key(&mut a, 'q');
    snap("disconnected", &a);
    let t = render(&a, 80, 24);
    let buf = t.backend().buffer();
    let x = (0..80).find(|x| buf[(*x, 0)].symbol() == "d").expect("the marker");
    assert!(buf[(x, 0)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn audit() {
    // Loaded newest first; a denied, a refused and a hostile record (its
    // escape sequence, bidi override and line break drawn as `�` and a
    // space); the one from the day before shows its date.
    let mut a = app();
    key(&mut a, '7');
    a.update(Msg::Audit(Ok(canopy::console::fixture::audit())));
    key(&mut a, 'j');
    key(&mut a, 'j');
    key(&mut a, 'j');
    snap("audit", &a);
    let t = render(&a, 80, 24);
    let buf = t.backend().buffer();
    // Denied is a symbol, not a colour alone: row 3 is the hostile denied
    // record, row 6 (selected) the denied cancel by ci.
    assert_eq!(buf[(2, 3)].symbol(), "✗");
    assert_eq!(buf[(1, 6)].symbol(), ">");
    assert_eq!(buf[(2, 6)].symbol(), "✗");
    assert_eq!(buf[(2, 4)].symbol(), "!", "refused");
    let text = t.backend().to_string();
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202E}') && !text.contains('\u{7}'), "{text}");
}

#[test]
fn audit_for_a_viewer_says_why_instead_of_a_table() {
    let mut a = app();
    key(&mut a, '7');
    a.update(Msg::Audit(Err("the audit trail needs the operator role (token viewer is a viewer)".into())));
    let s = render(&a, 80, 24).backend().to_string();
    assert!(s.contains("cannot load the audit trail: the audit trail needs the operator role"), "{s}");
    assert!(!s.contains("OUTCOME"), "{s}");
}

#[test]
fn a_held_node_says_who_holds_it_and_why() {
    let mut a = app();
    key(&mut a, '3');
    let first = a.derived.nodes[0];
    let mut status = (**a.model.status.as_ref().unwrap()).clone();
    let name = status.fleet.nodes[first as usize].name.clone();
    status.fleet.nodes[first as usize].state = canopy::fleet::NodeState::Cordoned;
    status.intents.insert(
        name.clone(),
        canopy::engine::model::NodeIntent {
            node: name,
            state: canopy::fleet::NodeState::Cordoned,
            by: "ops-alice".into(),
            reason: Some("fan noise\x1b[2J, OPS-12".into()),
            at: canopy::engine::model::Millis(NOW.0 - 600_000),
            until: Some(canopy::engine::model::Millis(NOW.0 + 3_600_000)),
        },
    );
    a.update(Msg::Status(std::sync::Arc::new(status)));
    snap("nodes_held", &a);
    let text = format!("{:?}", render(&a, 80, 24).backend());
    assert!(text.contains("ops-alice") && text.contains("fan noise"), "{text}");
    assert!(!text.contains('\x1b'), "a reason never reaches the terminal raw");
}

/// The console over [`long_names`](canopy::console::fixture::long_names)
/// at `w` columns, in view `v`.
fn long_names_at(v: char, w: u16) -> (App, String) {
    let mut a = App::new(Config::default(), canopy::console::fixture::long_names(24), NOW);
    a.update(Msg::Resize(w, 24));
    key(&mut a, v);
    let s = render(&a, w, 24).backend().to_string();
    (a, s)
}

/// Lines of a rendered screen that hold `needle`.
fn lines_with<'a>(s: &'a str, needle: &str) -> Vec<&'a str> {
    s.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn long_node_names_stay_told_apart_at_80_and_120_columns() {
    for w in [80, 120] {
        let (a, s) = long_names_at('3', w);
        insta::assert_snapshot!(format!("long_names_nodes_{w}"), render(&a, w, 24).backend());
        // Each node's row shows its own end: the names differ there.
        for end in ["0003", "0004", "0011", "l4-0 ", "l4-1 ", "spot-1-00", "spot-1-01", "spot-2-00"] {
            assert_eq!(lines_with(&s, end).len(), 1, "{end} at {w} columns:\n{s}");
        }
        // Pools that differ in their middle too.
        assert!(s.contains("h1") && s.contains("h2"), "{s}");
    }
}

#[test]
fn capacity_keeps_regions_and_prices_whole_and_pools_apart_at_80_and_120_columns() {
    for w in [80, 120] {
        let (a, s) = long_names_at('2', w);
        insta::assert_snapshot!(format!("long_names_capacity_{w}"), render(&a, w, 24).backend());
        assert_eq!(lines_with(&s, "ap-northeast-1").len(), 2, "the region is never cut at {w}:\n{s}");
        for price in ["$0.45 ", "$0.55 ", "$31.50 ", "$42.00 "] {
            assert_eq!(lines_with(&s, price).len(), 1, "{price} at {w} columns:\n{s}");
        }
        let spot = lines_with(&s, "ap-northeast-1");
        assert_ne!(spot[0].split_whitespace().nth(1), spot[1].split_whitespace().nth(1), "{s}");
    }
}

#[test]
fn workloads_and_triage_shorten_names_in_the_middle_at_80_and_120_columns() {
    for w in [80, 120] {
        let (a, s) = long_names_at('4', w);
        insta::assert_snapshot!(format!("long_names_workloads_{w}"), render(&a, w, 24).backend());
        // Seeds differ at the end: each shows once.
        for seed in ["seed-6 ", "seed-9 ", "seed-18 ", "seed-21 "] {
            assert_eq!(lines_with(&s, seed).len(), 1, "{seed} at {w} columns:\n{s}");
        }
        let (a, s) = long_names_at('5', w);
        insta::assert_snapshot!(format!("long_names_triage_{w}"), render(&a, w, 24).backend());
        assert!(!s.contains("cloud-a-a10g-ondemand-u "), "not cut at the end:\n{s}");
    }
}

#[test]
fn help_scrolled_to_its_end() {
    let mut a = app();
    key(&mut a, '?');
    key(&mut a, 'G');
    snap("help_end", &a);
}

#[test]
fn triage_filtered() {
    let mut a = app();
    key(&mut a, '5');
    for c in "/gpu-oom fra".chars() {
        key(&mut a, c);
    }
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    snap("triage_filtered", &a);
}

#[test]
fn tab_lists_the_commands_it_could_complete() {
    let mut a = app();
    key(&mut a, ':');
    key(&mut a, 'c');
    a.update(Msg::Key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE)));
    let s = render(&a, 80, 24).backend().to_string();
    insta::assert_snapshot!("command_choices", s.lines().last().unwrap());
}

/// The bytes the workloads view (a selected row, states in colour) sends
/// to an 80×24 terminal, through the console's real backend, in `theme`
/// at `depth`.
fn sent(theme: &str, depth: ColorDepth) -> String {
    let mut a = app();
    a.config.theme = Theme::named(theme, depth).unwrap();
    key(&mut a, '4');
    let mut out = Vec::new();
    {
        let options = TerminalOptions { viewport: Viewport::Fixed(Rect::new(0, 0, 80, 24)) };
        let mut t = Terminal::with_options(DepthBackend::new(&mut out, depth), options).unwrap();
        t.draw(|f| views::draw(f, &a)).unwrap();
    }
    String::from_utf8(out).unwrap()
}

/// How many colour codes of each kind, and reverse-video codes, the SGR
/// sequences in `wire` hold.
#[derive(Debug, Default)]
struct Sgr {
    /// `30–37`, `90–97` and their backgrounds: the 16 colours.
    ansi16: usize,
    /// `38;5;N`, `48;5;N`.
    ansi256: usize,
    /// `38;2;R;G;B`, `48;2;R;G;B`.
    truecolor: usize,
    /// `39`, `49`: the terminal's default colours.
    default: usize,
    reverse: usize,
}

fn sgr(wire: &str) -> Sgr {
    let mut n = Sgr::default();
    for seq in wire.split("\x1b[").skip(1) {
        let Some(end) = seq.find(|c: char| c.is_ascii_alphabetic()) else { continue };
        if !seq[end..].starts_with('m') {
            continue; // cursor moves and the like
        }
        let p: Vec<u32> = seq[..end].split(';').map(|p| p.parse().unwrap_or(0)).collect();
        let mut i = 0;
        while i < p.len() {
            match (p[i], p.get(i + 1)) {
                (38 | 48 | 58, Some(5)) => (n.ansi256 += 1, i += 2).0,
                (38 | 48 | 58, Some(2)) => (n.truecolor += 1, i += 4).0,
                (30..=37 | 40..=47 | 90..=97 | 100..=107, _) => n.ansi16 += 1,
                (39 | 49 | 59, _) => n.default += 1,
                (7, _) => n.reverse += 1,
                _ => {}
            }
            i += 1;
        }
    }
    n
}

#[test]
fn each_colour_depth_sends_only_its_own_codes() {
    for theme in ["dark", "light", "high-contrast"] {
        let wire = sent(theme, ColorDepth::Ansi16);
        let n = sgr(&wire);
        assert!(n.ansi16 > 0 && n.ansi256 == 0 && n.truecolor == 0, "{theme} at 16: {n:?}");
        assert!(!wire.contains("38;5;") && !wire.contains("38;2;"));

        let n = sgr(&sent(theme, ColorDepth::Ansi256));
        assert!(n.ansi256 > 0 && n.ansi16 == 0 && n.truecolor == 0, "{theme} at 256: {n:?}");

        let wire = sent(theme, ColorDepth::TrueColor);
        let n = sgr(&wire);
        assert!(n.truecolor > 0 && n.ansi16 == 0 && n.ansi256 == 0, "{theme} in truecolor: {n:?}");
        assert!(wire.contains("\x1b[38;2;"));

        let n = sgr(&sent(theme, ColorDepth::None));
        assert_eq!(n.ansi16 + n.ansi256 + n.truecolor + n.default, 0, "{theme} without colour: {n:?}");
    }
}

#[test]
fn the_selected_row_is_reverse_video_at_every_depth() {
    // Without colour too: no colour code (crossterm's `ESC[;m` under
    // NO_COLOR) may cancel it.
    for d in [ColorDepth::TrueColor, ColorDepth::Ansi256, ColorDepth::Ansi16, ColorDepth::None] {
        let wire = sent("dark", d);
        assert!(sgr(&wire).reverse > 0, "{d:?}");
        assert!(!wire.contains("\x1b[;m"), "{d:?}");
    }
}

/// The view tabs' names.
const TAB_NAMES: [&str; 7] =
    ["1 overview", "2 capacity", "3 nodes", "4 workloads", "5 triage", "6 editor", "7 audit"];

#[test]
fn a_replays_marker_leaves_the_tabs_named_at_120_columns_and_numbered_at_80() {
    // `canopy sim --watch`: playing on the overview, then paused on the
    // workloads (the longest current tab).
    let mut a = app();
    let mut lines = Vec::new();
    for w in [120, 80] {
        for (view, paused) in [('1', false), ('4', true)] {
            a.update(Msg::Replay(ReplayStatus {
                policy: "canopy".into(),
                speed: 1440.0,
                paused,
                ended: None,
            }));
            key(&mut a, view);
            a.update(Msg::Resize(w, 24));
            let screen = render(&a, w, 24).backend().to_string();
            let header = screen.lines().next().unwrap().trim_matches('"').trim_end().to_string();
            let marker = if paused { "REPLAY ×1440 paused" } else { "REPLAY ×1440" };
            assert!(header.contains(marker), "{w}: {header}");
            for name in TAB_NAMES {
                let shown = if w >= 120 { name } else { &name[..1] };
                assert!(header.contains(shown), "{w}: {shown:?} missing from {header}");
            }
            lines.push(format!("{w:>3}|{header}"));
        }
    }
    insta::assert_snapshot!("replay_header", lines.join("\n"));
}

/// A gang's detail names every node in rank order and what each attempt
/// resumed from and left; a checkpoint's name (the workload's own) never
/// reaches the terminal raw.
#[test]
fn a_gangs_detail_names_its_nodes_and_checkpoints() {
    use canopy::engine::model::{CheckpointNote, Millis, SavedCheckpoint};
    let mut a = app();
    key(&mut a, '4');
    a.update(Msg::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    let id = a.detail.id.expect("a workload in detail");
    let w = a.model.workloads.get_mut(&id).unwrap();
    let spec = std::sync::Arc::make_mut(&mut w.rec.spec);
    spec.resources.nodes = 2;
    spec.resources.gpus = 8;
    spec.checkpoint =
        Some(serde_json::from_value(serde_json::json!({ "path": "/ckpt", "interval": "30m" })).unwrap());
    let last = w.attempts.last_mut().expect("an attempt");
    let n = last.id.n;
    last.nodes = vec![last.node.clone(), "fra-h100-05".into()];
    let saved = |name: &str, attempt: u32| SavedCheckpoint {
        name: name.into(),
        at: Millis(NOW.0 - 60_000),
        bytes: 3 << 30,
        attempt,
    };
    last.checkpoint = Some(CheckpointNote {
        resumed: Some(saved("step-300", n.saturating_sub(1).max(1))),
        saved: Some(saved("step-9\x1b[2J", n)),
    });
    a.model.generation += 1;
    let text = format!("{:?}", render(&a, 120, 40).backend());
    assert!(text.contains("8 × 2 nodes"), "{text}");
    assert!(text.contains(",fra-h100-05"), "{text}");
    assert!(text.contains("checkpoints: /ckpt, every 30m"), "{text}");
    assert!(text.contains("resumed from step-300 of attempt"), "{text}");
    assert!(text.contains("left step-9"), "{text}");
    assert!(!text.contains('\x1b'), "a checkpoint name never reaches the terminal raw");
}
