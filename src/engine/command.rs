//! What clients ask of a running engine, who asks, and what it answers.
//!
//! Every client — the API server, an in-process console, a test — sends a
//! [`Command`] with a [`Caller`] through the engine's handle. The engine
//! answers each with a [`CommandResult`] only after the change, and the
//! audit record of the request, are committed to the journal.

use super::model::WorkloadId;
use crate::spec::Spec;
use serde::{Deserialize, Serialize};

/// What a client asks the engine to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    Submit {
        spec: Box<Spec>,
        idempotency_key: Option<String>,
    },
    Cancel {
        id: WorkloadId,
    },
    Cordon {
        node: String,
        /// The cordon lapses by itself then.
        #[serde(default)]
        until: Option<super::model::Millis>,
    },
    Uncordon {
        node: String,
    },
    /// No new work on the node; running work finishes, or with `evict` is
    /// stopped (after `grace_s`, else its own stop grace) and placed again.
    Drain {
        node: String,
        #[serde(default)]
        evict: bool,
        #[serde(default)]
        grace_s: Option<u64>,
    },
    Retry {
        id: WorkloadId,
    },
    /// End a node's quarantine before its cool-down does.
    Unquarantine {
        node: String,
    },
    /// A failed workload needs nothing more done: it leaves triage, with
    /// who acknowledged it and why recorded on it.
    Acknowledge {
        id: WorkloadId,
    },
    /// Clear a live workload's exclusions (nodes and pools its failures
    /// ruled out): all, or the one node or pool `target` names.
    Unexclude {
        id: WorkloadId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
    },
}

impl Command {
    /// The audit trail's name for it.
    pub fn action(&self) -> &'static str {
        match self {
            Command::Submit { .. } => "submit",
            Command::Cancel { .. } => "cancel",
            Command::Cordon { .. } => "cordon",
            Command::Uncordon { .. } => "uncordon",
            Command::Drain { .. } => "drain",
            Command::Retry { .. } => "retry",
            Command::Unquarantine { .. } => "unquarantine",
            Command::Acknowledge { .. } => "acknowledge",
            Command::Unexclude { .. } => "unexclude",
        }
    }

    /// What it acts on, for the audit trail (`None` for a submit, whose
    /// target is the workload it creates).
    pub fn target(&self) -> Option<String> {
        match self {
            Command::Submit { .. } => None,
            Command::Cancel { id } | Command::Retry { id } | Command::Acknowledge { id } => {
                Some(id.to_string())
            }
            Command::Unexclude { id, target: None } => Some(id.to_string()),
            Command::Unexclude { id, target: Some(t) } => Some(format!("{id} {t}")),
            Command::Cordon { node, .. }
            | Command::Uncordon { node }
            | Command::Drain { node, .. }
            | Command::Unquarantine { node } => Some(node.clone()),
        }
    }
}

/// Who sent a command and from where; the engine records both in the
/// audit trail, and a submit records its principal on the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    /// A token's name, or `local:USER` for the store's owner.
    pub principal: String,
    /// `socket (uid 1000)`, `127.0.0.1:53122`, `console`.
    pub origin: String,
    /// The operator's reason, when the request carried one.
    pub reason: Option<String>,
    /// The tenant a submit is for, as the API settled it; `None`: the
    /// default tenant (when tenants are configured).
    pub tenant: Option<String>,
}

impl Caller {
    /// The user running this process, acting on their own store: the
    /// in-process console, and tests.
    pub fn local(origin: &str) -> Caller {
        Caller {
            principal: format!("local:{}", current_user()),
            origin: origin.to_string(),
            reason: None,
            tenant: None,
        }
    }
}

/// The login name of the user running this process (`uid N` when the
/// uid has none), looked up once.
pub fn current_user() -> String {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| user_name(current_uid())).clone()
}

/// A user's login name from their uid, or `uid N` when it has none.
pub fn user_name(uid: u32) -> String {
    // SAFETY: getpwuid_r writes into `pw` and `buf`, both ours and sized as
    // passed; `out` is set to null or to `&pw`, read only after the call.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 1024];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out);
        if rc == 0 && !out.is_null() && !pw.pw_name.is_null() {
            return std::ffi::CStr::from_ptr(pw.pw_name).to_string_lossy().into_owned();
        }
    }
    format!("uid {uid}")
}

/// The uid this process runs as.
pub fn current_uid() -> u32 {
    // SAFETY: getuid cannot fail and touches no memory.
    unsafe { libc::getuid() }
}

/// Why the engine refused a command; decides the API's status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refusal {
    /// The request makes no sense (a node that does not exist…).
    #[default]
    Invalid,
    /// What it names is not there.
    NotFound,
    /// It clashes with the current state: a reused idempotency key with
    /// another spec, a retry of a workload still running.
    Conflict,
    /// The engine cannot take commands (stopped, or a replay).
    Unavailable,
    /// No pool of the configured fleet could ever run the spec.
    Unschedulable,
}

/// The engine's answer to a [`Command`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum CommandResult {
    /// `existing`: the idempotency key matched an earlier submission, whose
    /// id this is; nothing new was submitted.
    Submitted {
        id: WorkloadId,
        existing: bool,
    },
    Ok {
        message: String,
    },
    Error {
        #[serde(default)]
        code: Refusal,
        message: String,
    },
}

impl CommandResult {
    /// An error of kind `code`.
    pub fn error(code: Refusal, message: impl Into<String>) -> CommandResult {
        CommandResult::Error { code, message: message.into() }
    }

    /// The audit trail's one-word outcome.
    pub fn outcome(&self) -> String {
        match self {
            CommandResult::Submitted { existing: true, .. } => "existing".into(),
            CommandResult::Submitted { .. } | CommandResult::Ok { .. } => "ok".into(),
            CommandResult::Error { message, .. } => format!("refused: {message}"),
        }
    }
}

/// An idempotency key as its sender wrote it: the server scopes keys to
/// their principal by prefixing `PRINCIPAL` and a unit separator (U+001F),
/// which no one types.
pub fn shown_key(key: &str) -> &str {
    key.split_once('\u{1f}').map_or(key, |(_, k)| k)
}

/// `key` scoped to `principal`: the same key from two principals names two
/// workloads.
pub fn scoped_key(principal: &str, key: &str) -> String {
    format!("{principal}\u{1f}{key}")
}
