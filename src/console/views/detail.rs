//! Workload detail: spec, placement with its score breakdown, why it
//! waits, the attempt timeline (class, rule, evidence, exit), the events
//! with retry decisions and their reasons, and artifacts. Its text comes
//! from the view's component ([`crate::console::detail`]), which scrolls
//! it; the title says where the screen is in it (`rows 21-40/260 50%`).

use super::block;
use crate::console::app::App;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let d = &app.detail;
    let (width, height) = detail_area(area);
    let Some(rows) = d.rows(&app.model, t, app.now, width) else {
        let text = match (d.id, &d.missing) {
            (_, Some(why)) => Line::from(Span::styled(why.clone(), t.bad)),
            (Some(id), None) if d.fetching => Line::from(Span::styled(format!("loading {id}…"), t.dim)),
            _ => Line::from("no workload"),
        };
        let p = Paragraph::new(text).wrap(Wrap { trim: false }).block(block("detail".into(), t));
        f.render_widget(p, area);
        return;
    };
    let top = d.first_row(rows.len(), height);
    let shown = rows.len().min(top + height) - top;
    let id = d.id.map(|i| i.to_string()).unwrap_or_default();
    let title = if rows.len() <= height {
        format!("detail {id}")
    } else {
        let pct = (top + shown) * 100 / rows.len();
        format!("detail {id} · rows {}-{}/{} {pct}%", top + 1, top + shown, rows.len())
    };
    let body: Vec<Line> = rows.into_iter().skip(top).take(height).collect();
    f.render_widget(Paragraph::new(body).block(block(title, t)), area);
}

/// The text's width and height inside the pane's border.
fn detail_area(area: Rect) -> (usize, usize) {
    (usize::from(area.width.saturating_sub(2)), usize::from(area.height.saturating_sub(2)))
}
