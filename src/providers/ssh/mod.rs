//! The `ssh` provider: machines that owners lend, reached over SSH.
//!
//! Each configured host becomes a node (pools group them, with the owner's
//! lend limits and lend windows). On a host, an attempt is a local-provider
//! attempt run by the uploaded Canopy binary as the owner's unprivileged
//! user ([`remote`], `canopy __host`), so it survives a dropped connection
//! and is re-adopted by token. This side ([`SshProvider`]) routes each call
//! to the attempt's host over [`transport`], assigns GPUs per attempt
//! (`CUDA_VISIBLE_DEVICES` from the host's GPUs that Canopy's live attempts
//! do not hold), fetches outputs the host's supervisor collected, and
//! removes what an attempt left once the engine has its logs and outputs
//! ([`Provider::release`]). Checkpoints are copied through Canopy's
//! store ([`checkpoints`]): to the host before a launch, back while the
//! attempt runs and when it ends ([`Provider::sync_checkpoint`]).
//!
//! The lease: every host's supervisors stop their workloads when Canopy has
//! not renewed the store's lease there for `lease` (the host's own clock
//! decides). A background task renews every host's lease each `lease / 3`.
//! While a host cannot be reached, [`Provider::status`] fails (a blip the
//! engine tolerates) until the lease, the attempt's stop grace and
//! [`SSH_LEASE_MARGIN`] have passed since the last renewal; only then is
//! the attempt reported [`ProviderEnd::NodeLost`], so the engine places it
//! again only once it has stopped on the lost host: never twice.
//!
//! Lend windows: outside its pool's window a host is `Cordoned`; before a
//! window closes (its stop grace plus [`WINDOW_MARGIN`] ahead), running
//! attempts there are stopped with their grace and reported
//! [`ProviderEnd::Preempted`]: the owner takes the capacity back.
//!
//! This module must not decide retries or classify failures, and secret
//! values leave it only inside a launch request's stdin.

pub mod checkpoints;
mod config;
mod container;
mod fetch;
mod hosts;
pub mod protocol;
pub mod remote;
pub mod transport;

use crate::config::SshEntry;
use crate::engine::checkpoint;
use crate::failure::ProviderEnd;
use crate::fleet::{Free, Lifecycle, PoolDef, Shape};
use crate::providers::collect::{self, OutputLimits, Wanted};
use crate::providers::window::LendWindows;
use crate::providers::{
    AttemptStatus, CheckpointCopy, Collection, Inventory, InventoryNode, InventoryPool, LaunchAck,
    LaunchError, LaunchRequest, LogChunk, LogStream, Owned, Provider, ProviderError,
};
use crate::spec::Spec;
use protocol::{Listed, Probe, Request, Status};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use transport::{Target, Transport, TransportError};

pub use config::{HostConfig, PoolConfig, SshConfig};
use fetch::receive;
pub use hosts::WINDOW_MARGIN;
use hosts::{HostState, Inner, renew_forever, with_retries};

pub const KIND: &str = "ssh";

/// "Now", injectable so tests can move a lend window's end close.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

pub struct SshProvider {
    inner: Arc<Inner>,
    renewer: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for SshProvider {
    fn drop(&mut self) {
        if let Some(h) = self.renewer.take() {
            h.abort();
        }
    }
}

impl SshProvider {
    /// A provider that only answers calls (inventory for `canopy fleet`):
    /// it renews no lease.
    pub fn new(cfg: SshConfig) -> Self {
        let binaries = Arc::new(transport::Binaries::new(cfg.binaries.clone()));
        let hosts = cfg
            .hosts
            .iter()
            .map(|h| {
                Arc::new(HostState {
                    transport: Transport::new(
                        h.target.clone(),
                        cfg.store.clone(),
                        binaries.clone(),
                        cfg.control_dir.clone(),
                        cfg.connection_idle,
                    ),
                    cfg: h.clone(),
                    probe: Mutex::new(None),
                    unreachable: Mutex::new(None),
                    renewed: Mutex::new(None),
                    gpus: Mutex::new(BTreeMap::new()),
                })
            })
            .collect();
        let inner = Arc::new(Inner {
            cfg,
            hosts,
            started: Instant::now(),
            tokens: Mutex::new(HashMap::new()),
            graces: Mutex::new(HashMap::new()),
            preempted: Mutex::new(BTreeSet::new()),
            cleanups: Mutex::new(BTreeSet::new()),
        });
        Self { inner, renewer: None }
    }

    /// A provider for a running engine: renews every host's lease in the
    /// background, from now until it is dropped. Needs a Tokio runtime.
    pub fn start(cfg: SshConfig) -> Self {
        let mut p = Self::new(cfg);
        let weak = Arc::downgrade(&p.inner);
        p.renewer = Some(tokio::spawn(renew_forever(weak)));
        p
    }

    /// Connects to `node`'s host and checks its key, the way every call
    /// does: the error says why it cannot be reached.
    pub async fn check_host(&self, node: &str) -> Result<(), String> {
        let h = self.inner.host_named(node).ok_or_else(|| format!("no ssh host named {node:?}"))?;
        h.transport.connect().await.map_err(|e| e.to_string())?;
        h.transport.call::<Probe>(&Request::Probe).await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// A pool's shape from its hosts' probes: what every answering host has
/// at least (the scheduler places by pool shape).
fn pool_shape(probes: &[Shape]) -> Shape {
    let Some(first) = probes.first() else {
        return Shape {
            accelerator: None,
            gpus_per_node: 0,
            interconnect: crate::accel::Interconnect::Pcie,
            cpu_cores: 0.0,
            memory_gb: 0.0,
            disk_gb: 0.0,
            fabric: None,
        };
    };
    let mut s = first.clone();
    for p in &probes[1..] {
        s.cpu_cores = s.cpu_cores.min(p.cpu_cores);
        s.memory_gb = s.memory_gb.min(p.memory_gb);
        s.disk_gb = s.disk_gb.min(p.disk_gb);
        if p.accelerator != s.accelerator {
            tracing::warn!("hosts of one ssh pool have different GPUs; the pool offers only what all have");
            s.accelerator = None;
            s.gpus_per_node = 0;
        } else {
            s.gpus_per_node = s.gpus_per_node.min(p.gpus_per_node);
        }
    }
    s
}

fn end_of(end: ProviderEnd) -> AttemptStatus {
    AttemptStatus::Ended(end)
}

#[async_trait::async_trait]
impl Provider for SshProvider {
    fn name(&self) -> &str {
        &self.inner.cfg.name
    }

    async fn inventory(&self) -> Result<Inventory, ProviderError> {
        let i = &self.inner;
        let probes = i.hosts.iter().map(|h| async move {
            match tokio::time::timeout(Duration::from_secs(20), i.call::<Probe>(h, &Request::Probe)).await {
                Ok(Ok(p)) => *h.probe.lock().unwrap() = Some(p),
                Ok(Err(_)) => {}
                Err(_) => i.saw(
                    h,
                    Err(&TransportError::Unreachable {
                        host: h.name().into(),
                        at: h.cfg.target.shown(),
                        message: "the probe timed out".into(),
                    }),
                ),
            }
        });
        futures::future::join_all(probes).await;
        let mut pools = Vec::new();
        for (name, p) in &i.cfg.pools {
            let hosts: Vec<&Arc<HostState>> = i.hosts.iter().filter(|h| &h.cfg.pool == name).collect();
            let probes: Vec<Probe> = hosts.iter().filter_map(|h| h.probe.lock().unwrap().clone()).collect();
            let shapes: Vec<Shape> = probes.iter().map(|p| p.shape.clone()).collect();
            // The configured tags, less any container tag: whether the
            // pool runs images is its hosts' probes' word alone.
            let mut capabilities: Vec<String> = p
                .capabilities
                .iter()
                .filter(|c| {
                    *c != crate::fleet::CONTAINER_TAG && *c != crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG
                })
                .cloned()
                .collect();
            capabilities.extend(container::pool_tags(&probes));
            let def = PoolDef {
                name: name.clone(),
                region: p.region.clone(),
                shape: pool_shape(&shapes),
                price_per_hour: p.price_per_hour,
                startup: Duration::from_secs(2),
                capabilities,
                compliance: Vec::new(),
                reserved: true,
                interruptible: !p.windows.is_always(),
                lifecycle: Lifecycle::Process,
                lend_limit_gpus: p.lend_limit_gpus,
            };
            let nodes = hosts
                .iter()
                .map(|h| InventoryNode {
                    name: h.name().to_string(),
                    state: i.node_state(h),
                    used_by_others: Free::default(),
                    switch: None,
                })
                .collect();
            pools.push(InventoryPool { def, nodes });
        }
        Ok(Inventory { pools })
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError> {
        let i = &self.inner;
        if req.is_gang() {
            return Err(LaunchError::Rejected(
                "multi-node gangs cannot run on ssh hosts yet; run them on Slurm, Ray or the local provider"
                    .into(),
            ));
        }
        let Some(n) = i.hosts.iter().position(|h| h.name() == req.node) else {
            return Err(LaunchError::Rejected(format!("no ssh host named {:?} in {}", req.node, i.cfg.name)));
        };
        let h = &i.hosts[n];
        if let Some(image) = &req.spec.runtime.image
            && let Some(why) = container::refuse_image(h.name(), image, h.probe.lock().unwrap().as_ref())
        {
            return Err(LaunchError::Rejected(why));
        }
        let grace = req.spec.runtime.stop_grace.map_or(i.cfg.grace, |g| g.0);
        if i.window_closing(h, grace + WINDOW_MARGIN) {
            return Err(LaunchError::Capacity(format!(
                "host {} is outside its owner's lend window ({})",
                h.name(),
                i.pool(h).windows.describe()
            )));
        }
        let gpus = i.pick_gpus(h, &req.token, req.spec.resources.gpus)?;
        let accelerator = h.probe.lock().unwrap().as_ref().and_then(|p| p.shape.accelerator.clone());
        if let Err(e) = i.hand_checkpoint(n, req).await {
            i.forget(n, &req.token);
            return Err(e);
        }
        let launch = protocol::Launch {
            attempt: req.attempt,
            token: req.token.clone(),
            spec: (*req.spec).clone(),
            pool: req.pool.clone(),
            node: req.node.clone(),
            nodes: req.nodes.clone(),
            gpus: gpus.clone(),
            vendor: accelerator.as_ref().map(|a| a.vendor),
            family: accelerator.map(|a| a.family),
            lease_ms: i.cfg.lease.as_millis() as u64,
            checkpoint: req.checkpoint_dir.is_some(),
            secrets: req.secrets.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect(),
        };
        let r = i.call::<protocol::LaunchOutcome>(h, &Request::Launch(Box::new(launch))).await;
        // A launch that may or may not have reached the host is retried
        // with the same token, which adopts.
        let ack =
            r.map_or_else(|e| Err(LaunchError::Api(e.to_string())), protocol::LaunchOutcome::into_result);
        match &ack {
            Ok(_) => {
                i.tokens.lock().unwrap().insert(req.token.clone(), n);
                i.graces.lock().unwrap().insert(req.token.clone(), grace);
            }
            Err(_) => i.forget(n, &req.token),
        }
        ack
    }

    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let i = &self.inner;
        let Some(n) = i.host_of(token).await? else { return Ok(AttemptStatus::NotFound) };
        let h = &i.hosts[n];
        match i.call::<Status>(h, &Request::Status { token: token.to_string() }).await {
            Ok(Status::Ended { end }) => {
                i.forget(n, token);
                let preempted = i.preempted.lock().unwrap().contains(token);
                Ok(end_of(if preempted { ProviderEnd::Preempted } else { end }))
            }
            Ok(Status::NotFound) => Ok(AttemptStatus::NotFound),
            Ok(s) => {
                if i.window_closing(h, i.grace_of(token) + WINDOW_MARGIN) {
                    self.inner.preempt(n, token);
                }
                Ok(if s == Status::Pending { AttemptStatus::Pending } else { AttemptStatus::Running })
            }
            Err(e) if e.is_unreachable() && Instant::now() >= i.lost_after(n, token) => {
                i.forget(n, token);
                i.cleanups.lock().unwrap().insert((n, token.to_string()));
                Ok(end_of(ProviderEnd::NodeLost {
                    message: format!(
                        "lost contact with ssh host {} for longer than its lease ({}); its supervisor has \
                         stopped the workload there ({e})",
                        h.name(),
                        crate::units::HumanDuration(i.cfg.lease)
                    ),
                }))
            }
            Err(e) => Err(i.err(e.to_string())),
        }
    }

    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<LogChunk, ProviderError> {
        let i = &self.inner;
        let Some(n) = i.host_of(token).await? else {
            return Err(i.err(format!("no attempt {token} on any ssh host")));
        };
        let req = Request::Logs { token: token.to_string(), stream: stream.into(), offset, max };
        let data = i.call_raw(&i.hosts[n], &req).await.map_err(|e| i.err(e.to_string()))?;
        Ok(LogChunk { next_offset: offset + data.len() as u64, data })
    }

    async fn outputs(&self, token: &str, spec: &Spec, dest: &Path) -> Result<Collection, ProviderError> {
        let i = &self.inner;
        let Some(n) = i.host_of(token).await? else {
            return Err(i.err(format!("no attempt {token} on any ssh host")));
        };
        let h = &i.hosts[n];
        // Both steps may be asked again when the connection drops: staging
        // answers the same the second time, and fetching only reads. A
        // dropped link costs a retry here, not a rerun of the workload.
        let outputs = Request::Outputs { token: token.to_string(), spec: Box::new(spec.clone()) };
        let staged: Collection =
            with_retries(|| i.call::<Collection>(h, &outputs)).await.map_err(|e| i.err(e.to_string()))?;
        if staged.artifacts.is_empty() {
            return Ok(staged);
        }
        let fetch = Request::Fetch { token: token.to_string() };
        let tar = with_retries(|| i.call_raw(h, &fetch)).await.map_err(|e| i.err(e.to_string()))?;
        let (dest, limits) = (dest.to_path_buf(), i.cfg.outputs);
        let host = h.name().to_string();
        tokio::task::spawn_blocking(move || receive(&host, &tar, staged, &dest, &limits))
            .await
            .map_err(|e| i.err(format!("the output task failed: {e}")))?
            .map_err(|m| i.err(m))
    }

    async fn terminate(&self, token: &str) -> Result<(), ProviderError> {
        self.stop(token, None).await
    }

    fn copies_checkpoints(&self) -> bool {
        true
    }

    async fn sync_checkpoint(
        &self,
        token: &str,
        dir: &Path,
        max_bytes: u64,
    ) -> Result<CheckpointCopy, ProviderError> {
        let i = &self.inner;
        let Some(n) = i.host_of(token).await? else { return Ok(CheckpointCopy::UpToDate) };
        let h = &i.hosts[n];
        let ask = Request::NewestCheckpoint { token: token.to_string() };
        let newest =
            i.call::<Option<protocol::HostCheckpoint>>(h, &ask).await.map_err(|e| i.err(e.to_string()))?;
        let Some(hc) = newest.filter(|c| !c.handed) else { return Ok(CheckpointCopy::UpToDate) };
        if hc.bytes > max_bytes {
            let found = checkpoint::Found { name: hc.name, at_ms: hc.at_ms, bytes: hc.bytes };
            return Ok(CheckpointCopy::OverCap(found));
        }
        let held = {
            let (dir, token, name) = (dir.to_path_buf(), token.to_string(), hc.name.clone());
            tokio::task::spawn_blocking(move || checkpoints::holds(&dir, &token, &name, hc.at_ms))
                .await
                .unwrap_or(false)
        };
        if held {
            return Ok(CheckpointCopy::UpToDate);
        }
        let marker = checkpoints::Marker {
            token: token.to_string(),
            host: h.name().to_string(),
            host_at_ms: hc.at_ms,
        };
        let fetch = Request::FetchCheckpoint {
            token: token.to_string(),
            name: hc.name.clone(),
            at_ms: hc.at_ms,
            max_bytes,
        };
        let (dir, name) = (dir.to_path_buf(), hc.name.clone());
        let r = h
            .transport
            .call_streamed(&fetch, move |tar| checkpoints::receive(&dir, &name, tar, max_bytes, &marker))
            .await;
        i.saw(h, r.as_ref().map(|_| ()));
        let found = r.map_err(|e| i.err(format!("could not copy checkpoint {} from it: {e}", hc.name)))?;
        tracing::info!(
            provider = %i.cfg.name, host = %h.name(), token,
            "copied checkpoint {} ({} bytes) into Canopy's store", found.name, found.bytes
        );
        Ok(CheckpointCopy::Copied(found))
    }

    async fn terminate_within(&self, token: &str, grace: Duration) -> Result<(), ProviderError> {
        self.stop(token, Some(grace)).await
    }

    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError> {
        let i = &self.inner;
        if store_id != i.cfg.store {
            return Ok(Vec::new());
        }
        let asks = i.hosts.iter().map(|h| i.call::<Vec<Listed>>(h, &Request::List));
        let answers = futures::future::join_all(asks).await;
        let mut owned = Vec::new();
        let mut failed = Vec::new();
        for (n, a) in answers.into_iter().enumerate() {
            match a {
                Ok(list) => {
                    for l in list {
                        i.tokens.lock().unwrap().insert(l.token.clone(), n);
                        if l.running && !l.gpus.is_empty() {
                            i.hosts[n].gpus.lock().unwrap().insert(l.token.clone(), l.gpus.clone());
                        }
                        owned.push(Owned::from(l));
                    }
                }
                Err(e) => failed.push(e.to_string()),
            }
        }
        if owned.is_empty() && failed.len() == i.hosts.len() {
            return Err(i.err(failed.join("; ")));
        }
        owned.sort_by(|a, b| a.token.cmp(&b.token));
        Ok(owned)
    }

    async fn release(&self, token: &str) -> Result<(), ProviderError> {
        let i = &self.inner;
        let Some(n) = i.tokens.lock().unwrap().get(token).copied() else { return Ok(()) };
        i.forget(n, token);
        let r = i.call::<()>(&i.hosts[n], &Request::Cleanup { token: token.to_string() }).await;
        i.tokens.lock().unwrap().remove(token);
        i.graces.lock().unwrap().remove(token);
        i.preempted.lock().unwrap().remove(token);
        if let Err(e) = r {
            // Tried again each time the lease is renewed there.
            i.cleanups.lock().unwrap().insert((n, token.to_string()));
            return Err(i.err(format!("could not remove {token} from host {}: {e}", i.hosts[n].name())));
        }
        Ok(())
    }
}

impl SshProvider {
    async fn stop(&self, token: &str, grace: Option<Duration>) -> Result<(), ProviderError> {
        let i = &self.inner;
        let Some(n) = i.host_of(token).await? else { return Ok(()) };
        let req =
            Request::Terminate { token: token.to_string(), grace_ms: grace.map(|g| g.as_millis() as u64) };
        i.call::<()>(&i.hosts[n], &req).await.map_err(|e| i.err(e.to_string()))
    }
}

#[cfg(test)]
mod tests;
