//! A trace job's duration was measured on one accelerator model; on another
//! it runs faster or slower. The scheduler believes the ratio of the
//! models' throughputs in [`crate::fleet::throughput`] ([`speedup`]); the
//! simulated truth draws each job's own ratio around it ([`truth`]), so
//! that a policy pricing by the table is judged on speeds it did not know.
//!
//! # The truth's speed model
//!
//! A job measured on model `m` runs on model `n` at `speedup(m, n) × F`,
//! where `F` is log-normal with median 1 and σ [`FaultModel::speed_sigma`]
//! (default 0.3), drawn once per (seed, job index, `n`'s table name) and the
//! same under every policy and on every attempt. `F` is exactly 1 where the
//! job runs on the silicon it was measured on (same table entry, or the
//! same model name when the table does not know it), where either model's
//! speed is unknown (nothing to vary around), and for work without GPUs.
//!
//! *Why σ 0.3.* The table's figures are typical, not per job: Gavel's
//! measured matrix (Narayanan et al., OSDI 2020) puts a V100 1.5–10× ahead
//! of a K80 by job type, a factor of 6.7 (ln ≈ 1.9, σ ≈ 0.47 if it spans
//! ±2σ) across two generations, and 1.5–3× ahead of a P100 (ln 2 ≈ 0.69,
//! σ ≈ 0.17) across one. σ 0.3 lies between: 95 % of jobs run within
//! ×0.55–×1.8 of the table's speed. The median is the table's, so the
//! table stays an unbiased estimate on the log scale. `speed_sigma = 0`
//! (and [`FaultModel::none`]) gives back the table's speeds exactly.

use super::faults::FaultModel;
use crate::fleet::Accelerator;
use crate::fleet::throughput::{canonical, relative};
use crate::providers::sim::rng::Rng;

/// The model every trace duration is taken to be measured on unless the
/// trace says otherwise.
pub const REFERENCE: &str = "V100";

/// How much faster a GPU `on` runs a job than `measured_on` did: the job's
/// run time there is its duration divided by this. 1 when either is
/// unknown (the fleet states no throughput and the table does not know
/// the model) and for work without GPUs.
pub fn speedup(measured_on: &str, on: Option<&Accelerator>) -> f64 {
    match (relative(measured_on), on.and_then(Accelerator::known_speed)) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => b / a,
        _ => 1.0,
    }
}

/// How much faster job `job` (its index in the trace) truly runs on `on`
/// than on `measured_on`: [`speedup`] times the job's own log-normal
/// factor for that model (module docs). Seeded; the same under every
/// policy.
pub fn truth(seed: u64, job: usize, measured_on: &str, on: Option<&Accelerator>, model: &FaultModel) -> f64 {
    Basis::new(measured_on, on, model).truth(seed, job)
}

/// What [`truth`] needs of one pair of the model a duration was measured
/// on and the accelerator it runs on, worked out once per pair (the
/// table's names are matched by substring): the table's speedup, and the
/// name the job's own factor is drawn under.
#[derive(Debug, Clone)]
pub struct Basis {
    table: f64,
    sigma: f64,
    /// `None`: no factor is drawn; the table is the truth (no spread, a
    /// model the table does not know, or the same silicon).
    draw_as: Option<String>,
}

impl Basis {
    pub fn new(measured_on: &str, on: Option<&Accelerator>, model: &FaultModel) -> Self {
        let table = speedup(measured_on, on);
        let sigma = model.speed_sigma;
        let draw_as = on.and_then(|a| {
            let known = relative(measured_on).is_some() && a.known_speed().is_some();
            let here = canonical(&a.model).map_or_else(|| a.model.to_ascii_uppercase(), str::to_string);
            let there =
                canonical(measured_on).map_or_else(|| measured_on.to_ascii_uppercase(), str::to_string);
            (sigma > 0.0 && known && here != there).then_some(here)
        });
        Basis { table, sigma, draw_as }
    }

    /// [`truth`] for job `job` of a run seeded `seed`.
    pub fn truth(&self, seed: u64, job: usize) -> f64 {
        let Some(here) = &self.draw_as else { return self.table };
        let mut r = Rng::stream(seed, "job-speed", &format!("{job}/{here}"));
        let (u1, u2) = (r.unit().max(1e-12), r.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        self.table * (self.sigma * z).exp()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(model: &str, throughput: Option<f64>) -> Accelerator {
        Accelerator {
            vendor: crate::accel::Vendor::Nvidia,
            model: model.into(),
            family: crate::accel::Family::Hopper,
            compute_capability: crate::accel::ComputeCapability::new(9, 0),
            memory_gb: 80.0,
            throughput,
        }
    }

    #[test]
    fn run_time_scales_by_the_ratio_to_the_measured_model() {
        assert!((speedup("V100", Some(&gpu("H100-SXM5", None))) - 4.5).abs() < 1e-12);
        assert!((speedup("P100", Some(&gpu("V100", None))) - 2.0).abs() < 1e-12);
        assert_eq!(speedup("V100", Some(&gpu("unknown", None))), 1.0);
        assert_eq!(speedup("unknown", Some(&gpu("A100", None))), 1.0);
        assert_eq!(speedup("V100", None), 1.0);
        // A figure the fleet states wins over the table's.
        assert!((speedup("V100", Some(&gpu("H100-SXM5", Some(3.0)))) - 3.0).abs() < 1e-12);
        assert!((speedup("V100", Some(&gpu("X-9000", Some(7.0)))) - 7.0).abs() < 1e-12);
    }

    #[test]
    fn the_truth_varies_per_job_around_the_table_from_the_seed() {
        let m = FaultModel::default();
        let h100 = gpu("H100-SXM5", None);
        let draws: Vec<f64> = (0..4000).map(|j| truth(7, j, "V100", Some(&h100), &m)).collect();
        // Seeded: the same seed and job give the same speed; another seed another.
        assert_eq!(truth(7, 11, "V100", Some(&h100), &m), draws[11]);
        assert_ne!(truth(8, 11, "V100", Some(&h100), &m), draws[11]);
        // Per model: the same job draws again on another accelerator.
        let a100 = truth(7, 11, "V100", Some(&gpu("A100-SXM4-80GB", None)), &m) / 2.2;
        assert!((a100 - draws[11] / 4.5).abs() > 1e-9);
        // Log-normal around the table: median 4.5, σ of the log 0.3.
        let mut logs: Vec<f64> = draws.iter().map(|d| (d / 4.5).ln()).collect();
        logs.sort_by(f64::total_cmp);
        let median = logs[logs.len() / 2];
        let sd = (logs.iter().map(|l| l * l).sum::<f64>() / logs.len() as f64).sqrt();
        assert!(median.abs() < 0.02, "median log factor {median}");
        assert!((sd - 0.3).abs() < 0.02, "σ {sd}");
        // The silicon it was measured on, unknown models, no GPU and σ 0: the table.
        assert_eq!(truth(7, 11, "V100", Some(&gpu("V100-SXM2-16GB", None)), &m), 1.0);
        assert_eq!(truth(7, 11, "V100", Some(&gpu("TPU-v5e", None)), &m), 1.0);
        assert_eq!(truth(7, 11, "V100", None, &m), 1.0);
        assert_eq!(truth(7, 11, "V100", Some(&h100), &FaultModel::none()), 4.5);
    }
}
