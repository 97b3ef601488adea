//! slurmrestd's `openapi/v0.0.38` (Slurm 22.05): the wire types and calls.
//!
//! This module owns everything version-specific: paths, JSON shapes and
//! the quirks of this version — `errors[]` may be non-empty in an HTTP 200
//! answer and must always be checked, a bad token answers 500 rather than
//! 401, an unknown job id answers 500 with error 2017, `exit_code` is a raw
//! wait status, and the presence of `requeue` in a submission means "true"
//! whatever its value. A later version (v0.0.40+) gets its own module
//! beside this one with the same [`Api`] surface. It never logs the token
//! and never puts it in an error.

use crate::providers::SecretValue;
use reqwest::{Client, Method, StatusCode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const PREFIX: &str = "/slurm/v0.0.38";
/// Slurm's "Invalid job id specified".
const INVALID_JOB_ID: i64 = 2017;

/// One error as slurmrestd reports it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WireError {
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub error_number: Option<i64>,
    #[serde(default)]
    pub error_code: Option<i64>,
}

impl WireError {
    fn number(&self) -> Option<i64> {
        self.error_number.or(self.error_code)
    }
    fn text(&self) -> String {
        let parts: Vec<&str> = [self.error.as_deref(), self.description.as_deref()]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect();
        match self.number() {
            Some(n) => format!("{} (error {n})", parts.join(": ")),
            None => parts.join(": "),
        }
    }
}

/// What a call failed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No connection or no answer.
    Unreachable(String),
    /// 401/403: the token is missing, wrong or expired.
    Auth(String),
    /// The job does not exist (any more).
    NoSuchJob,
    /// Slurm refused: HTTP status and its errors.
    Slurm { status: u16, message: String, numbers: Vec<i64> },
}

impl std::error::Error for CallError {}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) => write!(f, "slurmrestd unreachable: {m}"),
            CallError::Auth(m) => {
                write!(f, "slurmrestd refused the token ({m}); renew it with `scontrol token`")
            }
            CallError::NoSuchJob => f.write_str("no such job"),
            CallError::Slurm { status, message, .. } => {
                write!(f, "slurmrestd answered HTTP {status}: {message}")
            }
        }
    }
}

#[derive(Debug, Deserialize)]
struct Envelope<T> {
    #[serde(default)]
    errors: Vec<WireError>,
    #[serde(flatten)]
    body: T,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Node {
    pub name: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub state_flags: Vec<String>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub gres: String,
    #[serde(default)]
    pub gres_used: String,
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub alloc_cpus: u32,
    #[serde(default)]
    pub real_memory: u64,
    #[serde(default)]
    pub alloc_memory: u64,
    #[serde(default)]
    pub partitions: Vec<String>,
    #[serde(default)]
    pub features: String,
    /// The address Slurm reaches the node at (`NodeAddr`): what a gang's
    /// launchers use to reach each other (node names and host names may
    /// not resolve, or may be shared).
    #[serde(default)]
    pub address: String,
}

#[derive(Debug, Default, Deserialize)]
struct Nodes {
    #[serde(default)]
    nodes: Vec<Node>,
}

/// A job as `/job/{id}` and `/jobs` report it (only what Canopy reads).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Job {
    pub job_id: u64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub comment: String,
    #[serde(default)]
    pub job_state: String,
    #[serde(default)]
    pub state_reason: String,
    #[serde(default)]
    pub nodes: String,
    /// Raw wait status: `>> 8` is the exit code, `& 0x7f` the signal.
    #[serde(default)]
    pub exit_code: i64,
    #[serde(default)]
    pub restart_cnt: u32,
    #[serde(default)]
    pub submit_time: i64,
    /// What the job holds: `cpu=2,mem=512M,node=1,billing=2,gres/gpu=2`
    /// (GPUs and memory only where accounting tracks them).
    #[serde(default)]
    pub tres_alloc_str: String,
    /// What it asked for, in the same form (memory is here when the
    /// allocation string lacks it).
    #[serde(default)]
    pub tres_req_str: String,
    /// GRES held per node: `gpu:h100:2(IDX:0-1)`, in the order of
    /// `job_resources.allocated_nodes`.
    #[serde(default)]
    pub gres_detail: Vec<String>,
    #[serde(default)]
    pub node_count: u32,
    /// What each node of the allocation holds (absent while pending).
    #[serde(default)]
    pub job_resources: Option<JobResources>,
}

/// A job's allocation, node by node.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobResources {
    #[serde(default)]
    pub allocated_nodes: Vec<AllocatedNode>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct AllocatedNode {
    #[serde(default)]
    pub nodename: String,
    #[serde(default)]
    pub cpus_used: u32,
    /// MB.
    #[serde(default)]
    pub memory_allocated: u64,
}

#[derive(Debug, Default, Deserialize)]
struct Jobs {
    #[serde(default)]
    jobs: Vec<Job>,
}

#[derive(Debug, Default, Deserialize)]
struct Submitted {
    #[serde(default)]
    job_id: Option<u64>,
}

/// The `job` part of a submission (only the keys Canopy sets).
#[derive(Debug, Clone, Default, Serialize)]
pub struct JobProperties {
    pub name: String,
    pub comment: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    pub current_working_directory: String,
    pub standard_output: String,
    pub standard_error: String,
    /// Required by this version, even when empty.
    pub environment: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    pub nodes: u32,
    pub cpus_per_task: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_per_node: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constraints: Option<String>,
    /// Tasks in all (a gang: one per node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tasks_per_node: Option<u32>,
    /// The nodes the job must run on (`ReqNodeList`, sbatch's
    /// `--nodelist`). This version disables `required_nodes`; `nodelist`
    /// is what it accepts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
}

#[derive(Debug, Serialize)]
struct Submission<'a> {
    script: &'a str,
    job: &'a JobProperties,
}

/// A slurmrestd endpoint with its credentials.
#[derive(Clone)]
pub struct Api {
    client: Client,
    base: String,
    user: String,
    token: SecretValue,
}

impl Api {
    pub fn new(client: Client, url: &str, user: &str, token: SecretValue) -> Self {
        Self { client, base: url.trim_end_matches('/').to_string(), user: user.into(), token }
    }

    async fn call<T: for<'de> Deserialize<'de> + Default>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, CallError> {
        let url = format!("{}{PREFIX}{path}", self.base);
        let mut req = self
            .client
            .request(method, &url)
            .header("X-SLURM-USER-NAME", &self.user)
            .header("X-SLURM-USER-TOKEN", self.token.expose());
        if let Some(b) = body {
            req = req.header("Content-Type", "application/json").body(b);
        }
        let resp =
            req.send().await.map_err(|e| CallError::Unreachable(crate::providers::http_error_text(&e)))?;
        let status = resp.status();
        let text =
            resp.text().await.map_err(|e| CallError::Unreachable(crate::providers::http_error_text(&e)))?;
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(CallError::Auth(format!("HTTP {}", status.as_u16())));
        }
        let env: Envelope<T> = match serde_json::from_str(&text) {
            Ok(env) => env,
            Err(e) if status.is_success() => {
                return Err(CallError::Slurm {
                    status: status.as_u16(),
                    message: format!("unreadable answer: {e}"),
                    numbers: vec![],
                });
            }
            Err(_) => {
                let message = text.chars().take(300).collect::<String>();
                return Err(CallError::Slurm { status: status.as_u16(), message, numbers: vec![] });
            }
        };
        if env.errors.is_empty() && status.is_success() {
            return Ok(env.body);
        }
        let numbers: Vec<i64> = env.errors.iter().filter_map(WireError::number).collect();
        if numbers.contains(&INVALID_JOB_ID) {
            return Err(CallError::NoSuchJob);
        }
        let message = env.errors.iter().map(WireError::text).collect::<Vec<_>>().join("; ");
        let message = if message.is_empty() { "no error given".to_string() } else { message };
        Err(CallError::Slurm { status: status.as_u16(), message, numbers })
    }

    pub async fn ping(&self) -> Result<(), CallError> {
        self.call::<serde_json::Value>(Method::GET, "/ping", None).await.map(|_| ())
    }

    pub async fn nodes(&self) -> Result<Vec<Node>, CallError> {
        Ok(self.call::<Nodes>(Method::GET, "/nodes", None).await?.nodes)
    }

    pub async fn jobs(&self) -> Result<Vec<Job>, CallError> {
        Ok(self.call::<Jobs>(Method::GET, "/jobs", None).await?.jobs)
    }

    pub async fn job(&self, id: u64) -> Result<Option<Job>, CallError> {
        match self.call::<Jobs>(Method::GET, &format!("/job/{id}"), None).await {
            Ok(j) => Ok(j.jobs.into_iter().next()),
            Err(CallError::NoSuchJob) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn submit(&self, script: &str, job: &JobProperties) -> Result<u64, CallError> {
        let body = serde_json::to_vec(&Submission { script, job }).map_err(|e| CallError::Slurm {
            status: 0,
            message: e.to_string(),
            numbers: vec![],
        })?;
        let s: Submitted = self.call(Method::POST, "/job/submit", Some(body)).await?;
        s.job_id.ok_or(CallError::Slurm {
            status: 200,
            message: "no job_id in the answer".into(),
            numbers: vec![],
        })
    }

    /// Cancels a job; a job that already ended or is gone counts as done.
    pub async fn cancel(&self, id: u64) -> Result<(), CallError> {
        self.signal(id, None).await
    }

    /// Sends `signal` (`SIGTERM`, `SIGURG`…) to every step of a job,
    /// its batch shell included, without cancelling it; `None` cancels.
    /// A job that already ended or is gone counts as done.
    pub async fn signal(&self, id: u64, signal: Option<&str>) -> Result<(), CallError> {
        let path = match signal {
            Some(s) => format!("/job/{id}?signal={s}"),
            None => format!("/job/{id}"),
        };
        match self.call::<serde_json::Value>(Method::DELETE, &path, None).await {
            Ok(_) | Err(CallError::NoSuchJob) => Ok(()),
            Err(CallError::Slurm { message, .. }) if message.contains("Invalid job id") => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sample_job_and_errors() {
        let text = r#"{"meta":{},"errors":[{"description":"Unable to find JobId=999","error_number":2017,"error":"Invalid job id specified","source":"slurm_load_job"}],"jobs":[]}"#;
        let env: Envelope<Jobs> = serde_json::from_str(text).unwrap();
        assert_eq!(env.errors[0].number(), Some(INVALID_JOB_ID));
        let job = r#"{"errors":[],"jobs":[{"job_id":5,"name":"x","job_state":"RUNNING","exit_code":1792,"restart_cnt":0,"nodes":"n1","comment":"canopy-token=t"}]}"#;
        let env: Envelope<Jobs> = serde_json::from_str(job).unwrap();
        assert_eq!(env.body.jobs[0].exit_code, 1792);
        assert_eq!(env.body.jobs[0].nodes, "n1");
    }

    #[test]
    fn submission_omits_requeue_and_keeps_environment() {
        let p = JobProperties { name: "t".into(), ..Default::default() };
        let v = serde_json::to_value(Submission { script: "#!/bin/sh\n", job: &p }).unwrap();
        assert!(v["job"].get("requeue").is_none());
        assert!(v["job"]["environment"].is_object());
    }
}
