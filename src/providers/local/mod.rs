//! The `local` provider: runs workloads on this machine, the embedded
//! default.
//!
//! Each attempt gets a directory `<root>/<token>/` (see [`layout`]) and a
//! supervisor process (see [`shim`]) in its own session that starts the
//! workload's argv without a shell, waits for it and records its end in
//! `exit.json`. Workloads survive the engine exiting.

pub mod container;
pub mod inventory;
pub mod layout;
pub mod procfs;
pub mod shim;

pub use shim::supervise_main;
