//! Usage: the ledger as `canopy usage` reports it, over the last 14 UTC
//! days. Top, a bar chart of the selected group's GPU-hours held per day;
//! middle, the table by the grouping `b` cycles (tenant, owner, provider,
//! pool, accelerator, user), in `canopy usage`'s columns and cells
//! ([`crate::usage::report::table_cells`]), the total last; bottom, the
//! selected row's waste split: useful, the infrastructure's fault, the
//! workload's own, decisions, idle and live, with the lost GPU-hours by
//! class and, for an owner, what it lent. Group names are an admin's or a
//! user's choice: drawn sanitized.

use super::{block, marker, window};
use crate::console::app::{App, Load};
use crate::console::fit::{self, Col};
use crate::console::usage::split;
use crate::providers::sim::signature::iso_utc;
use crate::text::sanitize;
use crate::usage::report::{self, Line as UsageLine, Report, TABLE_COLUMNS, hours, usd};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Bar, BarChart, BarGroup, Cell, Paragraph, Row, Table, Wrap};

/// The chart's least height: four rows of bars and their day labels.
const CHART_MIN: u16 = 6;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let u = &app.usage;
    let Some(r) = u.report.as_ref() else {
        let line = match &u.poll.load {
            Load::Failed(e) => {
                let again = if app.replay.is_none() { "; 9 (or :usage) tries again" } else { "" };
                Line::from(Span::styled(format!("✗ cannot load the usage: {}{again}", sanitize(e)), t.bad))
            }
            _ => Line::from(Span::styled("loading the usage…", t.dim)),
        };
        let p = Paragraph::new(vec![line]).wrap(Wrap { trim: false }).block(block("usage".into(), t));
        f.render_widget(p, area);
        return;
    };
    let Some((line, name)) = u.selected() else { return };
    // The split's six columns, the classes lost to, and an owner's line;
    // the table's rows (the total's too) under its header; the chart
    // takes the rest, at least [`CHART_MIN`] rows.
    let extra = u16::from(!line.lost_by_class_gpu_ms.is_empty())
        + u16::from(r.owners.iter().any(|o| o.owner == line.key));
    let pane_h = 8 + extra;
    let rows = u16::try_from(r.groups.len() + 1).unwrap_or(u16::MAX);
    let table_h = rows.saturating_add(3).min(area.height.saturating_sub(pane_h + CHART_MIN)).max(5);
    let [chart, table_area, pane] = Layout::vertical([
        Constraint::Min(CHART_MIN),
        Constraint::Length(table_h),
        Constraint::Length(pane_h),
    ])
    .areas(area);
    f.render_widget(bars(app, name, chart), chart);
    let mut title = format!("usage by {} · {} groups", r.by.as_str(), r.groups.len());
    if u.by != r.by {
        title.push_str(&format!(" · loading by {}…", u.by.as_str()));
    }
    if let Load::Failed(e) = &u.poll.load {
        title.push_str(&format!(" · stale: {}", sanitize(e)));
    }
    f.render_widget(table(app, r, table_area, title), table_area);
    f.render_widget(waste(app, r, line, name), pane);
}

/// The selected row's GPU-hours held per UTC day, a bar per day labelled
/// with its day of the month.
fn bars<'a>(app: &'a App, name: &str, area: Rect) -> BarChart<'a> {
    let t = &app.config.theme;
    let days = app.usage.per_day();
    let n = days.len().max(1) as u16;
    let inner = area.width.saturating_sub(2);
    let width = (inner.saturating_sub(n - 1) / n).clamp(1, 8);
    let span = match (days.first(), days.last()) {
        (Some(a), Some(b)) => format!(" · {} to {}", &iso_utc(a.0)[5..10], &iso_utc(b.0)[5..10]),
        _ => String::new(),
    };
    let bars: Vec<Bar> = days
        .iter()
        .map(|(day, ms)| {
            let h = *ms as f64 / 3_600_000.0;
            let text = if *ms == 0 {
                String::new()
            } else if h < 10.0 {
                format!("{h:.1}")
            } else {
                format!("{h:.0}")
            };
            Bar::default()
                .value(ms / 36_000)
                .text_value(text)
                .label(Line::from(iso_utc(*day)[8..10].to_string()))
        })
        .collect();
    let title = format!("GPU-hours held per day (UTC), {}{span}", sanitize(name));
    BarChart::default()
        .block(block(title, t))
        .data(BarGroup::default().bars(&bars))
        .bar_width(width)
        .bar_gap(1)
        .bar_style(t.accent)
        .value_style(t.selected)
}

fn table<'a>(app: &'a App, r: &Report, area: Rect, title: String) -> Table<'a> {
    let t = &app.config.theme;
    let sel = app.usage.sel.min(r.groups.len());
    let lines: Vec<(String, &UsageLine)> = r
        .groups
        .iter()
        .map(|g| (sanitize(&g.key).into_owned(), g))
        .chain(std::iter::once(("TOTAL".to_string(), &r.total)))
        .collect();
    let all: Vec<Vec<String>> = lines
        .iter()
        .map(|(k, l)| std::iter::once(k.clone()).chain(report::table_cells(l)).collect())
        .collect();
    let by = r.by.as_str().to_uppercase();
    let headers: Vec<&str> = std::iter::once(by.as_str()).chain(TABLE_COLUMNS).collect();
    let widest =
        |i: usize| all.iter().map(|c| fit::width(&c[i])).max().unwrap_or(0).max(fit::width(headers[i]));
    let mut cols = vec![Col::fixed(1), Col::shrink(widest(0), 10, 5)];
    for (i, h) in headers.iter().enumerate().skip(1) {
        // Live and attempts make way on a narrow screen; the split below
        // says live GPU-hours.
        let c = Col::fixed(widest(i));
        cols.push(if matches!(*h, "LIVE" | "ATTEMPTS") { c.optional() } else { c });
    }
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    let height = usize::from(area.height.saturating_sub(3));
    let start = window(sel, height);
    let body = all.iter().enumerate().skip(start).take(height).map(|(n, c)| {
        let mut out = vec![Cell::from(marker(n == sel))];
        for (i, text) in c.iter().enumerate() {
            out.push(Cell::from(fit::end(text, w[i + 1]).into_owned()));
        }
        let row = Row::new(fit::shown(out, &w));
        if n == sel {
            row.style(t.selected)
        } else if n == lines.len() - 1 {
            row.style(t.header)
        } else {
            row
        }
    });
    let mut header = vec![String::new()];
    header.extend(headers.iter().enumerate().map(|(i, h)| fit::end(h, w[i + 1]).into_owned()));
    Table::new(body.collect::<Vec<_>>(), super::constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t))
}

/// The selected row's split, in `canopy usage`'s column names: GPU-hours
/// and share of what it held, and what the column means; then the lost
/// GPU-hours by class, and for an owner what its pools lent.
fn waste(app: &App, r: &Report, l: &UsageLine, name: &str) -> Paragraph<'static> {
    let t = &app.config.theme;
    let held = l.gpu_ms;
    let mut lines: Vec<Line> = split(l)
        .into_iter()
        .map(|(col, ms, means)| {
            let pct = if held == 0 { 0.0 } else { 100.0 * ms as f64 / held as f64 };
            let style = match col {
                "LOST:INFRA" | "LOST:OWN" if ms > 0 => t.warn,
                _ => ratatui::style::Style::default(),
            };
            Line::from(vec![
                Span::styled(format!("{col:<10} {:>9} GPU-h {pct:>5.1}%  ", hours(ms)), style),
                Span::styled(means, t.dim),
            ])
        })
        .collect();
    let lost = report::lost_by_class(l);
    if !lost.is_empty() {
        lines.push(Line::from(format!("lost GPU-hours by class: {lost}")));
    }
    if let Some(o) = r.owners.iter().find(|o| o.owner == l.key) {
        let secs = |ms: Option<i64>| ms.map_or("-".to_string(), |m| format!("{:.0}s", m as f64 / 1000.0));
        lines.push(Line::from(format!(
            "as an owner: lent {} GPU-h, earned {}, {} reclaims (worst {}, promise {}, {} late)",
            hours(o.lent_gpu_ms),
            usd(o.earned_micro_usd),
            o.reclaims,
            secs(o.worst_reclaim_ms),
            secs(o.promise_ms),
            o.late_reclaims
        )));
    }
    let title = format!("waste: {}, {} GPU-h held, {}", sanitize(name), hours(held), usd(l.cost_micro_usd));
    Paragraph::new(lines).block(block(title, t))
}
