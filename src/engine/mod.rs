//! The engine: runs workloads as attempts, watches them, and decides what a
//! failed attempt was and whether to try again.
//!
//! The failure classifier ([`classify`]) is pure: it reads what the provider
//! reported and the tail of the attempt's log and names the failure class
//! with its evidence. Nothing in this module may do I/O outside the shell.

pub mod classify;
pub mod model;
mod rules;
