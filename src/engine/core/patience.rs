//! Patience in the core: what capacity long work could have soon, from
//! what the engine knows (its own live attempts and their specs' expected
//! runtimes, never how long they will really take), and the bookkeeping of
//! work that waits for it. The decision itself is
//! [`Patience::wait`](super::Patience::wait).
//!
//! Waiting work is asked again when what it waits on may have changed,
//! and only then: a node released with room in a pool cheaper than what
//! it declined; a second after the capacity it counts on is due (if that
//! work runs past its estimate, waiting no longer pays); GPUs Canopy
//! releases under a lend limit that now admits its size
//! ([`Core::lend_released`]); and its window's end ([`Core::next_wake`]),
//! when it takes what fits.

use super::Core;
use crate::engine::model::{EventKind, Millis, WorkloadId, WorkloadState};
use crate::fleet::{Fleet, Free, Node, NodeState};
use crate::health::HealthView;
use crate::schedule::{Candidate, Policy, PoolPrice, Requirements, Snapshot, Weights, pool_prices};
use std::collections::HashMap;
use std::sync::Arc;

impl Core {
    /// Whether workload `id` should wait rather than take `c` now. When it
    /// should, it is blocked, told why, and woken at the end of its window
    /// at the latest.
    pub(super) fn waits(&mut self, id: WorkloadId, req: &Requirements, c: &Candidate, now: Millis) -> bool {
        if !self.config.placement.patient() {
            return false;
        }
        let p = self.config.patience;
        let Some(e) = self.entries.get(&id) else { return false };
        // Work that asked to start soon, or to be fast, is never held back
        // for a cheaper price.
        let prefs = &e.rec.spec.preferences;
        if prefs.startup_within.is_some() || prefs.optimize == crate::spec::Optimize::Speed {
            return false;
        }
        let runtime_s = e.rec.spec.expected_runtime.map_or(0.0, |d| d.0.as_secs_f64());
        let window = p.window_s(runtime_s);
        let first = e.waiting_since.is_none();
        let since = e.waiting_since.unwrap_or(now);
        let left = window - now.secs_since(since);
        if left <= 0.0 || c.hourly_usd <= 0.0 {
            return false;
        }
        // Prices per unit of work where the candidate was priced so, as
        // the cost factor compares them.
        let now_price = c.priced_hourly();
        let checkpoints = req.checkpoint_interval.is_some();
        let per_work = self.config.placement.scheduler_policy(prefs.optimize).prices_per_work(req);
        self.counts.patience_scans += 1;
        let prices = self.pool_prices(req, per_work);
        let later = self.cheapest_due(&prices, req, now_price * p.max_price_share, checkpoints, now, left);
        if !p.wait(
            runtime_s,
            now.secs_since(since),
            now_price,
            later.as_ref().map(|(l, _)| l.priced_hourly()),
        ) {
            return false;
        }
        let Some((later, due)) = later else { return false };
        let texts = || {
            (price_text(c.hourly_usd, c.relative_speed), price_text(later.hourly_usd, later.relative_speed))
        };
        let until = since.plus_secs(window);
        let key = [
            later.hourly_usd.to_bits(),
            later.relative_speed.to_bits(),
            c.hourly_usd.to_bits(),
            c.relative_speed.to_bits(),
            u64::from(c.pool_idx.0),
        ];
        if let Some(e) = self.entries.get_mut(&id) {
            e.waiting_since = Some(since);
            e.rec.state = WorkloadState::Queued;
            // Only this writes a reason so worded, so one that reads so
            // was written from the key last kept: the same key, the same text.
            let stands = e.wait_key == Some(key)
                && e.rec.reason.as_deref().is_some_and(|r| r.starts_with(WAITING_REASON));
            if !stands {
                let (now_text, later_text) = texts();
                e.rec.reason =
                    Some(format!("{WAITING_REASON}{later_text} due to free ({now_text} now on {})", c.pool));
                e.wait_key = Some(key);
            }
        }
        // Asked again at the end of its window, and a second after the
        // capacity it counts on is due: if that work runs past its
        // estimate, the wait stops being worth it then, not at the end.
        self.patient.insert((until, id));
        self.patient.insert((due.plus_secs(1.0).min(until), id));
        // A release anywhere cheaper than now may change the answer; one
        // elsewhere offers what it just declined.
        let cheaper = prices.iter().filter(|p| p.priced_hourly() < now_price).map(|p| p.pool_idx.0).collect();
        self.queue.push_waiting(self.queue_priority(id), id, cheaper);
        if first {
            self.save_workload(id, now);
            let (now_text, later_text) = texts();
            let msg = format!(
                "waiting up to {:.1}h for capacity at {later_text} that running work is expected to free, rather than {now_text} on {} now",
                window / 3600.0,
                c.pool
            );
            self.event(now, id, None, EventKind::Unschedulable, msg);
        }
        true
    }

    /// Wakes waiting work whose window has ended: it takes what fits.
    pub(super) fn end_waits(&mut self, now: Millis) {
        while let Some(&(t, id)) = self.patient.first() {
            if t > now {
                break;
            }
            self.patient.pop_first();
            self.queue.unblock(id);
        }
    }

    /// The cheapest price, at most `max_price`, among `prices` (one
    /// candidate per pool that could host `req`, priced per unit of work
    /// where the policy prices so, cheapest first: [`Core::pool_prices`]) of a placement
    /// for `req` on capacity that is reliable (or interruptible,
    /// when the work `checkpoints`) and due to have room within `within_s`:
    /// a ready node, neither excluded nor quarantined, whose free room plus
    /// what the live attempts on it expect to release by then fits the
    /// request (for a gang, enough such nodes in one pool).
    ///
    /// The work is bounded by what it looks at, not by the fleet: the
    /// pools that could host the request come from one node per pool
    /// (every node of a pool has its price), and the pools are tried
    /// cheapest first, each reading only its own live attempts due by
    /// then, until one has room.
    fn cheapest_due(
        &mut self,
        prices: &[PoolPrice],
        req: &Requirements,
        max_price: f64,
        checkpoints: bool,
        now: Millis,
        within_s: f64,
    ) -> Option<(PoolPrice, Millis)> {
        // Cheapest first; equal prices: the first pool, so the reason
        // reads the same every run ([`Core::pool_prices`] are in that order).
        let pools: Vec<&PoolPrice> = prices
            .iter()
            .filter(|c| {
                c.priced_hourly() <= max_price && (checkpoints || !self.fleet.pool(c.pool_idx).interruptible)
            })
            .collect();
        let by = now.plus_secs(within_s);
        let need = req.nodes.max(1);
        let snap = self.snapshot.as_ref();
        for c in pools {
            // What live attempts on this pool's nodes expect to release in
            // time (work past its estimate is not counted on).
            let mut room: HashMap<usize, Free> = HashMap::new();
            let mut fitting = 0;
            for id in self.live_ids.due_in(c.pool_idx, now, by) {
                self.counts.patience_live_scanned += 1;
                let Some(e) = self.entries.get(&id) else { continue };
                let Some(live) = e.live.as_ref() else { continue };
                for n in &live.nodes {
                    let i = n.0 as usize;
                    let Some(node) = self.fleet.nodes.get(i) else { continue };
                    let fitted = room.get(&i).is_some_and(|free| fits(req, free));
                    let r = room.entry(i).or_insert(node.free);
                    r.gpus += live.alloc.gpus;
                    r.cpu_cores += live.alloc.cpu_cores;
                    r.memory_gb += live.alloc.memory_gb;
                    r.disk_gb += live.alloc.disk_gb;
                    if fitted || !fits(req, r) {
                        continue;
                    }
                    let quarantined = snap
                        .and_then(|s| s.node_health(crate::fleet::NodeIdx(i as u32)))
                        .is_some_and(|h| h.quarantined);
                    if node.state == NodeState::Ready
                        && !quarantined
                        && !req.exclude_nodes.contains(&node.name)
                    {
                        fitting += 1;
                    }
                }
                if fitting >= need {
                    return Some((*c, e.expected_end().unwrap_or(by)));
                }
            }
        }
        None
    }

    /// Every pool that could ever host `req` (every node ready and
    /// empty), with its price there ([`crate::schedule::pool_prices`]). A
    /// gang is placed on the whole ideal fleet (it needs several nodes of
    /// a pool, perhaps on one switch); other work is priced on one node
    /// per pool. Cheapest first (equal prices: the first pool); shared
    /// with every request of its pricing key ([`PriceMemo`]).
    fn pool_prices(&mut self, req: &Requirements, per_work: bool) -> Arc<[PoolPrice]> {
        // Excluded nodes are checked on the nodes due to free; the one node
        // a pool is represented by must not rule out its pool.
        let key = pricing_key(req);
        if let Some(prices) = self.prices.get(&key, per_work) {
            return prices;
        }
        let policy = pricing_policy(per_work);
        let mut prices = if req.nodes > 1 {
            self.counts.patience_gang_pricings += 1;
            pool_prices(&key, self.ideal(), &policy)
        } else {
            pool_prices(&key, self.ideal_per_pool(), &policy)
        };
        prices.sort_by(|a, b| {
            a.priced_hourly().total_cmp(&b.priced_hourly()).then(a.pool_idx.cmp(&b.pool_idx))
        });
        let prices: Arc<[PoolPrice]> = prices.into();
        self.prices.insert(key, per_work, prices.clone());
        prices
    }

    /// The fleet as if every node were ready and empty: what could ever
    /// host a request, and at what price.
    pub(super) fn ideal(&mut self) -> &Snapshot {
        self.ideal.get_or_insert_with(|| {
            Snapshot::new(&ideal_fleet(&self.fleet, usize::MAX), &HealthView::default())
        })
    }

    /// [`Core::ideal`] with only the first node of each pool: the pools
    /// that could ever host single-node work, and their prices, in time
    /// that grows with the pools rather than the nodes.
    fn ideal_per_pool(&mut self) -> &Snapshot {
        self.ideal_per_pool
            .get_or_insert_with(|| Snapshot::new(&ideal_fleet(&self.fleet, 1), &HealthView::default()))
    }
}

/// The policy patience prices pools by: cost alone, every pool, no
/// interruption risk; per unit of work or per hour.
fn pricing_policy(per_work: bool) -> Policy {
    Policy {
        weights: Weights::PRICE_ONLY,
        top_k: usize::MAX,
        interruption_risk: false,
        per_work,
        ..Policy::default()
    }
}

/// Requests priced on the ideal fleet for patience ([`Core::pool_prices`]),
/// with the prices found. The ideal fleet changes only with the fleet's
/// shape, so requests with one [`pricing_key`] have equal prices. Cleared
/// with the ideal fleet.
#[derive(Debug, Clone, Default)]
pub(super) struct PriceMemo {
    by_shape: HashMap<Shape, Vec<Priced>>,
    len: usize,
}

/// Nodes, GPUs and the bits of CPU, memory and disk: where a memo entry is.
type Shape = (u32, u32, u64, u64, u64);

/// A pricing key, whether prices are per unit of work, and the prices.
type Priced = (Requirements, bool, Arc<[PoolPrice]>);

/// At most this many requests' prices are kept ([`PriceMemo`]): requests
/// differ in a few ways (shape, exclusions, what is left of the retry
/// budget), and a bound keeps a pathological mix from growing the memo.
const PRICES_KEPT: usize = 256;

impl PriceMemo {
    fn shape(req: &Requirements) -> Shape {
        (req.nodes, req.gpus, req.cpu_cores.to_bits(), req.memory_gb.to_bits(), req.disk_gb.to_bits())
    }

    fn get(&self, key: &Requirements, per_work: bool) -> Option<Arc<[PoolPrice]>> {
        let found = self.by_shape.get(&Self::shape(key))?.iter().find(|(r, w, _)| *w == per_work && r == key);
        found.map(|(_, _, prices)| prices.clone())
    }

    fn insert(&mut self, key: Requirements, per_work: bool, prices: Arc<[PoolPrice]>) {
        if self.len >= PRICES_KEPT {
            self.clear();
        }
        self.len += 1;
        self.by_shape.entry(Self::shape(&key)).or_default().push((key, per_work, prices));
    }

    /// Forgets every price (the fleet's shape changed).
    pub(super) fn clear(&mut self) {
        self.by_shape.clear();
        self.len = 0;
    }
}

/// `req` with what cannot change its prices on the ideal fleet left out:
/// for single-node work which nodes it excludes (a pool is represented by
/// one node; a gang is placed on every node, so its exclusions stay), the
/// runtime unless a cost cap is checked against it, and what only scoring
/// reads (checkpoints, the retry budget, startup, preferences, inputs),
/// which pricing weighs at nothing. Jobs of one shape share their prices.
fn pricing_key(req: &Requirements) -> Requirements {
    let costed = req.max_cost_usd.is_some();
    Requirements {
        exclude_nodes: if req.nodes > 1 { req.exclude_nodes.clone() } else { Vec::new() },
        expected_runtime: req.expected_runtime.filter(|_| costed),
        max_runtime: req.max_runtime.filter(|_| costed),
        checkpoint_interval: None,
        charged_stops_left: None,
        startup_within: None,
        preferred_regions: Vec::new(),
        preferred_capabilities: Vec::new(),
        inputs: Vec::new(),
        ..req.clone()
    }
}

/// Whether `free` holds `req`'s resources (per node).
fn fits(req: &Requirements, free: &Free) -> bool {
    free.gpus >= req.gpus
        && free.cpu_cores + 1e-9 >= req.cpu_cores
        && free.memory_gb + 1e-9 >= req.memory_gb
        && free.disk_gb + 1e-9 >= req.disk_gb
}

/// `fleet` with at most `per_pool` nodes of each pool (its first), every
/// one ready and empty.
fn ideal_fleet(fleet: &Fleet, per_pool: usize) -> Fleet {
    let mut out = fleet.clone();
    out.nodes.clear();
    for pool in &mut out.pools {
        let s = &pool.shape;
        let start = out.nodes.len() as u32;
        let keep = pool.nodes.clone().take(per_pool);
        out.nodes.extend(keep.filter_map(|i| fleet.nodes.get(i as usize)).map(|n| Node {
            state: NodeState::Ready,
            free: Free {
                gpus: s.gpus_per_node,
                cpu_cores: s.cpu_cores,
                memory_gb: s.memory_gb,
                disk_gb: s.disk_gb,
            },
            canopy_gpus: 0,
            ..n.clone()
        }));
        pool.nodes = start..out.nodes.len() as u32;
    }
    out
}

/// How the reason of work waiting for cheaper capacity begins.
const WAITING_REASON: &str = "waiting for capacity at ";

/// "$16.00/h", or per unit of work "$16.00/h (×4.5 a V100: $3.56 per V100-hour)".
fn price_text(hourly_usd: f64, relative_speed: f64) -> String {
    if relative_speed == 1.0 {
        format!("${hourly_usd:.2}/h")
    } else {
        format!(
            "${:.2}/h (×{} a V100: ${:.2} per V100-hour)",
            hourly_usd,
            relative_speed,
            hourly_usd / relative_speed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::InputSite;
    use crate::spec::Topology;
    use std::time::Duration;

    /// What a pricing key leaves out never changes a price: single-node
    /// work and gangs on the demo fleet, per hour and per unit of work,
    /// priced as asked and by their key.
    #[test]
    fn requests_of_one_pricing_key_price_alike() {
        let fleet = crate::fleet::load::demo().expect("the demo fleet loads");
        let per_pool = Snapshot::new(&ideal_fleet(&fleet, 1), &HealthView::default());
        let whole = Snapshot::new(&ideal_fleet(&fleet, usize::MAX), &HealthView::default());
        let first_node = fleet.nodes[0].name.clone();
        let base = |nodes: u32, gpus: u32| Requirements {
            nodes,
            gpus,
            cpu_cores: 4.0,
            memory_gb: 16.0,
            topology: if nodes > 1 { Topology::SameSwitch } else { Topology::default() },
            ..Requirements::default()
        };
        let varied = |r: Requirements| Requirements {
            expected_runtime: Some(Duration::from_secs(5 * 3600)),
            max_runtime: Some(Duration::from_secs(9 * 3600)),
            checkpoint_interval: Some(Duration::from_secs(1800)),
            charged_stops_left: Some(2),
            startup_within: Some(Duration::from_secs(60)),
            preferred_regions: vec![crate::units::Glob::new("us-*")],
            preferred_capabilities: vec!["nvlink".into()],
            inputs: vec![InputSite { region: Some("us-east".into()), size_gb: Some(100.0) }],
            exclude_nodes: if r.nodes > 1 { Vec::new() } else { vec![first_node.clone()] },
            ..r
        };
        let mut priced = 0;
        for (nodes, gpus) in [(1, 1), (1, 8), (1, 0), (2, 8), (4, 8)] {
            let req = varied(base(nodes, gpus));
            let key = pricing_key(&req);
            assert_eq!(key, pricing_key(&base(nodes, gpus)), "{nodes}×{gpus}: one key");
            for per_work in [false, true] {
                let policy = pricing_policy(per_work);
                let snap = if nodes > 1 { &whole } else { &per_pool };
                let asked = if nodes > 1 {
                    req.clone()
                } else {
                    Requirements { exclude_nodes: Vec::new(), ..req.clone() }
                };
                let (a, b) = (pool_prices(&asked, snap, &policy), pool_prices(&key, snap, &policy));
                assert_eq!(a, b, "{nodes}×{gpus}, per work {per_work}");
                priced += a.len();
            }
        }
        assert!(priced > 20, "the requests fit somewhere: {priced} prices");
        // A cost cap is checked against the runtime: then the runtime stays.
        let capped = Requirements { max_cost_usd: Some(10.0), ..varied(base(1, 1)) };
        assert_eq!(pricing_key(&capped).expected_runtime, capped.expected_runtime);
    }
}
