//! What each tenant's live work uses, per flavor: the GPUs and CPU cores
//! of its live attempts, counted in the flavor of the pool each runs on;
//! and the per-tenant report `GET /v1/tenants` and `canopy tenants` show.
//!
//! Pure: the caller hands in the fleet and the live attempts.

use super::config::Tenancy;
use super::flavor::PoolFacts;
use super::quota::{Amount, Limit, Limits, Resource};
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
    /// What of its idle nominal quota others of its cohort use now
    /// ([`lent`]).
    #[serde(default)]
    #[schemars(with = "serde_json::Value")]
    pub lent: Amount,
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
            lent: Amount::ZERO,
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
    let lent = lent(&rows);
    for (r, l) in rows.iter_mut().zip(lent) {
        r.lent = l;
    }
    rows
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
            lent: Amount::ZERO,
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
}
