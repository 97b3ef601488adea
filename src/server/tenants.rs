//! `GET /v1/tenants` (every tenant's quotas and usage, for everyone:
//! sharing is transparent, but no other tenant's workloads are named) and
//! `PUT /v1/tenants` (admins replace the tables; journalled with its audit
//! record, then in force in the engine and here at once).

use super::auth::{self, Principal};
use super::authz;
use super::error::{ApiError, ApiResult};
use super::{Served, ServerState};
use crate::engine::model::{
    AttemptRecord, AttemptState, Millis, Record, WorkloadId, WorkloadRecord, WorkloadState,
};
use crate::failure::ProviderEnd;
use crate::journal::WorkloadFilter;
use crate::tenant::doc::TenancyDoc;
use crate::tenant::usage::{self, Placed, TenantUsage};
use crate::tenant::{Amount, Tenancy};
use axum::extract::{Request, State};
use axum::http::header;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The answer to `GET /v1/tenants` (and `PUT`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TenantsView {
    /// False when no tenants are configured (then `tenants` is empty).
    pub configured: bool,
    pub default_tenant: Option<String>,
    /// Per tenant and flavor, in the tables' order.
    pub tenants: Vec<TenantUsage>,
    /// Who set the tables in force (`canopy.toml` or a principal), and when.
    pub set_by: Option<String>,
    pub set_at: Option<Millis>,
    /// Per owning tenant: its workloads taking capacity back from borrowed
    /// work now (a victim still stopping, or the owner's work not placed
    /// since its victims stopped). Owners with none are left out.
    #[serde(default)]
    pub reclaims: BTreeMap<String, u64>,
    /// With `[fair_share]`: each tenant's decayed usage, its share of all
    /// tenants' and its fair share (weight over all weights), in the order
    /// tenants are served. Empty without it.
    #[serde(default)]
    pub fair_share: Vec<crate::tenant::fair::Standing>,
    /// Each `[[budget]]`'s current period: spent, expected by running
    /// work, limits, and the work it holds. Empty without budgets.
    #[serde(default)]
    pub budgets: Vec<crate::tenant::budget::Standing>,
}

/// Every tenant's usage now, and owners' reclaims in flight.
pub(super) async fn now(
    s: &ServerState,
    tenancy: &Tenancy,
) -> ApiResult<(Vec<TenantUsage>, BTreeMap<String, u64>)> {
    if tenancy.is_empty() {
        return Ok(Default::default());
    }
    let live = WorkloadFilter {
        states: vec![
            WorkloadState::Queued,
            WorkloadState::Placing,
            WorkloadState::Launching,
            WorkloadState::Running,
        ],
        ..WorkloadFilter::default()
    };
    let rows = s
        .read(move |j| {
            let ws = j.workloads(&live)?;
            let ids: Vec<_> = ws.iter().map(|w| w.id).collect();
            Ok((ws, j.attempts_of(&ids)?))
        })
        .await
        .map_err(ApiError::journal)?;
    let (workloads, attempts) = rows;
    let fleet = s.fleet_status().map(|st| st.fleet.clone()).unwrap_or_default();
    Ok(live_usage(tenancy, &fleet, &workloads, &attempts))
}

/// Every tenant's usage and owners' reclaims in flight, from the live
/// workloads and their attempts on `fleet`: what `GET /v1/tenants` answers.
/// Pure.
pub fn live_usage(
    tenancy: &Tenancy,
    fleet: &crate::fleet::Fleet,
    workloads: &[WorkloadRecord],
    attempts: &[AttemptRecord],
) -> (Vec<TenantUsage>, BTreeMap<String, u64>) {
    if tenancy.is_empty() {
        return Default::default();
    }
    let tenant_of = |t: &Option<String>| t.clone().or_else(|| tenancy.default_tenant.clone());
    let by_id: BTreeMap<_, _> = workloads.iter().map(|w| (w.id, w)).collect();
    let mut waiting: BTreeMap<String, u64> = BTreeMap::new();
    for w in workloads {
        if w.state == WorkloadState::Queued
            && let Some(t) = tenant_of(&w.tenant)
        {
            *waiting.entry(t).or_default() += 1;
        }
    }
    let holding = |a: AttemptState| {
        matches!(
            a,
            AttemptState::Placing
                | AttemptState::Launching
                | AttemptState::Running
                | AttemptState::Terminating
        )
    };
    let mut owned: Vec<(String, String, String, Amount)> = Vec::new();
    for a in attempts.iter().filter(|a| holding(a.state)) {
        let Some(w) = by_id.get(&a.id.workload) else { continue };
        let Some(t) = tenant_of(&w.tenant) else { continue };
        let r = &w.spec.resources;
        let amount = Amount::taken(r.gpus, r.cpu_cores, u64::from(w.spec.nodes()));
        let pool = a.pool.split_once('/').map_or(a.pool.as_str(), |(_, p)| p).to_string();
        owned.push((t, a.provider.clone(), pool, amount));
    }
    let placed: Vec<Placed<'_>> = owned
        .iter()
        .map(|(t, prov, pool, amount)| Placed { tenant: t, provider: prov, pool, amount: *amount })
        .collect();
    let used = usage::tally(tenancy, fleet, &placed);
    (usage::report(tenancy, &used, &waiting), reclaims(workloads, attempts))
}

/// Owners' reclaims in flight, per owning tenant, from the durable stops
/// of live workloads' attempts: an owner's workload counts while a victim
/// it stopped is still stopping, or while it waits unplaced since one
/// stopped (the core holds the reclaim until the owner's work is placed).
pub fn reclaims(workloads: &[WorkloadRecord], attempts: &[AttemptRecord]) -> BTreeMap<String, u64> {
    let state: BTreeMap<_, _> = workloads.iter().map(|w| (w.id, w.state)).collect();
    // When each workload's newest attempt was placed.
    let mut placed: BTreeMap<WorkloadId, Millis> = BTreeMap::new();
    for a in attempts {
        let e = placed.entry(a.id.workload).or_insert(a.placed_at);
        *e = (*e).max(a.placed_at);
    }
    let mut owners: BTreeMap<WorkloadId, &str> = BTreeMap::new();
    for a in attempts {
        let Some(ProviderEnd::OwnerReclaim { owner, for_workload, .. }) = &a.stop else { continue };
        let w = WorkloadId(*for_workload);
        let stopping = a.ended_at.is_none();
        let unplaced = state.get(&w) == Some(&WorkloadState::Queued)
            && a.ended_at.is_some_and(|end| placed.get(&w).is_none_or(|p| *p < end));
        if stopping || unplaced {
            owners.insert(w, owner);
        }
    }
    let mut out = BTreeMap::new();
    for owner in owners.into_values() {
        *out.entry(owner.to_string()).or_default() += 1;
    }
    out
}

/// Where each budget stands, as the engine last published it (empty
/// without `[[budget]]`).
pub(super) fn budget_standings(s: &ServerState, tenancy: &Tenancy) -> Vec<crate::tenant::budget::Standing> {
    if tenancy.budgets.is_empty() {
        return Vec::new();
    }
    s.fleet_status().map(|st| st.budgets.clone()).unwrap_or_default()
}

/// Where each tenant stands in the fair-share order, as the engine last
/// published it (empty without `[fair_share]`).
pub(super) fn fair_standings(s: &ServerState, tenancy: &Tenancy) -> Vec<crate::tenant::fair::Standing> {
    if tenancy.fair_share.is_none() {
        return Vec::new();
    }
    s.fleet_status().map(|st| st.fair_share.clone()).unwrap_or_default()
}

async fn view(s: &ServerState) -> ApiResult<TenantsView> {
    // The tables and who set them, both from the journal: a client told of
    // a change by the stream (its audit record) may ask before this
    // server's copy in memory is replaced, and must not get the old tables
    // under the new `set_at`.
    let row = s.read(|j| j.tenancy()).await.map_err(ApiError::journal)?;
    let stored = row.as_ref().and_then(|r| TenancyDoc::parse(&r.document, true).ok()).map(|(_, t)| t);
    let tenancy = stored.map_or_else(|| s.tenancy(), std::sync::Arc::new);
    let (tenants, reclaims) = now(s, &tenancy).await?;
    Ok(TenantsView {
        configured: !tenancy.is_empty(),
        default_tenant: tenancy.default_tenant.clone(),
        tenants,
        set_by: row.as_ref().map(|r| r.set_by.clone()),
        set_at: row.map(|r| r.set_at),
        reclaims,
        fair_share: fair_standings(s, &tenancy),
        budgets: budget_standings(s, &tenancy),
    })
}

pub async fn list(State(s): State<Served>) -> ApiResult<Json<TenantsView>> {
    Ok(Json(view(&s).await?))
}

/// Replaces the tables: validated as canopy.toml's are (a 422 names the
/// mistake), journalled with the audit record in one transaction, then in
/// force in the engine and for the next request here.
pub async fn put(
    State(s): State<Served>,
    Extension(p): Extension<Principal>,
    req: Request,
) -> ApiResult<Json<TenantsView>> {
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.contains("json"));
    let body = super::api::body_bytes(req).await?;
    let text = std::str::from_utf8(&body)
        .map_err(|e| ApiError::unprocessable(format!("the body is not UTF-8 (byte {})", e.valid_up_to())))?;
    let (doc, tenancy) = TenancyDoc::parse(text, json).map_err(|e| ApiError::unprocessable(e.0))?;
    let now = authz::now();
    let outcome = format!(
        "ok: {} tenants, {} flavors, {} budgets",
        doc.tenant.len(),
        doc.flavor.len(),
        doc.budget.len()
    );
    let audit = auth::audit(&p, "tenants-set", None, outcome, now);
    let document = doc.to_json();
    let set_by = p.name.clone();
    let records = vec![Record::Audit(Box::new(audit.clone()))];
    let engine = s.engine()?;
    engine
        .commit(records, move |j, _| {
            // What the file was last seeded from stays: the file wins at
            // start only when it changes.
            let seeded_from = j.tenancy()?.map_or_else(|| TenancyDoc::default().to_json(), |r| r.seeded_from);
            let row = crate::journal::TenancyRow { document, seeded_from, set_by, set_at: now };
            Ok((j.set_tenancy(&row, &audit)?, ()))
        })
        .await
        .map_err(ApiError::internal)?;
    engine.set_tenancy(tenancy.clone());
    s.set_tenancy(tenancy);
    Ok(Json(view(&s).await?))
}
