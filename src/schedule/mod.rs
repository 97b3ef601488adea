//! The scheduler: filter → score → pick, and an explanation for every
//! decision.
//!
//! This module owns placement decisions for one workload at a time:
//! [`Requirements`] (normalized from a spec) are matched against a
//! [`Snapshot`] (the fleet and its health, indexed once) under a [`Policy`]
//! (factor weights), giving a [`Decision`]: ranked [`Candidate`]s with
//! score breakdowns, or an [`Explanation`] of why nothing fits.
//!
//! It is pure: no I/O, no async, no clock, no randomness, and no mutation
//! of the fleet. It does not reserve capacity, retry, or decide health;
//! the engine does, and tells the snapshot what changed (one node's
//! capacity, state or health; one pool's or provider's health), which
//! updates it in place to exactly what a fresh build would be, or builds a
//! new one when the fleet itself changes.
//!
//! How a decision stays cheap (Nomad's computed classes, Slurm's bitmaps):
//! categorical constraints are checked once per region, provider,
//! compliance tag and pool class and combined as pool sets; numeric limits
//! per surviving pool; each pool's ready nodes are pre-sorted per free-GPU
//! count, so a pool's best node is found without a scan; and pools whose
//! score bound cannot make the top k are never scored. A decision's cost
//! grows with pools, not nodes. Only the unschedulable path visits every
//! node, to count reasons exactly.
//!
//! Gangs (`nodes > 1`: N nodes together, in one provider and one switch,
//! pool or region) are placed by `gang.rs`, which defines a set's score
//! and chooses the best set exactly; [`gang_hold`] says which nodes to
//! hold for a gang that must wait.
//!
//! ## Layers
//!
//! Single-node and gang placement are two strategies on one shared layer,
//! chosen at the top. A file imports only from layers below its own (or
//! from files of its own layer listed before it), so no file imports one
//! that imports it back; `tests/schedule_layers.rs` checks that.
//!
//! 1. Inputs and words: `requirements.rs` (what a workload needs),
//!    `policy.rs` (the factor weights), `filter.rs` (the filters' names and
//!    reasons), `bitset.rs` (pool sets), `demand.rs` (the widths of the
//!    work the engine knows, for the fit factor); `mix.rs` (request mixes
//!    for benches and tests).
//! 2. The snapshot: `snapshot.rs` (the tables, what decisions read, and
//!    the pool-level figures it precomputes), `snapshot/build.rs` and
//!    `snapshot/update.rs`.
//! 3. The shared layer: `check.rs` (feasibility, one definition),
//!    `domain.rs` (topology domains), `score.rs` (the scorer),
//!    `explain.rs` (why nothing fits), `decision.rs` (what a decision
//!    returns), `categorical.rs` (the pool-set filters every placement
//!    starts with).
//! 4. The strategies: `single.rs` (one node) and `gang.rs` with
//!    `gang/domains.rs` (where a gang can go) and `gang/sets.rs` (the best
//!    set of a domain); beside them `hold.rs` ([`gang_hold`]).
//! 5. The top: `place.rs` ([`place`]) chooses the strategy; `unfit.rs`
//!    ([`UnfitCache`]) remembers "nothing fits" answers and asks [`place`]
//!    again when what they depend on changed.

mod bitset;
mod categorical;
mod check;
mod decision;
mod demand;
mod domain;
mod explain;
mod filter;
mod gang;
mod hold;
pub mod mix;
mod place;
mod policy;
mod requirements;
mod score;
mod single;
mod snapshot;
mod unfit;

pub use decision::{
    Candidate, Considered, CostRange, Decision, GangNode, GpuNode, Placement, PoolPrice, RuledOut,
};
pub use demand::DemandMix;
pub use domain::spans_pools;
pub use explain::{Explanation, GangShortfall, NearMiss, ReasonCount};
pub use filter::Filter;
pub use hold::{GangHold, gang_hold};
pub use place::{place, pool_prices};
pub use policy::{Policy, Weights};
pub use requirements::{InputSite, Requirements};
pub use score::{Exhaustion, Factor, FactorScore, Risk};
pub use snapshot::Snapshot;
pub use unfit::UnfitCache;

#[cfg(test)]
mod tests;
