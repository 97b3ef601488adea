//! The spec editor: the TextArea on the left, problems (line:col) and the
//! live placement preview on the right; stacked when the screen is narrow.

use super::block;
use crate::console::app::App;
use crate::schedule::Decision;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Wrap};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let e = &app.editor;
    let (left, right) = if area.width >= 100 {
        let [l, r] = Layout::horizontal([Constraint::Percentage(55), Constraint::Min(30)]).areas(area);
        (l, r)
    } else {
        let [l, r] = Layout::vertical([Constraint::Percentage(55), Constraint::Min(5)]).areas(area);
        (l, r)
    };
    let title = format!("spec {} key:{}", e.path.as_deref().unwrap_or("(unsaved)"), e.key);
    let mut text = e.text.clone();
    text.set_block(block(title, t));
    text.set_line_number_style(t.dim);
    text.set_cursor_line_style(ratatui::style::Style::new());
    f.render_widget(&text, left);

    let mut lines: Vec<Line> = Vec::new();
    let errors = e.problems.iter().filter(|p| p.error).count();
    for p in &e.problems {
        let (sym, style) = if p.error { ("✗ error", t.bad) } else { ("! warning", t.warn) };
        lines.push(Line::from(vec![
            Span::styled(format!("{sym} {}:{} ", p.line, p.col), style),
            Span::raw(p.message.clone()),
        ]));
        if let Some(h) = &p.help {
            lines.push(Line::from(Span::styled(format!("  help: {h}"), t.dim)));
        }
    }
    if errors == 0 {
        lines.push(Line::from(Span::styled("✓ valid", t.ok)));
        match &e.preview {
            None => lines.push(Line::from(Span::styled("placement: waiting for the fleet…", t.dim))),
            Some(Decision::Placed(p)) => {
                lines.push(Line::from(Span::styled(
                    format!(
                        "placement preview: {} of {} pools feasible",
                        p.considered.feasible_pools, p.considered.total_pools
                    ),
                    t.header,
                )));
                for (i, c) in p.candidates.iter().take(6).enumerate() {
                    lines.push(Line::from(vec![
                        Span::styled(format!("{}{} ", if i == 0 { ">" } else { " " }, i + 1), t.accent),
                        Span::raw(format!(
                            "{} {} ${:.2}/h est {} score {:.1}",
                            c.pool, c.node, c.hourly_usd, c.est_cost_usd, c.score
                        )),
                    ]));
                }
            }
            Some(Decision::Unschedulable(ex)) => {
                lines.push(Line::from(Span::styled("nothing fits:", t.bad)));
                for l in ex.to_string().lines() {
                    lines.push(Line::from(l.to_string()));
                }
            }
        }
    }
    f.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("validation and placement".into(), t)),
        right,
    );
}
