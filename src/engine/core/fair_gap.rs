//! Preemption for fair share that closes the gap (`[fair_share]`
//! `preempt_gaps = true`, with `preempt_after`): in one pass, every
//! tenant below its demand-aware fair share gets room for its next
//! waiting workload, taken from the tenants furthest above theirs.
//!
//! The GPUs a cohort's tenants hold (on pools a flavor counts; free GPUs
//! are not at stake, work that fits nowhere cannot use them) are shared
//! by weighted max-min ([`crate::tenant::fair::water_fill`]) over each
//! member's demand: the GPUs it holds plus what its waiting work asks
//! (work the fleet could hold), as `sim::fairness` measures it. A tenant holding less than that entitlement is owed; one holding
//! more can give. Then, furthest below first:
//!
//! - the owed tenant's next waiting workload (queue order) that fits
//!   nowhere and is within its quota is served only if placing it keeps the
//!   tenant at or below its entitlement (or it holds nothing yet);
//! - victims are borrowed work of its cohort, run at least `preempt_after`,
//!   of tenants above their entitlement by at least what they lose (a
//!   victim's tenant never falls below its share), chosen by owners'
//!   reclaim's order (`tenant::reclaim::choose`: least progress lost, then
//!   least disruption, then fewest; never more than the workload needs),
//!   from the tenant furthest above its share alone first, widening to
//!   the next furthest only when that frees too little;
//! - each victim is stopped as reclaimed, told both tenants' standing.
//!
//! A pass's stops are bounded by the owed tenants' gaps: each takes at most
//! one workload's room, and only while below its share.

use super::Core;
use crate::engine::model::{Millis, WorkloadId, WorkloadState};
use crate::tenant::fair::water_fill;
use std::collections::HashMap;
use std::time::Duration;

/// One tenant's standing in a gap pass.
#[derive(Debug, Clone)]
struct Gap {
    name: String,
    cohort: Option<String>,
    held: f64,
    entitled: f64,
}

impl Gap {
    /// Held ÷ entitled (∞ for a tenant entitled to nothing that holds some).
    fn ratio(&self) -> f64 {
        if self.entitled > 0.0 {
            self.held / self.entitled
        } else if self.held > 0.0 {
            f64::INFINITY
        } else {
            1.0
        }
    }
}

fn gpus(n: f64) -> String {
    if (n - n.round()).abs() < 0.05 { format!("{n:.0}") } else { format!("{n:.1}") }
}

impl Core {
    /// Each configured tenant's held GPUs and demand-aware entitlement.
    fn fair_gaps(&self, now: Millis) -> Vec<Gap> {
        let held: HashMap<String, f64> = self.gpus_held().into_iter().collect();
        let fleet_gpus = self.fleet.total_gpus() as f64;
        let widest = self.fleet.pools.iter().map(|p| p.shape.gpus_per_node).max().unwrap_or(0);
        let mut asks: HashMap<&str, f64> = HashMap::new();
        for e in self.entries.values() {
            if e.live.is_some()
                || e.rec.state != WorkloadState::Queued
                || e.rec.not_before.is_some_and(|t| t > now)
            {
                continue;
            }
            let Some(t) = self.tenant_of(e) else { continue };
            let r = &e.rec.spec.resources;
            let ask = f64::from(r.gpus) * f64::from(r.nodes.max(1));
            if r.gpus <= widest && ask <= fleet_gpus {
                *asks.entry(t).or_default() += ask;
            }
        }
        let tenants = &self.tenancy.tenants;
        let mut out: Vec<Gap> = tenants
            .iter()
            .map(|t| Gap {
                name: t.name.clone(),
                cohort: t.cohort.clone(),
                held: held.get(&t.name).copied().unwrap_or(0.0),
                entitled: 0.0,
            })
            .collect();
        let cohorts: Vec<Option<String>> = {
            let mut c: Vec<Option<String>> = tenants.iter().map(|t| t.cohort.clone()).collect();
            c.sort();
            c.dedup();
            c
        };
        for cohort in cohorts.iter().flatten() {
            let members: Vec<usize> =
                (0..tenants.len()).filter(|&i| tenants[i].cohort.as_ref() == Some(cohort)).collect();
            let capacity: f64 = members.iter().map(|&i| out[i].held).sum();
            let demand: Vec<(f64, f64)> = members
                .iter()
                .map(|&i| {
                    (
                        tenants[i].weight,
                        out[i].held + asks.get(tenants[i].name.as_str()).copied().unwrap_or(0.0),
                    )
                })
                .collect();
            for (k, e) in water_fill(capacity, &demand).into_iter().enumerate() {
                out[members[k]].entitled = e;
            }
        }
        out
    }

    /// One gap pass (see the module's text).
    pub(super) fn fair_preempt_gaps(&mut self, after: Duration, now: Millis) {
        let mut gaps = self.fair_gaps(now);
        let started_by = Millis(now.0.saturating_sub(after.as_millis() as i64));
        // Owed tenants, furthest below their share first.
        let mut owed: Vec<usize> = (0..gaps.len())
            .filter(|&i| gaps[i].cohort.is_some() && gaps[i].held < gaps[i].entitled)
            .collect();
        owed.sort_by(|&a, &b| gaps[a].ratio().total_cmp(&gaps[b].ratio()).then(a.cmp(&b)));
        for me in owed {
            let name = gaps[me].name.clone();
            let Some(id) = self.next_waiting_of(&name) else { continue };
            if self.reclaim_in_flight(id) {
                continue;
            }
            let Some(req) = self.owed_request(id) else { continue };
            let ask = f64::from(req.gpus) * f64::from(req.nodes.max(1));
            let g = &gaps[me];
            if g.held > 0.0 && g.held + ask > g.entitled + 1e-9 {
                // Placing it would take the tenant above its share.
                continue;
            }
            let Some(pools) = self.open_pools_fitting(&req) else { continue };
            // Tenants of its cohort above their share, furthest first.
            let mut above: Vec<usize> = (0..gaps.len())
                .filter(|&i| i != me && gaps[i].cohort == gaps[me].cohort && gaps[i].held > gaps[i].entitled)
                .collect();
            above.sort_by(|&a, &b| gaps[b].ratio().total_cmp(&gaps[a].ratio()).then(a.cmp(&b)));
            let mut chosen = None;
            for k in 1..=above.len() {
                let from: Vec<(String, f64)> = above[..k]
                    .iter()
                    .map(|&i| (gaps[i].name.clone(), gaps[i].held - gaps[i].entitled))
                    .collect();
                let pick = |core: &Core, v: &super::Entry| {
                    let Some(them) = core.tenant_of(v) else { return false };
                    let Some((_, spare)) = from.iter().find(|(n, _)| n == them) else { return false };
                    let lose =
                        v.live.as_ref().map_or(0.0, |l| f64::from(l.alloc.gpus) * l.nodes.len() as f64);
                    lose <= *spare + 1e-9 && core.live_pool(v).is_some_and(|p| core.borrows_in(them, p))
                };
                let Some(c) = self.choose_victims(&req, &pools, pick, started_by, now) else { continue };
                // Together, no victim's tenant falls below its share.
                let mut lost: HashMap<String, f64> = HashMap::new();
                for v in &c.0.victims {
                    let Some(ve) = self.entries.get(&WorkloadId(v.workload)) else { continue };
                    let g = ve.live.as_ref().map_or(0.0, |l| f64::from(l.alloc.gpus) * l.nodes.len() as f64);
                    if let Some(t) = self.tenant_of(ve) {
                        *lost.entry(t.to_string()).or_default() += g;
                    }
                }
                if lost.iter().all(|(t, l)| from.iter().any(|(n, spare)| n == t && *l <= *spare + 1e-9)) {
                    chosen = Some((c, lost));
                    break;
                }
            }
            let Some((chosen, lost)) = chosen else { continue };
            let furthest = &gaps[above[0]];
            let standing = format!(
                "{name} holds {} GPUs of its fair share {}; {} holds {} of its {}",
                gpus(gaps[me].held),
                gpus(gaps[me].entitled),
                furthest.name,
                gpus(furthest.held),
                gpus(furthest.entitled)
            );
            self.preempt_for_fair_share(
                id,
                name,
                &chosen,
                &standing,
                "tenants furthest above theirs",
                after,
                now,
            );
            // The pass goes on from where this leaves every tenant.
            gaps[me].held += ask;
            for (t, l) in lost {
                if let Some(g) = gaps.iter_mut().find(|g| g.name == t) {
                    g.held -= l;
                }
            }
        }
    }
}
