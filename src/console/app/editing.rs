//! The spec editor's keys as the app handles them: submit (through the
//! action layer), templates, `$EDITOR`, undo/redo, the next problem, and
//! a copy of a workload's spec to edit and resubmit. The text editing
//! itself is the editor's ([`crate::console::editor`]).

use super::App;
use crate::console::action::{self, Op};
use crate::console::keymap::Intent;
use crate::console::msg::{Effect, View};

impl App {
    pub(super) fn refresh_editor(&mut self) {
        let s = self.model.status.clone();
        self.editor.refresh(
            s.as_ref().map(|s| &s.fleet),
            s.as_ref().map(|s| &s.health),
            s.as_ref().map(|s| &s.demand),
        );
    }

    fn submit(&mut self) -> Vec<Effect> {
        self.refresh_editor();
        match self.editor.spec.clone() {
            Some(spec) => {
                let key = self.editor.key.clone();
                action::request(self, Op::Submit { spec: Box::new(spec), key })
            }
            None => {
                self.editor.jump_to_problem();
                self.flash_error("fix the errors first (cursor moved to the first one)".into());
                Vec::new()
            }
        }
    }

    /// Opens the editor on `text` (a copy of a workload's spec): a new
    /// text, so a new idempotency key, and submitting it makes a new
    /// workload.
    pub(super) fn edit_copy(&mut self, text: &str, note: String) {
        self.editor.set_text(text);
        self.editor.path = None;
        self.refresh_editor();
        self.go(View::Editor);
        self.flash(note);
    }

    /// The editor's intents; `None` for any other.
    pub(super) fn editor_intent(&mut self, intent: Intent) -> Option<Vec<Effect>> {
        match intent {
            Intent::Submit => return Some(self.submit()),
            Intent::NextTemplate => {
                let name = self.editor.next_template();
                self.refresh_editor();
                self.flash(format!("template {name}"));
            }
            Intent::ExternalEditor => return Some(vec![Effect::ExternalEditor(self.editor.contents())]),
            Intent::Undo | Intent::Redo => {
                let undo = intent == Intent::Undo;
                let done = if undo { self.editor.undo() } else { self.editor.redo() };
                if done {
                    self.refresh_editor();
                } else {
                    self.flash(format!("nothing to {}", if undo { "undo" } else { "redo" }));
                }
            }
            Intent::NextProblem => {
                let total = self.editor.problems.len();
                let found = self.editor.next_problem().and_then(|n| {
                    let p = self.editor.problems.get(n - 1)?;
                    Some((format!("problem {n} of {total} at {}:{}: {}", p.line, p.col, p.message), p.error))
                });
                self.flash = Some(found.unwrap_or_else(|| ("no problems to go to".into(), false)));
            }
            _ => return None,
        }
        Some(Vec::new())
    }
}
