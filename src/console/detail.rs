//! The detail view's component: which workload it shows, that workload's
//! events, how far it is scrolled, and its text, wrapped to the screen.
//!
//! A workload the console does not hold (older than the pages it loaded)
//! is fetched through the engine handle ([`Effect::FetchWorkload`]) and
//! shown when it arrives. The text is built here, not in the view, so that
//! scrolling knows how many rows there are: j/k, PgUp/PgDn, g/G and
//! Home/End move through all of it, as in `less`. Pure: no I/O, no clock.

use super::component::{self, Component, Ctx, Outcome};
use super::keymap::Intent;
use super::model::Model;
use super::msg::Effect;
use super::theme::Theme;
use crate::engine::handle::Held;
use crate::engine::model::{EventKind, EventRecord, Millis, WorkloadId};
use crate::text::{age, sanitize};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// What the detail view shows and where it is scrolled to.
#[derive(Debug, Clone, Default)]
pub struct Detail {
    /// The workload shown (or asked for).
    pub id: Option<WorkloadId>,
    /// Its events, oldest first: what the model holds at once, the
    /// engine's full list when it arrives.
    pub events: Vec<EventRecord>,
    /// The first row on screen.
    pub top: usize,
    /// The workload is on its way from the engine (the console did not
    /// hold it).
    pub fetching: bool,
    /// Why it cannot be shown (no such workload, or the engine would not
    /// give it).
    pub missing: Option<String>,
}

impl Detail {
    /// Shows `id` from its first line: at once when the model holds it,
    /// else once the engine sends it.
    pub fn open(&mut self, id: WorkloadId, model: &Model) -> Vec<Effect> {
        *self = Detail {
            id: Some(id),
            events: model.events.iter().filter(|e| e.workload == id).cloned().collect(),
            ..Detail::default()
        };
        if model.workloads.contains_key(&id) {
            return vec![Effect::FetchEvents(id)];
        }
        self.fetching = true;
        vec![Effect::FetchWorkload(id), Effect::FetchEvents(id)]
    }

    /// Takes the engine's answer for a workload the console did not hold.
    pub fn fetched(&mut self, id: WorkloadId, got: Result<Option<Held>, String>, model: &mut Model) {
        if self.id != Some(id) {
            return;
        }
        self.fetching = false;
        match got {
            Ok(Some((rec, attempts))) => model.hold(rec, attempts),
            Ok(None) => self.missing = Some(format!("no workload {id} in the journal")),
            Err(e) => self.missing = Some(format!("cannot load {id}: {e}")),
        }
    }

    /// Takes the engine's full list of the shown workload's events.
    pub fn take_events(&mut self, id: WorkloadId, events: Vec<EventRecord>) {
        if self.id == Some(id) {
            self.events = events;
        }
    }

    /// Moves the first row shown by `by`, within `rows` rows of text on a
    /// screen of `height` rows.
    pub fn scroll(&mut self, by: isize, rows: usize, height: usize) {
        self.top = component::scroll(self.top, by, rows, height);
    }

    /// The first row shown on a screen of `height` rows (within the text).
    pub fn first_row(&self, rows: usize, height: usize) -> usize {
        self.top.min(rows.saturating_sub(height))
    }

    /// The text, wrapped to `width` columns: spec, placement, why it
    /// waits, attempts, events and artifacts. `None` while there is no
    /// workload to show.
    pub fn rows(&self, model: &Model, t: &Theme, now: Millis, width: usize) -> Option<Vec<Line<'static>>> {
        let lines = self.lines(model, t, now)?;
        Some(lines.into_iter().flat_map(|l| wrap(l, width)).collect())
    }

    fn lines(&self, model: &Model, t: &Theme, now: Millis) -> Option<Vec<Line<'static>>> {
        let w = model.workloads.get(&self.id?)?;
        let r = &w.rec;
        let h = |s: &str| Line::from(Span::styled(s.to_string(), t.header));
        let mut lines = vec![Line::from(vec![
            Span::styled(format!("{} {} ", r.id, sanitize(&r.name)), t.accent),
            t.state_span(r.state),
            Span::raw(format!(
                "  attempts {}  cost ${:.2} (est ${:.2})  age {}",
                r.attempts,
                r.cost_usd,
                r.est_cost_usd,
                age(now, r.submitted_at)
            )),
        ])];
        // The operator's retries, both ways.
        if let Some(old) = r.retry_of() {
            lines.push(Line::from(vec![
                Span::styled("retry of ", t.dim),
                Span::styled(old.to_string(), t.accent),
            ]));
        }
        if let Some(new) = w.retried_as {
            lines.push(Line::from(vec![
                Span::styled("retried as ", t.warn),
                Span::styled(new.to_string(), t.accent),
                Span::styled(format!("  (:describe {new})"), t.dim),
            ]));
        }
        if let Some(reason) = &r.reason {
            let label = if r.state.is_final() { "ended: " } else { "why not running: " };
            lines.push(Line::from(vec![
                Span::styled(label, t.warn),
                Span::raw(sanitize(reason).into_owned()),
            ]));
        }
        lines.push(h("spec"));
        let s = &r.spec;
        lines.push(Line::from(format!("  command: {}", sanitize(&s.runtime.command.join(" ")))));
        let gpus = match s.nodes() {
            1 => s.resources.gpus.to_string(),
            n => format!("{} × {n} nodes", s.resources.gpus),
        };
        lines.push(Line::from(format!(
            "  gpus: {gpus}  priority: {}  key: {}",
            r.priority,
            sanitize(r.idempotency_key.as_deref().unwrap_or("-"))
        )));
        // With tenants: whose work it is (its quota is what it may wait on).
        if let Some(tenant) = &r.tenant {
            lines.push(Line::from(format!("  tenant: {}", sanitize(tenant))));
        }
        if let Some(c) = &s.checkpoint {
            let every = c.interval.map_or(String::new(), |i| format!(", every {i}"));
            lines.push(Line::from(format!("  checkpoints: {}{every}", sanitize(&c.path))));
        }
        if let Some(a) = w.last_attempt() {
            lines.push(h("placement"));
            lines.push(Line::from(format!(
                "  {} {} {} ({}) ${:.2}/h score {:.1}",
                a.pool,
                if a.nodes.is_empty() { "node" } else { "gang" },
                a.nodes_label(),
                a.region,
                a.price_per_hour,
                a.score
            )));
            lines.push(Line::from(Span::styled(format!("  why: {}", a.score_breakdown), t.dim)));
        }
        lines.push(h("attempts"));
        for a in &w.attempts {
            let class = a.class.map_or(String::new(), |c| format!(" class={c}"));
            let rule = a.rule.as_deref().map_or(String::new(), |r| format!(" rule={r}"));
            let exit = a.exit_code.map_or(String::new(), |c| format!(" exit={c}"));
            lines.push(Line::from(vec![
                Span::styled(format!("  {} ", a.id), t.accent),
                Span::raw(format!("{} on {}{exit}", a.state, a.nodes_label())),
                Span::styled(class, t.bad),
                Span::styled(rule, t.dim),
            ]));
            if let Some(ev) = &a.evidence {
                lines.push(Line::from(vec![
                    Span::styled("    evidence: ", t.warn),
                    Span::raw(sanitize(ev).into_owned()),
                ]));
            }
            // Checkpoint names are the workload's: shown sanitized.
            if let Some(c) = &a.checkpoint {
                let name = |s: &crate::engine::model::SavedCheckpoint| {
                    format!("{} of attempt {}", sanitize(&s.name), s.attempt)
                };
                let mut said = Vec::new();
                if let Some(r) = &c.resumed {
                    said.push(format!("resumed from {}", name(r)));
                }
                if let Some(s) = c.saved.as_ref().filter(|s| s.attempt == a.id.n) {
                    said.push(format!("left {} ({})", sanitize(&s.name), crate::units::human_bytes(s.bytes)));
                }
                if !said.is_empty() {
                    lines.push(Line::from(vec![
                        Span::styled("    checkpoint: ", t.dim),
                        Span::raw(said.join("; ")),
                    ]));
                }
            }
        }
        lines.push(h("events"));
        let held: Vec<EventRecord>;
        let events = if self.events.is_empty() {
            held = model.events.iter().filter(|e| e.workload == r.id).cloned().collect();
            &held
        } else {
            &self.events
        };
        for e in events {
            let style = match e.kind {
                EventKind::Retry => t.warn,
                EventKind::Failed | EventKind::Lost => t.bad,
                EventKind::Succeeded => t.ok,
                _ => t.text,
            };
            lines.push(Line::from(vec![
                Span::styled(format!("  {:>4} ", age(now, e.at)), t.dim),
                Span::styled(format!("{:<13} ", e.kind.as_str()), style),
                Span::raw(sanitize(&e.message).into_owned()),
            ]));
        }
        lines.push(h("artifacts"));
        let arts: Vec<&EventRecord> = events.iter().filter(|e| e.kind == EventKind::Outputs).collect();
        if arts.is_empty() {
            lines.push(Line::from(Span::styled("  none collected", t.dim)));
        }
        for e in arts {
            lines.push(Line::from(format!("  {}", sanitize(&e.message))));
        }
        Some(lines)
    }
}

impl Component for Detail {
    /// The view's own keys: scrolling by a row (j/k, ↑/↓), a screenful
    /// (PgUp/PgDn, ctrl-u/ctrl-d) or to either end (g/G, Home/End), over
    /// its text; `v` its spec and `E` its events are the app's.
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome {
        let (width, height) = ctx.body;
        let Some(by) = component::step(intent, height) else { return Outcome::Ignored };
        let rows = self.rows(ctx.model, ctx.theme, ctx.now, width).map_or(0, |r| r.len());
        self.scroll(by, rows, height);
        Outcome::Done
    }
}

/// One line as rows of at most `width` columns, cut between characters
/// (as `less` does), each piece keeping its span's style.
pub fn wrap(line: Line<'static>, width: usize) -> Vec<Line<'static>> {
    let width = width.max(1);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut row: Vec<Span<'static>> = Vec::new();
    let mut used = 0;
    for span in line.spans {
        let mut piece = String::new();
        for c in span.content.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width && used > 0 {
                if !piece.is_empty() {
                    row.push(Span::styled(std::mem::take(&mut piece), span.style));
                }
                rows.push(Line::from(std::mem::take(&mut row)));
                used = 0;
            }
            piece.push(c);
            used += w;
        }
        if !piece.is_empty() {
            row.push(Span::styled(piece, span.style));
        }
    }
    rows.push(Line::from(row));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn wraps_at_the_width_between_characters() {
        let rows = wrap(Line::from(vec![Span::raw("abcd"), Span::raw("efg")]), 3);
        assert_eq!(rows.iter().map(text).collect::<Vec<_>>(), ["abc", "def", "g"]);
        assert_eq!(wrap(Line::from(""), 3).len(), 1, "an empty line is a row");
        let wide = wrap(Line::from("日本語"), 4);
        assert_eq!(wide.iter().map(text).collect::<Vec<_>>(), ["日本", "語"]);
    }

    #[test]
    fn scrolling_stays_within_the_text() {
        let mut d = Detail::default();
        d.scroll(5, 30, 10);
        assert_eq!(d.top, 5);
        d.scroll(isize::MAX / 2, 30, 10);
        assert_eq!(d.top, 20, "the last screenful");
        d.scroll(-1, 30, 10);
        assert_eq!(d.top, 19);
        d.scroll(-100, 30, 10);
        assert_eq!(d.top, 0);
        d.scroll(3, 5, 10);
        assert_eq!(d.top, 0, "it all fits");
    }
}
