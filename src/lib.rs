//! Canopy: an execution layer for AI/GPU workloads.
//!
//! A workload says what it *needs* ([`spec`]); the fleet says what capacity
//! exists ([`fleet`]); the scheduler ([`schedule`]) matches one to the other
//! by capability, scores the candidates and explains every decision. The
//! health view ([`health`]) is how observed outcomes feed back into placement.
//!
//! The scheduler and the model types are pure: no I/O, no async, no clock.
//! Everything that touches files, the network or time lives at the edges
//! (the CLI in `main.rs`, the file loaders in [`spec::load`] and
//! [`fleet::load`]).

pub mod accel;
pub mod app;
pub mod client;
pub mod config;
pub mod console;
pub mod engine;
pub mod failure;
pub mod fleet;
pub mod ha;
pub mod health;
pub mod home;
pub mod import;
pub mod journal;
pub mod mcp;
pub mod notify;
pub mod private;
pub mod providers;
pub mod schedule;
pub mod server;
pub mod sim;
pub mod spec;
pub mod systemd;
pub mod tenant;
pub mod text;
pub mod units;
pub mod usage;
