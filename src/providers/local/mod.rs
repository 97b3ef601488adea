//! The `local` provider: runs workloads on this machine, the embedded
//! default.
//!
//! Each attempt gets a directory `<root>/<token>/` (see [`layout`]) and a
//! supervisor process (see [`shim`]) in its own session that starts the
//! workload's argv without a shell, waits for it, collects its outputs when
//! it exits 0 (see [`outputs`]) and records its end in `exit.json`.
//! Workloads survive the engine exiting; a new [`LocalProvider`] over the
//! same root re-adopts them, because the provider keeps no state that
//! matters outside those directories. A directory is adopted only when its
//! `spec.json` is the launch's spec.
//!
//! The workload does not survive its supervisor: killed with it, and what
//! is left of its group stopped when [`Provider::status`] finds the
//! supervisor gone, which reports a provider-side end
//! ([`ProviderEnd::ApiError`], class `provider`: the node is not blamed).
//!
//! Under a lease ([`LocalConfig::lease`], see [`lease`]), as when the ssh
//! provider runs this provider on an owner's host, each supervisor also
//! stops its workload once the lease runs out, and the end is reported as
//! [`ProviderEnd::NodeLost`] (class `node`: retried elsewhere).
//!
//! Outputs reach the engine without the engine opening anything the
//! workload wrote: it moves what the supervisor collected (regular files
//! only, links never followed, bounded by [`LocalConfig::outputs`]).
//!
//! This module owns the [`Provider`] implementation and its configuration.
//! It must not decide retries or classify failures, write secret values
//! anywhere but the workload's environment, or signal a process it has not
//! matched by pid and start time. Resource requests are not enforced: the
//! workload may use the whole machine.

pub mod cgroup;
pub mod container;
pub mod discover;
pub mod inventory;
pub mod launch;
pub mod layout;
pub mod lease;
pub mod outputs;
pub mod plan;
pub mod procfs;
pub mod shim;
pub mod smi;
pub mod smi_gpus;
pub mod smi_vendors;
pub mod state;

pub use shim::supervise_main;

use crate::engine::model::AttemptId;
use crate::failure::ProviderEnd;
use crate::providers::collect::OutputLimits;
use crate::providers::{
    AttemptStatus, Collection, Inventory, LaunchAck, LaunchError, LaunchRequest, LogChunk, LogStream, Owned,
    Provider, ProviderError,
};
use crate::spec::Spec;
use container::ContainerEngine;
use layout::{AttemptDir, valid_token};
use state::Observed;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

pub const PROVIDER_NAME: &str = "local";

/// How to start the supervisor: a program and its leading arguments, to
/// which the launcher appends `--attempt <dir> -- <argv...>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl ShimCommand {
    /// `<this executable> __supervise`: the `canopy` binary's hidden
    /// subcommand, which calls [`supervise_main`].
    pub fn current_exe() -> std::io::Result<Self> {
        Ok(Self { program: std::env::current_exe()?, args: vec!["__supervise".into()] })
    }
}

/// Whether workloads with `runtime.image` may run in containers here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContainerPolicy {
    /// Use podman, or docker when its engine answers (checked once).
    #[default]
    Detect,
    /// Detect, and run only images already on this host (`--pull=never`):
    /// for an air-gapped host, where a pull could only fail as `io`; an
    /// image that is not there then fails at once as class `image`.
    LocalImagesOnly,
    /// Never: image specs are rejected.
    Disabled,
}

#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The attempts directory; one subdirectory per attempt token.
    pub root: PathBuf,
    pub shim: ShimCommand,
    /// Between SIGTERM and SIGKILL on terminate, unless the spec says
    /// (`runtime.stop_grace`).
    pub grace: Duration,
    /// How long a launch waits for the supervisor to start the workload.
    pub launch_timeout: Duration,
    /// Copy `file://` inputs into the attempt instead of symlinking them.
    pub copy_inputs: bool,
    /// Variables the workload inherits from the launcher's environment;
    /// everything else is withheld.
    pub inherit_env: Vec<String>,
    pub containers: ContainerPolicy,
    /// Size and time limits on collecting an attempt's outputs
    /// (`[outputs]` in canopy.toml).
    pub outputs: OutputLimits,
    /// Nodes this machine is offered as (`[local] nodes` in canopy.toml):
    /// 1, or more to run multi-node gangs here (see [`inventory::split`]).
    pub nodes: u32,
    /// A lease file ([`lease`]) whoever speaks for Canopy on this host
    /// keeps renewing: every attempt's supervisor stops its workload once
    /// it runs out. `None`: workloads run until they end or are terminated.
    pub lease: Option<PathBuf>,
}

impl LocalConfig {
    pub fn new(root: impl Into<PathBuf>, shim: ShimCommand) -> Self {
        Self {
            root: root.into(),
            shim,
            grace: crate::spec::Runtime::DEFAULT_STOP_GRACE,
            launch_timeout: Duration::from_secs(10),
            copy_inputs: false,
            inherit_env: DEFAULT_INHERIT_ENV.iter().map(|s| s.to_string()).collect(),
            containers: ContainerPolicy::Detect,
            outputs: OutputLimits::default(),
            nodes: 1,
            lease: None,
        }
    }
}

/// The launcher's variables a workload sees by default: enough to find
/// programs, a home, a locale, the accelerators the operator allowed (each
/// vendor's visible-devices variable, [`crate::accel::devices`]), and a
/// container engine.
pub const DEFAULT_INHERIT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "HABANA_VISIBLE_MODULES",
    "ONEAPI_DEVICE_SELECTOR",
    "ASCEND_RT_VISIBLE_DEVICES",
    "MLU_VISIBLE_DEVICES",
    "XPU_VISIBLE_DEVICES",
    "MUSA_VISIBLE_DEVICES",
    "TOPS_VISIBLE_DEVICES",
    "XDG_RUNTIME_DIR",
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "CONTAINER_HOST",
];

pub struct LocalProvider {
    cfg: LocalConfig,
    engine: tokio::sync::OnceCell<Option<ContainerEngine>>,
    /// The accelerator the last inventory found on this host (its vendor
    /// and family): whose devices a container gets when the spec names no
    /// vendor (see [`plan::container_devices`]).
    found: std::sync::Mutex<Option<(crate::accel::Vendor, crate::accel::Family)>>,
}

impl LocalProvider {
    pub fn new(mut cfg: LocalConfig) -> Self {
        // Attempt directories are handed to the supervisor, whose working
        // directory differs: make the root absolute once.
        if let Ok(abs) = std::path::absolute(&cfg.root) {
            cfg.root = abs;
        }
        if let Some(abs) = cfg.lease.as_deref().and_then(|l| std::path::absolute(l).ok()) {
            cfg.lease = Some(abs);
        }
        Self { cfg, engine: tokio::sync::OnceCell::new(), found: std::sync::Mutex::new(None) }
    }

    pub fn config(&self) -> &LocalConfig {
        &self.cfg
    }

    /// The attempt directory of `token` (whether or not it exists).
    pub fn attempt_dir(&self, token: &str) -> PathBuf {
        self.cfg.root.join(token)
    }

    /// The usable container engine, detected once per provider.
    pub async fn container_engine(&self) -> Option<&ContainerEngine> {
        self.engine
            .get_or_init(|| async {
                match self.cfg.containers {
                    ContainerPolicy::Detect | ContainerPolicy::LocalImagesOnly => container::detect().await,
                    ContainerPolicy::Disabled => None,
                }
            })
            .await
            .as_ref()
    }

    fn dir(&self, token: &str) -> Result<AttemptDir, ProviderError> {
        if valid_token(token) {
            Ok(AttemptDir::at(&self.cfg.root, token))
        } else {
            Err(self.err(format!("{token:?} is not an attempt token")))
        }
    }

    /// Whether the attempt was claimed less than `launch_timeout` ago.
    fn launch_may_be_starting(&self, dir: &AttemptDir) -> bool {
        std::fs::metadata(dir.launch())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < self.cfg.launch_timeout)
    }

    fn err(&self, message: impl Into<String>) -> ProviderError {
        ProviderError { provider: PROVIDER_NAME.into(), message: message.into() }
    }
}

#[async_trait::async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        PROVIDER_NAME
    }

    async fn inventory(&self) -> Result<Inventory, ProviderError> {
        let containers = self.container_engine().await.map(ContainerEngine::tags).unwrap_or_default();
        let mut inv = inventory::inventory(&self.cfg.root, containers, self.cfg.nodes)
            .await
            .map_err(|m| self.err(m))?;
        if self.cfg.nodes > 1 {
            for n in inv.pools.iter_mut().flat_map(|p| p.nodes.iter_mut()) {
                n.switch = Some(inventory::LOOPBACK_SWITCH.into());
            }
        }
        let found =
            inv.pools.first().and_then(|p| p.def.shape.accelerator.as_ref()).map(|a| (a.vendor, a.family));
        // A poisoned lock only means a panic elsewhere; the value is a copy.
        *self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = found;
        Ok(inv)
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError> {
        if !valid_token(&req.token) {
            return Err(LaunchError::Rejected(format!(
                "token {:?} cannot name an attempt directory; use letters, digits, '-', '_' and '.'",
                req.token
            )));
        }
        let dir = AttemptDir::at(&self.cfg.root, &req.token);
        if dir.path().exists() {
            return launch::adopt(&self.cfg, &dir, &req.spec).await;
        }
        let engine = match req.spec.runtime.image {
            Some(_) => self.container_engine().await,
            None => None,
        };
        // Canopy's own memory cgroup for a container, where it can make one
        // (rootful, an engine on cgroupfs): the OOM kill is then known after
        // the container.
        let own_cgroup = engine.is_some_and(|e| e.cgroupfs) && {
            match cgroup::prepare(&req.token, plan::memory_bytes(&req.spec)) {
                Ok(()) => true,
                Err(e) => {
                    tracing::debug!(
                        "no canopy cgroup for {} ({e}); the engine's --memory applies",
                        req.token
                    );
                    false
                }
            }
        };
        let found = *self.found.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let plan = plan::plan(&self.cfg, req, &dir, engine, own_cgroup, found, |k| std::env::var(k).ok())
            .map_err(|m| {
                if own_cgroup {
                    cgroup::remove(&req.token);
                }
                LaunchError::Rejected(m)
            })?;
        launch::launch_planned(&self.cfg, &dir, &req.spec, plan, &req.secrets).await
    }

    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let dir = self.dir(token)?;
        let o = state::observe(&dir)
            .map_err(|e| self.err(format!("cannot read {}: {e}", dir.path().display())))?;
        Ok(match o {
            Observed::Missing => AttemptStatus::NotFound,
            Observed::Launching => AttemptStatus::Pending,
            Observed::Running(_) => AttemptStatus::Running,
            Observed::Ended(exit) => AttemptStatus::Ended(exit.to_end()),
            // No pid and no launcher: a supervisor its launcher started just
            // before dying may still be on its way up (slow on a busy host).
            // It gets the launcher's own allowance before the launch counts
            // as interrupted, or a retry could run beside it.
            Observed::Lost { pids: None, .. } if self.launch_may_be_starting(&dir) => AttemptStatus::Pending,
            // The launcher (an engine that died mid-launch) never started
            // the supervisor: nothing ran, and the machine is not to blame.
            // A launch failure, so a retry may come back to this node.
            Observed::Lost { message, pids: None } => {
                AttemptStatus::Ended(ProviderEnd::LaunchRejected { message, capacity: false })
            }
            // The supervisor died, not necessarily the machine: stop what is
            // left of the workload so a retry never runs beside it, and
            // report the provider's fault, which does not exclude the node.
            Observed::Lost { pids: Some(p), .. } => {
                state::stop_orphaned(&dir, &p).await;
                AttemptStatus::Ended(ProviderEnd::ApiError { message: state::SUPERVISOR_LOST.into() })
            }
        })
    }

    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<LogChunk, ProviderError> {
        let dir = self.dir(token)?;
        if !dir.path().is_dir() {
            return Err(self.err(format!("no attempt {token} under {}", self.cfg.root.display())));
        }
        let path = match stream {
            LogStream::Stdout => dir.stdout(),
            LogStream::Stderr => dir.stderr(),
        };
        read_chunk(&path, offset, max)
            .await
            .map_err(|e| self.err(format!("cannot read {}: {e}", path.display())))
    }

    async fn outputs(&self, token: &str, spec: &Spec, dest: &Path) -> Result<Collection, ProviderError> {
        let dir = self.dir(token)?;
        if !dir.path().is_dir() {
            return Err(self.err(format!("no attempt {token} under {}", self.cfg.root.display())));
        }
        let (spec, dest, limits) = (spec.clone(), dest.to_path_buf(), self.cfg.outputs);
        tokio::task::spawn_blocking(move || outputs::take(&dir, &spec, &dest, &limits))
            .await
            .map_err(|e| self.err(format!("the output collection task failed: {e}")))?
            .map_err(|m| self.err(m))
    }

    async fn terminate(&self, token: &str) -> Result<(), ProviderError> {
        let dir = self.dir(token)?;
        // The spec's own grace, as recorded beside the attempt.
        let grace = layout::read_json::<Spec>(&dir.spec())
            .ok()
            .flatten()
            .and_then(|s| s.runtime.stop_grace.map(|g| g.0))
            .unwrap_or(self.cfg.grace);
        state::terminate(&dir, grace, self.cfg.launch_timeout).await.map_err(|m| self.err(m))
    }

    async fn terminate_within(&self, token: &str, grace: Duration) -> Result<(), ProviderError> {
        let dir = self.dir(token)?;
        state::terminate(&dir, grace, self.cfg.launch_timeout).await.map_err(|m| self.err(m))
    }

    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError> {
        let entries = match std::fs::read_dir(&self.cfg.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.err(format!("cannot list {}: {e}", self.cfg.root.display()))),
        };
        let mut owned = Vec::new();
        for entry in entries.flatten() {
            let Some(token) = entry.file_name().to_str().map(str::to_owned) else { continue };
            if AttemptId::from_token(&token, store_id).is_none() || !valid_token(&token) {
                continue;
            }
            let dir = AttemptDir::at(&self.cfg.root, &token);
            // One unreadable attempt must not hide the others from reconciliation.
            let running = state::observe(&dir).map_or_else(
                |e| {
                    tracing::warn!(attempt = %dir.path().display(), "cannot read attempt state: {e}");
                    false
                },
                |o| o.holds_processes(),
            );
            owned.push(Owned { provider_ref: launch::provider_ref(&dir), running, token });
        }
        owned.sort_by(|a, b| a.token.cmp(&b.token));
        Ok(owned)
    }
}

async fn read_chunk(path: &Path, offset: u64, max: usize) -> std::io::Result<LogChunk> {
    // The workload may have replaced its log with a link or a FIFO.
    let p = path.to_path_buf();
    let opened =
        tokio::task::spawn_blocking(move || layout::open_regular(&p)).await.map_err(std::io::Error::other)?;
    let mut f = match opened.map(tokio::fs::File::from_std) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogChunk { data: Vec::new(), next_offset: offset });
        }
        Err(e) => return Err(e),
    };
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let mut data = Vec::with_capacity(max.min(1 << 20));
    f.take(max as u64).read_to_end(&mut data).await?;
    Ok(LogChunk { next_offset: offset + data.len() as u64, data })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::classify::classify;
    use crate::failure::FailureClass;

    #[test]
    fn workloads_inherit_every_vendors_visible_devices_variable() {
        for name in crate::accel::devices::visible_envs() {
            assert!(DEFAULT_INHERIT_ENV.contains(&name), "{name} is not passed on to workloads");
        }
    }

    #[tokio::test]
    async fn an_interrupted_launch_is_a_launch_failure_not_a_lost_node() {
        let tmp = tempfile::tempdir().unwrap();
        let shim = ShimCommand { program: "/nonexistent".into(), args: vec![] };
        let p = LocalProvider::new(LocalConfig::new(tmp.path(), shim));
        // What a launcher killed between claiming the directory and
        // starting the supervisor leaves: the directory, an unheld lock,
        // no pid.
        let token = "canopy-abc123-w1-a1";
        let dir = AttemptDir::at(tmp.path(), token);
        std::fs::create_dir_all(dir.path()).unwrap();
        std::fs::File::create(dir.lock()).unwrap();
        let AttemptStatus::Ended(end) = p.status(token).await.unwrap() else { panic!("not ended") };
        assert_eq!(
            end,
            ProviderEnd::LaunchRejected { message: state::LAUNCH_INTERRUPTED.into(), capacity: false }
        );
        let c = classify(&end, &[]);
        assert_eq!(c.class, FailureClass::Provider, "{c:?}");
    }

    #[test]
    fn a_lost_supervisor_is_the_providers_fault_not_the_nodes() {
        let end = ProviderEnd::ApiError { message: state::SUPERVISOR_LOST.into() };
        let c = classify(&end, &[]);
        assert_eq!((c.class, c.rule), (FailureClass::Provider, "provider.api-error"), "{c:?}");
    }
}
