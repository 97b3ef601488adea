//! Synthetic fleets and health views for benchmarks, tests and demos.
//!
//! Realistic in shape rather than in any one operator's numbers: several
//! providers of different kinds, 3–6 regions (one of them compliance
//! tagged), consumer 24 GB cards up to 8×141 GB NVLink nodes plus AMD,
//! Intel and CPU-only pools, pools of 4–64 nodes, tens of classes, partial
//! usage, a few cordoned/draining/down nodes, spot and reserved pools and
//! some lend limits; pools state their fabric and nodes their switch (8–32
//! nodes per switch, for gangs). Deterministic for a seed; no I/O, no clock. The only
//! randomness is [`SplitMix64`], seeded by the caller.

use super::{
    Accelerator, Fleet, FleetBuilder, Free, Lifecycle, NodeDef, NodeFabric, NodeState, PoolDef, ProviderKind,
    Shape,
};
use crate::accel::{ComputeCapability, Fabric, Family, Interconnect, Vendor};
use crate::health::{Health, HealthView};
use std::time::Duration;

/// A tiny, fast, seedable generator (Steele et al.'s SplitMix64). Good
/// enough for synthetic data; not for anything that needs to be unguessable.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n`; 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((self.unit() * n as f64) as usize).min(n.saturating_sub(1))
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    pub fn between(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// One element; `None` only for an empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> Option<&'a T> {
        xs.get(self.below(xs.len()))
    }
}

/// One accelerator offering in the synthetic catalog.
struct Gpu {
    short: &'static str,
    model: &'static str,
    vendor: Vendor,
    family: Family,
    cc: (u8, u8),
    memory_gb: f64,
    counts: &'static [u32],
    /// Interconnect of multi-GPU nodes.
    link: Interconnect,
    usd_per_gpu: f64,
    cpu_per_gpu: f64,
    ram_per_gpu: f64,
    caps: &'static [&'static str],
}

/// `names`: (short, model); `chip`: (family, compute capability, GB per GPU);
/// `cpu_ram`: CPU cores and RAM GB per GPU.
const fn gpu(
    names: (&'static str, &'static str),
    chip: (Family, (u8, u8), f64),
    counts: &'static [u32],
    link: Interconnect,
    usd_per_gpu: f64,
    cpu_ram: (f64, f64),
    caps: &'static [&'static str],
) -> Gpu {
    let (short, model) = names;
    let (family, cc, memory_gb) = chip;
    let vendor = family.vendor();
    Gpu {
        short,
        model,
        vendor,
        family,
        cc,
        memory_gb,
        counts,
        link,
        usd_per_gpu,
        cpu_per_gpu: cpu_ram.0,
        ram_per_gpu: cpu_ram.1,
        caps,
    }
}

use Interconnect::{Nvlink, Pcie, Xgmi};
const RTX4090: Gpu =
    gpu(("4090", "RTX-4090"), (Family::Ada, (8, 9), 24.0), &[1, 2, 4], Pcie, 0.40, (8.0, 32.0), &[]);
const L4: Gpu =
    gpu(("l4", "L4"), (Family::Ada, (8, 9), 24.0), &[1, 4, 8], Pcie, 0.70, (8.0, 32.0), &["inference"]);
const A10G: Gpu =
    gpu(("a10g", "A10G"), (Family::Ampere, (8, 6), 24.0), &[1, 4], Pcie, 1.00, (8.0, 32.0), &["inference"]);
const L40S: Gpu = gpu(
    ("l40s", "L40S"),
    (Family::Ada, (8, 9), 48.0),
    &[1, 4, 8],
    Pcie,
    1.50,
    (12.0, 64.0),
    &["fp8", "inference"],
);
const A100_40: Gpu =
    gpu(("a100", "A100-SXM4"), (Family::Ampere, (8, 0), 40.0), &[1, 8], Nvlink, 1.60, (12.0, 96.0), &[]);
const A100_80: Gpu = gpu(
    ("a100l", "A100-SXM4"),
    (Family::Ampere, (8, 0), 80.0),
    &[8],
    Nvlink,
    2.00,
    (12.0, 128.0),
    &["long-training"],
);
const H100: Gpu = gpu(
    ("h100", "H100-SXM"),
    (Family::Hopper, (9, 0), 80.0),
    &[8],
    Nvlink,
    3.20,
    (16.0, 224.0),
    &["fp8", "infiniband", "long-training"],
);
const H100_PCIE: Gpu =
    gpu(("h100p", "H100-PCIe"), (Family::Hopper, (9, 0), 80.0), &[1, 2], Pcie, 2.60, (16.0, 128.0), &["fp8"]);
const H200: Gpu = gpu(
    ("h200", "H200-SXM"),
    (Family::Hopper, (9, 0), 141.0),
    &[8],
    Nvlink,
    4.20,
    (16.0, 256.0),
    &["fp8", "infiniband", "long-training"],
);
const MI300X: Gpu = gpu(
    ("mi300x", "MI300X"),
    (Family::Cdna3, (9, 4), 192.0),
    &[8],
    Xgmi,
    3.00,
    (16.0, 256.0),
    &["long-training"],
);
const GAUDI2: Gpu =
    gpu(("gaudi2", "Gaudi2"), (Family::Gaudi2, (0, 0), 96.0), &[8], Pcie, 1.40, (12.0, 128.0), &[]);

/// CPU-only shapes: (short name, cores, RAM GB, USD per node-hour).
const CPUS: [(&str, f64, f64, f64); 3] =
    [("cpu32", 32.0, 128.0, 1.20), ("cpu96", 96.0, 384.0, 3.60), ("mem16", 16.0, 256.0, 1.10)];

/// A provider template.
struct ProviderT {
    name: &'static str,
    kind: ProviderKind,
    lifecycle: Lifecycle,
    regions: &'static [&'static str],
    gpus: &'static [&'static Gpu],
    /// Share of pools that are CPU-only.
    cpu_share: f64,
    price_factor: f64,
    /// Startup range in seconds.
    startup: (u64, u64),
    owned: bool,
    /// Relative share of pools.
    weight: f64,
}

const PROVIDERS: [ProviderT; 6] = [
    ProviderT {
        name: "cloud-a",
        kind: ProviderKind::Cloud,
        lifecycle: Lifecycle::Vm,
        regions: &["us-east", "us-west", "eu-west"],
        gpus: &[&L4, &A10G, &L40S, &A100_40, &A100_80, &H100, &H200],
        cpu_share: 0.12,
        price_factor: 1.0,
        startup: (120, 360),
        owned: false,
        weight: 0.30,
    },
    ProviderT {
        name: "cloud-b",
        kind: ProviderKind::Cloud,
        lifecycle: Lifecycle::Vm,
        regions: &["us-east", "eu-central", "ap-south"],
        gpus: &[&L4, &L40S, &A100_80, &H100, &MI300X, &GAUDI2],
        cpu_share: 0.12,
        price_factor: 0.9,
        startup: (90, 300),
        owned: false,
        weight: 0.25,
    },
    ProviderT {
        name: "onprem",
        kind: ProviderKind::Slurm,
        lifecycle: Lifecycle::Job,
        regions: &["onprem-a"],
        gpus: &[&A100_40, &A100_80, &H100, &L40S],
        cpu_share: 0.2,
        price_factor: 0.45,
        startup: (20, 90),
        owned: true,
        weight: 0.20,
    },
    ProviderT {
        name: "lab-k8s",
        kind: ProviderKind::Kubernetes,
        lifecycle: Lifecycle::Container,
        regions: &["eu-central"],
        gpus: &[&L4, &A10G, &L40S, &H100_PCIE],
        cpu_share: 0.25,
        price_factor: 0.6,
        startup: (15, 45),
        owned: true,
        weight: 0.10,
    },
    ProviderT {
        name: "gpu-rent",
        kind: ProviderKind::Ssh,
        lifecycle: Lifecycle::Process,
        regions: &["us-west", "eu-west"],
        gpus: &[&RTX4090, &A10G, &H100_PCIE],
        cpu_share: 0.0,
        price_factor: 0.8,
        startup: (5, 20),
        owned: false,
        weight: 0.08,
    },
    ProviderT {
        name: "ray-prod",
        kind: ProviderKind::Ray,
        lifecycle: Lifecycle::Process,
        regions: &["us-east"],
        gpus: &[&L4, &A100_40, &H100],
        cpu_share: 0.15,
        price_factor: 0.7,
        startup: (5, 30),
        owned: true,
        weight: 0.07,
    },
];

/// Regions whose pools carry the `gdpr` compliance tag.
const GDPR_REGIONS: [&str; 1] = ["eu-central"];

/// Knobs for [`synth_fleet_with`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthParams {
    /// Exactly this many nodes.
    pub nodes: usize,
    pub seed: u64,
    /// Smallest and largest pool, in nodes; sizes lean toward the small end.
    pub pool_nodes: (usize, usize),
}

impl SynthParams {
    /// Pools of 4–64 nodes.
    pub fn new(nodes: usize, seed: u64) -> Self {
        Self { nodes, seed, pool_nodes: (4, 64) }
    }
}

/// A fleet of exactly `nodes` nodes in pools of 4–64, the same for the same
/// `(nodes, seed)`.
pub fn synth_fleet(nodes: usize, seed: u64) -> Fleet {
    synth_fleet_with(&SynthParams::new(nodes, seed))
}

/// A fleet as `params` describe, the same for the same params.
pub fn synth_fleet_with(params: &SynthParams) -> Fleet {
    let SynthParams { nodes, seed, pool_nodes: (min_pool, max_pool) } = *params;
    let (min_pool, max_pool) = (min_pool.max(1), max_pool.max(min_pool.max(1)));
    let mut rng = SplitMix64::new(seed);
    // The first four providers always; the others with a fair chance.
    let chosen: Vec<usize> = (0..PROVIDERS.len()).filter(|&i| i < 4 || rng.chance(0.6)).collect();
    let total_weight: f64 = chosen.iter().map(|&i| PROVIDERS[i].weight).sum();

    let mut plans: Vec<Vec<(PoolDef, Vec<NodeDef>)>> = chosen.iter().map(|_| Vec::new()).collect();
    let mut remaining = nodes;
    let mut serial = 0usize;
    while remaining > 0 {
        let mut roll = rng.unit() * total_weight;
        let mut slot = chosen.len() - 1;
        for (k, &i) in chosen.iter().enumerate() {
            roll -= PROVIDERS[i].weight;
            if roll < 0.0 {
                slot = k;
                break;
            }
        }
        let t = &PROVIDERS[chosen[slot]];
        let skew = rng.unit();
        let span = (max_pool - min_pool + 1) as f64;
        let size = (min_pool + (skew * skew * span) as usize).min(max_pool).min(remaining);
        serial += 1;
        let (mut def, per_node_gpus) = pool_def(&mut rng, t, serial);
        // Switches from a generator of their own, so that the rest of the
        // fleet is what it was before fleets had switches.
        let per_switch = 8 + SplitMix64::new(seed ^ (serial as u64).wrapping_mul(0x9E37_79B9)).below(25);
        let node_defs: Vec<NodeDef> = (0..size)
            .map(|j| NodeDef {
                switch: Some(format!("{}-sw{}", def.name, j / per_switch)),
                ..node_def(&mut rng, &def, t, per_node_gpus, j)
            })
            .collect();
        if t.owned && per_node_gpus > 0 && rng.chance(0.25) {
            // Owners lend only part of some pools.
            def.lend_limit_gpus = Some((per_node_gpus * size as u32).div_ceil(3));
        }
        plans[slot].push((def, node_defs));
        remaining -= size;
    }

    let mut b = FleetBuilder::new();
    for (slot, &i) in chosen.iter().enumerate() {
        let t = &PROVIDERS[i];
        let gpus: u64 = plans[slot].iter().map(|(d, n)| d.shape.gpus_per_node as u64 * n.len() as u64).sum();
        let lend = (t.owned && gpus > 0).then(|| (gpus as f64 * 0.6).ceil() as u32);
        let added = b.provider(t.name, t.kind, lend);
        debug_assert!(added.is_ok(), "provider names are distinct constants");
        for (def, node_defs) in std::mem::take(&mut plans[slot]) {
            // Pool names carry a fleet-wide serial and node names their pool's
            // name, so neither can collide and the builder cannot refuse.
            let added = b.pool(def, node_defs);
            debug_assert!(added.is_ok(), "synthetic pools are valid by construction: {added:?}");
        }
    }
    b.build()
}

/// The network between a GPU template's nodes: InfiniBand for the
/// training parts that carry the tag, RoCE for the A100s, Ethernet else.
fn gpu_fabric(g: &Gpu) -> NodeFabric {
    if g.caps.contains(&"infiniband") {
        NodeFabric { kind: Fabric::Infiniband, gbps: 400.0 }
    } else if g.family == Family::Ampere && g.link == Nvlink {
        NodeFabric { kind: Fabric::Roce, gbps: 200.0 }
    } else {
        NodeFabric { kind: Fabric::Ethernet, gbps: 100.0 }
    }
}

fn pool_def(rng: &mut SplitMix64, t: &ProviderT, serial: usize) -> (PoolDef, u32) {
    // Templates are constants with non-empty region lists.
    let region = rng.pick(t.regions).copied().unwrap_or("us-east");
    let spot = t.kind == ProviderKind::Cloud && rng.chance(0.3);
    let reserved = t.owned || (t.kind == ProviderKind::Cloud && !spot && rng.chance(0.1));
    let compliance = if GDPR_REGIONS.contains(&region) { vec!["gdpr".to_string()] } else { Vec::new() };
    let startup =
        Duration::from_secs(t.startup.0 + rng.below((t.startup.1 - t.startup.0) as usize + 1) as u64);
    let price_factor = t.price_factor * if spot { 0.35 } else { 1.0 } * rng.between(0.95, 1.1);

    let gpu = (!rng.chance(t.cpu_share)).then(|| rng.pick(t.gpus).copied()).flatten();
    let (name, shape, price, caps) = match gpu {
        Some(g) => {
            let n = rng.pick(g.counts).copied().unwrap_or(1);
            let shape = Shape {
                accelerator: Some(Accelerator {
                    vendor: g.vendor,
                    model: g.model.to_string(),
                    family: g.family,
                    compute_capability: ComputeCapability::new(g.cc.0, g.cc.1),
                    memory_gb: g.memory_gb,
                    throughput: None,
                }),
                gpus_per_node: n,
                interconnect: if n > 1 { g.link } else { Pcie },
                cpu_cores: g.cpu_per_gpu * n as f64,
                memory_gb: g.ram_per_gpu * n as f64,
                disk_gb: 500.0 * n as f64,
                fabric: Some(gpu_fabric(g)),
            };
            let name = format!("{region}-{}x{n}", g.short);
            (name, shape, g.usd_per_gpu * n as f64, g.caps.iter().map(|c| c.to_string()).collect())
        }
        None => {
            let (short, cores, ram, usd) = CPUS[rng.below(CPUS.len())];
            let shape = Shape {
                accelerator: None,
                gpus_per_node: 0,
                interconnect: Pcie,
                cpu_cores: cores,
                memory_gb: ram,
                disk_gb: 1000.0,
                fabric: Some(NodeFabric { kind: Fabric::Ethernet, gbps: 25.0 }),
            };
            (format!("{region}-{short}"), shape, usd, Vec::new())
        }
    };
    let gpus_per_node = shape.gpus_per_node;
    let def = PoolDef {
        name: format!("{name}{}-{serial}", if spot { "-spot" } else { "" }),
        region: region.to_string(),
        shape,
        price_per_hour: (price * price_factor * 100.0).round() / 100.0,
        startup,
        capabilities: caps,
        compliance,
        reserved,
        interruptible: spot,
        lifecycle: t.lifecycle,
        lend_limit_gpus: None,
    };
    (def, gpus_per_node)
}

fn node_def(rng: &mut SplitMix64, pool: &PoolDef, t: &ProviderT, gpus: u32, j: usize) -> NodeDef {
    let s = &pool.shape;
    let state = match rng.unit() {
        x if x < 0.02 => NodeState::Cordoned,
        x if x < 0.03 => NodeState::Down,
        x if x < 0.035 => NodeState::Draining,
        _ => NodeState::Ready,
    };
    // Fraction of the node in use: idle, partly used, or full.
    let busy = match rng.unit() {
        x if x < 0.4 => 0.0,
        x if x < 0.8 => rng.between(0.1, 0.9),
        _ => 1.0,
    };
    let used_gpus = if gpus > 0 { ((gpus as f64 * busy).round() as u32).min(gpus) } else { 0 };
    let frac = if gpus > 0 { used_gpus as f64 / gpus as f64 } else { busy };
    let used = Free {
        gpus: used_gpus,
        cpu_cores: (s.cpu_cores * frac).floor(),
        memory_gb: (s.memory_gb * frac).floor(),
        disk_gb: (s.disk_gb * frac * 0.5).floor(),
    };
    let canopy_gpus = if t.owned { used_gpus / 2 + u32::from(rng.chance(0.5)) * (used_gpus / 2) } else { 0 };
    NodeDef { name: format!("{}-{}-{j:02}", t.name, pool.name), state, used, canopy_gpus, switch: None }
}

/// Health for `fleet`: every provider and most pools observed, a few
/// degraded nodes, and rare quarantines.
pub fn synth_health(fleet: &Fleet, seed: u64) -> HealthView {
    let mut rng = SplitMix64::new(seed ^ 0x5EED_4EA1_7000_0001);
    let mut h = HealthView::default();
    for p in &fleet.providers {
        let samples = 50 + rng.below(2000) as u32;
        h.providers
            .insert(p.name.clone(), Health::new(rng.between(0.9, 1.0), rng.between(0.9, 0.99), samples));
    }
    for i in 0..fleet.pools.len() {
        if rng.chance(0.7) {
            let mut health =
                Health::new(rng.between(0.85, 1.0), rng.between(0.85, 0.99), 5 + rng.below(300) as u32);
            health.quarantined = rng.chance(0.02);
            h.pools.insert(fleet.pool_label(super::PoolIdx(i as u32)), health);
        }
    }
    for n in &fleet.nodes {
        if rng.chance(0.03) {
            let mut health =
                Health::new(rng.between(0.3, 0.8), rng.between(0.5, 0.9), 3 + rng.below(30) as u32);
            health.quarantined = rng.chance(0.15);
            h.nodes.insert(n.name.clone(), health);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleets_are_exact_in_size_and_repeatable() {
        for n in [0, 1, 7, 100, 1000] {
            let f = synth_fleet(n, 42);
            assert_eq!(f.nodes.len(), n);
            assert_eq!(f, synth_fleet(n, 42));
        }
        assert_ne!(synth_fleet(100, 1), synth_fleet(100, 2));
        let big_pools =
            synth_fleet_with(&SynthParams { pool_nodes: (200, 350), ..SynthParams::new(10_000, 3) });
        assert_eq!(big_pools.nodes.len(), 10_000);
        assert!(big_pools.pools.len() < 60, "{} pools", big_pools.pools.len());
    }

    #[test]
    fn a_large_fleet_looks_like_a_real_one() {
        let f = synth_fleet(10_000, 7);
        assert!(f.providers.len() >= 4);
        let regions = f.regions();
        assert!((3..=6).contains(&regions.len()), "{regions:?}");
        assert!(f.class_count >= 10 && f.class_count < 100, "{} classes", f.class_count);
        assert!(f.pools.iter().all(|p| p.nodes.len() <= 64));
        assert!(f.pools.iter().any(|p| p.interruptible) && f.pools.iter().any(|p| p.reserved));
        assert!(f.pools.iter().any(|p| p.shape.gpus_per_node == 0));
        assert!(f.pools.iter().any(|p| p.gpu_memory_gb() == 24.0));
        assert!(f.pools.iter().any(|p| p.shape.gpus_per_node == 8 && p.shape.interconnect == Nvlink));
        assert!(f.pools.iter().any(|p| p.compliance.iter().any(|c| c == "gdpr")));
        assert!(f.providers.iter().any(|p| p.lend_limit_gpus.is_some()));
        assert!(f.nodes.iter().any(|n| n.state == NodeState::Cordoned));
        assert!(f.nodes.iter().any(|n| n.free.gpus > 0 && n.free.gpus < 8));
        let models: std::collections::HashSet<_> = f
            .pools
            .iter()
            .filter_map(|p| p.shape.accelerator.as_ref().map(|a| (a.model.clone(), a.memory_gb as u32)))
            .collect();
        assert!(models.len() >= 6);
        assert!(f.pools.iter().any(|p| p.shape.fabric.is_some_and(|x| x.kind == Fabric::Infiniband)));
        assert!(f.nodes.iter().all(|n| n.switch.is_some()));
        let h = synth_health(&f, 7);
        assert!(h.nodes.values().any(|n| n.score < 0.8));
        assert!(h.nodes.values().any(|n| n.quarantined));
    }
}
