//! Workloads: id, name, state, attempt, pool, GPUs, age, cost; sorted (the
//! sorted column's header carries ▼ or ▲), filtered, faults-only. Names
//! and pools that do not fit are shortened in the middle; numbers never
//! are. With tenants (any workload held has one) a TENANT column follows
//! the name; without, the table is as it always was. Draws only the
//! visible window of rows.

use super::{age, block, constraints, marker, state_span, window};
use crate::console::app::{App, COLUMNS, View};
use crate::console::fit::{self, Col, distinct};
use crate::console::model::WorkloadRow;
use crate::engine::model::WorkloadId;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let ids = &app.derived.workloads;
    let held = app.model.workloads.len();
    // "N of M" when the journal holds more than this console loaded.
    let of = if app.model.total > held as u64 { format!(" of {}", app.model.total) } else { String::new() };
    let mut title = format!(
        "workloads {}/{held}{of} sort:{}{}",
        ids.len(),
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

/// Column headers, in [`COLUMNS`] order after the marker.
const HEADERS: [&str; 8] = ["ID", "NAME", "STATE", "ATT", "POOL", "GPU", "AGE", "COST"];

/// The workloads table over `ids`, with row `sel` selected.
pub(crate) fn table<'a>(
    app: &'a App,
    ids: &[WorkloadId],
    sel: usize,
    area: Rect,
    title: String,
) -> Table<'a> {
    let t = &app.config.theme;
    let height = usize::from(area.height.saturating_sub(3));
    let start = window(sel, height);
    let visible: Vec<&WorkloadRow> =
        ids.iter().skip(start).take(height).filter_map(|id| app.model.workloads.get(id)).collect();
    // The sorted column says so: `AGE▼`.
    let headers: Vec<String> = COLUMNS
        .iter()
        .zip(HEADERS)
        .map(|(c, h)| {
            if *c == app.sort {
                format!("{h}{}", if app.sort_desc { "▼" } else { "▲" })
            } else {
                h.to_string()
            }
        })
        .collect();
    let hw = |i: usize| fit::width(&headers[i]);
    let tenants = app.derived.tenant_column;
    // Ids as wide as the newest one; costs as the widest shown.
    let id_w = app.model.workloads.keys().next_back().map_or(0, |id| fit::width(&id.to_string()));
    let cost_w = visible.iter().map(|w| cost(w).len()).max().unwrap_or(0);
    let names = &app.derived.workload_widths;
    let mut cols = vec![
        Col::fixed(1),
        Col::fixed(id_w.max(hw(0))),
        Col::shrink(names.name.max(hw(1)), 16, 8).slack(),
        Col::fixed(11.max(hw(2))),
        Col::fixed(3.max(hw(3))),
        Col::shrink(names.pool.max(hw(4)), 14, 8),
        Col::fixed(3.max(hw(5))),
        Col::fixed(4.max(hw(6))),
        Col::fixed(cost_w.max(hw(7))),
    ];
    if tenants {
        cols.insert(TENANT, Col::shrink(names.tenant.max(TENANT_HEADER.len()), 10, 6));
    }
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    // Names on screen stay told apart from each other.
    let shown_names: Vec<&str> = visible.iter().map(|w| w.rec.name.as_str()).collect();
    let shown_pools: Vec<&str> =
        visible.iter().filter_map(|w| w.last_attempt()).map(|a| a.pool.as_str()).collect();
    let shown_tenants: Vec<&str> = visible.iter().filter_map(|w| w.rec.tenant.as_deref()).collect();
    let among = (shown_names.as_slice(), shown_pools.as_slice(), shown_tenants.as_slice());
    let rows = visible.iter().enumerate().map(|(k, wl)| {
        let selected = start + k == sel;
        let r = row(app, wl, selected, &w, among);
        if selected { r.style(t.selected) } else { r }
    });
    let mut header = vec![String::new()];
    header.extend(headers);
    if tenants {
        header.insert(TENANT, TENANT_HEADER.to_string());
    }
    let header: Vec<String> =
        header.iter().enumerate().map(|(i, h)| fit::end(h, w[i]).into_owned()).collect();
    Table::new(rows.collect::<Vec<_>>(), constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t))
}

/// Where the TENANT column goes (after NAME, counting the marker).
const TENANT: usize = 3;
const TENANT_HEADER: &str = "TENANT";

fn cost(w: &WorkloadRow) -> String {
    format!("${:.2}", w.rec.cost_usd)
}

fn row<'a>(
    app: &'a App,
    w: &'a WorkloadRow,
    selected: bool,
    widths: &[usize],
    (names, pools, tenants): (&[&str], &[&str], &[&str]),
) -> Row<'a> {
    let t = &app.config.theme;
    let a = w.last_attempt();
    let mut state = state_span(w.rec.state, t);
    if !w.rec.state.is_final() && w.is_fault() {
        state = Span::styled(format!("{} ↻", state.content), t.warn);
    }
    // With a TENANT column, the columns after NAME are one further on.
    let with_tenant = app.derived.tenant_column;
    let pool_w = widths[if with_tenant { 6 } else { 5 }];
    let mut cells = vec![
        Cell::from(marker(selected)),
        Cell::from(w.rec.id.to_string()),
        Cell::from(distinct(&w.rec.name, names, widths[2]).into_owned()),
        Cell::from(state),
        Cell::from(w.rec.attempts.to_string()),
        Cell::from(a.map_or("-".to_string(), |a| distinct(&a.pool, pools, pool_w).into_owned())),
        Cell::from(w.rec.spec.resources.gpus.to_string()),
        Cell::from(age(app.now, w.rec.submitted_at)),
        Cell::from(cost(w)),
    ];
    if with_tenant {
        let tenant = w.rec.tenant.as_deref().map_or_else(
            || "-".to_string(),
            |t| distinct(&sanitize(t), tenants, widths[TENANT]).into_owned(),
        );
        cells.insert(TENANT, Cell::from(tenant));
    }
    Row::new(fit::shown(cells, widths))
}
