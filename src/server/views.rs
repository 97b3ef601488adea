//! The API's own request and answer types: what the handlers in
//! [`super::api`] take and return, and what the OpenAPI document
//! ([`super::openapi`]) describes, from these same types.

use super::auth::Role;
use crate::engine::model::{AttemptRecord, WorkloadId, WorkloadRecord};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The caller as the server sees it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct WhoAmI {
    pub principal: String,
    pub role: Role,
    pub scopes: Vec<String>,
    pub origin: String,
    pub store_id: String,
    /// The tenant it acts for; absent when no tenants are configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// A workload with its attempts, as every workload endpoint returns it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadView {
    pub workload: WorkloadRecord,
    pub attempts: Vec<AttemptRecord>,
    /// On a submit: true when the idempotency key matched an earlier one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub existing: bool,
    /// A queued workload of a tenant: where it stands in its tenant's
    /// queue (on `GET /v1/workloads/{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<QueuePosition>,
}

/// Where a queued workload stands in its tenant's queue, in the order the
/// scheduler takes work (priority, then age).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QueuePosition {
    pub tenant: String,
    /// 1 for the next of the tenant's workloads to be placed.
    pub position: u64,
    /// The tenant's queued workloads in all.
    pub of: u64,
    /// With `[fair_share]`: where the tenant stands among tenants ("team-b
    /// is at 0.31 of its fair share 0.50; next after team-c").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fair_share: Option<String>,
}

/// `POST /v1/workloads` parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct SubmitQuery {
    /// The tenant the work is for (admins only; others' is their own).
    pub tenant: Option<String>,
}

/// `GET /v1/workloads` filters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct ListQuery {
    /// Comma-separated states.
    pub state: Option<String>,
    /// Names containing this.
    pub name: Option<String>,
    /// `key=value`.
    pub label: Option<String>,
    pub provider: Option<String>,
    pub submitted_by: Option<String>,
    /// Only this tenant's workloads.
    pub tenant: Option<String>,
    /// At most this many (default 100, at most 1000).
    pub limit: Option<usize>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
    /// Only failures nobody has resolved (failed, not acknowledged, not
    /// retried): what triage shows.
    #[serde(default)]
    pub unresolved: bool,
}

/// A page of workloads.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Page {
    pub workloads: Vec<WorkloadView>,
    /// Pass as `cursor` for the next page; absent on the last.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How many workloads match the filters, on every page: the M of
    /// "N of M".
    #[serde(default)]
    pub total: u64,
    /// The page size applied: the `limit` asked for (100 by default),
    /// brought within 1 to [`MAX_PAGE`].
    #[serde(default)]
    pub limit: usize,
}

/// The most workloads one page holds.
pub const MAX_PAGE: usize = 1000;

/// `GET …/logs` parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct LogQuery {
    /// `stdout` (default) or `stderr`.
    #[schemars(with = "Option<crate::engine::handle::Stream>")]
    pub stream: Option<String>,
    /// The attempt's number; the latest by default.
    pub attempt: Option<u32>,
    /// Byte offset to start from.
    pub offset: Option<u64>,
    /// At most this many bytes (without follow; default 1 MiB).
    pub limit: Option<usize>,
    /// Keep the response open, sending what is new, until the attempt ends.
    pub follow: Option<bool>,
}

/// One collected output of one attempt.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactView {
    pub attempt: u32,
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
    /// Where it is kept in the server's artifact store.
    pub path: std::path::PathBuf,
    /// Where to download it (files only).
    pub download: Option<String>,
}

/// The body of a command on a workload or node: why, and until when.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct Reason {
    pub reason: Option<String>,
    /// When a cordon lapses: RFC 3339 (`2026-12-02T08:00:00Z`), a
    /// duration from now (`2h`), or milliseconds since the epoch.
    pub until: Option<serde_json::Value>,
    /// A drain stops the node's running work and places it again.
    #[serde(default)]
    pub evict: bool,
    /// An evicting drain's grace between SIGTERM and SIGKILL: a duration
    /// (`30s`) or seconds.
    #[serde(default)]
    pub grace: Option<serde_json::Value>,
    /// The node or pool (`provider/pool`) an unexclude clears; all of the
    /// workload's exclusions without it.
    #[serde(default)]
    pub node: Option<String>,
}

/// `GET /v1/events` parameters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct EventsQuery {
    /// At most this many (default 200, at most 10,000).
    pub limit: Option<usize>,
}

/// `GET /v1/audit` filters.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub struct AuditQuery {
    /// Milliseconds since the epoch.
    pub since: Option<i64>,
    pub principal: Option<String>,
    pub limit: Option<usize>,
    /// Actions starting with this (`cordon`), ignoring ASCII case.
    pub action: Option<String>,
    /// Outcomes starting with this (`denied`), ignoring ASCII case.
    pub outcome: Option<String>,
    /// Targets starting with this (`w-7`, a node's name), ignoring ASCII case.
    pub target: Option<String>,
    /// Milliseconds since the epoch: records at or before it, the cursor
    /// of the next older page.
    pub until: Option<i64>,
}

/// `GET /healthz`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Health {
    /// `ok` while the engine runs; `starting` (with a 503) until it has
    /// published its fleet; `standby` on a standby (it serves reads from
    /// the journal and forwards the rest to the leader).
    pub status: HealthState,
    pub store_id: String,
}

/// Whether the engine is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthState {
    Ok,
    Starting,
    Standby,
}

/// The answer to a command on a workload or node (and to a token's
/// revocation).
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct CommandAnswer {
    /// What was done, one line.
    pub message: String,
    /// A retry: the workload it submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<WorkloadId>,
    /// A retry: true when an earlier retry of the same workload is returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<bool>,
}

/// The body of cancel, retry, acknowledge, uncordon and unquarantine
/// (optional): why, for the audit trail. Read as [`Reason`].
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct ReasonBody {
    /// Why, for the audit trail.
    pub reason: Option<String>,
}

/// The body of an unexclude (optional). Read as [`Reason`].
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct UnexcludeBody {
    /// Why, for the audit trail.
    pub reason: Option<String>,
    /// The node or pool (`provider/pool`) to clear; all of the workload's
    /// exclusions without it.
    pub node: Option<String>,
}

/// The body of a cordon (optional). Read as [`Reason`].
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct CordonBody {
    /// Why, for the audit trail.
    pub reason: Option<String>,
    /// When the cordon lapses: RFC 3339 (`2026-12-02T08:00:00Z`), a
    /// duration from now (`2h`), or milliseconds since the epoch; it must
    /// be in the future.
    #[schemars(with = "Option<TimeOrMillis>")]
    pub until: Option<serde_json::Value>,
}

/// The body of a drain (optional). Read as [`Reason`].
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct DrainBody {
    /// Why, for the audit trail.
    pub reason: Option<String>,
    /// Stop the node's running work and place it again.
    #[serde(default)]
    pub evict: bool,
    /// An evicting drain's grace between SIGTERM and SIGKILL: a duration
    /// (`30s`) or seconds, at most an hour.
    #[schemars(with = "Option<TimeOrMillis>")]
    pub grace: Option<serde_json::Value>,
}

/// A time or duration as text, or a number.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its schema is used: the handlers read a `serde_json::Value`.
enum TimeOrMillis {
    Text(String),
    Number(i64),
}

/// A query parameter given empty (`?cursor=`, as forms send an unset
/// field) is taken as not given.
pub fn blank_is_absent<const N: usize>(fields: [&mut Option<String>; N]) {
    for f in fields {
        if f.as_deref().is_some_and(|v| v.trim().is_empty()) {
            *f = None;
        }
    }
}
