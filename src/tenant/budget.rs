//! Budgets: a spend limit per period on a tenant's or a token's work, in
//! currency and in GPU-hours (issue 26). Pure: periods, validation and the
//! admission arithmetic; the core keeps the books (`engine/core/budget.rs`).
//!
//! ```toml
//! [[budget]]
//! name = "team-b-monthly"        # optional; default "<tenant or token>-<period>"
//! tenant = "team-b"              # whose work it counts: a tenant, or
//! # token = "ci-bot"             # the work one token submits
//! period = "month"               # day, week (from Monday) or month
//! time_zone = "Europe/Berlin"    # where the period starts (default UTC)
//! usd = 5000                     # per period, and/or
//! gpu_hours = 2000               # GPU-hours held per period
//! hard = false                   # true: running work is stopped once it is spent
//! ```
//!
//! Spend is counted as the usage ledger counts it (`usage::ledger`): cost
//! is the attempt's price at launch over its running time, GPU-hours are
//! the GPUs it held from launch to its end; both clipped to the period.
//! Admission holds work whose estimate would take more than is left after
//! what was spent and what running work is expected to spend still.

use crate::engine::model::Millis;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use serde::{Deserialize, Serialize};

/// `[[budget]]` as written.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetDef {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The tenant whose work it counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The token (by name) whose submitted work it counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// `day`, `week` (from Monday) or `month`.
    pub period: String,
    /// IANA time zone the period starts in (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Currency per period (the fleet's prices are in US dollars).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// GPU-hours held per period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hours: Option<f64>,
    /// Stop running work (with grace, class `cost-cap`) once it is spent.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hard: bool,
}

/// How long a budget's period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Period {
    Day,
    Week,
    Month,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
        }
    }
}

/// Whose work a budget counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Tenant(String),
    Token(String),
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scope::Tenant(t) => write!(f, "tenant {t}"),
            Scope::Token(t) => write!(f, "token {t}"),
        }
    }
}

/// One budget, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    pub name: String,
    pub scope: Scope,
    pub period: Period,
    /// IANA name, checked to exist.
    pub time_zone: String,
    /// Per period, in millionths of a dollar.
    pub micro_usd: Option<u64>,
    /// Per period, in GPU-milliseconds.
    pub gpu_ms: Option<u64>,
    pub hard: bool,
}

/// What was (or will be) spent: integers, as the ledger counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spend {
    pub micro_usd: u64,
    pub gpu_ms: u64,
}

impl Spend {
    pub fn add(&mut self, o: Spend) {
        self.micro_usd = self.micro_usd.saturating_add(o.micro_usd);
        self.gpu_ms = self.gpu_ms.saturating_add(o.gpu_ms);
    }

    pub fn plus(mut self, o: Spend) -> Spend {
        self.add(o);
        self
    }
}

/// Dollars, to the cent, from millionths.
pub fn usd(micro: u64) -> String {
    format!("${:.2}", micro as f64 / 1e6)
}

/// GPU-hours, to a hundredth, from GPU-ms.
pub fn gpu_hours(ms: u64) -> String {
    format!("{:.2} GPU-h", ms as f64 / 3.6e6)
}

impl Budget {
    /// Whether a workload of `tenant`, submitted by `user`, counts here.
    pub fn applies(&self, tenant: Option<&str>, user: Option<&str>) -> bool {
        match &self.scope {
            Scope::Tenant(t) => tenant == Some(t.as_str()),
            Scope::Token(t) => user == Some(t.as_str()),
        }
    }

    /// The period `now` falls in, `[start, end)`, in the budget's zone.
    pub fn period_at(&self, now: Millis) -> (Millis, Millis) {
        // The zone was checked at validation; UTC if it vanished since.
        let tz = TimeZone::get(&self.time_zone).unwrap_or(TimeZone::UTC);
        period_bounds(self.period, &tz, now)
    }

    /// `t` in the budget's zone, to the minute, with the zone's name.
    pub fn local_time(&self, t: Millis) -> String {
        let tz = TimeZone::get(&self.time_zone).unwrap_or(TimeZone::UTC);
        let ts = Timestamp::from_millisecond(t.0).unwrap_or(Timestamp::UNIX_EPOCH);
        format!("{} {}", ts.to_zoned(tz).strftime("%Y-%m-%d %H:%M"), self.time_zone)
    }

    /// The fraction of the budget spent (the larger of its two limits'),
    /// 0 when it has no limit.
    pub fn fraction(&self, s: Spend) -> f64 {
        fraction(s, self.micro_usd, self.gpu_ms)
    }

    /// "$120.00 of $5,000.00" / "10.0 of 2000 GPU-h", both when both.
    pub fn spent_text(&self, spent: Spend) -> String {
        spent_text(spent, self.micro_usd, self.gpu_ms)
    }

    /// Whether `spent` has reached a limit.
    pub fn spent_out(&self, spent: Spend) -> bool {
        self.micro_usd.is_some_and(|l| spent.micro_usd >= l) || self.gpu_ms.is_some_and(|l| spent.gpu_ms >= l)
    }

    /// Why work estimated to take `estimate` waits, when `spent` plus what
    /// running work is expected to spend still (`committed`) leaves too
    /// little: the budget and its numbers. `None`: it fits.
    pub fn refuses(&self, spent: Spend, committed: Spend, estimate: Spend) -> Option<String> {
        let limits = Limits { micro_usd: self.micro_usd, gpu_ms: self.gpu_ms };
        refusal(&self.name, &self.scope.to_string(), self.period, limits, spent, committed, estimate)
    }
}

/// A budget's limits per period (`None`: not limited in that unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub micro_usd: Option<u64>,
    pub gpu_ms: Option<u64>,
}

/// What an attempt is estimated to spend at `hourly` (the whole attempt's
/// price) on `nodes` nodes of `gpus` each over `runtime` (the spec's
/// expected runtime, else its maximum); nothing without one. Admission
/// and `canopy mcp`'s submit check estimate alike.
pub fn estimate(runtime: Option<std::time::Duration>, hourly: f64, nodes: usize, gpus: u32) -> Spend {
    let Some(r) = runtime else { return Spend::default() };
    let ms = r.as_millis() as f64;
    Spend {
        micro_usd: (hourly.max(0.0) * ms / 3.6).round() as u64,
        gpu_ms: (f64::from(gpus) * nodes as f64 * ms).round() as u64,
    }
}

/// Why work estimated to take `estimate` may not start under budget
/// `name` (`scope`, per `period`): what `spent` plus what running work is
/// expected to spend still (`committed`) leaves is too little. The budget
/// and its numbers; `None`: it fits.
fn refusal(
    name: &str,
    scope: &str,
    period: Period,
    limits: Limits,
    spent: Spend,
    committed: Spend,
    estimate: Spend,
) -> Option<String> {
    let check = |limit: Option<u64>, have: u64, more: u64, est: u64, fmt: fn(u64) -> String| {
        let limit = limit?;
        let left = limit.saturating_sub(have).saturating_sub(more);
        // Nothing left, or the estimate would not fit what is.
        (left == 0 || est > left).then(|| {
            let committed =
                if more > 0 { format!(", {} expected by running work", fmt(more)) } else { String::new() };
            format!(
                "estimated {} but {} is left ({} spent{committed} of {})",
                fmt(est),
                fmt(left),
                fmt(have),
                fmt(limit)
            )
        })
    };
    let why: Vec<String> = [
        check(limits.micro_usd, spent.micro_usd, committed.micro_usd, estimate.micro_usd, usd),
        check(limits.gpu_ms, spent.gpu_ms, committed.gpu_ms, estimate.gpu_ms, gpu_hours),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!why.is_empty()).then(|| format!("budget {name} ({scope}, per {}): {}", period.as_str(), why.join("; ")))
}

/// Where a budget stands now: what `canopy tenants`, `GET /v1/tenants`,
/// the console and `/metrics` show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Standing {
    pub name: String,
    /// `tenant NAME` or `token NAME`.
    pub scope: String,
    pub period: Period,
    pub time_zone: String,
    /// The current period, `[start, end)`, ms since the epoch.
    pub start: Millis,
    pub end: Millis,
    /// Per period (`None`: not limited in that unit).
    pub limit_micro_usd: Option<u64>,
    pub limit_gpu_ms: Option<u64>,
    /// Spent in the period so far, running work included up to now.
    pub spent: Spend,
    /// What running work is expected to spend still (from its specs'
    /// expected or maximum runtimes).
    pub committed: Spend,
    /// Workloads it holds.
    pub holding: u64,
    pub hard: bool,
}

impl Standing {
    /// The larger of its limits' spent fractions.
    pub fn fraction(&self) -> f64 {
        fraction(self.spent, self.limit_micro_usd, self.limit_gpu_ms)
    }

    /// As [`Budget::refuses`], from where the budget stands.
    pub fn refuses(&self, estimate: Spend) -> Option<String> {
        let limits = Limits { micro_usd: self.limit_micro_usd, gpu_ms: self.limit_gpu_ms };
        refusal(&self.name, &self.scope, self.period, limits, self.spent, self.committed, estimate)
    }

    /// "$120.00 of $5,000.00" / "10.0 of 2000 GPU-h", both when both.
    pub fn spent_text(&self) -> String {
        spent_text(self.spent, self.limit_micro_usd, self.limit_gpu_ms)
    }
}

/// The larger of the limits' spent fractions, 0 without a limit; a zero
/// limit counts as spent (1) from the start.
fn fraction(s: Spend, micro_usd: Option<u64>, gpu_ms: Option<u64>) -> f64 {
    let f = |have: u64, limit: Option<u64>| match limit {
        Some(0) => 1.0,
        Some(l) => have as f64 / l as f64,
        None => 0.0,
    };
    f(s.micro_usd, micro_usd).max(f(s.gpu_ms, gpu_ms))
}

fn spent_text(spent: Spend, micro_usd: Option<u64>, gpu_ms: Option<u64>) -> String {
    let mut parts = Vec::new();
    if let Some(l) = micro_usd {
        parts.push(format!("{} of {}", usd(spent.micro_usd), usd(l)));
    }
    if let Some(l) = gpu_ms {
        parts.push(format!("{} of {}", gpu_hours(spent.gpu_ms), gpu_hours(l)));
    }
    parts.join(", ")
}

/// The `[start, end)` of the `period` containing `now`, in zone `tz`.
pub fn period_bounds(period: Period, tz: &TimeZone, now: Millis) -> (Millis, Millis) {
    let ts = Timestamp::from_millisecond(now.0).unwrap_or(Timestamp::UNIX_EPOCH);
    let date = ts.to_zoned(tz.clone()).date();
    let first = match period {
        Period::Day => date,
        Period::Week => {
            date.checked_sub((date.weekday().to_monday_zero_offset() as i64).days()).unwrap_or(date)
        }
        Period::Month => date.first_of_month(),
    };
    let next = match period {
        Period::Day => first.checked_add(1.day()),
        Period::Week => first.checked_add(7.days()),
        Period::Month => first.checked_add(1.month()),
    }
    .unwrap_or(first);
    // Midnight that does not exist (a zone that moves its clocks at
    // midnight) resolves to the next instant that does.
    let at =
        |d: jiff::civil::Date| d.to_zoned(tz.clone()).map_or(now, |z| Millis(z.timestamp().as_millisecond()));
    (at(first), at(next))
}

/// A budget that cannot be used; says where and what to do.
fn bad<T>(s: String) -> Result<T, super::TenancyError> {
    Err(super::TenancyError(s))
}

fn limit(x: Option<f64>, scale: f64, what: &str, name: &str) -> Result<Option<u64>, super::TenancyError> {
    match x {
        None => Ok(None),
        Some(v) if v.is_finite() && (0.0..=1e12).contains(&v) => Ok(Some((v * scale).round() as u64)),
        Some(v) => bad(format!("[[budget]] {name}: {what} = {v} is not valid; give a non-negative number")),
    }
}

/// Validates `[[budget]]` tables; `tenants` are the configured tenants'
/// names (a tenant budget must name one).
pub fn validate(defs: &[BudgetDef], tenants: &[&str]) -> Result<Vec<Budget>, super::TenancyError> {
    let mut out: Vec<Budget> = Vec::new();
    for (i, d) in defs.iter().enumerate() {
        let at = format!("[[budget]] #{}", i + 1);
        let scope = match (&d.tenant, &d.token) {
            (Some(t), None) => {
                if !tenants.contains(&t.as_str()) {
                    return bad(format!(
                        "{at}: tenant {t:?} is not a [[tenant]]; name one of: {}",
                        if tenants.is_empty() { "none is defined".to_string() } else { tenants.join(", ") }
                    ));
                }
                Scope::Tenant(t.clone())
            }
            (None, Some(t)) if !t.is_empty() => Scope::Token(t.clone()),
            _ => return bad(format!("{at}: give exactly one of `tenant` or `token` (whose work it counts)")),
        };
        let period = match d.period.to_ascii_lowercase().as_str() {
            "day" | "daily" => Period::Day,
            "week" | "weekly" => Period::Week,
            "month" | "monthly" => Period::Month,
            other => return bad(format!("{at}: period {other:?} is not known; use day, week or month")),
        };
        let time_zone = d.time_zone.clone().unwrap_or_else(|| "UTC".into());
        if TimeZone::get(&time_zone).is_err() {
            return bad(format!(
                "{at}: time_zone {time_zone:?} is not a known IANA zone; write e.g. \"Europe/Berlin\" or \"UTC\""
            ));
        }
        let who = match &scope {
            Scope::Tenant(t) | Scope::Token(t) => t,
        };
        let name = d.name.clone().unwrap_or_else(|| format!("{who}-{}", period.as_str()));
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return bad(format!(
                "{at}: name {name:?} is not valid; use 1-64 letters, digits, '-', '_' or '.'"
            ));
        }
        if out.iter().any(|b| b.name == name) {
            return bad(format!("[[budget]] {name:?} is defined twice; give each a unique `name`"));
        }
        let micro_usd = limit(d.usd, 1e6, "usd", &name)?;
        let gpu_ms = limit(d.gpu_hours, 3.6e6, "gpu_hours", &name)?;
        if micro_usd.is_none() && gpu_ms.is_none() {
            return bad(format!("[[budget]] {name}: give `usd`, `gpu_hours` or both (what it limits)"));
        }
        out.push(Budget { name, scope, period, time_zone, micro_usd, gpu_ms, hard: d.hard });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> Millis {
        Millis(s.parse::<Timestamp>().unwrap().as_millisecond())
    }

    fn def(toml_text: &str) -> BudgetDef {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn periods_start_at_local_midnight_monday_and_the_first() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-12-06 is a Sunday; 00:30 UTC is 01:30 in Berlin.
        let now = ms("2026-12-06T00:30:00Z");
        assert_eq!(
            period_bounds(Period::Day, &berlin, now),
            (ms("2026-12-05T23:00:00Z"), ms("2026-12-06T23:00:00Z"))
        );
        assert_eq!(
            period_bounds(Period::Week, &berlin, now),
            (ms("2026-11-29T23:00:00Z"), ms("2026-12-06T23:00:00Z"))
        );
        assert_eq!(
            period_bounds(Period::Month, &berlin, now),
            (ms("2026-11-30T23:00:00Z"), ms("2026-12-31T23:00:00Z"))
        );
        // In UTC the same instant is in another day, and the month is whole.
        assert_eq!(
            period_bounds(Period::Day, &TimeZone::UTC, now),
            (ms("2026-12-06T00:00:00Z"), ms("2026-12-07T00:00:00Z"))
        );
        // A month across the change to summer time is an hour shorter.
        let (s, e) = period_bounds(Period::Month, &berlin, ms("2027-03-15T12:00:00Z"));
        assert_eq!((s, e), (ms("2027-02-28T23:00:00Z"), ms("2027-03-31T22:00:00Z")));
    }

    #[test]
    fn tables_validate_with_what_and_where() {
        let ok = validate(&[def("tenant = \"a\"\nperiod = \"month\"\nusd = 10")], &["a"]).unwrap();
        assert_eq!(ok[0].name, "a-month");
        assert_eq!(ok[0].micro_usd, Some(10_000_000));
        assert_eq!(ok[0].time_zone, "UTC");
        let cases = [
            ("tenant = \"x\"\nperiod = \"day\"\nusd = 1", "tenant \"x\" is not a [[tenant]]"),
            ("period = \"day\"\nusd = 1", "exactly one of `tenant` or `token`"),
            ("tenant = \"a\"\ntoken = \"t\"\nperiod = \"day\"\nusd = 1", "exactly one of"),
            ("tenant = \"a\"\nperiod = \"fortnight\"\nusd = 1", "period \"fortnight\" is not known"),
            (
                "tenant = \"a\"\nperiod = \"day\"\ntime_zone = \"Mars/Olympus\"\nusd = 1",
                "not a known IANA zone",
            ),
            ("tenant = \"a\"\nperiod = \"day\"", "give `usd`, `gpu_hours` or both"),
            ("tenant = \"a\"\nperiod = \"day\"\nusd = -3", "usd = -3 is not valid"),
        ];
        for (text, want) in cases {
            let e = validate(&[def(text)], &["a"]).unwrap_err();
            assert!(e.0.contains(want), "{text}: {e}");
        }
        let twice = [
            def("tenant = \"a\"\nperiod = \"day\"\nusd = 1"),
            def("tenant = \"a\"\nperiod = \"day\"\nusd = 2"),
        ];
        assert!(validate(&twice, &["a"]).unwrap_err().0.contains("defined twice"));
    }

    #[test]
    fn refusal_names_the_budget_and_its_numbers() {
        let b =
            &validate(&[def("token = \"ci\"\nperiod = \"day\"\nusd = 100\ngpu_hours = 10")], &[]).unwrap()[0];
        let spent = Spend { micro_usd: 70_000_000, gpu_ms: 3_600_000 };
        let committed = Spend { micro_usd: 20_000_000, gpu_ms: 0 };
        assert_eq!(b.refuses(spent, committed, Spend { micro_usd: 10_000_000, gpu_ms: 0 }), None);
        let why = b.refuses(spent, committed, Spend { micro_usd: 12_000_000, gpu_ms: 0 }).unwrap();
        assert_eq!(
            why,
            "budget ci-day (token ci, per day): estimated $12.00 but $10.00 is left ($70.00 spent, $20.00 expected by running work of $100.00)"
        );
        // Nothing left: even work nobody can estimate waits.
        let why = b
            .refuses(Spend { micro_usd: 0, gpu_ms: 36_000_000 }, Spend::default(), Spend::default())
            .unwrap();
        assert!(why.contains("0.00 GPU-h is left (10.00 GPU-h spent of 10.00 GPU-h)"), "{why}");
        assert!(b.applies(None, Some("ci")) && !b.applies(Some("ci"), Some("other")));
        assert!(b.spent_out(Spend { micro_usd: 100_000_000, gpu_ms: 0 }));
        assert!((b.fraction(Spend { micro_usd: 80_000_000, gpu_ms: 0 }) - 0.8).abs() < 1e-12);
    }
}
