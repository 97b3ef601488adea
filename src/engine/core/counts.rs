//! What the core's scheduling did, counted: how often it took work from
//! the queue, decided a placement afresh or from a remembered answer, and
//! asked blocked work again. Counts, not timings: the simulator's scale
//! test (`tests/sim_scale.rs`) reads them per job to catch work that grows
//! with the size of the fleet or the queue.

/// Running totals since the core was built. Pure bookkeeping: reading or
/// ignoring them changes nothing the core decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkCounts {
    /// Workloads taken from the queue to be placed.
    pub taken: u64,
    /// Full scheduler decisions ([`crate::schedule::place`]) for a
    /// queued workload.
    pub decisions: u64,
    /// Candidates those decisions built (each with its names, cost range
    /// and score breakdown): one per decision where the policy takes the
    /// best, every feasible pool's for `Random`.
    pub candidates: u64,
    /// Placements answered by a remembered "nothing fits" instead.
    pub remembered: u64,
    /// Remembered answers checked again as a woken group came up.
    pub group_checks: u64,
    /// Blocked workloads made ready again when every blocked workload was
    /// (capacity appeared, a gang's hold changed).
    pub woken_all: u64,
    /// Blocked workloads looked at when one node's capacity was released
    /// (or Canopy's GPUs under a lend limit were).
    pub release_scanned: u64,
    /// Blocked and waiting workloads woken because GPUs Canopy released
    /// under a lend limit made the limit admit their size.
    pub lend_woken: u64,
    /// Queued workloads re-filed because their tenant's fair-share band
    /// moved.
    pub fair_refiled: u64,
    /// A gang's hold worked out again (a scan of the nodes it may hold).
    pub hold_scans: u64,
    /// Patience's look-ups of cheaper capacity due to free.
    pub patience_scans: u64,
    /// Live attempts looked at by those look-ups.
    pub patience_live_scanned: u64,
    /// Gangs placed on the whole ideal fleet to price them for patience
    /// (the rest of a gang's look-ups reuse the prices found for an equal
    /// request: `Core::prices`).
    pub patience_gang_pricings: u64,
}
