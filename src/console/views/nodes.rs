//! Nodes: health score with its history, state (ready, cordoned, draining,
//! quarantined, down), its infrastructure faults (FAILURES) apart from
//! what else ended work there (OTHER), GPUs in use and what runs
//! there; under the table, who holds the selected node and why. Names and
//! pools that do not fit are shortened in the middle (nodes differ at
//! their end); the history goes before they shrink past comfortable.
//! Draws only the visible window.

use super::{block, constraints, marker, spark, window};
use crate::console::app::{App, View};
use crate::console::fit::{self, Col, distinct};
use crate::fleet::NodeState;
use crate::health::tracker::is_node_fault;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let Some(status) = &app.model.status else {
        f.render_widget(
            Paragraph::new("waiting for the engine's first fleet status…").block(block("nodes".into(), t)),
            area,
        );
        return;
    };
    let fleet = &status.fleet;
    let sel = app.sel(View::Nodes);
    // An operator's hold on the selected node: who, when, why, until.
    let hold = app.derived.nodes.get(sel).and_then(|&ni| status.intents.get(&fleet.nodes[ni as usize].name));
    let area = match hold {
        Some(i) => {
            let [table, line] = Layout::vertical([Constraint::Min(3), Constraint::Length(1)]).areas(area);
            let off = app.config.utc_offset_s;
            let until = i
                .until
                .map(|u| format!(" until {}", crate::console::logs::clock(u, off)))
                .unwrap_or_default();
            let why = i.reason.as_deref().map(|r| format!(": {}", sanitize(r))).unwrap_or_default();
            let text = format!(
                " {} {} by {} at {}{until}{why}",
                i.node,
                i.state,
                sanitize(&i.by),
                crate::console::logs::clock(i.at, off)
            );
            f.render_widget(Paragraph::new(Span::styled(text, t.warn)), line);
            table
        }
        None => area,
    };
    let height = usize::from(area.height.saturating_sub(3));
    let ids = &app.derived.nodes;
    let start = window(sel, height);
    struct Cells {
        state: (String, Style),
        health: f64,
        gpus: String,
        classes: String,
        other: String,
        running: String,
    }
    let visible: Vec<(usize, &crate::fleet::Node, Cells)> = ids
        .iter()
        .enumerate()
        .skip(start)
        .take(height)
        .map(|(i, &ni)| {
            let n = &fleet.nodes[ni as usize];
            let h = status.health.node(&n.name);
            let state = match (h.quarantined, n.state) {
                (true, _) => ("⚠ quarantined".to_string(), t.bad),
                (_, NodeState::Ready) => ("✓ ready".to_string(), t.ok),
                (_, NodeState::Down) => ("✗ down".to_string(), t.bad),
                (_, s) => (format!("‖ {s}"), t.warn),
            };
            // FAILURES: the node's own infrastructure faults (node, comm,
            // io), as the engine's health keeps them (24 h, newest first);
            // OTHER: what else ended work there (the workloads' own
            // errors, the provider's), which says nothing against it.
            let classes = status.health.faults.get(&n.name).map_or(String::new(), |q| {
                q.iter().rev().take(5).map(|f| f.class.as_str()).collect::<Vec<_>>().join(",")
            });
            let other = app.model.node_classes.get(&n.name).map_or(String::new(), |q| {
                q.iter()
                    .rev()
                    .filter(|c| !is_node_fault(**c))
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            });
            let running = app.derived.by_node.get(&n.name).map_or(String::new(), |w| {
                let names: Vec<String> = w.iter().take(3).map(|id| id.to_string()).collect();
                if w.len() > 3 { format!("{} +{}", names.join(" "), w.len() - 3) } else { names.join(" ") }
            });
            let gpus = format!("{}/{}", n.canopy_gpus, fleet.pool(n.pool).shape.gpus_per_node);
            (i, n, Cells { state, health: h.score, gpus, classes, other, running })
        })
        .collect();
    let widest =
        |f: &dyn Fn(&Cells) -> &str| visible.iter().map(|(_, _, c)| fit::width(f(c))).max().unwrap_or(0);
    let names = &app.derived.node_widths;
    let mut cols = vec![
        Col::fixed(1),
        Col::shrink(names.name.max(4), 20, 10),
        Col::shrink(names.pool.max(4), 12, 6),
        // As wide as `⚠ quarantined`, so that it does not move.
        Col::fixed(13),
        Col::fixed(6),
        Col::fixed(8).optional(),
        Col::fixed(widest(&|c| &c.gpus).max(3)),
        Col::shrink(widest(&|c| &c.classes).max(8), 8, 4),
        Col::shrink(widest(&|c| &c.other).max(5), 5, 3).optional(),
        Col::shrink(widest(&|c| &c.running).max(7), 7, 4).slack(),
    ];
    // OTHER only takes room when a node shown has something in it.
    let other = visible.iter().any(|(_, _, c)| !c.other.is_empty());
    if !other {
        cols.remove(8);
    }
    let mut w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    if !other {
        w.insert(8, 0);
    }
    // Names on screen stay told apart from each other.
    let labels: Vec<String> = visible.iter().map(|(_, n, _)| fleet.pool_label(n.pool)).collect();
    let shown_names: Vec<&str> = visible.iter().map(|(_, n, _)| n.name.as_str()).collect();
    let shown_pools: Vec<&str> = labels.iter().map(String::as_str).collect();
    let rows = visible.into_iter().zip(&labels).map(|((i, n, c), label)| {
        let hist =
            app.model.health_history.get(&n.name).map_or(String::new(), |q| spark(q.iter().copied(), w[5]));
        let cells = [
            Cell::from(marker(i == sel)),
            Cell::from(distinct(&n.name, &shown_names, w[1]).into_owned()),
            Cell::from(distinct(label, &shown_pools, w[2]).into_owned()),
            Cell::from(Span::styled(c.state.0, c.state.1)),
            Cell::from(Span::styled(format!("{:.2}", c.health), if c.health < 0.5 { t.bad } else { t.text })),
            Cell::from(hist),
            Cell::from(c.gpus),
            Cell::from(Span::styled(fit::end(&c.classes, w[7]).into_owned(), t.bad)),
            Cell::from(Span::styled(fit::end(&c.other, w[8]).into_owned(), t.dim)),
            Cell::from(fit::end(&c.running, w[9]).into_owned()),
        ];
        let r = Row::new(fit::shown(cells, &w));
        if i == sel { r.style(t.selected) } else { r }
    });
    let header: Vec<String> =
        ["", "NODE", "POOL", "STATE", "HEALTH", "HISTORY", "GPU", "FAILURES", "OTHER", "RUNNING"]
            .iter()
            .zip(&w)
            .map(|(h, w)| fit::end(h, *w).into_owned())
            .collect();
    let mut title = format!("nodes {}/{}", ids.len(), fleet.nodes.len());
    if let Some(flt) = app.filter_text.get(&View::Nodes).filter(|s| !s.is_empty()) {
        title.push_str(&format!(" /{flt}"));
    }
    let table = Table::new(rows.collect::<Vec<_>>(), constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t));
    f.render_widget(table, area);
}
