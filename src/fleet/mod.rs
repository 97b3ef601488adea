//! The fleet: providers → pools → nodes, as the scheduler sees them.
//!
//! This module owns the in-memory model of capacity and its invariants:
//! every pool belongs to one provider, every node to one pool, a pool's
//! nodes are contiguous in [`Fleet::nodes`], and every pool carries a
//! precomputed [`ClassId`] shared by all pools of the same shape, so a
//! shape constraint is checked once per class rather than per node
//! (Nomad's computed node classes). It does no I/O: [`load`] reads fleet
//! files and [`synth`] generates large synthetic fleets.

use crate::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;
use std::time::Duration;

pub mod load;
pub mod synth;
pub mod throughput;

/// The capability tag of a pool that runs workloads with `runtime.image`
/// in containers. The scheduler's `image` filter reads it
/// (`schedule::check`); each provider states it for its own pools:
/// the local provider and SSH hosts where a container engine works, fleet
/// files by provider kind ([`ProviderKind::runs_images_by_default`]),
/// never Slurm or Ray (they refuse image specs).
pub const CONTAINER_TAG: &str = "container-runtime";

/// The capability tag of a pool whose container engine cannot hold a
/// container to a memory limit (rootless podman on cgroup v1): the
/// scheduler's `image-memory` filter keeps memory-limited image work off it.
pub const CONTAINER_MEMORY_UNENFORCED_TAG: &str = "container-memory-unenforced";

/// What kind of system a provider is; decides which adapter drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    Local,
    Sim,
    Slurm,
    Ray,
    Kubernetes,
    Ssh,
    Cloud,
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            ProviderKind::Local => "local",
            ProviderKind::Sim => "sim",
            ProviderKind::Slurm => "slurm",
            ProviderKind::Ray => "ray",
            ProviderKind::Kubernetes => "kubernetes",
            ProviderKind::Ssh => "ssh",
            ProviderKind::Cloud => "cloud",
        };
        f.write_str(s)
    }
}

impl ProviderKind {
    /// Whether pools of this kind described in a fleet file run container
    /// images unless the file says (`images = true|false` on the
    /// provider). Kubernetes runs pods, which are containers; cloud VMs and
    /// GPU marketplaces are provisioned with a container engine (as
    /// SkyPilot and dstack do), and the simulated provider models image
    /// pulls. Slurm and Ray do not: Canopy's adapters refuse image specs
    /// there (Slurm 22.05's `--container` wants an OCI bundle and the
    /// cluster's `oci.conf`; Ray's `image_uri` needs the cluster's Ray
    /// inside the image). Local and SSH capacity probes for an engine, so
    /// a file has to say so for them.
    pub fn runs_images_by_default(self) -> bool {
        matches!(self, ProviderKind::Kubernetes | ProviderKind::Cloud | ProviderKind::Sim)
    }
}

/// How an attempt comes to life on this capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lifecycle {
    /// A process on an existing machine.
    Process,
    /// A virtual machine booted for the attempt.
    Vm,
    /// A container on a shared node.
    Container,
    /// A batch job queued in a workload manager.
    Job,
}

impl std::fmt::Display for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Lifecycle::Process => "process",
            Lifecycle::Vm => "vm",
            Lifecycle::Container => "container",
            Lifecycle::Job => "job",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    #[default]
    Ready,
    /// No new work; running work continues.
    Cordoned,
    /// No new work; running work is being moved off.
    Draining,
    /// Unreachable or failed.
    Down,
}

impl NodeState {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeState::Ready => "ready",
            NodeState::Cordoned => "cordoned",
            NodeState::Draining => "draining",
            NodeState::Down => "down",
        }
    }
}

impl std::fmt::Display for NodeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One accelerator model, as a pool offers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accelerator {
    pub vendor: Vendor,
    /// Marketing model for display ("H100-SXM5-80GB"); never matched on.
    pub model: String,
    pub family: Family,
    pub compute_capability: ComputeCapability,
    /// Memory per GPU.
    pub memory_gb: f64,
    /// Training throughput of one GPU relative to a V100, when the fleet
    /// states it; else [`throughput::relative`] of the model's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<f64>,
}

impl Accelerator {
    /// Training throughput of one GPU relative to a V100: the stated
    /// figure, else the table's for the model, else 1 (priced as a V100).
    pub fn relative_speed(&self) -> f64 {
        self.known_speed().unwrap_or(1.0)
    }

    /// The stated figure, else the table's; `None` when neither knows it.
    pub fn known_speed(&self) -> Option<f64> {
        self.throughput.or_else(|| throughput::relative(&self.model)).filter(|s| *s > 0.0)
    }
}

/// The hardware shape of every node in a pool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    /// `None` for CPU-only pools.
    pub accelerator: Option<Accelerator>,
    pub gpus_per_node: u32,
    pub interconnect: Interconnect,
    pub cpu_cores: f64,
    pub memory_gb: f64,
    pub disk_gb: f64,
    /// The network between this pool's nodes, for gangs; `None` when the
    /// fleet does not say (a gang that asks for a fabric cannot use it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<NodeFabric>,
}

/// A pool's inter-node network: its kind and bandwidth per node.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NodeFabric {
    pub kind: Fabric,
    /// Gbit/s per node.
    pub gbps: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ProviderIdx(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PoolIdx(pub u32);
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeIdx(pub u32);
/// Pools with identical shape and capability tags share a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ClassId(pub u32);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provider {
    pub name: String,
    pub kind: ProviderKind,
    /// Most GPUs Canopy may hold in this provider at once (the owner's cap).
    pub lend_limit_gpus: Option<u32>,
    /// Pools of this provider, contiguous in [`Fleet::pools`].
    pub pools: Range<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    /// Unique within its provider.
    pub name: String,
    pub provider: ProviderIdx,
    pub region: String,
    pub shape: Shape,
    /// Price of one whole node for one hour, in USD.
    pub price_per_hour: f64,
    /// Expected time from launch to running.
    pub startup: Duration,
    /// Capability tags, sorted and deduplicated.
    pub capabilities: Vec<String>,
    /// Compliance tags, sorted and deduplicated.
    pub compliance: Vec<String>,
    /// Already paid for (reserved or owned) capacity.
    pub reserved: bool,
    /// May be reclaimed by the provider (spot, preemptible).
    pub interruptible: bool,
    pub lifecycle: Lifecycle,
    /// Most GPUs Canopy may hold in this pool at once.
    pub lend_limit_gpus: Option<u32>,
    pub class: ClassId,
    /// Nodes of this pool, contiguous in [`Fleet::nodes`].
    pub nodes: Range<u32>,
}

impl Pool {
    /// GPU memory per GPU, 0 for CPU-only pools.
    pub fn gpu_memory_gb(&self) -> f64 {
        self.shape.accelerator.as_ref().map_or(0.0, |a| a.memory_gb)
    }

    /// What one workload's share of a node costs per hour: the largest of
    /// its GPU, CPU and memory fractions of the node's price.
    pub fn hourly_share(&self, gpus: u32, cpu_cores: f64, memory_gb: f64) -> f64 {
        self.price_per_hour * self.shape.share(gpus, cpu_cores, memory_gb)
    }
}

impl Shape {
    /// The fraction of one node a workload takes: the largest of its GPU,
    /// CPU and memory fractions, at most 1. The same for every pool of a
    /// class, so the scheduler computes it once per class.
    pub fn share(&self, gpus: u32, cpu_cores: f64, memory_gb: f64) -> f64 {
        let frac = |want: f64, have: f64| if have > 0.0 { want / have } else { 0.0 };
        frac(gpus as f64, self.gpus_per_node as f64)
            .max(frac(cpu_cores, self.cpu_cores))
            .max(frac(memory_gb, self.memory_gb))
            .min(1.0)
    }
}

/// Resources still free on a node.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Free {
    pub gpus: u32,
    pub cpu_cores: f64,
    pub memory_gb: f64,
    pub disk_gb: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Unique across the fleet.
    pub name: String,
    pub pool: PoolIdx,
    pub state: NodeState,
    pub free: Free,
    /// GPUs on this node held by Canopy's workloads (counts toward lend limits).
    pub canopy_gpus: u32,
    /// The leaf switch (or rack) this node hangs off, within its pool:
    /// the domain of a `same-switch` gang. `None` when the fleet does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
}

/// The whole fleet. Build it with [`FleetBuilder`] so the invariants hold.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Fleet {
    pub providers: Vec<Provider>,
    pub pools: Vec<Pool>,
    pub nodes: Vec<Node>,
    /// Number of distinct classes; class ids are `0..class_count`.
    pub class_count: u32,
}

impl Fleet {
    pub fn provider(&self, i: ProviderIdx) -> &Provider {
        &self.providers[i.0 as usize]
    }
    pub fn pool(&self, i: PoolIdx) -> &Pool {
        &self.pools[i.0 as usize]
    }
    pub fn node(&self, i: NodeIdx) -> &Node {
        &self.nodes[i.0 as usize]
    }
    pub fn pool_nodes(&self, i: PoolIdx) -> &[Node] {
        let r = &self.pool(i).nodes;
        &self.nodes[r.start as usize..r.end as usize]
    }
    pub fn provider_of(&self, pool: PoolIdx) -> &Provider {
        self.provider(self.pool(pool).provider)
    }
    pub fn node_by_name(&self, name: &str) -> Option<NodeIdx> {
        self.nodes.iter().position(|n| n.name == name).map(|i| NodeIdx(i as u32))
    }
    pub fn pool_by_name(&self, provider: &str, pool: &str) -> Option<PoolIdx> {
        self.pools
            .iter()
            .position(|p| p.name == pool && self.provider(p.provider).name == provider)
            .map(|i| PoolIdx(i as u32))
    }
    /// `provider/pool`, the name operators see.
    pub fn pool_label(&self, i: PoolIdx) -> String {
        let p = self.pool(i);
        format!("{}/{}", self.provider(p.provider).name, p.name)
    }
    /// GPUs Canopy holds in a pool.
    pub fn canopy_gpus_in_pool(&self, i: PoolIdx) -> u32 {
        self.pool_nodes(i).iter().map(|n| n.canopy_gpus).sum()
    }
    /// GPUs Canopy holds in a provider.
    pub fn canopy_gpus_in_provider(&self, i: ProviderIdx) -> u32 {
        let r = self.provider(i).pools.clone();
        r.map(|p| self.canopy_gpus_in_pool(PoolIdx(p))).sum()
    }
    pub fn total_gpus(&self) -> u64 {
        self.pools.iter().map(|p| p.shape.gpus_per_node as u64 * p.nodes.len() as u64).sum()
    }
    pub fn regions(&self) -> Vec<&str> {
        let mut r: Vec<&str> = self.pools.iter().map(|p| p.region.as_str()).collect();
        r.sort_unstable();
        r.dedup();
        r
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FleetError {
    #[error("provider {0:?} is defined twice; provider names must be unique")]
    DuplicateProvider(String),
    #[error("pool {provider}/{pool} is defined twice; pool names must be unique within a provider")]
    DuplicatePool { provider: String, pool: String },
    #[error("node {0:?} is defined twice; node names must be unique across the fleet")]
    DuplicateNode(String),
    #[error("pool {0}: {1}")]
    BadPool(String, String),
    #[error("node {0}: {1}")]
    BadNode(String, String),
}

/// A pool as handed to the builder, before indices and classes exist.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolDef {
    pub name: String,
    pub region: String,
    pub shape: Shape,
    pub price_per_hour: f64,
    pub startup: Duration,
    pub capabilities: Vec<String>,
    pub compliance: Vec<String>,
    pub reserved: bool,
    pub interruptible: bool,
    pub lifecycle: Lifecycle,
    pub lend_limit_gpus: Option<u32>,
}

/// A node as handed to the builder. `used` is what is already taken.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDef {
    pub name: String,
    pub state: NodeState,
    pub used: Free,
    /// Of `used.gpus`, how many are Canopy's.
    pub canopy_gpus: u32,
    /// Its leaf switch or rack ([`Node::switch`]).
    pub switch: Option<String>,
}

impl NodeDef {
    pub fn idle(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: NodeState::Ready,
            used: Free::default(),
            canopy_gpus: 0,
            switch: None,
        }
    }
}

/// Builds a [`Fleet`], checking names and computing class ids.
#[derive(Debug, Default)]
pub struct FleetBuilder {
    fleet: Fleet,
    classes: HashMap<String, u32>,
    node_names: std::collections::HashSet<String>,
}

impl FleetBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn provider(
        &mut self,
        name: impl Into<String>,
        kind: ProviderKind,
        lend_limit_gpus: Option<u32>,
    ) -> Result<ProviderIdx, FleetError> {
        let name = name.into();
        if self.fleet.providers.iter().any(|p| p.name == name) {
            return Err(FleetError::DuplicateProvider(name));
        }
        let at = self.fleet.pools.len() as u32;
        self.fleet.providers.push(Provider { name, kind, lend_limit_gpus, pools: at..at });
        Ok(ProviderIdx(self.fleet.providers.len() as u32 - 1))
    }

    /// Adds a pool with its nodes to the most recently added provider.
    pub fn pool(&mut self, def: PoolDef, nodes: Vec<NodeDef>) -> Result<PoolIdx, FleetError> {
        let provider_i = self
            .fleet
            .providers
            .len()
            .checked_sub(1)
            .ok_or_else(|| FleetError::BadPool(def.name.clone(), "added before any provider".into()))?;
        let provider_name = self.fleet.providers[provider_i].name.clone();
        let label = format!("{provider_name}/{}", def.name);
        let range = self.fleet.providers[provider_i].pools.clone();
        if self.fleet.pools[range.start as usize..].iter().any(|p| p.name == def.name) {
            return Err(FleetError::DuplicatePool { provider: provider_name, pool: def.name });
        }
        let s = &def.shape;
        if s.accelerator.is_some() != (s.gpus_per_node > 0) {
            return Err(FleetError::BadPool(
                label,
                "a pool has an accelerator exactly when gpus_per_node > 0".into(),
            ));
        }
        for (what, v) in [
            ("cpu_cores", s.cpu_cores),
            ("memory_gb", s.memory_gb),
            ("disk_gb", s.disk_gb),
            ("price_per_hour", def.price_per_hour),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(FleetError::BadPool(
                    label,
                    format!("{what} must be a non-negative number, got {v}"),
                ));
            }
        }
        let class = self.class_of(&def);
        let pool_i = PoolIdx(self.fleet.pools.len() as u32);
        let first = self.fleet.nodes.len() as u32;
        for n in nodes {
            if !self.node_names.insert(n.name.clone()) {
                return Err(FleetError::DuplicateNode(n.name));
            }
            let u = n.used;
            if u.gpus > s.gpus_per_node
                || u.cpu_cores > s.cpu_cores
                || u.memory_gb > s.memory_gb
                || u.disk_gb > s.disk_gb
            {
                return Err(FleetError::BadNode(
                    n.name,
                    format!("uses more than the pool {label} has per node"),
                ));
            }
            if n.canopy_gpus > u.gpus {
                return Err(FleetError::BadNode(n.name, "canopy_gpus exceeds used gpus".into()));
            }
            self.fleet.nodes.push(Node {
                name: n.name,
                pool: pool_i,
                state: n.state,
                free: Free {
                    gpus: s.gpus_per_node - u.gpus,
                    cpu_cores: s.cpu_cores - u.cpu_cores,
                    memory_gb: s.memory_gb - u.memory_gb,
                    disk_gb: s.disk_gb - u.disk_gb,
                },
                canopy_gpus: n.canopy_gpus,
                switch: n.switch,
            });
        }
        let last = self.fleet.nodes.len() as u32;
        let mut capabilities = def.capabilities;
        capabilities.sort();
        capabilities.dedup();
        let mut compliance = def.compliance;
        compliance.sort();
        compliance.dedup();
        self.fleet.pools.push(Pool {
            name: def.name,
            provider: ProviderIdx(provider_i as u32),
            region: def.region,
            shape: def.shape,
            price_per_hour: def.price_per_hour,
            startup: def.startup,
            capabilities,
            compliance,
            reserved: def.reserved,
            interruptible: def.interruptible,
            lifecycle: def.lifecycle,
            lend_limit_gpus: def.lend_limit_gpus,
            class,
            nodes: first..last,
        });
        self.fleet.providers[provider_i].pools.end = self.fleet.pools.len() as u32;
        Ok(pool_i)
    }

    /// The class key is everything a shape constraint can test: accelerator,
    /// per-node GPU count, interconnect, CPU, RAM, disk and capability tags.
    fn class_of(&mut self, def: &PoolDef) -> ClassId {
        let mut caps = def.capabilities.clone();
        caps.sort();
        caps.dedup();
        let key = format!("{:?}|{}", def.shape, caps.join(","));
        let next = self.classes.len() as u32;
        let id = *self.classes.entry(key).or_insert(next);
        ClassId(id)
    }

    pub fn build(mut self) -> Fleet {
        self.fleet.class_count = self.classes.len() as u32;
        self.fleet
    }
}

impl Fleet {
    /// The definition a pool was built from (for recomposing fleets).
    pub fn pool_def(&self, i: PoolIdx) -> PoolDef {
        let p = self.pool(i);
        PoolDef {
            name: p.name.clone(),
            region: p.region.clone(),
            shape: p.shape.clone(),
            price_per_hour: p.price_per_hour,
            startup: p.startup,
            capabilities: p.capabilities.clone(),
            compliance: p.compliance.clone(),
            reserved: p.reserved,
            interruptible: p.interruptible,
            lifecycle: p.lifecycle,
            lend_limit_gpus: p.lend_limit_gpus,
        }
    }

    /// The node definitions of a pool, usage included.
    pub fn node_defs(&self, i: PoolIdx) -> Vec<NodeDef> {
        let s = &self.pool(i).shape;
        self.pool_nodes(i)
            .iter()
            .map(|n| NodeDef {
                name: n.name.clone(),
                state: n.state,
                used: Free {
                    gpus: s.gpus_per_node.saturating_sub(n.free.gpus),
                    cpu_cores: (s.cpu_cores - n.free.cpu_cores).max(0.0),
                    memory_gb: (s.memory_gb - n.free.memory_gb).max(0.0),
                    disk_gb: (s.disk_gb - n.free.disk_gb).max(0.0),
                },
                canopy_gpus: n.canopy_gpus,
                switch: n.switch.clone(),
            })
            .collect()
    }

    /// The same fleet with every GPU marked as Canopy's counted as used by
    /// someone else instead (usage unchanged).
    pub fn with_canopy_holdings_as_others(&self) -> Result<Fleet, FleetError> {
        let mut b = FleetBuilder::new();
        self.add_to(&mut b, |n| NodeDef { canopy_gpus: 0, ..n })?;
        Ok(b.build())
    }

    /// Adds this fleet's providers, pools and nodes to a builder, each node
    /// through `node`.
    fn add_to(&self, b: &mut FleetBuilder, node: impl Fn(NodeDef) -> NodeDef) -> Result<(), FleetError> {
        for p in &self.providers {
            b.provider(p.name.clone(), p.kind, p.lend_limit_gpus)?;
            for i in p.pools.clone() {
                b.pool(
                    self.pool_def(PoolIdx(i)),
                    self.node_defs(PoolIdx(i)).into_iter().map(&node).collect(),
                )?;
            }
        }
        Ok(())
    }

    /// A new fleet: `extra` providers first, then this fleet's providers.
    /// Class ids are recomputed over the whole.
    pub fn with_providers(&self, extra: Vec<ProviderDef>) -> Result<Fleet, FleetError> {
        let mut b = FleetBuilder::new();
        for p in extra {
            b.provider(p.name, p.kind, p.lend_limit_gpus)?;
            for (def, nodes) in p.pools {
                b.pool(def, nodes)?;
            }
        }
        self.add_to(&mut b, |n| n)?;
        Ok(b.build())
    }
}

/// A provider with its pools and nodes, before it joins a fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderDef {
    pub name: String,
    pub kind: ProviderKind,
    pub lend_limit_gpus: Option<u32>,
    pub pools: Vec<(PoolDef, Vec<NodeDef>)>,
}
