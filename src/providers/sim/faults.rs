//! Which fault an attempt meets, and when: pure functions of (seed, token,
//! context, rates), so a fate is reproducible and testable without tokio.
//!
//! Owns the fault vocabulary ([`LaunchFault`], [`RunFault`]), the rates
//! ([`FaultRates`]) and how context bends them (spot capacity, full pools,
//! lemon nodes, single-GPU work that cannot hit NCCL). It does not apply a
//! fault (the market and provider do) and never classifies one: Canopy's
//! classifier must find the class from the end and the log, as it would on
//! a real cluster.
//!
//! # Default rates and where they come from
//!
//! All rates are per attempt. Sources are the studies summarised in
//! `shared/reference/failures.md`.
//!
//! | fault | default | demo | basis |
//! |---|---|---|---|
//! | capacity (launch refused) | 2 % | 3 % | estimate; not in the studies (their schedulers queue instead). ×3 on interruptible pools, up to ×7 on full pools |
//! | API error at launch | 0.5 % | 0.7 % | estimate (transient control-plane errors) |
//! | launch timeout | 0.2 % | 0.3 % | estimate |
//! | GPU fell off the bus (Xid 79) | 0.9 % | 1.2 % | GPU issues are 58.7 % of Llama 3's unexpected interruptions (§4.2) |
//! | NCCL watchdog timeout (≥ 2 GPUs) | 0.3 % | 1.0 % | network + NIC + NCCL ≈ 12 % of Llama 3 interruptions; Unicron NCCL timeout 10.1 % of errors (§4.2, §4.4) |
//! | node lost | 0.25 % | 0.6 % | host maintenance + PSU/chassis/CPU/DIMM ≈ 10 % of Llama 3 interruptions; Acme NodeFailure (§4.3) |
//! | no space left on device | 0.1 % | 0.4 % | SSD 0.7 % (Llama 3), S3StorageError 3.6 % of Acme infra failures |
//! | CUDA out of memory (≥ 1 GPU) | 0.4 % | 0.8 % | Philly: GPU OOM 1.2 % of failed trials × ~30 % failure rate (§4.1, §4.4) |
//! | preempted (interruptible pools only) | 5 % | 8 % | Meta RSC-1: 10 % of jobs preempted (§4.4), an upper bound for spot |
//!
//! Together the running faults make about 2 % of attempts in the default,
//! inside the 0.2 % (Meta RSC-1) to ~4.7 % (Acme, Philly: infrastructure is
//! 10–11 % of 15–43 % failed jobs) band of §4.5; the demo runs about twice
//! that so a few minutes of demo show each kind. Everything else that fails
//! (the workload's own errors, ~75 % of failures in the studies) comes from
//! the real command, not from here.
//!
//! Lemon nodes (Kokolis et al., §4.4: a few nodes cause most repeat
//! failures) multiply the node-attributable faults (node lost, Xid, NCCL,
//! no space) by [`super::SimConfig::lemon_multiplier`]; they do not change
//! OOM (the workload's size) or preemption (the market's).

use super::rng::Rng;
use crate::failure::ProviderEnd;

/// Per-attempt fault probabilities; see the module docs for the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRates {
    pub capacity: f64,
    pub api_error: f64,
    pub launch_timeout: f64,
    pub node_lost: f64,
    /// Applies on interruptible pools only.
    pub preempted: f64,
    /// Applies to attempts with two or more GPUs only.
    pub nccl_timeout: f64,
    /// Applies to attempts with at least one GPU.
    pub cuda_oom: f64,
    /// Applies to attempts with at least one NVIDIA GPU.
    pub xid79: f64,
    pub no_space: f64,
}

/// Capacity errors are this much likelier on interruptible (spot) pools.
pub const SPOT_CAPACITY_FACTOR: f64 = 3.0;
/// A full pool multiplies the capacity rate by up to `1 + this`
/// (as `fullness⁴`, so only nearly-full pools feel it).
pub const FULL_POOL_CAPACITY_FACTOR: f64 = 6.0;
/// No launch fails for capacity with more than this probability.
pub const MAX_CAPACITY_RATE: f64 = 0.95;

impl FaultRates {
    /// Calibrated against the studies (module docs).
    pub const CALIBRATED: FaultRates = FaultRates {
        capacity: 0.02,
        api_error: 0.005,
        launch_timeout: 0.002,
        node_lost: 0.0025,
        preempted: 0.05,
        nccl_timeout: 0.003,
        cuda_oom: 0.004,
        xid79: 0.009,
        no_space: 0.001,
    };

    /// Lively enough that a demo shows each kind within minutes.
    pub const DEMO: FaultRates = FaultRates {
        capacity: 0.03,
        api_error: 0.007,
        launch_timeout: 0.003,
        node_lost: 0.006,
        preempted: 0.08,
        nccl_timeout: 0.01,
        cuda_oom: 0.008,
        xid79: 0.012,
        no_space: 0.004,
    };

    pub const NONE: FaultRates = FaultRates {
        capacity: 0.0,
        api_error: 0.0,
        launch_timeout: 0.0,
        node_lost: 0.0,
        preempted: 0.0,
        nccl_timeout: 0.0,
        cuda_oom: 0.0,
        xid79: 0.0,
        no_space: 0.0,
    };

    /// The rates by name, for checks and display.
    pub fn fields(&self) -> [(&'static str, f64); 9] {
        [
            ("capacity", self.capacity),
            ("api_error", self.api_error),
            ("launch_timeout", self.launch_timeout),
            ("node_lost", self.node_lost),
            ("preempted", self.preempted),
            ("nccl_timeout", self.nccl_timeout),
            ("cuda_oom", self.cuda_oom),
            ("xid79", self.xid79),
            ("no_space", self.no_space),
        ]
    }
}

impl Default for FaultRates {
    fn default() -> Self {
        Self::CALIBRATED
    }
}

/// A launch that does not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchFault {
    Capacity,
    Api,
    Timeout,
}

/// A running attempt's end that the simulator causes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunFault {
    NodeLost,
    Preempted,
    NcclTimeout,
    CudaOom,
    /// Xid 79: the GPU has fallen off the bus.
    Xid79,
    NoSpace,
}

impl RunFault {
    pub const ALL: [RunFault; 6] =
        [Self::NodeLost, Self::Preempted, Self::NcclTimeout, Self::CudaOom, Self::Xid79, Self::NoSpace];

    /// Whether the workload itself sees it (and exits 1 with a signature in
    /// stderr) rather than the provider reporting the end.
    pub fn in_workload(self) -> bool {
        matches!(self, Self::NcclTimeout | Self::CudaOom | Self::Xid79 | Self::NoSpace)
    }

    /// Whether a lemon node makes it likelier.
    pub fn node_attributable(self) -> bool {
        matches!(self, Self::NodeLost | Self::NcclTimeout | Self::Xid79 | Self::NoSpace)
    }

    /// How the provider reports the end.
    pub fn end(self, node: &str) -> ProviderEnd {
        match self {
            Self::NodeLost => ProviderEnd::NodeLost { message: format!("node {node} stopped responding") },
            Self::Preempted => ProviderEnd::Preempted,
            Self::NcclTimeout | Self::CudaOom | Self::Xid79 | Self::NoSpace => {
                ProviderEnd::Exited { code: 1 }
            }
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeLost => "node-lost",
            Self::Preempted => "preempted",
            Self::NcclTimeout => "nccl-timeout",
            Self::CudaOom => "cuda-oom",
            Self::Xid79 => "xid79",
            Self::NoSpace => "no-space",
        }
    }
}

/// What about the placement bends the rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultContext {
    pub interruptible: bool,
    /// Share of the pool's capacity in use, 0..=1 (down nodes count as used).
    pub fullness: f64,
    pub lemon: bool,
    pub lemon_multiplier: f64,
    /// GPUs the attempt holds.
    pub gpus: u32,
    /// Whether those GPUs are NVIDIA's (Xids are an NVIDIA driver report).
    pub nvidia: bool,
}

impl FaultContext {
    /// An on-demand, empty pool, a healthy node, one NVIDIA GPU.
    pub fn plain(gpus: u32) -> Self {
        Self { interruptible: false, fullness: 0.0, lemon: false, lemon_multiplier: 1.0, gpus, nvidia: true }
    }
}

/// The probability of each launch fault in this context.
pub fn launch_rates(ctx: &FaultContext, r: &FaultRates) -> [(LaunchFault, f64); 3] {
    let spot = if ctx.interruptible { SPOT_CAPACITY_FACTOR } else { 1.0 };
    let full = 1.0 + FULL_POOL_CAPACITY_FACTOR * ctx.fullness.clamp(0.0, 1.0).powi(4);
    let capacity = (r.capacity * spot * full).min(MAX_CAPACITY_RATE);
    [
        (LaunchFault::Capacity, capacity),
        (LaunchFault::Api, r.api_error),
        (LaunchFault::Timeout, r.launch_timeout),
    ]
}

/// The probability of each running fault in this context.
pub fn run_rates(ctx: &FaultContext, r: &FaultRates) -> [(RunFault, f64); 6] {
    RunFault::ALL.map(|f| {
        let base = match f {
            RunFault::NodeLost => r.node_lost,
            RunFault::Preempted if ctx.interruptible => r.preempted,
            RunFault::Preempted => 0.0,
            RunFault::NcclTimeout if ctx.gpus >= 2 => r.nccl_timeout,
            RunFault::CudaOom if ctx.gpus >= 1 => r.cuda_oom,
            RunFault::Xid79 if ctx.gpus >= 1 && ctx.nvidia => r.xid79,
            RunFault::NcclTimeout | RunFault::CudaOom | RunFault::Xid79 => 0.0,
            RunFault::NoSpace => r.no_space,
        };
        let lemon = if ctx.lemon && f.node_attributable() { ctx.lemon_multiplier } else { 1.0 };
        (f, base * lemon)
    })
}

/// Picks at most one outcome with one draw; when the rates add up to more
/// than 1 they are scaled down to share it.
fn pick<T: Copy>(rng: &mut Rng, rates: &[(T, f64)]) -> Option<T> {
    let total: f64 = rates.iter().map(|(_, p)| p.max(0.0)).sum();
    let scale = if total > 1.0 { 1.0 / total } else { 1.0 };
    let mut u = rng.unit();
    for (what, p) in rates {
        let p = p.max(0.0) * scale;
        if u < p {
            return Some(*what);
        }
        u -= p;
    }
    None
}

/// The fault, if any, of the `call`-th launch call (0-based) for `token`.
/// Later calls with the same token draw afresh, so a retried launch after an
/// API error may succeed.
pub fn launch_fault(
    seed: u64,
    token: &str,
    call: u32,
    ctx: &FaultContext,
    r: &FaultRates,
) -> Option<LaunchFault> {
    pick(&mut Rng::stream_n(seed, "launch-fault", token, u64::from(call)), &launch_rates(ctx, r))
}

/// A running fault and where it strikes, as a fraction of the fault window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strike {
    pub fault: RunFault,
    /// In `[0.1, 0.9)`: never at the very start or the very end.
    pub at_fraction: f64,
}

/// The running fault, if any, of the attempt with this token.
pub fn run_fault(seed: u64, token: &str, ctx: &FaultContext, r: &FaultRates) -> Option<Strike> {
    let mut rng = Rng::stream(seed, "run-fault", token);
    let fault = pick(&mut rng, &run_rates(ctx, r))?;
    Some(Strike { fault, at_fraction: rng.range(0.1, 0.9) })
}

/// Whether a node is one of the market's lemons.
pub fn is_lemon(seed: u64, node: &str, fraction: f64) -> bool {
    Rng::stream(seed, "lemon", node).chance(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn token(i: u32) -> String {
        format!("canopy-test-w{i}-a1")
    }

    #[test]
    fn same_seed_and_token_give_the_same_fate() {
        let ctx = FaultContext { interruptible: true, ..FaultContext::plain(8) };
        let hot = FaultRates { preempted: 0.5, xid79: 0.3, capacity: 0.3, ..FaultRates::NONE };
        for i in 0..200 {
            let t = token(i);
            assert_eq!(run_fault(42, &t, &ctx, &hot), run_fault(42, &t, &ctx, &hot));
            assert_eq!(launch_fault(42, &t, 0, &ctx, &hot), launch_fault(42, &t, 0, &ctx, &hot));
        }
        let fates = |seed| (0..200).map(|i| run_fault(seed, &token(i), &ctx, &hot)).collect::<Vec<_>>();
        assert_ne!(fates(42), fates(43), "another seed, another story");
    }

    #[test]
    fn fault_mix_over_10k_attempts_matches_the_rates() {
        let n = 10_000;
        let r = FaultRates::DEMO;
        let ctx = FaultContext { interruptible: true, ..FaultContext::plain(8) };
        let mut launch: HashMap<LaunchFault, u32> = HashMap::new();
        let mut run: HashMap<RunFault, u32> = HashMap::new();
        for i in 0..n {
            if let Some(f) = launch_fault(7, &token(i), 0, &ctx, &r) {
                *launch.entry(f).or_default() += 1;
            }
            if let Some(s) = run_fault(7, &token(i), &ctx, &r) {
                *run.entry(s.fault).or_default() += 1;
            }
        }
        // Binomial: 4 standard deviations plus a little slack.
        let within = |count: u32, p: f64, what: &str| {
            let expect = p * n as f64;
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!(
                (count as f64 - expect).abs() <= 4.0 * sd + 2.0,
                "{what}: {count} of {n}, expected about {expect:.0}"
            );
        };
        for (f, p) in launch_rates(&ctx, &r) {
            within(launch.get(&f).copied().unwrap_or(0), p, &format!("{f:?}"));
        }
        for (f, p) in run_rates(&ctx, &r) {
            within(run.get(&f).copied().unwrap_or(0), p, f.as_str());
        }
        assert!(run.len() == 6, "every running fault shows up: {run:?}");
    }

    #[test]
    fn lemon_nodes_fail_more() {
        let r = FaultRates::CALIBRATED;
        let healthy = FaultContext { lemon_multiplier: 8.0, ..FaultContext::plain(8) };
        let lemon = FaultContext { lemon: true, ..healthy };
        let infra = |ctx: &FaultContext| {
            (0..10_000)
                .filter_map(|i| run_fault(3, &token(i), ctx, &r))
                .filter(|s| s.fault.node_attributable())
                .count()
        };
        let (h, l) = (infra(&healthy), infra(&lemon));
        assert!(l > 5 * h, "lemon {l} vs healthy {h}");
        // OOM is the workload's size, not the node's.
        let oom = |ctx: &FaultContext| {
            run_rates(ctx, &r).iter().find(|(f, _)| *f == RunFault::CudaOom).map(|x| x.1)
        };
        assert_eq!(oom(&healthy), oom(&lemon));
    }

    #[test]
    fn preemption_only_on_interruptible_pools() {
        let r = FaultRates { preempted: 0.9, ..FaultRates::NONE };
        let on_demand = FaultContext::plain(1);
        assert!((0..2_000).all(|i| run_fault(1, &token(i), &on_demand, &r).is_none()));
        let spot = FaultContext { interruptible: true, ..on_demand };
        let hits = (0..2_000).filter(|i| run_fault(1, &token(*i), &spot, &r).is_some()).count();
        assert!(hits > 1_700, "{hits}");
    }

    #[test]
    fn context_gates_gpu_faults_and_bends_capacity() {
        let r = FaultRates::DEMO;
        let rate =
            |ctx: &FaultContext, f: RunFault| run_rates(ctx, &r).iter().find(|x| x.0 == f).map(|x| x.1);
        let cpu = FaultContext::plain(0);
        assert_eq!(rate(&cpu, RunFault::CudaOom), Some(0.0));
        assert_eq!(rate(&cpu, RunFault::Xid79), Some(0.0));
        assert_eq!(rate(&FaultContext::plain(1), RunFault::NcclTimeout), Some(0.0));
        assert!(rate(&FaultContext::plain(2), RunFault::NcclTimeout) > Some(0.0));
        let amd = FaultContext { nvidia: false, ..FaultContext::plain(8) };
        assert_eq!(rate(&amd, RunFault::Xid79), Some(0.0));

        let cap = |ctx: &FaultContext| launch_rates(ctx, &r)[0].1;
        let empty = FaultContext::plain(1);
        let spot = FaultContext { interruptible: true, ..empty };
        let full = FaultContext { fullness: 0.95, ..empty };
        assert!(cap(&spot) > 2.5 * cap(&empty));
        assert!(cap(&full) > 4.0 * cap(&empty));
    }

    #[test]
    fn strikes_land_inside_the_window_and_retries_redraw() {
        let r = FaultRates { xid79: 1.0, capacity: 0.5, ..FaultRates::NONE };
        for i in 0..500 {
            let s = run_fault(9, &token(i), &FaultContext::plain(1), &r).expect("always strikes");
            assert!((0.1..0.9).contains(&s.at_fraction));
        }
        let ctx = FaultContext::plain(1);
        let differs = (0..200)
            .any(|i| launch_fault(9, &token(i), 0, &ctx, &r) != launch_fault(9, &token(i), 1, &ctx, &r));
        assert!(differs, "a second launch call is a fresh draw");
    }

    #[test]
    fn lemon_fraction_is_about_right() {
        let lemons = (0..10_000).filter(|i| is_lemon(5, &format!("node-{i}"), 0.05)).count();
        assert!((400..600).contains(&lemons), "{lemons}");
        assert!(!is_lemon(5, "node-1", 0.0));
    }
}
