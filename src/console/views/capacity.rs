//! Capacity per provider, region and accelerator (one row per pool): GPUs
//! total, free, used by Canopy; lend limit; price; startup; whether the
//! provider answers; and a sparkline of free GPUs.

use super::{block, marker, spark, window};
use crate::console::app::{App, View};
use crate::fleet::{NodeState, PoolIdx};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Paragraph, Row, Table};

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let Some(status) = &app.model.status else {
        f.render_widget(
            Paragraph::new("waiting for the engine's first fleet status…").block(block("capacity".into(), t)),
            area,
        );
        return;
    };
    let fleet = &status.fleet;
    let sel = app.sel(View::Capacity);
    let height = usize::from(area.height.saturating_sub(3));
    let rows = fleet.pools.iter().enumerate().skip(window(sel, height)).take(height).map(|(i, p)| {
        let pi = PoolIdx(i as u32);
        let prov = fleet.provider_of(pi);
        let nodes = fleet.pool_nodes(pi);
        let total = p.shape.gpus_per_node as usize * nodes.len();
        let free: u32 = nodes.iter().filter(|n| n.state == NodeState::Ready).map(|n| n.free.gpus).sum();
        let label = fleet.pool_label(pi);
        let hist = app.model.free_history.get(&label);
        let sp = hist.map_or(String::new(), |h| {
            spark(h.iter().map(|v| if total == 0 { 0.0 } else { f64::from(*v) / total as f64 }), 12)
        });
        let reach = match status.unreachable.get(&prov.name) {
            Some(_) => Span::styled("✗ down", t.bad),
            None => Span::styled("✓ ok", t.ok),
        };
        let accel = p.shape.accelerator.as_ref().map_or("cpu".to_string(), |a| a.model.clone());
        let lend = p.lend_limit_gpus.or(prov.lend_limit_gpus).map_or("-".into(), |l| l.to_string());
        let r = Row::new(vec![
            Cell::from(marker(i == sel)),
            Cell::from(label),
            Cell::from(p.region.clone()),
            Cell::from(accel),
            Cell::from(format!("{total}")),
            Cell::from(format!("{free}")),
            Cell::from(format!("{}", fleet.canopy_gpus_in_pool(pi))),
            Cell::from(lend),
            Cell::from(format!("${:.2}", p.price_per_hour)),
            Cell::from(format!("{}s", p.startup.as_secs())),
            Cell::from(reach),
            Cell::from(sp),
        ]);
        if i == sel { r.style(t.selected) } else { r }
    });
    let header = Row::new([
        "",
        "POOL",
        "REGION",
        "ACCEL",
        "GPUS",
        "FREE",
        "MINE",
        "LEND",
        "$/H",
        "START",
        "REACH",
        "FREE HISTORY",
    ])
    .style(t.header);
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Min(14),
            Constraint::Length(10),
            Constraint::Length(8),
            Constraint::Length(5),
            Constraint::Length(5),
            Constraint::Length(4),
            Constraint::Length(4),
            Constraint::Length(7),
            Constraint::Length(5),
            Constraint::Length(6),
            Constraint::Length(12),
        ],
    )
    .header(header)
    .block(block(format!("capacity — {} pools, {} GPUs", fleet.pools.len(), fleet.total_gpus()), t));
    f.render_widget(table, area);
}
