//! Reports over the ledger, like Slurm's `sreport`: the rows within a
//! window `[since, until)`, grouped by one dimension, with the total and,
//! per owning tenant, what its pools lent to others and how its reclaims
//! went. Every figure is an integer (GPU-milliseconds, millionths of a
//! dollar), so the groups sum to the total exactly; [`fmt_ms`] and
//! [`fmt_micro`] write them as decimals without rounding.

use super::ledger::{Context, Figures, Kind, Row};
use crate::engine::model::Millis;
use crate::failure::FailureClass;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

/// What a report groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum By {
    #[default]
    Tenant,
    /// The tenant owning the pool the work ran on.
    Owner,
    Provider,
    /// `provider/pool`.
    Pool,
    /// The accelerator model of the pool.
    Accelerator,
    /// Who submitted the workload.
    User,
}

impl By {
    pub const ALL: [By; 6] = [By::Tenant, By::Owner, By::Provider, By::Pool, By::Accelerator, By::User];

    pub fn as_str(self) -> &'static str {
        match self {
            By::Tenant => "tenant",
            By::Owner => "owner",
            By::Provider => "provider",
            By::Pool => "pool",
            By::Accelerator => "accelerator",
            By::User => "user",
        }
    }

    /// The group a row falls in; `-` where it has none (no tenants, a pool
    /// without an owner or an accelerator).
    pub fn key<'a>(self, r: &Row<'a>) -> &'a str {
        let k = match self {
            By::Tenant => r.tenant,
            By::Owner => r.owner,
            By::Provider => Some(r.provider),
            By::Pool => Some(r.pool),
            By::Accelerator => r.accelerator,
            By::User => r.user,
        };
        k.unwrap_or("-")
    }
}

impl std::str::FromStr for By {
    type Err = String;
    fn from_str(s: &str) -> Result<By, String> {
        By::ALL.into_iter().find(|b| b.as_str() == s).ok_or_else(|| {
            format!("cannot group by {s:?}; one of tenant, owner, provider, pool, accelerator, user")
        })
    }
}

/// One group's figures (or the total's).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Line {
    /// The group's value (`-` for none); `total` on the total.
    pub key: String,
    /// Attempts with time in the window.
    pub attempts: u64,
    /// GPU-milliseconds held in all: the sum of the six columns below.
    pub gpu_ms: u64,
    pub useful_gpu_ms: u64,
    pub wasted_infra_gpu_ms: u64,
    pub wasted_own_gpu_ms: u64,
    pub decision_gpu_ms: u64,
    pub idle_gpu_ms: u64,
    pub live_gpu_ms: u64,
    /// The three lost columns (infra, own, decision) by failure class;
    /// classes with none are left out.
    pub lost_by_class_gpu_ms: BTreeMap<String, u64>,
    /// CPU core-milliseconds held.
    pub cpu_core_ms: u64,
    /// Cost at the prices in force at launch, in millionths of a dollar.
    pub cost_micro_usd: u64,
}

impl Line {
    fn of(key: &str, f: &Figures) -> Line {
        let lost_by_class_gpu_ms = FailureClass::ALL
            .iter()
            .zip(f.by_class_ms)
            .filter(|(_, ms)| *ms > 0)
            .map(|(c, ms)| (c.as_str().to_string(), ms))
            .collect();
        Line {
            key: key.to_string(),
            attempts: f.attempts,
            gpu_ms: f.total_gpu_ms(),
            useful_gpu_ms: f.get(Kind::Useful),
            wasted_infra_gpu_ms: f.get(Kind::WastedInfra),
            wasted_own_gpu_ms: f.get(Kind::WastedOwn),
            decision_gpu_ms: f.get(Kind::Decision),
            idle_gpu_ms: f.get(Kind::Idle),
            live_gpu_ms: f.get(Kind::Live),
            lost_by_class_gpu_ms,
            cpu_core_ms: f.cpu_core_ms,
            cost_micro_usd: f.cost_micro_usd,
        }
    }

    /// GPU-ms in column `k`.
    pub fn get(&self, k: Kind) -> u64 {
        match k {
            Kind::Useful => self.useful_gpu_ms,
            Kind::WastedInfra => self.wasted_infra_gpu_ms,
            Kind::WastedOwn => self.wasted_own_gpu_ms,
            Kind::Decision => self.decision_gpu_ms,
            Kind::Idle => self.idle_gpu_ms,
            Kind::Live => self.live_gpu_ms,
        }
    }
}

/// What an owning tenant's pools did for others in the window.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OwnerLine {
    pub owner: String,
    /// GPU-ms its own work held on its pools.
    pub own_gpu_ms: u64,
    /// GPU-ms other tenants' work held on its pools.
    pub lent_gpu_ms: u64,
    /// What that borrowed work cost at the prices at launch (µ$).
    pub earned_micro_usd: u64,
    /// Borrowed attempts stopped to give its capacity back, begun in the
    /// window.
    pub reclaims: u64,
    /// Of those, still stopping.
    pub reclaims_in_flight: u64,
    /// Its promise: borrowed work is gone within this (`max_reclaim_delay`).
    pub promise_ms: Option<i64>,
    /// From the reclaim's start to the attempt's end: the worst and the
    /// 99th percentile (nearest rank) of the finished ones.
    pub worst_reclaim_ms: Option<i64>,
    pub p99_reclaim_ms: Option<i64>,
    /// Finished reclaims that took longer than the promise.
    pub late_reclaims: u64,
}

/// A usage report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Report {
    pub by: By,
    /// The window `[since, until)`; no `since`: from the beginning.
    pub since: Option<Millis>,
    pub until: Millis,
    /// One line per group, by key.
    pub groups: Vec<Line>,
    /// All groups together: each column equals the sum of the groups'.
    pub total: Line,
    /// Per owning tenant, by name.
    pub owners: Vec<OwnerLine>,
    /// The ledger's rows with time in the window, when asked for
    /// (`rows=true`, `canopy usage --rows`), by workload then attempt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<RowLine>,
    /// Per UTC day of the window, the same grouping's figures within
    /// that day, when asked for (`per_day=true`): the console's chart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<Day>,
}

/// One UTC day's share of a report: its groups (only those with time
/// that day) and its total, within `[start, start + 1 day)` clipped to
/// the report's window. The days' GPU-ms sum to the report's exactly; a
/// cost split at midnight is rounded on each side (within 1 µ$).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Day {
    /// The day's midnight, UTC.
    pub start: Millis,
    pub groups: Vec<Line>,
    pub total: Line,
}

/// A day, in ms.
pub const DAY_MS: i64 = 86_400_000;

/// At most this many days per report (`per_day=true` over a longer
/// window is refused: give a `since`).
pub const MAX_DAYS: i64 = 400;

/// Per UTC day from the one holding the window's start (no `since`: the
/// first row's launch) to the one holding `until`, the rows grouped by
/// `by` within that day and the window. Days with nothing are kept (a
/// chart shows the gap).
pub fn days(rows: &[Row<'_>], by: By, since: Option<Millis>, until: Millis) -> Vec<Day> {
    let Some(lo) = since.or_else(|| rows.iter().map(|r| r.start).min()) else { return Vec::new() };
    if lo >= until {
        return Vec::new();
    }
    let first = lo.0.div_euclid(DAY_MS);
    let last = (until.0 - 1).div_euclid(DAY_MS);
    let n = usize::try_from((last - first + 1).clamp(0, MAX_DAYS)).unwrap_or(0);
    let mut per: Vec<(HashMap<&str, Figures>, Figures)> = vec![Default::default(); n];
    for r in rows {
        let end = r.idle.to.max(r.useful.to).max(r.rest.to);
        let (a, b) = (r.start.max(lo), end.min(until));
        let (from, to) = (a.0.div_euclid(DAY_MS) - first, b.0.max(a.0).div_euclid(DAY_MS) - first);
        for d in from.max(0)..=to.min(n as i64 - 1) {
            let day_lo = Millis((first + d) * DAY_MS).max(lo);
            let day_hi = Millis((first + d + 1) * DAY_MS).min(until);
            let Some(f) = Figures::of(r, day_lo, day_hi) else { continue };
            let (groups, total) = &mut per[d as usize];
            groups.entry(by.key(r)).or_default().add(&f);
            total.add(&f);
        }
    }
    per.into_iter()
        .enumerate()
        .map(|(d, (groups, total))| {
            let mut groups: Vec<Line> = groups.iter().map(|(k, f)| Line::of(k, f)).collect();
            groups.sort_by(|a, b| a.key.cmp(&b.key));
            Day { start: Millis((first + d as i64) * DAY_MS), groups, total: Line::of("total", &total) }
        })
        .collect()
}

/// One ledger row as reported: where and for whom the attempt ran, and
/// its figures within the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RowLine {
    /// `w-17.2`.
    pub attempt: String,
    pub tenant: Option<String>,
    pub user: Option<String>,
    pub owner: Option<String>,
    pub provider: String,
    pub pool: String,
    /// Its node, or a gang's nodes in rank order: `n1,n2`.
    pub nodes: String,
    pub accelerator: Option<String>,
    pub gpus: u64,
    pub cpu_milli: u64,
    /// Launch time.
    pub start: Millis,
    /// `None` while live.
    pub end: Option<Millis>,
    pub outcome: String,
    pub price_per_hour: f64,
    /// Its figures within the window (`key`: the attempt).
    pub figures: Line,
}

/// The rows with time in `[since, until)`, in the ledger's order.
pub fn row_lines(rows: &[Row<'_>], since: Option<Millis>, until: Millis) -> Vec<RowLine> {
    let lo = since.unwrap_or(Millis(i64::MIN));
    rows.iter()
        .filter_map(|r| {
            let f = Figures::of(r, lo, until)?;
            let attempt = r.attempt.to_string();
            Some(RowLine {
                figures: Line::of(&attempt, &f),
                attempt,
                tenant: r.tenant.map(str::to_string),
                user: r.user.map(str::to_string),
                owner: r.owner.map(str::to_string),
                provider: r.provider.to_string(),
                pool: r.pool.to_string(),
                nodes: if r.nodes.is_empty() { r.node.to_string() } else { r.nodes.join(",") },
                accelerator: r.accelerator.map(str::to_string),
                gpus: r.gpus,
                cpu_milli: r.cpu_milli,
                start: r.start,
                end: r.end,
                outcome: r.outcome.to_string(),
                price_per_hour: r.price_per_hour,
            })
        })
        .collect()
}

/// The report of `rows` within `[since, until)`, grouped by `by`; the
/// owners' lines are over the same rows (see [`owners`] to take them from
/// more rows than the groups).
pub fn report(rows: &[Row<'_>], ctx: &Context, by: By, since: Option<Millis>, until: Millis) -> Report {
    let lo = since.unwrap_or(Millis(i64::MIN));
    let mut acc = Tally::new(by);
    for r in rows {
        acc.add(r, lo, until);
    }
    acc.report(ctx, since, until)
}

/// Per owning tenant (by name), what its pools held for it and lent to
/// others within `[since, until)`, and the reclaims begun there.
pub fn owners(rows: &[Row<'_>], ctx: &Context, since: Option<Millis>, until: Millis) -> Vec<OwnerLine> {
    let lo = since.unwrap_or(Millis(i64::MIN));
    let mut owners = BTreeMap::new();
    for r in rows {
        add_owner(&mut owners, r, lo, until);
    }
    owner_lines(owners, ctx)
}

/// A [`report`] summed one row at a time, so rows need not be kept: what
/// the simulator does with a run's million attempts. Each row is added
/// with the window it is judged in; a row added within `[lo, t)` counts as
/// within `[lo, until)` for any `until >= t` when its launch and every
/// span and reclaim start end before `t` ([`Tally::settled_by`]).
#[derive(Debug, Clone, Default)]
pub struct Tally {
    by: By,
    groups: HashMap<String, Figures>,
    total: Figures,
    owners: BTreeMap<String, OwnerSum>,
}

/// One owner's sums ([`owners`]).
#[derive(Debug, Clone, Default)]
pub struct OwnerSum {
    own: u64,
    lent: u64,
    earned: u64,
    reclaims: u64,
    in_flight: u64,
    latencies: Vec<i64>,
}

impl Tally {
    pub fn new(by: By) -> Tally {
        Tally { by, ..Tally::default() }
    }

    /// Adds `r`'s figures within `[lo, until)`.
    pub fn add(&mut self, r: &Row<'_>, lo: Millis, until: Millis) {
        if let Some(f) = Figures::of(r, lo, until) {
            let key = self.by.key(r);
            match self.groups.get_mut(key) {
                Some(g) => g.add(&f),
                None => {
                    self.groups.insert(key.to_string(), f);
                }
            }
            self.total.add(&f);
        }
        add_owner(&mut self.owners, r, lo, until);
    }

    /// Whether `r` is judged the same within `[lo, t)` as within any
    /// longer window `[lo, until)`, `until >= t`: it was launched, its
    /// spans ended and any reclaim of it began before `t`, and it is not
    /// live (a live row grows with the window).
    pub fn settled_by(r: &Row<'_>, t: Millis) -> bool {
        r.rest_kind != Kind::Live
            && r.start < t
            && r.idle.to <= t
            && r.useful.to <= t
            && r.rest.to <= t
            && r.reclaim.is_none_or(|rc| rc.started < t && rc.latency_ms.is_some())
    }

    /// The report of every row added, for the window `[since, until)` the
    /// rows were judged in.
    pub fn report(&self, ctx: &Context, since: Option<Millis>, until: Millis) -> Report {
        let mut groups: Vec<Line> = self.groups.iter().map(|(k, f)| Line::of(k, f)).collect();
        groups.sort_by(|a, b| a.key.cmp(&b.key));
        Report {
            by: self.by,
            since,
            until,
            groups,
            total: Line::of("total", &self.total),
            owners: owner_lines(self.owners.clone(), ctx),
            rows: Vec::new(),
            days: Vec::new(),
        }
    }
}

/// Adds `r`'s share to its owner's sums (and to the reclaiming owner's).
fn add_owner(owners: &mut BTreeMap<String, OwnerSum>, r: &Row<'_>, lo: Millis, until: Millis) {
    if let Some(rc) = &r.reclaim
        && rc.started >= lo
        && rc.started < until
    {
        let o = owner_sum(owners, rc.owner);
        o.reclaims += 1;
        match rc.latency_ms {
            Some(l) => o.latencies.push(l),
            None => o.in_flight += 1,
        }
    }
    let Some(owner) = r.owner else { return };
    let Some(f) = Figures::of(r, lo, until) else { return };
    let o = owner_sum(owners, owner);
    if r.tenant == Some(owner) {
        o.own += f.total_gpu_ms();
    } else {
        o.lent += f.total_gpu_ms();
        o.earned += f.cost_micro_usd;
    }
}

fn owner_sum<'m>(owners: &'m mut BTreeMap<String, OwnerSum>, name: &str) -> &'m mut OwnerSum {
    owners.entry(name.to_string()).or_default()
}

/// The owners' lines from their sums, by name.
fn owner_lines(owners: BTreeMap<String, OwnerSum>, ctx: &Context) -> Vec<OwnerLine> {
    owners
        .into_iter()
        .map(|(name, mut o)| {
            o.latencies.sort_unstable();
            let promise_ms = ctx.promise_ms.get(&name).copied();
            let p99 = (!o.latencies.is_empty()).then(|| {
                let rank = (o.latencies.len() * 99).div_ceil(100).max(1);
                o.latencies[rank - 1]
            });
            OwnerLine {
                late_reclaims: promise_ms
                    .map_or(0, |p| o.latencies.iter().filter(|l| **l > p).count() as u64),
                owner: name,
                own_gpu_ms: o.own,
                lent_gpu_ms: o.lent,
                earned_micro_usd: o.earned,
                reclaims: o.reclaims,
                reclaims_in_flight: o.in_flight,
                promise_ms,
                worst_reclaim_ms: o.latencies.last().copied(),
                p99_reclaim_ms: p99,
            }
        })
        .collect()
}

/// Milliseconds as seconds with three decimals, exactly: `12.345`.
pub fn fmt_ms(ms: u64) -> String {
    format!("{}.{:03}", ms / 1000, ms % 1000)
}

/// Millionths as units with six decimals, exactly: `1.234567`.
pub fn fmt_micro(micro: u64) -> String {
    format!("{}.{:06}", micro / 1_000_000, micro % 1_000_000)
}

/// GPU-ms as GPU-hours for people, two decimals.
pub fn hours(ms: u64) -> String {
    format!("{:.2}", ms as f64 / 3_600_000.0)
}

/// The report's table as `canopy usage` prints it and the console's
/// usage view draws it: the grouping's name, then these columns.
pub const TABLE_COLUMNS: [&str; 9] =
    ["ATTEMPTS", "GPU-H", "USEFUL", "LOST:INFRA", "LOST:OWN", "DECISION", "IDLE", "LIVE", "COST"];

/// A line's cells under [`TABLE_COLUMNS`]: GPU-hours with two decimals,
/// dollars and cents.
pub fn table_cells(l: &Line) -> [String; 9] {
    [
        l.attempts.to_string(),
        hours(l.gpu_ms),
        hours(l.useful_gpu_ms),
        hours(l.wasted_infra_gpu_ms),
        hours(l.wasted_own_gpu_ms),
        hours(l.decision_gpu_ms),
        hours(l.idle_gpu_ms),
        hours(l.live_gpu_ms),
        usd(l.cost_micro_usd),
    ]
}

/// Millionths of a dollar as dollars and cents: `$12.34`.
pub fn usd(micro: u64) -> String {
    format!("${:.2}", micro as f64 / 1e6)
}

/// The lost GPU-hours by class, as `canopy usage` says them under its
/// table: `node 1.50, app 0.25` (empty when nothing was lost).
pub fn lost_by_class(l: &Line) -> String {
    let lost: Vec<String> =
        l.lost_by_class_gpu_ms.iter().map(|(c, ms)| format!("{c} {}", hours(*ms))).collect();
    lost.join(", ")
}

/// The CSV columns of [`csv`], after `line` and the grouping's name.
pub const CSV_COLUMNS: [&str; 10] = [
    "attempts",
    "gpu_s",
    "useful_gpu_s",
    "wasted_infra_gpu_s",
    "wasted_own_gpu_s",
    "decision_gpu_s",
    "idle_gpu_s",
    "live_gpu_s",
    "cpu_core_s",
    "cost_usd",
];

/// The report as CSV: a header, a `group` line per group and a `total`
/// line; GPU-seconds with three decimals and dollars with six, exactly
/// the report's integers (sums reconcile to the last digit).
pub fn csv(r: &Report) -> String {
    let mut out = format!("line,{},{}\n", r.by.as_str(), CSV_COLUMNS.join(","));
    let mut line = |kind: &str, l: &Line| {
        let _ = writeln!(out, "{kind},{},{},{}", csv_field(&l.key), l.attempts, figures_csv(l),);
    };
    for g in &r.groups {
        line("group", g);
    }
    line("total", &r.total);
    out
}

/// A line's figures as CSV fields, in `CSV_COLUMNS[1..]`'s order.
fn figures_csv(l: &Line) -> String {
    [
        fmt_ms(l.gpu_ms),
        fmt_ms(l.useful_gpu_ms),
        fmt_ms(l.wasted_infra_gpu_ms),
        fmt_ms(l.wasted_own_gpu_ms),
        fmt_ms(l.decision_gpu_ms),
        fmt_ms(l.idle_gpu_ms),
        fmt_ms(l.live_gpu_ms),
        fmt_ms(l.cpu_core_ms),
        fmt_micro(l.cost_micro_usd),
    ]
    .join(",")
}

/// The rows as CSV: one line per attempt with where it ran and its
/// figures, in [`csv`]'s units (times in epoch ms; `end` empty while live).
pub fn rows_csv(rows: &[RowLine]) -> String {
    let mut out = format!(
        "attempt,tenant,user,owner,provider,pool,nodes,accelerator,gpus,cpu_cores,start_ms,end_ms,outcome,price_per_hour,{}\n",
        CSV_COLUMNS[1..].join(",")
    );
    let opt = |v: &Option<String>| csv_field(v.as_deref().unwrap_or("-"));
    for r in rows {
        let l = &r.figures;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.attempt),
            opt(&r.tenant),
            opt(&r.user),
            opt(&r.owner),
            csv_field(&r.provider),
            csv_field(&r.pool),
            csv_field(&r.nodes),
            opt(&r.accelerator),
            r.gpus,
            fmt_ms(r.cpu_milli),
            r.start.0,
            r.end.map_or(String::new(), |e| e.0.to_string()),
            csv_field(&r.outcome),
            r.price_per_hour,
            figures_csv(l),
        );
    }
    out
}

/// A CSV field, quoted when it must be; a leading `=`, `+`, `-` or `@`
/// (a spreadsheet formula) is quoted behind a `'`, except the lone `-`
/// that stands for none.
fn csv_field(s: &str) -> String {
    let formula = s.len() > 1 && s.starts_with(['=', '+', '-', '@']);
    if formula || s.contains([',', '"', '\n', '\r']) {
        let body = if formula { format!("'{s}") } else { s.to_string() };
        format!("\"{}\"", body.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
