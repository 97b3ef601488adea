//! What each tenant's live work uses, per flavor: the GPUs and CPU cores
//! of its live attempts, counted in the flavor of the pool each runs on;
//! and the per-tenant report `GET /v1/tenants` and `canopy tenants` show.
//!
//! Pure: the caller hands in the fleet and the live attempts.

use super::config::Tenancy;
use super::flavor::PoolFacts;
use super::quota::{Amount, Limits};
use crate::fleet::{Fleet, PoolIdx};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One live attempt of a tenant's workload: where it runs and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct Placed<'a> {
    pub tenant: &'a str,
    pub provider: &'a str,
    /// The pool's name within its provider (not `provider/pool`).
    pub pool: &'a str,
    /// All nodes together.
    pub amount: Amount,
}

/// What a flavor may select pool `i` of `fleet` by.
pub fn facts<'a>(tenancy: &'a Tenancy, fleet: &'a Fleet, i: PoolIdx) -> PoolFacts<'a> {
    let pool = fleet.pool(i);
    let provider = fleet.provider_of(i).name.as_str();
    let accel = pool.shape.accelerator.as_ref();
    PoolFacts {
        provider,
        pool: pool.name.as_str(),
        family: accel.map(|a| a.family.as_str()),
        model: accel.map(|a| a.model.as_str()),
        owner: tenancy.owner_of(provider, &pool.name).map(|t| t.name.as_str()),
    }
}

/// The flavor a pool is counted in, by its provider and name; `None` for
/// a pool the fleet does not have or no flavor selects.
pub fn flavor_of<'a>(tenancy: &'a Tenancy, fleet: &Fleet, provider: &str, pool: &str) -> Option<&'a str> {
    let i = fleet.pool_by_name(provider, pool)?;
    tenancy.flavor_of(&facts(tenancy, fleet, i)).map(|f| f.name.as_str())
}

/// Usage per `(tenant, flavor)`; work on a pool no flavor selects is not
/// counted.
pub fn tally(tenancy: &Tenancy, fleet: &Fleet, placed: &[Placed<'_>]) -> BTreeMap<(String, String), Amount> {
    let mut out: BTreeMap<(String, String), Amount> = BTreeMap::new();
    for p in placed {
        if let Some(f) = flavor_of(tenancy, fleet, p.provider, p.pool) {
            let e = out.entry((p.tenant.to_string(), f.to_string())).or_default();
            *e = e.saturating_add(p.amount);
        }
    }
    out
}

/// One tenant in one flavor, as `GET /v1/tenants` reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TenantUsage {
    pub tenant: String,
    pub cohort: Option<String>,
    pub weight: f64,
    /// Empty for a tenant with no quota and no use in any flavor.
    pub flavor: String,
    /// Its limits there (nominal 0 where another tenant's quota counts a
    /// resource this one does not name).
    #[schemars(with = "serde_json::Value")]
    pub limits: Limits,
    /// GPUs and CPU cores (thousandths) its live attempts hold there.
    #[schemars(with = "serde_json::Value")]
    pub in_use: Amount,
    /// What of `in_use` is beyond its nominal quota: borrowed from its cohort.
    #[schemars(with = "serde_json::Value")]
    pub borrowed: Amount,
    /// Its workloads waiting to be placed (all flavors).
    pub waiting: u64,
}

/// Every tenant's rows, in the file's order of tenants and flavors: a row
/// per flavor where it has a quota or uses something, and one row with an
/// empty flavor for a tenant with neither.
pub fn report(
    tenancy: &Tenancy,
    used: &BTreeMap<(String, String), Amount>,
    waiting: &BTreeMap<String, u64>,
) -> Vec<TenantUsage> {
    let mut rows = Vec::new();
    for t in &tenancy.tenants {
        let waiting = waiting.get(&t.name).copied().unwrap_or(0);
        let row = |flavor: &str, limits: Limits, in_use: Amount| TenantUsage {
            tenant: t.name.clone(),
            cohort: t.cohort.clone(),
            weight: t.weight,
            flavor: flavor.to_string(),
            limits,
            in_use,
            borrowed: in_use.saturating_sub(limits.nominal()),
            waiting,
        };
        let before = rows.len();
        for f in &tenancy.flavors {
            let limits = tenancy.limits(t, &f.name);
            let in_use = used.get(&(t.name.clone(), f.name.clone())).copied().unwrap_or_default();
            if limits.gpus.is_some() || limits.cpu.is_some() || !in_use.is_zero() {
                rows.push(row(&f.name, limits, in_use));
            }
        }
        if rows.len() == before {
            rows.push(row("", Limits::default(), Amount::ZERO));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::TenancyDoc;

    const DOC: &str = r#"
[[flavor]]
name = "gpu"
cpu_only = false
[[flavor]]
name = "cpu"
cpu_only = true
[[tenant]]
name = "a"
cohort = "c"
[tenant.quota.gpu]
gpus = 2
[[tenant]]
name = "b"
cohort = "c"
[tenant.quota.gpu]
gpus = 8
"#;

    #[test]
    fn live_work_counts_in_its_pools_flavor_and_beyond_nominal_is_borrowed() {
        let (_, tenancy) = TenancyDoc::parse(DOC, false).unwrap();
        let fleet = crate::fleet::load::demo().unwrap();
        let gpu_pool = fleet.pools.iter().find(|p| p.shape.accelerator.is_some()).unwrap();
        let cpu_pool = fleet.pools.iter().find(|p| p.shape.accelerator.is_none()).unwrap();
        let prov = |p: &crate::fleet::Pool| fleet.provider(p.provider).name.clone();
        let (gp, cp) = (prov(gpu_pool), prov(cpu_pool));
        let placed = [
            Placed { tenant: "a", provider: &gp, pool: &gpu_pool.name, amount: Amount::new(3, 4000) },
            Placed { tenant: "a", provider: &gp, pool: &gpu_pool.name, amount: Amount::new(1, 0) },
            Placed { tenant: "b", provider: &cp, pool: &cpu_pool.name, amount: Amount::new(0, 2000) },
            Placed { tenant: "b", provider: "nowhere", pool: "x", amount: Amount::new(5, 0) },
        ];
        let used = tally(&tenancy, &fleet, &placed);
        assert_eq!(used.get(&("a".into(), "gpu".into())), Some(&Amount::new(4, 4000)));
        assert_eq!(used.get(&("b".into(), "cpu".into())), Some(&Amount::new(0, 2000)));
        assert_eq!(used.len(), 2, "a pool the fleet lacks counts nowhere");
        let waiting = BTreeMap::from([("b".to_string(), 3)]);
        let rows = report(&tenancy, &used, &waiting);
        let a = rows.iter().find(|r| r.tenant == "a" && r.flavor == "gpu").unwrap();
        assert_eq!((a.in_use.gpus, a.borrowed.gpus, a.waiting), (4, 2, 0));
        let b_cpu = rows.iter().find(|r| r.tenant == "b" && r.flavor == "cpu").unwrap();
        assert_eq!((b_cpu.in_use.cpu_milli, b_cpu.waiting), (2000, 3));
        assert_eq!(rows.len(), 3);
    }
}
