//! One attempt's simulated life: pending until its startup moment, started
//! on the executor exactly once, running until it ends on its own or the
//! simulator strikes it, and what its logs and outputs are read from.
//!
//! The state changes here are synchronous and take `now`; the provider
//! makes the executor calls in between. Nothing here decides retries,
//! classifies an end, or writes the journal.

use super::faults::{RunFault, Strike};
use super::market::SimMarket;
use super::rng::Rng;
use super::signature::{self, SignatureContext};
use crate::engine::model::{AttemptId, Millis};
use crate::failure::ProviderEnd;
use crate::fleet::{Free, Lifecycle};
use crate::providers::{AttemptStatus, LaunchError, LaunchRequest};
use std::time::Duration;

/// The moment an attempt's command is stopped by the simulator, and how.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StrikeOrder {
    pub end: ProviderEnd,
    /// Lines for the end of stderr (may be empty).
    pub tail: String,
}

/// The sim's own stderr lines after the executor's real ones.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tail {
    /// Length of the real stderr when the simulator stopped the process.
    pub real_len: u64,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Phase {
    Pending,
    /// The executor's launch is in flight.
    Starting,
    Running {
        since: Millis,
    },
    /// The simulator is stopping the process for a fault.
    Striking {
        since: Millis,
    },
    /// Ended by the simulator; `started`: the executor ran it.
    Ended {
        end: ProviderEnd,
        started: bool,
        tail: Option<Tail>,
    },
}

#[derive(Debug)]
pub(super) struct SimAttempt {
    pub(super) provider: String,
    pub(super) node: String,
    pub(super) req: LaunchRequest,
    pub(super) provider_ref: String,
    pub(super) start_at: Millis,
    pub(super) strike: Option<Strike>,
    pub(super) window: Duration,
    /// A node going down ends the attempt at this moment.
    pub(super) forced: Option<(Millis, RunFault)>,
    /// The node that went down, for a gang (any of its nodes may).
    pub(super) forced_node: Option<String>,
    /// The node a planned fault strikes: a gang's lemon if it has one,
    /// else rank 0's.
    pub(super) strike_node: String,
    pub(super) phase: Phase,
    pub(super) cancel_requested: bool,
    /// The executor reported its end (frees the node's capacity).
    pub(super) exec_ended: bool,
    pub(super) signature: SigFacts,
}

#[derive(Debug, Clone)]
pub(super) struct SigFacts {
    pub(super) lifecycle: Lifecycle,
    pub(super) nvidia: bool,
    pub(super) gpu_memory_gb: f64,
}

impl SimAttempt {
    /// Whether it runs on `node` (any rank of a gang).
    pub(super) fn on_node(&self, node: &str) -> bool {
        self.node == node || self.req.nodes.iter().any(|n| n == node)
    }

    /// How a fault on `node` ends it: for a gang, as that rank's end.
    pub(super) fn end_on(&self, node: &str, end: ProviderEnd) -> ProviderEnd {
        match self.req.nodes.iter().position(|n| n == node).filter(|_| self.req.is_gang()) {
            Some(rank) => ProviderEnd::Rank { rank: rank as u32, node: node.to_string(), end: Box::new(end) },
            None => end,
        }
    }

    pub(super) fn holds_capacity(&self) -> bool {
        !self.exec_ended && !matches!(self.phase, Phase::Ended { .. })
    }
    pub(super) fn need(&self) -> Free {
        need_of(&self.req)
    }
}

/// What a launch asks of its node.
pub(super) fn need_of(req: &LaunchRequest) -> Free {
    let r = &req.spec.resources;
    Free { gpus: r.gpus, cpu_cores: r.cpu_cores, memory_gb: r.memory_gb, disk_gb: r.disk_gb }
}

/// What a status poll needs next.
#[derive(Debug, Clone)]
pub(super) enum Poll {
    Answer(AttemptStatus),
    /// Launch this on the executor now, then report with [`SimMarket::started`].
    Start(Box<LaunchRequest>),
    /// Ask the executor; when `strike` is set, stop the process and report
    /// with [`SimMarket::struck`] unless it has already ended. When
    /// `notice` is set and it still runs, a preemption strikes within
    /// that many seconds: answer `Reclaiming`.
    Delegate {
        strike: Option<StrikeOrder>,
        notice: Option<u64>,
    },
}

/// What to do once the executor has answered a start.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum AfterStart {
    Answer(AttemptStatus),
    /// A terminate came while it was starting: stop it at the executor.
    StopExecutor,
}

/// Where an attempt's logs and outputs come from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    NotFound,
    /// It never ran: nothing to read.
    Nothing,
    Exec {
        tail: Option<Tail>,
    },
}

/// One attempt of a store, for `list_owned`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OwnedEntry {
    pub token: String,
    pub provider_ref: String,
    /// Whether the executor has it (ask it whether it still runs).
    pub started: bool,
}

impl SimMarket {
    /// What a status poll of `token` needs next.
    pub(super) fn poll(&self, provider: &str, token: &str, now: Millis) -> Poll {
        let mut st = self.lock();
        self.advance(&mut st, now);
        let seed = self.config().seed;
        let Some(a) = st.attempts.get_mut(token).filter(|a| a.provider == provider) else {
            return Poll::Answer(AttemptStatus::NotFound);
        };
        match &a.phase {
            Phase::Ended { end, .. } => Poll::Answer(AttemptStatus::Ended(end.clone())),
            Phase::Starting => Poll::Answer(AttemptStatus::Pending),
            Phase::Striking { .. } => Poll::Answer(AttemptStatus::Running),
            Phase::Pending => {
                if let Some((_, fault)) = a.forced.filter(|(at, _)| *at <= now) {
                    let node = a.forced_node.clone().unwrap_or_else(|| a.node.clone());
                    let end = a.end_on(&node, fault.end(&node));
                    a.phase = Phase::Ended { end: end.clone(), started: false, tail: None };
                    Poll::Answer(AttemptStatus::Ended(end))
                } else if now >= a.start_at {
                    a.phase = Phase::Starting;
                    Poll::Start(Box::new(a.req.clone()))
                } else {
                    Poll::Answer(AttemptStatus::Pending)
                }
            }
            &Phase::Running { since } => {
                // A preemption always comes with its whole notice.
                let notice = self.config().preempt_notice.as_secs_f64();
                let planned = a.strike.map(|s| {
                    let mut offset = a.window.as_secs_f64() * s.at_fraction;
                    if s.fault == RunFault::Preempted {
                        offset = offset.max(notice);
                    }
                    (since.plus_secs(offset), s.fault)
                });
                let due = [planned, a.forced].into_iter().flatten().filter(|(at, _)| *at <= now).min();
                let Some((at, fault)) = due else {
                    // A preemption gives notice before it strikes.
                    let within = planned
                        .filter(|(at, f)| {
                            *f == RunFault::Preempted && notice > 0.0 && at.secs_since(now) <= notice
                        })
                        .map(|(at, _)| at.secs_since(now).max(0.0).ceil() as u64);
                    return Poll::Delegate { strike: None, notice: within };
                };
                let node = match a.forced.filter(|f| f.0 == at && f.1 == fault) {
                    Some(_) => a.forced_node.clone().unwrap_or_else(|| a.node.clone()),
                    None => a.strike_node.clone(),
                };
                let ctx = SignatureContext {
                    lifecycle: a.signature.lifecycle,
                    node: &node,
                    provider_ref: &a.provider_ref,
                    gpus: a.req.spec.resources.gpus,
                    nvidia: a.signature.nvidia,
                    gpu_memory_gb: a.signature.gpu_memory_gb,
                    now: at,
                };
                let tail = signature::stderr_tail(fault, &ctx, &mut Rng::stream(seed, "signature", token));
                let end = a.end_on(&node, fault.end(&node));
                a.phase = Phase::Striking { since };
                tracing::debug!(token, fault = fault.as_str(), "sim: fault strikes");
                Poll::Delegate { strike: Some(StrikeOrder { end, tail }), notice: None }
            }
        }
    }

    /// Reports the executor's answer to a start.
    pub(super) fn started(&self, token: &str, now: Millis, result: Result<(), LaunchError>) -> AfterStart {
        let mut st = self.lock();
        let Some(a) = st.attempts.get_mut(token) else { return AfterStart::Answer(AttemptStatus::NotFound) };
        let cancelled = |started| Phase::Ended { end: ProviderEnd::Cancelled, started, tail: None };
        match result {
            Ok(()) if a.cancel_requested => {
                a.phase = cancelled(true);
                AfterStart::StopExecutor
            }
            Ok(()) => {
                a.phase = Phase::Running { since: now };
                AfterStart::Answer(AttemptStatus::Running)
            }
            // The executor may have started it without saying so: stop it,
            // or ask again at the next poll (it adopts the token).
            Err(LaunchError::Timeout) if a.cancel_requested => {
                a.phase = cancelled(true);
                AfterStart::StopExecutor
            }
            Err(LaunchError::Timeout) => {
                a.phase = Phase::Pending;
                AfterStart::Answer(AttemptStatus::Pending)
            }
            Err(_) if a.cancel_requested => {
                a.phase = cancelled(false);
                AfterStart::Answer(AttemptStatus::Ended(ProviderEnd::Cancelled))
            }
            Err(e) => {
                tracing::debug!(token, error = %e, "sim: executor refused the start");
                let end = e.to_end();
                a.phase = Phase::Ended { end: end.clone(), started: false, tail: None };
                AfterStart::Answer(AttemptStatus::Ended(end))
            }
        }
    }

    /// The fault has stopped the process; `real_len` is its stderr length.
    pub(super) fn struck(&self, token: &str, order: StrikeOrder, real_len: u64) {
        if let Some(a) = self.lock().attempts.get_mut(token) {
            let tail = Some(Tail { real_len, bytes: order.tail.into_bytes() });
            a.phase = Phase::Ended { end: order.end, started: true, tail };
        }
    }

    /// The fault did not strike: the process ended first (`ended`), or the
    /// executor could not be reached (try again at the next poll).
    pub(super) fn strike_missed(&self, token: &str, ended: bool) {
        if let Some(a) = self.lock().attempts.get_mut(token)
            && let Phase::Striking { since } = a.phase
        {
            if ended {
                a.strike = None;
                a.forced = None;
                a.exec_ended = true;
            }
            a.phase = Phase::Running { since };
        }
    }

    /// The executor says the attempt ended on its own.
    pub(super) fn exec_ended(&self, token: &str) {
        if let Some(a) = self.lock().attempts.get_mut(token) {
            a.exec_ended = true;
        }
    }

    /// `true` when the executor must be asked to stop it too.
    pub(super) fn terminate(&self, provider: &str, token: &str) -> bool {
        let mut st = self.lock();
        let Some(a) = st.attempts.get_mut(token).filter(|a| a.provider == provider) else { return false };
        match &a.phase {
            Phase::Pending => {
                tracing::debug!(token, "sim: cancelled before it started");
                a.phase = Phase::Ended { end: ProviderEnd::Cancelled, started: false, tail: None };
                false
            }
            Phase::Starting => {
                a.cancel_requested = true;
                false
            }
            Phase::Running { .. } | Phase::Striking { .. } => true,
            Phase::Ended { started, .. } => *started,
        }
    }

    /// Where the attempt's logs and outputs are.
    pub(super) fn source(&self, provider: &str, token: &str) -> Source {
        let st = self.lock();
        let Some(a) = st.attempts.get(token).filter(|a| a.provider == provider) else {
            return Source::NotFound;
        };
        match &a.phase {
            Phase::Pending | Phase::Starting => Source::Nothing,
            Phase::Running { .. } | Phase::Striking { .. } => Source::Exec { tail: None },
            Phase::Ended { started: false, .. } => Source::Nothing,
            Phase::Ended { started: true, tail, .. } => Source::Exec { tail: tail.clone() },
        }
    }

    /// The provider's attempts of `store_id` that have not ended.
    pub(super) fn owned(&self, provider: &str, store_id: &str) -> Vec<OwnedEntry> {
        let st = self.lock();
        let mut v: Vec<OwnedEntry> = st
            .attempts
            .iter()
            .filter(|(t, a)| a.provider == provider && AttemptId::from_token(t, store_id).is_some())
            .filter(|(_, a)| a.holds_capacity())
            .map(|(t, a)| OwnedEntry {
                token: t.clone(),
                provider_ref: a.provider_ref.clone(),
                started: matches!(a.phase, Phase::Running { .. } | Phase::Striking { .. }),
            })
            .collect();
        v.sort_by(|a, b| a.token.cmp(&b.token));
        v
    }
}
