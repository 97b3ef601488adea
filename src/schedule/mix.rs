//! A seeded mix of [`Requirements`] shaped like real traffic against
//! [`crate::fleet::synth`] fleets: mostly single-GPU inference and CPU
//! batch, some multi-GPU fine-tuning and 8-GPU training, a few constrained,
//! retried or unschedulable requests. For benchmarks and tests; no I/O.

use super::{InputSite, Requirements};
use crate::accel::{ComputeCapability, Family, Interconnect, Vendor};
use crate::fleet::synth::SplitMix64;
use crate::spec::{GbRange, Optimize, WorkloadKind};
use crate::units::Glob;
use std::time::Duration;

const H: u64 = 3600;

/// `count` requirements, the same for the same seed.
pub fn requirements_mix(count: usize, seed: u64) -> Vec<Requirements> {
    let mut rng = SplitMix64::new(seed ^ 0x00C0_FFEE_0000_0001);
    (0..count).map(|_| one(&mut rng)).collect()
}

fn min_gb(v: f64) -> GbRange {
    GbRange { min: Some(v), max: None }
}

fn globs(xs: &[&str]) -> Vec<Glob> {
    xs.iter().map(|x| Glob::new(*x)).collect()
}

fn one(rng: &mut SplitMix64) -> Requirements {
    let base = Requirements { cpu_cores: 1.0, memory_gb: 1.0, ..Requirements::default() };
    let roll = rng.unit();
    let mut r = if roll < 0.30 {
        // Small inference.
        Requirements {
            kind: WorkloadKind::Inference,
            gpus: 1,
            gpu_memory_gb: min_gb(16.0),
            cpu_cores: 4.0,
            memory_gb: 16.0,
            interruptible: rng.chance(0.5),
            max_hourly_usd: rng.chance(0.5).then_some(2.0),
            startup_within: rng.chance(0.3).then(|| Duration::from_secs(60)),
            ..base
        }
    } else if roll < 0.45 {
        // Larger inference on a recent family.
        Requirements {
            kind: WorkloadKind::Inference,
            gpus: 1,
            gpu_memory_gb: min_gb(40.0),
            families: vec![Family::Ampere, Family::Ada, Family::Hopper],
            cpu_cores: 8.0,
            memory_gb: 64.0,
            preferred_capabilities: vec!["fp8".into()],
            ..base
        }
    } else if roll < 0.60 {
        // Fine-tuning on a few GPUs.
        Requirements {
            kind: WorkloadKind::FineTuning,
            gpus: if rng.chance(0.5) { 2 } else { 4 },
            gpu_memory_gb: min_gb(40.0),
            cpu_cores: 16.0,
            memory_gb: 128.0,
            disk_gb: 200.0,
            expected_runtime: Some(Duration::from_secs(6 * H)),
            max_cost_usd: Some(400.0),
            optimize: Optimize::Cost,
            ..base
        }
    } else if roll < 0.68 {
        // Large training.
        Requirements {
            kind: WorkloadKind::Training,
            gpus: 8,
            gpu_memory_gb: min_gb(80.0),
            vendor: Some(Vendor::Nvidia),
            min_compute_capability: Some(ComputeCapability::new(9, 0)),
            interconnect: Some(Interconnect::Nvlink),
            capabilities: vec!["long-training".into()],
            cpu_cores: 64.0,
            memory_gb: 512.0,
            disk_gb: 1000.0,
            max_runtime: Some(Duration::from_secs(48 * H)),
            reserved_first: true,
            optimize: Optimize::Reliability,
            ..base
        }
    } else if roll < 0.83 {
        // CPU batch.
        Requirements {
            cpu_cores: if rng.chance(0.5) { 8.0 } else { 2.0 },
            memory_gb: 32.0,
            interruptible: true,
            ..base
        }
    } else if roll < 0.88 {
        // GDPR inference.
        Requirements {
            kind: WorkloadKind::Inference,
            gpus: 1,
            gpu_memory_gb: min_gb(24.0),
            regions: globs(&["eu-*"]),
            compliance: vec!["gdpr".into()],
            cpu_cores: 4.0,
            memory_gb: 16.0,
            ..base
        }
    } else if roll < 0.93 {
        // Data-heavy batch near its inputs.
        Requirements {
            gpus: 1,
            gpu_memory_gb: min_gb(24.0),
            cpu_cores: 8.0,
            memory_gb: 32.0,
            preferred_regions: globs(&["us-*"]),
            inputs: vec![
                InputSite { region: Some("us-west".into()), size_gb: Some(800.0) },
                InputSite { region: Some("us-east".into()), size_gb: Some(200.0) },
            ],
            ..base
        }
    } else if roll < 0.97 {
        // A retry after running out of GPU memory on a 24 GB card.
        Requirements {
            gpus: 1,
            min_gpu_memory_exclusive: Some(24.0),
            cpu_cores: 4.0,
            memory_gb: 32.0,
            exclude_pools: vec!["cloud-a/us-east-l4x1-1".into()],
            ..base
        }
    } else {
        // Unschedulable: more GPUs than any node has, or memory nobody has in the EU.
        if rng.chance(0.5) {
            Requirements { gpus: 16, gpu_memory_gb: min_gb(80.0), ..base }
        } else {
            Requirements {
                gpus: 8,
                gpu_memory_gb: min_gb(180.0),
                vendor: Some(Vendor::Nvidia),
                regions: globs(&["eu-*"]),
                compliance: vec!["gdpr".into()],
                ..base
            }
        }
    };
    if rng.chance(0.1) {
        r.providers = globs(&["cloud-*", "onprem"]);
    }
    r
}
