//! Pure translations between Slurm's vocabulary and Canopy's: job states
//! and raw wait statuses to [`AttemptStatus`], nodes and GRES strings to
//! pools and node states.
//!
//! This module owns those tables and nothing else: no I/O, no clock (the
//! caller passes `now`), no API version (it reads plain fields that every
//! slurmrestd version reports).

use crate::accel::{Interconnect, Vendor};
use crate::config::{PartitionOverride, TopologyEntry};
use crate::failure::ProviderEnd;
use crate::fleet::{Accelerator, Free, Lifecycle, NodeState, PoolDef, Shape};
use crate::providers::local::inventory::family_of;
use crate::providers::{AttemptStatus, InventoryNode, InventoryPool};
use std::collections::BTreeMap;
use std::time::Duration;

/// The capability tag naming a pool's GRES type: `gres:gpu:h100`.
pub const GRES_TAG: &str = "gres:gpu:";
/// The capability tag naming a pool's partition: `partition:debug`.
pub const PARTITION_TAG: &str = "partition:";

/// A job as the mapping needs it (version-neutral).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobView {
    pub state: String,
    pub reason: String,
    pub nodes: String,
    /// Raw wait status.
    pub exit_code: i64,
    pub restart_cnt: u32,
}

/// Where a job stands, before the provider acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobStatus {
    Status(AttemptStatus),
    /// Slurm requeued the job (node failure, or an admin): Canopy runs
    /// each attempt once, so the provider cancels it and reports the end.
    Requeued(ProviderEnd),
}

/// Decodes a raw wait status: exit code in bits 8..16, signal in 0..7.
pub fn decode_wait_status(raw: i64) -> ProviderEnd {
    let signal = (raw & 0x7f) as i32;
    if signal != 0 {
        ProviderEnd::Signaled { signal }
    } else {
        ProviderEnd::Exited { code: ((raw >> 8) & 0xff) as i32 }
    }
}

/// Maps a job's state (and restart count) to a status.
pub fn job_status(j: &JobView) -> JobStatus {
    if j.restart_cnt > 0 {
        let on = if j.nodes.is_empty() { String::new() } else { format!(" on {}", j.nodes) };
        let message = format!(
            "Slurm requeued the job{on} ({} restart(s), reason {}); a node it ran on failed or was taken \
             down",
            j.restart_cnt, j.reason
        );
        return JobStatus::Requeued(ProviderEnd::NodeLost { message });
    }
    let ended = |e| JobStatus::Status(AttemptStatus::Ended(e));
    match j.state.as_str() {
        "PENDING" | "CONFIGURING" | "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "RESV_DEL_HOLD" => {
            JobStatus::Status(AttemptStatus::Pending)
        }
        "RUNNING" | "COMPLETING" | "SIGNALING" | "STAGE_OUT" | "SUSPENDED" | "STOPPED" | "RESIZING" => {
            JobStatus::Status(AttemptStatus::Running)
        }
        "COMPLETED" => ended(decode_wait_status(j.exit_code)),
        "FAILED" => match decode_wait_status(j.exit_code) {
            ProviderEnd::Exited { code: 0 } => {
                ended(ProviderEnd::Unknown { message: format!("Slurm says FAILED (reason {})", j.reason) })
            }
            e => ended(e),
        },
        "CANCELLED" => ended(ProviderEnd::Cancelled),
        "TIMEOUT" | "DEADLINE" => ended(ProviderEnd::TimedOut),
        "NODE_FAIL" => ended(ProviderEnd::NodeLost {
            message: format!("Slurm NODE_FAIL on {} (reason {})", j.nodes, j.reason),
        }),
        "OUT_OF_MEMORY" => ended(ProviderEnd::OutOfMemory),
        "PREEMPTED" => ended(ProviderEnd::Preempted),
        "BOOT_FAIL" => {
            ended(ProviderEnd::BootFailed { message: format!("Slurm BOOT_FAIL (reason {})", j.reason) })
        }
        other => {
            ended(ProviderEnd::Unknown { message: format!("Slurm job state {other} (reason {})", j.reason) })
        }
    }
}

/// Whether a state is final (for listing what still runs).
pub fn is_final(state: &str) -> bool {
    !matches!(
        state,
        "PENDING"
            | "CONFIGURING"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "RESV_DEL_HOLD"
            | "RUNNING"
            | "COMPLETING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "SUSPENDED"
            | "STOPPED"
            | "RESIZING"
    )
}

/// GPUs in a GRES string: `gpu:h100:4`, `gpu:4(S:0-1)`, `gpu:h100:3(IDX:0-2),tmpdisk:100`.
/// Returns (type, count) for the first GPU entry.
pub fn gpus_in_gres(gres: &str) -> Option<(Option<String>, u32)> {
    for entry in gres.split(',') {
        let entry = entry.split('(').next().unwrap_or("").trim();
        let mut parts = entry.split(':');
        if parts.next() != Some("gpu") {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        return match rest.as_slice() {
            [n] => n.parse().ok().map(|n| (None, n)),
            [t, n] => n.parse().ok().map(|n| (Some((*t).to_string()), n)),
            _ => None,
        };
    }
    None
}

/// A node's state as Canopy sees it: down, failed or not responding →
/// down; drain (draining or drained) → cordoned.
pub fn node_state(state: &str, flags: &[String]) -> NodeState {
    let s = state.to_ascii_lowercase();
    let flag = |f: &str| flags.iter().any(|x| x.eq_ignore_ascii_case(f));
    if s.contains("down")
        || s.contains("fail")
        || s.contains("future")
        || s.contains("unknown")
        || flag("NOT_RESPONDING")
        || flag("FAIL")
        || s.ends_with('*')
    {
        NodeState::Down
    } else if s.contains("drain") || flag("DRAIN") {
        NodeState::Cordoned
    } else {
        NodeState::Ready
    }
}

/// GPU memory by GRES type, when the configuration does not say.
pub fn typical_gpu_memory_gb(kind: &str) -> f64 {
    match kind.to_ascii_lowercase().as_str() {
        "h200" => 141.0,
        "h100" | "a100" | "h800" | "a800" | "a100-80gb" => 80.0,
        "l40" | "l40s" | "a40" | "a6000" => 48.0,
        "l4" | "a10" | "a10g" => 24.0,
        "t4" | "v100" => 16.0,
        "b200" => 180.0,
        _ => 0.0,
    }
}

/// The accelerator a GRES type names, when Canopy knows the family.
pub fn accelerator(kind: &str, memory_gb: Option<f64>) -> Option<Accelerator> {
    let (family, cc) = family_of(kind)?;
    Some(Accelerator {
        vendor: Vendor::Nvidia,
        model: kind.to_ascii_uppercase(),
        family,
        compute_capability: cc,
        memory_gb: memory_gb.unwrap_or_else(|| typical_gpu_memory_gb(kind)),
        throughput: None,
    })
}

/// One node as the inventory needs it (version-neutral).
#[derive(Debug, Clone, Default)]
pub struct NodeView {
    pub name: String,
    pub state: String,
    pub flags: Vec<String>,
    pub gres: String,
    pub gres_used: String,
    pub cpus: u32,
    pub alloc_cpus: u32,
    pub memory_mb: u64,
    pub alloc_memory_mb: u64,
    pub partitions: Vec<String>,
    /// What this Canopy's own running jobs hold on the node: the engine
    /// counts its attempts itself, so they are not "used by others".
    pub held_by_canopy: Held,
}

/// GPUs, CPUs and memory (MB) a set of jobs holds on one node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub gpus: u32,
    pub cpus: u32,
    pub memory_mb: u64,
}

/// What a job holds, from its `tres_alloc_str`
/// (`cpu=2,mem=512M,node=1,billing=2,gres/gpu=2`); typed GPU counts
/// (`gres/gpu:h100=2`) count when the untyped total is absent.
pub fn held_by(tres: &str) -> Held {
    let mut h = Held::default();
    let (mut untyped, mut typed) = (None, 0u32);
    for item in tres.split(',') {
        let Some((k, v)) = item.split_once('=') else { continue };
        match k {
            "cpu" => h.cpus = v.parse().unwrap_or(0),
            "mem" => h.memory_mb = mem_mb(v),
            "gres/gpu" => untyped = v.parse().ok(),
            _ if k.starts_with("gres/gpu:") => typed += v.parse::<u32>().unwrap_or(0),
            _ => {}
        }
    }
    h.gpus = untyped.unwrap_or(typed);
    h
}

/// What a job holds on its node: CPUs from the allocation; GPUs from its
/// per-node GRES detail (`gpu:h100:2(IDX:0-1)`), which Slurm reports even
/// when accounting does not track GPUs; memory from the allocation, else
/// the request.
pub fn held_by_job(tres_alloc: &str, tres_req: &str, gres_detail: &[String]) -> Held {
    let mut h = held_by(tres_alloc);
    let detail: u32 = gres_detail.iter().filter_map(|g| gpus_in_gres(g)).map(|g| g.1).sum();
    h.gpus = h.gpus.max(detail);
    if h.memory_mb == 0 {
        h.memory_mb = held_by(tres_req).memory_mb;
    }
    h
}

/// `512M`, `2G`, `1T` or plain megabytes.
fn mem_mb(v: &str) -> u64 {
    let (num, unit) = v.split_at(v.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(v.len()));
    let n: f64 = num.parse().unwrap_or(0.0);
    let mb = match unit {
        "K" => n / 1024.0,
        "G" => n * 1024.0,
        "T" => n * 1024.0 * 1024.0,
        _ => n,
    };
    mb.round() as u64
}

/// Expands a Slurm host list: `n[1-3,7],gpu[01-02]x,login` → every name,
/// in order. Zero padding is kept (`[01-02]` → `01`, `02`). A malformed
/// bracket is taken as a plain name.
pub fn expand_hostlist(list: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&list[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let (Some(open), Some(close)) = (part.find('['), part.find(']')) else {
            out.push(part.to_string());
            continue;
        };
        if close < open {
            out.push(part.to_string());
            continue;
        }
        let (prefix, ranges, suffix) = (&part[..open], &part[open + 1..close], &part[close + 1..]);
        let mut names = Vec::new();
        let ok = ranges.split(',').all(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) if x <= y => {
                    names.extend((x..=y).map(|k| format!("{prefix}{k:0w$}{suffix}", w = a.len())));
                    true
                }
                _ => false,
            }
        });
        if ok {
            out.extend(names);
        } else {
            out.push(part.to_string());
        }
    }
    out
}

/// What a job holds on each of its nodes: per node from its allocation
/// (`allocated` = node name, CPUs, memory MB, as
/// `job_resources.allocated_nodes`) and its per-node GRES detail; the
/// job's totals split evenly where the allocation does not say.
pub fn held_per_node(
    nodes: &str,
    tres_alloc: &str,
    tres_req: &str,
    gres_detail: &[String],
    allocated: &[(String, u32, u64)],
) -> Vec<(String, Held)> {
    let names: Vec<String> = if allocated.is_empty() {
        expand_hostlist(nodes)
    } else {
        allocated.iter().map(|a| a.0.clone()).collect()
    };
    if names.is_empty() {
        return Vec::new();
    }
    let n = names.len() as u64;
    let mut total = held_by(tres_alloc);
    if total.memory_mb == 0 {
        total.memory_mb = held_by(tres_req).memory_mb;
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let a = allocated.get(i);
            let gpus =
                gres_detail.get(i).and_then(|g| gpus_in_gres(g)).map_or(total.gpus / n as u32, |g| g.1);
            let held = Held {
                gpus,
                cpus: a.map(|a| a.1).filter(|c| *c > 0).unwrap_or(total.cpus / n as u32),
                memory_mb: a.map(|a| a.2).filter(|m| *m > 0).unwrap_or(total.memory_mb / n),
            };
            (name, held)
        })
        .collect()
}

/// Which rank of a gang ended it and how, from srun's report in the job's
/// stderr. A rank that never started comes first, whatever followed:
/// srun's `srun: error: Task launch for STEP failed on node NODE: WHY`
/// (slurmd could not launch its task), or a `srun: error: NODE: task T:
/// …` line for a rank whose launcher said it could not start there
/// ([`super::script::launcher_command`]) while some other rank did not
/// say so (whichever srun reported first) — either is [`ProviderEnd::BootFailed`] of that rank, its node's
/// fault, since the gang's other ranks got further. Otherwise the first
/// `srun: error: NODE: task T: WHAT` line names the culprit (the others
/// are the launchers `--kill-on-bad-exit` stopped after it). The rank is
/// the node's place in `nodes` (rank order). `None` when no such line
/// names one of the gang's nodes.
pub fn rank_end(stderr: &str, nodes: &[String]) -> Option<ProviderEnd> {
    let rank_of = |node: &str| nodes.iter().position(|n| n == node);
    // The job's stderr is the workload's too: what is kept of it is bounded.
    let boot = |rank: usize, node: &str, what: &str, why: &str| ProviderEnd::Rank {
        rank: rank as u32,
        node: node.to_string(),
        end: Box::new(ProviderEnd::BootFailed {
            message: format!("{what}: {}", why.trim().chars().take(300).collect::<String>()),
        }),
    };
    for line in stderr.lines() {
        let Some(rest) = line.trim().strip_prefix("srun: error: Task launch for ") else { continue };
        let Some((_, after)) = rest.split_once(" failed on node ") else { continue };
        let (node, why) = after.split_once(": ").unwrap_or((after, ""));
        if let Some(rank) = rank_of(node.trim()) {
            return Some(boot(rank, node.trim(), "srun could not launch the task", why));
        }
    }
    // What each rank's launcher said when it could not start, rank order.
    let not_started: Vec<Option<&str>> = nodes
        .iter()
        .enumerate()
        .map(|(rank, node)| {
            let prefix = super::script::not_started_prefix(rank, node);
            stderr.lines().find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        })
        .collect();
    let some_started = not_started.iter().any(Option::is_none);
    // srun's `NODE: task T: WHAT` lines for the gang's nodes, in order.
    let mut reported = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.trim().strip_prefix("srun: error: ") else { continue };
        let mut fields = rest.splitn(3, ": ");
        let (Some(node), Some(task), Some(what)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let (true, Some(rank)) = (task.starts_with("task"), rank_of(node)) {
            reported.push((rank, node, what.trim()));
        }
    }
    // Not found on its node while another rank got further: that node's
    // fault. Not found by any rank: the workload's command, as on one node.
    let unstarted = reported.iter().find_map(|(rank, node, _)| Some((*rank, *node, not_started[*rank]?)));
    if let (Some((rank, node, said)), true) = (unstarted, some_started) {
        return Some(boot(rank, node, "the launcher could not start", said));
    }
    let &(rank, node, what) = reported.first()?;
    let end = if let Some(code) = what.strip_prefix("Exited with exit code ") {
        match code.trim().parse() {
            Ok(code) => ProviderEnd::Exited { code },
            Err(_) => ProviderEnd::Unknown { message: format!("srun: {what}") },
        }
    } else if what.eq_ignore_ascii_case("Out Of Memory") {
        ProviderEnd::OutOfMemory
    } else {
        match signal_named(what) {
            Some(signal) => ProviderEnd::Signaled { signal },
            None => ProviderEnd::Unknown { message: format!("srun: {what}") },
        }
    };
    Some(ProviderEnd::Rank { rank: rank as u32, node: node.to_string(), end: Box::new(end) })
}

/// The signal srun names as `strsignal` does.
fn signal_named(what: &str) -> Option<i32> {
    Some(match what {
        "Hangup" => 1,
        "Interrupt" => 2,
        "Quit" => 3,
        "Illegal instruction" => 4,
        "Trace/breakpoint trap" => 5,
        "Aborted" => 6,
        "Bus error" => 7,
        "Floating point exception" => 8,
        "Killed" => 9,
        "User defined signal 1" => 10,
        "Segmentation fault" => 11,
        "User defined signal 2" => 12,
        "Broken pipe" => 13,
        "Alarm clock" => 14,
        "Terminated" => 15,
        _ => return None,
    })
}

/// What shapes pools: region, startup and overrides per partition, and
/// the operator's declared topology.
#[derive(Debug, Clone, Default)]
pub struct PoolSettings {
    pub region: String,
    pub startup: Duration,
    pub partitions: BTreeMap<String, PartitionOverride>,
    pub topology: TopologyEntry,
}

/// Groups nodes into pools: one per partition and GPU type (a partition
/// with one GPU type keeps its own name). A pool's shape is the smallest
/// node of the group, so anything placed there fits any of its nodes.
pub fn pools(nodes: &[NodeView], s: &PoolSettings) -> Vec<InventoryPool> {
    let mut groups: BTreeMap<(String, Option<String>), Vec<&NodeView>> = BTreeMap::new();
    for n in nodes {
        let kind = gpus_in_gres(&n.gres).and_then(|(t, _)| t);
        for p in &n.partitions {
            groups.entry((p.clone(), kind.clone())).or_default().push(n);
        }
    }
    let mut out = Vec::new();
    for ((partition, kind), members) in &groups {
        let o = s.partitions.get(partition).cloned().unwrap_or_default();
        if o.skip {
            continue;
        }
        let kinds_here = groups.keys().filter(|(p, _)| p == partition).count();
        let default_name = match (kinds_here, kind) {
            (1, _) | (_, None) => partition.clone(),
            (_, Some(k)) => format!("{partition}-{k}"),
        };
        let gpus = members.iter().map(|n| gpus_in_gres(&n.gres).map_or(0, |g| g.1)).min().unwrap_or(0);
        let acc = kind.as_deref().and_then(|k| accelerator(k, o.gpu_memory_gb));
        let gpus = if acc.is_some() { gpus } else { 0 };
        let cpus = members.iter().map(|n| n.cpus).min().unwrap_or(0) as f64;
        let mem = members.iter().map(|n| n.memory_mb).min().unwrap_or(0) as f64 / 1024.0;
        let mut capabilities = vec!["slurm".to_string(), format!("{PARTITION_TAG}{partition}")];
        if let Some(k) = kind.as_deref().filter(|_| gpus > 0) {
            capabilities.push(format!("{GRES_TAG}{k}"));
        }
        // Slurm runs no container images here, whatever the configuration says.
        capabilities.extend(o.capabilities.iter().filter(|c| *c != crate::fleet::CONTAINER_TAG).cloned());
        let name = o.pool.clone().unwrap_or(default_name);
        let fabric = s.topology.fabric_of(&name);
        let def = PoolDef {
            name,
            region: s.region.clone(),
            shape: Shape {
                accelerator: acc,
                gpus_per_node: gpus,
                interconnect: Interconnect::Pcie,
                cpu_cores: cpus,
                memory_gb: mem,
                disk_gb: 0.0,
                fabric,
            },
            price_per_hour: o.price_per_hour.unwrap_or(0.0),
            startup: s.startup,
            capabilities,
            compliance: Vec::new(),
            reserved: true,
            interruptible: false,
            lifecycle: Lifecycle::Job,
            lend_limit_gpus: o.lend_limit_gpus,
        };
        let nodes = members
            .iter()
            .map(|n| {
                let ours = n.held_by_canopy;
                let used_gpus = if gpus == 0 {
                    0
                } else {
                    gpus_in_gres(&n.gres_used).map_or(0, |g| g.1).saturating_sub(ours.gpus).min(gpus)
                };
                InventoryNode {
                    name: n.name.clone(),
                    state: node_state(&n.state, &n.flags),
                    used_by_others: Free {
                        gpus: used_gpus,
                        cpu_cores: (n.alloc_cpus.saturating_sub(ours.cpus) as f64).min(cpus),
                        memory_gb: (n.alloc_memory_mb.saturating_sub(ours.memory_mb) as f64 / 1024.0)
                            .min(mem),
                        disk_gb: 0.0,
                    },
                    switch: s.topology.switch_of(&n.name),
                }
            })
            .collect();
        out.push(InventoryPool { def, nodes });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: &str, exit_code: i64) -> JobView {
        JobView { state: state.into(), exit_code, ..Default::default() }
    }

    #[test]
    fn what_a_job_holds_is_read_from_its_tres() {
        assert_eq!(
            held_by("cpu=2,mem=512M,node=1,billing=2,gres/gpu=2"),
            Held { gpus: 2, cpus: 2, memory_mb: 512 }
        );
        assert_eq!(held_by("cpu=1,mem=2G,gres/gpu:h100=3"), Held { gpus: 3, cpus: 1, memory_mb: 2048 });
        assert_eq!(held_by("cpu=1,node=1,billing=1"), Held { gpus: 0, cpus: 1, memory_mb: 0 });
        // What slurmrestd 22.05 answers without GPU accounting.
        let detail = vec!["gpu:h100:2(IDX:0-1)".to_string()];
        assert_eq!(
            held_by_job("cpu=1,node=1,billing=1", "cpu=1,mem=100M,node=1,billing=1", &detail),
            Held { gpus: 2, cpus: 1, memory_mb: 100 }
        );
    }

    #[test]
    fn host_lists_expand_in_order() {
        assert_eq!(expand_hostlist("n[1-2]"), vec!["n1", "n2"]);
        assert_eq!(
            expand_hostlist("gpu[08-10,3]x,login"),
            vec!["gpu08x", "gpu09x", "gpu10x", "gpu3x", "login"]
        );
        assert_eq!(expand_hostlist("n1,n2"), vec!["n1", "n2"]);
        assert_eq!(expand_hostlist("odd[a-b]"), vec!["odd[a-b]"]);
        assert!(expand_hostlist("").is_empty());
    }

    #[test]
    fn a_gang_holds_its_share_on_every_node() {
        let detail = vec!["gpu:h100:2(IDX:0-1)".to_string(), "gpu:h100:2(IDX:2-3)".to_string()];
        let alloc = vec![("n1".to_string(), 2, 0), ("n2".to_string(), 2, 0)];
        let held =
            held_per_node("n[1-2]", "cpu=4,node=2,billing=4", "cpu=4,mem=4000M,node=2", &detail, &alloc);
        let h = Held { gpus: 2, cpus: 2, memory_mb: 2000 };
        assert_eq!(held, vec![("n1".to_string(), h), ("n2".to_string(), h)]);
        // Without the allocation's detail, the totals are split.
        let held = held_per_node("n[1-2]", "cpu=4,node=2,gres/gpu=4", "", &[], &[]);
        assert_eq!(held[1], ("n2".to_string(), Held { gpus: 2, cpus: 2, memory_mb: 0 }));
    }

    #[test]
    fn the_rank_srun_names_first_ended_the_gang() {
        let nodes = vec!["n2".to_string(), "n1".to_string()];
        let stderr = "srun: error: n1: task 0: Exited with exit code 3\n\
                      srun: launch/slurm: _step_signal: Terminating StepId=7.0\n\
                      srun: error: n2: task 1: Terminated\n";
        let end = rank_end(stderr, &nodes).unwrap();
        assert_eq!(
            end,
            ProviderEnd::Rank { rank: 1, node: "n1".into(), end: Box::new(ProviderEnd::Exited { code: 3 }) }
        );
        let killed = rank_end("srun: error: n2: task 1: Killed\n", &nodes).unwrap();
        assert!(
            matches!(killed, ProviderEnd::Rank { rank: 0, end, .. } if *end == ProviderEnd::Signaled { signal: 9 })
        );
        assert_eq!(rank_end("srun: error: n9: task 0: Exited with exit code 1\n", &nodes), None);
        assert_eq!(rank_end("all fine\n", &nodes), None);
    }

    /// A rank that never started is its node's failed launch, whatever
    /// srun reported first about the ranks it stopped.
    #[test]
    fn a_rank_that_never_started_is_its_nodes_failed_launch() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let boot = |rank, node: &str, message: &str| ProviderEnd::Rank {
            rank,
            node: node.into(),
            end: Box::new(ProviderEnd::BootFailed { message: message.into() }),
        };
        // slurmd on n2 could not launch its task; srun aborted the step.
        let stderr = "srun: error: n1: task 0: Killed\n\
                      srun: error: Task launch for StepId=7.0 failed on node n2: Invalid job credential\n\
                      srun: error: Application launch failed: Invalid job credential\n\
                      srun: Job step aborted: Waiting up to 32 seconds for job step to finish.\n";
        assert_eq!(
            rank_end(stderr, &nodes),
            Some(boot(1, "n2", "srun could not launch the task: Invalid job credential"))
        );
        // Rank 1 could not start on n2 (rank 0 on n1 had, and was
        // stopped), in the order srun 22.05 reported it on the test cluster.
        let stderr = "srun: error: n2: task 1: Exited with exit code 127\n\
                      srun: launch/slurm: _step_signal: Terminating StepId=1.0\n\
                      canopy: rank 1 on n2 could not start: train: not found\n\
                      slurmstepd-n1: error: *** STEP 1.0 ON n1 CANCELLED AT 2026-12-02T04:59:08 ***\n\
                      srun: error: n1: task 0: Terminated\n\
                      srun: Force Terminated StepId=1.0\n";
        assert_eq!(
            rank_end(stderr, &nodes),
            Some(boot(1, "n2", "the launcher could not start: train: not found"))
        );
        // Not found on any node: the workload's own command, as on one.
        let stderr = "canopy: rank 1 on n2 could not start: train: not found\n\
                      srun: error: n2: task 1: Exited with exit code 127\n\
                      srun: launch/slurm: _step_signal: Terminating StepId=2.0\n\
                      srun: error: n1: task 0: Exited with exit code 127\n\
                      canopy: rank 0 on n1 could not start: train: not found\n";
        let exited = Box::new(ProviderEnd::Exited { code: 127 });
        assert_eq!(
            rank_end(stderr, &nodes),
            Some(ProviderEnd::Rank { rank: 1, node: "n2".into(), end: exited })
        );
        // A launcher line that srun did not report a task end for is not
        // enough (the workload can write anything on stderr).
        let said = "canopy: rank 1 on n2 could not start: train: not found\n";
        assert_eq!(rank_end(said, &nodes), None);
    }

    #[test]
    fn wait_status_is_decoded() {
        assert_eq!(decode_wait_status(1792), ProviderEnd::Exited { code: 7 });
        assert_eq!(decode_wait_status(15), ProviderEnd::Signaled { signal: 15 });
        assert_eq!(decode_wait_status(0), ProviderEnd::Exited { code: 0 });
    }

    #[test]
    fn states_map_to_ends() {
        let st = |s, c| job_status(&job(s, c));
        assert_eq!(st("PENDING", 0), JobStatus::Status(AttemptStatus::Pending));
        assert_eq!(st("RUNNING", 0), JobStatus::Status(AttemptStatus::Running));
        let end = |e| JobStatus::Status(AttemptStatus::Ended(e));
        assert_eq!(st("COMPLETED", 0), end(ProviderEnd::Exited { code: 0 }));
        assert_eq!(st("FAILED", 1792), end(ProviderEnd::Exited { code: 7 }));
        assert_eq!(st("FAILED", 9), end(ProviderEnd::Signaled { signal: 9 }));
        assert_eq!(st("CANCELLED", 15), end(ProviderEnd::Cancelled));
        assert_eq!(st("TIMEOUT", 0), end(ProviderEnd::TimedOut));
        assert_eq!(st("OUT_OF_MEMORY", 0), end(ProviderEnd::OutOfMemory));
        assert_eq!(st("PREEMPTED", 0), end(ProviderEnd::Preempted));
        assert!(matches!(
            st("NODE_FAIL", 15),
            JobStatus::Status(AttemptStatus::Ended(ProviderEnd::NodeLost { .. }))
        ));
        assert!(matches!(
            st("BOOT_FAIL", 0),
            JobStatus::Status(AttemptStatus::Ended(ProviderEnd::BootFailed { .. }))
        ));
        let requeued = JobView { state: "PENDING".into(), restart_cnt: 1, ..Default::default() };
        assert!(matches!(job_status(&requeued), JobStatus::Requeued(ProviderEnd::NodeLost { .. })));
    }

    #[test]
    fn gres_and_node_states_parse() {
        assert_eq!(gpus_in_gres("gpu:h100:4"), Some((Some("h100".into()), 4)));
        assert_eq!(gpus_in_gres("gpu:h100:3(IDX:0-2)"), Some((Some("h100".into()), 3)));
        assert_eq!(gpus_in_gres("tmp:1,gpu:2(S:0)"), Some((None, 2)));
        assert_eq!(gpus_in_gres("(null)"), None);
        assert_eq!(node_state("down", &[]), NodeState::Down);
        assert_eq!(node_state("idle", &["DRAIN".into()]), NodeState::Cordoned);
        assert_eq!(node_state("mixed", &[]), NodeState::Ready);
        assert_eq!(node_state("idle", &["NOT_RESPONDING".into()]), NodeState::Down);
    }

    #[test]
    fn nodes_become_pools_with_used_gpus() {
        let n = |name: &str, used: &str| NodeView {
            name: name.into(),
            state: "mixed".into(),
            gres: "gpu:h100:4".into(),
            gres_used: used.into(),
            cpus: 4,
            memory_mb: 2048,
            partitions: vec!["debug".into()],
            ..Default::default()
        };
        let pools = pools(
            &[n("n1", "gpu:h100:3(IDX:0-2)"), n("n2", "gpu:h100:0(IDX:N/A)")],
            &PoolSettings::default(),
        );
        assert_eq!(pools.len(), 1);
        let p = &pools[0];
        assert_eq!(p.def.name, "debug");
        assert_eq!(p.def.shape.gpus_per_node, 4);
        assert_eq!(p.def.shape.accelerator.as_ref().unwrap().memory_gb, 80.0);
        assert_eq!(p.nodes[0].used_by_others.gpus, 3);
        assert_eq!(p.nodes[1].used_by_others.gpus, 0);
        assert!(p.def.capabilities.contains(&"partition:debug".to_string()));
    }
}
