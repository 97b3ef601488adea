//! The engine's events, newest first: age, workload, kind and message,
//! the cursor's row marked; a workload's or all recent ones, as the view's
//! component ([`crate::console::events`]) chose, with its `/` filter.

use super::block;
use crate::console::app::App;
use crate::console::msg::View;
use crate::engine::model::EventKind;
use crate::text::{age, sanitize};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let ev = &app.events;
    let filter = app.filter(View::Events);
    let rows = ev.rows(&app.model, filter);
    let height = usize::from(area.height.saturating_sub(2)).max(1);
    let sel = ev.sel.min(rows.len().saturating_sub(1));
    let top = sel.saturating_sub(height - 1);
    let lines: Vec<Line> = rows
        .iter()
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(i, e)| {
            let style = match e.kind {
                EventKind::Retry | EventKind::Refused => t.warn,
                EventKind::Failed | EventKind::Lost => t.bad,
                EventKind::Succeeded => t.ok,
                _ => t.text,
            };
            let line = Line::from(vec![
                Span::styled(if i == sel { ">" } else { " " }, t.accent),
                Span::styled(format!("{:>4} ", age(app.now, e.at)), t.dim),
                Span::styled(format!("{:<7} ", e.workload.to_string()), t.accent),
                Span::styled(format!("{:<13} ", e.kind.as_str()), style),
                Span::raw(sanitize(&e.message).into_owned()),
            ]);
            if i == sel { line.style(t.selected) } else { line }
        })
        .collect();
    let body = if lines.is_empty() { vec![Line::from(Span::styled("no events", t.dim))] } else { lines };
    let title = ev.title(rows.len(), &app.model, filter);
    f.render_widget(Paragraph::new(body).block(block(title, t)), area);
}
