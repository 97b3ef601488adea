//! Rebuilding the core from the journal after a restart: live workloads
//! and their attempts come back, capacity held by live attempts is
//! re-allocated, exclusions come from the workload's record (recomputed
//! from failed attempts for rows from before records carried them), and
//! health is replayed from recent observations. Replay is the journal's
//! current rows, not every event, so it is fast.

use super::{Action, Core, Entry, Live};
use crate::engine::model::*;
use crate::engine::retry::POOL_EXCLUDE_AFTER;
use crate::failure::FailureClass;
use crate::fleet::{Free, NodeState};
use std::collections::HashMap;

/// What the journal hands back on start.
#[derive(Debug, Clone, Default)]
pub struct Restore {
    /// Non-final workloads.
    pub workloads: Vec<WorkloadRecord>,
    /// All attempts of those workloads.
    pub attempts: Vec<AttemptRecord>,
    /// Recent health observations, oldest first.
    pub health: Vec<HealthObservation>,
    /// The largest workload id ever assigned in this store.
    pub max_id: u64,
    /// The largest workload id found outside the journal (the store's log
    /// and artifact directories): above `max_id` only when the journal
    /// was restored from an older copy or lost its tail. New ids start
    /// above both, so no new workload shares an old one's logs.
    pub id_floor: u64,
    /// Operators' standing cordons and drains.
    pub intents: Vec<NodeIntent>,
}

impl Core {
    /// Loads journal state. Returns the actions needed to resume: launches
    /// that may never have reached their provider are sent again (same
    /// token, so the provider adopts if it has them).
    pub fn restore(&mut self, r: Restore, now: Millis) -> Vec<Action> {
        for obs in &r.health {
            self.health.observe(obs);
        }
        for i in r.intents {
            if let Some(idx) = self.fleet.node_by_name(&i.node)
                && self.fleet.nodes[idx.0 as usize].state != NodeState::Down
            {
                self.fleet.nodes[idx.0 as usize].state = i.state;
            }
            self.intents.insert(i.node.clone(), i);
        }
        self.drop_snapshot();
        self.journal_max_id = r.max_id;
        self.next_id = self.next_id.max(r.max_id + 1).max(r.id_floor + 1);
        self.first_new_id = self.next_id;
        let mut by_workload: HashMap<WorkloadId, Vec<AttemptRecord>> = HashMap::new();
        for a in r.attempts {
            by_workload.entry(a.id.workload).or_default().push(a);
        }
        for rec in r.workloads {
            if rec.state.is_final() {
                continue;
            }
            let id = rec.id;
            let mut attempts = by_workload.remove(&id).unwrap_or_default();
            attempts.sort_by_key(|a| a.id.n);
            let mut entry = Entry::new(rec, attempts);
            recompute_exclusions(&mut entry, now, self.config.exclusion_ttl_s);
            // Rows that record their exclusions are what they say (one an
            // operator cleared or a recovered node ended stays ended).
            if let Some(x) = entry.rec.exclusions.clone() {
                let fresh = x.until.is_some_and(|u| u > now);
                entry.exclude_nodes = if fresh { x.nodes.into_iter().collect() } else { Default::default() };
                entry.exclude_pools = if fresh { x.pools.into_iter().collect() } else { Default::default() };
                entry.excluded_at =
                    if fresh && !(entry.exclude_nodes.is_empty() && entry.exclude_pools.is_empty()) {
                        x.since
                    } else {
                        None
                    };
            }
            if let Some(at) = entry.excluded_at {
                self.expiries.insert((at.plus_secs(self.config.exclusion_ttl_s), id));
            }
            if let Some(k) = &entry.rec.idempotency_key {
                self.keys.insert(k.clone(), id);
            }
            let live_idx = entry.attempts.iter().position(|a| !a.state.is_final());
            if let Some(idx) = live_idx {
                let att = &entry.attempts[idx];
                let r = &entry.rec.spec.resources;
                let alloc =
                    Free { gpus: r.gpus, cpu_cores: r.cpu_cores, memory_gb: r.memory_gb, disk_gb: r.disk_gb };
                let nodes: Vec<Option<crate::fleet::NodeIdx>> =
                    att.all_nodes().iter().map(|n| self.fleet.node_by_name(n)).collect();
                // A lost leader's host-bound attempt: its launch is never
                // sent again here (the old host may have run it), and it
                // is held until that host's lease has lapsed.
                let hold = self
                    .config
                    .host_bound
                    .as_ref()
                    .filter(|h| h.providers.contains(&att.provider))
                    .map(|h| now.plus_secs(h.hold_s + entry.rec.spec.runtime.stop_grace().as_secs_f64()));
                if let Some(until) = hold {
                    self.held.insert(att.id, until);
                }
                let acked = att.state != AttemptState::Placing || hold.is_some();
                // A stop Canopy decided or was asked for is carried out with
                // its own outcome; stores from before stops were recorded
                // only know that one was under way.
                let terminating = att.stop.clone().or_else(|| {
                    (att.state == AttemptState::Terminating).then(|| crate::failure::ProviderEnd::Unknown {
                        message: "terminated before a restart".into(),
                    })
                });
                if terminating == Some(crate::failure::ProviderEnd::Cancelled) {
                    entry.cancel_requested = true;
                }
                let stopping = terminating.is_some();
                for n in nodes.iter().flatten() {
                    self.allocate(*n, alloc, 1);
                }
                entry.live = Some(Live {
                    idx,
                    nodes: nodes.iter().map(|n| n.unwrap_or(crate::fleet::NodeIdx(u32::MAX))).collect(),
                    alloc,
                    launch_sent_at: now,
                    launch_resends: 0,
                    acked,
                    unreachable_since: None,
                    outage_at: None,
                    terminate_sent_at: terminating.as_ref().map(|_| now),
                    terminating,
                    collecting: false,
                    charged: None,
                });
                if stopping {
                    // Resume the stop at once, not a resend period later.
                    self.out.push(Action::Terminate {
                        attempt: att.id,
                        provider: att.provider.clone(),
                        token: att.token(&self.store_id),
                    });
                } else if !acked {
                    let pool = att.pool.split_once('/').map_or(String::new(), |(_, p)| p.to_string());
                    self.out.push(Action::Launch {
                        attempt: att.id,
                        provider: att.provider.clone(),
                        token: att.token(&self.store_id),
                        pool,
                        nodes: att.all_nodes(),
                        spec: entry.rec.spec.clone(),
                    });
                }
            } else {
                let p = self.queue_priority_for(entry.rec.tenant.as_deref(), entry.rec.priority);
                match entry.rec.not_before {
                    Some(t) if t > now => self.queue.push_backoff(t, p, id),
                    _ => self.queue.push_ready(p, id),
                }
            }
            self.demand_changed(&entry.rec.spec, true);
            if let Some(old) = self.entries.insert(id, entry) {
                self.demand_changed(&old.rec.spec, false);
            }
            self.file_live(id);
            self.touched.push(id);
        }
        self.drop_snapshot();
        self.rebuild_quota();
        self.schedule_pass(now);
        self.update_deadlines();
        std::mem::take(&mut self.out)
    }
}

/// The exclusions a workload's failed attempts imply, as the retry policy
/// set them when they happened (capacity misses are transient and not
/// kept, and neither evictions nor free stops exclude anything), from
/// failures within the exclusion TTL.
fn recompute_exclusions(e: &mut Entry, now: Millis, ttl_s: f64) {
    let free = super::retrying::free_stops(e);
    let mut per_pool: HashMap<&str, u32> = HashMap::new();
    let mut latest: Option<Millis> = None;
    for (a, free) in e.attempts.iter().zip(free) {
        let Some(c) = a.class else { continue };
        if free || super::retrying::evicted(a) {
            continue;
        }
        let at = a.ended_at.unwrap_or(a.placed_at);
        // Exclusions expire; what a GPU OOM taught does not.
        let fresh = at.plus_secs(ttl_s) > now;
        if fresh && c.is_infrastructure() && c != FailureClass::Capacity {
            if c != FailureClass::Provider && c != FailureClass::Preempted {
                e.exclude_nodes.insert(culprit(a).to_string());
                latest = latest.max(Some(at));
            }
            let n = per_pool.entry(a.pool.as_str()).or_default();
            *n += 1;
            if *n >= POOL_EXCLUDE_AFTER && c != FailureClass::Provider {
                e.exclude_pools.insert(a.pool.clone());
                latest = latest.max(Some(at));
            }
        }
        if c == FailureClass::GpuOom {
            let m = e.min_gpu_memory_exclusive.map_or(a.gpu_memory_gb, |x| x.max(a.gpu_memory_gb));
            e.min_gpu_memory_exclusive = Some(m);
        }
    }
    e.excluded_at = latest;
}

/// The node a failed attempt was charged to: a gang's failing rank's,
/// which its evidence names (`rank 1 on n2: …`) when the provider said
/// which, else rank 0's.
fn culprit(a: &AttemptRecord) -> &str {
    let named = a.evidence.as_deref().and_then(|e| e.strip_prefix("rank ")).and_then(|e| {
        let (_, rest) = e.split_once(" on ")?;
        let (node, _) = rest.split_once(": ")?;
        a.all_nodes().iter().any(|n| n == node).then_some(node)
    });
    named.unwrap_or(&a.node)
}
