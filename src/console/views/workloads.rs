//! Workloads: id, name, state, attempt, pool, GPUs, age, cost; sorted,
//! filtered, faults-only. Draws only the visible window of rows.

use super::{age, block, marker, state_span, window};
use crate::console::app::{App, View, truncate};
use crate::console::model::WorkloadRow;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let ids = &app.derived.workloads;
    let mut title = format!(
        "workloads {}/{} sort:{}{}",
        ids.len(),
        app.model.workloads.len(),
        app.sort.name(),
        if app.sort_desc { "↓" } else { "↑" }
    );
    if app.faults_only {
        title.push_str(" faults-only");
    }
    if let Some(flt) = app.filter_text.get(&View::Workloads).filter(|s| !s.is_empty()) {
        title.push_str(&format!(" /{flt}"));
    }
    f.render_widget(table(app, ids, app.sel(View::Workloads), area, title), area);
}

/// The workloads table over `ids`, with row `sel` selected.
pub(crate) fn table<'a>(
    app: &'a App,
    ids: &[crate::engine::model::WorkloadId],
    sel: usize,
    area: Rect,
    title: String,
) -> Table<'a> {
    let t = &app.config.theme;
    let height = usize::from(area.height.saturating_sub(3));
    let start = window(sel, height);
    let rows = ids.iter().enumerate().skip(start).take(height).filter_map(|(i, id)| {
        let w = app.model.workloads.get(id)?;
        let r = row(app, w, i == sel);
        Some(if i == sel { r.style(t.selected) } else { r })
    });
    let header = Row::new(["", "ID", "NAME", "STATE", "ATT", "POOL", "GPU", "AGE", "COST"]).style(t.header);
    Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(7),
            Constraint::Min(10),
            Constraint::Length(12),
            Constraint::Length(3),
            Constraint::Min(12),
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Length(8),
        ],
    )
    .header(header)
    .column_spacing(1)
    .block(block(title, t))
}

fn row<'a>(app: &'a App, w: &'a WorkloadRow, selected: bool) -> Row<'a> {
    let t = &app.config.theme;
    let a = w.last_attempt();
    let mut state = state_span(w.rec.state, t);
    if !w.rec.state.is_final() && w.is_fault() {
        state = Span::styled(format!("{} ↻", state.content), t.warn);
    }
    Row::new(vec![
        Cell::from(marker(selected)),
        Cell::from(w.rec.id.to_string()),
        Cell::from(truncate(&w.rec.name, 24)),
        Cell::from(state),
        Cell::from(w.rec.attempts.to_string()),
        Cell::from(a.map_or("-".to_string(), |a| a.pool.clone())),
        Cell::from(w.rec.spec.resources.gpus.to_string()),
        Cell::from(age(app.now, w.rec.submitted_at)),
        Cell::from(format!("${:.2}", w.rec.cost_usd)),
    ])
}
