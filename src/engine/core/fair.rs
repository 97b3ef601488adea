//! Fair share in the core: tenants competing for capacity are served in
//! the order of their decayed usage per weight ([`crate::tenant::fair`]).
//!
//! The order is carried by the queue itself: a queued workload's queue
//! priority is its tenant's band (the tenant served first has the highest)
//! above its own priority, so every ordering the queue makes — the
//! placement pass, which blocked work a release wakes — serves tenants
//! fairly and, within a tenant, by priority then age. Usage accrues at
//! every event; the bands are recomputed at most every [`RERANK_MS`], and
//! only the queued work of tenants whose band moved is re-filed.
//!
//! With no `[fair_share]`, a workload's queue priority is its priority and
//! nothing here runs.

use super::Core;
use crate::engine::model::{Millis, WorkloadId};
use crate::fleet::PoolIdx;
use crate::schedule::Requirements;
use crate::spec::validate::MAX_PRIORITY;
use crate::tenant::fair::{FairBook, Standing};
use std::collections::HashMap;

/// How often the serving order is recomputed, at most (engine time).
pub const RERANK_MS: i64 = 30_000;

#[derive(Debug, Clone, Default)]
pub(super) struct FairState {
    book: FairBook,
    /// Each tenant's band: the tenant served first has the highest.
    bands: HashMap<String, u32>,
    /// When the order may be recomputed next.
    next_rank: Option<Millis>,
    /// Room kept after a fair-share preemption, by the workload it was
    /// freed for (`room.rs`).
    pub(super) rooms: std::collections::BTreeMap<WorkloadId, super::room::Room>,
}

impl Core {
    /// The priority `tenant`'s work of `priority` is queued at.
    pub(super) fn queue_priority_for(&self, tenant: Option<&str>, priority: u32) -> u32 {
        if self.tenancy.fair_share.is_none() {
            return priority;
        }
        let tenant = tenant.or(self.tenancy.default_tenant.as_deref());
        let band = tenant.and_then(|t| self.fair.bands.get(t)).copied().unwrap_or(0);
        band * (MAX_PRIORITY + 1) + priority.min(MAX_PRIORITY)
    }

    /// The priority workload `id` is queued at.
    pub(super) fn queue_priority(&self, id: WorkloadId) -> u32 {
        self.entries.get(&id).map_or(0, |e| self.queue_priority_for(e.rec.tenant.as_deref(), e.rec.priority))
    }

    /// Brings tenants' usage up to `now`, and the serving order when due.
    pub(super) fn fair_accrue(&mut self, now: Millis) {
        // Before anything else: a room outlives a `[fair_share]` removed
        // meanwhile, and its end is a wake (`next_wake`).
        self.expire_rooms(now);
        let Some(fs) = self.tenancy.fair_share else { return };
        let holding = self.gpus_held();
        self.fair.book.accrue(now, fs.half_life, holding.iter().map(|(t, g)| (t.as_str(), *g)));
        if self.fair.next_rank.is_none_or(|t| t <= now) {
            self.fair.next_rank = Some(Millis(now.0.saturating_add(RERANK_MS)));
            self.fair_rerank();
            match fs.preempt_after {
                Some(after) if fs.preempt_gaps => self.fair_preempt_gaps(after, now),
                Some(after) => self.fair_preempt(after, now),
                None => {}
            }
        }
    }

    /// Preemption for fair share (`preempt_after`): the tenant furthest
    /// below its share whose next workload fits nowhere takes capacity
    /// from borrowed work of tenants of its cohort that used more for
    /// their weight, that has run at least `after`, on a node where that
    /// frees enough; the least costly victims, never more than needed
    /// (`tenant::reclaim`), each told why. One tenant a pass, so a pass
    /// disrupts at most what one workload needs.
    fn fair_preempt(&mut self, after: std::time::Duration, now: Millis) {
        let weights: Vec<(String, f64)> =
            self.tenant_weights().into_iter().map(|(t, w)| (t.to_string(), w)).collect();
        let per_weight = |core: &Core, t: &str| {
            let w = weights.iter().find(|x| x.0 == t).map_or(1.0, |x| x.1);
            core.fair.book.usage(t) / w.max(f64::MIN_POSITIVE)
        };
        let order: Vec<String> =
            self.fair.book.order(&self.tenant_weights()).into_iter().map(str::to_string).collect();
        let started_by = Millis(now.0.saturating_sub(after.as_millis() as i64));
        for me in order {
            let Some(id) = self.next_waiting_of(&me) else { continue };
            if self.reclaim_in_flight(id) {
                return;
            }
            let Some(req) = self.owed_request(id) else { continue };
            let cohort = self.tenancy.tenant(&me).and_then(|t| t.cohort.clone());
            let Some(cohort) = cohort else { continue };
            let mine = per_weight(self, &me);
            let Some(pools) = self.open_pools_fitting(&req) else { continue };
            let pick = |core: &Core, v: &super::Entry| {
                let Some(them) = core.tenant_of(v) else { return false };
                let same_cohort =
                    core.tenancy.tenant(them).is_some_and(|t| t.cohort.as_ref() == Some(&cohort));
                let pool = core.live_pool(v);
                them != me
                    && same_cohort
                    && per_weight(core, them) > mine
                    && pool.is_some_and(|p| core.borrows_in(them, p))
            };
            let Some(chosen) = self.choose_victims(&req, &pools, pick, started_by, now) else {
                continue;
            };
            let standing =
                crate::tenant::fair::standing_text(&self.fair_standings(), &me).unwrap_or_default();
            self.preempt_for_fair_share(id, me, &chosen, &standing, "tenants above theirs", after, now);
            return;
        }
    }

    /// Recomputes the serving order; re-files the queued work of tenants
    /// whose band moved.
    pub(super) fn fair_rerank(&mut self) {
        let bands: HashMap<String, u32> = if self.tenancy.fair_share.is_some() {
            let tenants = self.tenant_weights();
            let order = self.fair.book.order(&tenants);
            let n = order.len() as u32;
            order.into_iter().enumerate().map(|(i, t)| (t.to_string(), n - i as u32)).collect()
        } else {
            HashMap::new()
        };
        if bands == self.fair.bands {
            return;
        }
        let moved: Vec<&String> = bands
            .iter()
            .filter(|(t, b)| self.fair.bands.get(*t) != Some(b))
            .map(|(t, _)| t)
            .chain(self.fair.bands.keys().filter(|t| !bands.contains_key(*t)))
            .collect();
        let default = self.tenancy.default_tenant.as_deref();
        let ids: Vec<WorkloadId> = self
            .queue
            .ids()
            .filter(|id| {
                self.entries.get(id).is_some_and(|e| {
                    let t = e.rec.tenant.as_deref().or(default);
                    t.is_some_and(|t| moved.iter().any(|m| m.as_str() == t))
                })
            })
            .collect();
        self.fair.bands = bands;
        for id in ids {
            self.counts.fair_refiled += 1;
            let p = self.queue_priority(id);
            self.queue.reprioritize(id, p);
        }
    }

    /// Rebuilds tenants' decayed usage at start from what their attempts
    /// held (the journal's [`Journal::gpu_use_since`]): counted as accrual
    /// counted it, on pools a flavor counts, for the workload's tenant or
    /// the default one. The serving order follows at once.
    ///
    /// [`Journal::gpu_use_since`]: crate::journal::Journal::gpu_use_since
    pub fn restore_fair_share(&mut self, uses: &[crate::tenant::fair::Use], now: Millis) {
        let Some(fs) = self.tenancy.fair_share else { return };
        let default = self.tenancy.default_tenant.clone();
        let counted = self.counted_pools();
        let usage = crate::tenant::fair::replay(uses, now, fs.half_life, |u| {
            counted.contains(u.pool.as_str()).then(|| u.tenant.clone().or_else(|| default.clone()))?
        });
        self.fair.book.restore(now, usage);
        self.fair_rerank();
    }

    /// How far back [`Core::restore_fair_share`] needs the journal: ten
    /// half-lives (usage older than that counts under a thousandth).
    pub fn fair_share_horizon(&self, now: Millis) -> Option<Millis> {
        let fs = self.tenancy.fair_share?;
        Some(Millis(now.0.saturating_sub((fs.half_life.as_millis() as i64).saturating_mul(10))))
    }

    /// Configured tenants with their weights, in the tenancy's order.
    fn tenant_weights(&self) -> Vec<(&str, f64)> {
        self.tenancy.tenants.iter().map(|t| (t.name.as_str(), t.weight)).collect()
    }

    /// Where each tenant stands in the serving order (empty without
    /// `[fair_share]`).
    pub fn fair_standings(&self) -> Vec<Standing> {
        if self.tenancy.fair_share.is_none() {
            return Vec::new();
        }
        self.fair.book.standings(&self.tenant_weights())
    }
}

impl Core {
    /// Tenant `tenant`'s next waiting workload (queue order: priority,
    /// then id) that nothing placed.
    pub(super) fn next_waiting_of(&self, tenant: &str) -> Option<WorkloadId> {
        self.entries
            .iter()
            .filter(|(id, e)| {
                self.queue.is_blocked(**id) && e.live.is_none() && self.tenant_of(e) == Some(tenant)
            })
            .map(|(id, e)| (std::cmp::Reverse(e.rec.priority), *id))
            .min()
            .map(|(_, id)| id)
    }

    /// Workload `id`'s request, when preemption for fair share may make
    /// room for it: `None` when its tenant is at its quota limit (nothing
    /// is owed to it).
    pub(super) fn owed_request(&self, id: WorkloadId) -> Option<Requirements> {
        let e = self.entries.get(&id)?;
        let mut req = self.placement_request(e);
        self.gate_quota(e, &mut req).is_empty().then_some(req)
    }

    /// The pools that could host `req` once emptied, among those its
    /// quota leaves open; `None` when none could.
    pub(super) fn open_pools_fitting(&mut self, req: &Requirements) -> Option<Vec<PoolIdx>> {
        let open: Vec<bool> = (0..self.fleet.pools.len())
            .map(|i| !req.quota_pools.iter().any(|l| l == self.pool_label(PoolIdx(i as u32))))
            .collect();
        self.pools_fitting(req, |p| open.get(p.0 as usize).copied().unwrap_or(false))
    }

    /// Stops `chosen` so that `tenant`'s workload `id` gets room: an event
    /// on `id` naming the victims, each victim's stop saying where both
    /// tenants stand (`standing`) and whose borrowed work was taken
    /// (`from`), and the preemption remembered in flight like an owner's
    /// reclaim.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn preempt_for_fair_share(
        &mut self,
        id: WorkloadId,
        tenant: String,
        chosen: &(crate::tenant::Choice, crate::tenant::Amount),
        standing: &str,
        from: &str,
        after: std::time::Duration,
        now: Millis,
    ) {
        let names: Vec<String> =
            chosen.0.victims.iter().map(|v| WorkloadId(v.workload).to_string()).collect();
        self.event(
            now,
            id,
            None,
            crate::engine::model::EventKind::Reclaim,
            format!(
                "preempting {} for fair share ({standing}): borrowed work of {from} that ran at least {}",
                names.join(", "),
                crate::units::human_secs(after.as_secs_f64())
            ),
        );
        let why = format!("preempted for fair share ({standing}) ");
        self.stop_victims(id, &tenant, chosen, std::time::Duration::MAX, &why, now);
        self.reclaim_started(id, tenant);
        // The freed room is kept for `id` until it is placed, or for the
        // victims' longest stop grace and a margin (`room.rs`).
        let grace = chosen
            .0
            .victims
            .iter()
            .filter_map(|v| self.entries.get(&WorkloadId(v.workload)))
            .map(|e| e.rec.spec.runtime.stop_grace().as_millis() as i64)
            .max()
            .unwrap_or(0);
        let until = Millis(now.0.saturating_add(grace).saturating_add(super::room::ROOM_MARGIN_MS));
        self.keep_room(id, &chosen.0.nodes, until, now);
    }
}
