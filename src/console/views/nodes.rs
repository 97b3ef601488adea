//! Nodes: health score with its history, state (ready, cordoned, draining,
//! quarantined, down), recent failure classes, GPUs in use and what runs
//! there; under the table, who holds the selected node and why. Draws only
//! the visible window.

use super::{block, marker, spark, window};
use crate::console::app::{App, View};
use crate::fleet::NodeState;
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
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
    let rows = ids.iter().enumerate().skip(window(sel, height)).take(height).map(|(i, &ni)| {
        let n = &fleet.nodes[ni as usize];
        let h = status.health.node(&n.name);
        let (state, style) = match (h.quarantined, n.state) {
            (true, _) => ("⚠ quarantined".to_string(), t.bad),
            (_, NodeState::Ready) => ("✓ ready".to_string(), t.ok),
            (_, NodeState::Down) => ("✗ down".to_string(), t.bad),
            (_, s) => (format!("‖ {s}"), t.warn),
        };
        let hist =
            app.model.health_history.get(&n.name).map_or(String::new(), |q| spark(q.iter().copied(), 8));
        let classes = app
            .model
            .node_classes
            .get(&n.name)
            .map_or(String::new(), |q| q.iter().rev().map(|c| c.as_str()).collect::<Vec<_>>().join(","));
        let running = app.derived.by_node.get(&n.name).map_or(String::new(), |w| {
            let names: Vec<String> = w.iter().take(3).map(|id| id.to_string()).collect();
            if w.len() > 3 { format!("{} +{}", names.join(" "), w.len() - 3) } else { names.join(" ") }
        });
        let pool = fleet.pool(n.pool);
        let r = Row::new(vec![
            Cell::from(marker(i == sel)),
            Cell::from(n.name.clone()),
            Cell::from(fleet.pool_label(n.pool)),
            Cell::from(Span::styled(state, style)),
            Cell::from(Span::styled(format!("{:.2}", h.score), if h.score < 0.5 { t.bad } else { t.text })),
            Cell::from(hist),
            Cell::from(format!("{}/{}", n.canopy_gpus, pool.shape.gpus_per_node)),
            Cell::from(classes),
            Cell::from(running),
        ]);
        if i == sel { r.style(t.selected) } else { r }
    });
    let header = Row::new(["", "NODE", "POOL", "STATE", "HEALTH", "HISTORY", "GPU", "FAILURES", "RUNNING"])
        .style(t.header);
    let mut title = format!("nodes {}/{}", ids.len(), fleet.nodes.len());
    if let Some(flt) = app.filter_text.get(&View::Nodes).filter(|s| !s.is_empty()) {
        title.push_str(&format!(" /{flt}"));
    }
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Min(12),
            Constraint::Min(12),
            Constraint::Length(13),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(5),
            Constraint::Length(12),
            Constraint::Min(6),
        ],
    )
    .header(header)
    .block(block(title, t));
    f.render_widget(table, area);
}
