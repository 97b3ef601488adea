//! Overview: the card's three questions on one screen, under what is
//! broken first (unreachable providers, quarantined and down nodes,
//! blocked, failed and retrying workloads; each line selectable, Enter
//! opens it): the capacity per provider (free of total GPUs, whether it
//! answers), the nodes with the lowest health scores, and what runs. The
//! newest events fill what room is left.

use super::{age, block, constraints, marker};
use crate::console::app::{App, View};
use crate::console::derive::{Broken, overview_events};
use crate::console::fit::{self, Col, distinct};
use crate::fleet::NodeState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table};

/// From this many rows for running work and events together, each gets
/// at least half.
const EVENTS_FROM: u16 = 14;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let o = &app.derived.overview;
    let broken_h = (o.broken.len().max(1) as u16 + 2).min((area.height / 3).max(3));
    let side_h = (o.providers.len().max(o.weakest.len().min(o.providers.len())).max(1) as u16 + 2)
        .min((area.height.saturating_sub(broken_h) / 2).max(3));
    let [a, b, rest] =
        Layout::vertical([Constraint::Length(broken_h), Constraint::Length(side_h), Constraint::Min(3)])
            .areas(area);
    broken(f, app, a);
    let [cap, weak] = Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(b);
    capacity(f, app, cap);
    weakest(f, app, weak);
    // Running work as tall as it needs (a header row, or one line saying
    // nothing runs); events get the rest when that is a few lines.
    let run_want = if o.running.is_empty() { 3 } else { o.running.len() as u16 + 3 };
    let run_h = if rest.height >= EVENTS_FROM {
        Some(run_want.min(rest.height / 2))
    } else {
        (rest.height >= run_want + 5).then_some(run_want)
    };
    match run_h {
        Some(h) => {
            let [r, e] = Layout::vertical([Constraint::Length(h), Constraint::Min(3)]).areas(rest);
            running(f, app, r);
            events(f, app, e);
        }
        None => running(f, app, rest),
    }
}

/// "Broken first": one line per kind of trouble, the selected one marked.
fn broken(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let items = &app.derived.overview.broken;
    let mut lines: Vec<Line> = Vec::new();
    let sel = app.sel(View::Overview).min(items.len().saturating_sub(1));
    let height = usize::from(area.height.saturating_sub(2));
    let start = super::window(sel, height);
    for (i, item) in items.iter().enumerate().skip(start).take(height) {
        let (sym, style, text) = broken_line(item, t);
        let selected = i == sel;
        let mut spans =
            vec![Span::raw(format!("{} ", marker(selected))), Span::styled(format!("{sym} "), style)];
        spans.push(Span::styled(text, if selected { t.selected } else { style }));
        lines.push(Line::from(spans));
    }
    if lines.is_empty() {
        lines.push(Line::from(Span::styled("  ✓ nothing is broken", t.ok)));
    }
    let title = if items.is_empty() { "broken first" } else { "broken first (enter opens)" };
    f.render_widget(Paragraph::new(lines).block(block(title.into(), t)), area);
}

/// A "broken first" item's symbol, style and words.
fn broken_line(item: &Broken, t: &crate::console::theme::Theme) -> (&'static str, Style, String) {
    let names = |n: &[String]| {
        let shown: Vec<&str> = n.iter().take(4).map(String::as_str).collect();
        let more = if n.len() > 4 { format!(" +{}", n.len() - 4) } else { String::new() };
        format!("{}{more}", shown.join(" "))
    };
    match item {
        Broken::Unreachable { provider, error } => {
            ("✗", t.bad, format!("provider {provider} unreachable: {}", crate::text::sanitize(error)))
        }
        Broken::Quarantined(n) => ("⚠", t.bad, format!("{} quarantined: {}", n.len(), names(n))),
        Broken::Down(n) => ("✗", t.bad, format!("{} down: {}", plural(n.len(), "node", "nodes"), names(n))),
        Broken::Blocked(k) => {
            ("…", t.warn, format!("{} blocked: nothing fits them", plural(*k, "workload", "workloads")))
        }
        Broken::Failed(k) => ("✗", t.bad, format!("{} failed", plural(*k, "workload", "workloads"))),
        Broken::Retrying(k) => {
            ("↻", t.warn, format!("{} failed and waiting to retry", plural(*k, "workload", "workloads")))
        }
    }
}

/// Free of total GPUs per provider, and whether it answers.
fn capacity(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let o = &app.derived.overview;
    if app.model.status.is_none() {
        let p = Paragraph::new(Span::styled("waiting for the engine's first fleet status…", t.dim));
        f.render_widget(p.block(block("capacity".into(), t)), area);
        return;
    }
    let (total, free, mine) = o.gpus;
    let room = usize::from(area.width.saturating_sub(2));
    let title = [
        format!("capacity: {free}/{total} GPUs free, {mine} Canopy's"),
        format!("capacity {free}/{total} free, {mine} Canopy's"),
        format!("GPUs {free}/{total} free, {mine} Canopy's"),
    ]
    .into_iter()
    .find(|s| fit::width(s) <= room)
    .unwrap_or_else(|| format!("GPUs {free}/{total} free"));
    let nums: Vec<String> = o.providers.iter().map(|p| format!("{}/{}", p.free, p.total)).collect();
    let reach: Vec<(String, Style)> = o
        .providers
        .iter()
        .map(|p| match &p.unreachable {
            None => ("✓ answers".to_string(), t.ok),
            Some((since, _)) => {
                let ago = since.map(|s| format!(" {}", age(app.now, s))).unwrap_or_default();
                (format!("✗ unreachable{ago}"), t.bad)
            }
        })
        .collect();
    let widest = |v: &mut dyn Iterator<Item = usize>| v.max().unwrap_or(0);
    let name_w = widest(&mut o.providers.iter().map(|p| fit::width(&p.name)));

    let reach_w = widest(&mut reach.iter().map(|(s, _)| fit::width(s)));
    // The word `free` goes first when narrow (the title says it).
    let cols = [
        Col::shrink(name_w, 12, 6),
        Col::fixed(widest(&mut nums.iter().map(|s| fit::width(s)))),
        Col::fixed(4).optional(),
        Col::shrink(reach_w, reach_w, 1).slack(),
    ];
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    let names: Vec<&str> = o.providers.iter().map(|p| p.name.as_str()).collect();
    let rows = o.providers.iter().zip(nums).zip(reach).map(|((p, n), (r, style))| {
        let cells = [
            Cell::from(distinct(&p.name, &names, w[0]).into_owned()),
            Cell::from(Line::from(format!("{n:>width$}", width = w[1]))),
            Cell::from(Span::styled("free", t.dim)),
            Cell::from(Span::styled(fit::end(&r, w[3]).into_owned(), style)),
        ];
        Row::new(fit::shown(cells, &w))
    });
    let table =
        Table::new(rows.collect::<Vec<_>>(), constraints(&w)).column_spacing(1).block(block(title, t));
    f.render_widget(table, area);
}

/// The nodes with the lowest health scores.
fn weakest(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let o = &app.derived.overview;
    let title = "lowest health".to_string();
    if o.weakest.is_empty() {
        let text = if app.model.status.is_some() { "every node at full health (1.00)" } else { "" };
        f.render_widget(Paragraph::new(Span::styled(text, t.dim)).block(block(title, t)), area);
        return;
    }
    let height = usize::from(area.height.saturating_sub(2));
    let shown = &o.weakest[..o.weakest.len().min(height)];
    let states: Vec<(&str, &str, Style)> = shown
        .iter()
        .map(|n| match (n.quarantined, n.state) {
            (true, _) => ("⚠", "quarantined", t.bad),
            (_, NodeState::Down) => ("✗", "down", t.bad),
            (_, NodeState::Ready) => ("✓", "ready", t.ok),
            (_, NodeState::Cordoned) => ("‖", "cordoned", t.warn),
            (_, NodeState::Draining) => ("‖", "draining", t.warn),
        })
        .collect();
    // Score, state symbol, the whole name, then the state's word (cut
    // first when narrow).
    let name_w = shown.iter().map(|n| fit::width(&n.name)).max().unwrap_or(0);
    let word_w = states.iter().map(|s| fit::width(s.1)).max().unwrap_or(0);
    let cols =
        [Col::fixed(4), Col::fixed(1), Col::shrink(name_w, name_w, 6), Col::shrink(word_w, 4, 1).slack()];
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    let names: Vec<&str> = shown.iter().map(|n| n.name.as_str()).collect();
    let rows = shown.iter().zip(states).map(|(n, (sym, word, style))| {
        let cells = [
            Cell::from(Span::styled(format!("{:.2}", n.score), if n.score < 0.5 { t.bad } else { t.text })),
            Cell::from(Span::styled(sym, style)),
            Cell::from(distinct(&n.name, &names, w[2]).into_owned()),
            Cell::from(Span::styled(fit::end(word, w[3]).into_owned(), style)),
        ];
        Row::new(fit::shown(cells, &w))
    });
    let more = o.weakest.len().saturating_sub(shown.len());
    let title = if more > 0 { format!("{title} +{more} (3 nodes)") } else { title };
    let table =
        Table::new(rows.collect::<Vec<_>>(), constraints(&w)).column_spacing(1).block(block(title, t));
    f.render_widget(table, area);
}

/// What runs: id, name, pool, node, GPUs and for how long; the title
/// counts workloads by state.
fn running(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let o = &app.derived.overview;
    let c = &o.counts;
    let title = format!(
        "{} running · {} queued · {} starting · {} succeeded · {} failed · {} cancelled",
        c.running, c.queued, c.starting, c.succeeded, c.failed, c.cancelled
    );
    let height = usize::from(area.height.saturating_sub(3));
    if o.running.is_empty() {
        let p = Paragraph::new(Span::styled("nothing is running", t.dim));
        f.render_widget(p.block(block(title, t)), area);
        return;
    }
    let visible: Vec<_> =
        o.running.iter().take(height).filter_map(|id| app.model.workloads.get(id)).collect();
    let cells: Vec<[String; 6]> = visible
        .iter()
        .map(|w| {
            let a = w.last_attempt();
            [
                w.rec.id.to_string(),
                w.rec.name.clone(),
                a.map_or("-".into(), |a| a.pool.clone()),
                a.map_or("-".into(), |a| a.node.clone()),
                w.rec.spec.resources.gpus.to_string(),
                a.and_then(|a| a.started_at).map_or("-".into(), |s| age(app.now, s)),
            ]
        })
        .collect();
    const HEADERS: [&str; 6] = ["ID", "NAME", "POOL", "NODE", "GPU", "UP"];
    let want = |k: usize| cells.iter().map(|c| fit::width(&c[k])).max().unwrap_or(0).max(HEADERS[k].len());
    let cols = [
        Col::fixed(want(0)),
        Col::shrink(want(1), 14, 6),
        Col::shrink(want(2), 16, 6).optional(),
        Col::shrink(want(3), 12, 6),
        Col::fixed(want(4)),
        Col::fixed(want(5)),
    ];
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    let col = |k: usize| -> Vec<&str> { cells.iter().map(|c| c[k].as_str()).collect() };
    let (names, pools, nodes) = (col(1), col(2), col(3));
    let rows = cells.iter().map(|c| {
        let cells = [
            Cell::from(c[0].clone()),
            Cell::from(distinct(&c[1], &names, w[1]).into_owned()),
            Cell::from(distinct(&c[2], &pools, w[2]).into_owned()),
            Cell::from(distinct(&c[3], &nodes, w[3]).into_owned()),
            Cell::from(c[4].clone()),
            Cell::from(c[5].clone()),
        ];
        Row::new(fit::shown(cells, &w))
    });
    let header: Vec<String> = HEADERS.iter().zip(&w).map(|(h, w)| fit::end(h, *w).into_owned()).collect();
    let table = Table::new(rows.collect::<Vec<_>>(), constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t));
    f.render_widget(table, area);
}

/// The newest events, each outcome once.
fn events(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let n = usize::from(area.height.saturating_sub(2));
    let lines: Vec<Line> = overview_events(&app.model.events, n)
        .into_iter()
        .map(|e| {
            Line::from(vec![
                Span::styled(format!("{:>4} ", age(app.now, e.at)), t.dim),
                Span::styled(format!("{:<6} ", e.workload.to_string()), t.accent),
                Span::styled(format!("{:<13} ", e.kind.as_str()), t.text),
                Span::raw(crate::text::sanitize(&e.message).into_owned()),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).block(block("recent events".into(), t)), area);
}

/// `1 node`, `2 nodes`.
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
