//! Providers: one trait for every lifecycle (process, VM, container, job).
//!
//! This module owns the contract between the engine shell and the systems
//! that run work: capacity inventory, idempotent launch keyed by the
//! attempt's token, status, incremental logs, outputs, terminate, and
//! listing what Canopy owns there for reconciliation. Adapters live in
//! submodules. Adapters do I/O; they never touch the journal, never decide
//! retries, and never log secret values.

pub mod collect;
pub mod gang;
pub mod jobs_dir;
pub mod local;
pub mod ray;
pub mod secrets;
pub mod sim;
pub mod slurm;
pub mod ssh;
pub mod window;

use crate::engine::model::AttemptId;
use crate::failure::ProviderEnd;
use crate::fleet::{Free, NodeState, PoolDef};
use crate::spec::Spec;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// A secret's value, resolved at launch. Its `Debug` and `Display` never
/// show the value, so it cannot leak through a log line or an error.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue(String);

impl SecretValue {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The value itself, for handing to the workload's environment only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretValue(<redacted>)")
    }
}

impl fmt::Display for SecretValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Everything a provider needs to start one attempt.
#[derive(Debug, Clone)]
pub struct LaunchRequest {
    pub attempt: AttemptId,
    /// Idempotency token: a provider that already has an attempt with this
    /// token adopts it instead of launching again.
    pub token: String,
    pub spec: Arc<Spec>,
    /// Pool name within the provider.
    pub pool: String,
    pub node: String,
    /// Secret values by name, resolved from the operator's environment.
    pub secrets: Vec<(String, SecretValue)>,
    /// Where this attempt's outputs are collected (Canopy's artifact store).
    pub artifact_dir: PathBuf,
    /// Every node in rank order, `node` first: one launcher per node (see
    /// [`gang`]). `[node]` for ordinary work.
    pub nodes: Vec<String>,
    /// The workload's checkpoint directory in Canopy's store, when its spec
    /// declares `[checkpoint]`: holds only complete checkpoints at launch
    /// (see [`crate::engine::checkpoint`]). Providers on the same file
    /// system use it in place as `$CANOPY_CHECKPOINT_DIR`; the others
    /// ([`Provider::copies_checkpoints`]) copy its newest complete
    /// checkpoint to where the attempt runs, within the spec's cap.
    pub checkpoint_dir: Option<PathBuf>,
}

impl LaunchRequest {
    /// Whether this launch starts a gang (more than one node).
    pub fn is_gang(&self) -> bool {
        self.nodes.len() > 1
    }
}

/// A provider's answer to a launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchAck {
    /// The provider's own handle: pid, job id, instance id.
    pub provider_ref: String,
    /// True when the token was already known and the existing attempt was
    /// adopted instead of a new one started.
    pub adopted: bool,
}

/// Why a launch did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LaunchError {
    #[error("no capacity: {0}")]
    Capacity(String),
    #[error("provider API error: {0}")]
    Api(String),
    #[error("the provider did not answer the launch in time")]
    Timeout,
    #[error("launch rejected: {0}")]
    Rejected(String),
    /// The request can never run as written, wherever it is placed (a
    /// secret missing from the engine's environment, say): the spec's or
    /// the operator's to fix, not worth another attempt.
    #[error("invalid request: {0}")]
    Invalid(String),
}

/// A provider that cannot run `runtime.image` refuses the launch, with
/// `why`, rather than run the command bare outside the image. A refusal
/// (class `provider`), so placement may try a provider that can.
pub fn refuse_image(spec: &crate::spec::Spec, provider: &str, why: &str) -> Result<(), LaunchError> {
    match &spec.runtime.image {
        Some(image) => Err(LaunchError::Rejected(format!(
            "{provider} does not run container images ({why}); the spec asks for {image:?}: run it on the \
             local provider (podman), or remove runtime.image to run the command as a process"
        ))),
        None => Ok(()),
    }
}

/// How [`LaunchError::Invalid`] reads in a [`ProviderEnd::LaunchRejected`]
/// message; the classifier's `provider.launch-invalid` rule keys on it.
pub const INVALID_REQUEST_PREFIX: &str = "invalid request: ";

impl LaunchError {
    pub fn to_end(&self) -> ProviderEnd {
        match self {
            LaunchError::Capacity(m) => ProviderEnd::LaunchRejected { message: m.clone(), capacity: true },
            LaunchError::Api(m) => ProviderEnd::ApiError { message: m.clone() },
            LaunchError::Timeout => ProviderEnd::LaunchTimeout,
            LaunchError::Rejected(m) => ProviderEnd::LaunchRejected { message: m.clone(), capacity: false },
            LaunchError::Invalid(m) => ProviderEnd::LaunchRejected {
                message: format!("{INVALID_REQUEST_PREFIX}{m}"),
                capacity: false,
            },
        }
    }
}

/// A provider call that failed (status, logs, terminate…). Transient unless
/// said otherwise: one failed poll is not a failed workload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{provider}: {message}")]
pub struct ProviderError {
    pub provider: String,
    pub message: String,
}

/// Where an attempt stands at its provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptStatus {
    /// Accepted, not running yet (queued, provisioning, booting).
    Pending,
    Running,
    /// Running, and the provider has given notice that it reclaims the
    /// capacity within `within_s` seconds (a spot interruption notice).
    /// Canopy stops the attempt itself, SIGTERM first, so the workload can
    /// checkpoint before the capacity goes.
    Reclaiming {
        within_s: u64,
        message: String,
    },
    /// Ended, with how.
    Ended(ProviderEnd),
    /// The provider has no such attempt.
    NotFound,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// A slice of a log from an offset: read more from `next_offset`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogChunk {
    pub data: Vec<u8>,
    pub next_offset: u64,
}

/// An output collected into Canopy's artifact store.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Artifact {
    /// The spec's output name.
    pub name: String,
    /// Path in the artifact store.
    pub path: PathBuf,
    pub bytes: u64,
    /// Hex SHA-256 of the content (of each file, for directories: of the
    /// sorted list of `path sha256` lines).
    pub sha256: String,
}

/// An output, or a file inside a directory output, that was not collected,
/// and why (a link, a FIFO, over a size limit, past the deadline…).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// The spec's output name.
    pub name: String,
    /// The path as the workload wrote it: the spec's output path, followed
    /// by the path inside it for an entry of a directory output.
    pub path: String,
    pub reason: String,
}

/// What collecting an attempt's outputs produced: the artifacts now in
/// Canopy's store, and what was left behind with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Collection {
    pub artifacts: Vec<Artifact>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
}

/// What [`Provider::sync_checkpoint`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointCopy {
    /// Canopy's store already holds the attempt's newest complete
    /// checkpoint, or the attempt has written none (yet).
    UpToDate,
    /// The attempt's newest complete checkpoint is now in Canopy's store,
    /// as this one (its time: when it was complete there).
    Copied(crate::engine::checkpoint::Found),
    /// The attempt's newest complete checkpoint is over the spec's cap: it
    /// stays where it was written, and a later attempt cannot resume from it.
    OverCap(crate::engine::checkpoint::Found),
}

/// Something the provider runs that carries a Canopy token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    pub token: String,
    pub provider_ref: String,
    pub running: bool,
}

/// Capacity as the provider reports it now.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub pools: Vec<InventoryPool>,
}

impl Inventory {
    /// The pools as fleet definitions. Nothing is Canopy's yet: the engine
    /// adds its own live allocations on top of what others use.
    pub fn into_pool_defs(self) -> Vec<(PoolDef, Vec<crate::fleet::NodeDef>)> {
        self.pools
            .into_iter()
            .map(|p| {
                let nodes = p
                    .nodes
                    .into_iter()
                    .map(|n| crate::fleet::NodeDef {
                        name: n.name,
                        state: n.state,
                        used: n.used_by_others,
                        canopy_gpus: 0,
                        switch: n.switch,
                    })
                    .collect();
                (p.def, nodes)
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryPool {
    pub def: PoolDef,
    pub nodes: Vec<InventoryNode>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InventoryNode {
    pub name: String,
    pub state: NodeState,
    /// Resources used by anything that is not a Canopy attempt; Canopy adds
    /// its own allocations on top.
    pub used_by_others: Free,
    /// The leaf switch (or rack) it hangs off, where the provider knows
    /// or the operator declared it: the domain of a `same-switch` gang.
    pub switch: Option<String>,
}

/// One source of compute. Every call may be slow or fail; the shell calls
/// them from spawned tasks and feeds results back to the core as events.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    fn name(&self) -> &str;
    async fn inventory(&self) -> Result<Inventory, ProviderError>;
    /// Starts the attempt, or adopts it when `req.token` is already known.
    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError>;
    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError>;
    /// Log bytes from `offset`, at most `max` bytes.
    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<LogChunk, ProviderError>;
    /// Copies the attempt's outputs into `dest` and describes them, with
    /// what was skipped and why (see [`collect`] for what is never
    /// collected). An error when a required output could not be collected.
    async fn outputs(
        &self,
        token: &str,
        spec: &Spec,
        dest: &std::path::Path,
    ) -> Result<Collection, ProviderError>;
    /// Stops the attempt. Succeeds when it is already gone.
    async fn terminate(&self, token: &str) -> Result<(), ProviderError>;
    /// Stops the attempt giving its processes `grace` between SIGTERM and
    /// SIGKILL, where the provider controls that (an evicting drain's
    /// `--grace`); others stop it as [`Provider::terminate`] does.
    async fn terminate_within(&self, token: &str, grace: std::time::Duration) -> Result<(), ProviderError> {
        let _ = grace;
        self.terminate(token).await
    }
    /// Everything this provider runs with a token of this store.
    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError>;
    /// Whether checkpoints travel by copy through Canopy's store (the
    /// provider shares no file system with it): the newest complete one
    /// to the attempt at launch, and back with
    /// [`Provider::sync_checkpoint`]. Most hand the store's directory in
    /// place.
    fn copies_checkpoints(&self) -> bool {
        false
    }
    /// For a provider that [`copies_checkpoints`](Provider::copies_checkpoints):
    /// copies the newest complete checkpoint the attempt has written where
    /// it runs into `dir` (the workload's checkpoint directory in Canopy's
    /// store) when `dir` does not hold it yet and it has at most
    /// `max_bytes`, its `COMPLETE` written last so a copy cut off is never
    /// complete; older ones in `dir` are removed. Called while the attempt
    /// runs and once after it ended, never twice at once for a workload.
    async fn sync_checkpoint(
        &self,
        token: &str,
        dir: &std::path::Path,
        max_bytes: u64,
    ) -> Result<CheckpointCopy, ProviderError> {
        let _ = (token, dir, max_bytes);
        Ok(CheckpointCopy::UpToDate)
    }
    /// The engine has shipped the ended attempt's logs and taken its
    /// outputs: the provider may remove what the attempt left where it
    /// ran (an owner's host keeps nothing of it). Most keep it for
    /// operators to look at and do nothing here.
    async fn release(&self, token: &str) -> Result<(), ProviderError> {
        let _ = token;
        Ok(())
    }
}

/// What a declared topology that names unknown nodes or pools
/// ([`crate::config::TopologyEntry::mismatch`]) means: an error on the
/// provider's first inventory (a typo to fix before anything runs), a
/// warning afterwards (a node that left the cluster). `checked` records
/// that a first inventory has passed.
pub(crate) fn topology_verdict(
    checked: &std::sync::atomic::AtomicBool,
    provider: &str,
    mismatch: Option<String>,
) -> Result<(), ProviderError> {
    use std::sync::atomic::Ordering;
    let first = !checked.swap(true, Ordering::SeqCst);
    let Some(message) = mismatch else { return Ok(()) };
    if first {
        checked.store(false, Ordering::SeqCst);
        return Err(ProviderError { provider: provider.to_string(), message });
    }
    tracing::warn!(provider, "{message}");
    Ok(())
}

/// A failed HTTP call in a few words — what went wrong and the innermost
/// cause — without the URL, so messages stay short and free of query
/// strings. Shared by the HTTP adapters (Slurm, Ray).
pub(crate) fn http_error_text(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = src {
        detail = s.to_string();
        src = s.source();
    }
    if detail.is_empty() { kind.to_string() } else { format!("{kind}: {detail}") }
}
