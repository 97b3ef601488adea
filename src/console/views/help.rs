//! `?` help, generated from the keymap and the command list
//! ([`crate::console::help`]); it scrolls when taller than the screen.

use super::block;
use crate::console::app::App;
use crate::console::help::{KEYS_W, Row, rows};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    // Inside the border: as `help::area` says for the whole screen.
    let (w, h) = (usize::from(area.width.saturating_sub(2)), usize::from(area.height.saturating_sub(2)));
    let all = rows(app.replay.is_some(), w);
    let top = app.help_scroll.min(all.len().saturating_sub(h));
    let lines: Vec<Line> = all
        .iter()
        .skip(top)
        .take(h)
        .map(|r| match r {
            Row::Heading(s) => Line::from(Span::styled(s.clone(), t.header)),
            Row::Entry(keys, text) => Line::from(vec![
                Span::styled(format!("  {keys:<w$}", w = KEYS_W - 2), t.accent),
                Span::raw(text.clone()),
            ]),
        })
        .collect();
    let title = if all.len() > h {
        let last = (top + h).min(all.len());
        format!("help {}-{last} of {} — j/k pgup/pgdn scroll, esc closes", top + 1, all.len())
    } else {
        "help — esc closes".to_string()
    };
    f.render_widget(Paragraph::new(lines).block(block(title, t)), area);
}
