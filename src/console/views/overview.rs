//! Overview: what is broken first (unreachable providers, quarantined and
//! down nodes, failed and blocked workloads), then capacity and workload
//! counts, then the newest events.

use super::{age, block};
use crate::console::app::App;
use crate::engine::model::WorkloadState;
use crate::fleet::NodeState;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let m = &app.model;
    let mut broken: Vec<Line> = Vec::new();
    let mut summary: Vec<Line> = Vec::new();
    if let Some(s) = &m.status {
        for (p, e) in &s.unreachable {
            broken.push(Line::from(vec![
                Span::styled("✗ provider ", t.bad),
                Span::raw(format!("{p} unreachable: {e}")),
            ]));
        }
        let quarantined: Vec<&str> =
            s.health.nodes.iter().filter(|(_, h)| h.quarantined).map(|(n, _)| n.as_str()).collect();
        let down = s.fleet.nodes.iter().filter(|n| n.state == NodeState::Down).count();
        let cordoned = s
            .fleet
            .nodes
            .iter()
            .filter(|n| matches!(n.state, NodeState::Cordoned | NodeState::Draining))
            .count();
        if !quarantined.is_empty() {
            let mut q = quarantined.clone();
            q.sort();
            broken.push(Line::from(vec![
                Span::styled(format!("⚠ {} quarantined ", q.len()), t.bad),
                Span::raw(q.iter().take(4).copied().collect::<Vec<_>>().join(" ")),
            ]));
        }
        if down > 0 {
            broken.push(Line::from(Span::styled(
                format!("✗ {}", plural(down, "node", "nodes") + " down"),
                t.bad,
            )));
        }
        if s.blocked > 0 {
            broken.push(Line::from(Span::styled(
                format!(
                    "… {} blocked: nothing fits (see workload detail)",
                    plural(s.blocked, "workload", "workloads")
                ),
                t.warn,
            )));
        }
        let total = s.fleet.total_gpus();
        let free: u64 = s
            .fleet
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Ready)
            .map(|n| u64::from(n.free.gpus))
            .sum();
        let mine: u64 = s.fleet.nodes.iter().map(|n| u64::from(n.canopy_gpus)).sum();
        summary.push(Line::from(format!(
            "GPUs {total} total, {free} free, {mine} used by Canopy · {} providers, {} pools, {} nodes ({cordoned} cordoned/draining)",
            s.fleet.providers.len(),
            s.fleet.pools.len(),
            s.fleet.nodes.len()
        )));
    }
    let count = |st: WorkloadState| m.workloads.values().filter(|w| w.rec.state == st).count();
    let retrying = m.workloads.values().filter(|w| !w.rec.state.is_final() && w.is_fault()).count();
    let failed = count(WorkloadState::Failed);
    // Failures nobody has acknowledged or retried, whatever their age.
    let unresolved =
        m.workloads.values().filter(|w| w.rec.state == WorkloadState::Failed && w.is_fault()).count();
    if unresolved > 0 {
        broken.push(Line::from(Span::styled(
            format!("✗ {} failed (5 triage)", plural(unresolved, "workload", "workloads")),
            t.bad,
        )));
    }
    if retrying > 0 {
        broken.push(Line::from(Span::styled(
            format!("↻ {} retrying after a failure", plural(retrying, "workload", "workloads")),
            t.warn,
        )));
    }
    if broken.is_empty() {
        broken.push(Line::from(Span::styled("✓ nothing is broken", t.ok)));
    }
    summary.push(Line::from(format!(
        "workloads: {} running, {} queued, {} starting, {} succeeded, {failed} failed, {} cancelled",
        count(WorkloadState::Running),
        count(WorkloadState::Queued),
        count(WorkloadState::Placing) + count(WorkloadState::Launching),
        count(WorkloadState::Succeeded),
        count(WorkloadState::Cancelled),
    )));
    let bh = (broken.len() as u16 + 2).min(area.height / 2).max(3);
    let [a, b, c] =
        Layout::vertical([Constraint::Length(bh), Constraint::Length(4), Constraint::Min(3)]).areas(area);
    f.render_widget(Paragraph::new(broken).block(block("broken first".into(), t)), a);
    f.render_widget(Paragraph::new(summary).block(block("at a glance".into(), t)), b);
    let n = usize::from(c.height.saturating_sub(2));
    let events: Vec<Line> = m
        .events
        .iter()
        .rev()
        .take(n)
        .map(|e| {
            Line::from(vec![
                Span::styled(format!("{:>4} ", age(app.now, e.at)), t.dim),
                Span::styled(format!("{:<6} ", e.workload.to_string()), t.accent),
                Span::styled(format!("{:<13} ", e.kind.as_str()), t.text),
                Span::raw(e.message.clone()),
            ])
        })
        .collect();
    f.render_widget(Paragraph::new(events).block(block("recent events".into(), t)), c);
}

/// `1 node`, `2 nodes`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
