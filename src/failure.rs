//! Failure classes: what a failed attempt *was*. The class decides retry
//! (see the engine's retry policy) and whether the outcome counts against
//! the node it ran on (see the health tracker).
//!
//! The classifier that assigns a class from provider state, exit status and
//! log tail lives in `engine::classify`; this module only names the classes.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureClass {
    /// No capacity where it was placed (launch refused, or pending too long).
    Capacity,
    /// The provider's API failed or timed out.
    Provider,
    /// The machine failed: lost, hardware, GPU Xid, driver.
    Node,
    /// The workload needed more GPU memory than the GPU had.
    GpuOom,
    /// The workload needed more host memory than it had.
    CpuOom,
    /// Collective communication failed: NCCL, MPI, network resets.
    Comm,
    /// Storage failed: I/O errors, no space, transient object-store errors.
    Io,
    /// Ran past `max_runtime`.
    Timeout,
    /// Spent `max_cost_usd`.
    CostCap,
    /// The provider reclaimed interruptible capacity.
    Preempted,
    /// The workload's own error.
    App,
    /// Cancelled by an operator.
    Cancelled,
}

impl FailureClass {
    pub const ALL: [FailureClass; 12] = [
        Self::Capacity,
        Self::Provider,
        Self::Node,
        Self::GpuOom,
        Self::CpuOom,
        Self::Comm,
        Self::Io,
        Self::Timeout,
        Self::CostCap,
        Self::Preempted,
        Self::App,
        Self::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Capacity => "capacity",
            Self::Provider => "provider",
            Self::Node => "node",
            Self::GpuOom => "gpu-oom",
            Self::CpuOom => "cpu-oom",
            Self::Comm => "comm",
            Self::Io => "io",
            Self::Timeout => "timeout",
            Self::CostCap => "cost-cap",
            Self::Preempted => "preempted",
            Self::App => "app",
            Self::Cancelled => "cancelled",
        }
    }

    /// Failures of the infrastructure rather than of the workload: retried
    /// elsewhere. (`gpu-oom` and `cpu-oom` are the workload's size against
    /// the machine: retried only where there is more memory.)
    pub fn is_infrastructure(self) -> bool {
        matches!(self, Self::Capacity | Self::Provider | Self::Node | Self::Comm | Self::Io | Self::Preempted)
    }

    /// Whether the outcome is evidence against the node it ran on. Capacity
    /// and provider failures are the provider's, preemption is the
    /// market's, and the workload's own errors say nothing about the node.
    pub fn counts_against_node(self) -> bool {
        matches!(self, Self::Node | Self::Comm | Self::Io)
    }
}

impl fmt::Display for FailureClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for FailureClass {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|c| c.as_str()).collect();
            format!("unknown failure class {s:?}; expected one of {}", names.join(", "))
        })
    }
}

/// How an attempt ended, as its provider (or Canopy's own enforcement)
/// reports it. The classifier's input, with the log tail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ProviderEnd {
    /// The process exited with this status code.
    Exited { code: i32 },
    /// The process was killed by this signal.
    Signaled { signal: i32 },
    /// The provider refused the launch; `capacity` when it said why: no room.
    LaunchRejected { message: String, capacity: bool },
    /// The provider's API failed while launching or running.
    ApiError { message: String },
    /// The provider never answered the launch in time.
    LaunchTimeout,
    /// The machine it ran on went away.
    NodeLost { message: String },
    /// The provider reclaimed the capacity.
    Preempted,
    /// The provider's own time limit ended it.
    TimedOut,
    /// The provider (or cgroup) killed it for memory.
    OutOfMemory,
    /// Cancelled at the provider.
    Cancelled,
    /// The machine never booted.
    BootFailed { message: String },
    /// Canopy terminated it at the workload's cost cap.
    CostCapReached,
    /// Canopy terminated it at the workload's max runtime.
    MaxRuntimeReached,
    /// Anything else the provider said.
    Unknown { message: String },
}
