//! The events view's component: the engine's events, newest first, for
//! one workload (the engine's full list, fetched on entry, then live) or
//! all recent ones the console holds (the last 5,000 the engine sent);
//! scrolled with a cursor, filtered with `/` (words all must appear;
//! `kind=retry` matches the kind, `w-17` the workload), Enter opens the
//! event's workload. Pure: no I/O, no clock.

use super::component::{self, Component, Ctx, Outcome};
use super::keymap::Intent;
use super::model::Model;
use super::msg::Effect;
use crate::engine::model::{EventRecord, Record, WorkloadId};

/// Whose events, those fetched, and the cursor.
#[derive(Debug, Clone, Default)]
pub struct EventsView {
    /// One workload's events; `None`: all recent ones.
    pub scope: Option<WorkloadId>,
    /// The workload's events from the engine, oldest first (empty until
    /// they arrive: what the console holds is shown meanwhile).
    pub fetched: Vec<EventRecord>,
    /// The row the cursor is on (0: the newest).
    pub sel: usize,
}

impl EventsView {
    /// Shows `scope`'s events; a workload's are asked of the engine.
    pub fn open(&mut self, scope: Option<WorkloadId>) -> Vec<Effect> {
        *self = EventsView { scope, ..EventsView::default() };
        scope.map(Effect::FetchEvents).into_iter().collect()
    }

    /// Takes the engine's full list of a workload's events.
    pub fn take(&mut self, id: WorkloadId, events: &[EventRecord]) {
        if self.scope == Some(id) {
            self.fetched = events.to_vec();
        }
    }

    /// Keeps a fetched list current with the events that arrive live.
    pub fn records(&mut self, records: &[Record]) {
        let Some(id) = self.scope.filter(|_| !self.fetched.is_empty()) else { return };
        self.fetched.extend(records.iter().filter_map(|r| match r {
            Record::Event(e) if e.workload == id => Some(e.clone()),
            _ => None,
        }));
    }

    /// The events shown, newest first.
    pub fn rows<'a>(&'a self, model: &'a Model, filter: &str) -> Vec<&'a EventRecord> {
        let words: Vec<String> = filter.split_whitespace().map(str::to_lowercase).collect();
        let keep = |e: &&EventRecord| words.iter().all(|w| matches(e, w));
        match self.scope {
            Some(_) if !self.fetched.is_empty() => self.fetched.iter().rev().filter(keep).collect(),
            Some(id) => model.events.iter().rev().filter(|e| e.workload == id).filter(keep).collect(),
            None => model.events.iter().rev().filter(keep).collect(),
        }
    }

    /// The view's title: whose events, how many shown, the filter.
    pub fn title(&self, shown: usize, model: &Model, filter: &str) -> String {
        let whose = match self.scope {
            Some(id) => format!("events of {id}"),
            None => format!("recent events ({} held)", model.events.len()),
        };
        let filter = if filter.is_empty() { String::new() } else { format!(" /{filter}") };
        format!("{whose} — {shown} shown{filter}")
    }
}

/// Whether one lower-cased filter word matches an event.
fn matches(e: &EventRecord, word: &str) -> bool {
    if let Some(kind) = word.strip_prefix("kind=") {
        return e.kind.as_str() == kind;
    }
    if let Ok(id) = word.parse::<WorkloadId>() {
        return e.workload == id;
    }
    e.kind.as_str().contains(word) || e.message.to_lowercase().contains(word)
}

impl Component for EventsView {
    /// The cursor (j/k, pages, ends) and Enter: the event's workload.
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome {
        let rows = self.rows(ctx.model, ctx.filter);
        if let Some(by) = component::step(intent, ctx.page) {
            let last = rows.len().saturating_sub(1) as isize;
            self.sel = (self.sel.min(last as usize) as isize).saturating_add(by).clamp(0, last) as usize;
            return Outcome::Done;
        }
        match intent {
            Intent::Open => match rows.get(self.sel) {
                Some(e) => Outcome::Describe(e.workload),
                None => Outcome::Done,
            },
            _ => Outcome::Ignored,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::{EventKind, Millis};

    #[test]
    fn filter_words_match_kind_workload_and_text() {
        let e = EventRecord {
            at: Millis(0),
            workload: WorkloadId(7),
            attempt: None,
            kind: EventKind::Retry,
            message: "retried as w-9".into(),
        };
        assert!(matches(&e, "kind=retry"));
        assert!(!matches(&e, "kind=failed"));
        assert!(matches(&e, "w-7"));
        assert!(!matches(&e, "w-8"));
        assert!(matches(&e, "retried"));
    }
}
