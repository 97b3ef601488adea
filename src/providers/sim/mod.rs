//! The `sim` provider: a simulated GPU marketplace whose commands really run.
//!
//! Canopy's embedded default is the local provider plus the demo fleet; the
//! demo fleet's providers (Slurm, Ray, a cloud, Kubernetes, a marketplace)
//! are served from here. Capacity, startup latency per lifecycle, other
//! tenants' load, node outages and faults are simulated; each attempt's
//! command is run by an executor (in production the local provider), so its
//! logs and outputs are real.
//!
//! - `SimMarket` is the shared state: pools and nodes from a
//!   [`Fleet`](crate::fleet::Fleet), attempts, churn, lemon nodes, all
//!   seeded by `SimConfig::seed`. One `SimProvider` per simulated
//!   provider name shares it.
//! - A launch answers at once with a provider handle (`i-0…` for a VM,
//!   `ctr-…` for a container, `job 40213` for a batch job). `status` says
//!   `Pending` until the startup moment ([`lifecycle`]), then starts the
//!   command on the executor under the same token, exactly once, and from
//!   then on reports the executor's status, unless a fault ([`faults`])
//!   strikes first: the simulator stops the real process through the
//!   executor and reports the end; in-workload faults (NCCL, CUDA OOM,
//!   Xid 79, no space) end as `Exited { code: 1 }` with the lines such a
//!   failure prints ([`signature`]) appended after the real stderr.
//! - Time comes from an injected clock; every decision is a plain
//!   function of (seed, token, config, now), so tests drive it.
//!
//! Faults strike at the first status poll at or after their moment; a
//! process that has ended by then has won the race and its own end stands.
//!
//! It must not decide retries or placement, classify failures, or write
//! the journal: it behaves like a provider, and Canopy must cope with it
//! exactly as with a real one.

pub mod churn;
pub mod faults;
pub mod lifecycle;
pub mod rng;
pub mod signature;

pub use churn::ChurnConfig;
pub use faults::FaultRates;
