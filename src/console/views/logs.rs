//! Logs of one attempt: the visible window only, with timestamps (off,
//! local, UTC), wrap, search hits and the evidence line marked by a symbol
//! as well as style.

use super::block;
use crate::console::app::App;
use crate::console::logs::{Stamps, clock};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let Some(l) = &app.logs else {
        f.render_widget(Paragraph::new("no logs open").block(block("logs".into(), t)), area);
        return;
    };
    if let Some(note) = l.note.as_ref().filter(|_| l.lines.is_empty()) {
        let p = Paragraph::new(Line::from(Span::styled(note.clone(), t.dim)))
            .wrap(Wrap { trim: false })
            .block(block(format!("logs {}", l.attempt), t));
        f.render_widget(p, area);
        return;
    }
    let height = usize::from(area.height.saturating_sub(2));
    let ev = l.evidence.as_deref().map(str::trim).filter(|e| !e.is_empty());
    let lines: Vec<Line> =
        l.lines
            .iter()
            .enumerate()
            .skip(l.top)
            .take(height)
            .map(|(i, line)| {
                let mut spans = Vec::new();
                let is_ev = ev.is_some_and(|e| line.text.contains(e));
                let mark = if i == l.cursor {
                    ">"
                } else if is_ev {
                    "!"
                } else if l.is_match(i) {
                    "*"
                } else {
                    " "
                };
                spans.push(Span::styled(mark, if is_ev { t.bad } else { t.accent }));
                match l.stamps {
                    Stamps::Off => {}
                    Stamps::Local => spans
                        .push(Span::styled(format!("{} ", clock(line.at, app.config.utc_offset_s)), t.dim)),
                    Stamps::Utc => spans.push(Span::styled(format!("{}Z ", clock(line.at, 0)), t.dim)),
                }
                let style = if i == l.cursor {
                    t.selected
                } else if is_ev {
                    t.bad
                } else if line.stderr {
                    t.warn
                } else {
                    t.text
                };
                spans.push(Span::styled(line.text.clone(), style));
                Line::from(spans)
            })
            .collect();
    let title = format!(
        "logs {} — {} lines{}{}{}{}",
        l.attempt,
        l.lines.len() + l.dropped,
        if l.follow { " follow" } else { "" },
        if l.wrap { " wrap" } else { "" },
        match l.stamps {
            Stamps::Off => "",
            Stamps::Local => " local-time",
            Stamps::Utc => " utc",
        },
        l.search.as_ref().map_or(String::new(), |s| format!(" /{s}")),
    );
    let mut p = Paragraph::new(lines).block(block(title, t));
    if l.wrap {
        p = p.wrap(Wrap { trim: false });
    }
    f.render_widget(p, area);
}
