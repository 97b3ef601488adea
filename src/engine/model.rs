//! The engine's vocabulary: identifiers, states, time, and the records the
//! core emits for the journal.
//!
//! Everything here is plain data. The core produces records; the journal
//! stores them; the console and CLI read them back. Records carry names,
//! never secret values: a spec lists secret *names* only.

use crate::failure::{FailureClass, ProviderEnd};
use crate::spec::Spec;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Milliseconds since the Unix epoch. Time is always passed in, never read.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
pub struct Millis(pub i64);

impl Millis {
    pub fn plus_secs(self, secs: f64) -> Millis {
        Millis(self.0 + (secs * 1000.0).round() as i64)
    }
    pub fn secs_since(self, earlier: Millis) -> f64 {
        (self.0 - earlier.0) as f64 / 1000.0
    }
}

/// The label an operator's retry carries: the id of the workload it
/// retries (`canopy retry w-93` submits `w-108` with `canopy.retry-of =
/// "w-93"`).
pub const RETRY_OF: &str = "canopy.retry-of";

/// A workload's id, shown as `w-17`. Assigned by the owning engine in
/// submission order; unique within a store. In JSON it is the same
/// string, `"w-17"`, everywhere (the API, the CLI's `--json`, the event
/// stream); a bare number or `"17"` is accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId(pub u64);

impl Serialize for WorkloadId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WorkloadId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = WorkloadId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a workload id like \"w-17\"")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<WorkloadId, E> {
                Ok(WorkloadId(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<WorkloadId, E> {
                u64::try_from(v).map(WorkloadId).map_err(|_| E::custom("a workload id is not negative"))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<WorkloadId, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl schemars::JsonSchema for WorkloadId {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "WorkloadId".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^w-[0-9]+$",
            "description": "A workload's id: `w-17`.",
        })
    }
}

impl fmt::Display for WorkloadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w-{}", self.0)
    }
}

impl std::str::FromStr for WorkloadId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.strip_prefix("w-").unwrap_or(s);
        // The store keeps ids as SQLite integers: 63 bits.
        digits
            .parse::<u64>()
            .ok()
            .filter(|n| i64::try_from(*n).is_ok())
            .map(WorkloadId)
            .ok_or_else(|| format!("{s:?} is not a workload id; ids look like w-17"))
    }
}

/// One try at running a workload, shown as `w-17.2`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct AttemptId {
    pub workload: WorkloadId,
    /// 1-based.
    pub n: u32,
}

impl AttemptId {
    /// The token handed to providers: `canopy-<store>-w<N>-a<M>-<nonce>`.
    /// The prefix says whose attempt it is (adapters parse it back); the
    /// nonce, 64 random bits drawn when the attempt is placed, makes it
    /// unique across the life of the store and across stores sharing a
    /// cluster, so a journal restored from an older copy can never hand
    /// out a token some earlier attempt already used. Attempts placed
    /// before nonces existed have an empty one and keep their old token.
    /// The token is stable across re-sends of the same launch, so a
    /// provider that already has it adopts rather than launches twice.
    pub fn token(&self, store_id: &str, nonce: &str) -> String {
        if nonce.is_empty() {
            format!("canopy-{store_id}-w{}-a{}", self.workload.0, self.n)
        } else {
            format!("canopy-{store_id}-w{}-a{}-{nonce}", self.workload.0, self.n)
        }
    }

    /// Inverse of [`AttemptId::token`] for this store; `None` for anything
    /// that is not this store's. Reads both forms (with and without a
    /// nonce).
    pub fn from_token(token: &str, store_id: &str) -> Option<AttemptId> {
        Self::parse_token(token, store_id).map(|(a, _)| a)
    }

    /// The attempt and the nonce (empty for old-style tokens) a token of
    /// this store carries.
    pub fn parse_token<'t>(token: &'t str, store_id: &str) -> Option<(AttemptId, &'t str)> {
        let rest = token.strip_prefix("canopy-")?.strip_prefix(store_id)?.strip_prefix("-w")?;
        let (w, rest) = rest.split_once("-a")?;
        let (a, nonce) = rest.split_once('-').unwrap_or((rest, ""));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(w) || !digits(a) || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some((AttemptId { workload: WorkloadId(w.parse().ok()?), n: a.parse().ok()? }, nonce))
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.workload, self.n)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadState {
    /// Waiting: for capacity that fits (with an explanation), or for a
    /// retry backoff to pass.
    Queued,
    /// A placement is chosen and the launch request is with the provider.
    Placing,
    /// The provider accepted; the attempt is provisioning or pending.
    Launching,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl WorkloadState {
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Placing => "placing",
            Self::Launching => "launching",
            Self::Running => "running",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

impl std::str::FromStr for WorkloadState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use WorkloadState::*;
        [Queued, Placing, Launching, Running, Succeeded, Failed, Cancelled]
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                format!("unknown state {s:?}; one of queued, placing, launching, running, succeeded, failed, cancelled")
            })
    }
}

impl fmt::Display for WorkloadState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AttemptState {
    /// Launch requested; no answer yet.
    Placing,
    /// Accepted by the provider; not running yet.
    Launching,
    Running,
    /// Canopy asked the provider to stop it; waiting for confirmation.
    Terminating,
    Succeeded,
    Failed,
    Cancelled,
    /// The provider no longer knows it and it never reported an end.
    Lost,
}

impl AttemptState {
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled | Self::Lost)
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placing => "placing",
            Self::Launching => "launching",
            Self::Running => "running",
            Self::Terminating => "terminating",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Lost => "lost",
        }
    }
}

impl fmt::Display for AttemptState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The durable row of a workload: its current state and totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkloadRecord {
    pub id: WorkloadId,
    pub name: String,
    pub spec: std::sync::Arc<Spec>,
    /// Hex SHA-256 of the canonical JSON of `spec`, for idempotent submit.
    pub spec_hash: String,
    pub idempotency_key: Option<String>,
    pub priority: u32,
    pub state: WorkloadState,
    pub submitted_at: Millis,
    pub updated_at: Millis,
    /// Attempts made so far.
    pub attempts: u32,
    /// Failures classed `app` so far (retried only as the spec allows).
    pub app_failures: u32,
    /// Not placed again before this (retry backoff).
    pub not_before: Option<Millis>,
    /// Money spent across attempts at the prices recorded at launch.
    pub cost_usd: f64,
    /// The placement's estimate (upper bound) when last placed.
    pub est_cost_usd: f64,
    /// Why it waits or why it ended, in one line.
    pub reason: Option<String>,
    /// Final failure class, when it failed.
    pub class: Option<FailureClass>,
    /// Who submitted it: a token's name, or `local:USER` for the store's
    /// owner on the socket; `None` for workloads from before principals.
    #[serde(default)]
    pub submitted_by: Option<String>,
    /// An operator saw this failure and needs nothing more done about it
    /// (`canopy ack`, `a` in the console): it leaves triage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<Acknowledgement>,
    /// The nodes and pools its failures rule out while it is placed again,
    /// and until when (see `engine/core/exclusion.rs`). `None` on rows
    /// from before they were recorded: a restart then recomputes them
    /// from the failed attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exclusions: Option<Exclusions>,
    /// The operator's retry of it (`canopy retry`), once there is one.
    /// Not a column of its own: the retry is found by its idempotency
    /// key ([`RETRY_OF`]`:w-N`, unique in the journal) whenever the row is
    /// read, so it holds for rows from before it was shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retried_as: Option<WorkloadId>,
    /// The tenant the work is for (`None` when no tenants are configured,
    /// and on rows from before tenants).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl WorkloadRecord {
    /// The workload this one is an operator's retry of, from its
    /// [`RETRY_OF`] label.
    pub fn retry_of(&self) -> Option<WorkloadId> {
        self.spec.labels.get(RETRY_OF).and_then(|o| o.parse().ok())
    }
}

/// What a workload's earlier failures keep it away from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Exclusions {
    /// Nodes it is not placed on again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Pools (`provider/pool`) it is not placed in again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pools: Vec<String>,
    /// When the last one was added; they all lapse together at `until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Millis>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Millis>,
}

impl Exclusions {
    /// Nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty() && self.pools.is_empty()
    }
}

/// Who acknowledged a failure, when and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Acknowledgement {
    /// The principal that acknowledged it.
    pub by: String,
    pub at: Millis,
    pub reason: Option<String>,
}

/// The durable row of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptRecord {
    pub id: AttemptId,
    pub provider: String,
    /// `provider/pool`.
    pub pool: String,
    pub node: String,
    pub region: String,
    pub state: AttemptState,
    /// The workload's hourly share at the price in force at launch.
    pub price_per_hour: f64,
    pub est_cost_usd: f64,
    pub gpus: u32,
    /// GPU memory per GPU where it ran (a gpu-oom retry needs more).
    pub gpu_memory_gb: f64,
    /// The placement's score (0..100) and its breakdown as `factor=value`
    /// pairs; for work without GPUs on a GPU node, then `; ` and why
    /// ([`crate::schedule::GpuNode`]: "GPU node used as a last resort: no
    /// CPU-only node fits").
    pub score: f64,
    pub score_breakdown: String,
    pub placed_at: Millis,
    pub started_at: Option<Millis>,
    pub ended_at: Option<Millis>,
    pub exit_code: Option<i32>,
    pub class: Option<FailureClass>,
    /// Id of the classifier rule that decided the class.
    pub rule: Option<String>,
    /// The line that decided the class.
    pub evidence: Option<String>,
    pub cost_usd: f64,
    /// The provider's own handle (job id, pid, instance id), once known.
    pub provider_ref: Option<String>,
    /// The random part of the attempt's token (see [`AttemptId::token`]);
    /// empty for attempts from before nonces.
    #[serde(default)]
    pub nonce: String,
    /// Why Canopy is stopping it, once Canopy decided or was asked to: the
    /// stop is durable from that moment and is carried out (with this
    /// outcome) after any restart.
    #[serde(default)]
    pub stop: Option<ProviderEnd>,
    /// A gang's nodes in rank order (`node` is rank 0's); empty for one node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// The checkpoint it resumed from and the newest complete one it left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointNote>,
}

/// An attempt's checkpoints: what it resumed from, what it left.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckpointNote {
    /// The complete checkpoint handed to it at launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed: Option<SavedCheckpoint>,
    /// The newest complete checkpoint when it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved: Option<SavedCheckpoint>,
}

/// One complete checkpoint: its directory's name, when it was marked
/// complete, its size, and which attempt wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SavedCheckpoint {
    pub name: String,
    pub at: Millis,
    pub bytes: u64,
    /// The attempt number that wrote it.
    pub attempt: u32,
}

impl AttemptRecord {
    /// Every node the attempt holds, in rank order.
    pub fn all_nodes(&self) -> Vec<String> {
        if self.nodes.is_empty() { vec![self.node.clone()] } else { self.nodes.clone() }
    }

    /// Its node, or a gang's nodes in rank order: `n1,n2`.
    pub fn nodes_label(&self) -> String {
        if self.nodes.is_empty() { self.node.clone() } else { self.nodes.join(",") }
    }

    /// The token the attempt's provider knows it by.
    pub fn token(&self, store_id: &str) -> String {
        self.id.token(store_id, &self.nonce)
    }
}

/// What an event is about; events are append-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    Submitted,
    Unschedulable,
    Placed,
    Launched,
    Adopted,
    Running,
    StatusUnreachable,
    Ended,
    Retry,
    Failed,
    Succeeded,
    CancelRequested,
    Cancelled,
    TerminateRequested,
    Lost,
    Reconciled,
    Outputs,
    Quarantined,
    /// An operator acknowledged the failure.
    Acknowledged,
    /// A checkpoint was left by an attempt or handed to the next.
    Checkpoint,
    /// A provider refused a launch for lack of capacity: nothing ran, no
    /// attempt was spent, and the workload is placed elsewhere or waits.
    Refused,
    /// An owner's work takes its capacity back from borrowed work: who is
    /// stopped, and why each was chosen.
    Reclaim,
    /// A budget on the workload's tenant or token: it holds the workload,
    /// passed 80 % or 100 % of its period's limit, or stops it (hard).
    Budget,
    /// A webhook delivery was tried: delivered, to be tried again, or
    /// given up.
    Webhook,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::Unschedulable => "unschedulable",
            Self::Placed => "placed",
            Self::Launched => "launched",
            Self::Adopted => "adopted",
            Self::Running => "running",
            Self::StatusUnreachable => "status-unreachable",
            Self::Ended => "ended",
            Self::Retry => "retry",
            Self::Failed => "failed",
            Self::Succeeded => "succeeded",
            Self::CancelRequested => "cancel-requested",
            Self::Cancelled => "cancelled",
            Self::TerminateRequested => "terminate-requested",
            Self::Lost => "lost",
            Self::Reconciled => "reconciled",
            Self::Outputs => "outputs",
            Self::Quarantined => "quarantined",
            Self::Acknowledged => "acknowledged",
            Self::Checkpoint => "checkpoint",
            Self::Refused => "refused",
            Self::Reclaim => "reclaim",
            Self::Budget => "budget",
            Self::Webhook => "webhook",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EventRecord {
    pub at: Millis,
    pub workload: WorkloadId,
    pub attempt: Option<AttemptId>,
    pub kind: EventKind,
    /// One human line: what happened and why (for retries: the rule and
    /// reason that decided).
    pub message: String,
}

/// One attempt outcome as evidence about where it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HealthObservation {
    pub at: Millis,
    pub provider: String,
    pub pool: String,
    pub node: String,
    /// `None` when the attempt succeeded.
    pub class: Option<FailureClass>,
    /// How long the attempt ran (0 when it never started), for the rate
    /// of interruptions per running hour.
    #[serde(default)]
    pub ran_s: f64,
    /// The stop was free (`engine::retry::stop_is_free`): not the
    /// workload's fault, and it resumes with progress.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub free: bool,
    /// Not an outcome: an operator ended the node's quarantine
    /// (`canopy unquarantine`). Replayed with the outcomes on restart, so
    /// the lift holds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lift: bool,
}

/// One state-changing request, as the audit trail keeps it: who asked,
/// from where, what, and what came of it. Written by the engine shell in
/// the same transaction as the change it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditRecord {
    pub at: Millis,
    /// A token's name, or `local:USER` for the store's owner on the socket.
    pub principal: String,
    /// Where the request came from: `socket (uid 1000)`, `127.0.0.1:53122`.
    pub origin: String,
    /// What was asked: `submit`, `cancel`, `cordon`, `token-create`…
    pub action: String,
    /// What it was asked of: a workload id, a node, a token's name.
    pub target: Option<String>,
    /// `ok`, `existing`, or `refused: …` with the reason.
    pub outcome: String,
    /// The operator's reason, when the request carried one.
    pub reason: Option<String>,
}

/// An operator's standing instruction about a node — cordoned (no new
/// work) or draining — with who gave it, when and why. Durable: it
/// survives restarts and inventory refreshes until an operator lifts it
/// or `until` passes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeIntent {
    pub node: String,
    pub state: crate::fleet::NodeState,
    /// The principal that asked.
    pub by: String,
    pub reason: Option<String>,
    pub at: Millis,
    /// A cordon that lapses by itself.
    pub until: Option<Millis>,
}

/// Where a webhook delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryState {
    /// Not delivered yet: due at `next_at`.
    Pending,
    /// The receiver answered 2xx.
    Delivered,
    /// The retry period passed without a 2xx.
    GivenUp,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::GivenUp => "given-up",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => DeliveryState::Pending,
            "delivered" => DeliveryState::Delivered,
            "given-up" => DeliveryState::GivenUp,
            _ => return None,
        })
    }
}

/// One webhook delivery: written in the same commit as the change that
/// causes it (so a crash never loses one), then again after each try. Its
/// id is the `Canopy-Delivery` header, the same on every try.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryRecord {
    pub id: u64,
    pub workload: WorkloadId,
    /// What happened: `running`, `succeeded`, `failed`, `cancelled`,
    /// `retrying`.
    pub event: String,
    pub url: String,
    /// The JSON body, exactly as signed and sent on every try.
    pub body: String,
    pub created_at: Millis,
    pub state: DeliveryState,
    /// Tries made so far.
    pub tries: u32,
    /// When the next try is due (pending only).
    pub next_at: Option<Millis>,
    /// The last try's outcome: `200`, `503`, `connect timed out`, ...
    pub last: Option<String>,
}

/// Everything the core asks the journal to make durable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    Workload(Box<WorkloadRecord>),
    Attempt(Box<AttemptRecord>),
    Event(EventRecord),
    Health(HealthObservation),
    Audit(Box<AuditRecord>),
    /// A node's operator intent set (`Some`) or lifted (`None`).
    NodeIntent {
        node: String,
        intent: Option<Box<NodeIntent>>,
    },
    /// A webhook delivery, new or after a try.
    Delivery(Box<DeliveryRecord>),
}

/// One journal commit: its records and the sequence number the journal
/// gave it. Sequence numbers only grow, so a client that saw `seq` resumes
/// from `seq + 1` and misses nothing (`GET /v1/stream`, `Last-Event-ID`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub seq: u64,
    pub records: Vec<Record>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_tokens_round_trip_and_are_store_scoped() {
        let a = AttemptId { workload: WorkloadId(17), n: 2 };
        let t = a.token("3f9a1c", "");
        assert_eq!(t, "canopy-3f9a1c-w17-a2");
        assert_eq!(AttemptId::from_token(&t, "3f9a1c"), Some(a));
        let t = a.token("3f9a1c", "00ff00ff00ff00ff");
        assert_eq!(t, "canopy-3f9a1c-w17-a2-00ff00ff00ff00ff");
        assert_eq!(AttemptId::parse_token(&t, "3f9a1c"), Some((a, "00ff00ff00ff00ff")));
        assert_eq!(AttemptId::from_token("canopy-3f9a1c-w17-a2-zz", "3f9a1c"), None);
        assert_eq!(AttemptId::from_token("canopy-3f9a1c-w1x-a2", "3f9a1c"), None);
        assert_eq!(AttemptId::from_token(&t, "000000"), None);
        assert_eq!(AttemptId::from_token("someone-elses-job", "3f9a1c"), None);
        assert_eq!(a.to_string(), "w-17.2");
        assert_eq!("w-17".parse::<WorkloadId>().unwrap(), WorkloadId(17));
    }

    #[test]
    fn workload_ids_are_the_same_string_in_json_and_read_back_in_any_form() {
        assert_eq!(serde_json::to_string(&WorkloadId(17)).unwrap(), "\"w-17\"");
        for json in ["\"w-17\"", "\"17\"", "17"] {
            assert_eq!(serde_json::from_str::<WorkloadId>(json).unwrap(), WorkloadId(17), "{json}");
        }
        assert!(serde_json::from_str::<WorkloadId>("\"job-17\"").is_err());
    }
}
