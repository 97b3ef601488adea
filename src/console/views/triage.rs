//! Triage: failed and retrying workloads grouped by failure class and by
//! node/pool, so one bad node or one bad image stands out; below, the
//! faults themselves with their evidence line.

use super::{block, marker, window};
use crate::console::app::{App, View, truncate};
use crate::failure::FailureClass;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let ids = &app.derived.faults;
    let (by_class, by_node) = (&app.derived.by_class, &app.derived.by_fault_node);
    let [groups, list] = Layout::vertical([Constraint::Percentage(40), Constraint::Min(4)]).areas(area);
    let [left, right] = Layout::horizontal([Constraint::Percentage(45), Constraint::Min(10)]).areas(groups);
    let lines: Vec<Line> = by_class
        .iter()
        .take(usize::from(groups.height))
        .map(|(c, n, top)| {
            Line::from(vec![
                Span::styled(format!("{n:>4} {c:<10}"), t.bad),
                Span::styled(format!(" {top}"), t.dim),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).block(block("by failure class".into(), t)), left);
    let lines: Vec<Line> = by_node
        .iter()
        .take(usize::from(groups.height))
        .map(|(node, n, classes)| {
            Line::from(vec![
                Span::styled(format!("{n:>4} "), t.bad),
                Span::raw(node.clone()),
                Span::styled(format!(" {classes}"), t.dim),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).block(block("by node (pool)".into(), t)), right);

    let sel = app.sel(View::Triage);
    let height = usize::from(list.height.saturating_sub(3));
    let rows = ids.iter().enumerate().skip(window(sel, height)).take(height).filter_map(|(i, id)| {
        let w = app.model.workloads.get(id)?;
        let a = w.attempts.iter().rev().find(|a| a.class.is_some());
        let r = Row::new(vec![
            Cell::from(marker(i == sel)),
            Cell::from(w.rec.id.to_string()),
            Cell::from(Span::styled(w.fault_class().map_or("?", FailureClass::as_str), t.bad)),
            Cell::from(if w.rec.state.is_final() {
                w.rec.state.to_string()
            } else {
                format!("{} ↻", w.rec.state)
            }),
            Cell::from(a.map_or("-".into(), |a| a.node.clone())),
            Cell::from(truncate(a.and_then(|a| a.evidence.as_deref()).unwrap_or(""), 60)),
        ]);
        Some(if i == sel { r.style(t.selected) } else { r })
    });
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(11),
            Constraint::Length(14),
            Constraint::Min(10),
        ],
    )
    .header(Row::new(["", "ID", "CLASS", "STATE", "NODE", "EVIDENCE"]).style(t.header))
    .block(block(format!("faults {} — l logs at evidence, r retry, c cordon, d drain", ids.len()), t));
    f.render_widget(table, list);
}
