//! Fleet files: TOML describing providers, their pools and nodes, turned
//! into a [`Fleet`] through [`FleetBuilder`].
//!
//! Owns the file format (documented in the README) and its error messages.
//! Reads nothing but the text it is given, except [`load_file`], and never
//! talks to a provider: live inventory comes from provider adapters.
//!
//! ```toml
//! [[providers]]
//! name = "onprem-eu"
//! kind = "slurm"
//! lend_limit_gpus = 48
//! # images = false          # runs `runtime.image` workloads; by kind when unset:
//! #                          # kubernetes, cloud and sim yes, the rest no
//!
//! [[providers.pools]]
//! name = "h100-nvl"
//! region = "eu-west"
//! accelerator = { vendor = "nvidia", model = "H100-SXM5", family = "hopper", compute_capability = "9.0", memory_gb = 80 }
//! # throughput = 4.5        # in `accelerator`: relative to a V100, when the
//! #                          # built-in table (fleet::throughput) does not know the model
//! gpus_per_node = 8
//! interconnect = "nvlink"
//! cpu_cores = 192
//! memory_gb = 2048
//! disk_gb = 30000
//! price_per_hour = 0.0        # whole node, USD
//! startup = "30s"
//! lifecycle = "job"
//! fabric = { kind = "infiniband", gbps = 400 }   # between nodes, for gangs
//! nodes_per_switch = 2        # counted nodes: sw0 = nodes 0-1, sw1 = 2-3
//! nodes = 4                   # or a list of node tables, each with its `switch`
//! ```
//!
//! A fleet file may also carry a tenancy for `canopy sim`: `default_tenant`,
//! `[[tenant]]` and `[[flavor]]` exactly as in `canopy.toml`
//! ([`crate::tenant::TenancyDoc`]), read by [`parse_tenancy`]. [`parse`]
//! accepts and ignores them (the server takes its tenants from
//! `canopy.toml`).

use super::{
    Fleet, FleetBuilder, FleetError, Free, Lifecycle, NodeDef, NodeFabric, NodeState, PoolDef, ProviderKind,
    Shape,
};
use crate::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use crate::units::HumanDuration;
use serde::Deserialize;
use std::path::Path;

/// What went wrong reading a fleet file, with where.
#[derive(Debug, thiserror::Error)]
pub enum FleetFileError {
    #[error("{file}: cannot read the fleet file: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}:{col}: {message}")]
    Syntax { file: String, line: usize, col: usize, message: String },
    #[error("{file}: {source}")]
    Invalid {
        file: String,
        #[source]
        source: FleetError,
    },
    #[error(
        "{file}: {source} (the fleet file's tenancy tables read as in canopy.toml; see docs/sim.md, \"Tenants\")"
    )]
    Tenancy {
        file: String,
        #[source]
        source: crate::tenant::TenancyError,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    #[serde(default)]
    providers: Vec<FileProvider>,
    /// The tenancy tables, as `canopy.toml` writes them ([`parse_tenancy`]).
    #[serde(default)]
    default_tenant: Option<String>,
    #[serde(default)]
    tenant: Vec<crate::tenant::TenantDef>,
    #[serde(default)]
    flavor: Vec<crate::tenant::FlavorDef>,
    #[serde(default)]
    fair_share: Option<crate::tenant::fair::FairShareDef>,
    #[serde(default)]
    budget: Vec<crate::tenant::BudgetDef>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileProvider {
    name: String,
    kind: ProviderKind,
    #[serde(default)]
    lifecycle: Option<Lifecycle>,
    /// Whether its pools run container images; by kind when unset
    /// ([`ProviderKind::runs_images_by_default`]).
    #[serde(default)]
    images: Option<bool>,
    #[serde(default)]
    lend_limit_gpus: Option<u32>,
    #[serde(default)]
    pools: Vec<FilePool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAccelerator {
    vendor: Option<Vendor>,
    model: String,
    family: Family,
    /// CUDA compute capability: required for NVIDIA, optional elsewhere
    /// (AMD's gfx version reads the same way; other vendors have none,
    /// and their pools then serve no `min_compute_capability`).
    #[serde(default)]
    compute_capability: Option<ComputeCapability>,
    memory_gb: f64,
    /// Training throughput of one GPU relative to a V100.
    #[serde(default)]
    throughput: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePool {
    name: String,
    region: String,
    #[serde(default)]
    accelerator: Option<FileAccelerator>,
    #[serde(default)]
    gpus_per_node: u32,
    #[serde(default)]
    interconnect: Option<Interconnect>,
    cpu_cores: f64,
    memory_gb: f64,
    #[serde(default)]
    disk_gb: f64,
    price_per_hour: f64,
    #[serde(default)]
    startup: Option<HumanDuration>,
    #[serde(default)]
    capabilities: Vec<String>,
    #[serde(default)]
    compliance: Vec<String>,
    #[serde(default)]
    reserved: bool,
    #[serde(default)]
    interruptible: bool,
    #[serde(default)]
    lifecycle: Option<Lifecycle>,
    #[serde(default)]
    lend_limit_gpus: Option<u32>,
    /// The network between the pool's nodes.
    #[serde(default)]
    fabric: Option<FileFabric>,
    /// For a counted `nodes`: how many consecutive nodes share a leaf
    /// switch (`sw0`, `sw1`, …). Node lists name each node's `switch`.
    #[serde(default)]
    nodes_per_switch: Option<u32>,
    nodes: FileNodes,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFabric {
    kind: Fabric,
    /// Gbit/s per node.
    gbps: f64,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum FileNodes {
    Count(u32),
    List(Vec<FileNode>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileNode {
    name: String,
    #[serde(default)]
    state: NodeState,
    #[serde(default)]
    used_gpus: u32,
    #[serde(default)]
    used_cpu_cores: f64,
    #[serde(default)]
    used_memory_gb: f64,
    #[serde(default)]
    used_disk_gb: f64,
    /// Of `used_gpus`, how many Canopy's workloads hold.
    #[serde(default)]
    canopy_gpus: u32,
    /// The leaf switch or rack it hangs off.
    #[serde(default)]
    switch: Option<String>,
}

fn default_lifecycle(kind: ProviderKind) -> Lifecycle {
    match kind {
        ProviderKind::Local | ProviderKind::Ssh => Lifecycle::Process,
        ProviderKind::Cloud | ProviderKind::Sim => Lifecycle::Vm,
        ProviderKind::Kubernetes => Lifecycle::Container,
        ProviderKind::Slurm | ProviderKind::Ray => Lifecycle::Job,
    }
}

/// Parses fleet TOML. `file` names the source in error messages.
pub fn parse(text: &str, file: &str) -> Result<Fleet, FleetFileError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
        FleetFileError::Syntax { file: file.to_string(), line, col, message: e.message().trim().to_string() }
    })?;
    build(doc).map_err(|source| FleetFileError::Invalid { file: file.to_string(), source })
}

/// The tenancy a fleet file gives (`default_tenant`, `[[tenant]]`,
/// `[[flavor]]`), validated: empty when it gives none. `file` names the
/// source in error messages.
pub fn parse_tenancy(text: &str, file: &str) -> Result<crate::tenant::Tenancy, FleetFileError> {
    let doc: FileDoc = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((0, 0), |s| line_col(text, s.start));
        FleetFileError::Syntax { file: file.to_string(), line, col, message: e.message().trim().to_string() }
    })?;
    let doc = crate::tenant::TenancyDoc {
        default_tenant: doc.default_tenant,
        tenant: doc.tenant,
        flavor: doc.flavor,
        fair_share: doc.fair_share,
        budget: doc.budget,
    };
    doc.tenancy().map_err(|source| FleetFileError::Tenancy { file: file.to_string(), source })
}

/// Reads and parses a fleet file.
pub fn load_file(path: &Path) -> Result<Fleet, FleetFileError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|source| FleetFileError::Io { file: file.clone(), source })?;
    parse(&text, &file)
}

/// The demo fleet shipped in the binary, so `canopy` works with no files.
pub const DEMO_FLEET: &str = include_str!("../../assets/fleets/demo.toml");

/// The embedded demo fleet.
pub fn demo() -> Result<Fleet, FleetFileError> {
    parse(DEMO_FLEET, "assets/fleets/demo.toml")
}

fn build(doc: FileDoc) -> Result<Fleet, FleetError> {
    let mut b = FleetBuilder::new();
    for p in doc.providers {
        b.provider(p.name.clone(), p.kind, p.lend_limit_gpus)?;
        let provider_lifecycle = p.lifecycle.unwrap_or_else(|| default_lifecycle(p.kind));
        let images = p.images.unwrap_or_else(|| p.kind.runs_images_by_default());
        for mut pool in p.pools {
            // The provider's word on images is the pool's tag, either way.
            pool.capabilities.retain(|c| c != super::CONTAINER_TAG);
            if images {
                pool.capabilities.push(super::CONTAINER_TAG.into());
            }
            let label = format!("{}/{}", p.name, pool.name);
            let accelerator = match pool.accelerator {
                Some(a) => {
                    let family_vendor = a.family.vendor();
                    if let Some(t) = a.throughput
                        && !(t.is_finite() && t > 0.0)
                    {
                        return Err(FleetError::BadPool(
                            label,
                            format!(
                                "accelerator throughput must be a positive number (relative to a V100 = 1), got {t}"
                            ),
                        ));
                    }
                    if let Some(v) = a.vendor
                        && v != family_vendor
                    {
                        return Err(FleetError::BadPool(
                            label,
                            format!("accelerator family {} is made by {family_vendor}, not {v}", a.family),
                        ));
                    }
                    if pool.compliance.iter().any(|c| c == crate::accel::DOMESTIC_HARDWARE)
                        && !family_vendor.is_domestic_cn()
                    {
                        return Err(FleetError::BadPool(
                            label,
                            format!(
                                "compliance tag `{}` is for domestic accelerators, but {} is {family_vendor}'s; \
                                 remove the tag, or give the pool a domestic accelerator",
                                crate::accel::DOMESTIC_HARDWARE,
                                a.model
                            ),
                        ));
                    }
                    let compute_capability = match a.compute_capability {
                        Some(cc) => cc,
                        None if family_vendor == Vendor::Nvidia => {
                            return Err(FleetError::BadPool(
                                label,
                                format!(
                                    "NVIDIA accelerator {} needs its compute_capability, like \"9.0\"",
                                    a.model
                                ),
                            ));
                        }
                        None => ComputeCapability::new(0, 0),
                    };
                    Some(super::Accelerator {
                        vendor: family_vendor,
                        model: a.model,
                        family: a.family,
                        compute_capability,
                        memory_gb: a.memory_gb,
                        throughput: a.throughput,
                    })
                }
                None => None,
            };
            if let Some(f) = &pool.fabric
                && !(f.gbps.is_finite() && f.gbps > 0.0)
            {
                return Err(FleetError::BadPool(
                    label,
                    format!("fabric gbps must be positive, got {}", f.gbps),
                ));
            }
            let per_switch = match pool.nodes_per_switch {
                Some(0) => {
                    return Err(FleetError::BadPool(label, "nodes_per_switch must be at least 1".into()));
                }
                Some(_) if matches!(pool.nodes, FileNodes::List(_)) => {
                    return Err(FleetError::BadPool(
                        label,
                        "nodes_per_switch applies to a counted `nodes`; give each listed node its `switch`"
                            .into(),
                    ));
                }
                n => n,
            };
            let nodes = match pool.nodes {
                FileNodes::Count(n) => (0..n)
                    .map(|i| NodeDef {
                        switch: per_switch.map(|k| format!("sw{}", i / k)),
                        ..NodeDef::idle(format!("{}-{}-{:02}", p.name, pool.name, i))
                    })
                    .collect(),
                FileNodes::List(list) => list
                    .into_iter()
                    .map(|n| NodeDef {
                        name: n.name,
                        state: n.state,
                        used: Free {
                            gpus: n.used_gpus,
                            cpu_cores: n.used_cpu_cores,
                            memory_gb: n.used_memory_gb,
                            disk_gb: n.used_disk_gb,
                        },
                        canopy_gpus: n.canopy_gpus,
                        switch: n.switch,
                    })
                    .collect(),
            };
            let def = PoolDef {
                name: pool.name,
                region: pool.region,
                shape: Shape {
                    accelerator,
                    gpus_per_node: pool.gpus_per_node,
                    interconnect: pool.interconnect.unwrap_or(Interconnect::Pcie),
                    cpu_cores: pool.cpu_cores,
                    memory_gb: pool.memory_gb,
                    disk_gb: pool.disk_gb,
                    fabric: pool.fabric.map(|f| NodeFabric { kind: f.kind, gbps: f.gbps }),
                },
                price_per_hour: pool.price_per_hour,
                startup: pool.startup.map(|d| d.0).unwrap_or_default(),
                capabilities: pool.capabilities,
                compliance: pool.compliance,
                reserved: pool.reserved,
                interruptible: pool.interruptible,
                lifecycle: pool.lifecycle.unwrap_or(provider_lifecycle),
                lend_limit_gpus: pool.lend_limit_gpus,
            };
            b.pool(def, nodes)?;
        }
    }
    Ok(b.build())
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_fleet_is_believable() {
        let f = demo().expect("demo fleet parses");
        assert!(f.providers.len() >= 4, "at least 4 providers");
        let kinds: std::collections::HashSet<_> = f.providers.iter().map(|p| p.kind).collect();
        assert!(kinds.len() >= 4, "different lifecycles");
        assert!(f.regions().len() >= 3);
        let models: std::collections::HashSet<_> =
            f.pools.iter().filter_map(|p| p.shape.accelerator.as_ref().map(|a| a.model.clone())).collect();
        assert!(models.len() >= 6, "6+ accelerator types, got {models:?}");
        assert!(f.pools.iter().any(|p| p.interruptible));
        assert!(f.pools.iter().any(|p| p.reserved));
        assert!(f.pools.iter().any(|p| !p.compliance.is_empty()));
        assert!(f.pools.iter().any(|p| p.shape.gpus_per_node == 8
            && p.gpu_memory_gb() >= 80.0
            && p.shape.interconnect == Interconnect::Nvlink));
        assert!(f.pools.iter().any(|p| p.gpu_memory_gb() == 24.0));
        assert!(f.nodes.iter().any(|n| n.state != NodeState::Ready));
        // Classes are shared: fewer classes than pools when shapes repeat.
        assert!(f.class_count as usize <= f.pools.len());
    }

    #[test]
    fn syntax_errors_say_where() {
        let err = parse("[[providers]]\nname = \"a\"\nkind = \"slurmm\"\n", "f.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("f.toml:3:8:"), "{msg}");
        assert!(msg.contains("slurmm"), "{msg}");
    }

    #[test]
    fn semantic_errors_name_the_pool() {
        let text = r#"
[[providers]]
name = "a"
kind = "cloud"
[[providers.pools]]
name = "p"
region = "r"
accelerator = { vendor = "amd", model = "H100", family = "hopper", compute_capability = "9.0", memory_gb = 80 }
gpus_per_node = 8
cpu_cores = 8
memory_gb = 64
price_per_hour = 1.0
nodes = 1
"#;
        let msg = parse(text, "f.toml").unwrap_err().to_string();
        assert!(msg.contains("a/p") && msg.contains("hopper is made by nvidia"), "{msg}");
    }

    #[test]
    fn domestic_tag_needs_a_domestic_accelerator() {
        let pool = |acc: &str| {
            format!(
                "[[providers]]\nname = \"a\"\nkind = \"cloud\"\n[[providers.pools]]\nname = \"p\"\nregion = \"r\"\n\
                 accelerator = {acc}\ngpus_per_node = 8\ncpu_cores = 8\nmemory_gb = 64\nprice_per_hour = 1.0\n\
                 compliance = [\"domestic-hardware\"]\nnodes = 1\n"
            )
        };
        let foreign = pool(
            r#"{ vendor = "nvidia", model = "H20", family = "hopper", compute_capability = "9.0", memory_gb = 96 }"#,
        );
        let msg = parse(&foreign, "f.toml").unwrap_err().to_string();
        assert!(msg.contains("a/p") && msg.contains("H20 is nvidia's"), "{msg}");
        let ascend =
            pool(r#"{ vendor = "huawei", model = "Ascend910B", family = "ascend910b", memory_gb = 64 }"#);
        let f = parse(&ascend, "f.toml").expect("a domestic pool parses without compute_capability");
        assert_eq!(f.pools[0].shape.accelerator.as_ref().unwrap().vendor, Vendor::Huawei);
        let no_cc = pool(r#"{ model = "H100", family = "hopper", memory_gb = 80 }"#)
            .replace("compliance = [\"domestic-hardware\"]\n", "");
        let msg = parse(&no_cc, "f.toml").unwrap_err().to_string();
        assert!(msg.contains("needs its compute_capability"), "{msg}");
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("é\nx", 3), (2, 1));
    }
}
