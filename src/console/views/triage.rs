//! Triage: failed and retrying workloads grouped by failure class and by
//! node/pool, so one bad node or one bad image stands out; below, the
//! faults themselves with their evidence line. `/` filters them (the
//! groups count what the filter keeps). Node names that do not fit are
//! shortened in the middle, so that nodes stay told apart.

use super::{age, block, constraints, marker, window};
use crate::console::app::{App, View};
use crate::console::fit::{self, Col, distinct};
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
    let inner = |r: Rect| usize::from(r.width.saturating_sub(2));
    let rows = usize::from(groups.height.saturating_sub(2));
    let tops: Vec<&str> =
        by_class.iter().take(rows).filter_map(|g| g.top.as_ref()).map(|t| t.1.as_str()).collect();
    let lines: Vec<Line> = by_class
        .iter()
        .take(rows)
        .map(|g| {
            let head = format!("{:>4} {:<10}", g.count, g.class);
            let top = g.top.as_ref().map_or(String::new(), |(k, node, pool)| {
                let k = format!("{k}× ");
                let room = inner(left).saturating_sub(fit::width(&head) + 1 + fit::width(&k));
                format!("{k}{}", place(node, pool, &tops, room, 0))
            });
            Line::from(vec![Span::styled(head, t.bad), Span::styled(format!(" {top}"), t.dim)])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).block(block("by failure class".into(), t)), left);
    let shown_nodes: Vec<&str> = by_node.iter().take(rows).map(|g| g.node.as_str()).collect();
    // After the classes: how long ago the newest fault was and when the
    // node's history clears ("2m ago, clears 23h").
    let now = app.now;
    let detail = |g: &crate::console::app::NodeGroup| {
        let mut d = g.classes.clone();
        if let Some(at) = g.newest {
            d.push_str(&format!(" {} ago", age(now, at)));
        }
        if let Some(c) = g.clears {
            d.push_str(&format!(", clears {}", age(c, now)));
        }
        d
    };
    let details: Vec<String> = by_node.iter().take(rows).map(detail).collect();
    // Nodes that must be cut are cut alike: to what the widest details leave.
    let classes_w = details.iter().map(|d| fit::width(d)).max().unwrap_or(0);
    let lines: Vec<Line> = by_node
        .iter()
        .take(rows)
        .zip(&details)
        .map(|(g, d)| {
            let head = format!("{:>4} ", g.count);
            let room = inner(right).saturating_sub(head.len());
            let after = if fit::width(&g.node) + 1 + fit::width(d) <= room {
                1 + fit::width(d)
            } else {
                1 + classes_w
            };
            let node = place(&g.node, &g.pool, &shown_nodes, room, after);
            let rest = room.saturating_sub(fit::width(&node) + 1);
            Line::from(vec![
                Span::styled(head, t.bad),
                Span::raw(node),
                Span::styled(format!(" {}", fit::end(d, rest)), t.dim),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(lines).block(block("by node (pool)".into(), t)), right);

    let sel = app.sel(View::Triage);
    let height = usize::from(list.height.saturating_sub(3));
    let start = window(sel, height);
    let visible: Vec<_> = ids
        .iter()
        .enumerate()
        .skip(start)
        .take(height)
        .filter_map(|(i, id)| {
            let w = app.model.workloads.get(id)?;
            Some((i, w, w.attempts.iter().rev().find(|a| a.class.is_some())))
        })
        .collect();
    // Ids as wide as the newest workload's.
    let id_w = app.model.workloads.keys().next_back().map_or(0, |id| fit::width(&id.to_string()));
    let class = |w: &crate::console::model::WorkloadRow| w.fault_class().map_or("?", FailureClass::as_str);
    let evidence = |a: Option<&crate::engine::model::AttemptRecord>| {
        a.and_then(|a| a.evidence.as_deref()).unwrap_or("").to_string()
    };
    let cols = [
        Col::fixed(1),
        Col::fixed(id_w.max(2)),
        Col::fixed(visible.iter().map(|(_, w, _)| fit::width(class(w))).max().unwrap_or(0).max(7)),
        // As wide as `launching ↻`.
        Col::fixed(11),
        Col::shrink(app.derived.fault_widths.node.max(4), 18, 10),
        Col::shrink(
            visible.iter().map(|(_, _, a)| fit::width_upto(&evidence(*a), 200)).max().unwrap_or(0),
            12,
            8,
        )
        .slack(),
    ];
    let w = fit::widths(&cols, inner(list), 1);
    let shown_nodes: Vec<&str> = visible.iter().filter_map(|(_, _, a)| a.map(|a| a.node.as_str())).collect();
    let rows = visible.iter().map(|&(i, wl, a)| {
        let cells = [
            Cell::from(marker(i == sel)),
            Cell::from(wl.rec.id.to_string()),
            Cell::from(Span::styled(class(wl), t.bad)),
            Cell::from(if wl.rec.state.is_final() {
                wl.rec.state.to_string()
            } else {
                format!("{} ↻", wl.rec.state)
            }),
            Cell::from(a.map_or("-".into(), |a| distinct(&a.node, &shown_nodes, w[4]).into_owned())),
            Cell::from(fit::end(&evidence(a), w[5]).into_owned()),
        ];
        let r = Row::new(fit::shown(cells, &w));
        if i == sel { r.style(t.selected) } else { r }
    });
    let header: Vec<String> = ["", "ID", "CLASS", "STATE", "NODE", "EVIDENCE"]
        .iter()
        .zip(&w)
        .map(|(h, w)| fit::end(h, *w).into_owned())
        .collect();
    let flt = app.filter_text.get(&View::Triage).filter(|s| !s.is_empty());
    let title = match flt {
        Some(flt) => {
            format!("faults {}/{} /{flt} — esc clears the filter", ids.len(), app.derived.faults_total)
        }
        None => format!("faults {} — l logs at evidence, r retry, a ack, c cordon, d drain", ids.len()),
    };
    if ids.is_empty() && flt.is_some() {
        let p = Paragraph::new(Span::styled("no fault matches the filter (esc clears it)", t.dim));
        f.render_widget(p.block(block(title, t)), list);
        return;
    }
    let table = Table::new(rows.collect::<Vec<_>>(), constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(title, t));
    f.render_widget(table, list);
}

/// A node and its pool in `room` columns, leaving `after` for what
/// follows: `node (pool)`, else the node alone, else the node shortened in
/// the middle, told apart from the others `among` (keeping up to 20
/// columns of it before what follows).
fn place(node: &str, pool: &str, among: &[&str], room: usize, after: usize) -> String {
    let (nw, pw) = (fit::width(node), fit::width(pool));
    if !pool.is_empty() && nw + 3 + pw + after <= room {
        return format!("{node} ({pool})");
    }
    if nw + after <= room {
        return node.to_string();
    }
    distinct(node, among, room.saturating_sub(after).max(nw.min(20)).min(room)).into_owned()
}
