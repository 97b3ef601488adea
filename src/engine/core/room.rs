//! Room freed by a preemption for fair share, kept for the workload it
//! was freed for.
//!
//! A fair-share preemption (either pass: `fair.rs`'s one workload a pass,
//! `fair_gap.rs`'s gap pass) stops victims so that one waiting workload X
//! fits. Without more, the serving order decides who takes the freed
//! GPUs, and another tenant's work queued (or arriving) meanwhile may take
//! them, so the stops pay for nobody's fair share. So the nodes chosen for
//! X are X's room: every other workload's request excludes them (as a
//! gang's hold does, `hold.rs`), and X is placed there when it fits there.
//!
//! The room ends when X is placed (anywhere), when X ends (cancelled,
//! finished), or when its bound passes: the longest stop grace of its
//! victims (SIGTERM to SIGKILL) plus [`ROOM_MARGIN_MS`] for the provider
//! to report the stop. A victim that takes longer than that no longer
//! keeps its node from others. An end unblocks whatever the room kept
//! out: blocked work and remembered "nothing fits" answers are asked
//! again (the room is part of the request they were asked with). A new
//! room asks nothing again: it only keeps nodes out, so what fitted
//! nowhere still fits nowhere.
//!
//! Derived state, not journalled: after a restart there is no room (the
//! bound is short; the serving order decides as without it).

use super::{Core, Millis};
use crate::engine::model::{EventKind, WorkloadId};
use crate::schedule::{Candidate, Decision, Policy, Requirements, place};
use std::collections::BTreeSet;

/// What a room's bound adds to its victims' longest stop grace: time for
/// the provider to report the stop (two rerank periods).
pub const ROOM_MARGIN_MS: i64 = 2 * super::fair::RERANK_MS;

/// Nodes kept for one workload after a fair-share preemption.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Room {
    /// Node names, for exclusions.
    pub names: BTreeSet<String>,
    /// When the room ends if its workload has not been placed.
    pub until: Millis,
}

impl Core {
    /// Keeps `nodes` for `id` until `until` (its victims were just told
    /// to stop), replacing any room it had.
    pub(super) fn keep_room(&mut self, id: WorkloadId, nodes: &[u32], until: Millis, now: Millis) {
        let names: BTreeSet<String> =
            nodes.iter().filter_map(|n| self.fleet.nodes.get(*n as usize)).map(|n| n.name.clone()).collect();
        if names.is_empty() {
            return;
        }
        let list: Vec<&str> = names.iter().map(String::as_str).collect();
        let msg = format!(
            "keeping {} for this workload until it is placed, for at most {}",
            list.join(","),
            crate::units::human_secs(until.secs_since(now).max(0.0))
        );
        self.event(now, id, None, EventKind::Unschedulable, msg);
        // Blocked work is not asked again: a room only keeps nodes out,
        // so what fitted nowhere still fits nowhere (as a pass goes on,
        // other tenants' waiting work must still read as blocked).
        self.fair.rooms.insert(id, Room { names, until });
    }

    /// Excludes every other workload's room from `id`'s request, less
    /// `id`'s own (two rooms on one node share it: both were freed there).
    pub(super) fn apply_rooms(&self, id: WorkloadId, req: &mut Requirements) {
        let own = self.fair.rooms.get(&id).map(|r| &r.names);
        for (owner, room) in &self.fair.rooms {
            if *owner != id {
                let others = room.names.iter().filter(|n| own.is_none_or(|o| !o.contains(*n)));
                req.exclude_nodes.extend(others.cloned());
            }
        }
    }

    /// `id`'s placement within its room, when it has one and fits there.
    pub(super) fn place_in_room(
        &self,
        id: WorkloadId,
        req: &Requirements,
        policy: &Policy,
    ) -> Option<Candidate> {
        let room = self.fair.rooms.get(&id)?;
        let snap = self.snapshot.as_ref()?;
        let mut only = req.clone();
        only.exclude_nodes.extend(
            self.fleet.nodes.iter().filter(|n| !room.names.contains(&n.name)).map(|n| n.name.clone()),
        );
        match place(&only, snap, policy) {
            Decision::Placed(p) => p.candidates.into_iter().next(),
            Decision::Unschedulable(_) => None,
        }
    }

    /// Ends `id`'s room (placed, finished or cancelled).
    pub(super) fn release_room(&mut self, id: WorkloadId) {
        if self.fair.rooms.remove(&id).is_some() {
            self.ask_again();
        }
    }

    /// Ends the rooms whose bound has passed, each told on its workload.
    pub(super) fn expire_rooms(&mut self, now: Millis) {
        let due: Vec<WorkloadId> =
            self.fair.rooms.iter().filter(|(_, r)| r.until <= now).map(|(id, _)| *id).collect();
        for id in due {
            self.event(
                now,
                id,
                None,
                EventKind::Unschedulable,
                "the room kept for this workload is open to others again: it was not placed within its \
                 victims' stop grace and a minute"
                    .into(),
            );
            self.release_room(id);
        }
    }

    /// When the next room ends, if any.
    pub(super) fn rooms_next_end(&self) -> Option<Millis> {
        self.fair.rooms.values().map(|r| r.until).min()
    }
}
