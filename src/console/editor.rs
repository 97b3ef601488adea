//! The spec editor's state: a TextArea with the spec, validation on every
//! edit (every problem at its line:col, all at once), and a live placement
//! preview against the fleet the engine last reported.
//!
//! Owns the text and its undo history, templates, diagnostics and the
//! jump from one problem to the next, the preview and the idempotency key.
//! Pure: files and `$EDITOR` are effects the run loop performs; submitting
//! goes through the action layer.

use crate::fleet::Fleet;
use crate::health::HealthView;
use crate::schedule::{Decision, DemandMix, Policy, Requirements, Snapshot, place};
use crate::spec::Spec;
use crate::spec::load::{Format, parse};
use crate::spec::{Diagnostic, Severity};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui_textarea::{CursorMove, TextArea};

/// The templates from `assets/specs/`, built into the binary. `blank` is
/// the least a spec needs, with the common fields in comments.
pub const TEMPLATES: [(&str, &str); 6] = [
    ("hello", include_str!("../../assets/specs/hello.toml")),
    ("cpu-batch", include_str!("../../assets/specs/cpu-batch.toml")),
    ("batch-inference", include_str!("../../assets/specs/batch-inference.toml")),
    ("fine-tune", include_str!("../../assets/specs/fine-tune.toml")),
    ("train-llm", include_str!("../../assets/specs/train-llm.toml")),
    ("blank", include_str!("../../assets/specs/blank.toml")),
];

/// The template `:new` opens without a name.
pub const BLANK: &str = "blank";

/// Most undo steps kept.
const MAX_UNDO: usize = 200;

/// The text and cursor (row, column) at one point of the history.
#[derive(Debug, Clone, PartialEq)]
struct Version {
    lines: Vec<String>,
    cursor: (usize, usize),
}

/// What the last edit was, so that typing a word is one undo step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    /// A letter, digit or symbol typed.
    Word,
    Other,
}

/// One problem, where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub line: usize,
    pub col: usize,
    pub error: bool,
    pub message: String,
    pub help: Option<String>,
}

pub struct Editor {
    pub text: TextArea<'static>,
    pub template: usize,
    /// Where it was loaded from or saved to.
    pub path: Option<String>,
    pub problems: Vec<Problem>,
    /// The parsed spec when it is valid.
    pub spec: Option<Spec>,
    pub preview: Option<Decision>,
    /// Sent with submit, so a repeated submit of the same text is the same
    /// workload; changes when the text changes after a submit.
    pub key: String,
    key_seq: u64,
    key_base: String,
    submitted_text: Option<String>,
    undo: Vec<Version>,
    redo: Vec<Version>,
    last_edit: Option<Edit>,
}

impl Editor {
    /// A new editor on a template; `key_base` makes keys unique per session.
    pub fn new(key_base: String) -> Self {
        let mut e = Self {
            text: TextArea::default(),
            template: 0,
            path: None,
            problems: Vec::new(),
            spec: None,
            preview: None,
            key: String::new(),
            key_seq: 0,
            key_base,
            submitted_text: None,
            undo: Vec::new(),
            redo: Vec::new(),
            last_edit: None,
        };
        e.text = text_area(TEMPLATES[0].1.lines().map(String::from).collect());
        e.renew_key();
        e
    }

    pub fn contents(&self) -> String {
        self.text.lines().join("\n")
    }

    /// Replaces the text (a template, a file, `$EDITOR`'s result); undo
    /// brings the old text back.
    pub fn set_text(&mut self, text: &str) {
        let before = self.version();
        self.push_undo(before, Edit::Other);
        self.text = text_area(text.lines().map(String::from).collect());
        self.renew_key();
    }

    /// One key typed into the text (keys the keymap did not take).
    pub fn input(&mut self, k: KeyEvent) {
        let before = self.version();
        let typed = matches!(k.code, KeyCode::Char(c) if !c.is_whitespace())
            && !k.modifiers.intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
        if self.text.input(k) {
            self.push_undo(before, if typed { Edit::Word } else { Edit::Other });
        } else {
            self.last_edit = None;
        }
    }

    /// Pasted text, at the cursor.
    pub fn paste(&mut self, s: &str) {
        let before = self.version();
        if self.text.insert_str(s) {
            self.push_undo(before, Edit::Other);
        }
    }

    /// Undoes the last edit (a word typed counts as one); false when
    /// there is none.
    pub fn undo(&mut self) -> bool {
        let Some(prev) = self.undo.pop() else {
            return false;
        };
        self.redo.push(self.version());
        self.restore(prev);
        true
    }

    /// Redoes what [`Editor::undo`] undid; false when there is nothing.
    pub fn redo(&mut self) -> bool {
        let Some(next) = self.redo.pop() else {
            return false;
        };
        self.undo.push(self.version());
        self.restore(next);
        true
    }

    fn version(&self) -> Version {
        let c = self.text.cursor();
        Version { lines: self.text.lines().to_vec(), cursor: (c.0, c.1) }
    }

    fn restore(&mut self, s: Version) {
        self.text = text_area(s.lines);
        self.jump(s.cursor.0, s.cursor.1);
        self.last_edit = None;
    }

    /// An edit of kind `edit` changed the text; `before` is how it was.
    fn push_undo(&mut self, before: Version, edit: Edit) {
        // The letters of one word go back in one step.
        if !(edit == Edit::Word && self.last_edit == Some(Edit::Word)) {
            self.undo.push(before);
            if self.undo.len() > MAX_UNDO {
                self.undo.remove(0);
            }
        }
        self.redo.clear();
        self.last_edit = Some(edit);
    }

    fn jump(&mut self, row: usize, col: usize) {
        let row = u16::try_from(row).unwrap_or(u16::MAX);
        let col = u16::try_from(col).unwrap_or(u16::MAX);
        self.text.move_cursor(CursorMove::Jump(row, col));
    }

    pub fn next_template(&mut self) -> &'static str {
        self.template = (self.template + 1) % TEMPLATES.len();
        self.set_text(TEMPLATES[self.template].1);
        self.path = None;
        TEMPLATES[self.template].0
    }

    pub fn use_template(&mut self, name: &str) -> bool {
        match TEMPLATES.iter().position(|(n, _)| *n == name) {
            Some(i) => {
                self.template = i;
                self.set_text(TEMPLATES[i].1);
                self.path = None;
                true
            }
            None => false,
        }
    }

    fn renew_key(&mut self) {
        self.key_seq += 1;
        self.key = format!("console-{}-{}", self.key_base, self.key_seq);
    }

    /// Records a submit; the key stays until the text changes.
    pub fn submitted(&mut self) {
        self.submitted_text = Some(self.contents());
    }

    /// Validates and previews; call after every edit. `demand`: the
    /// engine's mix of live work, which the preview counts this spec into
    /// as the engine would.
    pub fn refresh(
        &mut self,
        fleet: Option<&Fleet>,
        health: Option<&HealthView>,
        demand: Option<&DemandMix>,
    ) {
        let text = self.contents();
        if self.submitted_text.as_ref().is_some_and(|s| *s != text) {
            self.submitted_text = None;
            self.renew_key();
        }
        let file = self.path.clone().unwrap_or_else(|| "spec.toml".into());
        match parse(&text, &file, Format::Toml) {
            Ok(loaded) => {
                self.problems = loaded.warnings.iter().map(|d| problem(d, false)).collect();
                self.preview = fleet.map(|f| {
                    let req = Requirements::from_spec(&loaded.spec);
                    let snap = Snapshot::for_plan(f, health.unwrap_or(&HealthView::default()), demand, &req);
                    place(&req, &snap, &Policy::for_optimize(loaded.spec.preferences.optimize))
                });
                self.spec = Some(loaded.spec);
            }
            Err(e) => {
                self.problems =
                    e.diagnostics.iter().map(|d| problem(d, d.severity == Severity::Error)).collect();
                self.spec = None;
                self.preview = None;
            }
        }
    }

    /// Moves the cursor to the first error.
    pub fn jump_to_problem(&mut self) {
        if let Some(p) = self.problems.first().filter(|p| p.line > 0) {
            let (row, col) = (p.line - 1, p.col.saturating_sub(1));
            self.jump(row, col);
        }
    }

    /// Moves the cursor to the next problem after it, in the order of the
    /// text, wrapping to the first; returns its number (1-based) among
    /// them, or `None` when there are none with a position.
    pub fn next_problem(&mut self) -> Option<usize> {
        let mut at: Vec<(usize, usize)> =
            self.problems.iter().filter(|p| p.line > 0).map(|p| (p.line, p.col.max(1))).collect();
        at.sort_unstable();
        at.dedup();
        let c = self.text.cursor();
        let here = (c.0 + 1, c.1 + 1);
        let i = at.iter().position(|p| *p > here).unwrap_or(0);
        let (line, col) = *at.get(i)?;
        self.jump(line - 1, col - 1);
        // Its number among all problems, in the order they are listed.
        self.problems.iter().position(|p| (p.line, p.col.max(1)) == (line, col)).map(|n| n + 1)
    }

    /// The problem on the cursor's line, if any (the first listed).
    pub fn current_problem(&self) -> Option<usize> {
        let row = self.text.cursor().0 + 1;
        self.problems.iter().position(|p| p.line == row)
    }
}

/// A TextArea on `lines`. Undo is the editor's own (it covers replacing
/// the whole text), so the TextArea keeps no history of its own.
fn text_area(lines: Vec<String>) -> TextArea<'static> {
    let mut t = TextArea::new(lines);
    t.set_max_histories(0);
    t
}

fn problem(d: &Diagnostic, error: bool) -> Problem {
    Problem { line: d.line, col: d.col, error, message: d.message.clone(), help: d.help.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_valid_and_places_on_the_demo_fleet() {
        let fleet = crate::fleet::load::demo().unwrap();
        let mut e = Editor::new("t".into());
        for (name, _) in TEMPLATES {
            assert!(e.use_template(name));
            e.refresh(Some(&fleet), None, None);
            assert!(e.problems.iter().all(|p| !p.error), "{name}: {:?}", e.problems);
            assert!(e.spec.is_some(), "{name}");
        }
    }

    #[test]
    fn a_mistake_is_reported_at_its_line_and_column() {
        let mut e = Editor::new("t".into());
        e.set_text("name = \"x\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = \"two\"\n");
        e.refresh(None, None, None);
        let p = e.problems.iter().find(|p| p.error).expect("an error");
        assert_eq!(p.line, 5, "{p:?}");
        assert!(p.col >= 1);
        assert!(e.spec.is_none());
    }

    #[test]
    fn the_key_changes_only_when_the_text_changes_after_a_submit() {
        let mut e = Editor::new("t".into());
        e.refresh(None, None, None);
        let k = e.key.clone();
        e.submitted();
        e.refresh(None, None, None);
        assert_eq!(e.key, k);
        e.text.insert_str("# edit\n");
        e.refresh(None, None, None);
        assert_ne!(e.key, k);
    }
}
