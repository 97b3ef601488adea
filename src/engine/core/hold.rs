//! Holding nodes for a waiting gang, with backfill.
//!
//! On a busy fleet N nodes are rarely free at once: single-node work keeps
//! taking whatever frees up, and a big gang would wait forever. So the
//! highest-priority gang that does not fit holds the nodes it would start
//! on soonest ([`crate::schedule::gang_hold`]): no other work is placed on
//! them, except work whose own time limit ends before the held nodes are
//! expected to be free (backfill, as Slurm's backfill scheduler does with
//! `--time`). Work without a `max_runtime` (or at least an
//! `expected_runtime`) never backfills, since nobody can say when it ends.
//!
//! One gang holds at a time: the first in priority order. The hold is
//! derived state, rebuilt from the queue after a restart, and changes are
//! told in the gang's events. A hold that moves or goes unblocks whatever
//! it kept out, so nothing waits on a hold that is gone.

use super::{Core, Millis};
use crate::engine::model::{EventKind, WorkloadId};
use crate::fleet::NodeIdx;
use crate::schedule::{Requirements, gang_hold};
use std::collections::BTreeSet;

/// Nodes held for one waiting gang.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Hold {
    pub workload: WorkloadId,
    pub priority: u32,
    pub nodes: Vec<NodeIdx>,
    /// Node names, for exclusions.
    pub names: BTreeSet<String>,
    /// When every held node is expected to be free: the latest expected
    /// end of Canopy's work on them; `None` when some end is unknown (or
    /// another tenant holds one), and then nothing backfills.
    pub free_at: Option<Millis>,
}

impl Core {
    /// Applies the hold to another workload's request: the held nodes are
    /// excluded unless its time limit ends before they are expected free.
    /// Work of higher priority than the gang is not held back.
    pub(super) fn apply_hold(&self, id: WorkloadId, priority: u32, req: &mut Requirements, now: Millis) {
        let Some(h) = &self.hold else { return };
        if h.workload == id || priority > h.priority {
            return;
        }
        let bound = req.max_runtime.or(req.expected_runtime);
        let backfills = match (bound, h.free_at) {
            (Some(b), Some(free)) => now.plus_secs(b.as_secs_f64()) <= free,
            _ => false,
        };
        if !backfills {
            req.exclude_nodes.extend(h.names.iter().cloned());
        }
    }

    /// After gang `id` (priority `priority`) found no room: holds nodes for
    /// it when no gang of higher priority holds any.
    pub(super) fn maybe_hold(&mut self, id: WorkloadId, priority: u32, req: &Requirements, now: Millis) {
        if req.gang_size() < 2
            || self.hold.as_ref().is_some_and(|h| h.workload != id && h.priority >= priority)
        {
            return;
        }
        let Some(snap) = self.snapshot.as_ref() else { return };
        self.counts.hold_scans += 1;
        let found = gang_hold(req, snap);
        let next = found.map(|g| {
            let free_at = self.expected_free(&g.nodes);
            let names = g.nodes.iter().map(|n| self.fleet.node(*n).name.clone()).collect();
            (Hold { workload: id, priority, nodes: g.nodes, names, free_at }, g.domain)
        });
        let changed = match (&self.hold, &next) {
            (Some(a), Some((b, _))) => a.workload != b.workload || a.names != b.names,
            (None, None) => false,
            _ => true,
        };
        if !changed {
            return;
        }
        let released = self.hold.take();
        if let Some(old) = &released
            && old.workload != id
        {
            self.event(
                now,
                old.workload,
                None,
                EventKind::Unschedulable,
                "a gang of higher priority holds nodes now; this one no longer does".into(),
            );
        }
        if let Some((h, domain)) = next {
            let when = h.free_at.map_or_else(
                || "no one can say when they free up, so nothing else may use them".to_string(),
                |t| {
                    format!(
                        "expected free in {}; work that ends before then may use them",
                        crate::units::human_secs(t.secs_since(now).max(0.0))
                    )
                },
            );
            let names: Vec<&str> = h.names.iter().map(String::as_str).collect();
            let msg = format!("holding {} in {domain} for this gang: {when}", names.join(","));
            self.event(now, id, None, EventKind::Unschedulable, msg);
            self.hold = Some(h);
        }
        self.ask_again();
    }

    /// Ends the hold of `id` (placed, finished or cancelled).
    pub(super) fn release_hold(&mut self, id: WorkloadId) {
        if self.hold.as_ref().is_some_and(|h| h.workload == id) {
            self.hold = None;
            self.ask_again();
        }
    }

    /// Blocked work is asked again under a new hold or none: what the old
    /// one kept off its nodes may fit now, and a group of blocked work stays
    /// about one request (groups are answers about a request, and the hold
    /// is part of the request).
    pub(super) fn ask_again(&mut self) {
        self.queue.ungroup_all();
        self.unblock_all();
    }

    /// When every one of `nodes` is expected to have room: the latest
    /// expected end of Canopy's live attempts on them (placed at + the
    /// spec's max_runtime, else expected_runtime). `None` when one has no
    /// bound, or when another tenant uses a held node (its end is unknown).
    fn expected_free(&self, nodes: &[NodeIdx]) -> Option<Millis> {
        let mut latest: Option<Millis> = None;
        for n in nodes {
            let node = self.fleet.node(*n);
            let pool = self.fleet.pool(node.pool);
            let others =
                pool.shape.gpus_per_node.saturating_sub(node.free.gpus).saturating_sub(node.canopy_gpus);
            if others > 0 {
                return None;
            }
            for e in self.entries.values() {
                let Some(live) = e.live.as_ref().filter(|l| l.nodes.contains(n)) else { continue };
                let bound = e.rec.spec.constraints.max_runtime.or(e.rec.spec.expected_runtime)?;
                let att = &e.attempts[live.idx];
                let from = att.started_at.unwrap_or(att.placed_at);
                let end = from.plus_secs(bound.0.as_secs_f64());
                latest = Some(latest.map_or(end, |l: Millis| l.max(end)));
            }
        }
        latest
    }
}
