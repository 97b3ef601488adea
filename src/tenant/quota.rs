//! Admission arithmetic: may this tenant start this much more work in this
//! flavor, and if not, which limit binds, in numbers.
//!
//! The rules are Kueue's ClusterQueue rules, per flavor and per counted
//! resource (GPUs, CPU cores), within one cohort:
//!
//! - a tenant's usage never exceeds its nominal quota plus its borrowing
//!   limit (none: whatever the cohort can lend);
//! - of its nominal quota a tenant lends at most its lending limit (none:
//!   all of it); the rest, `nominal − lending`, is its alone;
//! - the cohort's shared capacity is the sum of what its members lend, and
//!   the members' use of it — each one's usage beyond what is its alone —
//!   never exceeds it.
//!
//! A tenant alone (no cohort) is a cohort of one: it may use its nominal
//! quota and nothing more. Work within its tenant's nominal quota is always
//! admissible: if borrowers hold what it needs, [`Admission::Reclaim`] says
//! how much they must give back.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An amount of the resources quotas count: GPUs, and CPU cores in
/// thousandths (exact arithmetic; 1.5 cores is 1500).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Amount {
    pub gpus: u64,
    pub cpu_milli: u64,
}

impl Amount {
    pub const ZERO: Amount = Amount { gpus: 0, cpu_milli: 0 };

    pub fn new(gpus: u64, cpu_milli: u64) -> Self {
        Self { gpus, cpu_milli }
    }
    /// What a request takes in all, the one rule for every tally: its
    /// GPUs and CPU cores (in thousandths) per node, times its nodes (at
    /// least one).
    pub fn taken(gpus: u32, cpu_cores: f64, nodes: u64) -> Self {
        let n = nodes.max(1);
        Self::new(u64::from(gpus) * n, (cpu_cores * 1000.0).round().max(0.0) as u64 * n)
    }
    pub fn is_zero(&self) -> bool {
        self.gpus == 0 && self.cpu_milli == 0
    }
    pub fn saturating_add(self, o: Amount) -> Amount {
        Amount {
            gpus: self.gpus.saturating_add(o.gpus),
            cpu_milli: self.cpu_milli.saturating_add(o.cpu_milli),
        }
    }
    pub fn saturating_sub(self, o: Amount) -> Amount {
        Amount {
            gpus: self.gpus.saturating_sub(o.gpus),
            cpu_milli: self.cpu_milli.saturating_sub(o.cpu_milli),
        }
    }
    /// Whether every resource of `self` is at least `o`'s.
    pub fn covers(&self, o: &Amount) -> bool {
        self.gpus >= o.gpus && self.cpu_milli >= o.cpu_milli
    }
    fn get(&self, r: Resource) -> u64 {
        match r {
            Resource::Gpus => self.gpus,
            Resource::Cpu => self.cpu_milli,
        }
    }
    fn set(&mut self, r: Resource, v: u64) {
        match r {
            Resource::Gpus => self.gpus = v,
            Resource::Cpu => self.cpu_milli = v,
        }
    }
}

/// The resources quotas count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    Gpus,
    Cpu,
}

impl Resource {
    pub const ALL: [Resource; 2] = [Resource::Gpus, Resource::Cpu];

    /// `n` of this resource as a person reads it ("16 GPUs", "3.5 CPU cores").
    pub fn show(self, n: u64) -> String {
        match self {
            Resource::Gpus if n == 1 => "1 GPU".into(),
            Resource::Gpus => format!("{n} GPUs"),
            Resource::Cpu => {
                let cores = n as f64 / 1000.0;
                if n == 1000 { "1 CPU core".into() } else { format!("{} CPU cores", trim(cores)) }
            }
        }
    }
    fn unit(self) -> &'static str {
        match self {
            Resource::Gpus => "GPUs",
            Resource::Cpu => "CPU cores",
        }
    }
    fn num(self, n: u64) -> String {
        match self {
            Resource::Gpus => n.to_string(),
            Resource::Cpu => trim(n as f64 / 1000.0),
        }
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One tenant's limits for one resource of one flavor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Limit {
    /// Guaranteed to the tenant.
    pub nominal: u64,
    /// The most it may use beyond `nominal`, borrowed from its cohort;
    /// `None`: as much as the cohort lends.
    pub borrowing: Option<u64>,
    /// The most of its unused nominal quota others may borrow; `None`: all.
    pub lending: Option<u64>,
}

impl Limit {
    /// What of `nominal` the tenant keeps for itself.
    fn own(&self) -> u64 {
        self.nominal - self.lendable()
    }
    /// What of `nominal` the cohort may borrow when unused.
    fn lendable(&self) -> u64 {
        self.lending.map_or(self.nominal, |l| l.min(self.nominal))
    }
    /// The most the tenant may use.
    fn ceiling(&self) -> Option<u64> {
        self.borrowing.map(|b| self.nominal.saturating_add(b))
    }
}

/// One tenant's limits in one flavor: per resource, `None` where the flavor
/// does not count that resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Limits {
    pub gpus: Option<Limit>,
    pub cpu: Option<Limit>,
}

impl Limits {
    pub fn get(&self, r: Resource) -> Option<Limit> {
        match r {
            Resource::Gpus => self.gpus,
            Resource::Cpu => self.cpu,
        }
    }
    /// Whether `used` is within the nominal quota in every counted resource.
    pub fn within_nominal(&self, used: &Amount) -> bool {
        self.gpus.is_none_or(|l| used.gpus <= l.nominal)
            && self.cpu.is_none_or(|l| used.cpu_milli <= l.nominal)
    }

    /// The nominal quota as an amount (0 where uncounted).
    pub fn nominal(&self) -> Amount {
        Amount { gpus: self.gpus.map_or(0, |l| l.nominal), cpu_milli: self.cpu.map_or(0, |l| l.nominal) }
    }
}

/// One member of a cohort, in one flavor: its name, limits and usage.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage<'a> {
    pub tenant: &'a str,
    pub limits: Limits,
    pub used: Amount,
}

/// What admission decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// It fits; `borrowed` is how much of the tenant's usage, with this
    /// work, is beyond its nominal quota.
    Admit { borrowed: Amount },
    /// It is within the tenant's nominal quota, but others borrow what the
    /// tenant lent: they must give back `reclaim` before it fits.
    Reclaim { reclaim: Amount },
    /// It must wait; the reason names the binding limit.
    Wait(Wait),
}

/// Why work waits for quota: the binding limit, with the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub tenant: String,
    pub flavor: String,
    pub resource: Resource,
    /// In use now, requested, the tenant's nominal and borrowing limit.
    pub used: u64,
    pub request: u64,
    pub nominal: u64,
    pub borrowing: Option<u64>,
    /// `Some` when the cohort has nothing more to lend: what it lends in
    /// all, what of that others use, and the members whose lending limit
    /// keeps idle quota back.
    pub cohort: Option<CohortShort>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CohortShort {
    pub name: String,
    /// The cohort's shared capacity and what of it is in use.
    pub shared: u64,
    pub shared_used: u64,
    /// Idle nominal quota others hold back by their lending limit.
    pub held_back: Vec<(String, u64)>,
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.resource;
        let may = match self.borrowing {
            Some(b) => format!("may borrow {}", r.num(b)),
            None => "may borrow what its cohort lends".into(),
        };
        let used = match self.borrowing {
            Some(b) => format!("{}/{}", r.num(self.used), r.num(self.nominal.saturating_add(b))),
            None => r.num(self.used),
        };
        write!(
            f,
            "{}: {used} {} {} in use, {} more asked (nominal {}, {may})",
            self.tenant,
            self.flavor,
            r.unit(),
            r.num(self.request),
            r.num(self.nominal),
        )?;
        if let Some(c) = &self.cohort {
            write!(
                f,
                "; cohort {} lends {} and all of it is in use ({})",
                c.name,
                r.show(c.shared),
                r.num(c.shared_used)
            )?;
            if !c.held_back.is_empty() {
                let held: Vec<String> =
                    c.held_back.iter().map(|(t, n)| format!("{} of {t}'s", r.num(*n))).collect();
                write!(f, "; idle but not lent (lending limit): {}", held.join(", "))?;
            }
        }
        Ok(())
    }
}

/// May `tenant` (one of `members`, the cohort's members in this flavor, or
/// the tenant alone when it has no cohort) start `request` more in
/// `flavor`?
///
/// Returns `None` when `tenant` is not among `members`.
pub fn admit(
    cohort: Option<&str>,
    flavor: &str,
    members: &[Usage<'_>],
    tenant: &str,
    request: Amount,
) -> Option<Admission> {
    let me = members.iter().position(|m| m.tenant == tenant)?;
    let mut reclaim = Amount::ZERO;
    let mut borrowed = Amount::ZERO;
    for r in Resource::ALL {
        let req = request.get(r);
        let Some(limit) = members[me].limits.get(r) else {
            // Uncounted here: no limit, nothing borrowed.
            continue;
        };
        let used = members[me].used.get(r);
        let after = used.saturating_add(req);
        let wait = |cohort_short: Option<CohortShort>| Wait {
            tenant: tenant.to_string(),
            flavor: flavor.to_string(),
            resource: r,
            used,
            request: req,
            nominal: limit.nominal,
            borrowing: limit.borrowing,
            cohort: cohort_short,
        };
        if limit.ceiling().is_some_and(|c| after > c) || (cohort.is_none() && after > limit.nominal) {
            let mut w = wait(None);
            if cohort.is_none() {
                w.borrowing = Some(0);
            }
            return Some(Admission::Wait(w));
        }
        // The cohort's shared capacity and its use, with the request added.
        let shared: u64 = members.iter().filter_map(|m| m.limits.get(r)).map(|l| l.lendable()).sum();
        let shared_use = |extra: u64| -> u64 {
            members
                .iter()
                .enumerate()
                .filter_map(|(i, m)| {
                    let l = m.limits.get(r)?;
                    let u = m.used.get(r).saturating_add(if i == me { extra } else { 0 });
                    Some(u.saturating_sub(l.own()))
                })
                .sum()
        };
        let over = shared_use(req).saturating_sub(shared);
        if over > 0 {
            if after <= limit.nominal {
                // Within its guarantee: borrowers give back what they hold
                // beyond their own nominal quota.
                reclaim.set(r, over);
            } else {
                let held_back = members
                    .iter()
                    .filter(|m| m.tenant != tenant)
                    .filter_map(|m| {
                        let l = m.limits.get(r)?;
                        let idle = l.nominal.saturating_sub(m.used.get(r));
                        let lent = l.lendable().min(idle);
                        (idle > lent).then(|| (m.tenant.to_string(), idle - lent))
                    })
                    .collect();
                let name = cohort.unwrap_or(tenant).to_string();
                return Some(Admission::Wait(wait(Some(CohortShort {
                    name,
                    shared,
                    shared_used: shared_use(0),
                    held_back,
                }))));
            }
        }
        borrowed.set(r, after.saturating_sub(limit.nominal));
    }
    Some(if reclaim.is_zero() { Admission::Admit { borrowed } } else { Admission::Reclaim { reclaim } })
}

/// Whether a cohort's state keeps every rule (for tests and checks after a
/// quota change): each member within nominal + borrowing, and the shared
/// use within the shared capacity.
pub fn within(members: &[Usage<'_>], alone: bool) -> bool {
    Resource::ALL.into_iter().all(|r| {
        let each = members.iter().all(|m| match m.limits.get(r) {
            None => true,
            Some(l) => {
                let u = m.used.get(r);
                l.ceiling().is_none_or(|c| u <= c) && (!alone || u <= l.nominal)
            }
        });
        let shared: u64 = members.iter().filter_map(|m| m.limits.get(r)).map(|l| l.lendable()).sum();
        let shared_use: u64 = members
            .iter()
            .filter_map(|m| m.limits.get(r).map(|l| m.used.get(r).saturating_sub(l.own())))
            .sum();
        each && shared_use <= shared
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(nominal: u64, borrowing: Option<u64>, lending: Option<u64>) -> Limits {
        Limits { gpus: Some(Limit { nominal, borrowing, lending }), cpu: None }
    }
    fn member(t: &str, l: Limits, used: u64) -> Usage<'_> {
        Usage { tenant: t, limits: l, used: Amount::new(used, 0) }
    }

    #[test]
    fn idle_quota_of_the_cohort_is_borrowed_up_to_the_borrowing_limit() {
        let m = [member("team-a", gpus(16, Some(0), None), 0), member("team-b", gpus(16, Some(8), None), 16)];
        let a = admit(Some("research"), "a100", &m, "team-b", Amount::new(8, 0));
        assert_eq!(a, Some(Admission::Admit { borrowed: Amount::new(8, 0) }));
        let w = admit(Some("research"), "a100", &m, "team-b", Amount::new(9, 0));
        let Some(Admission::Wait(w)) = w else { panic!("{w:?}") };
        assert_eq!(w.to_string(), "team-b: 16/24 a100 GPUs in use, 9 more asked (nominal 16, may borrow 8)");
    }

    #[test]
    fn the_lending_limit_keeps_idle_quota_back_and_the_reason_says_whose() {
        let m = [member("team-a", gpus(32, Some(0), Some(8)), 0), member("team-b", gpus(16, None, None), 24)];
        let w = admit(Some("research"), "a100", &m, "team-b", Amount::new(1, 0));
        let Some(Admission::Wait(w)) = w else { panic!("{w:?}") };
        assert_eq!(
            w.to_string(),
            "team-b: 24 a100 GPUs in use, 1 more asked (nominal 16, may borrow what its cohort lends); \
             cohort research lends 24 GPUs and all of it is in use (24); idle but not lent (lending limit): 24 of team-a's"
        );
    }

    #[test]
    fn an_owner_within_its_nominal_quota_reclaims_what_is_borrowed() {
        let m = [member("team-a", gpus(16, Some(0), None), 4), member("team-b", gpus(0, None, None), 12)];
        assert_eq!(
            admit(Some("c"), "a100", &m, "team-a", Amount::new(8, 0)),
            Some(Admission::Reclaim { reclaim: Amount::new(8, 0) })
        );
        assert_eq!(
            admit(Some("c"), "a100", &m, "team-a", Amount::new(12, 0)),
            Some(Admission::Reclaim { reclaim: Amount::new(12, 0) })
        );
        let w = admit(Some("c"), "a100", &m, "team-a", Amount::new(13, 0));
        assert!(matches!(w, Some(Admission::Wait(_))), "{w:?}");
    }

    #[test]
    fn a_tenant_alone_uses_its_nominal_quota_and_no_more() {
        let m = [member("solo", gpus(4, None, None), 3)];
        assert_eq!(
            admit(None, "a100", &m, "solo", Amount::new(1, 0)),
            Some(Admission::Admit { borrowed: Amount::ZERO })
        );
        let Some(Admission::Wait(w)) = admit(None, "a100", &m, "solo", Amount::new(2, 0)) else { panic!() };
        assert_eq!(w.to_string(), "solo: 3/4 a100 GPUs in use, 2 more asked (nominal 4, may borrow 0)");
    }

    #[test]
    fn uncounted_resources_do_not_limit_and_cpu_reads_in_cores() {
        let l = Limits { gpus: None, cpu: Some(Limit { nominal: 8000, borrowing: Some(0), lending: None }) };
        let m = [member("t", l, 0)];
        assert_eq!(
            admit(Some("c"), "cpu", &m, "t", Amount::new(64, 7500)),
            Some(Admission::Admit { borrowed: Amount::ZERO })
        );
        let Some(Admission::Wait(w)) = admit(Some("c"), "cpu", &m, "t", Amount::new(0, 8500)) else {
            panic!()
        };
        assert_eq!(w.to_string(), "t: 0/8 cpu CPU cores in use, 8.5 more asked (nominal 8, may borrow 0)");
        assert_eq!(Resource::Cpu.show(1500), "1.5 CPU cores");
    }

    #[test]
    fn unknown_tenants_are_not_admitted_here() {
        let m = [member("a", gpus(1, None, None), 0)];
        assert_eq!(admit(None, "f", &m, "b", Amount::new(1, 0)), None);
    }
}
