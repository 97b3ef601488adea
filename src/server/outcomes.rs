//! Counters of what became of workloads, for `/metrics`: automatic
//! retries by the failure class that caused them, and how long workloads
//! took from submission to their final state. Kept up to date from the
//! journal's event log the way the usage counters are
//! (`crate::usage::counters`): each scrape reads only the events since the
//! previous one; the first reads the log from the start once.

use super::prom::Snapshot;
use crate::engine::metrics::Histogram;
use crate::engine::model::{EventKind, WorkloadId};
use crate::failure::FailureClass;
use crate::journal::{Journal, JournalError};
use std::collections::BTreeMap;

/// Events read per query while catching up.
const PAGE: usize = 10_000;

/// Completion-time buckets: from seconds to a week.
const BOUNDS: &[f64] = &[
    1.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 43200.0, 86400.0, 259200.0,
    604800.0,
];

/// The final states a completion is labelled with.
pub const FINAL: [&str; 3] = ["succeeded", "failed", "cancelled"];

/// Retries and completions counted so far.
#[derive(Debug)]
pub struct Outcomes {
    /// The last event read.
    seq: i64,
    /// Automatic retries by the class of the failure that caused them.
    pub retries: BTreeMap<&'static str, u64>,
    /// Submission to final state, per final state (in [`FINAL`]'s order).
    completion: [Histogram; 3],
}

impl Default for Outcomes {
    fn default() -> Self {
        Outcomes { seq: 0, retries: BTreeMap::new(), completion: FINAL.map(|_| Histogram::new(BOUNDS)) }
    }
}

impl Outcomes {
    /// Counts the retries and completions journalled since the last call.
    pub fn catch_up(&mut self, j: &Journal) -> Result<(), JournalError> {
        loop {
            let events = j.events_since(self.seq, PAGE)?;
            let Some((last, _)) = events.last() else { return Ok(()) };
            let last = *last;
            // An automatic retry is the engine's `retry [rule]: …` event on
            // the attempt that failed (a `final […]` one ended the workload;
            // the others are exclusions expiring and `canopy retry`).
            let retried: Vec<_> = events
                .iter()
                .filter(|(_, e)| e.kind == EventKind::Retry && e.message.starts_with("retry "))
                .filter_map(|(_, e)| e.attempt)
                .collect();
            if !retried.is_empty() {
                let mut ids: Vec<WorkloadId> = retried.iter().map(|a| a.workload).collect();
                ids.sort();
                ids.dedup();
                let attempts = j.attempts_of(&ids)?;
                for a in &retried {
                    let class = attempts.iter().find(|r| r.id == *a).and_then(|r| r.class);
                    *self.retries.entry(class.map_or("unknown", FailureClass::as_str)).or_default() += 1;
                }
            }
            for (_, e) in &events {
                let i = match e.kind {
                    EventKind::Succeeded => 0,
                    EventKind::Failed => 1,
                    EventKind::Cancelled => 2,
                    _ => continue,
                };
                if let Some(w) = j.workload(e.workload)? {
                    let ms = (e.at.0 - w.submitted_at.0).max(0);
                    self.completion[i].observe(std::time::Duration::from_millis(ms as u64));
                }
            }
            self.seq = last;
        }
    }

    /// The completion histograms, in [`FINAL`]'s order.
    pub fn completion(&self) -> [Snapshot; 3] {
        [0, 1, 2].map(|i| self.completion[i].snapshot())
    }
}
