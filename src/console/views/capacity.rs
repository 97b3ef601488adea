//! Capacity per provider, region and accelerator (one row per pool): GPUs
//! total, free, used by Canopy; lend limit; price; startup; whether the
//! provider answers; and a sparkline of free GPUs (from 92 columns or so).
//! Pools, regions and accelerators that do not fit are shortened in the
//! middle, the widest first; numbers and prices never are.

use super::{block, constraints, marker, spark, window};
use crate::console::app::{App, View};
use crate::console::fit::{self, Col, distinct};
use crate::fleet::{NodeState, PoolIdx};
use ratatui::Frame;
use ratatui::layout::Rect;
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
    // Every pool's cells (there are few), so that columns fit them all.
    let cells: Vec<[String; 10]> = fleet
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let pi = PoolIdx(i as u32);
            let prov = fleet.provider_of(pi);
            let nodes = fleet.pool_nodes(pi);
            let total = p.shape.gpus_per_node as usize * nodes.len();
            let free: u32 = nodes.iter().filter(|n| n.state == NodeState::Ready).map(|n| n.free.gpus).sum();
            let accel = p.shape.accelerator.as_ref().map_or("cpu".to_string(), |a| a.model.clone());
            let lend = p.lend_limit_gpus.or(prov.lend_limit_gpus).map_or("-".into(), |l| l.to_string());
            let reach = if status.unreachable.contains_key(&prov.name) { "✗ down" } else { "✓ ok" };
            [
                fleet.pool_label(pi),
                p.region.clone(),
                accel,
                format!("{total}"),
                format!("{free}"),
                format!("{}", fleet.canopy_gpus_in_pool(pi)),
                lend,
                format!("${:.2}", p.price_per_hour),
                format!("{}s", p.startup.as_secs()),
                reach.to_string(),
            ]
        })
        .collect();
    const HEADERS: [&str; 12] = [
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
    ];
    // Column k+1's widest cell or header.
    let want =
        |k: usize| cells.iter().map(|c| fit::width(&c[k])).max().unwrap_or(0).max(HEADERS[k + 1].len());
    let region = want(1);
    let cols = [
        Col::fixed(1),
        Col::shrink(want(0), 16, 10),
        // A region is not shortened for a long pool's sake.
        Col::shrink(region, region.min(14), region.min(14)),
        Col::shrink(want(2), 9, 5),
        Col::fixed(want(3)),
        Col::fixed(want(4)),
        Col::fixed(want(5)),
        Col::fixed(want(6)),
        Col::fixed(want(7)),
        Col::fixed(want(8)),
        Col::fixed(want(9)),
        Col::fixed(12).optional(),
    ];
    let w = fit::widths(&cols, usize::from(area.width.saturating_sub(2)), 1);
    // Pools, regions and accelerators stay told apart from each other.
    let col = |k: usize| -> Vec<&str> { cells.iter().map(|c| c[k].as_str()).collect() };
    let (labels, regions, accels) = (col(0), col(1), col(2));
    let rows = cells.iter().cloned().enumerate().skip(window(sel, height)).take(height).map(|(i, c)| {
        let [label, region, accel, total, free, mine, lend, price, start, reach] = c;
        let total_n: f64 = total.parse().unwrap_or(0.0);
        let hist = app.model.free_history.get(&label);
        let sp = hist.map_or(String::new(), |h| {
            spark(h.iter().map(|v| if total_n == 0.0 { 0.0 } else { f64::from(*v) / total_n }), w[11])
        });
        let reach =
            if reach.starts_with('✗') { Span::styled(reach, t.bad) } else { Span::styled(reach, t.ok) };
        let cells = [
            Cell::from(marker(i == sel)),
            Cell::from(distinct(&label, &labels, w[1]).into_owned()),
            Cell::from(distinct(&region, &regions, w[2]).into_owned()),
            Cell::from(distinct(&accel, &accels, w[3]).into_owned()),
            Cell::from(total),
            Cell::from(free),
            Cell::from(mine),
            Cell::from(lend),
            Cell::from(price),
            Cell::from(start),
            Cell::from(reach),
            Cell::from(sp),
        ];
        let r = Row::new(fit::shown(cells, &w));
        if i == sel { r.style(t.selected) } else { r }
    });
    let header: Vec<String> = HEADERS.iter().zip(&w).map(|(h, w)| fit::end(h, *w).into_owned()).collect();
    let table = Table::new(rows.collect::<Vec<_>>(), constraints(&w))
        .header(Row::new(fit::shown(header, &w)).style(t.header))
        .column_spacing(1)
        .block(block(format!("capacity — {} pools, {} GPUs", fleet.pools.len(), fleet.total_gpus()), t));
    f.render_widget(table, area);
}
