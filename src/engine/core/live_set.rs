//! The workloads with a live attempt, and, per pool, when each is expected
//! to end (its start, or its placement until it starts, plus its spec's
//! `expected_runtime`). The first is what the shell polls; the second is
//! what patience reads to find capacity due to free in a pool
//! (`patience.rs`) without looking at every live attempt in the fleet.

use crate::engine::model::{Millis, WorkloadId};
use crate::fleet::PoolIdx;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound::{Excluded, Included};

#[derive(Debug, Clone, Default)]
pub(super) struct LiveSet {
    ids: BTreeSet<WorkloadId>,
    /// Where each live workload is filed by its expected end.
    due_of: FxHashMap<WorkloadId, (PoolIdx, Millis)>,
    /// Per pool, live workloads with an expected end, soonest first.
    due: HashMap<PoolIdx, BTreeSet<(Millis, WorkloadId)>>,
}

impl LiveSet {
    /// `id` is live, in `pool`, expected to end at `due` (when its spec
    /// says how long it runs). Replaces what was known of it.
    pub fn insert(&mut self, id: WorkloadId, pool: Option<PoolIdx>, due: Option<Millis>) {
        self.remove(id);
        self.ids.insert(id);
        if let (Some(pool), Some(due)) = (pool, due) {
            self.due.entry(pool).or_default().insert((due, id));
            self.due_of.insert(id, (pool, due));
        }
    }

    /// `id`'s expected end moved (it started running).
    pub fn set_due(&mut self, id: WorkloadId, due: Millis) {
        let Some(&(pool, _)) = self.due_of.get(&id) else { return };
        self.insert(id, Some(pool), Some(due));
    }

    pub fn remove(&mut self, id: WorkloadId) {
        self.ids.remove(&id);
        if let Some((pool, due)) = self.due_of.remove(&id)
            && let Some(set) = self.due.get_mut(&pool)
        {
            set.remove(&(due, id));
            if set.is_empty() {
                self.due.remove(&pool);
            }
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &WorkloadId> {
        self.ids.iter()
    }

    pub fn ids(&self) -> &BTreeSet<WorkloadId> {
        &self.ids
    }

    /// Live workloads in `pool` expected to end after `after` and by `by`,
    /// soonest first.
    pub fn due_in(&self, pool: PoolIdx, after: Millis, by: Millis) -> impl Iterator<Item = WorkloadId> + '_ {
        self.due
            .get(&pool)
            .into_iter()
            .flat_map(move |s| {
                s.range((Excluded((after, WorkloadId(u64::MAX))), Included((by, WorkloadId(u64::MAX)))))
            })
            .map(|&(_, id)| id)
    }

    /// Each filed workload's pool and expected end, for the core's
    /// self-check against a scan.
    pub fn filed(&self) -> BTreeMap<WorkloadId, (PoolIdx, Millis)> {
        let by_pool = self.due.iter().flat_map(|(p, s)| s.iter().map(move |&(t, id)| (id, (*p, t))));
        by_pool.collect()
    }
}
