//! The engine: runs workloads as attempts, watches them, and decides what a
//! failed attempt was and whether to try again.
//!
//! So far this holds the failure classifier ([`classify`]), which is pure:
//! it reads what the provider reported and the tail of the attempt's log and
//! names the failure class with its evidence. The engine core (a pure state
//! machine) and its tokio shell will live here too; nothing in this module
//! may do I/O outside that shell.

pub mod classify;
mod rules;
