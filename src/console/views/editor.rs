//! The spec editor: the TextArea on the left, with each problem's line
//! marked in its gutter (`✗` an error, `!` a warning), and on the right
//! every problem (line:col, the one at the cursor with its help) or, when
//! there are no errors, the live placement preview; stacked when the
//! screen is narrow.

use super::block;
use crate::console::app::App;
use crate::console::editor::Editor;
use crate::console::theme::Theme;
use crate::schedule::Decision;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Margin, Rect};
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
    // The TextArea scrolled the clone it drew to keep the cursor in view.
    mark_gutter(f, e, text.scroll_offset().0, left.inner(Margin::new(1, 1)), t);

    let mut lines = problem_lines(e, t);
    let errors = e.problems.iter().filter(|p| p.error).count();
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

/// `✗` (an error) or `!` (a warning) in the gutter's first column, on each
/// problem's line that is on screen; `top` is the first line shown.
fn mark_gutter(f: &mut Frame, e: &Editor, top: u16, inner: Rect, t: &Theme) {
    if inner.width == 0 {
        return;
    }
    let top = usize::from(top);
    let buf = f.buffer_mut();
    for p in e.problems.iter().filter(|p| p.line > top) {
        let Ok(row) = u16::try_from(p.line - 1 - top) else { continue };
        if row >= inner.height {
            continue;
        }
        let (sym, style) = if p.error { ("✗", t.bad) } else { ("!", t.warn) };
        if let Some(cell) = buf.cell_mut((inner.x, inner.y + row)) {
            // An error outranks a warning on the same line.
            if p.error || cell.symbol() != "✗" {
                cell.set_symbol(sym).set_style(style);
            }
        }
    }
}

/// The problems: a count with the key to go through them, then one line
/// each, the one at the cursor marked `>` and followed by its help (the
/// first problem's help when the cursor is on none).
fn problem_lines(e: &Editor, t: &Theme) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if e.problems.is_empty() {
        return lines;
    }
    let errors = e.problems.iter().filter(|p| p.error).count();
    let warnings = e.problems.len() - errors;
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut counts = Vec::new();
    if errors > 0 {
        counts.push(count(errors, "error"));
    }
    if warnings > 0 {
        counts.push(count(warnings, "warning"));
    }
    lines.push(Line::from(vec![
        Span::styled(counts.join(", "), if errors > 0 { t.bad } else { t.warn }),
        Span::styled("  F8 next", t.dim),
    ]));
    let current = e.current_problem();
    let helped = current.unwrap_or(0);
    for (i, p) in e.problems.iter().enumerate() {
        let (sym, style) = if p.error { ("✗ error", t.bad) } else { ("! warning", t.warn) };
        let here = if current == Some(i) { ">" } else { " " };
        lines.push(Line::from(vec![
            Span::styled(here, t.accent),
            Span::styled(format!("{sym} {}:{} ", p.line, p.col), style),
            Span::raw(p.message.clone()),
        ]));
        if i == helped
            && let Some(h) = &p.help
        {
            lines.push(Line::from(Span::styled(format!("   help: {h}"), t.dim)));
        }
    }
    lines
}
