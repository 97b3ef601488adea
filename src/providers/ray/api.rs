//! Ray's Jobs REST API, node list and cluster status, as served by the
//! dashboard (`/api/jobs/`, `/api/v0/nodes`, `/api/cluster_status`): wire
//! types and calls.
//!
//! This module owns the quirks of that API: the trailing slash on
//! `/api/jobs/`, 404 in plain text for an unknown job, 500 with a Python
//! traceback for a duplicate `submission_id`. It never logs the optional
//! auth token and never puts it in an error.

use crate::providers::SecretValue;
use reqwest::{Client, Method, StatusCode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    Unreachable(String),
    Auth(u16),
    NotFound,
    /// The `submission_id` is taken.
    Duplicate,
    Http {
        status: u16,
        message: String,
    },
}

impl std::error::Error for CallError {}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unreachable(m) => write!(f, "Ray dashboard unreachable: {m}"),
            CallError::Auth(s) => write!(f, "Ray refused the token (HTTP {s}); check token_env"),
            CallError::NotFound => f.write_str("no such job"),
            CallError::Duplicate => f.write_str("submission_id already exists"),
            CallError::Http { status, message } => write!(f, "Ray answered HTTP {status}: {message}"),
        }
    }
}

/// A job as `GET /api/jobs/{id}` reports it (only what Canopy reads).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct JobDetails {
    #[serde(default)]
    pub submission_id: Option<String>,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub error_type: Option<String>,
    /// Milliseconds since the epoch.
    #[serde(default)]
    pub start_time: Option<i64>,
    #[serde(default)]
    pub driver_exit_code: Option<i32>,
    /// What the submitter attached (Canopy: its token and spec hash);
    /// Ray may answer null.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Submit {
    pub entrypoint: String,
    pub submission_id: String,
    pub runtime_env: RuntimeEnv,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_cpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint_num_gpus: Option<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub entrypoint_resources: BTreeMap<String, f64>,
    pub metadata: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuntimeEnv {
    pub env_vars: BTreeMap<String, String>,
}

/// One node of `GET /api/v0/nodes?detail=1`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NodeInfo {
    #[serde(default)]
    pub node_id: String,
    #[serde(default)]
    pub node_ip: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub resources_total: BTreeMap<String, f64>,
}

#[derive(Debug, Default, Deserialize)]
struct NodesOuter {
    #[serde(default)]
    data: NodesData,
}
#[derive(Debug, Default, Deserialize)]
struct NodesData {
    #[serde(default)]
    result: NodesResult,
}
#[derive(Debug, Default, Deserialize)]
struct NodesResult {
    #[serde(default)]
    result: Vec<NodeInfo>,
}

/// `GET /api/cluster_status`: the resource shapes Ray's scheduler cannot
/// grant now (`loadMetricsReport.resourceDemand`, `[[shape, count]]`).
#[derive(Debug, Default, Deserialize)]
struct StatusOuter {
    #[serde(default)]
    data: StatusData,
}
#[derive(Debug, Default, Deserialize)]
struct StatusData {
    #[serde(default, rename = "clusterStatus")]
    cluster_status: Option<ClusterStatus>,
}
#[derive(Debug, Default, Deserialize)]
struct ClusterStatus {
    #[serde(default, rename = "loadMetricsReport")]
    load: Option<LoadMetrics>,
}
#[derive(Debug, Default, Deserialize)]
struct LoadMetrics {
    #[serde(default, rename = "resourceDemand")]
    resource_demand: Vec<(BTreeMap<String, f64>, u64)>,
}

#[derive(Debug, Default, Deserialize)]
struct Logs {
    #[serde(default)]
    logs: String,
}

#[derive(Clone)]
pub struct Api {
    client: Client,
    base: String,
    token: Option<SecretValue>,
}

impl Api {
    pub fn new(client: Client, url: &str, token: Option<SecretValue>) -> Self {
        Self { client, base: url.trim_end_matches('/').to_string(), token }
    }

    async fn call(&self, method: Method, path: &str, body: Option<Vec<u8>>) -> Result<String, CallError> {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("Authorization", format!("Bearer {}", t.expose()));
        }
        if let Some(b) = body {
            req = req.header("Content-Type", "application/json").body(b);
        }
        let resp =
            req.send().await.map_err(|e| CallError::Unreachable(crate::providers::http_error_text(&e)))?;
        let status = resp.status();
        let text =
            resp.text().await.map_err(|e| CallError::Unreachable(crate::providers::http_error_text(&e)))?;
        match status {
            s if s.is_success() => Ok(text),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(CallError::Auth(status.as_u16())),
            StatusCode::NOT_FOUND => Err(CallError::NotFound),
            _ if text.contains("already exists") => Err(CallError::Duplicate),
            _ => {
                let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
                Err(CallError::Http { status: status.as_u16(), message: last.chars().take(300).collect() })
            }
        }
    }

    fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, CallError> {
        serde_json::from_str(text)
            .map_err(|e| CallError::Http { status: 200, message: format!("unreadable answer: {e}") })
    }

    pub async fn version(&self) -> Result<(), CallError> {
        self.call(Method::GET, "/api/version", None).await.map(|_| ())
    }

    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, CallError> {
        let text = self.call(Method::GET, "/api/v0/nodes?detail=1", None).await?;
        Ok(Self::parse::<NodesOuter>(&text)?.data.result.result)
    }

    pub async fn job(&self, id: &str) -> Result<Option<JobDetails>, CallError> {
        match self.call(Method::GET, &format!("/api/jobs/{id}"), None).await {
            Ok(t) => Self::parse(&t).map(Some),
            Err(CallError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub async fn jobs(&self) -> Result<Vec<JobDetails>, CallError> {
        let text = self.call(Method::GET, "/api/jobs/", None).await?;
        Self::parse(&text)
    }

    pub async fn submit(&self, s: &Submit) -> Result<(), CallError> {
        let body =
            serde_json::to_vec(s).map_err(|e| CallError::Http { status: 0, message: e.to_string() })?;
        self.call(Method::POST, "/api/jobs/", Some(body)).await.map(|_| ())
    }

    /// The resource shapes Ray cannot grant now, with how many requests
    /// wait for each. `None` when Ray reports no load metrics (an
    /// autoscaler report not yet made): nothing is known.
    pub async fn unmet_demands(&self) -> Result<Option<Vec<BTreeMap<String, f64>>>, CallError> {
        let text = self.call(Method::GET, "/api/cluster_status", None).await?;
        let load = Self::parse::<StatusOuter>(&text)?.data.cluster_status.and_then(|c| c.load);
        Ok(load.map(|l| l.resource_demand.into_iter().filter(|(_, n)| *n > 0).map(|(s, _)| s).collect()))
    }

    pub async fn logs(&self, id: &str) -> Result<String, CallError> {
        let text = self.call(Method::GET, &format!("/api/jobs/{id}/logs"), None).await?;
        Ok(Self::parse::<Logs>(&text)?.logs)
    }

    pub async fn stop(&self, id: &str) -> Result<(), CallError> {
        match self.call(Method::POST, &format!("/api/jobs/{id}/stop"), None).await {
            Ok(_) | Err(CallError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
