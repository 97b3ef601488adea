//! What the core is configured with, the events it is handed, and the
//! actions and replies it returns.

use super::*;

/// Tunables of the core. Defaults suit real providers; the simulator and
/// tests shorten them.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// Status polls failing for this long make an attempt unreachable: it
    /// is terminated (best effort) and closed only once confirmed gone.
    pub unreachable_after_s: f64,
    /// A launch with no answer for this long is sent again with the same
    /// token (the provider adopts rather than launches twice).
    pub launch_timeout_s: f64,
    /// Launch re-sends before the attempt is given up as a provider failure.
    pub launch_resends: u32,
    /// An attempt pending at its provider longer than this (beyond the
    /// pool's startup estimate) is stopped and classed `capacity`.
    pub pending_timeout_s: f64,
    /// Unconfirmed terminations are re-sent this often.
    pub terminate_resend_s: f64,
    /// Refuse at submit a spec no pool of the fleet could ever run (unless
    /// it sets `constraints.wait_for_capacity`). The simulator turns it
    /// off: a trace's jobs are replayed as they came.
    pub refuse_never_fits: bool,
    /// A workload's exclusions (nodes and pools its failures ruled out)
    /// are forgotten this long after the last one was added, so a fault
    /// that has passed never strands it.
    pub exclusion_ttl_s: f64,
    /// A node that refused a launch for lack of capacity counts as full
    /// for this long at most (unless its provider's inventory or a release
    /// says otherwise first), doubling for each refusal of the node in a
    /// row up to `capacity_refusal_max_s` (see `refused.rs`). The default
    /// is the shell's inventory period, so a node that keeps refusing is
    /// asked at most once per refresh.
    pub capacity_refusal_s: f64,
    pub capacity_refusal_max_s: f64,
    pub health: HealthConfig,
    /// How placements are chosen; production keeps Canopy's health-aware
    /// policy, the simulator compares it with others.
    pub placement: PlacementPolicy,
    /// How long work may wait for cheaper capacity, under a patient
    /// placement policy.
    pub patience: Patience,
    /// Webhooks: off (`None`) unless the server has a signing secret.
    pub webhooks: Option<crate::notify::Rules>,
    /// Keep ended attempts' spend (for [`super::budget::HORIZON_MS`]) even
    /// while no budget is set, so that a budget set later counts what was
    /// already spent. The server keeps it on (budgets change at run time);
    /// the simulator, whose budgets are fixed for the run, turns it off
    /// when it has none: a month of ended attempts is most of its memory.
    pub budget_history: bool,
    /// On a PostgreSQL journal shared by several servers: the providers
    /// whose attempts live on the leader's own host (the local provider,
    /// and the simulated ones that execute through it). A new leader cannot
    /// see what a lost leader ran there, so it neither re-sends their
    /// launches nor takes them for running: such an attempt its providers
    /// do not know is held until the old leader's local lease has lapsed
    /// and the attempt's stop grace passed, then closed as a lost node and
    /// retried as a new attempt (see `engine/core/attempt.rs`).
    pub host_bound: Option<HostBound>,
}

/// See [`CoreConfig::host_bound`].
#[derive(Debug, Clone, PartialEq)]
pub struct HostBound {
    /// Provider names whose attempts run on the leader's host.
    pub providers: std::collections::BTreeSet<String>,
    /// How long after a takeover the old leader's host-bound work may still
    /// run (its local lease, renewed with the journal's), before each
    /// attempt's stop grace.
    pub hold_s: f64,
}

impl Default for CoreConfig {
    fn default() -> Self {
        Self {
            unreachable_after_s: 300.0,
            launch_timeout_s: 120.0,
            launch_resends: 3,
            pending_timeout_s: 900.0,
            terminate_resend_s: 30.0,
            exclusion_ttl_s: 1800.0,
            capacity_refusal_s: 30.0,
            capacity_refusal_max_s: 900.0,
            refuse_never_fits: true,
            health: HealthConfig::default(),
            placement: PlacementPolicy::default(),
            patience: Patience::default(),
            webhooks: None,
            budget_history: true,
            host_bound: None,
        }
    }
}

/// Something that happened, delivered to the core with the current time.
#[derive(Debug, Clone)]
pub enum Event {
    /// A new workload. `request` identifies the caller for the reply.
    Submit {
        request: u64,
        spec: Box<Spec>,
        spec_hash: String,
        idempotency_key: Option<String>,
        /// Who submitted it (recorded on the workload).
        by: Option<String>,
        /// The tenant it is for, when tenants are configured.
        tenant: Option<String>,
    },
    Cancel {
        request: u64,
        id: WorkloadId,
    },
    /// Operator node commands (and the simulator's churn). With a `note`,
    /// a cordon or drain is an operator's durable intent.
    SetNodeState {
        request: u64,
        node: String,
        state: NodeState,
        note: Option<NodeNote>,
    },
    /// An operator ends a node's quarantine early.
    Unquarantine {
        request: u64,
        node: String,
    },
    /// An operator clears a live workload's exclusions: all, or the one
    /// node or pool `target` names.
    Unexclude {
        request: u64,
        id: WorkloadId,
        target: Option<String>,
        by: String,
        reason: Option<String>,
    },
    /// An operator acknowledges a failed workload (its row, read from the
    /// journal: the core holds only live ones).
    Acknowledge {
        request: u64,
        rec: Box<WorkloadRecord>,
        by: String,
        reason: Option<String>,
    },
    /// Tenants, flavors, quotas and owners changed (at start from the
    /// configuration, or by an admin): admission follows the new ones at
    /// once.
    SetTenancy {
        tenancy: Box<crate::tenant::Tenancy>,
    },
    LaunchResult {
        attempt: AttemptId,
        result: Result<LaunchAck, LaunchError>,
    },
    Status {
        attempt: AttemptId,
        status: AttemptStatus,
    },
    /// A status poll failed; one failure is a blip, not an end.
    StatusFailed {
        attempt: AttemptId,
        error: String,
    },
    /// The shell collected what it could after an end: the log tail for
    /// classification and, after a clean exit, the outputs.
    Collected {
        attempt: AttemptId,
        end: ProviderEnd,
        log_tail: Vec<String>,
        outputs: OutputsResult,
    },
    Terminated {
        attempt: AttemptId,
        result: Result<(), String>,
    },
    /// After an attempt with `[checkpoint]` ended, before its `Collected`:
    /// the newest complete checkpoint in the workload's directory.
    CheckpointFound {
        attempt: AttemptId,
        found: Option<crate::engine::checkpoint::Found>,
    },
    /// A checkpoint did not travel with a live attempt of a provider that
    /// copies them (over the spec's cap): said in the workload's events.
    CheckpointNotCopied {
        attempt: AttemptId,
        message: String,
    },
    /// What a provider runs that carries this store's tokens
    /// (reconciliation), and (`ended`) what it holds of attempts that no
    /// longer run.
    Owned {
        provider: String,
        tokens: Vec<String>,
        ended: Vec<String>,
    },
    /// A provider's fresh inventory: its pools with nodes, `used` = used by
    /// others (see `inventory.rs`).
    Inventory {
        provider: String,
        pools: Vec<(crate::fleet::PoolDef, Vec<crate::fleet::NodeDef>)>,
    },
    /// A webhook delivery's try ended.
    Delivered {
        id: u64,
        outcome: super::DeliveryOutcome,
    },
    /// Time passed; deadlines and backoffs are checked.
    Tick,
}

/// How output collection went.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputsResult {
    /// Not attempted (the attempt did not exit cleanly).
    Skipped,
    Collected {
        count: usize,
    },
    Failed {
        message: String,
    },
}

/// What the shell must do, in order. Records first: durable before visible.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Record(Record),
    Launch {
        attempt: AttemptId,
        provider: String,
        /// The attempt's token ([`AttemptRecord::token`]).
        token: String,
        pool: String,
        /// Every node in rank order, rank 0 first (one for ordinary work).
        nodes: Vec<String>,
        spec: Arc<Spec>,
    },
    Terminate {
        attempt: AttemptId,
        provider: String,
        token: String,
    },
    /// Fetch the log tail (and outputs when `outputs`), then send `Collected`.
    Collect {
        attempt: AttemptId,
        provider: String,
        token: String,
        end: ProviderEnd,
        outputs: bool,
    },
    /// Remove what the ended attempt left at its provider (its record on
    /// an owner's host): after its end is journalled, never before, so a
    /// server killed in between leaves a leftover, not a running attempt
    /// whose record at the provider is gone (which a new leader would take
    /// for a lost node and run again).
    Release {
        attempt: AttemptId,
        provider: String,
        token: String,
    },
    Reply {
        request: u64,
        reply: Reply,
    },
    /// Try a webhook delivery (its record is already durable), then send
    /// `Delivered`.
    Deliver(Box<DeliveryRecord>),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Submitted { id: WorkloadId, existing: bool },
    Done { message: String },
    Error { code: Refusal, message: String },
}

/// Who set a node's state, why, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeNote {
    pub by: String,
    pub reason: Option<String>,
    pub until: Option<Millis>,
    /// A drain that stops the node's running work and places it again
    /// (`canopy drain --evict`); a plain drain lets it finish.
    pub evict: bool,
    /// Between SIGTERM and SIGKILL for an evicting drain (seconds); the
    /// workload's own `stop_grace` when `None`.
    pub grace_s: Option<u64>,
}
