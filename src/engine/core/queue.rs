//! The queue of workloads without a live attempt: ready to place (by
//! priority, then age), blocked (nothing fits; waiting for capacity to
//! change, not polled), and backing off (waiting for a retry delay).
//!
//! Blocked workloads that the scheduler found nothing fits are kept in
//! groups, one per remembered answer (`schedule::UnfitCache` entry, by its
//! id), so that waking every blocked workload costs one check per group:
//! while a group's answer still holds, placing its members again would
//! give that same answer, so [`Queue::pop_ready_checking`] leaves them
//! where they are, in the order the members would have come up.

use super::waiting::Waiting;
use crate::engine::model::{Millis, WorkloadId};
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

/// Queue order: highest priority, then oldest (lowest id).
pub(super) type Key = (Reverse<u32>, WorkloadId);

#[derive(Debug, Default, Clone)]
pub(super) struct Queue {
    ready: BTreeSet<Key>,
    /// Blocked workloads outside any group.
    blocked: BTreeSet<Key>,
    /// Blocked workloads by the answer that blocked them.
    groups: BTreeMap<u64, BTreeSet<Key>>,
    /// How many workloads the groups hold.
    grouped: usize,
    /// Groups woken and not yet checked at their next member: that
    /// member's key and the group.
    woken: BTreeSet<(Key, u64)>,
    /// The same, by group.
    woken_from: FxHashMap<u64, Key>,
    /// The key of the workload the current pass took last.
    pass_at: Option<Key>,
    /// Groups that lost their last member, for their owner to forget.
    emptied: Vec<u64>,
    backoff: BTreeSet<(Millis, u32, WorkloadId)>,
    /// Blocked workloads waiting for cheaper capacity (patience), by each
    /// pool (its index) whose release could offer it: only those wake them.
    waiting: Waiting,
    /// Where each queued workload is, to remove it in O(log n).
    at: BTreeMap<WorkloadId, Slot>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    Ready(u32),
    Blocked(u32),
    Grouped(u32, u64),
    Backoff(Millis, u32),
    Waiting(u32),
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

    /// Blocks a workload that waits for cheaper capacity in `pools`: a
    /// release in one of them wakes it ([`Queue::waiting_in`]), as does
    /// [`Queue::unblock_all`] or [`Queue::unblock`].
    pub fn push_waiting(&mut self, priority: u32, id: WorkloadId, pools: Vec<u32>) {
        self.remove(id);
        self.waiting.insert((Reverse(priority), id), pools);
        self.at.insert(id, Slot::Waiting(priority));
    }

    /// Workloads waiting on pool `pool`, in no particular order.
    pub fn waiting_in(&self, pool: u32) -> impl Iterator<Item = Key> + '_ {
        self.waiting.in_pool(pool)
    }

    /// Every waiting workload, in no particular order.
    pub fn waiting_all(&self) -> impl Iterator<Item = Key> + '_ {
        self.waiting.all()
    }

    fn stop_waiting(&mut self, key: Key) {
        self.waiting.remove(key.1);
    }

    /// Blocks a workload in `group`: it got that group's answer.
    pub fn push_unfit(&mut self, priority: u32, id: WorkloadId, group: u64) {
        self.remove(id);
        self.groups.entry(group).or_default().insert((Reverse(priority), id));
        self.grouped += 1;
        self.at.insert(id, Slot::Grouped(priority, group));
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
            Some(Slot::Grouped(p, g)) => self.leave_group(g, (Reverse(p), id)),
            Some(Slot::Backoff(t, p)) => {
                self.backoff.remove(&(t, p, id));
            }
            Some(Slot::Waiting(p)) => self.stop_waiting((Reverse(p), id)),
            None => {}
        }
    }

    fn leave_group(&mut self, g: u64, key: Key) {
        let Some(members) = self.groups.get_mut(&g) else { return };
        if members.remove(&key) {
            self.grouped -= 1;
        }
        if self.woken.remove(&(key, g)) {
            self.woken_from.remove(&g);
            // It was the group's next member to check: the next one is.
            if let Some(&next) = members.range((Excluded(key), Unbounded)).next() {
                self.woken.insert((next, g));
                self.woken_from.insert(g, next);
            }
        }
        if members.is_empty() {
            self.groups.remove(&g);
            self.emptied.push(g);
        }
    }

    /// Takes the highest-priority ready workload.
    #[cfg(test)]
    pub fn pop_ready(&mut self) -> Option<WorkloadId> {
        self.pop_ready_checking(|_| false)
    }

    /// Takes the next workload to place, in the order a pass over every
    /// ready workload would, woken groups included: a woken group's members
    /// come up at their keys, and at each, `holds(group)` says whether the
    /// group's answer still holds. While it does, its members stay blocked
    /// (placing them would change nothing); once it does not, its members
    /// from there on become ready and come up one by one.
    pub fn pop_ready_checking(&mut self, mut holds: impl FnMut(u64) -> bool) -> Option<WorkloadId> {
        loop {
            let next = self.ready.first().copied();
            let Some(&(k, g)) = self.woken.first() else { break };
            if next.is_some_and(|n| n < k) {
                break;
            }
            self.woken.pop_first();
            self.woken_from.remove(&g);
            let Some(members) = self.groups.get(&g) else { continue };
            // Nothing can change what placing them gives before the next
            // workload that may be placed: the next ready one, or the next
            // member of another woken group (which may become ready).
            let bound = match (next, self.woken.first().map(|w| w.0)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if holds(g) {
                // Its members up to `bound` stay; the group is checked again
                // at its first member after `bound`.
                if let Some(b) = bound
                    && let Some(&after) = members.range((Excluded(b), Unbounded)).next()
                {
                    self.woken.insert((after, g));
                    self.woken_from.insert(g, after);
                }
            } else {
                let wake: Vec<Key> = members.range(k..).copied().collect();
                for key in wake {
                    self.leave_group(g, key);
                    self.ready.insert(key);
                    self.at.insert(key.1, Slot::Ready(key.0.0));
                }
            }
        }
        let key = self.ready.pop_first();
        match key {
            Some(key) => {
                self.at.remove(&key.1);
                self.pass_at = Some(key);
            }
            // The pass is over: the next one starts from the top.
            None => self.pass_at = None,
        }
        key.map(|k| k.1)
    }

    /// Moves every blocked workload back to ready; groups are woken as a
    /// whole, to be checked as their members come up.
    pub fn unblock_all(&mut self) {
        for key in self.waiting.take_all() {
            self.ready.insert(key);
            self.at.insert(key.1, Slot::Ready(key.0.0));
        }
        for (Reverse(p), id) in std::mem::take(&mut self.blocked) {
            self.ready.insert((Reverse(p), id));
            self.at.insert(id, Slot::Ready(p));
        }
        self.woken.clear();
        self.woken_from.clear();
        for (&g, members) in &self.groups {
            // Members the current pass already went by wait for the next
            // pass, as a workload blocked there would.
            let first = match self.pass_at {
                Some(at) => members.range((Excluded(at), Unbounded)).next(),
                None => members.first(),
            };
            if let Some(&k) = first {
                self.woken.insert((k, g));
                self.woken_from.insert(g, k);
            }
        }
    }

    /// Blocked workloads outside any group, highest priority then oldest first.
    pub fn blocked_in_order(&self) -> impl Iterator<Item = Key> + '_ {
        self.blocked.iter().copied()
    }

    /// Each group's members, highest priority then oldest first.
    pub fn groups(&self) -> impl Iterator<Item = &BTreeSet<Key>> + '_ {
        self.groups.values()
    }

    /// The groups by id, with their members.
    pub fn groups_with_ids(&self) -> impl Iterator<Item = (u64, &BTreeSet<Key>)> + '_ {
        self.groups.iter().map(|(&g, m)| (g, m))
    }

    /// Moves one blocked workload back to ready; others stay blocked.
    pub fn unblock(&mut self, id: WorkloadId) {
        let p = match self.at.get(&id).copied() {
            Some(Slot::Blocked(p)) => {
                self.blocked.remove(&(Reverse(p), id));
                p
            }
            Some(Slot::Grouped(p, g)) => {
                self.leave_group(g, (Reverse(p), id));
                p
            }
            Some(Slot::Waiting(p)) => {
                self.stop_waiting((Reverse(p), id));
                p
            }
            _ => return,
        };
        self.ready.insert((Reverse(p), id));
        self.at.insert(id, Slot::Ready(p));
    }

    /// Takes a blocked workload out of its group (what it asks for
    /// changed). It stays blocked, unless its group was woken and has not
    /// come to it yet: then it is ready, as every woken workload is.
    pub fn ungroup(&mut self, id: WorkloadId) {
        let Some(Slot::Grouped(p, g)) = self.at.get(&id).copied() else { return };
        let key = (Reverse(p), id);
        let woken = self.woken_from.get(&g).is_some_and(|&from| from <= key);
        self.leave_group(g, key);
        if woken {
            self.ready.insert(key);
            self.at.insert(id, Slot::Ready(p));
        } else {
            self.blocked.insert(key);
            self.at.insert(id, Slot::Blocked(p));
        }
    }

    /// Takes every workload out of its group; all stay blocked.
    pub fn ungroup_all(&mut self) {
        let ids: Vec<WorkloadId> = self.groups.values().flat_map(|m| m.iter().map(|(_, id)| *id)).collect();
        for id in ids {
            self.ungroup(id);
        }
    }

    /// Groups that lost their last member since the last call.
    pub fn take_emptied(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.emptied)
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

    /// Every queued workload (ready, blocked, waiting or backing off).
    pub fn ids(&self) -> impl Iterator<Item = WorkloadId> + '_ {
        self.at.keys().copied()
    }

    /// Gives a queued workload a new queue priority where it is: ready
    /// stays ready, blocked stays blocked (in its group, waiting on the
    /// same pools), backing off keeps its time.
    pub fn reprioritize(&mut self, id: WorkloadId, p: u32) {
        let new = (Reverse(p), id);
        match self.at.get(&id).copied() {
            Some(Slot::Ready(old)) if old != p => {
                self.ready.remove(&(Reverse(old), id));
                self.ready.insert(new);
                self.at.insert(id, Slot::Ready(p));
            }
            Some(Slot::Blocked(old)) if old != p => {
                self.blocked.remove(&(Reverse(old), id));
                self.blocked.insert(new);
                self.at.insert(id, Slot::Blocked(p));
            }
            Some(Slot::Waiting(old)) if old != p => {
                let pools = self.waiting.remove(id).map(|(_, pools)| pools).unwrap_or_default();
                self.push_waiting(p, id, pools);
            }
            Some(Slot::Backoff(t, old)) if old != p => {
                self.backoff.remove(&(t, old, id));
                self.backoff.insert((t, p, id));
                self.at.insert(id, Slot::Backoff(t, p));
            }
            Some(Slot::Grouped(old, g)) if old != p => {
                let old_key = (Reverse(old), id);
                match self.woken_from.get(&g).copied() {
                    // Every member is blocked: it stays in its group.
                    None => {
                        if let Some(members) = self.groups.get_mut(&g) {
                            members.remove(&old_key);
                            members.insert(new);
                            self.at.insert(id, Slot::Grouped(p, g));
                        }
                    }
                    // A woken group checks its members from its pointer on,
                    // in key order: a member that moves leaves it, ready if
                    // it was still to be checked, blocked if the pass went by.
                    Some(from) => {
                        self.leave_group(g, old_key);
                        if old_key >= from {
                            self.ready.insert(new);
                            self.at.insert(id, Slot::Ready(p));
                        } else {
                            self.blocked.insert(new);
                            self.at.insert(id, Slot::Blocked(p));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    pub fn is_blocked(&self, id: WorkloadId) -> bool {
        matches!(self.at.get(&id), Some(Slot::Blocked(_) | Slot::Grouped(..) | Slot::Waiting(_)))
    }

    pub fn blocked_len(&self) -> usize {
        self.blocked.len() + self.grouped + self.waiting.len()
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
    fn waiting_work_is_found_by_the_pools_it_waits_on_and_woken_like_blocked_work() {
        let mut q = Queue::default();
        q.push_waiting(50, WorkloadId(1), vec![3, 7]);
        q.push_waiting(90, WorkloadId(2), vec![7]);
        let ids = |q: &Queue, p| {
            let mut keys: Vec<Key> = q.waiting_in(p).collect();
            keys.sort_unstable();
            keys.into_iter().map(|k| k.1).collect::<Vec<_>>()
        };
        assert_eq!(ids(&q, 7), [WorkloadId(2), WorkloadId(1)], "priority first");
        assert_eq!(ids(&q, 3), [WorkloadId(1)]);
        assert!(ids(&q, 5).is_empty(), "a release elsewhere asks nobody");
        assert!(q.is_blocked(WorkloadId(1)) && q.blocked_len() == 2);
        assert_eq!(q.pop_ready(), None, "waiting work is not ready");
        q.unblock(WorkloadId(1));
        assert!(ids(&q, 3).is_empty() && ids(&q, 7) == [WorkloadId(2)], "woken: filed nowhere");
        assert_eq!(q.pop_ready(), Some(WorkloadId(1)));
        q.unblock_all();
        assert_eq!((q.pop_ready(), q.blocked_len()), (Some(WorkloadId(2)), 0));
        assert!(ids(&q, 7).is_empty());
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

    /// The workloads a pass hands out, taking `holds` as each group's state.
    fn pass(q: &mut Queue, holds: impl Fn(u64) -> bool) -> Vec<u64> {
        std::iter::from_fn(|| q.pop_ready_checking(&holds)).map(|w| w.0).collect()
    }

    #[test]
    fn woken_groups_stay_blocked_while_their_answer_holds() {
        let mut q = Queue::default();
        for id in [1, 4, 6] {
            q.push_unfit(50, WorkloadId(id), 7);
        }
        for id in [2, 5] {
            q.push_unfit(50, WorkloadId(id), 8);
        }
        q.push_blocked(50, WorkloadId(3));
        // Not woken: nothing comes up, whatever the answers.
        assert!(pass(&mut q, |_| false).is_empty());
        q.unblock_all();
        // Group 7 holds, group 8 does not: 8's members and the plain one.
        assert_eq!(pass(&mut q, |g| g == 7), vec![2, 3, 5]);
        assert_eq!(q.blocked_len(), 3);
        assert!(q.is_blocked(WorkloadId(4)));
        q.unblock_all();
        assert_eq!(pass(&mut q, |_| false), vec![1, 4, 6]);
        assert_eq!(q.take_emptied(), vec![8, 7]);
    }

    #[test]
    fn a_workload_leaving_a_woken_group_is_ready_until_the_pass_reaches_it() {
        let mut q = Queue::default();
        for id in 1..=3 {
            q.push_unfit(50, WorkloadId(id), 1);
        }
        q.push_unfit(50, WorkloadId(4), 2);
        q.ungroup(WorkloadId(4));
        q.unblock_all();
        q.ungroup(WorkloadId(2));
        assert_eq!(pass(&mut q, |_| true), vec![2, 4]);
        q.ungroup(WorkloadId(3));
        assert!(q.is_blocked(WorkloadId(3)));
        q.unblock_all();
        assert_eq!(pass(&mut q, |_| true), vec![3]);
    }

    /// Against the plain algorithm: every woken workload comes up in queue
    /// order and is placed again, which changes nothing when its group's
    /// answer holds at that moment. Answers change only when a workload is
    /// actually placed; the same workloads must see the same changes.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap;

        #[derive(Debug, Clone)]
        enum Op {
            Arrive(u32),
            UnblockAll,
            Ungroup(usize),
            Unblock(usize),
            Remove(usize),
            Reprioritize(usize, u32),
            Pass,
        }

        fn mix(a: u64, b: u64, c: u64) -> u64 {
            let mut h = a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(17) ^ c.rotate_left(41);
            h ^= h >> 29;
            h.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 7
        }

        /// What placing `w` gives at `version`: placed (None) or blocked
        /// with answer `Some(group)`.
        fn outcome(seed: u64, w: u64, version: u64) -> Option<u64> {
            let h = mix(seed, w, version);
            (!h.is_multiple_of(3)).then_some(h % 3)
        }

        fn holds(seed: u64, g: u64, version: u64) -> bool {
            !mix(seed ^ 0xABCD, g, version).is_multiple_of(3)
        }

        /// The plain algorithm's queue: waking moves every blocked
        /// workload to ready; answers play no part.
        #[derive(Default)]
        struct Plain {
            ready: BTreeSet<Key>,
            blocked: BTreeSet<Key>,
        }

        /// Either queue, driven alike.
        trait Q {
            fn ready(&mut self, p: u32, w: u64);
            fn unfit(&mut self, p: u32, w: u64, g: u64);
            fn unblock_all(&mut self);
            fn ungroup(&mut self, p: u32, w: u64);
            fn unblock(&mut self, p: u32, w: u64);
            fn remove(&mut self, p: u32, w: u64);
            fn reprioritize(&mut self, old: u32, w: u64, new: u32);
            fn pop(&mut self, holds: &dyn Fn(u64) -> bool) -> Option<u64>;
        }

        impl Q for Plain {
            fn ready(&mut self, p: u32, w: u64) {
                self.ready.insert((Reverse(p), WorkloadId(w)));
            }
            fn unfit(&mut self, p: u32, w: u64, _: u64) {
                self.blocked.insert((Reverse(p), WorkloadId(w)));
            }
            fn unblock_all(&mut self) {
                self.ready.append(&mut self.blocked);
            }
            fn ungroup(&mut self, _: u32, _: u64) {}
            fn unblock(&mut self, p: u32, w: u64) {
                if self.blocked.remove(&(Reverse(p), WorkloadId(w))) {
                    self.ready.insert((Reverse(p), WorkloadId(w)));
                }
            }
            fn remove(&mut self, p: u32, w: u64) {
                self.ready.remove(&(Reverse(p), WorkloadId(w)));
                self.blocked.remove(&(Reverse(p), WorkloadId(w)));
            }
            fn reprioritize(&mut self, old: u32, w: u64, new: u32) {
                let (o, n) = ((Reverse(old), WorkloadId(w)), (Reverse(new), WorkloadId(w)));
                if self.ready.remove(&o) {
                    self.ready.insert(n);
                }
                if self.blocked.remove(&o) {
                    self.blocked.insert(n);
                }
            }
            fn pop(&mut self, _: &dyn Fn(u64) -> bool) -> Option<u64> {
                self.ready.pop_first().map(|k| k.1.0)
            }
        }

        impl Q for Queue {
            fn ready(&mut self, p: u32, w: u64) {
                self.push_ready(p, WorkloadId(w));
            }
            fn unfit(&mut self, p: u32, w: u64, g: u64) {
                self.push_unfit(p, WorkloadId(w), g);
            }
            fn unblock_all(&mut self) {
                Queue::unblock_all(self);
            }
            fn ungroup(&mut self, _: u32, w: u64) {
                Queue::ungroup(self, WorkloadId(w));
            }
            fn unblock(&mut self, _: u32, w: u64) {
                Queue::unblock(self, WorkloadId(w));
            }
            fn remove(&mut self, _: u32, w: u64) {
                Queue::remove(self, WorkloadId(w));
            }
            fn reprioritize(&mut self, _: u32, w: u64, new: u32) {
                Queue::reprioritize(self, WorkloadId(w), new);
            }
            fn pop(&mut self, holds: &dyn Fn(u64) -> bool) -> Option<u64> {
                self.pop_ready_checking(holds).map(|w| w.0)
            }
        }

        /// Runs `ops`; returns every placement that changed something:
        /// (workload, version, outcome).
        fn run(seed: u64, ops: &[Op], q: &mut dyn Q) -> Vec<(u64, u64, Option<u64>)> {
            let mut trace = Vec::new();
            let mut version = 0u64;
            let mut next_id = 1u64;
            // Each blocked workload's answer group.
            let mut group: HashMap<u64, u64> = HashMap::new();
            let mut live: Vec<u64> = Vec::new();
            let mut prio: HashMap<u64, u32> = HashMap::new();
            for op in ops {
                match *op {
                    Op::Arrive(p) => {
                        q.ready(p, next_id);
                        prio.insert(next_id, p);
                        live.push(next_id);
                        next_id += 1;
                    }
                    Op::UnblockAll => q.unblock_all(),
                    Op::Reprioritize(i, new) if !live.is_empty() => {
                        let w = live[i % live.len()];
                        q.reprioritize(prio[&w], w, new);
                        prio.insert(w, new);
                    }
                    Op::Ungroup(i) | Op::Unblock(i) | Op::Remove(i) if !live.is_empty() => {
                        let w = live[i % live.len()];
                        let p = prio[&w];
                        match op {
                            Op::Ungroup(_) => {
                                if group.remove(&w).is_some() {
                                    q.ungroup(p, w);
                                }
                            }
                            Op::Unblock(_) => q.unblock(p, w),
                            _ => {
                                q.remove(p, w);
                                live.retain(|&x| x != w);
                                group.remove(&w);
                            }
                        }
                    }
                    Op::Pass => loop {
                        let v = version;
                        let Some(w) = q.pop(&|g| holds(seed, g, v)) else { break };
                        let p = prio[&w];
                        if let Some(&g) = group.get(&w)
                            && holds(seed, g, version)
                        {
                            q.unfit(p, w, g);
                            continue;
                        }
                        let out = outcome(seed, w, version);
                        trace.push((w, version, out));
                        match out {
                            None => {
                                version += 1;
                                live.retain(|&x| x != w);
                                group.remove(&w);
                            }
                            Some(g) => {
                                q.unfit(p, w, g);
                                group.insert(w, g);
                            }
                        }
                    },
                    _ => {}
                }
            }
            trace
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                5 => prop::sample::select(vec![10u32, 50, 50, 50]).prop_map(Op::Arrive),
                3 => Just(Op::UnblockAll),
                2 => any::<usize>().prop_map(Op::Ungroup),
                1 => any::<usize>().prop_map(Op::Unblock),
                1 => any::<usize>().prop_map(Op::Remove),
                2 => (any::<usize>(), prop::sample::select(vec![10u32, 30, 50, 70])).prop_map(|(i, p)| Op::Reprioritize(i, p)),
                3 => Just(Op::Pass),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

            #[test]
            fn grouped_passes_change_what_plain_passes_change(
                seed in any::<u64>(),
                ops in prop::collection::vec(op(), 1..200),
            ) {
                prop_assert_eq!(run(seed, &ops, &mut Queue::default()), run(seed, &ops, &mut Plain::default()));
            }
        }
    }
}
