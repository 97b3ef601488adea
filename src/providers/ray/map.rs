//! Pure translations for Ray: job status and error types to
//! [`AttemptStatus`], node resources (`GPU`, `accelerator_type:*`) to pools.
//!
//! Owns those tables only: no I/O, no clock.

use super::api::{JobDetails, NodeInfo};
use crate::accel::Interconnect;
use crate::failure::ProviderEnd;
use crate::fleet::{Free, Lifecycle, NodeState, PoolDef, Shape};
use crate::providers::slurm::map::accelerator;
use crate::providers::{AttemptStatus, InventoryNode, InventoryPool};
use std::collections::BTreeMap;
use std::time::Duration;

/// The custom resource prefix naming a node's accelerator.
pub const ACCEL_PREFIX: &str = "accelerator_type:";
/// The capability tag carrying a pool's Ray accelerator type: `ray-accel:H100`.
pub const ACCEL_TAG: &str = "ray-accel:";

/// A job's status at Ray.
pub fn job_status(j: &JobDetails) -> AttemptStatus {
    let msg = || j.message.clone().unwrap_or_default();
    match j.status.as_str() {
        "PENDING" => AttemptStatus::Pending,
        "RUNNING" => AttemptStatus::Running,
        "SUCCEEDED" => AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }),
        "STOPPED" => AttemptStatus::Ended(ProviderEnd::Cancelled),
        "FAILED" => AttemptStatus::Ended(match (j.error_type.as_deref(), j.driver_exit_code) {
            (Some("JOB_SUPERVISOR_ACTOR_START_TIMEOUT" | "JOB_SUPERVISOR_ACTOR_UNSCHEDULABLE"), _) => {
                ProviderEnd::LaunchRejected {
                    message: format!("Ray could not start the job: {}", msg()),
                    capacity: true,
                }
            }
            (Some("RUNTIME_ENV_SETUP_FAILURE" | "JOB_SUPERVISOR_ACTOR_START_FAILURE"), _) => {
                ProviderEnd::BootFailed { message: msg() }
            }
            (Some("JOB_SUPERVISOR_ACTOR_DIED"), None) => ProviderEnd::NodeLost { message: msg() },
            (_, Some(code)) => ProviderEnd::Exited { code },
            (t, None) => ProviderEnd::Unknown {
                message: format!("Ray FAILED ({}): {}", t.unwrap_or("no error type"), msg()),
            },
        }),
        other => AttemptStatus::Ended(ProviderEnd::Unknown {
            message: format!("Ray job status {other}: {}", msg()),
        }),
    }
}

/// The end a gang's driver reported in its logs: its last
/// `CANOPY-GANG-END rank=R node=N … exit=C|signal=S|lost …|unstarted …`
/// line as that rank's end (`unstarted`: the rank could not start on its
/// node and the driver stopped those that had, a failed launch of that
/// node), or its `CANOPY-GANG-UNPLACED` line as a capacity refusal.
/// `None` when it reported neither (it failed before, or was stopped).
pub fn gang_end(logs: &str) -> Option<ProviderEnd> {
    for line in logs.lines().rev() {
        if let Some(rest) = line.strip_prefix("CANOPY-GANG-UNPLACED") {
            return Some(ProviderEnd::LaunchRejected {
                message: format!("Ray could not place the gang:{rest}"),
                capacity: true,
            });
        }
        let Some(rest) = line.strip_prefix("CANOPY-GANG-END ") else { continue };
        let field = |k: &str| rest.split(' ').find_map(|w| w.strip_prefix(k).map(str::to_string));
        let rank = field("rank=")?.parse::<u32>().ok()?;
        let node = field("node=")?;
        let end = if let Some(code) = field("exit=").and_then(|c| c.parse().ok()) {
            ProviderEnd::Exited { code }
        } else if let Some(signal) = field("signal=").and_then(|c| c.parse().ok()) {
            ProviderEnd::Signaled { signal }
        } else if let Some((_, why)) = rest.split_once(" unstarted ") {
            // The driver's output carries the workload's: what is kept of
            // it is bounded.
            let why: String = why.trim().chars().take(300).collect();
            ProviderEnd::BootFailed { message: format!("Ray could not start rank {rank} on {node}: {why}") }
        } else {
            let why = rest.split_once(" lost").map_or("", |(_, w)| w.trim());
            ProviderEnd::NodeLost { message: format!("Ray lost rank {rank}'s launcher on {node}: {why}") }
        };
        return Some(ProviderEnd::Rank { rank, node, end: Box::new(end) });
    }
    None
}

/// What a job's entrypoint asks Ray for (its supervisor actor's
/// resources), as Ray names them in its resource demands.
pub fn entrypoint_request(s: &super::api::Submit) -> BTreeMap<String, f64> {
    let mut r: BTreeMap<String, f64> = s.entrypoint_resources.clone();
    if let Some(c) = s.entrypoint_num_cpus.filter(|c| *c > 0.0) {
        r.insert("CPU".into(), c);
    }
    if let Some(g) = s.entrypoint_num_gpus.filter(|g| *g > 0.0) {
        r.insert("GPU".into(), g);
    }
    r.retain(|_, v| *v > 0.0);
    r
}

/// Whether Ray's scheduler reports `request` among the shapes it cannot
/// grant now: the job waits for capacity. A request of nothing (a gang's
/// driver) never waits for resources. Resource names are compared as Ray
/// spells them in either of its reports (`accelerator_type:X`,
/// `acceleratorType:X`).
pub fn waits_for_resources(request: &BTreeMap<String, f64>, unmet: &[BTreeMap<String, f64>]) -> bool {
    let key = |k: &str| k.chars().filter(|c| *c != '_').collect::<String>().to_ascii_lowercase();
    let norm = |m: &BTreeMap<String, f64>| -> BTreeMap<String, f64> {
        m.iter().filter(|(_, v)| **v > 0.0).map(|(k, v)| (key(k), *v)).collect()
    };
    let want = norm(request);
    !want.is_empty()
        && unmet.iter().map(norm).any(|shape| {
            shape.len() == want.len()
                && want.iter().all(|(k, v)| shape.get(k).is_some_and(|s| (s - v).abs() < 1e-6))
        })
}

/// Whether a status is final.
pub fn is_final(status: &str) -> bool {
    matches!(status, "SUCCEEDED" | "FAILED" | "STOPPED")
}

/// How pools are shaped beyond what Ray reports.
#[derive(Debug, Clone, Default)]
pub struct PoolSettings {
    pub provider: String,
    pub region: String,
    pub capabilities: Vec<String>,
    pub gpu_memory_gb: Option<f64>,
    pub price_per_hour: f64,
    pub lend_limit_gpus: Option<u32>,
    pub startup: Duration,
    /// The operator's declared fabric and switches.
    pub topology: crate::config::TopologyEntry,
}

/// Canopy's name for a Ray node: the provider's name and the node's IP
/// (its id when Ray reports no IP).
pub fn node_name(provider: &str, n: &NodeInfo) -> String {
    format!("{provider}-{}", if n.node_ip.is_empty() { &n.node_id } else { &n.node_ip })
}

/// One pool per accelerator type (GPU nodes without a type and CPU-only
/// nodes make the pool `cpu`; a GPU without a known type is not offered).
pub fn pools(nodes: &[NodeInfo], s: &PoolSettings) -> Vec<InventoryPool> {
    let mut groups: BTreeMap<String, Vec<&NodeInfo>> = BTreeMap::new();
    for n in nodes.iter().filter(|n| n.state.is_empty() || n.state == "ALIVE") {
        let kind = n.resources_total.keys().find_map(|k| k.strip_prefix(ACCEL_PREFIX)).map(str::to_string);
        let has_gpus = n.resources_total.get("GPU").copied().unwrap_or(0.0) >= 1.0;
        let key = match kind {
            Some(k) if has_gpus => k,
            _ => String::new(),
        };
        groups.entry(key).or_default().push(n);
    }
    groups
        .into_iter()
        .map(|(kind, members)| {
            let acc = if kind.is_empty() { None } else { accelerator(&kind, s.gpu_memory_gb) };
            let min = |r: &str| {
                members
                    .iter()
                    .map(|n| n.resources_total.get(r).copied().unwrap_or(0.0))
                    .fold(f64::INFINITY, f64::min)
            };
            let gpus = if acc.is_some() { min("GPU").floor() as u32 } else { 0 };
            let mut capabilities = vec!["ray".to_string()];
            if acc.is_some() {
                capabilities.push(format!("{ACCEL_TAG}{kind}"));
            }
            // Ray runs no container images here, whatever the configuration says.
            capabilities.extend(s.capabilities.iter().filter(|c| *c != crate::fleet::CONTAINER_TAG).cloned());
            let name = if acc.is_some() { kind.to_ascii_lowercase() } else { "cpu".to_string() };
            let fabric = s.topology.fabric_of(&name);
            let def = PoolDef {
                name,
                region: s.region.clone(),
                shape: Shape {
                    accelerator: acc,
                    gpus_per_node: gpus,
                    interconnect: Interconnect::Pcie,
                    cpu_cores: min("CPU"),
                    memory_gb: (min("memory") / (1024.0 * 1024.0 * 1024.0) * 10.0).floor() / 10.0,
                    disk_gb: 0.0,
                    fabric,
                },
                price_per_hour: s.price_per_hour,
                startup: s.startup,
                capabilities,
                compliance: Vec::new(),
                reserved: true,
                interruptible: false,
                lifecycle: Lifecycle::Job,
                lend_limit_gpus: s.lend_limit_gpus,
            };
            let nodes = members
                .iter()
                .map(|n| {
                    let name = node_name(&s.provider, n);
                    InventoryNode {
                        switch: s.topology.switch_of(&name),
                        name,
                        state: NodeState::Ready,
                        used_by_others: Free::default(),
                    }
                })
                .collect();
            InventoryPool { def, nodes }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(status: &str, error_type: Option<&str>, code: Option<i32>) -> JobDetails {
        JobDetails {
            status: status.into(),
            error_type: error_type.map(String::from),
            driver_exit_code: code,
            ..Default::default()
        }
    }

    #[test]
    fn statuses_map() {
        assert_eq!(job_status(&job("PENDING", None, None)), AttemptStatus::Pending);
        assert_eq!(
            job_status(&job("SUCCEEDED", None, Some(0))),
            AttemptStatus::Ended(ProviderEnd::Exited { code: 0 })
        );
        assert_eq!(
            job_status(&job("FAILED", Some("JOB_ENTRYPOINT_COMMAND_ERROR"), Some(3))),
            AttemptStatus::Ended(ProviderEnd::Exited { code: 3 })
        );
        assert_eq!(job_status(&job("STOPPED", None, None)), AttemptStatus::Ended(ProviderEnd::Cancelled));
        assert!(matches!(
            job_status(&job("FAILED", Some("JOB_SUPERVISOR_ACTOR_START_TIMEOUT"), None)),
            AttemptStatus::Ended(ProviderEnd::LaunchRejected { capacity: true, .. })
        ));
    }

    #[test]
    fn the_gang_drivers_last_word_is_read() {
        let logs = "rank 0 up\nCANOPY-GANG-END rank=1 node=ray-127.0.0.2 ip=127.0.0.2 node_id=ab exit=3\n";
        assert_eq!(
            gang_end(logs),
            Some(ProviderEnd::Rank {
                rank: 1,
                node: "ray-127.0.0.2".into(),
                end: Box::new(ProviderEnd::Exited { code: 3 })
            })
        );
        let killed = "CANOPY-GANG-END rank=0 node=ray-a ip=a node_id=b signal=9";
        assert!(
            matches!(gang_end(killed), Some(ProviderEnd::Rank { rank: 0, end, .. }) if *end == ProviderEnd::Signaled { signal: 9 })
        );
        let lost = "CANOPY-GANG-END rank=1 node=ray-b ip=b node_id=c lost The actor died unexpectedly";
        assert!(
            matches!(gang_end(lost), Some(ProviderEnd::Rank { end, .. }) if matches!(*end, ProviderEnd::NodeLost { .. }))
        );
        let unstarted = "CANOPY-GANG-END rank=1 node=ray-b ip=b node_id=c unstarted could not start train: \
                         No such file or directory";
        assert_eq!(
            gang_end(unstarted),
            Some(ProviderEnd::Rank {
                rank: 1,
                node: "ray-b".into(),
                end: Box::new(ProviderEnd::BootFailed {
                    message: "Ray could not start rank 1 on ray-b: could not start train: No such file or directory"
                        .into()
                })
            })
        );
        let unplaced = "CANOPY-GANG-UNPLACED ranks=3 after=5s: Ray could not place";
        assert!(matches!(gang_end(unplaced), Some(ProviderEnd::LaunchRejected { capacity: true, .. })));
        assert_eq!(gang_end("CANOPY-GANG-END rank=-1 stopped: the job was stopped\n"), None);
        assert_eq!(gang_end("plain output\n"), None);
    }

    #[test]
    fn accelerator_resources_make_pools() {
        let mut r = BTreeMap::new();
        r.insert("CPU".to_string(), 4.0);
        r.insert("GPU".to_string(), 4.0);
        r.insert("accelerator_type:H100".to_string(), 4.0);
        r.insert("memory".to_string(), 8.0 * 1024.0 * 1024.0 * 1024.0);
        let n = NodeInfo {
            node_id: "abc".into(),
            node_ip: "127.0.0.1".into(),
            state: "ALIVE".into(),
            resources_total: r,
        };
        let s = PoolSettings { provider: "ray".into(), ..Default::default() };
        let p = pools(&[n], &s);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].def.name, "h100");
        assert_eq!(p[0].def.shape.gpus_per_node, 4);
        assert_eq!(p[0].def.shape.memory_gb, 8.0);
        assert_eq!(p[0].nodes[0].name, "ray-127.0.0.1");
        assert!(p[0].def.capabilities.contains(&"ray-accel:H100".to_string()));
    }

    /// A job waits for capacity only when Ray's scheduler reports its very
    /// request among the shapes it cannot grant (as `/api/cluster_status`
    /// lists them: `[{"CPU": 1000.0}, 1]`).
    #[test]
    fn a_request_waits_only_when_ray_reports_it_unmet() {
        let submit = |cpus: f64, gpus: Option<f64>, accel: Option<&str>| super::super::api::Submit {
            entrypoint: "true".into(),
            submission_id: "t".into(),
            runtime_env: super::super::api::RuntimeEnv { env_vars: BTreeMap::new() },
            entrypoint_num_cpus: Some(cpus),
            entrypoint_num_gpus: gpus,
            entrypoint_resources: accel.map(|a| (a.to_string(), 1.0)).into_iter().collect(),
            metadata: BTreeMap::new(),
        };
        let shape =
            |kv: &[(&str, f64)]| kv.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>();
        let gpu_job = entrypoint_request(&submit(1.0, Some(1.0), Some("accelerator_type:H100")));
        assert_eq!(gpu_job, shape(&[("CPU", 1.0), ("GPU", 1.0), ("accelerator_type:H100", 1.0)]));
        let unmet =
            [shape(&[("CPU", 1000.0)]), shape(&[("CPU", 1.0), ("GPU", 1.0), ("acceleratorType:H100", 1.0)])];
        assert!(waits_for_resources(&gpu_job, &unmet), "its shape is unmet");
        assert!(!waits_for_resources(&gpu_job, &unmet[..1]), "another shape is unmet, not its own");
        assert!(!waits_for_resources(&gpu_job, &[]), "Ray can grant everything: it is starting the job");
        let tiny = entrypoint_request(&submit(0.1, None, None));
        assert!(!waits_for_resources(&tiny, &unmet), "0.1 CPU is not 1000");
        // A gang's driver asks for nothing: it never waits for resources.
        assert!(!waits_for_resources(&BTreeMap::new(), &[BTreeMap::new()]));
    }
}
