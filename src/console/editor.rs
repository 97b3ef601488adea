//! The spec editor's state: a TextArea with the spec, validation on every
//! edit (each error at its line:col), and a live placement preview against
//! the fleet the engine last reported.
//!
//! Owns the text, templates, diagnostics, preview and the idempotency key.
//! Pure: files and `$EDITOR` are effects the run loop performs; submitting
//! goes through the action layer.

use crate::fleet::Fleet;
use crate::health::HealthView;
use crate::schedule::{Decision, Policy, Requirements, Snapshot, place};
use crate::spec::Spec;
use crate::spec::load::{Format, parse};
use crate::spec::{Diagnostic, Severity};
use ratatui_textarea::{CursorMove, TextArea};

/// The templates from `assets/specs/`, built into the binary.
pub const TEMPLATES: [(&str, &str); 5] = [
    ("hello", include_str!("../../assets/specs/hello.toml")),
    ("cpu-batch", include_str!("../../assets/specs/cpu-batch.toml")),
    ("batch-inference", include_str!("../../assets/specs/batch-inference.toml")),
    ("fine-tune", include_str!("../../assets/specs/fine-tune.toml")),
    ("train-llm", include_str!("../../assets/specs/train-llm.toml")),
];

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
        };
        e.set_text(TEMPLATES[0].1);
        e
    }

    pub fn contents(&self) -> String {
        self.text.lines().join("\n")
    }

    pub fn set_text(&mut self, text: &str) {
        self.text = TextArea::new(text.lines().map(String::from).collect());
        self.renew_key();
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

    /// Validates and previews; call after every edit.
    pub fn refresh(&mut self, fleet: Option<&Fleet>, health: Option<&HealthView>) {
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
                    let snap = Snapshot::new(f, health.unwrap_or(&HealthView::default()));
                    let req = Requirements::from_spec(&loaded.spec);
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
            let row = u16::try_from(p.line - 1).unwrap_or(u16::MAX);
            let col = u16::try_from(p.col.saturating_sub(1)).unwrap_or(u16::MAX);
            self.text.move_cursor(CursorMove::Jump(row, col));
        }
    }
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
            e.refresh(Some(&fleet), None);
            assert!(e.problems.iter().all(|p| !p.error), "{name}: {:?}", e.problems);
            assert!(e.spec.is_some(), "{name}");
        }
    }

    #[test]
    fn a_mistake_is_reported_at_its_line_and_column() {
        let mut e = Editor::new("t".into());
        e.set_text("name = \"x\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = \"two\"\n");
        e.refresh(None, None);
        let p = e.problems.iter().find(|p| p.error).expect("an error");
        assert_eq!(p.line, 5, "{p:?}");
        assert!(p.col >= 1);
        assert!(e.spec.is_none());
    }

    #[test]
    fn the_key_changes_only_when_the_text_changes_after_a_submit() {
        let mut e = Editor::new("t".into());
        e.refresh(None, None);
        let k = e.key.clone();
        e.submitted();
        e.refresh(None, None);
        assert_eq!(e.key, k);
        e.text.insert_str("# edit\n");
        e.refresh(None, None);
        assert_ne!(e.key, k);
    }
}
