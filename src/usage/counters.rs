//! The `canopy_usage_*` Prometheus counters: the ledger's figures per
//! tenant, over the workloads that have ended, kept up to date from the
//! journal's event log rather than rebuilt per scrape.
//!
//! A workload is counted once, when its final event (`succeeded`,
//! `failed`, `cancelled`) is in the journal: by then every attempt it
//! will ever have has ended, and the checkpoints later attempts resumed
//! from are known, so each second lands in its final column and the
//! counters only grow. Work still running is not in them (`GET /v1/usage`
//! counts it as `live`). Each scrape reads only the events since the
//! previous one; the first reads the log from the start once.

use super::ledger::{self, Context, Figures, Work};
use crate::engine::model::{EventKind, WorkloadId};
use crate::journal::{Journal, JournalError};
use std::collections::BTreeMap;

/// Events read per query while catching up.
const PAGE: usize = 10_000;

/// Per tenant (`-` without tenants), the figures of its ended workloads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    /// The last event read.
    seq: i64,
    pub by_tenant: BTreeMap<String, Figures>,
    /// Workloads counted so far.
    pub workloads: u64,
}

impl Counters {
    /// Adds the workloads that ended since the last call; `default_tenant`
    /// stands for workloads from before tenants.
    pub fn catch_up(&mut self, j: &Journal, default_tenant: Option<&str>) -> Result<(), JournalError> {
        let ctx = Context::default();
        loop {
            let events = j.events_since(self.seq, PAGE)?;
            let Some((last, _)) = events.last() else { return Ok(()) };
            let last = *last;
            let mut ended: Vec<WorkloadId> = events
                .iter()
                .filter(|(_, e)| {
                    matches!(e.kind, EventKind::Succeeded | EventKind::Failed | EventKind::Cancelled)
                })
                .map(|(_, e)| e.workload)
                .collect();
            ended.sort();
            ended.dedup();
            let attempts = j.attempts_of(&ended)?;
            let mut work = Vec::with_capacity(ended.len());
            for id in &ended {
                if let Some(w) = j.workload(*id)? {
                    work.push(Work::of(&w, default_tenant));
                }
            }
            // Ended workloads have no live attempt: `now` counts nothing.
            let now = crate::engine::model::Millis(i64::MAX);
            for r in ledger::rows(&ctx, &work, &attempts, now) {
                if let Some(f) = Figures::of(&r, crate::engine::model::Millis(i64::MIN), now) {
                    self.by_tenant.entry(r.tenant.unwrap_or("-").to_string()).or_default().add(&f);
                }
            }
            self.workloads += work.len() as u64;
            self.seq = last;
        }
    }
}
