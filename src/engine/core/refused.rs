//! Launches a provider refused for lack of capacity, and what the core
//! then believes about the nodes that refused.
//!
//! A refusal is not a failed attempt: nothing ran and the workload spent
//! nothing. It is journalled as one `refused` event; the attempt's row says
//! so (rule [`REFUSED_RULE`]) until the workload's next placement takes the
//! row over, so refusals never pile up attempts; and it is no health
//! observation (a full node is not a faulty one).
//!
//! What the core learns is about the node: its view (the provider's last
//! inventory, plus Canopy's own allocations) said the request fits, the
//! provider says it does not. So the node counts as full — its free
//! capacity is hidden from placement — until the provider says otherwise:
//!
//! - its provider's next inventory reports the node differently from the
//!   report the core had when it refused (free capacity then comes from
//!   that report); an inventory that repeats the old report leaves it full
//!   until the belief expires;
//! - a release on the node makes what it released free again (the rest
//!   stays hidden);
//! - the belief expires, [`CoreConfig::capacity_refusal_s`] after the
//!   refusal, doubling for each refusal of the node in a row (no launch
//!   accepted there between), up to [`CoreConfig::capacity_refusal_max_s`]:
//!   a provider whose inventory never changes, or none (the simulator), is
//!   asked again, less and less often.
//!
//! So a node that keeps refusing is launched on at most once per inventory
//! refresh, the workload is placed elsewhere or waits, blocked with its
//! reason like any work nothing fits, and it is placed as soon as capacity
//! appears. A gang's refusal does not say which rank's node was full, so
//! every node of the gang counts as full.
//!
//! Beliefs are not journalled: after a restart the first launch on a node
//! asks it again, and a refusal then teaches the same.
//!
//! A refusal that answers one of several launch calls (the launch was
//! re-sent after a timeout, and another call may yet be accepted) closes
//! the attempt as a capacity failure instead, as before: only a placement
//! whose single call was refused can give its attempt id to the next.
//!
//! Pure, like the rest of the core: no I/O, no clock.
//!
//! [`CoreConfig::capacity_refusal_s`]: super::CoreConfig::capacity_refusal_s
//! [`CoreConfig::capacity_refusal_max_s`]: super::CoreConfig::capacity_refusal_max_s

use super::Core;
use crate::engine::model::*;
use crate::engine::rules::REFUSED_RULE;
use crate::failure::FailureClass;
use crate::fleet::{Free, NodeIdx, NodeState};
use std::collections::{BTreeSet, HashMap};

/// The nodes that refused launches, by name (indices change with every
/// inventory), and when those beliefs expire.
#[derive(Debug, Clone, Default)]
pub(super) struct Beliefs {
    nodes: HashMap<String, Belief>,
    /// `(until, node)` of every belief that holds, soonest first.
    expiries: BTreeSet<(Millis, String)>,
}

#[derive(Debug, Clone)]
struct Belief {
    /// The free capacity hidden from placement while the node counts as
    /// full; `None` once forgotten (the entry stays for the streak).
    hidden: Option<Free>,
    /// When the belief expires.
    until: Millis,
    /// Refusals of this node in a row, no launch accepted there between.
    streak: u32,
    /// What its provider last reported about the node (state, used by
    /// others) when it refused, if it had reported it.
    reported: Option<(NodeState, Free)>,
}

impl Beliefs {
    /// The nodes that count as full after refusing a launch, and until
    /// when at most.
    pub(super) fn full(&self) -> impl Iterator<Item = (&str, Millis)> {
        self.nodes.iter().filter(|(_, b)| b.hidden.is_some()).map(|(n, b)| (n.as_str(), b.until))
    }

    /// When the next belief expires.
    pub(super) fn next_expiry(&self) -> Option<Millis> {
        self.expiries.first().map(|(t, _)| *t)
    }
}

fn plus(a: Free, b: Free) -> Free {
    Free {
        gpus: a.gpus.saturating_add(b.gpus),
        cpu_cores: a.cpu_cores + b.cpu_cores,
        memory_gb: a.memory_gb + b.memory_gb,
        disk_gb: a.disk_gb + b.disk_gb,
    }
}

impl Core {
    /// The provider refused the live attempt's only launch call for lack
    /// of capacity. Returns false (nothing done) when the attempt is not
    /// live or its launch was re-sent: the caller closes it as a failure.
    pub(super) fn on_refused(&mut self, a: AttemptId, message: &str, now: Millis) -> bool {
        let Some((e, idx)) = self.live_mut(a) else { return false };
        if e.live.as_ref().is_none_or(|l| l.launch_resends > 0 || l.acked) {
            return false;
        }
        let Some(live) = e.live.take() else { return false };
        let att = &mut e.attempts[idx];
        att.state = AttemptState::Failed;
        att.ended_at = Some(now);
        att.class = Some(FailureClass::Capacity);
        att.rule = Some(REFUSED_RULE.to_string());
        att.evidence = Some(message.to_string());
        let (label, provider) = (att.nodes_label(), att.provider.clone());
        let cancelled = e.cancel_requested;
        e.rec.state = WorkloadState::Queued;
        e.rec.not_before = None;
        e.rec.reason = Some(format!("launch refused for capacity on {label}; waits for capacity"));
        self.live_ids.remove(a.workload);
        for n in &live.nodes {
            self.allocate(*n, live.alloc, -1);
        }
        self.uncharge_quota(live.charged.clone());
        let mut backoff = 0.0f64;
        for n in &live.nodes {
            backoff = backoff.max(self.believe_full(*n, now));
        }
        self.save_attempt(a.workload, idx);
        let msg = format!(
            "launch refused for capacity on {label}: {message}. Nothing ran and no attempt is spent; {label} \
             counts as full until {provider} reports it again or {} pass",
            crate::units::human_secs(backoff)
        );
        self.event(now, a.workload, Some(a), EventKind::Refused, msg);
        if cancelled {
            let why = "cancelled before it ran".to_string();
            self.finish_workload(
                a.workload,
                WorkloadState::Cancelled,
                Some(FailureClass::Cancelled),
                why,
                now,
            );
        } else {
            self.save_workload(a.workload, now);
            // Placed elsewhere in this event's pass, or blocked there with
            // the explanation of why nothing else fits.
            self.queue.push_ready(self.queue_priority(a.workload), a.workload);
        }
        true
    }

    /// The node refused a launch: it counts as full. Returns how long the
    /// belief lasts at most (seconds).
    fn believe_full(&mut self, node: NodeIdx, now: Millis) -> f64 {
        let Some(n) = self.fleet.nodes.get(node.0 as usize) else { return 0.0 };
        let (name, free) = (n.name.clone(), n.free);
        let reported = self.inventory.reported(&name);
        let (base, max) = (self.config.capacity_refusal_s, self.config.capacity_refusal_max_s.max(0.0));
        let b = self.beliefs.nodes.entry(name.clone()).or_insert(Belief {
            hidden: None,
            until: now,
            streak: 0,
            reported: None,
        });
        // A streak ends when its last belief ended long ago.
        if now.secs_since(b.until) > max {
            b.streak = 0;
        }
        b.streak = b.streak.saturating_add(1);
        let secs = (base * 2f64.powi(b.streak.saturating_sub(1).min(30) as i32)).min(max);
        if b.hidden.is_some() {
            self.beliefs.expiries.remove(&(b.until, name.clone()));
        }
        b.until = now.plus_secs(secs);
        b.hidden = Some(plus(b.hidden.unwrap_or_default(), free));
        b.reported = reported;
        self.beliefs.expiries.insert((b.until, name));
        self.set_free(node, Free::default());
        secs
    }

    /// A launch on these nodes was accepted: their streaks of refusals end.
    pub(super) fn launch_accepted_on(&mut self, nodes: &[NodeIdx]) {
        for n in nodes {
            let Some(name) = self.fleet.nodes.get(n.0 as usize).map(|n| &n.name) else { continue };
            if let Some(b) = self.beliefs.nodes.get_mut(name) {
                b.streak = 0;
                if b.hidden.is_none() {
                    self.beliefs.nodes.remove(name);
                }
            }
        }
    }

    /// A node of the fleet by name: from the scheduler's view's map when
    /// there is one (it is dropped whenever the fleet's nodes change), else
    /// by walking the fleet.
    fn node_named(&self, name: &str) -> Option<NodeIdx> {
        match &self.snapshot {
            Some(snap) => snap.node_by_name(name),
            None => self.fleet.node_by_name(name),
        }
    }

    /// Forgets that `name` is full: what it hid is free again, and the
    /// blocked work that fits there is woken.
    fn forget_full(&mut self, name: &str) {
        let Some(b) = self.beliefs.nodes.get_mut(name) else { return };
        let Some(hidden) = b.hidden.take() else { return };
        self.beliefs.expiries.remove(&(b.until, name.to_string()));
        if let Some(idx) = self.node_named(name) {
            let free = plus(self.fleet.nodes[idx.0 as usize].free, hidden);
            self.set_free(idx, free);
            self.node_released(idx);
        }
    }

    /// Forgets the beliefs that have expired.
    pub(super) fn expire_beliefs(&mut self, now: Millis) {
        while let Some((t, name)) = self.beliefs.expiries.first().cloned() {
            if t > now {
                break;
            }
            self.beliefs.expiries.pop_first();
            if self.beliefs.nodes.get(&name).is_some_and(|b| b.until <= now) {
                self.forget_full(&name);
            }
        }
    }

    /// After `provider`'s inventory replaced its nodes (their free capacity
    /// is now the report's): a node that refused stays full only while its
    /// belief lasts and the provider reports it exactly as before it
    /// refused; otherwise the provider has said otherwise and the report
    /// stands.
    pub(super) fn beliefs_after_inventory(
        &mut self,
        reported: &HashMap<String, (NodeState, Free)>,
        now: Millis,
    ) {
        let names: Vec<String> = self
            .beliefs
            .nodes
            .iter()
            .filter(|(n, b)| b.hidden.is_some() && reported.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let Some(b) = self.beliefs.nodes.get_mut(&name) else { continue };
            let idx = self.fleet.node_by_name(&name);
            let keep = b.until > now && b.reported.is_some() && b.reported == reported.get(&name).copied();
            match idx {
                Some(idx) if keep => {
                    b.hidden = Some(self.fleet.nodes[idx.0 as usize].free);
                    self.set_free(idx, Free::default());
                }
                _ => {
                    self.beliefs.expiries.remove(&(b.until, name.clone()));
                    b.hidden = None;
                }
            }
        }
        // Nodes the fleet no longer lists are forgotten altogether.
        let fleet = &self.fleet;
        let gone: Vec<String> =
            self.beliefs.nodes.keys().filter(|n| fleet.node_by_name(n).is_none()).cloned().collect();
        for name in gone {
            if let Some(b) = self.beliefs.nodes.remove(&name) {
                self.beliefs.expiries.remove(&(b.until, name));
            }
        }
    }

    /// What a node's capacity would be with no belief about it: for the
    /// inventory's "did capacity grow" check.
    pub(super) fn unhidden_free(&self, name: &str, free: Free) -> Free {
        match self.beliefs.nodes.get(name).and_then(|b| b.hidden) {
            Some(h) => plus(free, h),
            None => free,
        }
    }

    /// Sets a node's free capacity, in the fleet and the scheduler's view.
    fn set_free(&mut self, node: NodeIdx, free: Free) {
        let Some(n) = self.fleet.nodes.get_mut(node.0 as usize) else { return };
        n.free = free;
        if let Some(snap) = self.snapshot.as_mut() {
            snap.set_node_capacity(node, n.free, n.canopy_gpus);
        }
    }

    /// Why a workload just refused waits, after the explanation's first
    /// line, for its reason.
    pub(super) fn refusal_note(e: &super::Entry) -> Option<String> {
        let last = e.attempts.last().filter(|t| t.rule.as_deref() == Some(REFUSED_RULE))?;
        Some(format!(" (launch refused for capacity on {})", last.nodes_label()))
    }
}
