//! The tenants view's data: the engine's tenants with their quotas and
//! usage (`GET /v1/tenants`, the numbers `canopy tenants` prints), loaded
//! on entering the view, every [`REFRESH`] while it is shown, when the
//! tables change (a `tenants-set` audit record goes by) and after a
//! reconnection; and what the view derives from them: what each tenant
//! lends, and what binds it.
//!
//! What a tenant *lent* comes with its row
//! ([`crate::tenant::usage::lent`]). One load is in flight at a time.
//! Pure: no I/O.

use super::model::Model;
use super::msg::Effect;
use super::poll::Poll;
use crate::engine::model::{Millis, WorkloadState};
use crate::server::tenants::TenantsView;
use crate::tenant::usage::TenantUsage;
use crate::tenant::{Amount, Resource};
use crate::text::sanitize;

/// How often the view asks again while it is shown.
pub const REFRESH: i64 = 5_000;

/// One row of the view: a tenant in a flavor, with what it lends and its
/// owner's reclaims in flight.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantRow {
    pub usage: TenantUsage,
    /// What of its idle nominal quota others of its cohort use now.
    pub lent: Amount,
    /// Its workloads taking its own capacity back now (all flavors).
    pub reclaims: u64,
}

impl TenantRow {
    /// The resource the row's numbers are in: GPUs where the flavor
    /// counts them or the tenant holds some, else CPU cores.
    pub fn resource(&self) -> Resource {
        let u = &self.usage;
        if u.limits.gpus.is_some() || u.in_use.gpus > 0 || u.limits.cpu.is_none() {
            Resource::Gpus
        } else {
            Resource::Cpu
        }
    }
}

/// The tenants view's loads and rows.
#[derive(Debug, Clone, Default)]
pub struct Tenants {
    pub poll: Poll,
    /// The last answer.
    pub view: Option<TenantsView>,
    pub rows: Vec<TenantRow>,
}

impl Tenants {
    /// Whether the engine said tenants are configured.
    pub fn configured(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.configured)
    }

    /// Entering the view: the tenants now.
    pub fn enter(&mut self, now: Millis) -> Vec<Effect> {
        effect(self.poll.ask(now))
    }

    /// While the view is shown: asks again every [`REFRESH`].
    pub fn due(&mut self, now: Millis) -> Vec<Effect> {
        effect(self.poll.due(now, REFRESH))
    }

    /// The tables changed, or the link came back: asks again (after the
    /// load in flight, if one is).
    pub fn reload(&mut self, now: Millis) -> Vec<Effect> {
        effect(self.poll.reload(now))
    }

    /// Takes the engine's answer; asks again if the tables changed
    /// meanwhile.
    pub fn answered(&mut self, got: Result<TenantsView, String>, now: Millis) -> Vec<Effect> {
        let got = got.map(|v| {
            self.rows = rows(&v);
            self.view = Some(v);
        });
        effect(self.poll.answered(got, now))
    }
}

fn effect(ask: bool) -> Vec<Effect> {
    if ask { vec![Effect::LoadTenants] } else { Vec::new() }
}

/// The view's rows: each tenant in each flavor, with what it lent and its
/// reclaims in flight.
pub fn rows(v: &TenantsView) -> Vec<TenantRow> {
    v.tenants
        .iter()
        .map(|u| TenantRow {
            usage: u.clone(),
            lent: u.lent,
            reclaims: v.reclaims.get(&u.tenant).copied().unwrap_or(0),
        })
        .collect()
}

/// `n` of `r` as a cell: GPUs as a count, CPU cores as cores.
pub fn num(r: Resource, n: u64) -> String {
    match r {
        Resource::Gpus => n.to_string(),
        Resource::Cpu => {
            let s = format!("{:.3}", n as f64 / 1000.0);
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    }
}

/// What binds the row's tenant, in words: per counted resource its use
/// against its limits; why its oldest waiting workload waits (the reason
/// `why pending` gives, with the quota's numbers); its reclaims in flight.
pub fn binds(row: &TenantRow, model: &Model, default_tenant: Option<&str>) -> Vec<String> {
    let u = &row.usage;
    let mut lines = Vec::new();
    for r in Resource::ALL {
        let Some(l) = u.limits.get(r) else { continue };
        let used = match r {
            Resource::Gpus => u.in_use.gpus,
            Resource::Cpu => u.in_use.cpu_milli,
        };
        let may = match l.borrowing {
            Some(b) => format!("may borrow {}", num(r, b)),
            None => "may borrow what its cohort lends".to_string(),
        };
        let lends = match l.lending {
            Some(x) => format!(", lends at most {}", num(r, x.min(l.nominal))),
            None => String::new(),
        };
        let at = match l.borrowing {
            Some(b) if used >= l.nominal.saturating_add(b) => " — at its limit: more work waits",
            _ if u.cohort.is_none() && used >= l.nominal => {
                " — at its nominal quota, no cohort to borrow from"
            }
            _ => "",
        };
        lines.push(format!(
            "{}: {} of nominal {} in use ({may}{lends}){at}",
            unit(r),
            num(r, used),
            num(r, l.nominal)
        ));
    }
    if u.limits.gpus.is_none() && u.limits.cpu.is_none() && !u.flavor.is_empty() {
        lines.push(format!("no quota in {}: its work there waits unless it may borrow", sanitize(&u.flavor)));
    }
    if u.flavor.is_empty() {
        lines.push(
            "no quota in any flavor: its work waits (an admin gives it one: canopy tenants apply)".into(),
        );
    }
    if u.waiting > 0 {
        lines.push(match oldest_waiting(model, &u.tenant, &u.flavor, default_tenant) {
            Some((id, reason)) => format!("{id} waits: {}", sanitize(reason)),
            None => format!("{} waiting (none of them held by this console)", u.waiting),
        });
    }
    if row.reclaims > 0 {
        let n = row.reclaims;
        lines.push(format!(
            "taking its own capacity back from borrowed work: {n} workload{} waiting for it",
            if n == 1 { "" } else { "s" }
        ));
    }
    lines
}

fn unit(r: Resource) -> &'static str {
    match r {
        Resource::Gpus => "GPUs",
        Resource::Cpu => "CPU cores",
    }
}

/// The tenant's oldest queued workload with a reason, preferring one whose
/// reason names the flavor.
fn oldest_waiting<'a>(
    model: &'a Model,
    tenant: &str,
    flavor: &str,
    default_tenant: Option<&str>,
) -> Option<(crate::engine::model::WorkloadId, &'a str)> {
    let waiting = model.workloads.values().filter(|w| {
        w.rec.state == WorkloadState::Queued
            && w.rec.tenant.as_deref().or(default_tenant) == Some(tenant)
            && w.rec.reason.is_some()
    });
    let named = format!(" {flavor} ");
    let mut first = None;
    for w in waiting {
        let reason = w.rec.reason.as_deref().unwrap_or("");
        if !flavor.is_empty() && reason.contains(&named) {
            return Some((w.rec.id, reason));
        }
        first.get_or_insert((w.rec.id, reason));
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn asks_once_at_a_time_and_again_after_a_change() {
        let mut t = Tenants::default();
        assert_eq!(t.enter(Millis(0)).len(), 1);
        assert!(t.due(Millis(1_000)).is_empty(), "one in flight");
        assert!(t.reload(Millis(1_500)).is_empty(), "asked again when it answers");
        let v = TenantsView {
            configured: false,
            default_tenant: None,
            tenants: Vec::new(),
            set_by: None,
            set_at: None,
            reclaims: BTreeMap::new(),
            fair_share: Vec::new(),
            budgets: Vec::new(),
        };
        assert_eq!(t.answered(Ok(v), Millis(2_000)).len(), 1, "the change asked for");
        assert!(t.answered(Err("gone".into()), Millis(2_100)).is_empty());
        assert!(t.due(Millis(3_000)).is_empty(), "not yet due");
        assert_eq!(t.due(Millis(2_000 + REFRESH)).len(), 1);
    }
}
