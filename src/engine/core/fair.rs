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
        let Some(fs) = self.tenancy.fair_share else { return };
        let holding = self.gpus_held();
        self.fair.book.accrue(now, fs.half_life, holding.iter().map(|(t, g)| (t.as_str(), *g)));
        if self.fair.next_rank.is_none_or(|t| t <= now) {
            self.fair.next_rank = Some(Millis(now.0.saturating_add(RERANK_MS)));
            self.fair_rerank();
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
