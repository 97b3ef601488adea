//! Tenants in the simulator: which tenant a trace's job is submitted for,
//! and what sharing did to each tenant (the per-tenant rows of the
//! report).
//!
//! The fleet file's tenancy (`[[tenant]]`, `[[flavor]]`, as in
//! `canopy.toml`) is handed to the engine core as it is in production
//! (`Event::SetTenancy`), so quotas, borrowing and owners' reclaims are
//! the core's own. This file only assigns jobs to tenants and measures:
//!
//! - per tenant: jobs, completed GPU-hours (trace GPU-hours of the jobs
//!   that succeeded), GPU-hours used, queue wait p50/p99;
//! - owners' reclaims: from the core's `reclaim` event on the owner's
//!   workload to that workload's next placement, against the owner's
//!   `max_reclaim_delay`;
//! - the longest time a tenant was *refused its nominal quota*
//!   ([`Refusals`]).
//!
//! No I/O, no clock: a function of the records and the core's state.

use super::metrics::{TenantReport, percentile};
use super::trace::Job;
use crate::engine::core::Core;
use crate::engine::model::{EventKind, Millis, Record, WorkloadId, WorkloadState};
use crate::failure::FailureClass;
use crate::fleet::{Fleet, NodeState, PoolIdx};
use crate::spec::Spec;
use crate::tenant::{Admission, Amount, Tenancy};
use std::collections::{BTreeMap, HashMap};

/// The documented rule for jobs whose trace names no tenant (Gavel's TSV
/// has no such column): round-robin by arrival. The `i`-th job of the
/// trace in submit order (0-based) goes to the `i mod N`-th of the N
/// `[[tenant]]` tables, in the order the fleet file lists them. Jobs that
/// name a tenant keep it; a name that is not a `[[tenant]]` is an error.
pub fn assign(jobs: &mut [Job], tenancy: &Tenancy) -> Result<(), String> {
    let n = tenancy.tenants.len();
    for (i, j) in jobs.iter_mut().enumerate() {
        match &j.tenant {
            Some(t) if n > 0 && tenancy.tenant(t).is_none() => {
                let known: Vec<&str> = tenancy.tenants.iter().map(|t| t.name.as_str()).collect();
                return Err(format!(
                    "job {i} ({}) names tenant {t:?}, which the fleet file does not define (defined: {}); \
                     fix the trace's tenant column or add the [[tenant]]",
                    j.name,
                    known.join(", ")
                ));
            }
            Some(_) => {}
            None if n > 0 => j.tenant = Some(tenancy.tenants[i % n].name.as_str().into()),
            None => {}
        }
    }
    Ok(())
}

/// The amount a spec takes in all: its GPUs and CPU cores times its nodes.
fn amount_of(spec: &Spec) -> Amount {
    Amount::taken(spec.resources.gpus, spec.resources.cpu_cores, u64::from(spec.nodes()))
}

/// The longest time each tenant was refused its nominal quota.
///
/// A tenant is *refused* at an instant when it has a workload waiting
/// (queued, not in a retry backoff) that, in some flavor, (a) fits within
/// its nominal quota there on top of what it uses there, (b) some pool of
/// that flavor could host if it were empty, while (c) another tenant uses
/// more than its own nominal quota in that flavor — capacity it is
/// guaranteed is held by someone borrowing it — and (d) no pool its quotas
/// leave open to it can host it now (busy nodes, or a lend limit
/// reached). Work that could start now somewhere open to it and waits by
/// the policy's choice (patience for a cheaper pool) is not refused.
/// Checked whenever virtual time moves on; an interval of refusal runs
/// from the first instant it holds to the first it no longer does.
pub struct Refusals {
    /// Per flavor (index into the tenancy's flavors), its pools.
    flavor_pools: Vec<Vec<PoolIdx>>,
    /// Each pool's flavor, by `PoolIdx`.
    pool_flavor: Vec<Option<usize>>,
    /// Since when each refused tenant has been refused (virtual ms).
    open: BTreeMap<String, i64>,
    /// The longest closed interval per tenant, seconds.
    longest: BTreeMap<String, f64>,
}

impl Refusals {
    pub fn new(tenancy: &Tenancy, fleet: &Fleet) -> Self {
        let mut flavor_pools = vec![Vec::new(); tenancy.flavors.len()];
        let mut pool_flavor = Vec::new();
        for i in 0..fleet.pools.len() {
            let p = PoolIdx(i as u32);
            let facts = crate::tenant::usage::facts(tenancy, fleet, p);
            let fi = crate::tenant::flavor::flavor_of(&tenancy.flavors, &facts);
            if let Some(fi) = fi {
                flavor_pools[fi].push(p);
            }
            pool_flavor.push(fi);
        }
        Refusals { flavor_pools, pool_flavor, open: BTreeMap::new(), longest: BTreeMap::new() }
    }

    /// Looks at the core's state at `now` (every event at `now` handled).
    pub fn observe(&mut self, now: Millis, core: &Core) {
        let tenancy = core.tenancy();
        if tenancy.is_empty() {
            return;
        }
        let used: HashMap<(String, String), Amount> =
            core.tenant_usage().into_iter().map(|(t, f, a)| ((t, f), a)).collect();
        let used_of =
            |t: &str, f: &str| used.get(&(t.to_string(), f.to_string())).copied().unwrap_or_default();
        // Per flavor: whether some tenant uses more than its nominal quota.
        let borrowed: Vec<Vec<&str>> = tenancy
            .flavors
            .iter()
            .map(|f| {
                tenancy
                    .tenants
                    .iter()
                    .filter(|t| !tenancy.limits(t, &f.name).within_nominal(&used_of(&t.name, &f.name)))
                    .map(|t| t.name.as_str())
                    .collect()
            })
            .collect();
        let fleet = core.fleet();
        let mut refused: Vec<String> = Vec::new();
        for w in core.live_workloads() {
            if w.state != WorkloadState::Queued || w.not_before.is_some_and(|t| t > now) {
                continue;
            }
            let Some(tn) = w.tenant.as_deref().or(tenancy.default_tenant.as_deref()) else { continue };
            if refused.iter().any(|r| r == tn) {
                continue;
            }
            let Some(t) = tenancy.tenant(tn) else { continue };
            let want = amount_of(&w.spec);
            let owed = tenancy.flavors.iter().enumerate().any(|(fi, f)| {
                let limits = tenancy.limits(t, &f.name);
                limits.gpus.is_some_and(|l| l.nominal > 0)
                    && limits.within_nominal(&used_of(tn, &f.name).saturating_add(want))
                    && borrowed[fi].iter().any(|b| *b != tn)
                    && self.flavor_pools[fi].iter().any(|&p| hosts(fleet, p, &w.spec, false))
            });
            if !owed {
                continue;
            }
            // The flavors its quotas admit it to now, as the core asks.
            let open: Vec<bool> = tenancy
                .flavors
                .iter()
                .map(|f| {
                    let members = tenancy.members(t, &f.name, |who| used_of(who, &f.name));
                    matches!(
                        crate::tenant::admit(t.cohort.as_deref(), &f.name, &members, tn, want),
                        Some(Admission::Admit { .. } | Admission::Reclaim { .. })
                    )
                })
                .collect();
            let could_start = (0..fleet.pools.len()).any(|i| {
                self.pool_flavor[i].is_none_or(|fi| open[fi])
                    && hosts(fleet, PoolIdx(i as u32), &w.spec, true)
            });
            if !could_start {
                refused.push(tn.to_string());
            }
        }
        let closed: Vec<String> = self.open.keys().filter(|t| !refused.contains(t)).cloned().collect();
        for t in closed {
            if let Some(since) = self.open.remove(&t) {
                self.close(&t, since, now);
            }
        }
        for t in refused {
            self.open.entry(t).or_insert(now.0);
        }
    }

    fn close(&mut self, tenant: &str, since: i64, now: Millis) {
        let s = now.secs_since(Millis(since)).max(0.0);
        let l = self.longest.entry(tenant.to_string()).or_default();
        *l = l.max(s);
    }

    /// The longest refusal per tenant, seconds; one still open at `end`
    /// counts up to `end`.
    pub fn finish(mut self, end: Millis) -> BTreeMap<String, f64> {
        for (t, since) in std::mem::take(&mut self.open) {
            self.close(&t, since, end);
        }
        self.longest
    }
}

/// Whether pool `p` can host `spec`: as built, every node ready and empty
/// (`now` false), or now, on its ready nodes' free capacity and within
/// the provider's and the pool's lend limits (`now` true). Shape, GPU
/// memory and accelerator family only; other constraints are the
/// scheduler's.
fn hosts(fleet: &Fleet, p: PoolIdx, spec: &Spec, now: bool) -> bool {
    let pool = fleet.pool(p);
    let r = &spec.resources;
    let nodes = spec.nodes().max(1) as usize;
    let s = &pool.shape;
    if s.gpus_per_node < r.gpus || s.cpu_cores < r.cpu_cores || s.memory_gb < r.memory_gb {
        return false;
    }
    if let Some(m) = r.gpu_memory_gb.as_ref().and_then(|g| g.min)
        && pool.gpu_memory_gb() < m
    {
        return false;
    }
    if let Some(a) = &r.accelerator
        && !a.family.is_empty()
        && !s.accelerator.as_ref().is_some_and(|acc| a.family.contains(&acc.family))
    {
        return false;
    }
    let members = fleet.pool_nodes(p);
    if !now {
        return members.len() >= nodes;
    }
    let want = r.gpus * nodes as u32;
    let canopy = |ns: &[crate::fleet::Node]| ns.iter().map(|n| n.canopy_gpus).sum::<u32>();
    if pool.lend_limit_gpus.is_some_and(|l| canopy(members) + want > l) {
        return false;
    }
    let provider = fleet.provider(pool.provider);
    if let Some(l) = provider.lend_limit_gpus {
        let held: u32 =
            (provider.pools.start..provider.pools.end).map(|i| canopy(fleet.pool_nodes(PoolIdx(i)))).sum();
        if held + want > l {
            return false;
        }
    }
    let free = members
        .iter()
        .filter(|n| {
            n.state == NodeState::Ready
                && n.free.gpus >= r.gpus
                && n.free.cpu_cores >= r.cpu_cores
                && n.free.memory_gb >= r.memory_gb
        })
        .count();
    free >= nodes
}

#[derive(Debug, Default, Clone)]
struct Seen {
    tenant: Option<String>,
    submitted: Option<Millis>,
    first_start: Option<Millis>,
    succeeded: bool,
    used_gpu_h: f64,
}

/// Accumulates the per-tenant figures from the core's records.
#[derive(Debug, Default)]
pub struct TenantTally {
    seen: HashMap<WorkloadId, Seen>,
    /// Each workload's work in trace GPU-hours.
    work: HashMap<WorkloadId, f64>,
    /// Owners' reclaims in flight: the owner's workload and when the core
    /// started reclaiming for it.
    open: HashMap<WorkloadId, Millis>,
    /// Finished reclaims per owner: seconds to the owner's placement.
    latency: BTreeMap<String, Vec<f64>>,
    /// Attempts stopped as `reclaimed`, per tenant of the victim.
    victims: BTreeMap<String, usize>,
    /// Each tenant's promise (`max_reclaim_delay`), seconds.
    promise: BTreeMap<String, f64>,
}

impl TenantTally {
    pub fn new(tenancy: Option<&Tenancy>) -> Self {
        let promise = tenancy
            .map(|t| t.tenants.iter().map(|t| (t.name.clone(), t.max_reclaim_delay.as_secs_f64())).collect())
            .unwrap_or_default();
        TenantTally { promise, ..TenantTally::default() }
    }

    /// Workload `id`, of tenant `tenant`, is `gpu_h` trace GPU-hours of
    /// work. Kept only for a workload with a tenant (no row counts the rest).
    pub fn work(&mut self, id: WorkloadId, tenant: Option<&str>, gpu_h: f64) {
        if tenant.is_some() {
            self.work.insert(id, gpu_h);
        }
    }

    pub fn observe(&mut self, r: &Record) {
        match r {
            Record::Workload(w) => {
                // A workload without a tenant counts in no row: nothing
                // is kept for it (a job's tenant is fixed at submission).
                if w.tenant.is_none() && !self.seen.contains_key(&w.id) {
                    return;
                }
                let s = self.seen.entry(w.id).or_default();
                s.submitted.get_or_insert(w.submitted_at);
                if s.tenant.is_none() {
                    s.tenant.clone_from(&w.tenant);
                }
                s.succeeded = w.state == WorkloadState::Succeeded;
            }
            Record::Attempt(a) => {
                let w = a.id.workload;
                if let Some(t0) = self.open.get(&w).copied()
                    && a.placed_at >= t0
                {
                    self.open.remove(&w);
                    let tenant = self.tenant(w);
                    self.latency.entry(tenant).or_default().push(a.placed_at.secs_since(t0).max(0.0));
                }
                let Some(s) = self.seen.get_mut(&w) else {
                    // No tenant: only a reclaim of it counts (under "-").
                    if a.state.is_final() && a.class == Some(FailureClass::Reclaimed) {
                        let tenant = self.tenant(w);
                        *self.victims.entry(tenant).or_default() += 1;
                    }
                    return;
                };
                if let Some(t) = a.started_at {
                    s.first_start = Some(s.first_start.map_or(t, |f| f.min(t)));
                }
                if !a.state.is_final() {
                    return;
                }
                if let (Some(st), Some(en)) = (a.started_at, a.ended_at) {
                    s.used_gpu_h +=
                        f64::from(a.gpus) * a.nodes.len().max(1) as f64 * en.secs_since(st).max(0.0) / 3600.0;
                }
                if a.class == Some(FailureClass::Reclaimed) {
                    let tenant = self.tenant(w);
                    *self.victims.entry(tenant).or_default() += 1;
                }
            }
            Record::Event(e) if e.kind == EventKind::Reclaim => {
                self.open.entry(e.workload).or_insert(e.at);
            }
            _ => {}
        }
    }

    fn tenant(&self, w: WorkloadId) -> String {
        self.seen.get(&w).and_then(|s| s.tenant.clone()).unwrap_or_else(|| "-".into())
    }

    /// One row per tenant, by name; none when no workload had a tenant.
    /// Reclaims still in flight at `end` count as late, at `end`.
    pub fn report(&self, end: Millis, refused: &BTreeMap<String, f64>) -> Vec<TenantReport> {
        let mut latency = self.latency.clone();
        for (w, t0) in &self.open {
            latency.entry(self.tenant(*w)).or_default().push(end.secs_since(*t0).max(0.0));
        }
        let mut rows: BTreeMap<String, (TenantReport, Vec<f64>)> = BTreeMap::new();
        let mut ids: Vec<&WorkloadId> = self.seen.keys().collect();
        ids.sort();
        for id in ids {
            let s = &self.seen[id];
            let Some(t) = &s.tenant else { continue };
            let (row, queue) = rows.entry(t.clone()).or_insert_with(|| (TenantReport::named(t), Vec::new()));
            row.workloads += 1;
            row.used_gpu_h += s.used_gpu_h;
            if s.succeeded {
                row.succeeded += 1;
                row.completed_gpu_h += self.work.get(id).copied().unwrap_or(0.0);
            }
            if let (Some(sub), Some(start)) = (s.submitted, s.first_start) {
                queue.push(start.secs_since(sub) / 3600.0);
            }
        }
        rows.into_iter()
            .map(|(name, (mut row, mut queue))| {
                row.queue_p50_h = percentile(&mut queue, 0.50);
                row.queue_p99_h = percentile(&mut queue, 0.99);
                let mut l = latency.get(&name).cloned().unwrap_or_default();
                row.promise_s = self.promise.get(&name).copied();
                row.reclaims = l.len();
                row.reclaim_p50_s = percentile(&mut l, 0.50);
                row.reclaim_p99_s = percentile(&mut l, 0.99);
                row.reclaim_max_s = l.iter().copied().fold(0.0, f64::max);
                let within = row.promise_s.map_or(l.len(), |p| l.iter().filter(|x| **x <= p).count());
                row.reclaims_within_pct =
                    if l.is_empty() { 100.0 } else { 100.0 * within as f64 / l.len() as f64 };
                row.reclaimed_attempts = self.victims.get(&name).copied().unwrap_or(0);
                row.refused_nominal_max_s = refused.get(&name).copied().unwrap_or(0.0);
                row
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_by_arrival_and_named_tenants_kept() {
        let text = "[[tenant]]\nname = \"a\"\n[[tenant]]\nname = \"b\"\n[[tenant]]\nname = \"c\"\n";
        let tenancy = crate::tenant::TenancyDoc::parse(text, false).unwrap().1;
        let csv = "submit_s,duration_s,gpus,tenant\n0,60,1,\n1,60,1,c\n2,60,1,\n3,60,1,\n";
        let mut jobs = super::super::trace::parse(super::super::Format::Csv, csv, "t.csv").unwrap();
        assign(&mut jobs, &tenancy).unwrap();
        let got: Vec<&str> = jobs.iter().map(|j| j.tenant.as_deref().unwrap()).collect();
        assert_eq!(got, ["a", "c", "c", "a"]);
        jobs[0].tenant = Some("z".into());
        let e = assign(&mut jobs, &tenancy).unwrap_err();
        assert!(
            e.contains("names tenant \"z\", which the fleet file does not define (defined: a, b, c)"),
            "{e}"
        );
    }
}
