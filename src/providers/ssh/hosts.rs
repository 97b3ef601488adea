//! The hosts as the provider tracks them ([`HostState`]) and what every
//! call to them shares ([`Inner`]): calls with the host's reachability
//! noted, the lease's renewal, the host of a token, each attempt's GPUs,
//! lend windows closing and the preemption they cause. The provider's
//! calls themselves ([`super::SshProvider`]) are in the parent module.

use super::checkpoints;
use super::config::{HostConfig, PoolConfig, SshConfig};
use super::protocol::{self, Probe, Request, Status};
use super::transport::{Transport, TransportError};
use crate::config::SSH_LEASE_MARGIN;
use crate::engine::checkpoint;
use crate::fleet::NodeState;
use crate::providers::{LaunchError, LaunchRequest, ProviderError};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

/// How far ahead of a window's end running work is asked to stop, beyond
/// its stop grace.
pub const WINDOW_MARGIN: Duration = Duration::from_secs(5);

/// One host as the provider tracks it.
pub(super) struct HostState {
    pub(super) cfg: HostConfig,
    pub(super) transport: Transport,
    /// The last probe that answered.
    pub(super) probe: Mutex<Option<Probe>>,
    /// Why the last call failed to reach it; `None` while reachable.
    pub(super) unreachable: Mutex<Option<String>>,
    /// When the lease was last renewed here (after the answer came).
    pub(super) renewed: Mutex<Option<Instant>>,
    /// GPU indices held by Canopy's live attempts, by token.
    pub(super) gpus: Mutex<BTreeMap<String, Vec<u32>>>,
}

impl HostState {
    pub(super) fn name(&self) -> &str {
        &self.cfg.target.name
    }
}

pub(super) struct Inner {
    pub(super) cfg: SshConfig,
    pub(super) hosts: Vec<Arc<HostState>>,
    pub(super) started: Instant,
    /// The host each known token runs on.
    pub(super) tokens: Mutex<HashMap<String, usize>>,
    /// Each known token's stop grace.
    pub(super) graces: Mutex<HashMap<String, Duration>>,
    /// Tokens stopped because their host's lend window closes.
    pub(super) preempted: Mutex<BTreeSet<String>>,
    /// Attempts to remove from a host once it answers again.
    pub(super) cleanups: Mutex<BTreeSet<(usize, String)>>,
}

/// Calls `f` until it succeeds, a few times over about ten seconds while
/// the host cannot be reached; an answer from the host (even an error) is
/// final.
pub(super) async fn with_retries<T, F, Fut>(mut f: F) -> Result<T, TransportError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TransportError>>,
{
    let mut wait = Duration::from_millis(500);
    for _ in 0..4 {
        match f().await {
            Err(e) if e.is_unreachable() => {
                tracing::debug!("retrying in {wait:?}: {e}");
                tokio::time::sleep(wait).await;
                wait *= 3;
            }
            done => return done,
        }
    }
    f().await
}

pub(super) async fn renew_forever(inner: Weak<Inner>) {
    loop {
        let Some(i) = inner.upgrade() else { return };
        let every = (i.cfg.lease / 3).max(Duration::from_millis(500));
        let calls = i.hosts.iter().enumerate().map(|(n, _)| i.renew(n));
        futures::future::join_all(calls).await;
        drop(i);
        tokio::time::sleep(every).await;
    }
}

impl Inner {
    pub(super) fn err(&self, message: impl Into<String>) -> ProviderError {
        ProviderError { provider: self.cfg.name.clone(), message: message.into() }
    }

    pub(super) fn host_named(&self, node: &str) -> Option<&Arc<HostState>> {
        self.hosts.iter().find(|h| h.name() == node)
    }

    pub(super) fn pool(&self, h: &HostState) -> PoolConfig {
        self.cfg.pools.get(&h.cfg.pool).cloned().unwrap_or_default()
    }

    pub(super) fn now(&self) -> SystemTime {
        (self.cfg.clock)()
    }

    /// Notes whether a call reached the host.
    pub(super) fn saw(&self, h: &HostState, r: Result<(), &TransportError>) {
        let mut u = h.unreachable.lock().unwrap();
        match r {
            Ok(()) => {
                if u.take().is_some() {
                    tracing::info!(provider = %self.cfg.name, host = %h.name(), "reachable again");
                }
            }
            Err(e) if e.is_unreachable() => {
                if u.is_none() {
                    tracing::warn!(provider = %self.cfg.name, host = %h.name(), "{e}");
                }
                *u = Some(e.to_string());
            }
            Err(_) => {}
        }
    }

    pub(super) async fn call<T: serde::de::DeserializeOwned>(
        &self,
        h: &HostState,
        req: &Request,
    ) -> Result<T, TransportError> {
        let r = h.transport.call(req).await;
        self.saw(h, r.as_ref().map(|_| ()));
        r
    }

    pub(super) async fn call_raw(&self, h: &HostState, req: &Request) -> Result<Vec<u8>, TransportError> {
        let r = h.transport.call_raw(req).await;
        self.saw(h, r.as_ref().map(|_| ()));
        r
    }

    /// Renews host `n`'s lease, then removes attempts left to clean there.
    pub(super) async fn renew(&self, n: usize) {
        let h = &self.hosts[n];
        let for_ms = self.cfg.lease.as_millis() as u64;
        match self.call::<i64>(h, &Request::Renew { for_ms }).await {
            Ok(_) => *h.renewed.lock().unwrap() = Some(Instant::now()),
            Err(e) => {
                tracing::debug!(host = %h.name(), "lease not renewed: {e}");
                return;
            }
        }
        let pending: Vec<String> =
            self.cleanups.lock().unwrap().iter().filter(|(i, _)| *i == n).map(|(_, t)| t.clone()).collect();
        for token in pending {
            if self.call::<()>(h, &Request::Cleanup { token: token.clone() }).await.is_ok() {
                self.cleanups.lock().unwrap().remove(&(n, token));
            }
        }
    }

    /// Before a launch on host `n`: copies the newest complete checkpoint
    /// in Canopy's store there, unless it is over the spec's cap (the
    /// engine says so in the workload's events) or the attempt was
    /// launched already (a resent launch, which adopts: its checkpoint is
    /// in place and in use).
    pub(super) async fn hand_checkpoint(&self, n: usize, req: &LaunchRequest) -> Result<(), LaunchError> {
        let (Some(spec), Some(dir)) = (&req.spec.checkpoint, &req.checkpoint_dir) else { return Ok(()) };
        let h = &self.hosts[n];
        let found = {
            let d = dir.clone();
            tokio::task::spawn_blocking(move || checkpoint::newest_complete(&d))
                .await
                .map_err(|e| LaunchError::Api(format!("the checkpoint task failed: {e}")))?
                .map_err(|e| LaunchError::Api(format!("cannot read {}: {e}", dir.display())))?
        };
        let Some(f) = found else { return Ok(()) };
        let max_bytes = checkpoint::cap_bytes(spec);
        if f.bytes > max_bytes {
            tracing::warn!(
                provider = %self.cfg.name, host = %h.name(), token = %req.token,
                "checkpoint {} ({} bytes) is over the checkpoint cap ({max_bytes} bytes); the attempt starts without it",
                f.name, f.bytes
            );
            return Ok(());
        }
        let status = Request::Status { token: req.token.clone() };
        match self.call::<Status>(h, &status).await {
            Ok(Status::NotFound) => {}
            Ok(_) => return Ok(()),
            Err(e) => return Err(LaunchError::Api(e.to_string())),
        }
        let put = Request::PutCheckpoint { token: req.token.clone(), name: f.name.clone(), max_bytes };
        let src = dir.join(&f.name);
        let r = h
            .transport
            .call_with_payload::<protocol::HostCheckpoint>(&put, move |w| {
                checkpoints::write_tar(&src, w, checkpoints::Bounds::checkpoint(max_bytes)).map(|_| ())
            })
            .await;
        self.saw(h, r.as_ref().map(|_| ()));
        let sent = r.map_err(|e| {
            LaunchError::Api(format!("could not copy checkpoint {} to host {}: {e}", f.name, h.name()))
        })?;
        tracing::info!(
            provider = %self.cfg.name, host = %h.name(), token = %req.token,
            "handed checkpoint {} ({} bytes) to the attempt", sent.name, sent.bytes
        );
        Ok(())
    }

    /// The host `token` runs on: known, or asked of every host.
    /// `Ok(None)` when every host answered that it has no such attempt.
    pub(super) async fn host_of(&self, token: &str) -> Result<Option<usize>, ProviderError> {
        if let Some(&n) = self.tokens.lock().unwrap().get(token) {
            return Ok(Some(n));
        }
        let req = Request::Status { token: token.to_string() };
        let asks = self.hosts.iter().map(|h| self.call::<Status>(h, &req));
        let answers = futures::future::join_all(asks).await;
        let mut unreachable = Vec::new();
        for (n, a) in answers.into_iter().enumerate() {
            match a {
                Ok(Status::NotFound) => {}
                Ok(_) => {
                    self.tokens.lock().unwrap().insert(token.to_string(), n);
                    return Ok(Some(n));
                }
                Err(e) => unreachable.push(e.to_string()),
            }
        }
        if unreachable.is_empty() {
            // A host removed from the configuration (an owner taking it
            // back) is asked nothing, yet may still run the attempt: its
            // supervisor stops it only once the lease the previous engine
            // renewed runs out. Until then "not on any host" is not known,
            // and the engine must not place the work again beside it.
            let removed_hosts_stopped = self.started + self.cfg.lease + self.cfg.grace + SSH_LEASE_MARGIN;
            if Instant::now() < removed_hosts_stopped {
                return Err(self.err(format!(
                    "{token} is on none of the configured ssh hosts; a host removed from the \
                     configuration may still run it until its lease ({}) runs out",
                    crate::units::HumanDuration(self.cfg.lease)
                )));
            }
            Ok(None)
        } else {
            Err(self.err(format!("cannot tell where {token} runs: {}", unreachable.join("; "))))
        }
    }

    pub(super) fn forget(&self, n: usize, token: &str) {
        self.hosts[n].gpus.lock().unwrap().remove(token);
    }

    pub(super) fn grace_of(&self, token: &str) -> Duration {
        self.graces.lock().unwrap().get(token).copied().unwrap_or(self.cfg.grace)
    }

    /// When host `n`'s supervisors have surely stopped `token`'s workload
    /// for want of a lease.
    pub(super) fn lost_after(&self, n: usize, token: &str) -> Instant {
        let base = self.hosts[n].renewed.lock().unwrap().unwrap_or(self.started);
        base + self.cfg.lease + self.grace_of(token) + SSH_LEASE_MARGIN
    }

    /// Whether the host's lend window is closed now or closes within
    /// `ahead`.
    pub(super) fn window_closing(&self, h: &HostState, ahead: Duration) -> bool {
        let w = self.pool(h).windows;
        if w.is_always() {
            return false;
        }
        let now = self.now();
        if !w.is_open(now) {
            return true;
        }
        w.closes_at(now).is_some_and(|end| end.duration_since(now).unwrap_or_default() <= ahead)
    }

    pub(super) fn node_state(&self, h: &HostState) -> NodeState {
        if h.unreachable.lock().unwrap().is_some() || h.probe.lock().unwrap().is_none() {
            NodeState::Down
        } else if self.window_closing(h, WINDOW_MARGIN) {
            NodeState::Cordoned
        } else {
            NodeState::Ready
        }
    }

    /// Free GPU indices on the host, or `None` on a host without GPUs.
    pub(super) fn pick_gpus(
        &self,
        h: &HostState,
        token: &str,
        want: u32,
    ) -> Result<Option<Vec<u32>>, LaunchError> {
        let total = h.probe.lock().unwrap().as_ref().map_or(0, |p| p.shape.gpus_per_node);
        if total == 0 {
            return if want == 0 {
                Ok(None)
            } else {
                Err(LaunchError::Capacity(format!("host {} has no GPUs", h.name())))
            };
        }
        let mut held = h.gpus.lock().unwrap();
        if let Some(ids) = held.get(token) {
            return Ok(Some(ids.clone()));
        }
        let busy: BTreeSet<u32> = held.values().flatten().copied().collect();
        let free: Vec<u32> = (0..total).filter(|i| !busy.contains(i)).take(want as usize).collect();
        if (free.len() as u32) < want {
            return Err(LaunchError::Capacity(format!(
                "host {} has {} of its {total} GPUs free; the attempt needs {want}",
                h.name(),
                total as usize - busy.len()
            )));
        }
        held.insert(token.to_string(), free.clone());
        Ok(Some(free))
    }

    /// Stops `token` before its host's lend window closes.
    pub(super) fn preempt(self: &Arc<Self>, n: usize, token: &str) {
        if !self.preempted.lock().unwrap().insert(token.to_string()) {
            return;
        }
        let grace = self.grace_of(token);
        tracing::info!(
            provider = %self.cfg.name, host = %self.hosts[n].name(), token,
            "the host's lend window closes; stopping the attempt with {grace:?} of grace"
        );
        let me = self.clone();
        let token = token.to_string();
        tokio::spawn(async move {
            let h = &me.hosts[n];
            let req = Request::Terminate { token: token.clone(), grace_ms: Some(grace.as_millis() as u64) };
            if let Err(e) = me.call::<()>(h, &req).await {
                tracing::warn!(host = %h.name(), token, "could not stop the attempt for its lend window: {e}");
                me.preempted.lock().unwrap().remove(&token);
            }
        });
    }
}
