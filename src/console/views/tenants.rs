//! Tenants: one row per tenant and flavor — its cohort and weight, the
//! unit its numbers are in (GPUs, or CPU cores for a CPU-only flavor), its
//! nominal quota, what it uses, what of that it borrowed, what of its idle
//! quota others use (lent), its waiting workloads and its reclaims in
//! flight as an owner. The pane below says what binds the selected row:
//! with fair share, where its tenant stands in the serving order; its use
//! against its limits and why its oldest waiting workload waits; its
//! budgets, spent of limit this period.
//! Without tenants, one line says how to configure them. Tenant, flavor
//! and cohort names are an admin's choice: drawn sanitized.

use super::{block, marker, window};
use crate::console::app::{App, Load, View};
use crate::console::fit::{self, Col};
use crate::console::logs::clock;
use crate::console::tenants::{TenantRow, binds, num};
use crate::tenant::Resource;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};

/// The pane with the selected row needs this much height.
const DETAIL_FROM_HEIGHT: u16 = 14;
/// What the view says without tenants.
pub const NONE_CONFIGURED: &str = "no tenants are configured: everyone shares the fleet without quotas \
     (configure them with [[tenant]] and [[flavor]] tables in canopy.toml, or canopy tenants apply FILE)";

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let say = |f: &mut Frame, lines: Vec<Line<'static>>| {
        let p = Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("tenants".into(), t));
        f.render_widget(p, area);
    };
    let Some(v) = app.tenants.view.as_ref() else {
        let line = match &app.tenants.poll.load {
            Load::Failed(e) => {
                let again = if app.replay.is_none() { "; 8 (or :tenants) tries again" } else { "" };
                Line::from(Span::styled(format!("✗ cannot load the tenants: {}{again}", sanitize(e)), t.bad))
            }
            _ => Line::from(Span::styled("loading the tenants…", t.dim)),
        };
        say(f, vec![line]);
        return;
    };
    if !v.configured {
        say(f, vec![Line::from(Span::styled(NONE_CONFIGURED, t.dim))]);
        return;
    }
    let rows = &app.tenants.rows;
    let mut title = format!("tenants {} rows", rows.len());
    if let Some(by) = &v.set_by {
        title.push_str(&format!(" · set by {}", sanitize(by)));
        if let Some(at) = v.set_at {
            title.push_str(&format!(" at {}", clock(at, app.config.utc_offset_s)));
        }
    }
    if let Load::Failed(e) = &app.tenants.poll.load {
        title.push_str(&format!(" · stale: {}", sanitize(e)));
    }
    if rows.is_empty() {
        say(f, vec![Line::from(Span::styled("tenants are configured, but none has a row yet", t.dim))]);
        return;
    }
    let (list, detail) = if area.height >= DETAIL_FROM_HEIGHT {
        let [l, d] = Layout::vertical([Constraint::Min(5), Constraint::Length(6)]).areas(area);
        (l, Some(d))
    } else {
        (area, None)
    };
    let sel = app.sel(View::Tenants).min(rows.len() - 1);
    f.render_widget(table(app, rows, sel, list, title), list);
    if let Some(d) = detail {
        f.render_widget(selected(app, &rows[sel], v.default_tenant.as_deref()), d);
    }
}

/// TENANT, FLAVOR, COHORT, WT, UNIT, QUOTA, IN USE, BORROWED, LENT,
/// WAITING, RECLAIMS.
const HEADERS: [&str; 11] = [
    "TENANT", "FLAVOR", "COHORT", "WT", "UNIT", "QUOTA", "IN USE", "BORROWED", "LENT", "WAITING", "RECLAIMS",
];

/// A row's cells as text: names sanitized, numbers in the row's unit
/// (`-` for none).
fn cells(r: &TenantRow) -> [String; 11] {
    let u = &r.usage;
    let res = r.resource();
    let of = |a: &crate::tenant::Amount| match res {
        Resource::Gpus => a.gpus,
        Resource::Cpu => a.cpu_milli,
    };
    let dash = |n: u64| if n == 0 { "-".to_string() } else { num(res, n) };
    [
        sanitize(&u.tenant).into_owned(),
        if u.flavor.is_empty() { "-".into() } else { sanitize(&u.flavor).into_owned() },
        u.cohort.as_deref().map_or("-".into(), |c| sanitize(c).into_owned()),
        u.weight.to_string(),
        match res {
            Resource::Gpus => "GPU".into(),
            Resource::Cpu => "CPU".into(),
        },
        u.limits.get(res).map_or("-".into(), |l| num(res, l.nominal)),
        num(res, of(&u.in_use)),
        dash(of(&u.borrowed)),
        dash(of(&r.lent)),
        if u.waiting == 0 { "-".into() } else { u.waiting.to_string() },
        if r.reclaims == 0 { "-".into() } else { r.reclaims.to_string() },
    ]
}

fn table<'a>(app: &'a App, rows: &[TenantRow], sel: usize, area: Rect, title: String) -> Table<'a> {
    let t = &app.config.theme;
    let all: Vec<[String; 11]> = rows.iter().map(cells).collect();
    let widest = |i: usize| all.iter().map(|c| fit::width(&c[i])).max().unwrap_or(0).max(HEADERS[i].len());
    let mut cols = vec![Col::fixed(1)];
    for i in 0..HEADERS.len() {
        cols.push(match i {
            0 => Col::shrink(widest(i), 10, 6),
            1 | 2 => Col::shrink(widest(i), 8, 5),
            // The weight shows in the pane below when it has no room.
            3 => Col::fixed(widest(i)).optional(),
            _ => Col::fixed(widest(i)),
        });
    }
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    let height = usize::from(area.height.saturating_sub(3));
    let start = window(sel, height);
    let among: Vec<Vec<&str>> =
        (0..3).map(|i| all.iter().skip(start).take(height).map(|c| c[i].as_str()).collect()).collect();
    let body = all.iter().zip(rows).enumerate().skip(start).take(height).map(|(n, (c, r))| {
        let mut out = vec![Cell::from(marker(n == sel))];
        for (i, text) in c.iter().enumerate() {
            let width = w[i + 1];
            let shown = if i < 3 { fit::distinct(text, &among[i], width) } else { fit::end(text, width) };
            let busy = match i {
                7 => !r.usage.borrowed.is_zero(),
                9 => r.usage.waiting > 0,
                10 => r.reclaims > 0,
                _ => false,
            };
            let cell = Cell::from(shown.into_owned());
            out.push(if busy { cell.style(t.warn) } else { cell });
        }
        let row = Row::new(fit::shown(out, &w));
        if n == sel { row.style(t.selected) } else { row }
    });
    let mut header = vec![String::new()];
    header.extend(HEADERS.iter().enumerate().map(|(i, h)| fit::end(h, w[i + 1]).into_owned()));
    Table::new(body.collect::<Vec<_>>(), super::constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t))
}

/// The selected row: who, where, cohort and weight; then what binds it.
fn selected(app: &App, r: &TenantRow, default_tenant: Option<&str>) -> Paragraph<'static> {
    let t = &app.config.theme;
    let u = &r.usage;
    let mut head = vec![Span::styled(sanitize(&u.tenant).into_owned(), t.accent)];
    if !u.flavor.is_empty() {
        head.push(Span::raw(format!(" in {}", sanitize(&u.flavor))));
    }
    let cohort = u.cohort.as_deref().map_or("no cohort".to_string(), |c| format!("cohort {}", sanitize(c)));
    head.push(Span::styled(format!("  {cohort}, weight {}", u.weight), t.dim));
    if default_tenant == Some(u.tenant.as_str()) {
        head.push(Span::styled("  (the default tenant)", t.dim));
    }
    let mut lines = vec![Line::from(head)];
    // With fair share: where the tenant stands in the serving order.
    let standings = app.tenants.view.as_ref().map_or(&[][..], |v| v.fair_share.as_slice());
    if let Some(s) = crate::tenant::fair::standing_text(standings, &u.tenant) {
        lines.push(Line::from(format!("fair share: {}", sanitize(&s))));
    }
    // Its budgets: spent of limit this period, and what they hold.
    let budgets = app.tenants.view.as_ref().map_or(&[][..], |v| v.budgets.as_slice());
    for b in budgets.iter().filter(|b| b.scope == format!("tenant {}", u.tenant)) {
        let holds = if b.holding > 0 { format!("; holds {}", b.holding) } else { String::new() };
        let text = format!(
            "budget {} per {}: {} ({:.0}%){holds}{}",
            b.name,
            b.period.as_str(),
            b.spent_text(),
            b.fraction() * 100.0,
            if b.hard { ", hard" } else { "" }
        );
        let style = if b.fraction() >= 1.0 {
            t.bad
        } else if b.fraction() >= 0.8 {
            t.warn
        } else {
            t.dim
        };
        lines.push(Line::from(Span::styled(sanitize(&text).into_owned(), style)));
    }
    lines.extend(binds(r, &app.model, default_tenant).into_iter().map(Line::from));
    Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("selected".into(), t))
}
