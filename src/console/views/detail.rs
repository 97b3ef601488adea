//! Workload detail: spec, placement with its score breakdown, why it
//! waits, the attempt timeline (class, rule, evidence, exit), the events
//! with retry decisions and their reasons, and artifacts.

use super::{age, block, state_span};
use crate::console::app::App;
use crate::engine::model::EventKind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let Some(w) = app.detail.and_then(|id| app.model.workloads.get(&id)) else {
        f.render_widget(Paragraph::new("no workload").block(block("detail".into(), t)), area);
        return;
    };
    let r = &w.rec;
    let h = |s: &str| Line::from(Span::styled(s.to_string(), t.header));
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("{} {} ", r.id, r.name), t.accent),
        state_span(r.state, t),
        Span::raw(format!(
            "  attempts {}  cost ${:.2} (est ${:.2})  age {}",
            r.attempts,
            r.cost_usd,
            r.est_cost_usd,
            age(app.now, r.submitted_at)
        )),
    ])];
    if let Some(reason) = &r.reason {
        let label = if r.state.is_final() { "ended: " } else { "why not running: " };
        lines.push(Line::from(vec![Span::styled(label, t.warn), Span::raw(reason.clone())]));
    }
    lines.push(h("spec"));
    let s = &r.spec;
    lines.push(Line::from(format!("  command: {}", s.runtime.command.join(" "))));
    let gpus = match s.nodes() {
        1 => s.resources.gpus.to_string(),
        n => format!("{} × {n} nodes", s.resources.gpus),
    };
    lines.push(Line::from(format!(
        "  gpus: {gpus}  priority: {}  key: {}",
        r.priority,
        r.idempotency_key.as_deref().unwrap_or("-")
    )));
    if let Some(c) = &s.checkpoint {
        let every = c.interval.map_or(String::new(), |i| format!(", every {i}"));
        lines.push(Line::from(format!("  checkpoints: {}{every}", c.path)));
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
            lines.push(Line::from(vec![Span::styled("    evidence: ", t.warn), Span::raw(ev.clone())]));
        }
        // Checkpoint names are the workload's: shown sanitized.
        if let Some(c) = &a.checkpoint {
            let name = |s: &crate::engine::model::SavedCheckpoint| {
                format!("{} of attempt {}", crate::text::sanitize(&s.name), s.attempt)
            };
            let mut said = Vec::new();
            if let Some(r) = &c.resumed {
                said.push(format!("resumed from {}", name(r)));
            }
            if let Some(s) = c.saved.as_ref().filter(|s| s.attempt == a.id.n) {
                said.push(format!(
                    "left {} ({})",
                    crate::text::sanitize(&s.name),
                    crate::units::human_bytes(s.bytes)
                ));
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
    let events: Vec<_> = if app.detail_events.is_empty() {
        app.model.events.iter().filter(|e| e.workload == r.id).cloned().collect()
    } else {
        app.detail_events.clone()
    };
    for e in &events {
        let style = match e.kind {
            EventKind::Retry => t.warn,
            EventKind::Failed | EventKind::Lost => t.bad,
            EventKind::Succeeded => t.ok,
            _ => t.text,
        };
        lines.push(Line::from(vec![
            Span::styled(format!("  {:>4} ", age(app.now, e.at)), t.dim),
            Span::styled(format!("{:<13} ", e.kind.as_str()), style),
            Span::raw(e.message.clone()),
        ]));
    }
    let arts: Vec<_> = events.iter().filter(|e| e.kind == EventKind::Outputs).collect();
    lines.push(h("artifacts"));
    if arts.is_empty() {
        lines.push(Line::from(Span::styled("  none collected", t.dim)));
    }
    for e in arts {
        lines.push(Line::from(format!("  {}", e.message)));
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(block(format!("detail {}", r.id), t)),
        area,
    );
}
