//! The tenants view's data: the engine's tenants with their quotas and
//! usage (`GET /v1/tenants`, the numbers `canopy tenants` prints), loaded
//! on entering the view, every [`REFRESH`] while it is shown, when the
//! tables change (a `tenants-set` audit record goes by) and after a
//! reconnection; and what the view derives from them: what each tenant
//! lends, and what binds it.
//!
//! What a tenant *lent* is what of its idle nominal quota others in its
//! cohort use now: the cohort's borrowing (each member's use beyond its
//! nominal) shared among the members with idle quota to lend, in
//! proportion to what each has idle (in a cohort of two, exactly what the
//! other borrows). One load is in flight at a time. Pure: no I/O.

use super::model::Model;
use super::msg::Effect;
use crate::engine::model::{Millis, WorkloadState};
use crate::server::tenants::TenantsView;
use crate::tenant::usage::TenantUsage;
use crate::tenant::{Amount, Limit, Limits, Resource};
use crate::text::sanitize;
use std::collections::BTreeMap;

/// How often the view asks again while it is shown.
pub const REFRESH: i64 = 5_000;

/// Where the tenants load stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TenantsLoad {
    #[default]
    NotAsked,
    Loading,
    Loaded,
    /// The engine would not give them, or could not be reached (a replay
    /// has none to give).
    Failed(String),
}

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
    pub load: TenantsLoad,
    /// The last answer.
    pub view: Option<TenantsView>,
    pub rows: Vec<TenantRow>,
    in_flight: bool,
    /// Asked again when the answer in flight comes: the tables changed
    /// after it was asked.
    again: bool,
    asked_at: Option<Millis>,
}

impl Tenants {
    /// Whether the engine said tenants are configured.
    pub fn configured(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.configured)
    }

    /// Entering the view: the tenants now.
    pub fn enter(&mut self, now: Millis) -> Vec<Effect> {
        self.ask(now)
    }

    /// While the view is shown: asks again every [`REFRESH`].
    pub fn due(&mut self, now: Millis) -> Vec<Effect> {
        match self.asked_at {
            Some(at) if now.0.saturating_sub(at.0) < REFRESH => Vec::new(),
            _ => self.ask(now),
        }
    }

    /// The tables changed, or the link came back: asks again (after the
    /// load in flight, if one is).
    pub fn reload(&mut self, now: Millis) -> Vec<Effect> {
        if self.in_flight {
            self.again = true;
            return Vec::new();
        }
        self.ask(now)
    }

    /// Takes the engine's answer; asks again if the tables changed
    /// meanwhile.
    pub fn answered(&mut self, got: Result<TenantsView, String>, now: Millis) -> Vec<Effect> {
        self.in_flight = false;
        match got {
            Ok(v) => {
                self.rows = rows(&v);
                self.view = Some(v);
                self.load = TenantsLoad::Loaded;
            }
            Err(e) => self.load = TenantsLoad::Failed(e),
        }
        if std::mem::take(&mut self.again) { self.ask(now) } else { Vec::new() }
    }

    fn ask(&mut self, now: Millis) -> Vec<Effect> {
        self.asked_at = Some(now);
        if self.in_flight {
            return Vec::new();
        }
        self.in_flight = true;
        if self.view.is_none() {
            self.load = TenantsLoad::Loading;
        }
        vec![Effect::LoadTenants]
    }
}

/// The view's rows: each tenant in each flavor, with what it lent and its
/// reclaims in flight.
pub fn rows(v: &TenantsView) -> Vec<TenantRow> {
    let lent = lent(&v.tenants);
    v.tenants
        .iter()
        .zip(lent)
        .map(|(u, lent)| TenantRow {
            usage: u.clone(),
            lent,
            reclaims: v.reclaims.get(&u.tenant).copied().unwrap_or(0),
        })
        .collect()
}

/// What of its nominal quota a tenant may lend and does not use itself
/// (its own use goes first to what it keeps, `nominal − lendable`).
fn idle_lendable(l: Option<Limit>, used: u64) -> u64 {
    let Some(l) = l else { return 0 };
    let lendable = l.lending.map_or(l.nominal, |x| x.min(l.nominal));
    let own = l.nominal - lendable;
    let in_lendable = used.min(l.nominal).saturating_sub(own);
    lendable - in_lendable
}

/// Per row (same order): what others of its cohort use of its idle
/// nominal quota. Each cohort and flavor's borrowing is shared among its
/// lenders by their idle quota, largest remainders first (so it adds up).
pub fn lent(rows: &[TenantUsage]) -> Vec<Amount> {
    let mut out = vec![Amount::ZERO; rows.len()];
    let mut groups: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(c) = &r.cohort
            && !r.flavor.is_empty()
        {
            groups.entry((c.as_str(), r.flavor.as_str())).or_default().push(i);
        }
    }
    for members in groups.values() {
        for res in Resource::ALL {
            let get = |a: &Amount| match res {
                Resource::Gpus => a.gpus,
                Resource::Cpu => a.cpu_milli,
            };
            let limit = |l: &Limits| l.get(res);
            let idle: Vec<u64> = members
                .iter()
                .map(|&i| idle_lendable(limit(&rows[i].limits), get(&rows[i].in_use)))
                .collect();
            let pool: u64 = idle.iter().sum();
            let borrowed: u64 = members.iter().map(|&i| get(&rows[i].borrowed)).sum();
            let take = borrowed.min(pool);
            if take == 0 {
                continue;
            }
            let share = shares(take, &idle);
            for (k, &i) in members.iter().enumerate() {
                match res {
                    Resource::Gpus => out[i].gpus = share[k],
                    Resource::Cpu => out[i].cpu_milli = share[k],
                }
            }
        }
    }
    out
}

/// `total` shared in proportion to `weights` (whole units, largest
/// remainders first, ties to the first), never more than each weight.
fn shares(total: u64, weights: &[u64]) -> Vec<u64> {
    let sum: u128 = weights.iter().map(|&w| u128::from(w)).sum();
    if sum == 0 {
        return vec![0; weights.len()];
    }
    let exact: Vec<(u64, u128)> = weights
        .iter()
        .map(|&w| {
            let p = u128::from(total) * u128::from(w);
            ((p / sum) as u64, p % sum)
        })
        .collect();
    let mut out: Vec<u64> = exact.iter().map(|e| e.0).collect();
    let mut left = total - out.iter().sum::<u64>();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| exact[b].1.cmp(&exact[a].1).then(a.cmp(&b)));
    for i in order {
        if left == 0 {
            break;
        }
        if out[i] < weights[i] {
            out[i] += 1;
            left -= 1;
        }
    }
    out
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

    fn usage(tenant: &str, cohort: &str, nominal: u64, lending: Option<u64>, used: u64) -> TenantUsage {
        let limits = Limits { gpus: Some(Limit { nominal, borrowing: None, lending }), cpu: None };
        TenantUsage {
            tenant: tenant.into(),
            cohort: Some(cohort.into()),
            weight: 1.0,
            flavor: "a100".into(),
            limits,
            in_use: Amount::new(used, 0),
            borrowed: Amount::new(used.saturating_sub(nominal), 0),
            waiting: 0,
        }
    }

    #[test]
    fn in_a_cohort_of_two_one_lends_what_the_other_borrows() {
        let rows = [usage("a", "c", 16, None, 4), usage("b", "c", 8, None, 14)];
        let lent = lent(&rows);
        assert_eq!((lent[0].gpus, lent[1].gpus), (6, 0));
    }

    #[test]
    fn borrowing_is_shared_by_idle_quota_and_adds_up() {
        // b borrows 5; a has 8 idle, c has 2 idle but lends only 1 of its 4.
        let rows = [
            usage("a", "c", 8, None, 0),
            usage("b", "c", 2, None, 7),
            usage("c", "c", 4, Some(1), 2),
            usage("d", "other", 8, None, 0),
        ];
        let lent = lent(&rows);
        let g: Vec<u64> = lent.iter().map(|a| a.gpus).collect();
        assert_eq!(g.iter().sum::<u64>(), 5, "{g:?}");
        assert_eq!(g, vec![4, 0, 1, 0], "a has 8 idle of 9 lendable in all, c 1; d is in another cohort");
    }

    #[test]
    fn shares_never_exceed_a_weight() {
        assert_eq!(shares(3, &[1, 1, 1]), vec![1, 1, 1]);
        assert_eq!(shares(2, &[1, 1, 1]), vec![1, 1, 0]);
        assert_eq!(shares(0, &[4, 4]), vec![0, 0]);
        assert_eq!(shares(5, &[0, 0]), vec![0, 0]);
    }

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
        };
        assert_eq!(t.answered(Ok(v), Millis(2_000)).len(), 1, "the change asked for");
        assert!(t.answered(Err("gone".into()), Millis(2_100)).is_empty());
        assert!(t.due(Millis(3_000)).is_empty(), "not yet due");
        assert_eq!(t.due(Millis(2_000 + REFRESH)).len(), 1);
    }
}
