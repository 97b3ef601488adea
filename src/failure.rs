//! Failure classes: what a failed attempt *was*. The class decides retry
//! (see the engine's retry policy) and whether the outcome counts against
//! the node it ran on (see the health tracker).
//!
//! The classifier that assigns a class from provider state, exit status and
//! log tail lives in `engine::classify`; this module only names the classes.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// What a failed attempt was. Decides retry.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// The provider had no capacity (or quota) for the request.
    Capacity,
    /// The provider itself failed: API errors and timeouts, rejected or
    /// unexplained ends.
    Provider,
    /// The machine failed: GPU hardware, driver, lost node, failed boot.
    Node,
    /// The workload needed more GPU memory than the GPU has.
    GpuOom,
    /// The workload needed more host memory than it was given.
    CpuOom,
    /// Collective communication or the distributed runtime failed.
    Comm,
    /// Storage or network I/O the workload depends on failed.
    Io,
    /// The workload ran past a provider-enforced or Canopy-enforced limit.
    Timeout,
    /// Canopy stopped the attempt at the workload's cost cap.
    CostCap,
    /// The provider reclaimed the capacity (spot, preemption).
    Preempted,
    /// The workload failed on its own: code, config, inputs, environment.
    App,
    /// Someone cancelled the attempt.
    Cancelled,
    /// Borrowed capacity went back to its owner (tenants): Canopy stopped
    /// the attempt so the owning tenant's work could run there. The
    /// infrastructure's doing, never the node's fault; the workload is
    /// placed again without spending an attempt.
    Reclaimed,
    /// The request cannot run as configured, wherever it is placed (a
    /// secret missing from the engine's environment). The spec's or the
    /// operator's to fix; never retried, whatever `retry.app_errors` says.
    Config,
    /// The container image does not exist or may not be pulled (a missing
    /// tag, a denied repository). The workload's to fix: final, never
    /// retried elsewhere, never counted against the node. A registry that
    /// cannot be reached is `io`.
    Image,
}

impl FailureClass {
    /// Every class, in the order of the `as_str` list.
    pub const ALL: [FailureClass; 15] = [
        FailureClass::Capacity,
        FailureClass::Provider,
        FailureClass::Node,
        FailureClass::GpuOom,
        FailureClass::CpuOom,
        FailureClass::Comm,
        FailureClass::Io,
        FailureClass::Timeout,
        FailureClass::CostCap,
        FailureClass::Preempted,
        FailureClass::App,
        FailureClass::Cancelled,
        FailureClass::Config,
        FailureClass::Reclaimed,
        FailureClass::Image,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Capacity => "capacity",
            FailureClass::Provider => "provider",
            FailureClass::Node => "node",
            FailureClass::GpuOom => "gpu-oom",
            FailureClass::CpuOom => "cpu-oom",
            FailureClass::Comm => "comm",
            FailureClass::Io => "io",
            FailureClass::Timeout => "timeout",
            FailureClass::CostCap => "cost-cap",
            FailureClass::Preempted => "preempted",
            FailureClass::App => "app",
            FailureClass::Cancelled => "cancelled",
            FailureClass::Config => "config",
            FailureClass::Reclaimed => "reclaimed",
            FailureClass::Image => "image",
        }
    }

    /// Whether the failure lies outside the workload: in the provider, the
    /// machine, the network or the storage it runs against. These are the
    /// failures a retry elsewhere can fix without changing the workload.
    ///
    /// Infrastructure: `capacity`, `provider`, `node`, `comm`, `io`,
    /// `preempted`, `reclaimed`.
    ///
    /// Not infrastructure: `gpu-oom` and `cpu-oom` (the workload's size
    /// against the memory it was given: the same retry fails the same way;
    /// Philly and Acme count OOMs as framework/user failures), `timeout`
    /// (the workload's own time limit), `cost-cap` and `cancelled` (policy
    /// and decisions, not faults), and `app`.
    pub fn is_infrastructure(self) -> bool {
        matches!(
            self,
            FailureClass::Capacity
                | FailureClass::Provider
                | FailureClass::Node
                | FailureClass::Comm
                | FailureClass::Io
                | FailureClass::Preempted
                | FailureClass::Reclaimed
        )
    }

    /// Whether the attempt was stopped for someone else's reasons, neither
    /// the workload's fault nor the machine's: the provider took the
    /// capacity back (`preempted`, which includes Canopy's stop on a
    /// provider's notice and an evicting drain, rule `canopy.evicted`), or
    /// an owner took it back from borrowed work (`reclaimed`).
    /// Such a stop after which the workload resumed with progress is not
    /// charged to its retry budget ([`crate::engine::retry::stop_is_free`]
    /// says when); this is the one list of the classes that qualify.
    pub fn is_displacement(self) -> bool {
        matches!(self, FailureClass::Preempted | FailureClass::Reclaimed)
    }

    /// Whether the failure is evidence against the node the attempt ran on,
    /// for the health view. Only `node` is.
    ///
    /// - `comm` is not: when one peer or one switch fails, every rank of a
    ///   collective reports the timeout, so the node whose log was read is
    ///   usually a victim. In Llama 3's 419 interruptions, switches and
    ///   cables (35) outnumber NICs (7), and NCCL timeouts of unknown cause
    ///   are their own row; Unicron finds 73% of errors transient. A fault
    ///   that *is* the node's (Xid 74 NVLink, Xid 79) has its own signature
    ///   and classifies as `node`. `comm` is a pool/fabric signal.
    /// - `io` is not: most I/O failures in the studies are shared storage
    ///   (Philly's HDFS checkpoint errors, Acme's S3StorageError); charging
    ///   the node that hit an outage would spread it across every node. A
    ///   dying local disk (Llama 3: SSD 3 of 419) is rare.
    /// - `gpu-oom`, `cpu-oom`, `timeout`, `app`, `image` are the workload's;
    ///   `capacity`, `provider`, `preempted` are the provider's; `cost-cap`
    ///   and `cancelled` are decisions.
    pub fn counts_against_node(self) -> bool {
        matches!(self, FailureClass::Node)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a failure class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown failure class `{0}`; expected one of: {list}", list = class_list())]
pub struct UnknownFailureClass(pub String);

fn class_list() -> String {
    FailureClass::ALL.map(FailureClass::as_str).join(", ")
}

impl FromStr for FailureClass {
    type Err = UnknownFailureClass;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FailureClass::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownFailureClass(s.to_string()))
    }
}

/// What the provider said about how the attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ProviderEnd {
    /// The process exited with this code. Codes 129..=192 are read as
    /// 128 + signal and negative codes as a signal, as shells and Python's
    /// `subprocess` report them.
    Exited { code: i32 },
    /// The process was killed by this signal.
    Signaled { signal: i32 },
    /// The provider refused the launch.
    LaunchRejected {
        message: String,
        /// The provider said it had no capacity (or quota).
        capacity: bool,
    },
    /// A provider API call failed.
    ApiError { message: String },
    /// The provider never answered the launch in time.
    LaunchTimeout,
    /// The provider lost the node the attempt ran on.
    NodeLost { message: String },
    /// The provider reclaimed the capacity.
    Preempted,
    /// The provider's own time limit (e.g. Slurm `TIMEOUT`).
    TimedOut,
    /// The provider or its cgroup killed the attempt for host memory
    /// (e.g. Slurm `OUT_OF_MEMORY`, Kubernetes `OOMKilled`).
    OutOfMemory,
    /// The attempt was cancelled (by Canopy, or at the provider).
    Cancelled,
    /// The machine or container did not come up.
    BootFailed { message: String },
    /// Canopy stopped the attempt at the workload's cost cap.
    CostCapReached,
    /// Canopy stopped the attempt because a hard budget on its tenant or
    /// token is spent (`tenant/budget.rs`): class `cost-cap`.
    BudgetSpent { budget: String, message: String },
    /// Canopy stopped the attempt at the workload's max runtime.
    MaxRuntimeReached,
    /// Canopy stopped the attempt to move it off a node an operator is
    /// draining (`canopy drain --evict`): not a failure; the workload is
    /// placed again without spending an attempt, and no node is charged.
    Evicted {
        message: String,
        /// Between SIGTERM and SIGKILL, when the drain set it (seconds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace_s: Option<u64>,
    },
    /// Canopy stopped the attempt on the provider's notice that it reclaims
    /// the capacity: a preemption, stopped SIGTERM first. `grace_s` is the
    /// time the notice left; the stop waits that or the workload's own
    /// `stop_grace`, whichever is less, before SIGKILL.
    Reclaimed { message: String, grace_s: u64 },
    /// Canopy stopped borrowed work so that `owner`, the tenant owning the
    /// capacity, gets it back (`tenant/reclaim.rs`): SIGTERM, then SIGKILL
    /// after `grace_s` (the workload's `stop_grace` or what is left of the
    /// owner's promise, whichever is less). Class `reclaimed`.
    OwnerReclaim {
        owner: String,
        /// The owner's workload it makes room for (its id's number).
        for_workload: u64,
        message: String,
        grace_s: u64,
        /// When SIGKILL is due, in ms since the epoch: the reclaim's start
        /// plus `grace_s`. A stop carried out again (after a restart, or
        /// resent) waits only what is left of it, so the owner's promise
        /// holds across restarts. Absent in stores from before it was kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kill_at_ms: Option<i64>,
    },
    /// The provider reported an end Canopy does not know.
    Unknown { message: String },
    /// One rank of a gang ended first and the gang was stopped: how that
    /// rank ended, and where. The class is that end's; health is charged
    /// to that node alone.
    Rank {
        rank: u32,
        node: String,
        #[schemars(schema_with = "rank_end_schema")]
        end: Box<ProviderEnd>,
    },
}

/// The schema of a rank's own end: an end of the kinds above, described
/// without referring back to [`ProviderEnd`] (client generators such as
/// openapi-python-client drop a union that contains itself, and with it
/// every answer holding an attempt).
fn rank_end_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "required": ["kind"],
        "properties": { "kind": { "type": "string" } },
        "description": "How that rank ended: an end as `stop` has it (`exited`, `signaled`, `node-lost`, …)."
    })
}

impl ProviderEnd {
    /// The end itself, without the gang rank it came from.
    pub fn inner(&self) -> &ProviderEnd {
        match self {
            ProviderEnd::Rank { end, .. } => end.inner(),
            e => e,
        }
    }

    /// For a gang rank's end: its rank and node.
    pub fn rank(&self) -> Option<(u32, &str)> {
        match self {
            ProviderEnd::Rank { rank, node, .. } => Some((*rank, node.as_str())),
            _ => None,
        }
    }
}
