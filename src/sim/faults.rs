//! The simulator's fault model: which node is a lemon, each job's own
//! fate, and what befalls an attempt where it runs. Pure functions of a
//! seed and identities (job, attempt number, node name), so every policy
//! meets the same workload and the same bad luck for the same try.
//!
//! It does not classify: it produces a provider end and a log tail, and
//! Canopy's classifier decides the class from them, as in production.
//!
//! # Defaults and calibration (`shared/reference/failures.md`)
//!
//! | parameter | default | basis |
//! |---|---|---|
//! | `user_error` | 0.20 of jobs | §4.5: 15–43 % of jobs fail; 70–75 % of failures are the user's (Acme script 73 %, Philly inputs/syntax/semantic) |
//! | `framework_error` | 0.04 of jobs | §4.5: ~15 % of failures framework/runtime (host OOM here: final, as Philly's CPU OOM) |
//! | when an own error strikes | fraction `u³` of the run (a trace's failed job: its recorded duration, [`fate`]) | Philly: syntax/import errors at start, semantic errors late; Acme: script errors 73 % of failures but 3.2 % of failure GPU time |
//! | `infra_per_gpu_hour` | 1.5e-3 on a healthy node | §4.5: infrastructure 10–11 % of failures → ≈ 3 % of jobs on this trace; far above Llama 3's 2e-5 (a tuned fleet) |
//! | `node_spread` | log-normal σ 0.5 | nodes differ (Kokolis et al.) |
//! | `lemon_fraction` × `lemon_multiplier` | 5 % of nodes × 30 | Kokolis et al. (§4.4): a few lemon nodes cause most repeat failures |
//! | infrastructure mix | Xid 79 60 %, node lost 25 %, NCCL timeout 10 % (≥ 2 GPUs), no space 5 % | Llama 3 (§4.2): GPU ≈ 59 %, host/other HW ≈ 20 %, network ≈ 10 %, storage ≈ 1–4 % |
//! | `preempt_per_hour` | 0.02 on interruptible pools | Meta RSC-1: 10 % of jobs preempted (§4.4), spread over hours-long jobs |
//! | `preempt_notice_s` | 120 s | AWS spot's two-minute interruption notice (GCP and Azure give 30 s); Canopy stops the attempt on it, SIGTERM first |
//! | `saves_on_sigterm` | 0 of checkpointing jobs | how many save a checkpoint when SIGTERM stops them (PyTorch Lightning can; most training loops do not by default): none, so a stop keeps the last interval's |
//! | launch: capacity / API / timeout | 2 % / 0.5 % / 0.2 % per call (×3 capacity on spot, up to ×7 on full pools) | [`crate::providers::sim::faults`] |
//! | `churn_per_node_day`, `churn_down_s` | 1/60, 1–6 h | unplanned host maintenance ≈ 8 % of Llama 3 interruptions |
//! | `estimate_median`, `estimate_sigma` | 2, 1.0 | users' runtime estimates ([`estimate_factor`]) |
//! | `speed_sigma` | 0.3 | each job's true speed on each accelerator model, log-normal around the throughput table the scheduler prices by ([`super::speed::truth`]; Gavel's matrix) |
//!
//! Infrastructure faults strike at an exponential time with rate
//! `infra_per_gpu_hour × GPUs × node multiplier` from a draw keyed by
//! (job, attempt number), so two policies trying the same job for the n-th
//! time on equally good nodes see the same fault at the same moment.

use crate::providers::sim::faults::{FaultRates, RunFault};
use crate::providers::sim::rng::Rng;
use serde::{Deserialize, Serialize};

/// Tunables; see the module docs. A `faults.toml` sets any of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultModel {
    pub user_error: f64,
    pub framework_error: f64,
    pub infra_per_gpu_hour: f64,
    pub node_spread: f64,
    pub lemon_fraction: f64,
    pub lemon_multiplier: f64,
    /// Shares of the infrastructure faults: xid79, node lost, NCCL, no space.
    pub mix: [f64; 4],
    pub preempt_per_hour: f64,
    /// Seconds of notice before a preemption strikes (0: none).
    pub preempt_notice_s: f64,
    /// Share of checkpointing jobs that save a checkpoint when a stop
    /// Canopy controls sends them SIGTERM (else they keep their last
    /// whole interval's).
    pub saves_on_sigterm: f64,
    pub capacity_error: f64,
    pub api_error: f64,
    pub launch_timeout: f64,
    pub churn_per_node_day: f64,
    pub churn_down_s: [f64; 2],
    /// Users' runtime estimates: the median of estimate / true duration.
    pub estimate_median: f64,
    /// Users' runtime estimates: log-normal σ of estimate / true duration.
    pub estimate_sigma: f64,
    /// Each job's true speed on an accelerator model: log-normal σ of its
    /// ratio to the throughput table's ([`super::speed::truth`]); 0 runs
    /// every job at exactly the table's speeds.
    pub speed_sigma: f64,
}

impl Default for FaultModel {
    fn default() -> Self {
        Self {
            user_error: 0.20,
            framework_error: 0.04,
            infra_per_gpu_hour: 1.5e-3,
            node_spread: 0.5,
            lemon_fraction: 0.05,
            lemon_multiplier: 30.0,
            mix: [0.60, 0.25, 0.10, 0.05],
            preempt_per_hour: 0.02,
            preempt_notice_s: 120.0,
            saves_on_sigterm: 0.0,
            capacity_error: 0.02,
            api_error: 0.005,
            launch_timeout: 0.002,
            churn_per_node_day: 1.0 / 60.0,
            churn_down_s: [3600.0, 6.0 * 3600.0],
            estimate_median: 2.0,
            estimate_sigma: 1.0,
            speed_sigma: 0.3,
        }
    }
}

impl FaultModel {
    /// No faults at all, and every job at exactly the throughput table's
    /// speeds (tests).
    pub fn none() -> Self {
        Self {
            user_error: 0.0,
            framework_error: 0.0,
            infra_per_gpu_hour: 0.0,
            lemon_fraction: 0.0,
            preempt_per_hour: 0.0,
            capacity_error: 0.0,
            api_error: 0.0,
            launch_timeout: 0.0,
            churn_per_node_day: 0.0,
            speed_sigma: 0.0,
            ..Self::default()
        }
    }

    /// Checks every rate is a finite non-negative number and shares are shares.
    pub fn validate(&self) -> Result<(), String> {
        let named = [
            ("user_error", self.user_error),
            ("framework_error", self.framework_error),
            ("infra_per_gpu_hour", self.infra_per_gpu_hour),
            ("node_spread", self.node_spread),
            ("lemon_fraction", self.lemon_fraction),
            ("lemon_multiplier", self.lemon_multiplier),
            ("preempt_per_hour", self.preempt_per_hour),
            ("preempt_notice_s", self.preempt_notice_s),
            ("saves_on_sigterm", self.saves_on_sigterm),
            ("capacity_error", self.capacity_error),
            ("api_error", self.api_error),
            ("launch_timeout", self.launch_timeout),
            ("churn_per_node_day", self.churn_per_node_day),
            ("estimate_sigma", self.estimate_sigma),
            ("speed_sigma", self.speed_sigma),
        ];
        for (k, v) in named.into_iter().chain(self.mix.iter().map(|v| ("mix", *v))) {
            if !v.is_finite() || v < 0.0 {
                return Err(format!("{k} must be a finite number ≥ 0, not {v}"));
            }
        }
        if self.user_error + self.framework_error > 1.0 {
            return Err(format!(
                "user_error + framework_error is a share of the jobs and must be ≤ 1, not {}",
                self.user_error + self.framework_error
            ));
        }
        for (k, v) in [("lemon_fraction", self.lemon_fraction), ("saves_on_sigterm", self.saves_on_sigterm)] {
            if v > 1.0 {
                return Err(format!("{k} is a share and must be ≤ 1, not {v}"));
            }
        }
        if !(self.estimate_median.is_finite() && self.estimate_median > 0.0) {
            return Err(format!("estimate_median must be a finite number > 0, not {}", self.estimate_median));
        }
        if !(self.churn_down_s[0] >= 0.0 && self.churn_down_s[1] >= self.churn_down_s[0]) {
            return Err("churn_down_s must be [min, max] with 0 ≤ min ≤ max".into());
        }
        Ok(())
    }

    /// The launch-time rates in the live simulator's vocabulary.
    pub fn launch_rates(&self) -> FaultRates {
        FaultRates {
            capacity: self.capacity_error,
            api_error: self.api_error,
            launch_timeout: self.launch_timeout,
            ..FaultRates::NONE
        }
    }
}

/// The factor between a job's runtime estimate (the spec's
/// `expected_runtime`, all the engine knows) and its true duration:
/// log-normal with median `estimate_median` and σ `estimate_sigma`, drawn
/// from (seed, job index), the same under every policy.
///
/// Users' estimates are poor and mostly high. On six supercomputer logs
/// Tsafrir, Etsion and Feitelson ("Modeling user runtime estimates",
/// JSSPP 2005) find jobs use a small share of their estimate, with the
/// median job near half and many under a tenth; Mu'alem and Feitelson
/// (IEEE TPDS 2001, the SP2 with backfilling) report the same, and that
/// about one job in five runs into its limit. The defaults
/// give an estimate twice the truth at the median, under the truth one
/// time in four, and off by more than ×5 either way one time in five.
pub fn estimate_factor(seed: u64, job: usize, model: &FaultModel) -> f64 {
    let mut r = Rng::stream(seed, "estimate", &job.to_string());
    let (u1, u2) = (r.unit().max(1e-12), r.unit());
    let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
    model.estimate_median * (model.estimate_sigma * z).exp()
}

/// Whether job `job` saves a checkpoint when SIGTERM stops it: drawn from
/// (seed, job index), the same under every policy.
pub fn saves_on_sigterm(seed: u64, job: usize, model: &FaultModel) -> bool {
    model.saves_on_sigterm > 0.0
        && Rng::stream(seed, "saves-on-sigterm", &job.to_string()).unit() < model.saves_on_sigterm
}

/// A job's own fate, the same under every policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fate {
    Completes,
    /// Fails by its own error after this fraction of its run.
    UserError {
        at: f64,
        kind: u8,
    },
    /// Runs out of host memory after this fraction of its run.
    HostOom {
        at: f64,
    },
}

/// The fate of `job` (its index in the trace is `index`). A trace that
/// records the job's outcome decides it: a failed job fails at the share
/// of its work the trace records ([`crate::sim::Job::fails_at`]: its
/// recorded duration is its time to failure). Otherwise it is drawn, and
/// an own error strikes at `u³` of the run (module docs).
pub fn fate(seed: u64, index: usize, model: &FaultModel, job: &crate::sim::Job) -> Fate {
    let mut r = Rng::stream(seed, "job-fate", &index.to_string());
    let u = r.unit();
    let at = r.unit().powi(3);
    let kind = r.below(100) as u8;
    match job.outcome {
        Some(crate::sim::Outcome::Completes) => Fate::Completes,
        Some(crate::sim::Outcome::FailsOnItsOwn) => Fate::UserError { at: job.fails_at(), kind },
        None if u < model.user_error => Fate::UserError { at, kind },
        None if u < model.user_error + model.framework_error => Fate::HostOom { at },
        None => Fate::Completes,
    }
}

/// Per-node fault multiplier: log-normal spread, lemons multiplied.
/// Exactly `round(lemon_fraction × nodes)` lemons (at least one when the
/// fraction is positive), picked by a seeded shuffle of the node names.
pub fn node_multipliers(seed: u64, names: &[String], model: &FaultModel) -> (Vec<f64>, Vec<bool>) {
    let n = names.len();
    let mut mult: Vec<f64> = names
        .iter()
        .map(|name| {
            let mut r = Rng::stream(seed, "node-rate", name);
            // Box–Muller; mean-one log-normal.
            let (u1, u2) = (r.unit().max(1e-12), r.unit());
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            let s = model.node_spread;
            (s * z - s * s / 2.0).exp()
        })
        .collect();
    let mut lemon = vec![false; n];
    let want = if model.lemon_fraction > 0.0 {
        ((model.lemon_fraction * n as f64).round() as usize).max(1)
    } else {
        0
    };
    let mut order: Vec<(u64, usize)> =
        names.iter().enumerate().map(|(i, name)| (Rng::stream(seed, "lemon", name).next_u64(), i)).collect();
    order.sort_unstable();
    for &(_, i) in order.iter().take(want.min(n)) {
        lemon[i] = true;
        mult[i] *= model.lemon_multiplier;
    }
    (mult, lemon)
}

/// What ends an attempt early, and when (seconds after it starts running).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Strike {
    pub after_s: f64,
    pub fault: RunFault,
}

/// The infrastructure fault and preemption of the `attempt`-th try of
/// `job`, on a node with multiplier `mult`, holding `gpus`, on an
/// interruptible pool or not. The earliest of the two, if any.
pub fn strike(
    seed: u64,
    job: usize,
    attempt: u32,
    gpus: u32,
    mult: f64,
    interruptible: bool,
    model: &FaultModel,
) -> Option<Strike> {
    let mut r = Rng::stream_n(seed, "infra", &job.to_string(), u64::from(attempt));
    let (u, pick, up) = (r.unit().max(1e-300), r.unit(), r.unit().max(1e-300));
    let rate_h = model.infra_per_gpu_hour * f64::from(gpus.max(1)) * mult;
    let infra = (rate_h > 0.0).then(|| {
        let total: f64 = model.mix.iter().sum();
        let mut x = pick * total;
        let mut fault = RunFault::Xid79;
        for (f, w) in [RunFault::Xid79, RunFault::NodeLost, RunFault::NcclTimeout, RunFault::NoSpace]
            .into_iter()
            .zip(model.mix)
        {
            if x < w {
                fault = f;
                break;
            }
            x -= w;
        }
        // A collective timeout needs a collective.
        if fault == RunFault::NcclTimeout && gpus < 2 {
            fault = RunFault::Xid79;
        }
        Strike { after_s: -u.ln() / rate_h * 3600.0, fault }
    });
    let preempt = (interruptible && model.preempt_per_hour > 0.0)
        .then(|| Strike { after_s: -up.ln() / model.preempt_per_hour * 3600.0, fault: RunFault::Preempted });
    match (infra, preempt) {
        (Some(a), Some(b)) => Some(if b.after_s < a.after_s { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// A node's maintenance windows (start, end) in seconds from the trace
/// start, up to `horizon_s`.
pub fn churn_windows(seed: u64, node: &str, horizon_s: f64, model: &FaultModel) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    if model.churn_per_node_day <= 0.0 {
        return out;
    }
    let mut r = Rng::stream(seed, "churn", node);
    let mut t = 0.0;
    loop {
        t += -r.unit().max(1e-300).ln() / model.churn_per_node_day * 86_400.0;
        if t > horizon_s {
            return out;
        }
        let down = r.range(model.churn_down_s[0], model.churn_down_s[1].max(model.churn_down_s[0] + 1e-9));
        out.push((t, t + down));
        t += down;
    }
}

/// The job's own error as a Python program prints it: the exceptions that
/// lead Acme's script rows, by their counts there.
pub fn user_error_tail(kind: u8) -> Vec<String> {
    let (line, last) = match kind {
        0..=28 => {
            ("    out = model(batch)", "TypeError: forward() got an unexpected keyword argument 'labels'")
        }
        29..=54 => (
            "    ds = load_dataset(cfg.data_dir)",
            "FileNotFoundError: [Errno 2] No such file or directory: '/data/imagenet/train.idx'",
        ),
        55..=66 => ("    n = cfg.model.n_layers", "AttributeError: 'dict' object has no attribute 'model'"),
        67..=78 => ("    lr = cfg['optimizer']['lr']", "KeyError: 'optimizer'"),
        79..=84 => ("    import apex", "ModuleNotFoundError: No module named 'apex'"),
        _ => (
            "    loss = criterion(out, y)",
            "ValueError: Expected input batch_size (64) to match target batch_size (32).",
        ),
    };
    vec![
        "Traceback (most recent call last):".into(),
        "  File \"/workspace/train.py\", line 212, in <module>".into(),
        line.into(),
        last.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::classify::classify;
    use crate::failure::{FailureClass, ProviderEnd};

    #[test]
    fn own_errors_classify_as_the_workloads_and_are_fixed_per_job() {
        for kind in [0u8, 30, 60, 70, 80, 95] {
            let tail = user_error_tail(kind);
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            let c = classify(&ProviderEnd::Exited { code: 1 }, &lines);
            assert_eq!(c.class, FailureClass::App, "{tail:?}");
        }
        let m = FaultModel::default();
        let job = crate::sim::Job {
            name: "j".into(),
            submit_s: 0.0,
            duration_s: 60.0,
            gpus: 1,
            gpu_type: None,
            gpu_memory_gb: None,
            outcome: None,
            fails_after_s: None,
            measured_on: None,
            tenant: None,
        };
        assert_eq!(fate(7, 3, &m, &job), fate(7, 3, &m, &job));
        let fails = (0..10_000).filter(|j| fate(7, *j, &m, &job) != Fate::Completes).count();
        assert!((2200..2600).contains(&fails), "{fails}");
    }

    #[test]
    fn lemons_are_few_and_fixed() {
        let names: Vec<String> = (0..40).map(|i| format!("n{i}")).collect();
        let m = FaultModel::default();
        let (mult, lemon) = node_multipliers(1, &names, &m);
        assert_eq!(lemon.iter().filter(|l| **l).count(), 2);
        assert_eq!(node_multipliers(1, &names, &m), (mult.clone(), lemon.clone()));
        for (i, l) in lemon.iter().enumerate() {
            if *l {
                assert!(mult[i] > 5.0);
            }
        }
    }

    #[test]
    fn strikes_scale_with_the_node_and_need_gpus_for_nccl() {
        let m = FaultModel::default();
        let a = strike(1, 5, 1, 1, 1.0, false, &m).unwrap();
        let b = strike(1, 5, 1, 1, 10.0, false, &m).unwrap();
        assert!((a.after_s / b.after_s - 10.0).abs() < 1e-6);
        assert_ne!(a.fault, RunFault::NcclTimeout);
        assert!(strike(1, 5, 1, 1, 1.0, false, &FaultModel::none()).is_none());
    }
}
