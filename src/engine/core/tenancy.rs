//! Tenants in the core: what each tenant uses per flavor, which pools its
//! quota rules out for a placement (and why, in numbers), and reclaiming
//! borrowed work when an owner's work needs its capacity back.
//!
//! The arithmetic is `crate::tenant`'s; this file keeps the books the core
//! needs for it. With no tenants configured nothing here runs.
//!
//! - Usage is charged when an attempt takes capacity and given back when
//!   it releases it, exactly what was charged (`Live::charged`); a change
//!   of tenancy recharges every live attempt.
//! - A placement's request carries the pools its tenant's quota rules out
//!   (`Requirements::quota_pools`, filter `quota`), so "nothing fits"
//!   answers are remembered per quota state; when usage falls, blocked
//!   work is asked again, and a remembered answer whose quota pools are
//!   no longer the ones the tenant's quota gives holds no more.
//! - An owner's work that fits nowhere, within its nominal quota, reclaims
//!   borrowed work on the owner's pools: the victims `tenant::reclaim`
//!   chooses are stopped (SIGTERM, then SIGKILL after their `stop_grace`
//!   or what is left of the owner's `max_reclaim_delay`, whichever is
//!   less) and placed again, class `reclaimed`. While it is in flight,
//!   other tenants' work does not take the owner's pools.

use super::{Core, Entry};
use crate::engine::model::{Millis, WorkloadId};
use crate::failure::ProviderEnd;
use crate::fleet::{NodeState, PoolIdx};
use crate::schedule::{Decision, Policy, Requirements, place};
use crate::spec::Topology;
use crate::tenant::{self, Admission, Amount, Tenancy};
use std::collections::{BTreeMap, HashMap};

/// What one live attempt is charged: tenant, flavor index, amount.
pub(super) type Charge = (String, usize, Amount);

/// The core's books on tenants.
#[derive(Debug, Clone, Default)]
pub(super) struct QuotaBook {
    /// Each pool's flavor (index into `Tenancy::flavors`), by `PoolIdx`.
    pool_flavor: Vec<Option<usize>>,
    /// Each flavor's pools, as `provider/pool` labels, sorted.
    flavor_pools: Vec<Vec<String>>,
    /// Each pool's owning tenant, by `PoolIdx`.
    pool_owner: Vec<Option<String>>,
    /// In use per (tenant, flavor).
    used: HashMap<(String, usize), Amount>,
    /// Each pool's `provider/pool` label, by `PoolIdx`.
    pool_label: Vec<String>,
    /// Owners' workloads with a reclaim in flight, and the owning tenant.
    reclaims: BTreeMap<WorkloadId, String>,
    /// Each configured tenant's index in `Tenancy::tenants`, by name.
    tenant_ix: HashMap<String, usize>,
    /// Per tenant index: its cohort's members (itself alone without a
    /// cohort), as indices, in the tenancy's order.
    cohort: Vec<Vec<usize>>,
    /// Per tenant index and flavor: its limits (`Tenancy::limits`).
    limits: Vec<Vec<tenant::Limits>>,
    /// Per tenant index and flavor: in use (`used`, by index).
    used_ix: Vec<Vec<Amount>>,
}

impl QuotaBook {
    fn used(&self, tenant: &str, flavor: usize) -> Amount {
        self.used.get(&(tenant.to_string(), flavor)).copied().unwrap_or_default()
    }

    /// Adds (`add`) or takes back what a charge counts, in both books.
    fn count(&mut self, tenant: &str, flavor: usize, a: Amount, add: bool) {
        let step = |u: &mut Amount| *u = if add { u.saturating_add(a) } else { u.saturating_sub(a) };
        match self.used.get_mut(&(tenant.to_string(), flavor)) {
            Some(u) => step(u),
            None if add => {
                self.used.insert((tenant.to_string(), flavor), a);
            }
            None => {}
        }
        if let Some(u) = self.tenant_ix.get(tenant).and_then(|&t| self.used_ix.get_mut(t)?.get_mut(flavor)) {
            step(u);
        }
    }

    /// The members of configured tenant `ti`'s cohort with their usage in
    /// flavor `fi`, for `tenant::admit`: from the tables built with the
    /// book, so a placement decision looks nothing up by name.
    fn members<'a>(&self, tenancy: &'a Tenancy, ti: usize, fi: usize) -> Vec<tenant::Usage<'a>> {
        self.cohort[ti]
            .iter()
            .map(|&m| tenant::Usage {
                tenant: &tenancy.tenants[m].name,
                limits: self.limits[m][fi],
                used: self.used_ix[m][fi],
            })
            .collect()
    }
}

/// The amount a request takes in all: per node times nodes.
fn amount_of(gpus: u32, cpu_cores: f64, nodes: usize) -> Amount {
    Amount::taken(gpus, cpu_cores, nodes as u64)
}

/// The pools `tenant`'s quota rules out for a request of `want`, and the
/// numeric reasons; and the pools of owners taking capacity back, which
/// are theirs alone while that lasts. Sorted.
pub(super) fn quota_pools(
    book: &QuotaBook,
    tenancy: &Tenancy,
    tenant: Option<&str>,
    want: Amount,
) -> (Vec<String>, Vec<String>) {
    let mut pools = Vec::new();
    let mut why = Vec::new();
    let all = |pools: &mut Vec<String>| {
        for fp in &book.flavor_pools {
            pools.extend(fp.iter().cloned());
        }
    };
    match (tenant, tenant.and_then(|n| tenancy.tenant(n))) {
        (None, _) => {
            all(&mut pools);
            why.push("the workload has no tenant, and quotas admit only tenants' work".to_string());
        }
        (Some(name), None) => {
            all(&mut pools);
            why.push(format!("tenant {name} is not configured (any more); an admin can add it"));
        }
        (Some(name), Some(t)) => {
            let ti = book.tenant_ix.get(name).copied();
            for (fi, f) in tenancy.flavors.iter().enumerate() {
                let members = match ti {
                    Some(ti) if book.cohort.len() > ti => book.members(tenancy, ti, fi),
                    _ => tenancy.members(t, &f.name, |who| book.used(who, fi)),
                };
                match tenant::admit(t.cohort.as_deref(), &f.name, &members, name, want) {
                    Some(Admission::Admit { .. } | Admission::Reclaim { .. }) => {}
                    Some(Admission::Wait(w)) => {
                        pools.extend(book.flavor_pools[fi].iter().cloned());
                        why.push(w.to_string());
                    }
                    None => pools.extend(book.flavor_pools[fi].iter().cloned()),
                }
            }
        }
    }
    for owner in book.reclaims.values() {
        if tenant != Some(owner.as_str()) {
            let mut owns = false;
            for (i, o) in book.pool_owner.iter().enumerate() {
                if o.as_deref() == Some(owner.as_str()) {
                    pools.push(book.pool_label[i].clone());
                    owns = true;
                }
            }
            // A tenant preempting for fair share owns no pools: it rules
            // nothing out, and saying so would read as a quota refusal.
            if owns {
                why.push(format!("{owner} is taking its own capacity back"));
            }
        }
    }
    pools.sort();
    pools.dedup();
    (pools, why)
}

/// Whether a remembered answer for `req` still holds as far as quotas go:
/// the pools they rule out for it are the ones it was asked with.
pub(super) fn quota_unchanged(book: &QuotaBook, tenancy: &Tenancy, req: &Requirements) -> bool {
    if tenancy.is_empty() && book.reclaims.is_empty() {
        return req.quota_pools.is_empty();
    }
    let want = amount_of(req.gpus, req.cpu_cores, req.nodes as usize);
    quota_pools(book, tenancy, req.quota_tenant.as_deref(), want).0 == req.quota_pools
}

impl Core {
    /// The tenant a workload counts against: its own, else the default.
    pub(super) fn tenant_of<'a>(&'a self, e: &'a Entry) -> Option<&'a str> {
        e.rec.tenant.as_deref().or(self.tenancy.default_tenant.as_deref())
    }

    /// Whether `id` is taking capacity back and its victims still stop.
    pub(super) fn reclaim_in_flight(&self, id: WorkloadId) -> bool {
        self.quota.reclaims.contains_key(&id) && self.reclaim_stopping(id)
    }

    /// `id` of tenant `who` is taking capacity back: until its launch is
    /// accepted, `who`'s pools are its alone.
    pub(super) fn reclaim_started(&mut self, id: WorkloadId, who: String) {
        self.quota.reclaims.insert(id, who);
    }

    /// Whether `tenant` uses more than its nominal quota in the flavor of
    /// pool `pool` (it borrows there from its cohort).
    pub(super) fn borrows_in(&self, tenant: &str, pool: PoolIdx) -> bool {
        let Some(Some(fi)) = self.quota.pool_flavor.get(pool.0 as usize) else { return false };
        let Some(t) = self.tenancy.tenant(tenant) else { return false };
        let limits = self.tenancy.limits(t, &self.tenancy.flavors[*fi].name);
        !limits.within_nominal(&self.quota.used(tenant, *fi))
    }

    /// Pool `pool`'s `provider/pool` label.
    pub(super) fn pool_label(&self, pool: PoolIdx) -> &str {
        self.quota.pool_label.get(pool.0 as usize).map_or("", String::as_str)
    }

    /// The `provider/pool` labels of the pools a flavor counts.
    pub(super) fn counted_pools(&self) -> std::collections::HashSet<&str> {
        let flavored = self.quota.pool_flavor.iter().map(Option::is_some);
        self.quota.pool_label.iter().zip(flavored).filter(|(_, f)| *f).map(|(l, _)| l.as_str()).collect()
    }

    /// GPUs each configured tenant's live attempts hold, on pools a flavor
    /// counts.
    pub(super) fn gpus_held(&self) -> Vec<(String, f64)> {
        self.tenancy
            .tenants
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let g: u64 = self.quota.used_ix.get(i).map_or(0, |v| v.iter().map(|a| a.gpus).sum());
                (t.name.clone(), g as f64)
            })
            .collect()
    }

    /// Whether workload `id` belongs to the tenant that owns pool `pool`:
    /// capacity released there is offered to it first.
    pub(super) fn owns_pool(&self, id: WorkloadId, pool: PoolIdx) -> bool {
        let Some(Some(owner)) = self.quota.pool_owner.get(pool.0 as usize) else { return false };
        self.entries.get(&id).and_then(|e| self.tenant_of(e)) == Some(owner.as_str())
    }

    /// Recomputes which flavor and owner each pool has and recharges every
    /// live attempt (the tenancy or the fleet changed).
    pub(super) fn rebuild_quota(&mut self) {
        let mut book =
            QuotaBook { reclaims: std::mem::take(&mut self.quota.reclaims), ..QuotaBook::default() };
        if !self.tenancy.is_empty() {
            book.flavor_pools = vec![Vec::new(); self.tenancy.flavors.len()];
            for i in 0..self.fleet.pools.len() {
                let pool = PoolIdx(i as u32);
                let facts = tenant::usage::facts(&self.tenancy, &self.fleet, pool);
                let fi = tenant::flavor::flavor_of(&self.tenancy.flavors, &facts);
                let label = self.fleet.pool_label(pool);
                if let Some(fi) = fi {
                    book.flavor_pools[fi].push(label.clone());
                }
                book.pool_flavor.push(fi);
                book.pool_owner.push(facts.owner.map(str::to_string));
                book.pool_label.push(label);
            }
            for v in &mut book.flavor_pools {
                v.sort();
            }
            let tenants = &self.tenancy.tenants;
            let flavors = &self.tenancy.flavors;
            book.tenant_ix = tenants.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
            book.cohort = tenants
                .iter()
                .map(|t| {
                    (0..tenants.len())
                        .filter(|&m| match &t.cohort {
                            Some(c) => tenants[m].cohort.as_ref() == Some(c),
                            None => tenants[m].name == t.name,
                        })
                        .collect()
                })
                .collect();
            book.limits = tenants
                .iter()
                .map(|t| flavors.iter().map(|f| self.tenancy.limits(t, &f.name)).collect())
                .collect();
            book.used_ix = vec![vec![Amount::default(); flavors.len()]; tenants.len()];
        }
        self.quota = book;
        let ids: Vec<WorkloadId> = self.live_ids.iter().copied().collect();
        for id in ids {
            self.charge_quota(id);
            // Reclaims in flight, as their victims' durable stops say (a
            // restart carries them on).
            let stop = self.entries.get(&id).and_then(|e| e.live.as_ref()?.terminating.clone());
            if let Some(ProviderEnd::OwnerReclaim { owner, for_workload, .. }) = stop {
                let owner_wl = WorkloadId(for_workload);
                if self.entries.contains_key(&owner_wl) {
                    self.quota.reclaims.entry(owner_wl).or_insert(owner);
                }
            }
        }
    }

    /// What the live attempt of `id` counts against, if anything.
    fn charge_for(&self, e: &Entry) -> Option<Charge> {
        if self.tenancy.is_empty() {
            return None;
        }
        let live = e.live.as_ref()?;
        let node = self.fleet.nodes.get(live.nodes.first()?.0 as usize)?;
        let fi = (*self.quota.pool_flavor.get(node.pool.0 as usize)?)?;
        let tenant = self.tenant_of(e)?.to_string();
        Some((tenant, fi, amount_of(live.alloc.gpus, live.alloc.cpu_cores, live.nodes.len())))
    }

    /// Charges the live attempt of `id` to its tenant and flavor.
    pub(super) fn charge_quota(&mut self, id: WorkloadId) {
        let Some(e) = self.entries.get(&id) else { return };
        let charge = self.charge_for(e);
        if let Some((t, fi, a)) = &charge {
            self.quota.count(t, *fi, *a, true);
        }
        if let Some(live) = self.entries.get_mut(&id).and_then(|e| e.live.as_mut()) {
            live.charged = charge;
        }
    }

    /// Gives back what an ended attempt was charged; work its quota kept
    /// waiting is asked again.
    pub(super) fn uncharge_quota(&mut self, charged: Option<Charge>) {
        let Some((t, fi, a)) = charged else { return };
        self.quota.count(&t, fi, a, false);
        self.queue.unblock_all();
    }

    /// Sets `req.quota_pools` for `e`'s next placement; returns the reasons
    /// when its quota rules pools out.
    pub(super) fn gate_quota(&self, e: &Entry, req: &mut Requirements) -> Vec<String> {
        if self.tenancy.is_empty() {
            return Vec::new();
        }
        let want = amount_of(req.gpus, req.cpu_cores, req.nodes as usize);
        let tenant = self.tenant_of(e);
        let (pools, why) = quota_pools(&self.quota, &self.tenancy, tenant, want);
        req.quota_tenant = tenant.map(str::to_string);
        req.quota_pools = pools;
        why
    }

    /// One placement decision as the core makes it for work of `tenant`:
    /// the pools its quota rules out (as [`Core::gate_quota`] sets them),
    /// then the scheduler on the core's snapshot. What
    /// `benches/placement.rs` times beside `schedule::place` alone; the
    /// queue, patience and records around it are left out.
    #[doc(hidden)]
    pub fn decide_for(
        &mut self,
        tenant: Option<&str>,
        req: &mut Requirements,
        policy: &Policy,
        now: Millis,
    ) -> Decision {
        if !self.tenancy.is_empty() {
            let want = amount_of(req.gpus, req.cpu_cores, req.nodes as usize);
            let tenant = tenant.or(self.tenancy.default_tenant.as_deref());
            req.quota_pools = quota_pools(&self.quota, &self.tenancy, tenant, want).0;
            req.quota_tenant = tenant.map(str::to_string);
        }
        place(req, self.snapshot(now), policy)
    }

    /// Whether victims of the reclaim for `id` are still stopping.
    pub(super) fn reclaim_stopping(&self, id: WorkloadId) -> bool {
        self.entries.values().any(|e| {
            matches!(
                e.live.as_ref().and_then(|l| l.terminating.as_ref()),
                Some(ProviderEnd::OwnerReclaim { for_workload, .. }) if *for_workload == id.0
            )
        })
    }

    /// The owner's work `id` fits nowhere: when it is within its nominal
    /// quota and borrowed work holds the owner's pools, stop the least
    /// costly victims so it fits (`tenant::reclaim`). A reclaim in flight
    /// whose victims have all stopped, the owner's work still fitting
    /// nowhere (the freed capacity was lost: a node went down or was
    /// cordoned), takes capacity back again.
    pub(super) fn maybe_reclaim(&mut self, id: WorkloadId, req: &Requirements, now: Millis) {
        if self.tenancy.is_empty() || (self.quota.reclaims.contains_key(&id) && self.reclaim_stopping(id)) {
            return;
        }
        let Some(e) = self.entries.get(&id) else { return };
        let Some(owner) = self.tenant_of(e).map(str::to_string) else { return };
        let Some(t) = self.tenancy.tenant(&owner) else { return };
        let promise = t.max_reclaim_delay;
        let owned: Vec<usize> = (0..self.quota.pool_owner.len())
            .filter(|&i| self.quota.pool_owner[i].as_deref() == Some(owner.as_str()))
            .collect();
        if owned.is_empty() {
            return;
        }
        // Within its nominal quota in the flavor of the owned pools.
        let want = amount_of(req.gpus, req.cpu_cores, req.nodes as usize);
        let within = owned.iter().any(|&i| {
            self.quota.pool_flavor[i].is_none_or(|fi| {
                let limits = self.tenancy.limits(t, &self.tenancy.flavors[fi].name);
                limits.within_nominal(&self.quota.used(&owner, fi).saturating_add(want))
            })
        });
        if !within {
            return;
        }
        let Some(fitting) = self.pools_fitting(req, |p| owned.contains(&(p.0 as usize))) else { return };
        let pick = |core: &Core, v: &Entry| core.tenant_of(v) != Some(owner.as_str());
        let Some(chosen) = self.choose_victims(req, &fitting, pick, Millis(0), now) else {
            return;
        };
        let (choice, per_node) = &chosen;
        let names: Vec<String> = choice.victims.iter().map(|v| WorkloadId(v.workload).to_string()).collect();
        self.event(
            now,
            id,
            None,
            crate::engine::model::EventKind::Reclaim,
            format!(
                "reclaiming {} of {owner}'s capacity from {} (borrowed); promised within {}",
                tenant::Resource::Gpus.show(per_node.gpus * req.nodes.max(1) as u64),
                names.join(", "),
                crate::units::human_secs(promise.as_secs_f64())
            ),
        );
        self.stop_victims(id, &owner, &chosen, promise, "", now);
        self.quota.reclaims.insert(id, owner);
    }

    /// The pools `keep` admits that would fit `req` if they were empty,
    /// less those the scheduler will not place on now (quarantined);
    /// `None` when none would.
    pub(super) fn pools_fitting(
        &mut self,
        req: &Requirements,
        keep: impl Fn(PoolIdx) -> bool,
    ) -> Option<Vec<PoolIdx>> {
        let mut plain = req.clone();
        plain.quota_pools.clear();
        plain.exclude_nodes.clear();
        let policy = Policy { top_k: self.fleet.pools.len().max(1), ..Policy::default() };
        let fitting: Vec<PoolIdx> = match place(&plain, self.ideal(), &policy) {
            Decision::Placed(p) => p.candidates.iter().map(|c| c.pool_idx).filter(|p| keep(*p)).collect(),
            Decision::Unschedulable(_) => return None,
        };
        (!fitting.is_empty()).then_some(fitting)
    }

    /// The least costly victims (`tenant::reclaim`) among the live work
    /// `pick` admits that has run at least until `started_by`, on the
    /// ready, unquarantined nodes of `pools`, that free room for `req`;
    /// with the room per node. `None` when no choice frees enough.
    pub(super) fn choose_victims(
        &mut self,
        req: &Requirements,
        pools: &[PoolIdx],
        pick: impl Fn(&Core, &Entry) -> bool,
        started_by: Millis,
        now: Millis,
    ) -> Option<(tenant::Choice, Amount)> {
        let members: Vec<u32> = pools.iter().flat_map(|p| self.fleet.pool(*p).nodes.clone()).collect();
        let (pools, quarantined): (Vec<PoolIdx>, Vec<u32>) = {
            let snap = self.snapshot(now);
            let pools = pools
                .iter()
                .copied()
                .filter(|p| {
                    !snap.pool_quarantined.contains(p.0 as usize)
                        && !snap.provider_quarantined.contains(p.0 as usize)
                })
                .collect();
            let quarantined = members
                .into_iter()
                .filter(|n| snap.nodes.get(*n as usize).is_some_and(|i| i.quarantined))
                .collect();
            (pools, quarantined)
        };
        // A gang's nodes must share its topology's domain (a pool, a
        // switch in it, a region): victims are chosen within one domain.
        let mut domains: BTreeMap<String, Vec<(u32, Amount)>> = BTreeMap::new();
        let mut nodes: Vec<(u32, Amount)> = Vec::new();
        for p in &pools {
            for n in self.fleet.pool(*p).nodes.clone() {
                let node = &self.fleet.nodes[n as usize];
                if node.state == NodeState::Ready
                    && !req.exclude_nodes.contains(&node.name)
                    && !quarantined.contains(&n)
                {
                    let free = amount_of(node.free.gpus, node.free.cpu_cores, 1);
                    nodes.push((n, free));
                    let domain = match req.topology {
                        Topology::SamePool => p.0.to_string(),
                        Topology::SameSwitch => {
                            format!("{}/{}", p.0, node.switch.as_deref().unwrap_or_default())
                        }
                        Topology::SameRegion => self.fleet.pool(*p).region.clone(),
                    };
                    domains.entry(domain).or_default().push((n, free));
                }
            }
        }
        let mut candidates = Vec::new();
        for (wid, v) in &self.entries {
            let Some(live) = v.live.as_ref() else { continue };
            if live.terminating.is_some() || !pick(self, v) {
                continue;
            }
            let att = &v.attempts[live.idx];
            let Some(started) = att.started_at.or((started_by.0 == 0).then_some(now)) else { continue };
            if started > started_by && started_by.0 != 0 {
                continue;
            }
            let frees: Vec<(u32, Amount)> = live
                .nodes
                .iter()
                .filter(|n| nodes.iter().any(|(k, _)| *k == n.0))
                .map(|n| (n.0, amount_of(live.alloc.gpus, live.alloc.cpu_cores, 1)))
                .collect();
            if frees.is_empty() {
                continue;
            }
            let gpus = u64::from(live.alloc.gpus.max(1)) * live.nodes.len() as u64;
            let saved =
                att.checkpoint.as_ref().and_then(|c| c.saved.as_ref().or(c.resumed.as_ref())).map(|s| s.at);
            let since = saved.filter(|s| *s > started).unwrap_or(started);
            let secs = |from: Millis| now.secs_since(from).max(0.0) as u64;
            candidates.push(tenant::Candidate {
                workload: wid.0,
                frees,
                lost_gpu_s: secs(since) * gpus,
                run_gpu_s: secs(started) * gpus,
            });
        }
        let per_node = amount_of(req.gpus, req.cpu_cores, 1);
        let count = req.nodes.max(1) as usize;
        let choice = if count == 1 {
            tenant::reclaim::choose(&nodes, &candidates, per_node, count)
        } else {
            domains
                .values()
                .filter_map(|d| tenant::reclaim::choose(d, &candidates, per_node, count))
                .min_by_key(|c| (c.cost(), c.nodes.first().copied()))
        };
        choice.filter(|c| !c.victims.is_empty()).map(|c| (c, per_node))
    }

    /// Stops each of `choice`'s victims for `id` of tenant `who`: SIGTERM,
    /// SIGKILL after the victim's `stop_grace` or `grace_cap`, whichever
    /// is less; class `reclaimed`, its event saying why it was chosen
    /// (`why` first, when given).
    pub(super) fn stop_victims(
        &mut self,
        id: WorkloadId,
        who: &str,
        (choice, per_node): &(tenant::Choice, Amount),
        grace_cap: std::time::Duration,
        why: &str,
        now: Millis,
    ) {
        for v in &choice.victims {
            let wid = WorkloadId(v.workload);
            let Some(ve) = self.entries.get(&wid) else { continue };
            let grace = ve.rec.spec.runtime.stop_grace().min(grace_cap).as_secs();
            let node = self.fleet.nodes.get(v.node as usize).map_or("?", |n| n.name.as_str()).to_string();
            let message = format!("{why}for {id} of {who} on {node}: {}", v.explain(per_node));
            let end = ProviderEnd::OwnerReclaim {
                owner: who.to_string(),
                for_workload: id.0,
                message,
                grace_s: grace,
                kill_at_ms: Some(now.0.saturating_add(grace.saturating_mul(1000) as i64)),
            };
            self.terminate_live(wid, end, now);
        }
    }

    /// The reclaim for `id` is over (its launch was accepted, or it was
    /// cancelled or ended).
    pub(super) fn reclaim_done(&mut self, id: WorkloadId) {
        if self.quota.reclaims.remove(&id).is_some() {
            // Owners' pools it kept from others are open again.
            self.queue.unblock_all();
        }
    }

    /// Per tenant and flavor: in use now (for the API and the console).
    pub fn tenant_usage(&self) -> Vec<(String, String, Amount)> {
        let mut out: Vec<(String, String, Amount)> = self
            .quota
            .used
            .iter()
            .filter(|(_, a)| !a.is_zero())
            .filter_map(|((t, fi), a)| Some((t.clone(), self.tenancy.flavors.get(*fi)?.name.clone(), *a)))
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }
}
