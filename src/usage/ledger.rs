//! The usage ledger: one row per attempt, derived from the journal's
//! workloads and attempts alone, so the same journal always gives the same
//! rows in the same order (by workload, then attempt).
//!
//! An attempt holds its GPUs from its launch (`placed_at`) to its end; the
//! held time falls into spans:
//!
//! - **idle**: launch to running (`placed_at` to `started_at`; the engine
//!   sets `started_at` when the provider reports the attempt running, for a
//!   gang once every rank runs). An attempt that never ran is idle for all
//!   of its life, except a launch refused for capacity (`capacity`), which
//!   held nothing.
//! - **running**, split by outcome: a succeeded attempt's running time is
//!   useful; a failed one's is useful up to the checkpoint a later attempt
//!   of the same workload resumed from (that work was not lost), and the
//!   rest is charged to its class's column ([`column`]); a live attempt's
//!   running time so far is `live` (its outcome is not known yet).
//!
//! Pure: the caller passes the records, where pools are and who owns them
//! ([`Context`]), and `now` for live attempts.

use crate::engine::model::{AttemptId, AttemptRecord, AttemptState, Millis, WorkloadId};
use crate::failure::{FailureClass, ProviderEnd};
use crate::fleet::Fleet;
use crate::tenant::Tenancy;
use serde::Serialize;
use std::collections::HashMap;

/// Where an hour of held GPU went: the ledger's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The attempt that succeeded, and checkpointed work a later attempt
    /// resumed from.
    Useful,
    /// Lost to the infrastructure: node, comm, io, provider, capacity,
    /// preempted, reclaimed.
    WastedInfra,
    /// Lost to the workload's own failure: app, gpu-oom, cpu-oom, config,
    /// timeout.
    WastedOwn,
    /// Stopped by a decision: cost-cap, cancelled, an evicting drain.
    Decision,
    /// Held but not running yet: launch to running.
    Idle,
    /// Running now; its outcome is not known yet.
    Live,
}

impl Kind {
    /// Every column, in report order.
    pub const ALL: [Kind; 6] =
        [Kind::Useful, Kind::WastedInfra, Kind::WastedOwn, Kind::Decision, Kind::Idle, Kind::Live];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Useful => "useful",
            Kind::WastedInfra => "wasted_infra",
            Kind::WastedOwn => "wasted_own",
            Kind::Decision => "decision",
            Kind::Idle => "idle",
            Kind::Live => "live",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The column a failed attempt's lost running time is charged to, by its
/// class and the rule that decided it. Exhaustive on purpose: a class
/// added to [`FailureClass`] does not compile until it is placed here.
pub fn column(class: FailureClass, rule: Option<&str>) -> Kind {
    match class {
        FailureClass::Capacity
        | FailureClass::Provider
        | FailureClass::Node
        | FailureClass::Comm
        | FailureClass::Io
        | FailureClass::Reclaimed => Kind::WastedInfra,
        // An operator's evicting drain is classed `preempted` (rule
        // `canopy.evicted`): a decision, not the provider's doing.
        FailureClass::Preempted if rule == Some(crate::engine::EVICTED_RULE) => Kind::Decision,
        FailureClass::Preempted => Kind::WastedInfra,
        FailureClass::GpuOom
        | FailureClass::CpuOom
        | FailureClass::Config
        | FailureClass::Image
        | FailureClass::Timeout
        | FailureClass::App => Kind::WastedOwn,
        FailureClass::CostCap | FailureClass::Cancelled => Kind::Decision,
    }
}

/// What the ledger needs of a workload: who it is for and what each of
/// its nodes holds besides GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Work {
    pub id: WorkloadId,
    /// Its tenant (a workload from before tenants counts as the default
    /// tenant's); `None` without tenants.
    pub tenant: Option<String>,
    /// The principal that submitted it.
    pub user: Option<String>,
    /// CPU cores per node, in thousandths.
    pub cpu_milli: u64,
}

impl Work {
    /// From a journal row; `default_tenant` stands for a row without one.
    pub fn of(w: &crate::engine::model::WorkloadRecord, default_tenant: Option<&str>) -> Work {
        Work {
            id: w.id,
            tenant: w.tenant.clone().or_else(|| default_tenant.map(str::to_string)),
            user: w.submitted_by.clone(),
            cpu_milli: (w.spec.resources.cpu_cores.max(0.0) * 1000.0).round() as u64,
        }
    }
}

/// What the ledger knows of a pool: its accelerator model (from the
/// fleet) and its owning tenant (from the tenancy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolInfo {
    pub accelerator: Option<String>,
    pub owner: Option<String>,
}

/// Where the pools are: per `provider/pool`, and the owners' promises.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pools: HashMap<String, PoolInfo>,
    /// Per owning tenant: how soon borrowed work is gone from its
    /// capacity, in ms (`max_reclaim_delay`).
    pub promise_ms: HashMap<String, i64>,
}

impl Context {
    /// From the fleet and tenancy in force, for the pools of `attempts`
    /// (a pool no longer in the fleet has no accelerator model; its owner
    /// is still found by name).
    pub fn new(fleet: &Fleet, tenancy: &Tenancy, attempts: &[AttemptRecord]) -> Context {
        let promise_ms = tenancy
            .tenants
            .iter()
            .filter(|t| !t.owns.is_empty())
            .map(|t| (t.name.clone(), i64::try_from(t.max_reclaim_delay.as_millis()).unwrap_or(i64::MAX)))
            .collect();
        let mut ctx = Context { pools: HashMap::new(), promise_ms };
        ctx.learn(fleet, tenancy, attempts);
        ctx
    }

    /// Adds the pools of `attempts` it does not know yet, as
    /// [`Context::new`] finds them.
    pub fn learn(&mut self, fleet: &Fleet, tenancy: &Tenancy, attempts: &[AttemptRecord]) {
        for a in attempts {
            if self.pools.contains_key(&a.pool) {
                continue;
            }
            let name = a.pool.split_once('/').map_or(a.pool.as_str(), |(_, p)| p);
            let accelerator = fleet
                .pool_by_name(&a.provider, name)
                .and_then(|i| fleet.pool(i).shape.accelerator.as_ref().map(|x| x.model.clone()));
            let owner = tenancy.owner_of(&a.provider, name).map(|t| t.name.clone());
            self.pools.insert(a.pool.clone(), PoolInfo { accelerator, owner });
        }
    }

    /// A context from explicit pool facts (tests, benches).
    pub fn from_pools(pools: HashMap<String, PoolInfo>, promise_ms: HashMap<String, i64>) -> Context {
        Context { pools, promise_ms }
    }

    fn pool(&self, label: &str) -> Option<&PoolInfo> {
        self.pools.get(label)
    }
}

/// A half-open span of time `[from, to)`; empty when `to <= from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Span {
    pub from: Millis,
    pub to: Millis,
}

impl Span {
    fn new(from: Millis, to: Millis) -> Span {
        Span { from, to: to.max(from) }
    }
    /// Its length within `[since, until)`, in ms.
    pub fn clipped_ms(self, since: Millis, until: Millis) -> u64 {
        let from = self.from.max(since);
        let to = self.to.min(until);
        u64::try_from(to.0 - from.0).unwrap_or(0)
    }
}

/// An owner's reclaim that stopped this attempt: when it began, and how
/// long the attempt took to be gone (`None` while it is still stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reclaim<'a> {
    pub owner: &'a str,
    pub started: Millis,
    pub latency_ms: Option<i64>,
}

/// One attempt in the ledger. Borrowed from the records and the context
/// it was built from: building a million rows allocates nothing per row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row<'a> {
    pub attempt: AttemptId,
    pub tenant: Option<&'a str>,
    /// Who submitted the workload.
    pub user: Option<&'a str>,
    /// The tenant owning the pool it ran on.
    pub owner: Option<&'a str>,
    pub provider: &'a str,
    /// `provider/pool`.
    pub pool: &'a str,
    /// Rank 0's node (all of a gang's are in `nodes`).
    pub node: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub nodes: &'a [String],
    pub accelerator: Option<&'a str>,
    /// GPUs of all its nodes together.
    pub gpus: u64,
    /// CPU cores of all its nodes together, in thousandths.
    pub cpu_milli: u64,
    /// Launch (placement) time.
    pub start: Millis,
    /// When it ended; `None` while it is live (counted up to `now`).
    pub end: Option<Millis>,
    /// `succeeded`, its failure class, or its state while live.
    pub outcome: &'static str,
    pub price_per_hour: f64,
    /// Launch to running.
    pub idle: Span,
    /// Running time that counts as useful.
    pub useful: Span,
    /// The rest of its running time, and the column it is charged to.
    pub rest: Span,
    pub rest_kind: Kind,
    /// The class `rest` is charged for, when it failed.
    pub class: Option<FailureClass>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reclaim: Option<Reclaim<'a>>,
}

impl Row<'_> {
    /// Its running time (useful and the rest) within `[since, until)`.
    pub fn running_ms(&self, since: Millis, until: Millis) -> u64 {
        self.useful.clipped_ms(since, until) + self.rest.clipped_ms(since, until)
    }

    /// What it cost within `[since, until)`, in millionths of a dollar:
    /// its price at launch over its running time (the journal's
    /// `cost_usd`: launch to running is not charged).
    pub fn cost_micro_usd(&self, since: Millis, until: Millis) -> u64 {
        let ms = self.running_ms(since, until) as f64;
        // $/h × ms → µ$: × 1e6 / 3.6e6.
        (self.price_per_hour.max(0.0) * ms / 3.6).round() as u64
    }
}

/// The ledger rows of `attempts`, in their order (the journal's: by
/// workload, then attempt; the figures do not depend on it), counting live
/// attempts up to `now`. Attempts of a
/// workload not in `work` are left out, and so are launches refused for
/// capacity (no attempt spent, nothing held).
pub fn rows<'a>(
    ctx: &'a Context,
    work: &'a [Work],
    attempts: &'a [AttemptRecord],
    now: Millis,
) -> Vec<Row<'a>> {
    let by_id: HashMap<WorkloadId, &Work> = work.iter().map(|w| (w.id, w)).collect();
    // Per attempt: when the newest checkpoint a later attempt of the same
    // workload resumed from was written.
    let mut resumed: HashMap<AttemptId, Millis> = HashMap::new();
    for a in attempts {
        if let Some(r) = a.checkpoint.as_ref().and_then(|c| c.resumed.as_ref())
            && r.attempt < a.id.n
        {
            let e = resumed.entry(AttemptId { workload: a.id.workload, n: r.attempt }).or_insert(r.at);
            *e = (*e).max(r.at);
        }
    }
    let mut out = Vec::with_capacity(attempts.len());
    for a in attempts {
        // A launch refused for capacity spent no attempt and held nothing;
        // its row is reused by the next placement.
        if a.rule.as_deref() == Some(crate::engine::REFUSED_RULE) {
            continue;
        }
        let Some(w) = by_id.get(&a.id.workload) else { continue };
        out.push(row(ctx, w, a, resumed.get(&a.id).copied(), now));
    }
    out
}

/// One attempt's row; `resumed_at`: when the checkpoint it left that a
/// later attempt resumed from was written.
pub fn row<'a>(
    ctx: &'a Context,
    w: &'a Work,
    a: &'a AttemptRecord,
    resumed_at: Option<Millis>,
    now: Millis,
) -> Row<'a> {
    let info = ctx.pool(&a.pool);
    let nodes = a.nodes.len().max(1) as u64;
    // A final attempt without an end (none is written so, but a row is
    // data) ends where it was last known to be, never at `now`: the same
    // journal always gives the same row.
    let end = match a.ended_at {
        Some(e) => e,
        None if a.state.is_final() => a.started_at.unwrap_or(a.placed_at),
        None => now,
    }
    .max(a.placed_at);
    let ran = a.started_at.map(|s| s.max(a.placed_at).min(end));
    let refused = a.started_at.is_none() && a.class == Some(FailureClass::Capacity);
    let idle = if refused {
        Span::new(a.placed_at, a.placed_at)
    } else {
        Span::new(a.placed_at, ran.unwrap_or(end))
    };
    let (useful, rest, rest_kind, outcome) = match ran {
        None => (Span::default(), Span::default(), Kind::Useful, outcome(a)),
        Some(s) => {
            if a.ended_at.is_none() && !a.state.is_final() {
                (Span::new(s, s), Span::new(s, end), Kind::Live, a.state.as_str())
            } else if a.state == AttemptState::Succeeded {
                (Span::new(s, end), Span::new(end, end), Kind::Useful, "succeeded")
            } else {
                let kept = resumed_at.map_or(s, |t| t.max(s).min(end));
                let kind = a.class.map_or(Kind::WastedInfra, |c| column(c, a.rule.as_deref()));
                (Span::new(s, kept), Span::new(kept, end), kind, outcome(a))
            }
        }
    };
    let reclaim = match &a.stop {
        Some(ProviderEnd::OwnerReclaim { owner, grace_s, kill_at_ms: Some(kill), .. }) => {
            let started = Millis(kill - i64::try_from(*grace_s).unwrap_or(0).saturating_mul(1000));
            Some(Reclaim {
                owner: owner.as_str(),
                started,
                latency_ms: a.ended_at.map(|e| (e.0 - started.0).max(0)),
            })
        }
        _ => None,
    };
    Row {
        attempt: a.id,
        tenant: w.tenant.as_deref(),
        user: w.user.as_deref(),
        owner: info.and_then(|i| i.owner.as_deref()),
        provider: &a.provider,
        pool: &a.pool,
        node: &a.node,
        nodes: &a.nodes,
        accelerator: info.and_then(|i| i.accelerator.as_deref()),
        gpus: u64::from(a.gpus) * nodes,
        cpu_milli: w.cpu_milli * nodes,
        start: a.placed_at,
        end: a.ended_at,
        outcome,
        price_per_hour: a.price_per_hour,
        idle,
        useful,
        rest,
        rest_kind,
        class: a.class.filter(|_| rest_kind != Kind::Useful && rest_kind != Kind::Live),
        reclaim,
    }
}

/// What one attempt spent within `[since, until)`, counted exactly as its
/// ledger row counts it (cost over its running time, GPUs held from its
/// launch to its end; a live one up to `now`): what budgets count
/// (`tenant::budget`), so a budget and `canopy usage` always agree.
pub fn spend(a: &AttemptRecord, since: Millis, until: Millis, now: Millis) -> crate::tenant::budget::Spend {
    if a.rule.as_deref() == Some(crate::engine::REFUSED_RULE) {
        return crate::tenant::budget::Spend::default();
    }
    let (ctx, w) = (Context::default(), Work { id: a.id.workload, tenant: None, user: None, cpu_milli: 0 });
    let r = row(&ctx, &w, a, None, now);
    Figures::of(&r, since, until).map_or_else(Default::default, |f| crate::tenant::budget::Spend {
        micro_usd: f.cost_micro_usd,
        gpu_ms: f.total_gpu_ms(),
    })
}

/// How an attempt ended, in one word: its class, else its state.
fn outcome(a: &AttemptRecord) -> &'static str {
    match a.class {
        Some(c) => c.as_str(),
        None => a.state.as_str(),
    }
}

/// GPU-milliseconds per column, CPU core-milliseconds held, and cost:
/// integers, so any grouping sums to the total exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// GPU-ms per [`Kind`], in [`Kind::ALL`]'s order.
    pub gpu_ms: [u64; 6],
    /// Lost GPU-ms per failure class, in [`FailureClass::ALL`]'s order.
    pub by_class_ms: [u64; FailureClass::ALL.len()],
    /// CPU core-ms held (thousandths of a core × ms / 1000).
    pub cpu_core_ms: u64,
    pub cost_micro_usd: u64,
    /// Attempts counted (those with any time in the window).
    pub attempts: u64,
}

impl Figures {
    /// One row's figures within `[since, until)`; `None` when it has no
    /// time there.
    pub fn of(r: &Row<'_>, since: Millis, until: Millis) -> Option<Figures> {
        let idle = r.idle.clipped_ms(since, until);
        let useful = r.useful.clipped_ms(since, until);
        let rest = r.rest.clipped_ms(since, until);
        let held = Span { from: r.start, to: r.idle.to.max(r.useful.to).max(r.rest.to) };
        if held.clipped_ms(since, until) == 0 && !(since <= r.start && r.start < until) {
            return None;
        }
        let mut f = Figures { attempts: 1, ..Figures::default() };
        f.gpu_ms[Kind::Idle.index()] = r.gpus * idle;
        f.gpu_ms[Kind::Useful.index()] = r.gpus * useful;
        f.gpu_ms[r.rest_kind.index()] += r.gpus * rest;
        if let Some(c) = r.class
            && let Some(i) = FailureClass::ALL.iter().position(|x| *x == c)
        {
            f.by_class_ms[i] = r.gpus * rest;
        }
        f.cpu_core_ms = r.cpu_milli * (idle + useful + rest) / 1000;
        f.cost_micro_usd = r.cost_micro_usd(since, until);
        Some(f)
    }

    pub fn add(&mut self, o: &Figures) {
        for (a, b) in self.gpu_ms.iter_mut().zip(o.gpu_ms) {
            *a += b;
        }
        for (a, b) in self.by_class_ms.iter_mut().zip(o.by_class_ms) {
            *a += b;
        }
        self.cpu_core_ms += o.cpu_core_ms;
        self.cost_micro_usd += o.cost_micro_usd;
        self.attempts += o.attempts;
    }

    /// GPU-ms in column `k`.
    pub fn get(&self, k: Kind) -> u64 {
        self.gpu_ms[k.index()]
    }

    /// GPU-ms held in all.
    pub fn total_gpu_ms(&self) -> u64 {
        self.gpu_ms.iter().sum()
    }
}
