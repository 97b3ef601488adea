//! The simulated marketplace: every simulated provider's pools, nodes and
//! attempts, behind one lock, with the decisions that need that state.
//!
//! Owns the attempts' simulated phases (pending, starting, running,
//! striking, ended by the simulator), other tenants' load per node (moved
//! by [`super::churn`]), lemon nodes, and the launch-time checks: is the
//! node up, does the request fit beside everyone else. Every method here is
//! synchronous and takes `now`; the provider ([`super::SimProvider`]) does
//! the executor calls between them, never holding the lock across an await.
//! It never decides retries or placement and never writes the journal.

use super::attempt::{Phase, SigFacts, SimAttempt, need_of};
use super::churn::{self, NodeLoad};
use super::config::{SimConfig, SimError};
use super::faults::{self, FaultContext, LaunchFault, RunFault};
use super::lifecycle::{self, StartupPlan};
use super::rng::Rng;
use crate::accel::Vendor;
use crate::engine::model::Millis;
use crate::fleet::{Fleet, Free, NodeState, PoolDef};
use crate::providers::{InventoryNode, InventoryPool, LaunchError, LaunchRequest};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[derive(Debug)]
struct SimNode {
    name: String,
    load: NodeLoad,
    lemon: bool,
}

#[derive(Debug)]
struct SimPool {
    provider: String,
    def: PoolDef,
    nodes: Vec<SimNode>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pools: Vec<SimPool>,
    churn_origin: Option<Millis>,
    churn_done: u64,
    pub(super) attempts: HashMap<String, SimAttempt>,
    /// Launch calls so far for tokens whose launch failed (each redraws).
    launch_calls: HashMap<String, u32>,
    next_job: u64,
}

/// What the market answers a launch.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum LaunchOutcome {
    Adopted {
        provider_ref: String,
    },
    Accepted {
        provider_ref: String,
    },
    Refused(LaunchError),
    /// The launch went through but its answer is lost: the attempt exists.
    TimedOut,
}

/// What a launch learns from its pool and node.
struct Placed {
    ctx: FaultContext,
    region: String,
    startup: Duration,
    sig: SigFacts,
    /// Where a planned fault strikes (a gang's lemon, else rank 0).
    strike_node: String,
}

/// The simulated marketplace shared by every [`super::SimProvider`].
#[derive(Debug)]
pub struct SimMarket {
    config: SimConfig,
    state: Mutex<State>,
}

/// At most this many churn steps are applied in one catch-up; a longer gap
/// (a clock jump) skips ahead.
const MAX_CATCH_UP: u64 = 2_000;

pub(super) fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl SimMarket {
    /// Simulates every provider of `fleet`, its node names and usage as the
    /// fleet says (less what the fleet marks as Canopy's own).
    pub fn new(fleet: &Fleet, config: SimConfig) -> Result<SimMarket, SimError> {
        config.check()?;
        let mut state = State {
            next_job: 40_000 + Rng::stream(config.seed, "job", "").below(10_000),
            ..State::default()
        };
        for (i, pool) in fleet.pools.iter().enumerate() {
            let idx = crate::fleet::PoolIdx(i as u32);
            let nodes = fleet
                .node_defs(idx)
                .into_iter()
                .map(|n| {
                    let used = n.used;
                    let gpus = used.gpus.saturating_sub(n.canopy_gpus);
                    let share = if used.gpus > 0 { f64::from(gpus) / f64::from(used.gpus) } else { 1.0 };
                    let others = Free {
                        gpus,
                        cpu_cores: used.cpu_cores * share,
                        memory_gb: used.memory_gb * share,
                        disk_gb: used.disk_gb * share,
                    };
                    SimNode {
                        name: n.name.clone(),
                        load: NodeLoad { state: n.state, others, base: others },
                        lemon: faults::is_lemon(config.seed, &n.name, config.lemon_fraction),
                    }
                })
                .collect();
            let provider = fleet.provider(pool.provider).name.clone();
            state.pools.push(SimPool { provider, def: fleet.pool_def(idx), nodes });
        }
        Ok(SimMarket { config, state: Mutex::new(state) })
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves plain data behind;
        // the simulation carries on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Provider names, in fleet order.
    pub fn provider_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for p in &self.lock().pools {
            if !names.contains(&p.provider) {
                names.push(p.provider.clone());
            }
        }
        names
    }

    /// The market's lemon nodes, by name.
    pub fn lemon_nodes(&self) -> Vec<String> {
        self.lock().pools.iter().flat_map(|p| &p.nodes).filter(|n| n.lemon).map(|n| n.name.clone()).collect()
    }

    pub(super) fn check_provider(&self, name: &str) -> Result<(), SimError> {
        let known = self.provider_names();
        if known.iter().any(|n| n == name) {
            Ok(())
        } else {
            Err(SimError::UnknownProvider { name: name.to_string(), known })
        }
    }

    /// The provider's pools with other tenants' usage now.
    pub(super) fn inventory(&self, provider: &str, now: Millis) -> Vec<InventoryPool> {
        let mut st = self.lock();
        self.advance(&mut st, now);
        st.pools
            .iter()
            .filter(|p| p.provider == provider)
            .map(|p| InventoryPool {
                def: p.def.clone(),
                nodes: p
                    .nodes
                    .iter()
                    .map(|n| InventoryNode {
                        name: n.name.clone(),
                        state: n.load.state,
                        used_by_others: n.load.others,
                        switch: None,
                    })
                    .collect(),
            })
            .collect()
    }

    /// Applies churn steps up to `now`; a node that goes down ends the
    /// attempts on it.
    pub(super) fn advance(&self, st: &mut State, now: Millis) {
        let cfg = &self.config.churn;
        if cfg.drift <= 0.0 && cfg.down_per_hour <= 0.0 {
            return;
        }
        let origin = *st.churn_origin.get_or_insert(now);
        let step_ms = ms(cfg.step).max(1);
        let target = u64::try_from((now.0 - origin.0) / step_ms).unwrap_or(0);
        if target <= st.churn_done {
            return;
        }
        let first = st.churn_done.max(target.saturating_sub(MAX_CATCH_UP)) + 1;
        let State { pools, attempts, .. } = st;
        for k in first..=target {
            let at = Millis(origin.0.saturating_add(step_ms.saturating_mul(k as i64)));
            for pool in pools.iter_mut() {
                for node in &mut pool.nodes {
                    let mut rng = Rng::stream_n(self.config.seed, "churn", &node.name, k);
                    let next = churn::step(&node.load, &pool.def.shape, cfg, &mut rng);
                    if node.load.state != NodeState::Down && next.state == NodeState::Down {
                        tracing::debug!(node = %node.name, "sim: node went down");
                        for a in attempts.values_mut().filter(|a| a.on_node(&node.name) && a.holds_capacity())
                        {
                            if a.forced.is_none() {
                                a.forced = Some((at, RunFault::NodeLost));
                                a.forced_node = Some(node.name.clone());
                            }
                        }
                    }
                    node.load = next;
                }
            }
        }
        st.churn_done = target;
    }

    /// Accepts, adopts or refuses a launch.
    pub(super) fn launch(&self, provider: &str, req: &LaunchRequest, now: Millis) -> LaunchOutcome {
        let mut st = self.lock();
        self.advance(&mut st, now);
        if let Some(a) = st.attempts.get(&req.token) {
            return LaunchOutcome::Adopted { provider_ref: a.provider_ref.clone() };
        }
        let place = match self.place(&st, provider, req) {
            Ok(p) => p,
            Err(e) => return LaunchOutcome::Refused(e),
        };
        let (seed, rates) = (self.config.seed, &self.config.faults);
        let call = st.launch_calls.get(&req.token).copied().unwrap_or(0);
        let fault = faults::launch_fault(seed, &req.token, call, &place.ctx, rates);
        let refusal = match fault {
            Some(LaunchFault::Capacity) => Some(LaunchError::Capacity(format!(
                "insufficient {} in {provider}/{} ({}); try another pool or later",
                if place.ctx.interruptible { "spot capacity" } else { "capacity" },
                req.pool,
                place.region
            ))),
            Some(LaunchFault::Api) => Some(LaunchError::Api(format!(
                "{provider}: 503 Service Unavailable (request {})",
                Rng::stream_n(seed, "api", &req.token, u64::from(call)).hex(12)
            ))),
            Some(LaunchFault::Timeout) | None => None,
        };
        if let Some(e) = refusal {
            st.launch_calls.insert(req.token.clone(), call + 1);
            return LaunchOutcome::Refused(e);
        }
        let lifecycle = place.sig.lifecycle;
        let plan: StartupPlan =
            lifecycle::startup_plan(seed, &req.token, lifecycle, place.startup, self.config.time_scale);
        let window =
            req.spec.expected_runtime.map_or(self.config.fault_window, |r| r.0.min(self.config.fault_window));
        let strike = faults::run_fault(seed, &req.token, &place.ctx, rates);
        let job = st.next_job;
        st.next_job += 1;
        let provider_ref = lifecycle::provider_ref(seed, &req.token, lifecycle, job);
        tracing::debug!(token = %req.token, %provider_ref, start_in = ?plan.total(), ?strike, "sim: launch accepted");
        st.attempts.insert(
            req.token.clone(),
            SimAttempt {
                provider: provider.to_string(),
                node: req.node.clone(),
                req: req.clone(),
                provider_ref: provider_ref.clone(),
                start_at: Millis(now.0.saturating_add(ms(plan.total()))),
                strike,
                window,
                forced: None,
                forced_node: None,
                strike_node: place.strike_node,
                phase: Phase::Pending,
                cancel_requested: false,
                exec_ended: false,
                signature: place.sig,
            },
        );
        if fault == Some(LaunchFault::Timeout) {
            LaunchOutcome::TimedOut
        } else {
            LaunchOutcome::Accepted { provider_ref }
        }
    }

    /// Checks the request against the pool and node; what a launch there
    /// needs to know.
    fn place(&self, st: &State, provider: &str, req: &LaunchRequest) -> Result<Placed, LaunchError> {
        let Some(pool) = st.pools.iter().find(|p| p.provider == provider && p.def.name == req.pool) else {
            return Err(LaunchError::Rejected(format!("{provider} has no pool {:?}", req.pool)));
        };
        // Every node of a gang must be there and have room, or nothing
        // starts: a gang is launched whole or not at all.
        let names = if req.nodes.is_empty() { std::slice::from_ref(&req.node) } else { &req.nodes[..] };
        let mut nodes = Vec::with_capacity(names.len());
        for (rank, name) in names.iter().enumerate() {
            let Some(node) = pool.nodes.iter().find(|n| &n.name == name) else {
                return Err(LaunchError::Rejected(format!("{provider}/{} has no node {name:?}", req.pool)));
            };
            fits(st, pool, node, need_of(req)).map_err(|why| {
                LaunchError::Capacity(if names.len() > 1 {
                    format!("rank {rank} of the gang cannot start: {why}; no rank was started")
                } else {
                    why
                })
            })?;
            nodes.push(node);
        }
        let lemon = nodes.iter().find(|n| n.lemon);
        let node = lemon.copied().unwrap_or(nodes[0]);
        let r = &req.spec.resources;
        let accel = pool.def.shape.accelerator.as_ref();
        let nvidia = accel.is_some_and(|a| a.vendor == Vendor::Nvidia);
        Ok(Placed {
            ctx: FaultContext {
                interruptible: pool.def.interruptible,
                fullness: fullness(st, pool),
                lemon: node.lemon,
                lemon_multiplier: self.config.lemon_multiplier,
                gpus: r.gpus,
                nvidia,
            },
            region: pool.def.region.clone(),
            strike_node: node.name.clone(),
            startup: pool.def.startup,
            sig: SigFacts {
                lifecycle: pool.def.lifecycle,
                nvidia,
                gpu_memory_gb: accel.map_or(0.0, |a| a.memory_gb),
            },
        })
    }
}

/// Whether `need` fits on the node beside other tenants and the market's
/// live attempts; the reason when it does not.
fn fits(st: &State, pool: &SimPool, node: &SimNode, need: Free) -> Result<(), String> {
    if node.load.state != NodeState::Ready {
        return Err(format!("node {} is {}", node.name, node.load.state));
    }
    let s = &pool.def.shape;
    let mut used = node.load.others;
    for a in st.attempts.values().filter(|a| a.on_node(&node.name) && a.holds_capacity()) {
        let n = a.need();
        used.gpus += n.gpus;
        used.cpu_cores += n.cpu_cores;
        used.memory_gb += n.memory_gb;
    }
    let free_gpus = s.gpus_per_node.saturating_sub(used.gpus);
    if need.gpus > free_gpus {
        return Err(format!(
            "node {} has {free_gpus} of {} GPUs free, {} asked",
            node.name, s.gpus_per_node, need.gpus
        ));
    }
    let free_cpu = s.cpu_cores - used.cpu_cores;
    if need.cpu_cores > free_cpu + 1e-9 {
        return Err(format!("node {} has {free_cpu:.1} CPU cores free, {} asked", node.name, need.cpu_cores));
    }
    let free_mem = s.memory_gb - used.memory_gb;
    if need.memory_gb > free_mem + 1e-9 {
        return Err(format!("node {} has {free_mem:.0} GB memory free, {} asked", node.name, need.memory_gb));
    }
    Ok(())
}

/// Share of the pool in use (GPUs, or cores for CPU pools); down nodes count as full.
fn fullness(st: &State, pool: &SimPool) -> f64 {
    let s = &pool.def.shape;
    let gpu = s.gpus_per_node > 0;
    let per_node = if gpu { f64::from(s.gpus_per_node) } else { s.cpu_cores };
    let (mut used, mut total) = (0.0, 0.0);
    for n in &pool.nodes {
        total += per_node;
        if n.load.state != NodeState::Ready {
            used += per_node;
            continue;
        }
        let mine: f64 = st
            .attempts
            .values()
            .filter(|a| a.on_node(&n.name) && a.holds_capacity())
            .map(|a| if gpu { f64::from(a.need().gpus) } else { a.need().cpu_cores })
            .sum();
        let others = if gpu { f64::from(n.load.others.gpus) } else { n.load.others.cpu_cores };
        used += (others + mine).min(per_node);
    }
    if total > 0.0 { used / total } else { 1.0 }
}
