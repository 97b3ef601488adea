//! Operators' commands in the core: cancel, acknowledge a failure,
//! cordon/drain/resume a node (with who, why and until when, lapsing on
//! their own), and lift a quarantine. Each answers its request and is
//! journalled as intent before anything is carried out.

use super::*;

impl Core {
    /// Cordons whose `until` has passed end: the node takes work again.
    pub(super) fn lapse_intents(&mut self, now: Millis) {
        let due: Vec<String> = self
            .intents
            .values()
            .filter(|i| i.until.is_some_and(|u| u <= now))
            .map(|i| i.node.clone())
            .collect();
        for node in due {
            self.intents.remove(&node);
            self.record(Record::NodeIntent { node: node.clone(), intent: None });
            if let Some(idx) = self.fleet.node_by_name(&node)
                && self.fleet.nodes[idx.0 as usize].state != NodeState::Down
            {
                self.fleet.nodes[idx.0 as usize].state = NodeState::Ready;
                if let Some(snap) = self.snapshot.as_mut() {
                    snap.set_node_state(idx, NodeState::Ready);
                }
                self.capacity_changed();
            }
        }
    }

    /// Records who acknowledged a failure and why; acknowledging it again
    /// changes nothing and answers the same.
    pub(super) fn acknowledge(
        &mut self,
        request: u64,
        mut rec: WorkloadRecord,
        by: String,
        reason: Option<String>,
        now: Millis,
    ) {
        let id = rec.id;
        if rec.acknowledged.is_none() {
            let why = reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            rec.acknowledged = Some(Acknowledgement { by: by.clone(), at: now, reason });
            rec.updated_at = now;
            self.record(Record::Workload(Box::new(rec)));
            self.event(now, id, None, EventKind::Acknowledged, format!("acknowledged by {by}{why}"));
        }
        self.reply(request, Reply::Done { message: format!("{id}: acknowledged") });
    }

    pub(super) fn cancel(&mut self, request: u64, id: WorkloadId, now: Millis) {
        let Some(e) = self.entries.get_mut(&id) else {
            return self.reply(
                request,
                Reply::Error {
                    code: Refusal::Conflict,
                    message: format!("{id} is not live (unknown or already final)"),
                },
            );
        };
        if e.cancel_requested {
            return self.reply(request, Reply::Done { message: format!("{id}: cancel already in progress") });
        }
        e.cancel_requested = true;
        self.event(now, id, None, EventKind::CancelRequested, "cancel requested".into());
        let has_live = self.entries.get(&id).is_some_and(|e| e.live.is_some());
        if has_live {
            self.terminate_live(id, ProviderEnd::Cancelled, now);
            self.reply(request, Reply::Done { message: format!("{id}: terminating the running attempt") });
        } else {
            self.queue.remove(id);
            self.budget_forget(id);
            self.finish_workload(
                id,
                WorkloadState::Cancelled,
                Some(crate::failure::FailureClass::Cancelled),
                "cancelled before it ran".into(),
                now,
            );
            self.reply(request, Reply::Done { message: format!("{id}: cancelled") });
        }
    }

    pub(super) fn set_node_state(
        &mut self,
        request: u64,
        node: &str,
        state: NodeState,
        note: Option<NodeNote>,
        now: Millis,
    ) {
        let Some(idx) = self.named_node(request, node) else { return };
        let evict = note.as_ref().filter(|n| n.evict).map(|n| {
            let why = n.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
            (
                format!(
                    "node {node} drained by {}{why}",
                    if n.by.is_empty() { "an operator" } else { &n.by }
                ),
                n.grace_s,
            )
        });
        self.fleet.nodes[idx.0 as usize].state = state;
        if let Some(snap) = self.snapshot.as_mut() {
            snap.set_node_state(idx, state);
        }
        // An operator's cordon or drain is kept (journalled) until lifted;
        // making the node ready lifts it. The simulator's churn (no note)
        // leaves intents alone.
        match (state, note) {
            (NodeState::Cordoned | NodeState::Draining, Some(n)) => {
                let intent = NodeIntent {
                    node: node.to_string(),
                    state,
                    by: n.by,
                    reason: n.reason,
                    at: now,
                    until: n.until,
                };
                self.intents.insert(node.to_string(), intent.clone());
                self.record(Record::NodeIntent { node: node.to_string(), intent: Some(Box::new(intent)) });
            }
            (NodeState::Ready, _) if self.intents.remove(node).is_some() => {
                self.record(Record::NodeIntent { node: node.to_string(), intent: None });
            }
            _ => {}
        }
        if state == NodeState::Ready {
            self.capacity_changed();
        }
        // A drain lets running work finish; an evicting one stops it (with
        // grace) and places it again, as a move, not a failure.
        if let (NodeState::Draining, Some((message, grace_s))) = (state, evict) {
            let on_node: Vec<WorkloadId> = self
                .entries
                .iter()
                .filter(|(_, e)| e.live.as_ref().is_some_and(|l| l.nodes.contains(&idx)))
                .map(|(id, _)| *id)
                .collect();
            for id in on_node {
                self.terminate_live(id, ProviderEnd::Evicted { message: message.clone(), grace_s }, now);
            }
        }
        let health = self.health.node(node, now);
        let message = if health.quarantined && state == NodeState::Ready {
            format!(
                "node {node} is no longer cordoned or draining, but it stays quarantined until its cool-down ends \
                 (`canopy unquarantine {node} --reason …` ends it now)"
            )
        } else {
            format!("node {node} is now {state}")
        };
        self.reply(request, Reply::Done { message });
    }

    /// The node an operator's command names; answers the command with "not
    /// found" when there is none.
    pub(super) fn named_node(&mut self, request: u64, node: &str) -> Option<NodeIdx> {
        let idx = self.fleet.node_by_name(node);
        if idx.is_none() {
            let message = format!("no node named {node:?} in the fleet");
            self.reply(request, Reply::Error { code: Refusal::NotFound, message });
        }
        idx
    }

    /// Ends a node's quarantine at an operator's word. The lift is a health
    /// observation in the journal, so a restart replays it after the
    /// failures that caused the quarantine and it holds.
    pub(super) fn unquarantine(&mut self, request: u64, node: &str, now: Millis) {
        let Some(idx) = self.named_node(request, node) else { return };
        if !self.health.node(node, now).quarantined {
            return self.reply(
                request,
                Reply::Error { code: Refusal::Conflict, message: format!("node {node} is not quarantined") },
            );
        }
        let pool = self.fleet.node(idx).pool;
        let obs = HealthObservation {
            at: now,
            provider: self.fleet.provider_of(pool).name.clone(),
            pool: self.fleet.pool_label(pool),
            node: node.to_string(),
            class: None,
            ran_s: 0.0,
            free: false,
            lift: true,
        };
        self.record(Record::Health(obs.clone()));
        self.health.observe(&obs);
        self.observed(&obs, now);
        self.capacity_changed();
        self.nodes_recovered(&BTreeSet::from([node.to_string()]), "an operator lifted its quarantine", now);
        self.reply(
            request,
            Reply::Done {
                message: format!(
                    "node {node} is out of quarantine and takes work again, on probation: one more infrastructure \
                     failure quarantines it again"
                ),
            },
        );
    }
}
