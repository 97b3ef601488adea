//! The core's self-check: every index and cache it keeps is compared with
//! a fresh scan of what it indexes (the simulator and tests turn it on;
//! a mismatch is the first failure kept).

use super::*;

impl Core {
    /// Makes the core verify each remembered "nothing fits" answer against
    /// a fresh decision (slow; for tests). Mismatches surface through
    /// [`Core::check_indexes`].
    #[doc(hidden)]
    pub fn set_self_check(&mut self, on: bool) {
        self.self_check = on;
    }

    /// Checks the core's indexes against what they index: the scheduler
    /// snapshot against a fresh build, the deadline index against every
    /// live attempt. Slow (a full rebuild); for tests.
    #[doc(hidden)]
    pub fn check_indexes(&self, now: Millis) -> Result<(), String> {
        if let Some(f) = &self.check_failure {
            return Err(f.clone());
        }
        if let Some(snap) = &self.snapshot {
            let view = if self.config.placement.uses_health() {
                self.health.view(now)
            } else {
                crate::health::HealthView::default()
            };
            if let Some(d) = snap.diff(&Snapshot::new(&self.fleet, &view)) {
                return Err(format!("snapshot differs from a fresh build: {d}"));
            }
        }
        let live: BTreeSet<WorkloadId> =
            self.entries.iter().filter(|(_, e)| e.live.is_some()).map(|(id, _)| *id).collect();
        if &live != self.live_ids.ids() {
            let missing: Vec<_> = live.symmetric_difference(self.live_ids.ids()).take(3).collect();
            return Err(format!("live-attempt index differs from a scan: {missing:?}"));
        }
        let due: BTreeMap<WorkloadId, (crate::fleet::PoolIdx, Millis)> = self
            .entries
            .iter()
            .filter_map(|(id, e)| Some((*id, (self.live_pool(e)?, e.expected_end()?))))
            .collect();
        if due != self.live_ids.filed() {
            return Err("live attempts' expected ends differ from a scan".into());
        }
        let scan: BTreeSet<(Millis, WorkloadId)> =
            self.entries.iter().filter_map(|(id, e)| self.attempt_deadline(e).map(|t| (t, *id))).collect();
        if scan != self.deadlines {
            let missing: Vec<_> = scan.symmetric_difference(&self.deadlines).take(3).collect();
            return Err(format!("deadline index differs from a scan: {missing:?}"));
        }
        if self.max_gpu_memory.to_bits() != max_gpu_memory(&self.fleet).to_bits() {
            return Err("cached max GPU memory is stale".into());
        }
        // Every grouped workload asks for what its group's answer is about,
        // was told that answer, and, while it holds, would be told it again.
        for (g, members) in self.queue.groups_with_ids() {
            let (Some(req), Some((_, text))) = (self.unfit.request(g), self.unfit.get(g)) else {
                return Err(format!("group {g} has no remembered answer"));
            };
            let holds = self.snapshot.as_ref().filter(|s| self.unfit.holds(g, s));
            for &(_, id) in members {
                let Some(e) = self.entries.get(&id) else {
                    return Err(format!("{id} is blocked in group {g} but not live"));
                };
                // A gang's hold may keep held nodes out of the request; it
                // only ever asks for less, so it is not a different request.
                let strip = |r: &crate::schedule::Requirements| {
                    let mut r = r.clone();
                    if let Some(h) = &self.hold {
                        r.exclude_nodes.retain(|n| !h.names.contains(n));
                    }
                    // So may rooms kept after a fair-share preemption.
                    r.exclude_nodes.retain(|n| !self.fair.rooms.values().any(|k| k.names.contains(n)));
                    r
                };
                let mine = strip(&self.placement_request(e));
                if mine != strip(req) {
                    return Err(format!("{id} is blocked in group {g} but asks for something else"));
                }
                if e.last_explanation.as_deref() != Some(text) {
                    return Err(format!("{id} is blocked in group {g} but was told something else"));
                }
                if let Some(snap) = holds {
                    let fresh = match crate::schedule::place(req, snap, &crate::schedule::Policy::default()) {
                        crate::schedule::Decision::Placed(_) => "placed".to_string(),
                        crate::schedule::Decision::Unschedulable(ex) => ex.to_string(),
                    };
                    if fresh != text {
                        return Err(format!("group {g}'s answer holds but {id} would now get {fresh:?}"));
                    }
                }
            }
        }
        Ok(())
    }
}
