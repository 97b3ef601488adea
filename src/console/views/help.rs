//! `?` help, generated from the keymap and the command list.

use super::block;
use crate::console::app::App;
use crate::console::keymap::{COMMANDS, Scope, help_lines};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let mut lines = Vec::new();
    let mut scope = None;
    // Replay keys only where they do something.
    let lines_for = help_lines().into_iter().filter(|(s, ..)| *s != Scope::Replay || app.replay.is_some());
    for (s, keys, help) in lines_for {
        if scope != Some(s) {
            lines.push(Line::from(Span::styled(s.title().to_string(), t.header)));
            scope = Some(s);
        }
        lines.push(Line::from(vec![Span::styled(format!("  {keys:<12}"), t.accent), Span::raw(help)]));
    }
    lines.push(Line::from(Span::styled(": commands", t.header)));
    for (c, help) in COMMANDS {
        lines.push(Line::from(vec![Span::styled(format!("  :{c:<11}"), t.accent), Span::raw(*help)]));
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("help — esc closes".into(), t)),
        area,
    );
}
