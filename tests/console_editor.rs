//! The console's spec editor as an operator uses it, through the whole
//! app: problems listed at their lines, F8 to the next, undo and redo,
//! digits typed as text, a blank spec that is valid, and a submit with an
//! idempotency key after the errors are fixed.

mod console_support;

use canopy::console::app::{App, Effect, Msg, View};
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::model::WorkloadId;
use console_support::{app, code, keys, screen};
use ratatui::crossterm::event::{KeyCode, KeyModifiers};

#[test]
fn editor_errors_then_submit_with_an_idempotency_key() {
    let mut a = app(false);
    keys(&mut a, "6");
    keys(&mut a, "x");
    assert!(screen(&a).contains("error 1:2"), "{}", screen(&a));
    assert!(code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL).is_empty(), "invalid specs are not sent");
    code(&mut a, KeyCode::Backspace, KeyModifiers::NONE);
    assert!(screen(&a).contains("placement preview"));
    let fx = code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL);
    let Some(Effect::Command { cmd: Command::Submit { idempotency_key: Some(k), .. }, what, .. }) =
        fx.first()
    else {
        panic!("{fx:?}")
    };
    assert!(k.starts_with("console-"));
    a.update(Msg::Done {
        what: what.clone(),
        result: CommandResult::Submitted { id: WorkloadId(41), existing: false },
    });
    assert!(screen(&a).contains("submitted as w-41"));
    let again = code(&mut a, KeyCode::Char('s'), KeyModifiers::CONTROL);
    let Some(Effect::Command { cmd: Command::Submit { idempotency_key: Some(k2), .. }, .. }) = again.first()
    else {
        panic!()
    };
    assert_eq!(k, k2, "resubmitting the same text reuses the key");
}

/// Three separate problems: an unknown key (2:1), a wrong type (6:8) and
/// a range error (8:16).
const THREE: &str = "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"a\"]\n[resources]\ngpus = \"two\"\n[retry]\nmax_attempts = 0\n";

fn open_spec(a: &mut App, text: &str) {
    a.update(Msg::Loaded { path: "three.toml".into(), result: Ok(text.into()) });
    assert_eq!(a.view, View::Editor);
}

fn cursor(a: &App) -> (usize, usize) {
    let c = a.editor.text.cursor();
    (c.0, c.1)
}

#[test]
fn the_editor_lists_every_problem_at_its_line() {
    let mut a = app(false);
    open_spec(&mut a, THREE);
    let at: Vec<(usize, usize)> = a.editor.problems.iter().map(|p| (p.line, p.col)).collect();
    assert_eq!(at, [(2, 1), (6, 8), (8, 16)]);
    let s = screen(&a);
    assert!(s.contains("3 errors"), "{s}");
    for want in ["error 2:1", "error 6:8", "error 8:16"] {
        assert!(s.contains(want), "{want} missing:\n{s}");
    }
    // Each problem's line is marked in the gutter.
    let rows: Vec<&str> = s.lines().collect();
    for line in [2, 6, 8] {
        assert!(rows.iter().any(|r| r.contains(&format!("│✗{line} "))), "line {line} unmarked:\n{s}");
    }
    assert!(!rows.iter().any(|r| r.contains("│✗1 ")), "line 1 is fine:\n{s}");
}

#[test]
fn f8_goes_to_the_next_problem_and_wraps() {
    let mut a = app(false);
    open_spec(&mut a, THREE);
    assert_eq!(cursor(&a), (0, 0));
    let mut seen = Vec::new();
    for _ in 0..4 {
        code(&mut a, KeyCode::F(8), KeyModifiers::NONE);
        seen.push(cursor(&a));
    }
    assert_eq!(seen, [(1, 0), (5, 7), (7, 15), (1, 0)]);
    assert!(screen(&a).contains("problem 1 of 3 at 2:1"), "{}", screen(&a));
    // ctrl-g does the same, for terminals that eat F8.
    code(&mut a, KeyCode::Char('g'), KeyModifiers::CONTROL);
    assert_eq!(cursor(&a), (5, 7));
    assert_eq!(a.editor.contents(), THREE.trim_end(), "going to a problem changes no text");
}

#[test]
fn undo_and_redo_in_the_editor() {
    let mut a = app(false);
    keys(&mut a, "6");
    let original = a.editor.contents();
    keys(&mut a, "xyz");
    assert!(a.editor.contents().starts_with("xyz"));
    code(&mut a, KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert_eq!(a.editor.contents(), original, "the typed word goes back in one step");
    code(&mut a, KeyCode::Char('r'), KeyModifiers::CONTROL);
    assert!(a.editor.contents().starts_with("xyz"), "redo");
    // Replacing the whole text (a template) is undone too.
    code(&mut a, KeyCode::Char('t'), KeyModifiers::CONTROL);
    assert!(!a.editor.contents().starts_with("xyz"));
    code(&mut a, KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert!(a.editor.contents().starts_with("xyz"), "{}", a.editor.contents());
    code(&mut a, KeyCode::Char('u'), KeyModifiers::CONTROL);
    assert_eq!(a.editor.contents(), original);
    code(&mut a, KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert!(screen(&a).contains("nothing to undo"));
}

#[test]
fn digits_type_into_the_editor_and_esc_comes_first_to_switch_views() {
    let mut a = app(false);
    keys(&mut a, "6");
    keys(&mut a, "1234567");
    assert_eq!(a.view, View::Editor, "digits do not switch views from the editor");
    assert!(a.editor.contents().starts_with("1234567"), "{}", a.editor.contents());
    let s = screen(&a);
    let footer = s.lines().last().unwrap();
    assert!(footer.contains("esc then 1-7 views"), "the footer says how: {footer}");
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    keys(&mut a, "4");
    assert_eq!(a.view, View::Workloads);
    keys(&mut a, "6");
    assert!(a.editor.contents().starts_with("1234567"), "the text is kept");
}

#[test]
fn new_opens_a_blank_spec_that_is_valid() {
    let mut a = app(false);
    keys(&mut a, "6");
    keys(&mut a, "edited");
    let before = a.editor.contents();
    code(&mut a, KeyCode::Esc, KeyModifiers::NONE);
    a.run_command("new");
    assert_eq!(a.view, View::Editor);
    let text = a.editor.contents();
    assert!(text.contains("name = \"my-workload\""), "{text}");
    assert!(text.lines().filter(|l| l.starts_with('#')).count() >= 5, "commented: {text}");
    assert!(a.editor.problems.iter().all(|p| !p.error), "{:?}", a.editor.problems);
    assert!(a.editor.spec.is_some());
    code(&mut a, KeyCode::Char('z'), KeyModifiers::CONTROL);
    assert_eq!(a.editor.contents(), before, "undo brings the old text back");
}
