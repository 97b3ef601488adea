//! The scoring factors: each turns one feasible (pool, node) into a raw
//! value in 0..=1, and the policy's weights turn the raw values into a
//! 0..100 score with a per-factor breakdown.
//!
//! Factors only rank what the filters let through; they never exclude.
//! A factor that does not apply to a request (locality without located
//! inputs, preference without preferences) is left out of the score and
//! of the breakdown, and the other weights are renormalized.
//!
//! [`Scorer::bound`] gives an upper bound of a pool's score from pool-level
//! data alone, so `place` can skip pools that cannot make its top k.

use super::snapshot::{CACHED_PRIOR, CACHED_STARTUP_REFERENCE_S, PoolRow, Snapshot, startup_score, unit};
use super::{Policy, Requirements};
use crate::units::allowed;
use serde::Serialize;

/// One scoring factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Factor {
    /// Cheapest feasible expected hourly share = 1; others by price ratio.
    /// Expected: times the paid hours interruptions add, and for GPU work
    /// per unit of work (over the GPUs' relative throughput).
    Cost,
    /// Node × pool × provider health score.
    Health,
    /// Smoothed historical success: node toward pool toward provider toward the prior.
    Success,
    /// 1 within `startup_within`; otherwise decays with expected startup.
    Startup,
    /// Share of the input data (by size, else by count) in the pool's region.
    Locality,
    /// How little of the node's GPUs and GPU memory the work leaves idle:
    /// requested / free GPUs × needed / offered memory per GPU, where the
    /// need is the request's lower bound, else the fleet's smallest card.
    /// Work without GPUs scores 1 on CPU nodes; on a GPU node (a last
    /// resort, ranked after every CPU node that fits: [`super::GpuNode`])
    /// the share of the node's GPUs already in use, the ones its CPU and
    /// memory cannot strand.
    Fit,
    /// Preferred regions, preferred capability tags, reserved capacity.
    Preference,
}

impl Factor {
    pub const ALL: [Factor; 7] = [
        Factor::Cost,
        Factor::Health,
        Factor::Success,
        Factor::Startup,
        Factor::Locality,
        Factor::Fit,
        Factor::Preference,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Factor::Cost => "cost",
            Factor::Health => "health",
            Factor::Success => "success",
            Factor::Startup => "startup",
            Factor::Locality => "locality",
            Factor::Fit => "fit",
            Factor::Preference => "preference",
        }
    }
}

impl std::fmt::Display for Factor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One factor's part in a candidate's score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactorScore {
    pub factor: Factor,
    /// 0..=1.
    pub raw: f64,
    /// The policy's weight for this factor.
    pub weight: f64,
    /// Points of the 0..100 score; a candidate's contributions sum to its
    /// score (up to floating-point rounding).
    pub contribution: f64,
}

/// A feasible (pool, node), its hourly share and, once scored, its score.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Feasible {
    pub pool: u32,
    pub node: u32,
    pub free_gpus: u32,
    pub hourly: f64,
    /// `hourly` × the expected paid hours per useful hour here
    /// ([`Risk::paid_per_useful`]): what the cost factor compares.
    pub expected_hourly: f64,
    /// The chance an attempt here survives ([`Risk::survival`]).
    pub survival: f64,
    pub score: f64,
    /// Ranks before the score: 1 for work without GPUs on a GPU node while
    /// a CPU-only node fits (kept free for GPU work), else 0.
    pub tier: u8,
    /// Tie-break keys: the pool label's and node name's sorted positions.
    pub label_rank: u32,
    pub name_rank: u32,
}

/// How far a [`Scorer::bound`] may fall below the score it bounds through
/// rounding alone (scores are 0..100; rounding is ~1e-13).
pub(crate) const BOUND_SLACK: f64 = 1e-9;

/// Per-decision scoring context: what depends on the request only (region
/// shares, per-class fit and preference) computed once, read per pool.
pub(crate) struct Scorer<'a> {
    req: &'a Requirements,
    snap: &'a Snapshot,
    policy: &'a Policy,
    weights: [f64; 7],
    applies: [bool; 7],
    /// Points per unit of raw value: weight × 100 / (sum of applicable
    /// weights), 0 for factors that do not apply.
    coef: [f64; 7],
    /// Cheapest feasible hourly share; set once all pools are judged.
    cheapest: f64,
    /// Whether the snapshot's cached smoothed success fits this policy.
    cached_success: bool,
    /// Whether the snapshot's cached startup score fits this request and policy.
    cached_startup: bool,
    /// Cached startup and neither locality nor preference: the pool-level
    /// factors are one load.
    pool_level_fast: bool,
    /// `policy.cost_smoothing_usd`, at least 0.
    cost_smoothing: f64,
    /// `policy.cost_smoothing_share`, at least 0.
    cost_smoothing_share: f64,
    /// The expected runtime in hours, as the request gives it: on the
    /// reference GPU when cost is per unit of work ([`Scorer::risk`]).
    run_h: Option<f64>,
    /// How often the work checkpoints, in hours, when it does.
    checkpoint_h: Option<f64>,
    /// What the request may spend on stops, when it gives an expected
    /// runtime and a budget ([`Exhaustion`]).
    budget: Option<Exhaustion>,
    /// Whether cost is compared per unit of work (`Policy::per_work`, for
    /// GPU work other than inference).
    per_work: bool,
    /// GPU-memory fit per class (GPU work only).
    memory_fit: Vec<f64>,
    /// The most the fit factor can be per class, for any node (GPU work,
    /// and work without GPUs on CPU nodes).
    fit_bound: Vec<f64>,
    /// Share of preferred capability tags per class, when any are preferred.
    preferred_caps: Vec<f64>,
    /// Input share per snapshot region, when any input has a region.
    locality: Option<Vec<f64>>,
    /// Whether each snapshot region is preferred, when preferences name regions.
    preferred_region: Option<Vec<bool>>,
}

impl<'a> Scorer<'a> {
    pub fn new(req: &'a Requirements, snap: &'a Snapshot, policy: &'a Policy) -> Self {
        let w = &policy.weights;
        let weights = [w.cost, w.health, w.success, w.startup, w.locality, w.fit, w.preference]
            .map(|x| if x.is_finite() { x.max(0.0) } else { 0.0 });
        let locality = locality_shares(req, snap);
        let has_pref =
            !req.preferred_regions.is_empty() || !req.preferred_capabilities.is_empty() || req.reserved_first;
        let applies = [true, true, true, true, locality.is_some(), true, has_pref];
        let weight_sum: f64 = weights.iter().zip(applies).filter(|(_, a)| *a).map(|(w, _)| w).sum();
        let fleet = snap.fleet();
        let class_rep = |c: &super::snapshot::ClassInfo| fleet.pool(c.rep);
        // The memory the work needs per GPU: its stated lower bound, else
        // the smallest card in the fleet (any card would do).
        let need = match (req.gpu_memory_gb.min, req.min_gpu_memory_exclusive) {
            (Some(m), Some(x)) => m.max(x),
            (Some(m), None) | (None, Some(m)) => m,
            (None, None) => snap.min_gpu_memory,
        };
        let memory_fit = if req.gpus > 0 {
            snap.classes
                .iter()
                .map(|c| {
                    let mem = class_rep(c).gpu_memory_gb();
                    if mem > 0.0 { need / mem } else { 1.0 }
                })
                .collect()
        } else {
            Vec::new()
        };
        // Work without GPUs scores 1 on CPU nodes; on GPU nodes `bound`
        // reads the pool's fewest free GPUs instead.
        let fit_bound =
            (0..snap.classes.len()).map(|i| memory_fit.get(i).map_or(1.0, |&m| unit(m))).collect();
        let preferred_caps = if req.preferred_capabilities.is_empty() {
            Vec::new()
        } else {
            let want = &req.preferred_capabilities;
            snap.classes
                .iter()
                .map(|c| {
                    let have =
                        want.iter().filter(|t| class_rep(c).capabilities.binary_search(t).is_ok()).count();
                    have as f64 / want.len() as f64
                })
                .collect()
        };
        let preferred_region = (!req.preferred_regions.is_empty())
            .then(|| snap.regions.iter().map(|r| allowed(&req.preferred_regions, r)).collect());
        let scale = if weight_sum > 0.0 { 100.0 / weight_sum } else { 0.0 };
        let cached_startup =
            req.startup_within.is_none() && policy.startup_reference_s == CACHED_STARTUP_REFERENCE_S;
        let coef = std::array::from_fn(|i| if applies[i] { weights[i] * scale } else { 0.0 });
        Self {
            req,
            snap,
            policy,
            weights,
            applies,
            coef,
            cheapest: 0.0,
            cached_success: (policy.success_prior, policy.success_prior_weight) == CACHED_PRIOR,
            cached_startup,
            pool_level_fast: cached_startup && !applies[4] && !applies[6],
            cost_smoothing: policy.cost_smoothing_usd.max(0.0),
            cost_smoothing_share: if policy.cost_smoothing_share.is_finite() {
                policy.cost_smoothing_share.max(0.0)
            } else {
                0.0
            },
            run_h: if policy.interruption_risk { hours(req.expected_runtime) } else { None },
            checkpoint_h: hours(req.checkpoint_interval),
            budget: if policy.interruption_risk { Exhaustion::of(req) } else { None },
            per_work: policy.prices_per_work(req),
            memory_fit,
            fit_bound,
            preferred_caps,
            locality,
            preferred_region,
        }
    }

    /// The risk of an attempt of this request in a pool, and what the
    /// cost factor compares there: paid hours per useful hour, divided by
    /// the pool's relative throughput when cost is per unit of work; and
    /// the chance the whole job exhausts its retry budget there, which the
    /// success factor weighs beside one attempt's survival.
    ///
    /// When cost is per unit of work, the expected runtime is work on the
    /// reference GPU, as the price is: on GPUs `speed` times as fast the
    /// job runs `run / speed` hours, and that is how long it is exposed
    /// to interruptions there ([`exposure_h`]). A checkpoint interval is
    /// wall-clock time on any GPU.
    #[inline]
    pub fn risk(&self, row: &PoolRow) -> Risk {
        self.with_budget(row, self.risk_of_an_attempt(row))
    }

    /// [`Scorer::risk`] before the chance of exhausting the retry budget
    /// is weighed in: the same expected paid hours per useful hour, and a
    /// survival at least as high (an upper bound of the risk's). Cheap:
    /// the budget's chance is most of the risk's work.
    #[inline]
    pub(crate) fn risk_of_an_attempt(&self, row: &PoolRow) -> Risk {
        let speed = self.speed(row);
        let run_h = self.run_h.map(|r| r / speed);
        Risk::new(row.hazard_per_h, exposure_h(run_h, self.checkpoint_h)).per_work(speed)
    }

    /// `attempt` ([`Scorer::risk_of_an_attempt`] in pool `row`) with the
    /// chance of exhausting the retry budget there: [`Scorer::risk`].
    #[inline]
    pub(crate) fn with_budget(&self, row: &PoolRow, attempt: Risk) -> Risk {
        match &self.budget {
            Some(b) => attempt.exhausting(b.on(self.speed(row)).chance(row.hazard_per_h)),
            None => attempt,
        }
    }

    /// Whether [`Scorer::bound`] can only fall as survival does (the
    /// success weight is not negative), so a bound taken with a higher
    /// survival bounds it.
    pub(crate) fn bound_grows_with_survival(&self) -> bool {
        self.coef[2] >= 0.0
    }

    /// The chance the job exhausts its retry budget in a pool, when it is
    /// worth saying (at least 0.1 %).
    pub fn exhaustion(&self, row: &PoolRow) -> Option<f64> {
        Some(self.risk(row).exhaustion).filter(|p| *p >= 0.001)
    }

    /// The relative throughput the cost factor divides by in a pool: its
    /// GPUs' when cost is per unit of work, else 1.
    pub fn speed(&self, row: &PoolRow) -> f64 {
        if self.per_work { row.speed } else { 1.0 }
    }

    /// Records the cheapest feasible expected hourly share, which the cost
    /// factor is relative to.
    pub fn set_cheapest(&mut self, hourly: f64) {
        self.cheapest = hourly;
    }

    /// The cost factor's raw value: the cheapest feasible expected share
    /// over this one, both plus the smoothing. The smoothing is a share of
    /// the cheapest ([`Policy::cost_smoothing_share`]), so the factor says
    /// the same of a job of one cheap GPU as of one of eight dear ones;
    /// only when the cheapest is free is it [`Policy::cost_smoothing_usd`].
    #[inline]
    pub(crate) fn cost(&self, hourly: f64) -> f64 {
        let c =
            if self.cheapest > 0.0 { self.cost_smoothing_share * self.cheapest } else { self.cost_smoothing };
        let raw = if hourly + c > 0.0 { (self.cheapest + c) / (hourly + c) } else { 1.0 };
        raw.clamp(0.0, 1.0)
    }

    /// Raw values of every factor but cost, in [`Factor::ALL`] order from
    /// health on (0 where a factor does not apply).
    #[inline]
    pub(crate) fn others(&self, f: &Feasible) -> [f64; 6] {
        let (pool, node, free_gpus) = (f.pool, f.node, f.free_gpus);
        let (snap, policy) = (self.snap, self.policy);
        let row = &snap.rows[pool as usize];
        let node_info = &snap.nodes[node as usize];

        let health = row.health * node_info.health.score;

        let success = f.survival
            * if self.cached_success {
                snap.success[pool as usize].node(node_info)
            } else {
                let info = &snap.pools[pool as usize];
                let (prior, weight) = (policy.success_prior, policy.success_prior_weight.max(0.0));
                let provider = info.provider_health.smoothed_success(prior, weight);
                let pool_s = info.health.smoothed_success(provider, weight);
                node_info.health.smoothed_success(pool_s, weight)
            };

        let fit = self.fit(row, free_gpus);
        let (startup, locality, preference) = self.pool_level(row);
        [unit(health), unit(success), startup, locality, fit, preference]
    }

    /// The fit factor's raw value on a node of pool `row` with `free_gpus`
    /// free GPUs. Never grows with `free_gpus`.
    ///
    /// For GPU work: the request's GPUs over themselves plus the GPUs it
    /// leaves free there that wider work could have used, times the
    /// memory fit. A GPU left free counts as stranded by the share of the
    /// known work ([`super::DemandMix`]) wider than the request that a
    /// node of this size could host: all of it when the mix is empty
    /// (`gpus / free_gpus`, best fit), none when no such work exists (a
    /// one-GPU job then fits an empty two-GPU node as well as a one-GPU
    /// node, and cost decides between them).
    #[inline(always)]
    pub(crate) fn fit(&self, row: &PoolRow, free_gpus: u32) -> f64 {
        unit(if self.req.gpus > 0 {
            let g = self.req.gpus as f64;
            let left = free_gpus.saturating_sub(self.req.gpus) as f64;
            let stranded = if left > 0.0 {
                left * self.snap.stranding.share(self.req.gpus, row.gpus_per_node)
            } else {
                0.0
            };
            g / (g + stranded) * self.memory_fit[row.class as usize]
        } else {
            cpu_fit(row.gpus_per_node, free_gpus)
        })
    }

    /// The factors that depend on the pool alone: startup, locality, preference.
    #[inline]
    fn pool_level(&self, row: &PoolRow) -> (f64, f64, f64) {
        let startup = if self.cached_startup {
            row.startup_score
        } else {
            startup_score(row.startup_s, self.req, self.policy)
        };
        let locality = self.locality.as_ref().map_or(0.0, |l| l[row.region as usize]);
        let preference = if self.applies[6] { self.preference(row) } else { 0.0 };
        (unit(startup), unit(locality), unit(preference))
    }

    /// An upper bound of [`Scorer::score`] for any node of pool `pool` at
    /// this risk and expected hourly share (up to [`BOUND_SLACK`]): node
    /// health, success and fit at their best for the pool, everything else
    /// exact.
    #[inline]
    pub fn bound(&self, row: &PoolRow, risk: Risk, expected_hourly: f64) -> f64 {
        let c = &self.coef;
        let success = risk.survival * if self.cached_success { row.success_bound } else { 1.0 };
        let fit = if self.req.gpus == 0 && row.gpus_per_node > 0 {
            // Whichever node is picked has at least the pool's fewest free GPUs.
            cpu_fit(row.gpus_per_node, self.snap.fewest_free_gpus(row))
        } else {
            self.fit_bound.get(row.class as usize).copied().unwrap_or(1.0)
        };
        let base = c[0] * self.cost(expected_hourly) + c[1] * row.health_bound + c[2] * success + c[5] * fit;
        if self.pool_level_fast {
            base + c[3] * row.startup_score
        } else {
            let (startup, locality, preference) = self.pool_level(row);
            base + c[3] * startup + c[4] * locality + c[6] * preference
        }
    }

    /// An upper bound of a gang's score in pool `row` (one pool: every set
    /// of it has this risk and expected hourly), given upper bounds of its
    /// weakest node's health and of its mean fit: success at the pool's
    /// best, everything else exact. Up to [`BOUND_SLACK`].
    pub(crate) fn gang_bound(
        &self,
        row: &PoolRow,
        risk: Risk,
        expected_hourly: f64,
        health: f64,
        fit: f64,
    ) -> f64 {
        let c = &self.coef;
        let success = risk.survival * if self.cached_success { row.success_bound } else { 1.0 };
        let (startup, locality, preference) = self.pool_level(row);
        c[0] * self.cost(expected_hourly)
            + c[1] * health
            + c[2] * success
            + c[3] * startup
            + c[4] * locality
            + c[5] * fit
            + c[6] * preference
    }

    fn preference(&self, row: &PoolRow) -> f64 {
        let (mut sum, mut parts) = (0.0, 0u32);
        if let Some(pref) = &self.preferred_region {
            sum += f64::from(u8::from(pref[row.region as usize]));
            parts += 1;
        }
        if !self.preferred_caps.is_empty() {
            sum += self.preferred_caps[row.class as usize];
            parts += 1;
        }
        if self.req.reserved_first {
            sum += f64::from(u8::from(row.reserved));
            parts += 1;
        }
        if parts == 0 { 0.0 } else { sum / parts as f64 }
    }

    /// The 0..100 score, once [`Scorer::set_cheapest`] has been called.
    /// The breakdown's contributions add up to it (up to rounding).
    #[inline]
    pub fn score(&self, f: &Feasible) -> f64 {
        let r = self.others(f);
        let c = &self.coef;
        c[0] * self.cost(f.expected_hourly)
            + c[1] * r[0]
            + c[2] * r[1]
            + c[3] * r[2]
            + c[4] * r[3]
            + c[5] * r[4]
            + c[6] * r[5]
    }

    /// Points per unit of factor `i`'s raw value ([`Factor::ALL`] order).
    #[inline]
    pub(crate) fn coef(&self, i: usize) -> f64 {
        self.coef[i]
    }

    /// The score of raw values already combined (a gang's), in
    /// [`Factor::ALL`] order: the same sum as [`Scorer::score`].
    #[inline]
    pub(crate) fn score_raw(&self, r: &[f64; 7]) -> f64 {
        let c = &self.coef;
        c[0] * r[0] + c[1] * r[1] + c[2] * r[2] + c[3] * r[3] + c[4] * r[4] + c[5] * r[5] + c[6] * r[6]
    }

    /// The breakdown of raw values already combined (a gang's).
    pub(crate) fn breakdown_raw(&self, r: &[f64; 7]) -> Vec<FactorScore> {
        (0..7)
            .filter(|&i| self.applies[i])
            .map(|i| FactorScore {
                factor: Factor::ALL[i],
                raw: r[i],
                weight: self.weights[i],
                contribution: self.coef[i] * r[i],
            })
            .collect()
    }

    pub fn breakdown(&self, f: &Feasible) -> Vec<FactorScore> {
        let others = self.others(f);
        let raw = |i: usize| {
            if i == 0 { self.cost(f.expected_hourly) } else { others[i - 1] }
        };
        (0..7)
            .filter(|&i| self.applies[i])
            .map(|i| FactorScore {
                factor: Factor::ALL[i],
                raw: raw(i),
                weight: self.weights[i],
                contribution: self.coef[i] * raw(i),
            })
            .collect()
    }
}

/// A positive duration in hours.
fn hours(d: Option<std::time::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() / 3600.0).filter(|h| *h > 0.0)
}

/// The run an interruption can cost, given the run's hours where it runs:
/// the run, or for work that checkpoints, one interval of it (an
/// interruption loses the time since the last checkpoint, and the next
/// attempt resumes from there), so the expected paid hours per useful hour
/// are those of one interval, and long checkpointed work is not priced off
/// spot capacity as if it restarted from scratch.
fn exposure_h(run_h: Option<f64>, checkpoint_h: Option<f64>) -> Option<f64> {
    let run = run_h.filter(|h| *h > 0.0)?;
    Some(checkpoint_h.map_or(run, |c| c.min(run)))
}

/// The chance a job exhausts what it may spend on stops in a pool, given
/// the pool's learned preemption rate `h` per hour and the job's expected
/// runtime `D`, under the retry rule (`engine::retry::stop_is_free`): a
/// stop is charged only when the attempt had not yet run `τ` — for work
/// that checkpoints every `c`, `τ = max(c, 10 min)` (before that it left
/// no new checkpoint, or ran less than the minimum), else the whole run
/// `D` (it restarts from scratch) — and the job is lost at its
/// `left + 1`-th charged stop.
///
/// Interruptions are memoryless, so each start passes `τ` with chance
/// `p = e^(-hτ)`, and the job needs about `n = 1 + h·(D − τ)` starts that
/// do (one, plus one after each interruption expected over the rest of
/// its run). The charged stops before the `n`-th start that passes `τ`
/// are negative-binomial: `P(C = k) = Γ(n+k) / (Γ(n) k!) · pⁿ (1−p)^k`,
/// and the chance of exhaustion is `P(C > left)`. Work that restarts from
/// scratch has `n = 1`: all `left + 1` attempts fail, `(1 − e^(-hD))^(left+1)`.
/// Long checkpointed work is judged over its whole run, not one interval:
/// a 650-hour job expecting 13 preemptions on a pool exhausts a budget of
/// 12 charged stops only if 13 of them strike within 30 minutes of a start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exhaustion {
    /// Expected runtime `D` in hours.
    pub run_h: f64,
    /// `τ` in hours: how long an attempt must run before a stop is free.
    pub tau_h: f64,
    /// Charged stops the job can still take.
    pub left: u32,
}

impl Exhaustion {
    /// Charged stops past this many are not counted out one by one: the
    /// tail there is taken as nil.
    const MOST: u32 = 1000;

    /// Up to this `n·x` the terms are worked out by products (`e^(−600)`
    /// is about 10⁻²⁶¹, well clear of underflow); past it, in logarithms.
    const DIRECT_BELOW: f64 = 600.0;

    /// From a request with an expected runtime and a budget.
    pub fn of(req: &Requirements) -> Option<Self> {
        let run_h = req.expected_runtime.map(|d| d.as_secs_f64() / 3600.0).filter(|h| *h > 0.0)?;
        let left = req.charged_stops_left?;
        let min_h = crate::engine::retry::MIN_FREE_RUN_S / 3600.0;
        let every = req.checkpoint_interval.map(|d| d.as_secs_f64() / 3600.0).filter(|h| *h > 0.0);
        let tau_h = every.map_or(run_h, |c| c.max(min_h).min(run_h));
        Some(Self { run_h, tau_h, left })
    }

    /// The same job on GPUs `speed` times as fast as the reference, its
    /// expected runtime being work on the reference ([`Scorer::risk`]): it
    /// runs `D / speed`, and `τ` is taken again from that run.
    pub fn on(self, speed: f64) -> Self {
        if !(speed.is_finite() && speed > 0.0) || speed == 1.0 {
            return self;
        }
        let run_h = self.run_h / speed;
        // Restarting from scratch: τ was the whole run. Checkpointing: τ
        // is the interval (or the minimum run), at most the run.
        let tau_h = if self.tau_h >= self.run_h { run_h } else { self.tau_h.min(run_h) };
        Self { run_h, tau_h, ..self }
    }

    /// The chance of exhaustion at preemption rate `hazard_per_h`.
    pub fn chance(&self, hazard_per_h: f64) -> f64 {
        let Some((n, x)) = self.terms(hazard_per_h) else { return 0.0 };
        if n * x <= Self::DIRECT_BELOW { self.tail_by_products(n, x) } else { self.tail_in_logs(n, x) }
    }

    /// The negative binomial's `n` and `x = hτ` at rate `hazard_per_h`, or
    /// `None` where the chance is nil (no hazard, or a budget past
    /// [`Exhaustion::MOST`]).
    pub(crate) fn terms(&self, hazard_per_h: f64) -> Option<(f64, f64)> {
        if !(hazard_per_h > 0.0 && hazard_per_h.is_finite()) || self.left >= Self::MOST {
            return None;
        }
        let x = hazard_per_h * self.tau_h;
        Some((1.0 + hazard_per_h * (self.run_h - self.tau_h).max(0.0), x))
    }

    /// `P(C > left)` with each term the last times `(n + k − 1) / k · q`:
    /// no logarithm or exponential per term, for `P(C = 0) = e^(−nx)` far
    /// from underflow ([`Exhaustion::DIRECT_BELOW`]).
    pub(crate) fn tail_by_products(&self, n: f64, x: f64) -> f64 {
        let q = -(-x).exp_m1();
        let mut pk = (-n * x).exp();
        let mut below = pk;
        for k in 1..=self.left {
            let k = f64::from(k);
            pk *= (n + k - 1.0) / k * q;
            below += pk;
        }
        (1.0 - below).clamp(0.0, 1.0)
    }

    /// `P(C > left)` summed in logarithms, for any `n·x`.
    pub(crate) fn tail_in_logs(&self, n: f64, x: f64) -> f64 {
        // ln P(C = 0) = n ln p; ln q = ln(1 − e^(−x)).
        let ln_q = (-(-x).exp_m1()).ln();
        let mut ln_pk = -n * x;
        let mut below = ln_pk.exp();
        for k in 1..=self.left {
            let k = f64::from(k);
            ln_pk += ((n + k - 1.0) / k).ln() + ln_q;
            below += ln_pk.exp();
        }
        (1.0 - below).clamp(0.0, 1.0)
    }
}

/// What interruptions are expected to cost an attempt that restarts from
/// scratch: with interruptions at rate `h` per hour and `D` hours of work,
/// the attempt survives with probability `e^(-hD)`, and finishing the work
/// takes `(e^(hD) - 1) / h` paid hours in expectation (each interruption
/// loses the run so far). Without an expected runtime there is nothing to
/// weigh: survival 1, no extra hours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Risk {
    /// The chance an attempt survives, times the chance the job does not
    /// exhaust its retry budget ([`Risk::exhaustion`]): what the success
    /// factor weighs.
    pub survival: f64,
    /// The chance the job exhausts its retry budget here ([`Exhaustion`]);
    /// 0 when the request gives no expected runtime or budget.
    pub exhaustion: f64,
    /// Expected paid hours per hour of useful work (≥ 1; per unit of work
    /// after [`Risk::per_work`], less on faster GPUs).
    pub paid_per_useful: f64,
}

impl Risk {
    pub fn new(hazard_per_h: f64, runtime_h: Option<f64>) -> Self {
        let x = match runtime_h {
            Some(d) if hazard_per_h > 0.0 && hazard_per_h.is_finite() => hazard_per_h * d,
            _ => return Self { survival: 1.0, exhaustion: 0.0, paid_per_useful: 1.0 },
        };
        // Past this the survival is nil and the expected cost astronomic;
        // capping keeps both finite and the order among risky pools.
        let x = x.min(30.0);
        let paid = if x < 1e-6 { 1.0 + x / 2.0 } else { x.exp_m1() / x };
        Self { survival: (-x).exp(), exhaustion: 0.0, paid_per_useful: paid }
    }

    /// With the chance `p` that the job exhausts its retry budget here.
    pub fn exhausting(self, p: f64) -> Self {
        let p = unit(p);
        Self { survival: self.survival * (1.0 - p), exhaustion: p, ..self }
    }

    /// Paid hours per useful hour of reference work on GPUs `speed` times
    /// as fast as the reference (a V100): an hour there does `speed` hours
    /// of it.
    pub fn per_work(self, speed: f64) -> Self {
        let speed = if speed.is_finite() && speed > 0.0 { speed } else { 1.0 };
        Self { paid_per_useful: self.paid_per_useful / speed, ..self }
    }
}

/// The fit of work without GPUs: 1 on CPU nodes; on a GPU node, the share
/// of its GPUs already in use. The CPU and memory it takes would block the
/// free ones, so among GPU nodes (a last resort) the least GPU capacity
/// is wasted on the one with the fewest GPUs free.
fn cpu_fit(gpus_per_node: u32, free_gpus: u32) -> f64 {
    if gpus_per_node == 0 {
        1.0
    } else {
        1.0 - f64::from(free_gpus.min(gpus_per_node)) / f64::from(gpus_per_node)
    }
}

/// Share of the located input data per snapshot region: by size when every
/// located input gives one, else by count. `None` when no input has a region.
fn locality_shares(req: &Requirements, snap: &Snapshot) -> Option<Vec<f64>> {
    let located: Vec<(&str, Option<f64>)> =
        req.inputs.iter().filter_map(|i| i.region.as_deref().map(|r| (r, i.size_gb))).collect();
    if located.is_empty() {
        return None;
    }
    let by_size = located.iter().all(|(_, s)| s.is_some_and(|s| s > 0.0));
    let weight = |s: Option<f64>| if by_size { s.unwrap_or(0.0) } else { 1.0 };
    let total: f64 = located.iter().map(|(_, s)| weight(*s)).sum();
    let mut shares = vec![0.0; snap.regions.len()];
    for (region, size) in located {
        if let Ok(r) = snap.regions.binary_search_by(|x| x.as_str().cmp(region)) {
            shares[r] += weight(size) / total;
        }
    }
    Some(shares)
}
