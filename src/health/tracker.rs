//! Health tracking: attempt outcomes in, a [`HealthView`] out.
//!
//! Owns how evidence becomes a score: an exponentially weighted average of
//! outcomes (recent ones weigh more), a success rate, and quarantine with
//! doubling cool-downs followed by probation. Infrastructure failures count
//! against where they happened: node failures against the node and its
//! pool, fabric and storage failures against the pool, API failures against
//! the provider; the workload's own errors count against nothing. Pure: time comes in with each call.

use super::{Health, HealthView, NodeFault};
use crate::engine::model::{HealthObservation, Millis};
use crate::failure::FailureClass;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// Tunables, with defaults that suit fleets of hundreds of nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthConfig {
    /// Weight of the newest outcome in the score (0..1).
    pub alpha: f64,
    /// Consecutive node-level failures that quarantine a node.
    pub quarantine_after: u32,
    /// A score below this quarantines too (once there are a few samples).
    pub quarantine_below: f64,
    /// First cool-down; doubles on each repeat, up to `max_cooldown_s`.
    pub cooldown_s: f64,
    pub max_cooldown_s: f64,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            alpha: 0.3,
            quarantine_after: 2,
            quarantine_below: 0.35,
            cooldown_s: 30.0 * 60.0,
            max_cooldown_s: 8.0 * 3600.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Record {
    score: f64,
    successes: u32,
    samples: u32,
    consecutive_failures: u32,
    quarantined_until: Option<Millis>,
    quarantines: u32,
    probation: bool,
    last_class: Option<FailureClass>,
    exposure_h: f64,
    preemptions: u32,
}

/// Nothing observed yet: a perfect score with no evidence behind it.
impl Default for Record {
    fn default() -> Self {
        Self {
            score: 1.0,
            successes: 0,
            samples: 0,
            consecutive_failures: 0,
            quarantined_until: None,
            quarantines: 0,
            probation: false,
            last_class: None,
            exposure_h: 0.0,
            preemptions: 0,
        }
    }
}

impl Record {
    fn health(&self, now: Millis) -> Health {
        let quarantined = self.quarantined_until.is_some_and(|t| now < t);
        Health {
            score: self.score,
            success_rate: if self.samples == 0 { 1.0 } else { self.successes as f64 / self.samples as f64 },
            samples: self.samples,
            quarantined,
            probation: self.probation && !quarantined,
            exposure_h: self.exposure_h,
            preemptions: self.preemptions,
        }
    }
}

/// What an observation did to a node, for the journal and the console.
#[derive(Debug, Clone, PartialEq)]
pub struct Quarantine {
    pub node: String,
    pub until: Millis,
    pub reason: String,
}

/// Node, pool and provider health from observed outcomes.
#[derive(Debug, Clone, Default)]
pub struct HealthTracker {
    config: HealthConfig,
    nodes: HashMap<String, Record>,
    pools: HashMap<String, Record>,
    providers: HashMap<String, Record>,
    /// Every node's current quarantine end, by time, so that the next
    /// release is found without visiting every node.
    releases: BTreeSet<(Millis, String)>,
    /// Each node's recent infrastructure faults, oldest first.
    faults: HashMap<String, VecDeque<NodeFault>>,
}

impl HealthTracker {
    pub fn new(config: HealthConfig) -> Self {
        Self { config, ..Self::default() }
    }

    /// Takes one outcome into account. Returns a quarantine when this
    /// outcome put the node into one.
    pub fn observe(&mut self, obs: &HealthObservation) -> Option<Quarantine> {
        if obs.lift {
            self.lift(&obs.node);
            return None;
        }
        let now = obs.at;
        let alpha = self.config.alpha;
        // Which levels this outcome is evidence about, and whether for or against.
        let (node_ev, pool_ev, provider_ev) = match obs.class {
            None => (Some(true), Some(true), Some(true)),
            Some(c) if c.counts_against_node() => (Some(false), Some(false), None),
            // Fabric and shared storage: every rank sees them, so they are
            // evidence against the pool, not the node that reported them.
            Some(FailureClass::Comm) | Some(FailureClass::Io) => (None, Some(false), None),
            Some(FailureClass::Provider) => (None, None, Some(false)),
            // A stop the workload resumed from with progress (a free
            // stop) is what interruptible capacity promises, not a fault of
            // the pool: its rate per running hour is learned below, and the
            // scorer prices it. Held against the pool's score per attempt,
            // every attempt of a long job on spot (each ends in a
            // preemption) would drive that pool's score to nothing.
            _ if obs.free => (None, None, None),
            Some(FailureClass::Capacity) | Some(FailureClass::Preempted) => (None, Some(false), None),
            // The workload's own outcome (app, oom, timeout, cost, cancel)
            // says nothing about where it ran.
            Some(_) => (None, None, None),
        };
        if let Some(class) = obs.class.filter(|c| is_node_fault(*c)) {
            let q = self.faults.entry(obs.node.clone()).or_default();
            q.push_back(NodeFault { at: obs.at, class, pool: obs.pool.clone() });
            while q.len() > FAULTS_KEPT || q.front().is_some_and(|f| f.clears_at() <= obs.at) {
                q.pop_front();
            }
        }
        let pool = self.pools.entry(obs.pool.clone()).or_default();
        // Every attempt that ran is exposure, whoever ended it, so the
        // pool's preemptions per running hour can be learned.
        if obs.ran_s > 0.0 {
            pool.exposure_h += obs.ran_s / 3600.0;
            pool.preemptions += u32::from(obs.class == Some(FailureClass::Preempted));
            // And the node's, so that its own faults per running hour can
            // be learned ([`super::Health::failures`]).
            self.nodes.entry(obs.node.clone()).or_default().exposure_h += obs.ran_s / 3600.0;
        }
        if let Some(ok) = pool_ev {
            update(pool, ok, alpha, obs.class);
        }
        if let Some(ok) = provider_ev {
            update(self.providers.entry(obs.provider.clone()).or_default(), ok, alpha, obs.class);
        }
        let ok = node_ev?;
        let cfg = self.config.clone();
        let rec = self.nodes.entry(obs.node.clone()).or_default();
        update(rec, ok, alpha, obs.class);
        if ok {
            rec.probation = false;
            return None;
        }
        let was_probation = rec.probation;
        let bad_score = rec.samples >= 3 && rec.score < cfg.quarantine_below;
        if !(was_probation || rec.consecutive_failures >= cfg.quarantine_after || bad_score) {
            return None;
        }
        let cooldown = (cfg.cooldown_s * 2f64.powi(rec.quarantines as i32)).min(cfg.max_cooldown_s);
        rec.quarantines += 1;
        rec.probation = true;
        rec.consecutive_failures = 0;
        let until = now.plus_secs(cooldown);
        if let Some(before) = rec.quarantined_until.replace(until) {
            self.releases.remove(&(before, obs.node.clone()));
        }
        self.releases.insert((until, obs.node.clone()));
        let class = obs.class.map_or("unknown", |c| c.as_str());
        let reason = if was_probation {
            format!("failed again on probation ({class}); cool-down {}", human_secs(cooldown))
        } else {
            format!("repeated infrastructure failures (last: {class}); cool-down {}", human_secs(cooldown))
        };
        Some(Quarantine { node: obs.node.clone(), until, reason })
    }

    /// An operator ends a node's quarantine: it takes work again at once,
    /// on probation (one more infrastructure failure quarantines it again,
    /// with a longer cool-down), and its score and history stay as they
    /// were. Nothing changes for a node that is not quarantined.
    fn lift(&mut self, node: &str) {
        let Some(rec) = self.nodes.get_mut(node) else { return };
        if let Some(until) = rec.quarantined_until.take() {
            self.releases.remove(&(until, node.to_string()));
            rec.probation = true;
            rec.consecutive_failures = 0;
        }
    }

    /// The view the scheduler consumes, as of `now`.
    pub fn view(&self, now: Millis) -> HealthView {
        let conv = |m: &HashMap<String, Record>| m.iter().map(|(k, r)| (k.clone(), r.health(now))).collect();
        let faults = self
            .faults
            .iter()
            .filter_map(|(node, q)| {
                let recent: Vec<NodeFault> = q.iter().filter(|f| f.clears_at() > now).cloned().collect();
                (!recent.is_empty()).then(|| (node.clone(), recent))
            })
            .collect();
        HealthView {
            nodes: conv(&self.nodes),
            pools: conv(&self.pools),
            providers: conv(&self.providers),
            faults,
        }
    }

    /// The earliest moment a quarantine ends after `now`, so the engine can
    /// wake up and re-place work that was waiting for that node.
    pub fn next_release(&self, now: Millis) -> Option<Millis> {
        let after = Millis(now.0.checked_add(1)?);
        self.releases.range((after, String::new())..).next().map(|(t, _)| *t)
    }

    /// Nodes whose quarantine ends after `after` and no later than `upto`.
    pub fn released(&self, after: Millis, upto: Millis) -> impl Iterator<Item = &str> {
        let from = Millis(after.0.saturating_add(1));
        self.releases
            .range((from, String::new())..)
            .take_while(move |(t, _)| after < *t && *t <= upto)
            .map(|(_, n)| n.as_str())
    }

    /// One node's health as of `now`: what [`HealthTracker::view`] holds for it.
    pub fn node(&self, name: &str, now: Millis) -> Health {
        self.nodes.get(name).map_or(Health::UNKNOWN, |r| r.health(now))
    }

    /// One pool's health (by `provider/pool` label) as of `now`.
    pub fn pool(&self, label: &str, now: Millis) -> Health {
        self.pools.get(label).map_or(Health::UNKNOWN, |r| r.health(now))
    }

    /// One provider's health as of `now`.
    pub fn provider(&self, name: &str, now: Millis) -> Health {
        self.providers.get(name).map_or(Health::UNKNOWN, |r| r.health(now))
    }

    pub fn node_history(&self, node: &str) -> Option<(Health, Option<FailureClass>)> {
        self.nodes.get(node).map(|r| (r.health(Millis(0)), r.last_class))
    }
}

/// Faults kept per node.
const FAULTS_KEPT: usize = 50;

/// An infrastructure fault met on a node, worth keeping in its history:
/// the node's own (hardware, Xid, lost) and the fabric and storage it
/// reached through. The workload's own errors, capacity, preemption and
/// provider API failures are not the node's trouble.
pub fn is_node_fault(c: FailureClass) -> bool {
    c.counts_against_node() || matches!(c, FailureClass::Comm | FailureClass::Io)
}

fn update(rec: &mut Record, ok: bool, alpha: f64, class: Option<FailureClass>) {
    rec.samples += 1;
    rec.score = rec.score * (1.0 - alpha) + if ok { alpha } else { 0.0 };
    if ok {
        rec.successes += 1;
        rec.consecutive_failures = 0;
    } else {
        rec.consecutive_failures += 1;
        rec.last_class = class;
    }
}

fn human_secs(s: f64) -> String {
    if s >= 3600.0 { format!("{:.0}h", s / 3600.0) } else { format!("{:.0}m", s / 60.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(at: i64, node: &str, class: Option<FailureClass>) -> HealthObservation {
        HealthObservation {
            at: Millis(at),
            provider: "p".into(),
            pool: "p/pool".into(),
            node: node.into(),
            class,
            ran_s: 0.0,
            free: false,
            lift: false,
        }
    }

    /// A node's infrastructure faults stay in its history for a day, even
    /// after the work that met them succeeded elsewhere; the workload's own
    /// errors and capacity refusals are not the node's.
    #[test]
    fn node_faults_are_kept_for_a_day_whatever_happens_next() {
        let mut t = HealthTracker::default();
        let hour = 3_600_000;
        t.observe(&obs(0, "n1", Some(FailureClass::Node)));
        t.observe(&obs(hour, "n1", Some(FailureClass::Comm)));
        t.observe(&obs(hour, "n1", Some(FailureClass::App)));
        t.observe(&obs(hour, "n1", Some(FailureClass::Capacity)));
        t.observe(&obs(2 * hour, "n2", None));
        let v = t.view(Millis(2 * hour));
        let classes: Vec<FailureClass> = v.faults["n1"].iter().map(|f| f.class).collect();
        assert_eq!(classes, [FailureClass::Node, FailureClass::Comm]);
        assert!(!v.faults.contains_key("n2"));
        assert_eq!(v.faults["n1"][0].clears_at(), Millis(24 * hour));
        let later = t.view(Millis(24 * hour + 1));
        assert_eq!(later.faults["n1"].len(), 1, "the first aged out: {later:?}");
        assert!(t.view(Millis(25 * hour + 1)).faults.is_empty());
    }

    #[test]
    fn pools_and_nodes_learn_running_hours_and_pools_preemptions_from_every_outcome() {
        let mut t = HealthTracker::default();
        let ran = |class, hours: f64| HealthObservation { ran_s: hours * 3600.0, ..obs(0, "n1", class) };
        t.observe(&ran(None, 10.0));
        t.observe(&ran(Some(FailureClass::App), 2.0));
        t.observe(&ran(Some(FailureClass::Preempted), 3.0));
        t.observe(&ran(Some(FailureClass::Node), 1.0));
        // A launch that never ran adds nothing.
        t.observe(&obs(0, "n1", Some(FailureClass::Capacity)));
        let p = t.view(Millis(1)).pool("p/pool");
        assert!((p.exposure_h - 16.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p.preemptions, 1, "only the reclaim counts; hardware faults are node health");
        // The node learns the same running hours, for its own fault rate.
        let n = t.view(Millis(1)).node("n1");
        assert!((n.exposure_h - 16.0).abs() < 1e-9, "{n:?}");
        assert_eq!(n.failures(), 1, "the hardware fault is the node's; the preemption is not");
    }

    #[test]
    fn app_errors_do_not_count_against_the_node() {
        let mut t = HealthTracker::default();
        for i in 0..5 {
            assert!(t.observe(&obs(i, "n1", Some(FailureClass::App))).is_none());
        }
        let v = t.view(Millis(10));
        assert_eq!(v.node("n1"), Health::UNKNOWN);
    }

    #[test]
    fn repeated_node_failures_quarantine_then_probation_then_trust() {
        let mut t = HealthTracker::default();
        assert!(t.observe(&obs(0, "n1", Some(FailureClass::Node))).is_none());
        let q = t.observe(&obs(1, "n1", Some(FailureClass::Node))).expect("quarantined");
        assert_eq!(q.until, Millis(1).plus_secs(1800.0));
        assert!(t.view(Millis(2)).node("n1").quarantined);
        assert_eq!(t.next_release(Millis(2)), Some(q.until));
        // After the cool-down: eligible again, on probation.
        let h = t.view(q.until).node("n1");
        assert!(!h.quarantined && h.probation);
        // A failure on probation sends it back for twice as long.
        let q2 = t.observe(&obs(q.until.0, "n1", Some(FailureClass::Node))).expect("again");
        assert_eq!(q2.until, q.until.plus_secs(3600.0));
        // A success after that restores full trust.
        t.observe(&obs(q2.until.0, "n1", None));
        let h = t.view(q2.until).node("n1");
        assert!(!h.quarantined && !h.probation);
        assert!(h.score < 1.0, "history is remembered");
    }

    /// A preemption the workload resumed from with progress is what spot
    /// capacity promises: it leaves the pool's score alone (its rate per
    /// running hour is still learned). One before progress counts against
    /// the pool, as a capacity refusal does.
    #[test]
    fn free_stops_are_not_held_against_the_pool() {
        let mut t = HealthTracker::default();
        let preempted = |free| HealthObservation {
            ran_s: 40.0 * 3600.0,
            free,
            ..obs(0, "n1", Some(FailureClass::Preempted))
        };
        t.observe(&obs(0, "n1", None));
        for _ in 0..5 {
            t.observe(&preempted(true));
        }
        let p = t.view(Millis(1)).pool("p/pool");
        assert_eq!((p.score, p.success_rate), (1.0, 1.0), "{p:?}");
        assert_eq!(p.preemptions, 5, "the rate is still learned: {p:?}");
        t.observe(&preempted(false));
        let p = t.view(Millis(1)).pool("p/pool");
        assert!(p.score < 0.75 && p.success_rate == 0.5, "a charged stop counts: {p:?}");
    }

    #[test]
    fn recent_outcomes_weigh_more() {
        let mut t = HealthTracker::new(HealthConfig { quarantine_after: 100, ..HealthConfig::default() });
        t.observe(&obs(0, "a", Some(FailureClass::Node)));
        t.observe(&obs(1, "a", None));
        t.observe(&obs(0, "b", None));
        t.observe(&obs(1, "b", Some(FailureClass::Node)));
        let v = t.view(Millis(2));
        assert!(v.node("a").score > v.node("b").score);
        assert_eq!(v.node("a").success_rate, v.node("b").success_rate);
    }
}
