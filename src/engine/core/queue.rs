//! The queue of workloads without a live attempt: ready to place (by
//! priority, then age), blocked (nothing fits; waiting for capacity to
//! change, not polled), and backing off (waiting for a retry delay).

use crate::engine::model::{Millis, WorkloadId};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

type Key = (Reverse<u32>, WorkloadId);

#[derive(Debug, Default, Clone)]
pub(super) struct Queue {
    ready: BTreeSet<Key>,
    blocked: BTreeSet<Key>,
    backoff: BTreeSet<(Millis, u32, WorkloadId)>,
    /// Where each queued workload is, to remove it in O(log n).
    at: BTreeMap<WorkloadId, Slot>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Ready(u32),
    Blocked(u32),
    Backoff(Millis, u32),
}

impl Queue {
    pub fn push_ready(&mut self, priority: u32, id: WorkloadId) {
        self.remove(id);
        self.ready.insert((Reverse(priority), id));
        self.at.insert(id, Slot::Ready(priority));
    }

    pub fn push_blocked(&mut self, priority: u32, id: WorkloadId) {
        self.remove(id);
        self.blocked.insert((Reverse(priority), id));
        self.at.insert(id, Slot::Blocked(priority));
    }

    pub fn push_backoff(&mut self, until: Millis, priority: u32, id: WorkloadId) {
        self.remove(id);
        self.backoff.insert((until, priority, id));
        self.at.insert(id, Slot::Backoff(until, priority));
    }

    pub fn remove(&mut self, id: WorkloadId) {
        match self.at.remove(&id) {
            Some(Slot::Ready(p)) => {
                self.ready.remove(&(Reverse(p), id));
            }
            Some(Slot::Blocked(p)) => {
                self.blocked.remove(&(Reverse(p), id));
            }
            Some(Slot::Backoff(t, p)) => {
                self.backoff.remove(&(t, p, id));
            }
            None => {}
        }
    }

    /// Takes the highest-priority ready workload.
    pub fn pop_ready(&mut self) -> Option<WorkloadId> {
        let (_, id) = self.ready.pop_first()?;
        self.at.remove(&id);
        Some(id)
    }

    /// Moves every blocked workload back to ready.
    pub fn unblock_all(&mut self) {
        for (Reverse(p), id) in std::mem::take(&mut self.blocked) {
            self.ready.insert((Reverse(p), id));
            self.at.insert(id, Slot::Ready(p));
        }
    }

    /// Blocked workloads, highest priority then oldest first.
    pub fn blocked_in_order(&self) -> Vec<WorkloadId> {
        self.blocked.iter().map(|(_, id)| *id).collect()
    }

    /// Moves one blocked workload back to ready; others stay blocked.
    pub fn unblock(&mut self, id: WorkloadId) {
        if let Some(Slot::Blocked(p)) = self.at.get(&id).copied() {
            self.blocked.remove(&(Reverse(p), id));
            self.ready.insert((Reverse(p), id));
            self.at.insert(id, Slot::Ready(p));
        }
    }

    /// Moves workloads whose backoff has passed to ready.
    pub fn release_backoff(&mut self, now: Millis) {
        while let Some(&(t, p, id)) = self.backoff.first() {
            if t > now {
                break;
            }
            self.backoff.pop_first();
            self.ready.insert((Reverse(p), id));
            self.at.insert(id, Slot::Ready(p));
        }
    }

    pub fn next_backoff(&self) -> Option<Millis> {
        self.backoff.first().map(|(t, _, _)| *t)
    }

    pub fn is_blocked(&self, id: WorkloadId) -> bool {
        matches!(self.at.get(&id), Some(Slot::Blocked(_)))
    }

    pub fn blocked_len(&self) -> usize {
        self.blocked.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_then_age() {
        let mut q = Queue::default();
        q.push_ready(10, WorkloadId(1));
        q.push_ready(90, WorkloadId(3));
        q.push_ready(90, WorkloadId(2));
        assert_eq!(q.pop_ready(), Some(WorkloadId(2)));
        assert_eq!(q.pop_ready(), Some(WorkloadId(3)));
        assert_eq!(q.pop_ready(), Some(WorkloadId(1)));
        assert_eq!(q.pop_ready(), None);
    }

    #[test]
    fn blocked_wait_until_unblocked_and_backoff_until_due() {
        let mut q = Queue::default();
        q.push_blocked(50, WorkloadId(1));
        q.push_backoff(Millis(100), 50, WorkloadId(2));
        assert_eq!(q.pop_ready(), None);
        q.release_backoff(Millis(99));
        assert_eq!(q.pop_ready(), None);
        q.release_backoff(Millis(100));
        assert_eq!(q.pop_ready(), Some(WorkloadId(2)));
        assert!(q.is_blocked(WorkloadId(1)));
        q.unblock_all();
        assert_eq!(q.pop_ready(), Some(WorkloadId(1)));
    }
}
