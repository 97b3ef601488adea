//! Large scenarios for measuring the simulator itself: a real trace tiled
//! into many jobs over a synthetic fleet (`benches/sim.rs`,
//! `examples/sim_scale.rs`).
//!
//! Owns how a trace is tiled and the large scenario built from it; the
//! fleet comes from [`crate::fleet::synth`]. Pure and seeded: the same
//! arguments give the same jobs.

use super::trace::{self, Job, TraceError};
use crate::fleet::Fleet;
use crate::fleet::synth::synth_fleet;
use crate::providers::sim::rng::Rng;

/// `count` jobs made of copies of `base` laid over one another: copy `k`
/// is `base` shifted by a seeded offset in `[0, period)` and wrapped
/// around the period (so every copy covers it evenly; the period is the
/// base's span plus one mean gap between arrivals, and copy 0 is the base
/// unshifted), then every
/// arrival time is divided by `speedup`. Durations, GPU counts and names
/// are the base's. With `c` copies over a fleet `f` times the size the
/// base was meant for, `speedup = f / c` keeps the base's load (busy
/// GPUs over all GPUs); larger values queue more work.
///
/// The jobs come back in submit order (stable: copy, then base order, for
/// equal times).
pub fn tile(base: &[Job], count: usize, speedup: f64, seed: u64) -> Vec<Job> {
    if base.is_empty() {
        return Vec::new();
    }
    let span = base.iter().map(|j| j.submit_s).fold(0.0, f64::max).max(1.0);
    let period = span + span / base.len() as f64;
    let speedup = if speedup > 0.0 { speedup } else { 1.0 };
    let copies = count.div_ceil(base.len());
    let offsets: Vec<f64> = (0..copies)
        .map(|k| if k == 0 { 0.0 } else { Rng::stream_n(seed, "tile", "offset", k as u64).unit() * period })
        .collect();
    let mut jobs: Vec<Job> = (0..count)
        .map(|i| {
            let (k, j) = (i / base.len(), i % base.len());
            let mut job = base[j].clone();
            job.submit_s = ((job.submit_s + offsets[k]) % period) / speedup;
            job
        })
        .collect();
    jobs.sort_by(|a, b| a.submit_s.total_cmp(&b.submit_s));
    jobs
}

/// The offered load of the large scenario ([`scenario`]): the tiled
/// trace keeps this share of all the fleet's GPUs busy on average. The
/// synthetic fleet's other tenants use about 40% of its GPUs, so with this
/// about three quarters of the fleet is busy, and work queues at peaks.
pub const LOAD: f64 = 0.35;

/// The simulator's scale benchmark: `count` jobs from `base` (the Gavel
/// trace) tiled with [`tile`] over `synth_fleet(nodes, 1)`, arriving
/// `speedup` times faster so that they offer `load` ([`offered_load`]).
/// Returns the fleet, the jobs and the speedup.
pub fn scenario(base: &[Job], count: usize, nodes: usize, load: f64, seed: u64) -> (Fleet, Vec<Job>, f64) {
    let fleet = synth_fleet(nodes, 1);
    let at_1 = offered_load(&tile(base, count, 1.0, seed), fleet.total_gpus());
    let speedup = if at_1 > 0.0 && at_1.is_finite() { load / at_1 } else { 1.0 };
    let jobs = tile(base, count, speedup, seed);
    (fleet, jobs, speedup)
}

/// The Gavel trace (`assets/traces/gavel_msr_seed0_ee9e8c.trace`, 2,000
/// jobs), embedded: the base the large scenario tiles.
pub const GAVEL: &str = include_str!("../../assets/traces/gavel_msr_seed0_ee9e8c.trace");

/// The Gavel trace's jobs ([`GAVEL`]).
pub fn gavel() -> Result<Vec<Job>, TraceError> {
    trace::parse(trace::Format::Gavel, GAVEL, "gavel_msr_seed0_ee9e8c.trace")
}

/// `canopy sim --synthetic JOBS,NODES`: [`scenario`] over the Gavel trace
/// at the default [`LOAD`]. Returns the fleet, the jobs and the speedup.
pub fn synthetic(jobs: usize, nodes: usize, seed: u64) -> Result<(Fleet, Vec<Job>, f64), TraceError> {
    Ok(scenario(&gavel()?, jobs, nodes, LOAD, seed))
}

/// Parses `JOBS,NODES` (both at least 1; `_` may group digits:
/// `100_000,10_000`).
pub fn parse_size(text: &str) -> Result<(usize, usize), String> {
    let bad =
        || format!("expected JOBS,NODES (two whole numbers of at least 1, e.g. 20000,2000), got {text:?}");
    let (a, b) = text.split_once(',').ok_or_else(bad)?;
    let num = |t: &str| t.trim().replace('_', "").parse::<usize>().ok().filter(|&n| n > 0);
    Ok((num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?))
}

/// GPU-seconds of work the jobs ask for, over `gpus × span`: the share of
/// the fleet's GPUs the trace keeps busy if nothing fails or waits.
pub fn offered_load(jobs: &[Job], gpus: u64) -> f64 {
    let first = jobs.iter().map(|j| j.submit_s).fold(f64::INFINITY, f64::min);
    let last = jobs.iter().map(|j| j.submit_s).fold(0.0, f64::max);
    let work: f64 = jobs.iter().map(|j| f64::from(j.gpus) * j.duration_s).sum();
    let span = (last - first).max(1.0);
    if gpus == 0 { f64::INFINITY } else { work / (span * gpus as f64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(t: f64) -> Job {
        Job {
            name: "j".into(),
            submit_s: t,
            duration_s: 10.0,
            gpus: 1,
            gpu_type: None,
            gpu_memory_gb: None,
            outcome: None,
            fails_after_s: None,
            measured_on: None,
            tenant: None,
        }
    }

    #[test]
    fn tiles_are_sorted_repeatable_and_compressed() {
        let base: Vec<Job> = (0..10).map(|i| job(f64::from(i) * 100.0)).collect();
        let a = tile(&base, 35, 2.0, 7);
        assert_eq!(a.len(), 35);
        assert_eq!(a, tile(&base, 35, 2.0, 7));
        assert_ne!(a, tile(&base, 35, 2.0, 8));
        assert!(a.windows(2).all(|w| w[0].submit_s <= w[1].submit_s));
        assert!(a.iter().all(|j| j.submit_s >= 0.0 && j.submit_s < 990.0 / 2.0));
        // The first copy is the base, compressed.
        assert!(base.iter().all(|b| a.iter().any(|j| j.submit_s == b.submit_s / 2.0)));
        let load = offered_load(&base, 1);
        assert!((load - 100.0 / 900.0).abs() < 1e-9, "{load}");
    }

    #[test]
    fn sizes_parse_and_nonsense_is_refused() {
        assert_eq!(parse_size("20000,2000"), Ok((20_000, 2_000)));
        assert_eq!(parse_size("100_000, 10_000"), Ok((100_000, 10_000)));
        for bad in ["", "20000", "0,10", "10,0", "a,b", "1,2,3", "-1,2"] {
            let e = parse_size(bad).expect_err(bad);
            assert!(e.contains("JOBS,NODES"), "{e}");
        }
    }

    #[test]
    fn the_scenario_offers_the_load_asked_for() {
        let base: Vec<Job> = (0..50).map(|i| job(f64::from(i) * 3600.0)).collect();
        let (fleet, jobs, speedup) = scenario(&base, 500, 40, 0.3, 1);
        assert_eq!((fleet.nodes.len(), jobs.len()), (40, 500));
        assert!(speedup > 0.0);
        let load = offered_load(&jobs, fleet.total_gpus());
        assert!((load - 0.3).abs() < 1e-9, "{load}");
    }
}
