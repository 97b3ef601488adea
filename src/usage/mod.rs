//! Usage accounting (issue 26): who used what, what it cost, and how much
//! of it was useful or lost, and to whose fault.
//!
//! - [`ledger`]: one row per attempt, derived from the journal alone (the
//!   same journal gives the same rows), with its held GPU time split into
//!   useful, lost by class (the infrastructure's, the workload's own, a
//!   decision's), idle (launch to running) and live.
//! - [`report`]: the rows within a window grouped like Slurm's `sreport`,
//!   with exact totals and the owners' view (lent, earned, reclaims).
//!
//! `GET /v1/usage`, `canopy usage` and the `canopy_usage_*` metrics all
//! read through [`read`] and these two.

pub mod counters;
pub mod ledger;
pub mod report;

pub use ledger::{Context, Figures, Kind, Row, Work, column};
pub use report::{By, Line, OwnerLine, Report};

use crate::engine::model::{AttemptRecord, WorkloadId};
use crate::journal::{Journal, JournalError, TenantFilter, WorkloadFilter};
use std::collections::HashSet;

/// The workloads and attempts a ledger is built from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Source {
    /// By id.
    pub work: Vec<Work>,
    /// By workload, then attempt.
    pub attempts: Vec<AttemptRecord>,
}

/// Reads the workloads `tenants` allows (every one when empty: the same
/// filter `GET /v1/workloads` lists by) and all their attempts, from one
/// journal snapshot. `default_tenant` stands for workloads from before
/// tenants.
pub fn read(
    j: &Journal,
    tenants: Vec<TenantFilter>,
    default_tenant: Option<&str>,
) -> Result<Source, JournalError> {
    let filter = WorkloadFilter { tenants, ..WorkloadFilter::default() };
    let mut work: Vec<Work> = j.workloads(&filter)?.iter().map(|w| Work::of(w, default_tenant)).collect();
    work.sort_by_key(|w| w.id);
    let (Some(lo), Some(hi)) = (work.first().map(|w| w.id), work.last().map(|w| w.id)) else {
        return Ok(Source::default());
    };
    let mut attempts = j.attempts_between(lo, hi)?;
    if (hi.0 - lo.0 + 1) as usize != work.len() {
        let wanted: HashSet<WorkloadId> = work.iter().map(|w| w.id).collect();
        attempts.retain(|a| wanted.contains(&a.id.workload));
    }
    Ok(Source { work, attempts })
}

#[cfg(test)]
mod tests;
