//! The usage view's state and keys: the engine's usage report
//! (`GET /v1/usage`, what `canopy usage` prints) over the last
//! [`DAYS`] UTC days, with the same grouping per day for the chart. Loaded
//! on entering the view and every [`REFRESH`] while it is shown; `b`
//! cycles the grouping (tenant, owner, provider, pool, accelerator, user:
//! `canopy usage --by`) and asks again; j/k select a group (the last row
//! is the total), whose days the chart draws and whose waste the pane
//! splits. One load is in flight at a time. Pure: no I/O.

use super::component::{Component, Ctx, Outcome, step};
use super::keymap::Intent;
use super::msg::Effect;
use super::poll::Poll;
use crate::engine::model::Millis;
use crate::usage::report::{By, DAY_MS, Line, Report};

/// How often the view asks again while it is shown: the ledger moves
/// with running work, not by the second.
pub const REFRESH: i64 = 30_000;
/// The chart's days, today's included.
pub const DAYS: i64 = 14;

/// The usage view's grouping, last report and selected group.
#[derive(Debug, Clone, Default)]
pub struct UsageView {
    /// The grouping asked for (the report shown may still be the
    /// previous one's until the answer comes: it carries its own).
    pub by: By,
    pub poll: Poll,
    pub report: Option<Report>,
    /// The selected row: a group, or the total after the last group.
    pub sel: usize,
}

impl UsageView {
    /// The API path for the report at `now`: the last [`DAYS`] UTC days,
    /// from midnight, per day.
    pub fn path(&self, now: Millis) -> String {
        let since = (now.0.div_euclid(DAY_MS) - (DAYS - 1)) * DAY_MS;
        format!("/v1/usage?by={}&since={since}&per_day=true", self.by.as_str())
    }

    /// Entering the view: the report now.
    pub fn enter(&mut self, now: Millis) -> Vec<Effect> {
        let ask = self.poll.ask(now);
        self.effect(ask, now)
    }

    /// While the view is shown: asks again every [`REFRESH`].
    pub fn due(&mut self, now: Millis) -> Vec<Effect> {
        let ask = self.poll.due(now, REFRESH);
        self.effect(ask, now)
    }

    /// The grouping changed: asks again (after the load in flight).
    pub fn reload(&mut self, now: Millis) -> Vec<Effect> {
        let ask = self.poll.reload(now);
        self.effect(ask, now)
    }

    /// Takes the engine's answer; asks again if the grouping changed
    /// meanwhile.
    pub fn answered(&mut self, got: Result<Report, String>, now: Millis) -> Vec<Effect> {
        let got = got.map(|r| {
            self.sel = self.sel.min(r.groups.len());
            self.report = Some(r);
        });
        let ask = self.poll.answered(got, now);
        self.effect(ask, now)
    }

    fn effect(&self, ask: bool, now: Millis) -> Vec<Effect> {
        if ask { vec![Effect::LoadUsage(self.path(now))] } else { Vec::new() }
    }

    /// The selected row's line and its name (`TOTAL` for the total).
    pub fn selected(&self) -> Option<(&Line, &str)> {
        let r = self.report.as_ref()?;
        Some(match r.groups.get(self.sel) {
            Some(g) => (g, g.key.as_str()),
            None => (&r.total, "TOTAL"),
        })
    }

    /// The selected row's GPU-ms per day of the chart: `(day's midnight,
    /// GPU-ms held)`, a day without it as 0.
    pub fn per_day(&self) -> Vec<(Millis, u64)> {
        let Some(r) = self.report.as_ref() else { return Vec::new() };
        let key = r.groups.get(self.sel).map(|g| g.key.as_str());
        r.days
            .iter()
            .map(|d| {
                let ms = match key {
                    Some(k) => d.groups.iter().find(|g| g.key == k).map_or(0, |g| g.gpu_ms),
                    None => d.total.gpu_ms,
                };
                (d.start, ms)
            })
            .collect()
    }
}

impl Component for UsageView {
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome {
        if intent == Intent::NextGrouping {
            let i = By::ALL.iter().position(|b| *b == self.by).unwrap_or(0);
            self.by = By::ALL[(i + 1) % By::ALL.len()];
            self.sel = 0;
            let mut fx = self.reload(ctx.now);
            if ctx.replay {
                fx.clear();
            }
            return Outcome::Effects(fx);
        }
        let Some(by) = step(intent, ctx.page) else { return Outcome::Ignored };
        let rows = self.report.as_ref().map_or(0, |r| r.groups.len() + 1);
        let last = rows.saturating_sub(1) as isize;
        self.sel = (self.sel.min(last as usize) as isize).saturating_add(by).clamp(0, last) as usize;
        Outcome::Done
    }
}

/// The waste split of a line, in `canopy usage`'s column names with what
/// each means: `(column, GPU-ms, meaning)`, every column of the ledger.
pub fn split(l: &Line) -> [(&'static str, u64, &'static str); 6] {
    [
        ("USEFUL", l.useful_gpu_ms, "work that finished, and checkpoints a later attempt resumed from"),
        (
            "LOST:INFRA",
            l.wasted_infra_gpu_ms,
            "the infrastructure's fault: node, comm, io, provider, preempted, reclaimed",
        ),
        ("LOST:OWN", l.wasted_own_gpu_ms, "the workload's own: app, gpu-oom, cpu-oom, config, timeout"),
        ("DECISION", l.decision_gpu_ms, "decisions: cancelled, cost cap, an evicting drain"),
        ("IDLE", l.idle_gpu_ms, "held but not running yet: launch to running"),
        ("LIVE", l.live_gpu_ms, "running now: its outcome is not known yet"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::poll::Load;

    #[test]
    fn asks_once_at_a_time_from_midnight_and_again_after_a_new_grouping() {
        let mut u = UsageView::default();
        let now = Millis(20 * DAY_MS + 3_600_000);
        let fx = u.enter(now);
        let want = format!("/v1/usage?by=tenant&since={}&per_day=true", 7 * DAY_MS);
        assert!(matches!(&fx[..], [Effect::LoadUsage(p)] if *p == want), "{fx:?}");
        assert!(u.due(Millis(now.0 + 1_000)).is_empty(), "one in flight");
        u.by = By::Owner;
        assert!(u.reload(Millis(now.0 + 2_000)).is_empty(), "asked again when it answers");
        let fx = u.answered(Err("gone".into()), Millis(now.0 + 3_000));
        assert!(matches!(&fx[..], [Effect::LoadUsage(p)] if p.contains("by=owner")), "{fx:?}");
        assert_eq!(u.poll.load, Load::Loading, "asked again by owner");
        assert!(u.answered(Err("gone".into()), Millis(now.0 + 3_500)).is_empty());
        assert_eq!(u.poll.load, Load::Failed("gone".into()));
        assert!(u.due(Millis(now.0 + 4_000)).is_empty(), "not yet due");
        assert_eq!(u.due(Millis(now.0 + 3_000 + REFRESH)).len(), 1);
    }
}
