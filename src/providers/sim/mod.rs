//! The `sim` provider: a simulated GPU marketplace whose commands really run.
//!
//! Canopy's embedded default is the local provider plus the demo fleet; the
//! demo fleet's providers (Slurm, Ray, a cloud, Kubernetes, a marketplace)
//! are served from here. Capacity, startup latency per lifecycle, other
//! tenants' load, node outages and faults are simulated; each attempt's
//! command is run by an executor (in production the local provider), so its
//! logs and outputs are real.
//!
//! - [`SimMarket`] is the shared state: pools and nodes from a
//!   [`Fleet`](crate::fleet::Fleet), attempts, churn, lemon nodes, all
//!   seeded by [`SimConfig::seed`]. One [`SimProvider`] per simulated
//!   provider name shares it.
//! - A launch answers at once with a provider handle (`i-0…` for a VM,
//!   `ctr-…` for a container, `job 40213` for a batch job). `status` says
//!   `Pending` until the startup moment ([`lifecycle`]), then starts the
//!   command on the executor under the same token, exactly once, and from
//!   then on reports the executor's status, unless a fault ([`faults`])
//!   strikes first: the simulator stops the real process through the
//!   executor and reports the end; in-workload faults (NCCL, CUDA OOM,
//!   Xid 79, no space) end as `Exited { code: 1 }` with the lines such a
//!   failure prints ([`signature`]) appended after the real stderr.
//! - Time comes from an injected [`Clock`]; every decision is a plain
//!   function of (seed, token, config, now), so tests drive it.
//!
//! Faults strike at the first status poll at or after their moment; a
//! process that has ended by then has won the race and its own end stands.
//!
//! It must not decide retries or placement, classify failures, or write
//! the journal: it behaves like a provider, and Canopy must cope with it
//! exactly as with a real one.

use crate::providers::{
    AttemptStatus, Collection, Inventory, LaunchAck, LaunchError, LaunchRequest, LogChunk, LogStream, Owned,
    Provider, ProviderError,
};
use crate::spec::Spec;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

mod attempt;
pub mod churn;
mod config;
pub mod faults;
pub mod lifecycle;
mod market;
pub mod rng;
pub mod signature;
#[cfg(test)]
mod tests;

pub use churn::ChurnConfig;
pub use config::{SimConfig, SimError};
pub use faults::FaultRates;
pub use market::SimMarket;

use attempt::{AfterStart, Poll, Source, StrikeOrder};

pub use crate::engine::clock::{Clock, ManualClock, SystemClock};

/// How long the simulator waits for the executor to confirm a stopped
/// process before it reads the final stderr length.
const STOP_WAIT: Duration = Duration::from_secs(5);
const STOP_POLL: Duration = Duration::from_millis(25);

/// One simulated provider of the market.
pub struct SimProvider {
    name: String,
    market: Arc<SimMarket>,
    exec: Arc<dyn Provider>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for SimProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimProvider").field("name", &self.name).field("executor", &self.exec.name()).finish()
    }
}

impl SimProvider {
    /// The provider `name` of the market, running commands on `exec`.
    pub fn new(
        name: impl Into<String>,
        market: Arc<SimMarket>,
        exec: Arc<dyn Provider>,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, SimError> {
        let name = name.into();
        market.check_provider(&name)?;
        Ok(Self { name, market, exec, clock })
    }

    /// One provider per provider name of the market, in fleet order.
    pub fn all(
        market: &Arc<SimMarket>,
        exec: &Arc<dyn Provider>,
        clock: &Arc<dyn Clock>,
    ) -> Vec<Arc<dyn Provider>> {
        market
            .provider_names()
            .into_iter()
            .map(|name| {
                let p =
                    SimProvider { name, market: market.clone(), exec: exec.clone(), clock: clock.clone() };
                Arc::new(p) as Arc<dyn Provider>
            })
            .collect()
    }

    fn err(&self, message: impl Into<String>) -> ProviderError {
        ProviderError { provider: self.name.clone(), message: message.into() }
    }

    fn exec_err(&self, e: ProviderError) -> ProviderError {
        self.err(format!("executor {}: {}", e.provider, e.message))
    }

    /// Starts the attempt on the executor; the status to answer.
    async fn start(&self, token: &str, req: &LaunchRequest) -> Result<AttemptStatus, ProviderError> {
        let result = self.exec.launch(req).await.map(|_| ());
        match self.market.started(token, self.clock.now(), result) {
            AfterStart::Answer(status) => {
                tracing::debug!(provider = %self.name, token, ?status, "sim: started on the executor");
                Ok(status)
            }
            AfterStart::StopExecutor => {
                self.exec.terminate(token).await.map_err(|e| self.exec_err(e))?;
                Ok(AttemptStatus::Ended(crate::failure::ProviderEnd::Cancelled))
            }
        }
    }

    /// Stops the process for a fault unless it has already ended.
    async fn strike(&self, token: &str, order: StrikeOrder) -> Result<AttemptStatus, ProviderError> {
        match self.exec.status(token).await {
            Ok(s @ (AttemptStatus::Ended(_) | AttemptStatus::NotFound)) => {
                self.market.strike_missed(token, true);
                return Ok(s);
            }
            Ok(AttemptStatus::Running | AttemptStatus::Pending | AttemptStatus::Reclaiming { .. }) => {}
            Err(e) => {
                self.market.strike_missed(token, false);
                return Err(self.exec_err(e));
            }
        }
        if let Err(e) = self.exec.terminate(token).await {
            self.market.strike_missed(token, false);
            return Err(self.exec_err(e));
        }
        self.wait_stopped(token).await;
        let real_len = self.stderr_len(token).await;
        let end = order.end.clone();
        self.market.struck(token, order, real_len);
        Ok(AttemptStatus::Ended(end))
    }

    async fn wait_stopped(&self, token: &str) {
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        while tokio::time::Instant::now() < deadline {
            match self.exec.status(token).await {
                Ok(AttemptStatus::Ended(_) | AttemptStatus::NotFound) => return,
                _ => tokio::time::sleep(STOP_POLL).await,
            }
        }
        tracing::warn!(provider = %self.name, token, "sim: the executor did not confirm the stop in time");
    }

    /// The executor's stderr length, read to its end.
    async fn stderr_len(&self, token: &str) -> u64 {
        let mut offset = 0;
        for _ in 0..4096 {
            match self.exec.logs(token, LogStream::Stderr, offset, 1 << 20).await {
                Ok(c) if !c.data.is_empty() => offset = c.next_offset,
                _ => break,
            }
        }
        offset
    }
}

#[async_trait::async_trait]
impl Provider for SimProvider {
    fn name(&self) -> &str {
        &self.name
    }

    async fn inventory(&self) -> Result<Inventory, ProviderError> {
        Ok(Inventory { pools: self.market.inventory(&self.name, self.clock.now()) })
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError> {
        match self.market.launch(&self.name, req, self.clock.now()) {
            market::LaunchOutcome::Adopted { provider_ref } => Ok(LaunchAck { provider_ref, adopted: true }),
            market::LaunchOutcome::Accepted { provider_ref } => {
                Ok(LaunchAck { provider_ref, adopted: false })
            }
            market::LaunchOutcome::Refused(e) => Err(e),
            market::LaunchOutcome::TimedOut => {
                if let Some(hang) = self.market.config().launch_hang {
                    tokio::time::sleep(hang).await;
                }
                Err(LaunchError::Timeout)
            }
        }
    }

    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        match self.market.poll(&self.name, token, self.clock.now()) {
            Poll::Answer(s) => Ok(s),
            Poll::Start(req) => self.start(token, &req).await,
            Poll::Delegate { strike: Some(order), .. } => self.strike(token, order).await,
            Poll::Delegate { strike: None, notice } => {
                let s = self.exec.status(token).await.map_err(|e| self.exec_err(e))?;
                if matches!(s, AttemptStatus::Ended(_)) {
                    self.market.exec_ended(token);
                }
                Ok(match (s, notice) {
                    (AttemptStatus::Running, Some(within_s)) => AttemptStatus::Reclaiming {
                        within_s,
                        message: format!(
                            "{} reclaims this interruptible capacity in {}",
                            self.name,
                            crate::units::human_secs(within_s as f64)
                        ),
                    },
                    (s, _) => s,
                })
            }
        }
    }

    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<LogChunk, ProviderError> {
        let tail = match self.market.source(&self.name, token) {
            Source::NotFound => return Err(self.err(format!("no attempt with token {token}"))),
            Source::Nothing => return Ok(LogChunk { data: Vec::new(), next_offset: offset }),
            Source::Exec { tail } => tail.filter(|_| stream == LogStream::Stderr),
        };
        let Some(tail) = tail else {
            return self.exec.logs(token, stream, offset, max).await.map_err(|e| self.exec_err(e));
        };
        let mut chunk = if offset < tail.real_len {
            let want = usize::try_from(tail.real_len - offset).unwrap_or(usize::MAX).min(max);
            self.exec.logs(token, stream, offset, want).await.map_err(|e| self.exec_err(e))?
        } else {
            LogChunk { data: Vec::new(), next_offset: offset }
        };
        if chunk.next_offset >= tail.real_len && chunk.data.len() < max {
            let from = usize::try_from(chunk.next_offset - tail.real_len).unwrap_or(usize::MAX);
            let bytes = tail.bytes.get(from..).unwrap_or_default();
            let take = bytes.len().min(max - chunk.data.len());
            chunk.data.extend_from_slice(&bytes[..take]);
            chunk.next_offset += take as u64;
        }
        Ok(chunk)
    }

    async fn outputs(&self, token: &str, spec: &Spec, dest: &Path) -> Result<Collection, ProviderError> {
        match self.market.source(&self.name, token) {
            Source::NotFound => Err(self.err(format!("no attempt with token {token}"))),
            Source::Nothing => Ok(Collection::default()),
            Source::Exec { .. } => self.exec.outputs(token, spec, dest).await.map_err(|e| self.exec_err(e)),
        }
    }

    async fn terminate(&self, token: &str) -> Result<(), ProviderError> {
        if self.market.terminate(&self.name, token) {
            self.exec.terminate(token).await.map_err(|e| self.exec_err(e))?;
        }
        Ok(())
    }

    async fn terminate_within(&self, token: &str, grace: Duration) -> Result<(), ProviderError> {
        if self.market.terminate(&self.name, token) {
            self.exec.terminate_within(token, grace).await.map_err(|e| self.exec_err(e))?;
        }
        Ok(())
    }

    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError> {
        let mut owned = Vec::new();
        for e in self.market.owned(&self.name, store_id) {
            let running = if e.started {
                match self.exec.status(&e.token).await.map_err(|err| self.exec_err(err))? {
                    AttemptStatus::Ended(_) | AttemptStatus::NotFound => {
                        self.market.exec_ended(&e.token);
                        continue;
                    }
                    s => s == AttemptStatus::Running,
                }
            } else {
                false
            };
            owned.push(Owned { token: e.token, provider_ref: e.provider_ref, running });
        }
        Ok(owned)
    }
}
