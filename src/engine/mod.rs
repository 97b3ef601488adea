//! The engine: takes a workload from submitted to a final state, safely,
//! whatever fails on the way, and remembers everything.
//!
//! - [`core`] is `(state, event, now) -> (state, actions)`: no I/O, no
//!   clock. The simulator drives the same core in virtual time.
//! - [`classify`] names what a failed attempt was, with its evidence;
//!   [`retry`] decides what happens next. Both are pure rules.
//! - [`shell`] (tokio) performs the core's actions against providers and
//!   the journal and feeds results back as events. Only the shell does I/O.

pub mod checkpoint;
pub mod classify;
pub mod clock;
pub mod command;
pub mod core;
pub mod handle;
pub mod log_times;
pub mod metrics;
pub mod model;
pub mod retry;
mod rules;
mod rules_accel;
/// The rule of an attempt moved off a drained node (not a failure).
pub use rules::EVICTED_RULE;
/// The rule of a launch refused for capacity (no attempt spent).
pub use rules::REFUSED_RULE;
pub mod shell;
