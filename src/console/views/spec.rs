//! A workload's spec as submitted, as TOML, scrolled; the title says
//! whose, where the screen is in it, and that `e` edits a copy. Its text
//! comes from the view's component ([`crate::console::spec_view`]).

use super::block;
use crate::console::app::App;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let s = &app.spec;
    let (width, height) =
        (usize::from(area.width.saturating_sub(2)), usize::from(area.height.saturating_sub(2)));
    let rows = s.rows(&app.model, width);
    let top = s.top.min(rows.len().saturating_sub(height));
    let shown = rows.len().min(top + height) - top;
    let id = s.id.map(|i| i.to_string()).unwrap_or_default();
    let mut title = format!("spec {id} (as submitted) · e: edit a copy and submit");
    if rows.len() > height {
        title.push_str(&format!(" · rows {}-{}/{}", top + 1, top + shown, rows.len()));
    }
    let body: Vec<Line> = rows.into_iter().skip(top).take(height).collect();
    f.render_widget(Paragraph::new(body).block(block(title, t)), area);
}
