//! [`UnfitCache`]: "nothing fits" decisions remembered per request, so
//! that asking again after changes that cannot affect the answer does not
//! run the full explanation again (every filter on every pool and, where a
//! pool passes them all, every node).
//!
//! Whether nothing fits a request, and the [`Explanation`] of it, depend on
//! a snapshot only through: the provider and pool quarantine sets; per pool
//! and provider with a lend limit, whether the request's GPUs (a gang's:
//! N × its per-node GPUs) fit under it
//! (and, where the nearest miss failed a lend limit, the GPUs held there,
//! which its text quotes); and the nodes of the pools that pass every
//! pool-level filter. Everything else either reads is fixed by the
//! snapshot's fleet. An entry records those inputs and is used only while
//! they are unchanged, so a hit is exactly what [`super::place`] returns.
//! When they did change, [`UnfitCache::revalidate`] decides once more; an
//! answer with the same text is brought up to date rather than replaced,
//! so what waits on it keeps waiting without being asked one by one.
//! This holds for gangs too: whether N nodes share a domain depends only
//! on the nodes of pools that pass every pool-level filter (a domain never
//! spans other pools, and switches are fixed by the fleet), so a change
//! that could let a domain hold N bumps a stamp the entry checks.
//! The cache follows one snapshot through its in-place updates: clear it
//! when the snapshot is rebuilt. No I/O, no clock.

use super::Requirements;
use super::check::PoolJudge;
use super::decision::Decision;
use super::explain::Explanation;
use super::filter::Filter;
use super::snapshot::Snapshot;
use crate::fleet::PoolIdx;
use std::collections::HashMap;
use std::ops::ControlFlow;

/// See the module docs. Entries have ids, so that what waits on an answer
/// can name it; an entry stays until removed (or the cache is cleared).
#[derive(Debug, Clone, Default)]
pub struct UnfitCache {
    entries: HashMap<u64, Unfit>,
    /// Entry ids by a fingerprint of their request, oldest first.
    by_request: HashMap<u64, Vec<u64>>,
    next_id: u64,
}

#[derive(Debug, Clone)]
struct Unfit {
    req: Requirements,
    fingerprint: u64,
    explanation: Explanation,
    /// The explanation as text, as the engine journals it.
    text: String,
    inputs: Inputs,
}

/// What an answer depends on, as it was when it was last known to hold.
#[derive(Debug, Clone)]
struct Inputs {
    /// The snapshot's `stamp` then.
    stamp: u64,
    /// Pools that passed every pool-level filter: their nodes decided.
    open: Vec<u32>,
    /// Per limited pool, then per limited provider: whether the request's
    /// GPUs fit under its lend limit.
    lend: Vec<bool>,
    /// The nearest miss's pool and the GPUs held in it and its provider,
    /// when a lend limit is among what it failed.
    held: Option<(PoolIdx, (u64, u64))>,
}

impl UnfitCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets everything (the snapshot was rebuilt).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.by_request.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// An entry for `req` whose answer still holds on `snap`: nothing fits
    /// `req`, for the reasons its explanation gives. The newest first: an
    /// older one for the same request was most likely outdated by it.
    pub fn find(&self, req: &Requirements, snap: &Snapshot) -> Option<u64> {
        let ids = self.by_request.get(&fingerprint(req))?;
        ids.iter()
            .rev()
            .copied()
            .find(|id| self.entries.get(id).is_some_and(|e| e.req == *req && e.inputs.still_hold(req, snap)))
    }

    /// Whether entry `id`'s answer still holds on `snap` (false for an
    /// unknown id).
    pub fn holds(&self, id: u64, snap: &Snapshot) -> bool {
        self.entries.get(&id).is_some_and(|e| e.inputs.still_hold(&e.req, snap))
    }

    /// The request entry `id` answers.
    pub fn request(&self, id: u64) -> Option<&Requirements> {
        self.entries.get(&id).map(|e| &e.req)
    }

    /// Entry `id`'s explanation and its text.
    pub fn get(&self, id: u64) -> Option<(&Explanation, &str)> {
        self.entries.get(&id).map(|e| (&e.explanation, e.text.as_str()))
    }

    /// Remembers that nothing fits `req` on `snap`, as `explanation` says
    /// (what [`super::place`] returned for them), and returns the entry's
    /// id: the newest entry for `req` when it gave the same text (now
    /// known to hold on `snap`), else a new one.
    pub fn insert(&mut self, req: &Requirements, snap: &Snapshot, explanation: Explanation) -> u64 {
        let text = explanation.to_string();
        let fingerprint = fingerprint(req);
        let newest = self.by_request.get(&fingerprint).and_then(|ids| {
            ids.iter().rev().copied().find(|id| self.entries.get(id).is_some_and(|e| e.req == *req))
        });
        if let Some(id) = newest
            && let Some(e) = self.entries.get_mut(&id)
            && e.text == text
        {
            e.inputs = Inputs::of(req, snap, &explanation);
            e.explanation = explanation;
            return id;
        }
        let id = self.next_id;
        self.next_id += 1;
        self.by_request.entry(fingerprint).or_default().push(id);
        let inputs = Inputs::of(req, snap, &explanation);
        self.entries.insert(id, Unfit { req: req.clone(), fingerprint, text, explanation, inputs });
        id
    }

    /// Whether entry `id`'s answer holds on `snap`, deciding again when
    /// what it depends on changed: when the decision is still that nothing
    /// fits, with the same text, the entry is brought up to date and holds.
    pub fn revalidate(&mut self, id: u64, snap: &Snapshot) -> bool {
        let Some(e) = self.entries.get_mut(&id) else { return false };
        if e.inputs.still_hold(&e.req, snap) {
            return true;
        }
        match super::place(&e.req, snap, &super::Policy::default()) {
            Decision::Unschedulable(ex) if ex.to_string() == e.text => {
                e.inputs = Inputs::of(&e.req, snap, &ex);
                e.explanation = ex;
                true
            }
            _ => false,
        }
    }

    pub fn remove(&mut self, id: u64) {
        let Some(e) = self.entries.remove(&id) else { return };
        if let Some(ids) = self.by_request.get_mut(&e.fingerprint) {
            ids.retain(|&x| x != id);
            if ids.is_empty() {
                self.by_request.remove(&e.fingerprint);
            }
        }
    }
}

/// A hash of the fields that most often tell requests apart: equal
/// requests, equal prints (the rest is left to the equality check).
fn fingerprint(req: &Requirements) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    req.gpus.hash(&mut h);
    req.nodes.hash(&mut h);
    for x in [req.cpu_cores, req.memory_gb, req.disk_gb] {
        x.to_bits().hash(&mut h);
    }
    req.min_gpu_memory_exclusive.map(f64::to_bits).hash(&mut h);
    req.max_cost_usd.map(f64::to_bits).hash(&mut h);
    req.interruptible.hash(&mut h);
    req.exclude_nodes.hash(&mut h);
    req.exclude_pools.hash(&mut h);
    req.quota_pools.hash(&mut h);
    h.finish()
}

impl Inputs {
    fn of(req: &Requirements, snap: &Snapshot, explanation: &Explanation) -> Self {
        let judge = PoolJudge::new(req, snap);
        let open = (0..snap.rows.len() as u32)
            .filter(|&p| judge.checks(PoolIdx(p), &mut |_| ControlFlow::Break(())).is_continue())
            .collect();
        let held = explanation.nearest.as_ref().and_then(|n| {
            let lend =
                n.failed.iter().any(|f| matches!(f, Filter::PoolLendLimit | Filter::ProviderLendLimit));
            lend.then(|| (n.pool_idx, snap.held(n.pool_idx)))
        });
        Self { stamp: snap.stamp, open, lend: lend_fits(req, snap).collect(), held }
    }

    fn still_hold(&self, req: &Requirements, snap: &Snapshot) -> bool {
        snap.quarantine_stamp <= self.stamp
            && self.open.iter().all(|&p| snap.node_stamp[p as usize] <= self.stamp)
            && lend_fits(req, snap).eq(self.lend.iter().copied())
            && self.held.is_none_or(|(p, held)| snap.held(p) == held)
    }
}

/// Per limited pool, then per limited provider: whether the request's GPUs
/// fit under its lend limit (the lend-limit filters' predicate).
fn lend_fits<'a>(req: &Requirements, snap: &'a Snapshot) -> impl Iterator<Item = bool> + 'a {
    let gpus = u64::from(req.gpus) * u64::from(req.gang_size());
    let pools = snap.limited_pools.iter().map(move |&p| {
        let row = &snap.rows[p as usize];
        gpus == 0 || row.held + gpus <= row.limit
    });
    let providers = snap.limited_providers.iter().map(move |&p| {
        let (held, limit) = snap.provider_lend[p as usize];
        gpus == 0 || held + gpus <= limit
    });
    pools.chain(providers)
}
