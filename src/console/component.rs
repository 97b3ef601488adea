//! What every view's component shares: the [`Component`] trait through
//! which the app hands a view the keys it owns (as gitui's components and
//! k9s's views each own their state and keys), the [`Ctx`] it may read,
//! and the [`Outcome`] it answers with.
//!
//! A component changes only its own state; what it needs done beyond
//! that (tail another attempt's logs, open the editor, a flash line) it
//! asks for in its outcome, and the app does it. It never sends a
//! command: changes go through [`super::action`].

use super::keymap::Intent;
use super::model::Model;
use super::msg::Effect;
use super::theme::Theme;
use crate::engine::model::Millis;

/// What a component may read while it handles a key.
pub struct Ctx<'a> {
    pub model: &'a Model,
    pub theme: &'a Theme,
    pub now: Millis,
    /// The text area inside the view's border: (columns, rows).
    pub body: (usize, usize),
    /// A list's page: how far PgUp/PgDn move in the lists and logs.
    pub page: usize,
    /// The view's `/` filter (empty: none).
    pub filter: &'a str,
    /// Watching a replay (`canopy sim --watch`): nothing runs, so there
    /// are no logs to tail.
    pub replay: bool,
}

/// What a component made of a key.
#[derive(Debug)]
pub enum Outcome {
    /// Not one of its keys: the app's global handling applies.
    Ignored,
    /// Handled; nothing more to do.
    Done,
    /// Handled; say this on the flash line (`true`: as an error).
    Say(String, bool),
    /// Handled; the run loop should do these.
    Effects(Vec<Effect>),
    /// Handled; open the spec editor on this text (edit and resubmit).
    Edit { text: String, note: String },
    /// Open this workload's detail.
    Describe(crate::engine::model::WorkloadId),
}

/// A view's own state and keys.
pub trait Component {
    /// Handles `intent` if it is one of the view's own.
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome;
}

/// Moves a first-shown row by `by` within `rows` rows of text on a screen
/// of `height` rows (the last screenful is the furthest).
pub fn scroll(top: usize, by: isize, rows: usize, height: usize) -> usize {
    let last = rows.saturating_sub(height);
    (top.min(last) as isize).saturating_add(by).clamp(0, last as isize) as usize
}

/// How far a list or text key moves on a screen of `height` rows; `None`
/// for other intents.
pub fn step(intent: Intent, height: usize) -> Option<isize> {
    let page = height.max(1) as isize;
    Some(match intent {
        Intent::Up => -1,
        Intent::Down => 1,
        Intent::PageUp => -page,
        Intent::PageDown => page,
        Intent::Top => isize::MIN / 2,
        Intent::Bottom => isize::MAX / 2,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn scroll_stays_within_the_text() {
        assert_eq!(super::scroll(0, 5, 30, 10), 5);
        assert_eq!(super::scroll(5, isize::MAX / 2, 30, 10), 20);
        assert_eq!(super::scroll(20, -100, 30, 10), 0);
        assert_eq!(super::scroll(0, 3, 5, 10), 0);
    }
}
