//! Work waiting for cheaper capacity (patience), found by the pools whose
//! release could offer it.
//!
//! A waiter is filed under every pool cheaper than what it declined, often
//! most of the fleet's pools, and it is filed and taken out again each time
//! it is asked and goes on waiting. So filing appends to a list per pool
//! and taking out only marks the entries stale (one counter per pool);
//! a pool's list is compacted when most of it is stale. Work per waiter is
//! a push and an increment per pool, and the lists never hold more than
//! about twice their live entries.

use super::queue::Key;
use crate::engine::model::WorkloadId;
use rustc_hash::FxHashMap;

/// A pool's list is compacted when more than half of it is stale and it
/// holds at least this many entries.
const COMPACT_FROM: usize = 16;

#[derive(Debug, Default, Clone)]
pub(super) struct Waiting {
    /// Per pool (by index): the filings, each a workload and the serial
    /// of the filing it belongs to; a filing is live while the workload's
    /// current one has that serial.
    by_pool: Vec<Vec<(WorkloadId, u64)>>,
    /// Per pool: how many of its list's entries are stale.
    stale: Vec<usize>,
    /// Per waiting workload: its filing's serial, its key and its pools.
    by_id: FxHashMap<WorkloadId, (u64, Key, Vec<u32>)>,
    serial: u64,
}

impl Waiting {
    /// Files `key` under each of `pools` (in place of any filing it had).
    pub fn insert(&mut self, key: Key, pools: Vec<u32>) {
        self.remove(key.1);
        self.serial = self.serial.wrapping_add(1);
        for &p in &pools {
            let p = p as usize;
            if self.by_pool.len() <= p {
                self.by_pool.resize_with(p + 1, Vec::new);
                self.stale.resize(p + 1, 0);
            }
            self.by_pool[p].push((key.1, self.serial));
        }
        self.by_id.insert(key.1, (self.serial, key, pools));
    }

    /// Takes `id` out; returns its key and the pools it waited on.
    pub fn remove(&mut self, id: WorkloadId) -> Option<(Key, Vec<u32>)> {
        let (_, key, pools) = self.by_id.remove(&id)?;
        for &p in &pools {
            let p = p as usize;
            let (Some(list), Some(stale)) = (self.by_pool.get_mut(p), self.stale.get_mut(p)) else {
                continue;
            };
            *stale += 1;
            if *stale * 2 > list.len() && list.len() >= COMPACT_FROM {
                let by_id = &self.by_id;
                list.retain(|(w, s)| by_id.get(w).is_some_and(|e| e.0 == *s));
                *stale = 0;
            }
        }
        Some((key, pools))
    }

    /// The workloads waiting on pool `pool`, in no particular order.
    pub fn in_pool(&self, pool: u32) -> impl Iterator<Item = Key> + '_ {
        self.by_pool
            .get(pool as usize)
            .into_iter()
            .flatten()
            .filter_map(|(w, s)| self.by_id.get(w).filter(|e| e.0 == *s).map(|e| e.1))
    }

    /// Every waiting workload, in no particular order.
    pub fn all(&self) -> impl Iterator<Item = Key> + '_ {
        self.by_id.values().map(|e| e.1)
    }

    /// How many workloads wait.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Takes every workload out at once; returns their keys (in no
    /// particular order).
    pub fn take_all(&mut self) -> Vec<Key> {
        // The lists keep their room: waiting work is filed again soon,
        // under much the same pools.
        self.by_pool.iter_mut().for_each(Vec::clear);
        self.stale.fill(0);
        self.by_id.drain().map(|(_, (_, key, _))| key).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;

    fn key(p: u32, id: u64) -> Key {
        (Reverse(p), WorkloadId(id))
    }

    fn ids(w: &Waiting, pool: u32) -> Vec<u64> {
        let mut v: Vec<u64> = w.in_pool(pool).map(|k| k.1.0).collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn a_workload_is_found_by_its_current_filing_only() {
        let mut w = Waiting::default();
        w.insert(key(50, 1), vec![3, 7]);
        w.insert(key(50, 2), vec![7]);
        assert_eq!((ids(&w, 3), ids(&w, 7), ids(&w, 5)), (vec![1], vec![1, 2], vec![]));
        // Filed again elsewhere: its old pools no longer find it.
        w.insert(key(60, 1), vec![5]);
        assert_eq!((ids(&w, 3), ids(&w, 7), ids(&w, 5)), (vec![], vec![2], vec![1]));
        assert_eq!(w.in_pool(5).next(), Some(key(60, 1)), "with its new key");
        assert_eq!(w.remove(WorkloadId(2)), Some((key(50, 2), vec![7])));
        assert_eq!((ids(&w, 7), w.len()), (vec![], 1));
        assert_eq!(w.take_all(), vec![key(60, 1)]);
        assert_eq!((w.len(), ids(&w, 5)), (0, vec![]));
    }

    /// Filing and taking out the same waiters over and over keeps each
    /// pool's list within about twice what is live in it.
    #[test]
    fn stale_filings_are_compacted_away() {
        let mut w = Waiting::default();
        for round in 0..1_000u64 {
            for id in 0..10 {
                w.insert(key(1, id), vec![0, 1, 2]);
                if round % 2 == 1 {
                    w.remove(WorkloadId(id));
                }
            }
        }
        assert_eq!(w.len(), 0);
        for p in 0..3 {
            assert!(w.by_pool[p].len() <= 2 * COMPACT_FROM, "pool {p}: {}", w.by_pool[p].len());
        }
        w.insert(key(1, 4), vec![2]);
        assert_eq!(ids(&w, 2), vec![4]);
    }
}
