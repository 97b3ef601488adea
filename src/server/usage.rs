//! `GET /v1/usage`: the usage ledger's report (`crate::usage`), grouped
//! by tenant, owner, provider, pool, accelerator or user, within
//! `[since, until)`. Authorized as `GET /v1/workloads` lists: a principal
//! counts exactly the workloads it may list (its tenant's; a scoped
//! operator's also those that ran within its scopes; an admin's all). An
//! owning tenant also sees its own owner line over everyone's work on its
//! pools (lent GPU time, earnings, reclaims), never another's workloads.

use super::Served;
use super::auth::{Principal, Role};
use super::authz;
use super::error::Query;
use super::error::{ApiError, ApiResult};
use crate::engine::model::{AttemptRecord, Millis, WorkloadId};
use crate::usage::{self, Context, Report, ledger, report};
use axum::extract::State;
use axum::{Extension, Json};
use serde::Deserialize;
use std::collections::HashMap;

/// `GET /v1/usage` parameters.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct UsageQuery {
    /// tenant (default), owner, provider, pool, accelerator or user.
    #[schemars(with = "Option<crate::usage::report::By>")]
    pub by: Option<String>,
    /// The window's start: RFC 3339, epoch ms, or a duration ago (`30d`).
    pub since: Option<String>,
    /// The window's end (not included); now by default.
    pub until: Option<String>,
    /// Add the ledger's rows (one per attempt) with their figures.
    #[serde(default)]
    pub rows: bool,
    /// Add the same grouping per UTC day of the window (the console's
    /// chart); at most [`report::MAX_DAYS`] days.
    #[serde(default)]
    pub per_day: bool,
}

/// A time parameter: RFC 3339, epoch milliseconds, or a duration before
/// `now` (`7d`).
pub fn parse_time(field: &str, v: &str, now: Millis) -> Result<Millis, String> {
    if let Ok(ms) = v.parse::<i64>() {
        return Ok(Millis(ms));
    }
    if let Ok(d) = v.parse::<crate::units::HumanDuration>() {
        return Ok(now.plus_secs(-d.0.as_secs_f64()));
    }
    crate::units::parse_timestamp_ms(v).map(Millis).ok_or_else(|| {
        format!(
            "{field} {v:?} is not a time; give RFC 3339 (2026-12-01T00:00:00Z), epoch ms, or a duration ago (30d)"
        )
    })
}

pub async fn usage(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    Query(mut q): Query<UsageQuery>,
) -> ApiResult<Json<Report>> {
    super::views::blank_is_absent([&mut q.by, &mut q.since, &mut q.until]);
    let tenancy = s.tenancy();
    let now = authz::now();
    // Whose rows a principal counts must be known; the authorization
    // layer refuses tokens without a tenant once tenants exist, and this
    // holds even if that changed.
    if !tenancy.is_empty() && p.tenant.is_none() && p.role < Role::Operator {
        return Err(ApiError::forbidden(format!(
            "{} belongs to no tenant, so whose usage it may see is unknown; give it a tenant",
            p.name
        )));
    }
    let by = match q.by.as_deref() {
        None => usage::By::default(),
        Some(b) => b.parse().map_err(|e: String| ApiError::bad_request(e).field("by"))?,
    };
    let since = match q.since.as_deref() {
        None => None,
        Some(v) => Some(parse_time("since", v, now).map_err(|e| ApiError::bad_request(e).field("since"))?),
    };
    let until = match q.until.as_deref() {
        None => now,
        Some(v) => parse_time("until", v, now).map_err(|e| ApiError::bad_request(e).field("until"))?,
    };
    if since.is_some_and(|t| t >= until) {
        return Err(ApiError::bad_request("since must be before until").field("since"));
    }
    let want_rows = q.rows;
    let per_day = q.per_day;
    if per_day {
        let from = since.map_or(0, |s| s.0.div_euclid(report::DAY_MS));
        let days = (until.0 - 1).div_euclid(report::DAY_MS) - from + 1;
        if since.is_none() || days > report::MAX_DAYS {
            return Err(ApiError::bad_request(format!(
                "per_day needs a window of at most {} days; give since (e.g. since=14d)",
                report::MAX_DAYS
            ))
            .field("since"));
        }
    }
    let fleet = s.fleet_status().map(|st| st.fleet.clone()).unwrap_or_default();
    let report = s
        .read(move |j| {
            let src = usage::read(j, Vec::new(), tenancy.default_tenant.as_deref())?;
            let ctx = Context::new(&fleet, &tenancy, &src.attempts);
            let all = ledger::rows(&ctx, &src.work, &src.attempts, now);
            let seen = visible(&p, &tenancy, &src.attempts, &all);
            let rows: Vec<_> =
                all.iter().filter(|r| seen.get(&r.attempt.workload) == Some(&true)).cloned().collect();
            let mut r = report::report(&rows, &ctx, by, since, until);
            if want_rows {
                r.rows = report::row_lines(&rows, since, until);
            }
            if per_day {
                r.days = report::days(&rows, by, since, until);
            }
            r.owners = report::owners(&all, &ctx, since, until)
                .into_iter()
                .filter(|o| sees_all(&p, &tenancy) || p.tenant.as_deref() == Some(o.owner.as_str()))
                .collect();
            Ok(r)
        })
        .await
        .map_err(ApiError::journal)?;
    Ok(Json(report))
}

/// Whether `p` counts every workload (the listing has no filter).
fn sees_all(p: &Principal, tenancy: &crate::tenant::Tenancy) -> bool {
    authz::listing(p, tenancy).is_none()
}

/// Per workload: whether `p` may list it ([`authz::sees`], the rule of
/// `GET /v1/workloads`), from its tenant and the pools of its attempts.
fn visible(
    p: &Principal,
    tenancy: &crate::tenant::Tenancy,
    attempts: &[AttemptRecord],
    rows: &[ledger::Row<'_>],
) -> HashMap<WorkloadId, bool> {
    let all = sees_all(p, tenancy);
    let mut pools: HashMap<WorkloadId, Vec<(String, String)>> = HashMap::new();
    if !all {
        for a in attempts {
            pools.entry(a.id.workload).or_default().push((a.provider.clone(), a.pool.clone()));
        }
    }
    let mut out = HashMap::new();
    for r in rows {
        out.entry(r.attempt.workload).or_insert_with(|| {
            all || {
                let tenant = r.tenant.map(str::to_string);
                let pools = pools.get(&r.attempt.workload).map_or(&[][..], Vec::as_slice);
                authz::sees(p, Some(&tenant), pools)
            }
        });
    }
    out
}
