//! The workload spec: what a workload needs, never which SKU.
//!
//! This module owns the spec's types and their documented defaults.
//! [`load`] turns TOML or JSON text into a [`Spec`] with diagnostics that
//! point at file:line:col; [`validate`] holds the semantic checks. Nothing
//! here does I/O except [`load::load_file`], which only reads the file.
//!
//! The field names are the public contract: they appear in spec files, in
//! `canopy schema`, and in the README's reference.

use crate::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use crate::units::{Glob, HumanDuration};
use schema::{
    ABSOLUTE_PATH_PATTERN, ARG_PATTERN, ENV_NAME_PATTERN, IMAGE_PATTERN, NAME_PATTERN, NOT_BLANK,
    WORKDIR_PATTERN,
};
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use validate::{
    MAX_ARGV, MAX_ATTEMPTS, MAX_CPU_CORES, MAX_DISK_GB, MAX_GPUS, MAX_INPUTS, MAX_MEMORY_GB, MAX_MODEL_BYTES,
    MAX_NAME_CHARS, MAX_NODES, MAX_OUTPUTS, MAX_PRIORITY,
};

mod diagnostic;
mod fields;
pub mod load;
mod locate;
mod repair;
pub mod schema;
pub mod secrets;
mod translate;
pub mod validate;

pub use load::{Diagnostic, Format, Loaded, Severity, SpecError};

/// A workload spec. See the README's "Workload spec" section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Human name; need not be unique. Letters, digits, `-`, `_`, `.`.
    #[schemars(length(max = MAX_NAME_CHARS), regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// What sort of work this is; shapes defaults and capability preferences.
    #[serde(default)]
    pub kind: WorkloadKind,
    /// 0 (lowest) to 100 (highest). Higher-priority workloads are placed first.
    #[serde(default = "default_priority")]
    #[schemars(range(max = MAX_PRIORITY))]
    pub priority: u32,
    /// Typical wall-clock time, used for cost estimates. Optional.
    #[serde(default)]
    pub expected_runtime: Option<HumanDuration>,
    /// Free-form labels for filtering in the console and CLI.
    #[serde(default)]
    #[schemars(transform = schema::labels)]
    pub labels: BTreeMap<String, String>,
    pub runtime: Runtime,
    #[serde(default)]
    pub resources: Resources,
    #[serde(default)]
    pub constraints: Constraints,
    #[serde(default)]
    pub preferences: Preferences,
    #[serde(default)]
    pub retry: RetryPolicy,
    #[serde(default)]
    #[schemars(length(max = MAX_INPUTS))]
    pub inputs: Vec<Input>,
    #[serde(default)]
    #[schemars(length(max = MAX_OUTPUTS))]
    pub outputs: Vec<Output>,
    /// Where the workload saves checkpoints, so a retry resumes from the
    /// newest complete one instead of starting over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// Whom to call back when the workload changes state: a webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify: Option<Notify>,
}

/// `[notify]`: a webhook called when the workload changes state, with a
/// signed JSON body (README, "Webhooks").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Notify {
    /// The receiver: an `https://` URL (plain `http://` only where the
    /// server's admin allows it), without credentials.
    #[schemars(length(max = crate::notify::target::MAX_URL), regex(pattern = r"^[hH][tT][tT][pP][sS]?://"))]
    pub webhook: String,
    /// Which changes call it; the default is the ends: `succeeded`,
    /// `failed`, `cancelled`.
    #[serde(default = "NotifyOn::ends")]
    #[schemars(length(min = 1))]
    pub events: Vec<NotifyOn>,
}

/// A change a webhook may be called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NotifyOn {
    /// An attempt started running.
    Running,
    Succeeded,
    Failed,
    Cancelled,
    /// An attempt ended and another will follow.
    Retrying,
}

impl NotifyOn {
    pub const ALL: [NotifyOn; 5] =
        [NotifyOn::Running, NotifyOn::Succeeded, NotifyOn::Failed, NotifyOn::Cancelled, NotifyOn::Retrying];

    pub fn ends() -> Vec<NotifyOn> {
        vec![NotifyOn::Succeeded, NotifyOn::Failed, NotifyOn::Cancelled]
    }

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyOn::Running => "running",
            NotifyOn::Succeeded => "succeeded",
            NotifyOn::Failed => "failed",
            NotifyOn::Cancelled => "cancelled",
            NotifyOn::Retrying => "retrying",
        }
    }
}

impl Spec {
    /// A spec with this name and command and every other field at the
    /// default the loader fills in.
    pub fn new(name: impl Into<String>, command: Vec<String>) -> Self {
        Spec {
            name: name.into(),
            kind: WorkloadKind::default(),
            priority: default_priority(),
            expected_runtime: None,
            labels: BTreeMap::new(),
            runtime: Runtime { command, ..Runtime::default() },
            resources: Resources::default(),
            constraints: Constraints::default(),
            preferences: Preferences::default(),
            retry: RetryPolicy::default(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            checkpoint: None,
            notify: None,
        }
    }

    /// Nodes the workload runs on at once: 1, or a gang's size.
    pub fn nodes(&self) -> u32 {
        self.resources.nodes.max(1)
    }

    /// Hex SHA-256 of the spec's canonical JSON: equal specs hash equal
    /// whatever the formatting, key order or format they were written in.
    pub fn content_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        // Serializing plain data (strings, numbers, maps with string keys)
        // cannot fail.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        hex::encode(Sha256::digest(&bytes))
    }
}

fn default_priority() -> u32 {
    50
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    Training,
    FineTuning,
    Inference,
    #[default]
    Batch,
}

/// How to start the workload.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// Container image. Omit to run a plain process.
    #[serde(default)]
    #[schemars(regex(pattern = IMAGE_PATTERN))]
    pub image: Option<String>,
    /// The argv to run: no shell is involved. Use `["sh", "-c", "..."]` for one.
    #[schemars(
        length(min = 1, max = MAX_ARGV),
        inner(regex(pattern = ARG_PATTERN)),
        transform = schema::program_not_blank
    )]
    pub command: Vec<String>,
    /// Working directory inside the workload's environment.
    #[serde(default)]
    #[schemars(regex(pattern = WORKDIR_PATTERN))]
    pub workdir: Option<String>,
    /// Plain environment variables. Never put secret values here: see `secrets`.
    #[serde(default)]
    #[schemars(transform = schema::env)]
    pub env: BTreeMap<String, String>,
    /// Names of secrets, resolved at launch and exported under the same name.
    /// Values are never stored, logged or shown.
    #[serde(default)]
    #[schemars(inner(regex(pattern = ENV_NAME_PATTERN)), extend("uniqueItems" = true))]
    pub secrets: Vec<String>,
    /// How long a stop (cancel, max runtime, cost cap, eviction) waits after
    /// SIGTERM before it SIGKILLs the workload's processes; 30s when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace: Option<HumanDuration>,
}

impl Runtime {
    /// Between SIGTERM and SIGKILL when Canopy stops the workload.
    pub const DEFAULT_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(30);
    /// The longest `stop_grace` a spec may ask for.
    pub const MAX_STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

    pub fn stop_grace(&self) -> std::time::Duration {
        self.stop_grace.map_or(Self::DEFAULT_STOP_GRACE, |d| d.0)
    }
}

/// What the workload needs from one node, and from how many.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = schema::resources)]
pub struct Resources {
    /// Nodes to run on at once, each with everything below (a gang: one
    /// launcher per node, all placed together or not at all). 1 when unset.
    #[serde(default = "default_nodes", skip_serializing_if = "is_one")]
    #[schemars(range(min = 1, max = MAX_NODES))]
    pub nodes: u32,
    /// The network a gang's nodes need between them: `ethernet`, `roce`
    /// (InfiniBand serves it too) or `infiniband`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<Fabric>,
    /// The least bandwidth per node on that network, in Gbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub fabric_gbps: Option<f64>,
    /// GPUs on one node. 0 for CPU-only work.
    #[serde(default)]
    #[schemars(range(max = MAX_GPUS))]
    pub gpus: u32,
    /// Memory per GPU in GB, as `{ min = 24 }`, `{ min = 24, max = 80 }` or just `24` (a minimum).
    #[serde(default)]
    pub gpu_memory_gb: Option<GbRange>,
    /// Which accelerators are acceptable.
    #[serde(default)]
    pub accelerator: Option<AcceleratorReq>,
    /// Required GPU-to-GPU link on the node (meaningful when gpus > 1).
    #[serde(default)]
    pub interconnect: Option<Interconnect>,
    #[serde(default = "default_cpu")]
    #[schemars(range(max = MAX_CPU_CORES), extend("exclusiveMinimum" = 0))]
    pub cpu_cores: f64,
    #[serde(default = "default_memory")]
    #[schemars(range(max = MAX_MEMORY_GB), extend("exclusiveMinimum" = 0))]
    pub memory_gb: f64,
    #[serde(default)]
    #[schemars(range(min = 0, max = MAX_DISK_GB))]
    pub disk_gb: f64,
}

fn default_cpu() -> f64 {
    1.0
}
fn default_nodes() -> u32 {
    1
}
fn is_one(n: &u32) -> bool {
    *n == 1
}
fn default_memory() -> f64 {
    1.0
}

impl Default for Resources {
    fn default() -> Self {
        Self {
            nodes: 1,
            fabric: None,
            fabric_gbps: None,
            gpus: 0,
            gpu_memory_gb: None,
            accelerator: None,
            interconnect: None,
            cpu_cores: default_cpu(),
            memory_gb: default_memory(),
            disk_gb: 0.0,
        }
    }
}

/// An inclusive range in GB; either bound may be omitted.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct GbRange {
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
}

impl GbRange {
    pub fn contains(&self, v: f64) -> bool {
        self.min.is_none_or(|m| v >= m) && self.max.is_none_or(|m| v <= m)
    }
}

/// Accepts `24` (a minimum) or `{ min = 24, max = 80 }`. Written as a
/// visitor rather than an untagged enum so that a misspelt key (`mn`) is
/// reported as an unknown field at that key, not as a vague type error.
impl<'de> Deserialize<'de> for GbRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, SeqAccess, Visitor};

        #[derive(Deserialize)]
        #[serde(field_identifier, rename_all = "lowercase")]
        enum Key {
            Min,
            Max,
        }

        const HOW: &str = "invalid GPU memory; write a number of GB (a minimum) like 24, or a table like { min = 24, max = 80 }";

        struct GbVisitor;

        impl<'de> Visitor<'de> for GbVisitor {
            type Value = GbRange;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number of GB or a table like { min = 24, max = 80 }")
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<GbRange, E> {
                Ok(GbRange { min: Some(v), max: None })
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<GbRange, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<GbRange, E> {
                self.visit_f64(v as f64)
            }
            fn visit_str<E: Error>(self, _: &str) -> Result<GbRange, E> {
                Err(E::custom(HOW))
            }
            fn visit_bool<E: Error>(self, _: bool) -> Result<GbRange, E> {
                Err(E::custom(HOW))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<GbRange, A::Error> {
                Err(A::Error::custom(HOW))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<GbRange, A::Error> {
                let mut range = GbRange::default();
                while let Some(key) = map.next_key::<Key>()? {
                    let slot = match key {
                        Key::Min => &mut range.min,
                        Key::Max => &mut range.max,
                    };
                    if slot.is_some() {
                        return Err(A::Error::custom(
                            "GPU memory bound set twice; keep one `min` and one `max`",
                        ));
                    }
                    *slot = map.next_value::<Option<f64>>()?;
                }
                Ok(range)
            }
        }

        d.deserialize_any(GbVisitor)
    }
}

/// `24` or `{ min, max }`: the schema says both, as the loader accepts both.
impl JsonSchema for GbRange {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "GbRange".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schema::gb_range()
    }
}

/// Acceptable accelerators, by capability rather than SKU.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = schema::accelerator)]
pub struct AcceleratorReq {
    #[serde(default)]
    pub vendor: Option<Vendor>,
    /// Any of these families; empty means any family of the vendor.
    #[serde(default)]
    pub family: Vec<Family>,
    #[serde(default)]
    pub min_compute_capability: Option<ComputeCapability>,
    /// One exact model where a family is too coarse (`"A100"`: A10G and
    /// A100 are both Ampere). Matched as a whole word in the pool's model
    /// name, case-insensitively.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_MODEL_BYTES), transform = schema::not_blank_text)]
    pub model: Option<String>,
}

/// Hard limits: a placement that breaks one is never chosen.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Terminate and fail the attempt (class `timeout`) past this.
    #[serde(default)]
    pub max_runtime: Option<HumanDuration>,
    /// Total spend cap across all attempts (class `cost-cap` when reached).
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub max_cost_usd: Option<f64>,
    /// Never place where this workload's share costs more per hour.
    #[serde(default)]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub max_hourly_usd: Option<f64>,
    /// Allowed providers (names or globs). Empty: any.
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub providers: Vec<Glob>,
    /// Allowed regions (names or globs). Empty: any.
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub regions: Vec<Glob>,
    /// Compliance tags every chosen pool must carry (e.g. "gdpr").
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub compliance: Vec<String>,
    /// Capability tags every chosen pool must carry (e.g. "long-training").
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub capabilities: Vec<String>,
    /// May run on interruptible (spot/preemptible) capacity.
    #[serde(default)]
    pub interruptible: bool,
    /// Wait for capacity that is expected to appear (a pool being added, a
    /// provider scaling up) instead of being refused at submit when no pool
    /// of the configured fleet could run it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wait_for_capacity: bool,
    /// How close a gang's nodes must be: `same-switch`, `same-pool` (the
    /// default for gangs) or `same-region`. Ignored for one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

/// How close a gang's nodes must be to each other.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Topology {
    /// Behind one leaf switch (or rack), within one pool.
    SameSwitch,
    /// In one pool.
    #[default]
    SamePool,
    /// In one region of one provider, across pools of the same shape where
    /// the provider can launch one gang over several pools.
    SameRegion,
}

impl Topology {
    pub fn as_str(self) -> &'static str {
        match self {
            Topology::SameSwitch => "same-switch",
            Topology::SamePool => "same-pool",
            Topology::SameRegion => "same-region",
        }
    }
}

impl std::fmt::Display for Topology {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Soft wishes: they shape the score, never exclude.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Preferences {
    /// Prefer capacity expected to start within this long.
    #[serde(default)]
    pub startup_within: Option<HumanDuration>,
    /// Prefer these regions (names or globs).
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub regions: Vec<Glob>,
    /// Prefer pools carrying these capability tags.
    #[serde(default)]
    #[schemars(transform = schema::items_not_blank)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub optimize: Optimize,
    /// Prefer reserved (already paid for) capacity.
    #[serde(default)]
    pub reserved_first: bool,
}

/// Which way the score leans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Optimize {
    Cost,
    Speed,
    Reliability,
    #[default]
    Balanced,
}

/// How failed attempts are retried. Infrastructure failures retry
/// elsewhere from their own budget; the workload's own errors only as far
/// as `app_errors` allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts the workload may spend, the first included. Attempts ended
    /// by the infrastructure (see `infra_retries`) and launches refused for
    /// lack of capacity do not spend one.
    #[serde(default = "default_max_attempts")]
    #[schemars(range(min = 1, max = MAX_ATTEMPTS))]
    pub max_attempts: u32,
    /// How many failures classed `app` may be retried.
    #[serde(default)]
    pub app_errors: u32,
    /// How many infrastructure failures (node, preempted, comm, io,
    /// provider) are retried elsewhere without spending an attempt, as
    /// Kubernetes ignores disruptions and SkyPilot recovers preemptions.
    /// 0: the first one spends an attempt like any other failure.
    #[serde(default = "default_infra_retries")]
    pub infra_retries: u32,
    /// Delay before the first retry; doubles each time.
    #[serde(default = "default_backoff")]
    pub backoff: HumanDuration,
    /// Ceiling for the doubling delay.
    #[serde(default = "default_backoff_max")]
    pub backoff_max: HumanDuration,
}

fn default_max_attempts() -> u32 {
    3
}
fn default_infra_retries() -> u32 {
    10
}
fn default_backoff() -> HumanDuration {
    HumanDuration::from_secs(10)
}
fn default_backoff_max() -> HumanDuration {
    HumanDuration::from_secs(600)
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: default_max_attempts(),
            app_errors: 0,
            infra_retries: default_infra_retries(),
            backoff: default_backoff(),
            backoff_max: default_backoff_max(),
        }
    }
}

/// Checkpoints: the workload saves its progress under `path` (exported
/// as `$CANOPY_CHECKPOINT_DIR`) and marks each complete; the next attempt
/// finds the newest complete one at the same place and resumes from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// Absolute path inside the workload's environment, without `..`
    /// (where a container mounts it; processes get their own directory).
    #[schemars(regex(pattern = ABSOLUTE_PATH_PATTERN))]
    pub path: String,
    /// Which complete checkpoints Canopy keeps and hands on.
    #[serde(default)]
    pub keep: CheckpointKeep,
    /// How often the workload expects to save one; shown beside the age of
    /// the newest, and used to estimate the work a failure loses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<HumanDuration>,
    /// Largest checkpoint Canopy copies between attempts, in GB, where the
    /// provider has no shared storage. 10 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub max_gb: Option<f64>,
}

impl Checkpoint {
    /// The marker file that makes a checkpoint directory complete.
    pub const COMPLETE_MARKER: &'static str = "COMPLETE";
    pub const DEFAULT_MAX_GB: f64 = 10.0;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckpointKeep {
    /// The newest complete checkpoint only.
    #[default]
    Latest,
}

/// Data the workload reads. Its region drives the locality score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// A URI: `file:///…`, `s3://…`, `gs://…`, `az://…`, `hf://…`, `http(s)://…`.
    #[schemars(regex(pattern = schema::source_pattern()))]
    pub source: String,
    /// Where the data lives.
    #[serde(default)]
    #[schemars(regex(pattern = NOT_BLANK))]
    pub region: Option<String>,
    /// Approximate size, to weigh locality between inputs.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub size_gb: Option<f64>,
    /// Where the input appears to the workload (absolute path, without `..`).
    #[serde(default)]
    #[schemars(regex(pattern = ABSOLUTE_PATH_PATTERN))]
    pub mount: Option<String>,
}

/// A file or directory the workload writes, collected after the attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Output {
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// Absolute path inside the workload's environment, without `..`.
    #[schemars(regex(pattern = ABSOLUTE_PATH_PATTERN))]
    pub path: String,
    /// Fail the attempt (class `app`: the workload did not write it under $CANOPY_OUTPUT_DIR) when the output is missing.
    #[serde(default)]
    pub required: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_spec_is_what_the_loader_makes_of_a_name_and_a_command() {
        let loaded: Spec =
            serde_json::from_value(serde_json::json!({ "name": "x", "runtime": { "command": ["a", "b"] } }))
                .unwrap();
        assert_eq!(Spec::new("x", vec!["a".into(), "b".into()]), loaded);
    }
}
