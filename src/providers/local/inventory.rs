//! What this machine offers, as one pool `local/host` with one node named
//! after the host: CPUs, RAM (`/proc/meminfo`), free disk where attempts
//! live (statvfs), NVIDIA GPUs (`nvidia-smi`) or, without them, another
//! vendor's accelerators ([`super::discover`]: Ascend NPUs, Kunlunxin
//! XPUs), and whether a container engine is usable.
//!
//! This module owns the parsing of those sources and the table that maps
//! GPU product names to families. It reports the whole machine and leaves
//! `used_by_others` at zero: it does not guess what other programs use,
//! and the disk figure is what is free now. It never starts workloads.
//! AMD, Intel and the other vendors' accelerators are not detected yet
//! (see `docs/accelerators.md`).

use super::procfs;
use crate::accel::{ComputeCapability, Family, Interconnect, Vendor};
use crate::fleet::{Accelerator, Free, Lifecycle, NodeState, PoolDef, Shape};
use crate::providers::{Inventory, InventoryNode, InventoryPool};
use std::path::Path;
use std::time::Duration;

pub const POOL: &str = "host";
pub const REGION: &str = "local";
pub use crate::fleet::CONTAINER_TAG;

/// One GPU as `nvidia-smi` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuInfo {
    pub name: String,
    pub memory_mib: f64,
    pub compute_cap: Option<ComputeCapability>,
}

/// Gathers the inventory. `root` is the attempts directory (its nearest
/// existing ancestor is measured for free disk). `nodes` > 1 splits the
/// machine into that many equal nodes, `<host>-1` … `<host>-N`, behind one
/// loopback "switch", so multi-node (gang) work can run and be tested on
/// one machine, as CI runs two slurmd on one host.
/// `containers` are the pool's container tags
/// ([`super::container::ContainerEngine::tags`]; empty without an engine).
pub async fn inventory(root: &Path, containers: Vec<String>, nodes: u32) -> Result<Inventory, String> {
    let meminfo =
        std::fs::read_to_string("/proc/meminfo").map_err(|e| format!("cannot read /proc/meminfo: {e}"))?;
    let memory_gb = parse_meminfo_total_gib(&meminfo).ok_or("/proc/meminfo has no MemTotal line")?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let measured = root.ancestors().find(|p| p.exists()).unwrap_or(Path::new("/"));
    let disk_gb = procfs::disk_free_bytes(measured)
        .map_err(|e| format!("cannot measure free disk at {}: {e}", measured.display()))?
        as f64
        / GIB;
    let gpus = query_gpus().await;
    let mut def = pool_def(cpus as f64, round1(memory_gb), round1(disk_gb), &gpus, containers);
    if def.shape.accelerator.is_none()
        && let Some((accelerator, count)) = super::discover::discover().await
    {
        def.shape.accelerator = Some(accelerator);
        def.shape.gpus_per_node = count;
    }
    let (def, nodes) = split(def, &hostname(), nodes);
    Ok(Inventory { pools: vec![InventoryPool { def, nodes }] })
}

/// The loopback between a split machine's nodes, as a fabric (Gbit/s).
pub const LOOPBACK_GBPS: f64 = 100.0;
/// The switch every node of a split machine hangs off.
pub const LOOPBACK_SWITCH: &str = "loopback";

/// The machine as `nodes` equal nodes (one node named `host` when 1).
pub fn split(mut def: PoolDef, host: &str, nodes: u32) -> (PoolDef, Vec<InventoryNode>) {
    let node = |name: String| InventoryNode {
        name,
        state: NodeState::Ready,
        used_by_others: Free::default(),
        switch: None,
    };
    if nodes <= 1 {
        return (def, vec![node(host.to_string())]);
    }
    let n = f64::from(nodes);
    let s = &mut def.shape;
    s.cpu_cores = (s.cpu_cores / n * 10.0).floor() / 10.0;
    s.memory_gb = round1(s.memory_gb / n);
    s.disk_gb = round1(s.disk_gb / n);
    s.gpus_per_node /= nodes;
    if s.gpus_per_node == 0 {
        s.accelerator = None;
    }
    s.fabric = Some(crate::fleet::NodeFabric { kind: crate::accel::Fabric::Ethernet, gbps: LOOPBACK_GBPS });
    (def, (1..=nodes).map(|i| node(format!("{host}-{i}"))).collect())
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

pub fn pool_def(
    cpus: f64,
    memory_gb: f64,
    disk_gb: f64,
    gpus: &[GpuInfo],
    containers: Vec<String>,
) -> PoolDef {
    let accelerator = gpus.iter().find_map(|g| accelerator_of(g).map(|a| (g.name.clone(), a)));
    let (accelerator, count) = match accelerator {
        Some((name, a)) => {
            let count = gpus.iter().filter(|g| g.name == name).count() as u32;
            if count as usize != gpus.len() {
                tracing::warn!(
                    "GPUs of different models on this host; the local pool offers only the {count} {name}"
                );
            }
            (Some(a), count)
        }
        None => (None, 0),
    };
    PoolDef {
        name: POOL.into(),
        region: REGION.into(),
        shape: Shape {
            accelerator,
            gpus_per_node: count,
            interconnect: Interconnect::Pcie,
            cpu_cores: cpus,
            memory_gb,
            disk_gb,
            fabric: None,
        },
        price_per_hour: 0.0,
        startup: Duration::from_secs(1),
        capabilities: containers,
        compliance: Vec::new(),
        reserved: true,
        interruptible: false,
        lifecycle: Lifecycle::Process,
        lend_limit_gpus: None,
    }
}

fn accelerator_of(g: &GpuInfo) -> Option<Accelerator> {
    let Some((family, cc)) = family_of(&g.name) else {
        tracing::warn!(gpu = %g.name, "unknown GPU model; not offered by the local pool");
        return None;
    };
    let model = g.name.trim().trim_start_matches("NVIDIA ").replace(' ', "-");
    Some(Accelerator {
        vendor: Vendor::Nvidia,
        model,
        family,
        compute_capability: g.compute_cap.unwrap_or(cc),
        memory_gb: marketed_gb(g.memory_mib),
        throughput: None,
    })
}

/// Runs `nvidia-smi`; no GPUs when it is absent or fails. Older drivers do
/// not know `compute_cap`, so the query is retried without it.
async fn query_gpus() -> Vec<GpuInfo> {
    if super::container::which("nvidia-smi").is_none() {
        return Vec::new();
    }
    for fields in ["name,memory.total,compute_cap", "name,memory.total"] {
        let run = tokio::process::Command::new("nvidia-smi")
            .arg(format!("--query-gpu={fields}"))
            .arg("--format=csv,noheader")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        match tokio::time::timeout(Duration::from_secs(10), run).await {
            Ok(Ok(out)) if out.status.success() => {
                return parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout));
            }
            other => tracing::debug!(fields, "nvidia-smi query failed: {other:?}"),
        }
    }
    tracing::warn!("nvidia-smi is installed but did not answer; the local pool offers no GPUs");
    Vec::new()
}

/// Parses `nvidia-smi --query-gpu=name,memory.total[,compute_cap]
/// --format=csv,noheader` output: `NVIDIA H100 80GB HBM3, 81559 MiB, 9.0`.
pub fn parse_nvidia_smi(text: &str) -> Vec<GpuInfo> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split(',').map(str::trim);
            let name = f.next().filter(|n| !n.is_empty())?.to_string();
            let memory_mib = f.next()?.trim_end_matches("MiB").trim().parse().ok()?;
            let compute_cap = f.next().and_then(|c| c.parse().ok());
            Some(GpuInfo { name, memory_mib, compute_cap })
        })
        .collect()
}

/// Family and typical compute capability from an NVIDIA product name.
pub fn family_of(name: &str) -> Option<(Family, ComputeCapability)> {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> =
        upper.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |w: &str| words.contains(&w);
    let starts = |p: &str| words.iter().any(|w| w.starts_with(p));
    let after = |w: &str| words.iter().position(|x| *x == w).and_then(|i| words.get(i + 1)).copied();
    let cc = ComputeCapability::new;
    let series = |w: &str| after(w).and_then(|n| n.chars().next());
    Some(match () {
        _ if starts("B100") || starts("B200") || starts("GB200") || starts("B300") => {
            (Family::Blackwell, cc(10, 0))
        }
        _ if has("BLACKWELL") || series("RTX") == Some('5') => (Family::Blackwell, cc(12, 0)),
        _ if starts("H100") || starts("H200") || starts("H800") || has("H20") || starts("GH200") => {
            (Family::Hopper, cc(9, 0))
        }
        _ if has("ADA")
            || has("L4")
            || starts("L40")
            || has("L20")
            || series("RTX") == Some('4') && !has("QUADRO") =>
        {
            (Family::Ada, cc(8, 9))
        }
        _ if starts("A100") || starts("A800") || has("A30") => (Family::Ampere, cc(8, 0)),
        _ if ["A2", "A10", "A10G", "A16", "A40"].iter().any(|w| has(w))
            || after("RTX").is_some_and(|n| n.starts_with('A'))
            || series("RTX") == Some('3') =>
        {
            (Family::Ampere, cc(8, 6))
        }
        _ if has("T4")
            || has("QUADRO") && has("RTX")
            || series("RTX") == Some('2')
            || series("GTX") == Some('1') && after("GTX").is_some_and(|n| n.starts_with("16")) =>
        {
            (Family::Turing, cc(7, 5))
        }
        _ if starts("V100") || has("TITAN") && has("V") => (Family::Volta, cc(7, 0)),
        _ if starts("P100") => (Family::Pascal, cc(6, 0)),
        _ if has("P40") || has("P4") || series("GTX") == Some('1') => (Family::Pascal, cc(6, 1)),
        _ => return None,
    })
}

/// GPU memory as sold: `nvidia-smi` reports slightly less than the
/// marketed size (ECC, reservations), and specs ask for marketed sizes
/// ("80 GB"). Rounds up to a known size within 10%, else to 0.1 GiB.
pub fn marketed_gb(mib: f64) -> f64 {
    const SIZES: [f64; 18] =
        [8., 10., 11., 12., 16., 20., 24., 32., 40., 48., 64., 80., 94., 96., 141., 180., 192., 288.];
    let gib = mib / 1024.0;
    SIZES.iter().copied().find(|&s| s >= gib - 0.05 && s <= gib * 1.1).unwrap_or_else(|| round1(gib))
}

/// `MemTotal` in GiB.
pub fn parse_meminfo_total_gib(text: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0 / 1024.0)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMI: &str = "NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n\
                       NVIDIA H100 80GB HBM3, 81559 MiB, 9.0\n";

    #[test]
    fn parses_nvidia_smi_and_builds_a_gpu_pool() {
        let gpus = parse_nvidia_smi(SMI);
        assert_eq!(gpus.len(), 2);
        assert_eq!(
            gpus[0],
            GpuInfo {
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_mib: 81559.0,
                compute_cap: Some(ComputeCapability::new(9, 0))
            }
        );
        let def = pool_def(32.0, 251.5, 900.0, &gpus, vec![CONTAINER_TAG.into()]);
        let a = def.shape.accelerator.unwrap();
        assert_eq!(
            (a.family, a.vendor, a.memory_gb, a.model.as_str()),
            (Family::Hopper, Vendor::Nvidia, 80.0, "H100-80GB-HBM3")
        );
        assert_eq!(def.shape.gpus_per_node, 2);
        assert_eq!(def.capabilities, vec![CONTAINER_TAG.to_string()]);
        assert_eq!(
            (def.price_per_hour, def.lifecycle, def.startup),
            (0.0, Lifecycle::Process, Duration::from_secs(1))
        );
    }

    #[test]
    fn old_drivers_without_compute_cap_fall_back_to_the_table() {
        let gpus = parse_nvidia_smi("Tesla T4, 15360 MiB\nbroken line\n");
        assert_eq!(gpus.len(), 1);
        let a = pool_def(8.0, 30.0, 100.0, &gpus, Vec::new()).shape.accelerator.unwrap();
        assert_eq!(
            (a.family, a.compute_capability, a.memory_gb),
            (Family::Turing, ComputeCapability::new(7, 5), 16.0)
        );
    }

    #[test]
    fn cpu_only_hosts_have_no_accelerator_or_tag() {
        let def = pool_def(2.0, 7.6, 40.0, &[], Vec::new());
        assert!(def.shape.accelerator.is_none());
        assert_eq!(def.shape.gpus_per_node, 0);
        assert!(def.capabilities.is_empty());
    }

    #[test]
    fn product_names_map_to_families() {
        let f = |n: &str| family_of(n).map(|(f, c)| (f, c.to_string()));
        assert_eq!(f("NVIDIA H200"), Some((Family::Hopper, "9.0".into())));
        assert_eq!(f("NVIDIA A100-SXM4-40GB"), Some((Family::Ampere, "8.0".into())));
        assert_eq!(f("NVIDIA A10G"), Some((Family::Ampere, "8.6".into())));
        assert_eq!(f("NVIDIA RTX A6000"), Some((Family::Ampere, "8.6".into())));
        assert_eq!(f("NVIDIA GeForce RTX 3090"), Some((Family::Ampere, "8.6".into())));
        assert_eq!(f("NVIDIA GeForce RTX 4090"), Some((Family::Ada, "8.9".into())));
        assert_eq!(f("NVIDIA RTX 6000 Ada Generation"), Some((Family::Ada, "8.9".into())));
        assert_eq!(f("NVIDIA L4"), Some((Family::Ada, "8.9".into())));
        assert_eq!(f("NVIDIA L40S"), Some((Family::Ada, "8.9".into())));
        assert_eq!(f("NVIDIA B200"), Some((Family::Blackwell, "10.0".into())));
        assert_eq!(f("NVIDIA GeForce RTX 5090"), Some((Family::Blackwell, "12.0".into())));
        assert_eq!(f("Quadro RTX 8000"), Some((Family::Turing, "7.5".into())));
        assert_eq!(f("Tesla V100-SXM2-32GB"), Some((Family::Volta, "7.0".into())));
        assert_eq!(f("Tesla P100-PCIE-16GB"), Some((Family::Pascal, "6.0".into())));
        assert_eq!(f("NVIDIA GeForce GTX 1080 Ti"), Some((Family::Pascal, "6.1".into())));
        assert_eq!(f("NVIDIA GeForce GTX 1660"), Some((Family::Turing, "7.5".into())));
        assert_eq!(f("Mystery Accelerator 9000"), None);
    }

    #[test]
    fn memory_rounds_to_marketed_sizes() {
        assert_eq!(marketed_gb(81559.0), 80.0);
        assert_eq!(marketed_gb(143771.0), 141.0);
        assert_eq!(marketed_gb(23028.0), 24.0);
        assert_eq!(marketed_gb(40960.0), 40.0);
        assert_eq!(marketed_gb(46068.0), 48.0);
        assert_eq!(marketed_gb(3000.0), 2.9);
        let mi = "MemTotal:       16314228 kB\nMemFree: 1 kB\n";
        assert!((parse_meminfo_total_gib(mi).unwrap() - 15.56).abs() < 0.01);
    }
}
