//! The spec view's component: one workload's spec as it was submitted,
//! written as the TOML a person would write for it (only what differs
//! from the defaults), scrolled like the detail pane; `e` hands a copy to
//! the editor to edit and submit as a new workload.
//!
//! A workload the console does not hold is fetched as `:describe` does
//! (the app asks; the text shows once it arrives). Pure: no I/O.

use super::component::{self, Component, Ctx, Outcome};
use super::detail::wrap;
use super::keymap::Intent;
use super::model::Model;
use crate::engine::model::{RETRY_OF, WorkloadId};
use crate::spec::Spec;
use crate::text::sanitize;
use ratatui::text::Line;

/// Which workload's spec is shown, and how far it is scrolled.
#[derive(Debug, Clone, Default)]
pub struct SpecView {
    pub id: Option<WorkloadId>,
    pub top: usize,
}

impl SpecView {
    pub fn open(&mut self, id: WorkloadId) {
        *self = SpecView { id: Some(id), top: 0 };
    }

    /// The spec's TOML, or why there is none to show.
    pub fn text(&self, model: &Model) -> Result<String, String> {
        let Some(id) = self.id else { return Err("no workload chosen".into()) };
        let Some(w) = model.workloads.get(&id) else {
            return Err(format!("{id} is not loaded yet (or not in the journal: :describe {id} says)"));
        };
        toml(&w.rec.spec)
    }

    /// The text wrapped to `width` columns, made safe to show.
    pub fn rows(&self, model: &Model, width: usize) -> Vec<Line<'static>> {
        let text = self.text(model).unwrap_or_else(|e| e);
        text.lines().flat_map(|l| wrap(Line::from(sanitize(l).into_owned()), width)).collect()
    }

    /// A copy to edit: without the label an operator's retry carries (a
    /// new submission is not a retry), with a header that says whose it
    /// was.
    fn copy(&self, model: &Model) -> Result<(String, WorkloadId), String> {
        let Some(id) = self.id else { return Err("no workload chosen".into()) };
        let Some(w) = model.workloads.get(&id) else { return Err(format!("{id} is not loaded yet")) };
        let mut spec = Spec::clone(&w.rec.spec);
        spec.labels.remove(RETRY_OF);
        let header = [format!("A copy of {id}'s spec: ctrl-s submits it as a new workload.")];
        let baseline = Spec::new(spec.name.clone(), spec.runtime.command.clone());
        let text = crate::import::emit::to_toml(&spec, &baseline, &header)
            .map_err(|e| format!("{id}'s spec could not be written as TOML: {e}"))?;
        Ok((text, id))
    }
}

/// `spec` as TOML, only what differs from the defaults.
pub fn toml(spec: &Spec) -> Result<String, String> {
    let baseline = Spec::new(spec.name.clone(), spec.runtime.command.clone());
    crate::import::emit::to_toml(spec, &baseline, &[])
        .map_err(|e| format!("the spec could not be written as TOML: {e}"))
}

impl Component for SpecView {
    /// Scrolling; `e` edits a copy.
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome {
        let (width, height) = ctx.body;
        if let Some(by) = component::step(intent, height) {
            let rows = self.rows(ctx.model, width).len();
            self.top = component::scroll(self.top, by, rows, height);
            return Outcome::Done;
        }
        match intent {
            Intent::EditSpec => match self.copy(ctx.model) {
                Ok((text, id)) => Outcome::Edit {
                    text,
                    note: format!("editing a copy of {id}'s spec: ctrl-s submits it as a new workload"),
                },
                Err(e) => Outcome::Say(e, true),
            },
            _ => Outcome::Ignored,
        }
    }
}
