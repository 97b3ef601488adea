//! A workload's exclusions: the nodes and pools its infrastructure
//! failures ruled out while it is placed again, how they end, and the
//! operator's lever on them.
//!
//! An exclusion ends in one of three ways:
//! - its TTL ([`super::CoreConfig::exclusion_ttl_s`]) after the last one
//!   was added: all of the workload's exclusions lapse together;
//! - the node is back and healthy. The core knows that from two facts
//!   only: its provider's inventory reports it ready after a report in
//!   which it was not ready or not listed at all (a provider's first
//!   inventory after a start proves no recovery and ends nothing), or its
//!   quarantine ends or an operator lifts it. That node's exclusion ends
//!   for every workload; pools' exclusions keep their TTL;
//! - an operator clears them (`canopy unexclude w-N [NODE|POOL]`,
//!   `POST /v1/workloads/{id}/unexclude`): the workload's events say who
//!   and why, as the audit trail does.
//!
//! Every change is saved on the workload's record (`exclusions`), which
//! is what the API's workload view and `canopy status` show, and what a
//! restart restores, so what ended stays ended. Pure: no I/O, no clock.

use super::{Core, Entry, Reply};
use crate::engine::command::Refusal;
use crate::engine::model::{EventKind, Exclusions, Millis, WorkloadId};
use std::collections::BTreeSet;

impl Entry {
    /// The exclusions as the workload's record carries them.
    pub(super) fn exclusions(&self, ttl_s: f64) -> Exclusions {
        let since =
            self.excluded_at.filter(|_| !self.exclude_nodes.is_empty() || !self.exclude_pools.is_empty());
        Exclusions {
            nodes: self.exclude_nodes.iter().cloned().collect(),
            pools: self.exclude_pools.iter().cloned().collect(),
            since,
            until: since.map(|t| t.plus_secs(ttl_s)),
        }
    }

    /// Forgets every exclusion; true when there were any.
    fn clear_exclusions(&mut self) -> bool {
        let had = !self.exclude_nodes.is_empty() || !self.exclude_pools.is_empty();
        self.exclude_nodes.clear();
        self.exclude_pools.clear();
        self.excluded_at = None;
        had
    }
}

impl Core {
    /// What a live workload's failures exclude now (`None` when it is not
    /// live: an ended workload excludes nothing).
    pub fn exclusions(&self, id: WorkloadId) -> Option<Exclusions> {
        self.entries.get(&id).map(|e| e.exclusions(self.config.exclusion_ttl_s))
    }

    /// Notes that `id`'s exclusions were (re)set at `at`.
    pub(super) fn exclusions_set(&mut self, id: WorkloadId, at: Millis) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.excluded_at = Some(at);
            self.expiries.insert((at.plus_secs(self.config.exclusion_ttl_s), id));
        }
    }

    /// Forgets the exclusions that have expired: those workloads may go
    /// anywhere that fits again.
    pub(super) fn expire_exclusions(&mut self, now: Millis) {
        let ttl = self.config.exclusion_ttl_s;
        while let Some(&(at, id)) = self.expiries.first() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            let Some(e) = self.entries.get_mut(&id) else { continue };
            // Renewed since: a later entry in `expiries` covers it.
            if e.excluded_at.is_none_or(|t| t.plus_secs(ttl) > now) {
                continue;
            }
            let what: Vec<String> = e.exclude_nodes.iter().chain(&e.exclude_pools).cloned().collect();
            if !e.clear_exclusions() {
                continue;
            }
            let msg = format!(
                "exclusions from earlier failures expired after {:.0}m ({}); placing anywhere that fits",
                ttl / 60.0,
                what.join(", ")
            );
            self.event(now, id, None, EventKind::Retry, msg);
            self.reconsider(id, now);
        }
    }

    /// Nodes that are back and healthy (`why` says how the core knows)
    /// are excluded by no workload any more.
    pub(super) fn nodes_recovered(&mut self, nodes: &BTreeSet<String>, why: &str, now: Millis) {
        if nodes.is_empty() {
            return;
        }
        let hit: Vec<(WorkloadId, Vec<String>)> = self
            .entries
            .iter()
            .filter_map(|(id, e)| {
                let ended: Vec<String> = e.exclude_nodes.intersection(nodes).cloned().collect();
                (!ended.is_empty()).then_some((*id, ended))
            })
            .collect();
        for (id, ended) in hit {
            let Some(e) = self.entries.get_mut(&id) else { continue };
            for n in &ended {
                e.exclude_nodes.remove(n);
            }
            if e.exclude_nodes.is_empty() && e.exclude_pools.is_empty() {
                e.excluded_at = None;
            }
            let (one, verb) = if ended.len() == 1 { ("node", "is") } else { ("nodes", "are") };
            let msg = format!(
                "{one} {} {verb} back ({why}); no longer excluded by its earlier failure",
                ended.join(", ")
            );
            self.event(now, id, None, EventKind::Retry, msg);
            self.reconsider(id, now);
        }
    }

    /// An operator clears a live workload's exclusions: all of them, or
    /// the one node or pool named.
    pub(super) fn unexclude(
        &mut self,
        request: u64,
        id: WorkloadId,
        target: Option<String>,
        by: String,
        reason: Option<String>,
        now: Millis,
    ) {
        let Some(e) = self.entries.get_mut(&id) else {
            let message = format!("{id} is not live (unknown or already final): it excludes nothing");
            return self.reply(request, Reply::Error { code: Refusal::Conflict, message });
        };
        let listed: Vec<String> = e.exclude_nodes.iter().chain(&e.exclude_pools).cloned().collect();
        if listed.is_empty() {
            let message = format!("{id} excludes no node or pool; nothing to clear");
            return self.reply(request, Reply::Error { code: Refusal::Conflict, message });
        }
        let cleared = match &target {
            None => {
                e.clear_exclusions();
                listed.join(", ")
            }
            Some(t) if e.exclude_nodes.remove(t) || e.exclude_pools.remove(t) => {
                if e.exclude_nodes.is_empty() && e.exclude_pools.is_empty() {
                    e.excluded_at = None;
                }
                t.clone()
            }
            Some(t) => {
                let message = format!(
                    "{id} does not exclude {t:?} (it excludes: {}); name one of those, or none to clear all",
                    listed.join(", ")
                );
                return self.reply(request, Reply::Error { code: Refusal::Conflict, message });
            }
        };
        let who = if by.is_empty() { "an operator" } else { by.as_str() };
        let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        let msg = format!("exclusion of {cleared} cleared by {who}{why}; placing there again is allowed");
        self.event(now, id, None, EventKind::Retry, msg);
        self.reconsider(id, now);
        self.reply(request, Reply::Done { message: format!("{id}: no longer excludes {cleared}") });
    }

    /// A workload whose exclusions shrank is placed again, alone (its
    /// blocked group's answer was about what it asked for before), and its
    /// record says what it excludes now.
    fn reconsider(&mut self, id: WorkloadId, now: Millis) {
        self.touched.push(id);
        self.queue.ungroup(id);
        self.queue.unblock(id);
        self.save_workload(id, now);
    }
}
