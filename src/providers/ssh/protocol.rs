//! What Canopy and `canopy __host` say to each other over an SSH channel.
//!
//! One request per remote command: Canopy runs
//! `<uploaded canopy> __host --store <store id>` and writes one JSON
//! [`Request`] to its stdin (secret values travel here and nowhere else:
//! never in the command line, which every user on the host can read, and
//! never in the environment, which sshd does not pass). The answer is one
//! JSON [`Reply`] on stdout, except for [`Request::Logs`],
//! [`Request::Fetch`] and [`Request::FetchCheckpoint`], whose stdout is the
//! raw bytes (a tar stream for the fetches) when the exit status is 0 and
//! whose error is on stderr otherwise. The request is one line (compact
//! JSON holds no newline); [`Request::PutCheckpoint`] is followed on stdin
//! by a tar stream, after a newline.
//!
//! This module owns the wire types only; it performs no I/O.

use crate::engine::model::AttemptId;
use crate::failure::ProviderEnd;
use crate::fleet::Shape;
use crate::providers::{Collection, LaunchError, LogStream, Owned};
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The hidden subcommand the uploaded binary answers.
pub const HOST_SUBCOMMAND: &str = "__host";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// The host's capacity and clock.
    Probe,
    Launch(Box<Launch>),
    Status {
        token: String,
    },
    Logs {
        token: String,
        stream: WireStream,
        offset: u64,
        max: usize,
    },
    Terminate {
        token: String,
        /// Between SIGTERM and SIGKILL; the spec's own when absent.
        grace_ms: Option<u64>,
    },
    /// Moves what the supervisor collected into the attempt's staging
    /// directory and describes it (paths relative to that directory).
    Outputs {
        token: String,
        spec: Box<Spec>,
    },
    /// The staging directory as a tar stream on stdout.
    Fetch {
        token: String,
    },
    /// Attempts of this store on the host.
    List,
    /// Pushes the store's lease on this host to now + `for_ms` (the
    /// host's clock).
    Renew {
        for_ms: u64,
    },
    /// Removes an attempt that no longer runs, with everything it left.
    Cleanup {
        token: String,
    },
    /// Before the launch: the checkpoint Canopy hands the attempt, as a tar
    /// stream of its content after the request line (no `COMPLETE`: the
    /// host writes it last), at most `max_bytes`. Refused once the attempt
    /// has been launched. Answers a [`HostCheckpoint`].
    PutCheckpoint {
        token: String,
        name: String,
        max_bytes: u64,
    },
    /// The newest complete checkpoint in the attempt's checkpoint
    /// directory: `Option<HostCheckpoint>`.
    NewestCheckpoint {
        token: String,
    },
    /// Checkpoint `name`, complete at `at_ms`, as a tar stream of its
    /// content on stdout (without `COMPLETE`; links and special files left
    /// out); fails when it is over `max_bytes` or was changed meanwhile.
    FetchCheckpoint {
        token: String,
        name: String,
        at_ms: i64,
        max_bytes: u64,
    },
}

/// A complete checkpoint in an attempt's checkpoint directory on a host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCheckpoint {
    pub name: String,
    /// Its `COMPLETE`'s modification time, on the host's clock.
    pub at_ms: i64,
    /// Bytes of its regular files.
    pub bytes: u64,
    /// It is the one Canopy handed the attempt at launch.
    pub handed: bool,
}

/// A launch as the host's local provider needs it. Secret values ride
/// along in `secrets` on stdin only.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Launch {
    pub attempt: AttemptId,
    pub token: String,
    pub spec: Spec,
    pub pool: String,
    pub node: String,
    pub nodes: Vec<String>,
    /// The accelerator indices this attempt gets, set in the vendor's
    /// visible-devices variable (`CUDA_VISIBLE_DEVICES`,
    /// `ASCEND_RT_VISIBLE_DEVICES`, …); `None` on a host without them.
    pub gpus: Option<Vec<u32>>,
    /// Whose accelerators the host has (its probe's): picks the variable.
    /// Absent from older controllers: NVIDIA.
    #[serde(default)]
    pub vendor: Option<crate::accel::Vendor>,
    #[serde(default)]
    pub family: Option<crate::accel::Family>,
    /// The lease to set before the supervisor starts.
    pub lease_ms: u64,
    /// The spec declares `[checkpoint]`: the attempt gets a checkpoint
    /// directory of its own on the host (holding what
    /// [`Request::PutCheckpoint`] put there).
    #[serde(default)]
    pub checkpoint: bool,
    pub secrets: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireStream {
    Stdout,
    Stderr,
}

impl From<LogStream> for WireStream {
    fn from(s: LogStream) -> Self {
        match s {
            LogStream::Stdout => WireStream::Stdout,
            LogStream::Stderr => WireStream::Stderr,
        }
    }
}

impl From<WireStream> for LogStream {
    fn from(s: WireStream) -> Self {
        match s {
            WireStream::Stdout => LogStream::Stdout,
            WireStream::Stderr => LogStream::Stderr,
        }
    }
}

/// One answer: `{"ok": …}` or `{"error": "…"}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reply<T> {
    Ok(T),
    Error(String),
}

/// What [`Request::Probe`] finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// `uname -m` as Rust names it (`std::env::consts::ARCH`).
    pub arch: String,
    /// The whole machine as the local provider sees it (CPUs, memory,
    /// free disk where attempts live, GPUs through `nvidia-smi`).
    pub shape: Shape,
    /// The host's clock, milliseconds since the epoch.
    pub now_ms: i64,
    /// What the owner's container engine offers, as pool tags
    /// ([`crate::providers::local::container::ContainerEngine::tags`]):
    /// empty when none answers `info` (or from an older host binary).
    #[serde(default)]
    pub containers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchAck {
    pub provider_ref: String,
    pub adopted: bool,
}

/// A launch's answer: started (or adopted), or refused as the host's
/// local provider refused it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "kebab-case")]
pub enum LaunchOutcome {
    Started(LaunchAck),
    Refused { kind: Refusal, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    Capacity,
    Api,
    Timeout,
    Rejected,
    Invalid,
}

impl LaunchOutcome {
    pub fn from_result(r: Result<crate::providers::LaunchAck, LaunchError>) -> Self {
        match r {
            Ok(a) => LaunchOutcome::Started(LaunchAck { provider_ref: a.provider_ref, adopted: a.adopted }),
            Err(e) => {
                let (kind, message) = match e {
                    LaunchError::Capacity(m) => (Refusal::Capacity, m),
                    LaunchError::Api(m) => (Refusal::Api, m),
                    LaunchError::Timeout => (Refusal::Timeout, String::new()),
                    LaunchError::Rejected(m) => (Refusal::Rejected, m),
                    LaunchError::Invalid(m) => (Refusal::Invalid, m),
                };
                LaunchOutcome::Refused { kind, message }
            }
        }
    }

    pub fn into_result(self) -> Result<crate::providers::LaunchAck, LaunchError> {
        match self {
            LaunchOutcome::Started(a) => {
                Ok(crate::providers::LaunchAck { provider_ref: a.provider_ref, adopted: a.adopted })
            }
            LaunchOutcome::Refused { kind, message } => Err(match kind {
                Refusal::Capacity => LaunchError::Capacity(message),
                Refusal::Api => LaunchError::Api(message),
                Refusal::Timeout => LaunchError::Timeout,
                Refusal::Rejected => LaunchError::Rejected(message),
                Refusal::Invalid => LaunchError::Invalid(message),
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Status {
    Pending,
    Running,
    Ended { end: ProviderEnd },
    NotFound,
}

/// One attempt of this store on the host, with the GPUs it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    pub token: String,
    pub provider_ref: String,
    pub running: bool,
    #[serde(default)]
    pub gpus: Vec<u32>,
}

impl From<Listed> for Owned {
    fn from(l: Listed) -> Self {
        Owned { token: l.token, provider_ref: l.provider_ref, running: l.running }
    }
}

/// What [`Request::Outputs`] staged: the collection with paths relative
/// to the staging directory.
pub type Staged = Collection;
