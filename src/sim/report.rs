//! The comparison: every policy's figures side by side, as a Markdown
//! table (readable in a terminal, pasteable into docs) or as JSON.
//!
//! Owns formatting only; no I/O.

use super::faults::FaultModel;
use super::metrics::PolicyReport;
use serde::Serialize;
use std::fmt::Write;

/// The result of `canopy sim`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    pub seed: u64,
    /// The jobs' `preferences.optimize`.
    pub optimize: crate::spec::Optimize,
    pub fleet: String,
    pub trace: String,
    pub jobs: usize,
    pub nodes: usize,
    pub gpus: u64,
    pub faults: FaultModel,
    pub policies: Vec<PolicyReport>,
}

impl SimReport {
    /// Pretty JSON. Serializing plain numbers and strings cannot fail; an
    /// error would still come back as a JSON object rather than a panic.
    pub fn to_json(&self) -> String {
        crate::text::json_pretty(self).unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()))
    }

    /// The comparison table, one row per policy, plus ratios against the
    /// first policy (Canopy's) and cheapest-first when both ran.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} jobs from {} on {} ({} nodes, {} GPUs), seed {}, optimize {}\n",
            self.jobs,
            self.trace,
            self.fleet,
            self.nodes,
            self.gpus,
            self.seed,
            serde_json::to_value(self.optimize)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        );
        s.push_str(
            "| policy | completed | infra-only completed | GPU-h used | GPU-h wasted (infra) | own waste, V100-h | cost | useful GPU-h | $ / useful GPU-h | makespan | queue p50 / p99 | completion p50 / p99 | attempts / workload | never ran |\n",
        );
        s.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for p in &self.policies {
            let _ = writeln!(
                s,
                "| {} | {:.1}% | {} | {:.0} | {:.0} ({:.0}) | {:.0} | ${:.0} | {:.0} | ${:.3} | {} | {} / {} | {} / {} | {:.2} | {} |",
                p.policy,
                p.completed_pct,
                infra_only(p.infra_only_completed_pct, p.infra_only, "%"),
                p.used_gpu_h,
                p.wasted_gpu_h,
                p.wasted_infra_gpu_h,
                p.wasted_own_v100_h,
                p.cost_usd,
                p.useful_gpu_h,
                p.cost_per_useful_gpu_h,
                hours(p.makespan_h),
                hours(p.queue_p50_h),
                hours(p.queue_p99_h),
                hours(p.completion_p50_h),
                hours(p.completion_p99_h),
                p.attempts_per_workload,
                p.never_ran,
            );
        }
        for p in self.policies.iter().filter(|p| !p.tenants.is_empty()) {
            let _ = write!(s, "\n{} per tenant:\n\n{}", p.policy, tenant_table(&p.tenants));
        }
        let find = |n: &str| self.policies.iter().find(|p| p.policy == n);
        if let (Some(c), Some(b)) = (find("canopy"), find("cheapest-first")) {
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            let _ = writeln!(
                s,
                "\ncanopy vs cheapest-first: GPU-h wasted ×{:.2} (infra ×{:.2}), own waste in V100-h ×{:.2}, cost ×{:.3}, cost per useful GPU-h ×{:.3}, makespan ×{:.2}",
                ratio(c.wasted_gpu_h, b.wasted_gpu_h),
                ratio(c.wasted_infra_gpu_h, b.wasted_infra_gpu_h),
                ratio(c.wasted_own_v100_h, b.wasted_own_v100_h),
                ratio(c.cost_usd, b.cost_usd),
                ratio(c.cost_per_useful_gpu_h, b.cost_per_useful_gpu_h),
                ratio(c.makespan_h, b.makespan_h),
            );
            if let Ok(one) = super::seeds::Seeds::new(std::slice::from_ref(self)) {
                let _ = write!(s, "\nGPU-hours wasted by failure class:\n\n{}", one.waste_table());
            }
        }
        let ledgers: Vec<(&str, &crate::usage::Report)> =
            self.policies.iter().filter_map(|p| Some((p.policy.as_str(), p.usage.as_ref()?))).collect();
        if !ledgers.is_empty() {
            let _ = write!(
                s,
                "\nThe usage ledger (as `canopy usage` counts it: GPU-hours held from launch, cost at the price at launch):\n\n{}",
                super::usage::totals_table(&ledgers)
            );
        }
        s
    }
}

/// One row per tenant: its work, its queue, its reclaims as an owner
/// against its promise, and the longest it was refused its nominal quota.
pub fn tenant_table(rows: &[super::metrics::TenantReport]) -> String {
    let mut s = String::from(
        "| tenant | jobs | completed | completed GPU-h | GPU-h used | queue p50 / p99 | reclaims | reclaim p50 / p99 / max | promise | within promise | its attempts reclaimed | longest refused nominal quota |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for t in rows {
        let secs = |x: f64| crate::units::human_secs(x);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {:.0} | {} / {} | {} | {} | {} | {} | {} | {} |",
            t.tenant,
            t.workloads,
            t.succeeded,
            t.completed_gpu_h,
            t.used_gpu_h,
            hours(t.queue_p50_h),
            hours(t.queue_p99_h),
            t.reclaims,
            if t.reclaims == 0 {
                "—".to_string()
            } else {
                format!("{} / {} / {}", secs(t.reclaim_p50_s), secs(t.reclaim_p99_s), secs(t.reclaim_max_s))
            },
            t.promise_s.map_or("—".to_string(), secs),
            if t.reclaims == 0 { "—".to_string() } else { format!("{:.1}%", t.reclaims_within_pct) },
            t.reclaimed_attempts,
            secs(t.refused_nominal_max_s),
        );
    }
    s
}

/// `42m`, `3.5h`, `2.1d`.
/// "97.5% (39/40)" (`percent` = "%"; the seeds tables write " %"), or
/// "—" when no workload failed only for the infrastructure (a share of
/// nothing is not 100%).
pub(super) fn infra_only(pct: f64, of: usize, percent: &str) -> String {
    if of == 0 {
        return "—".into();
    }
    format!("{pct:.1}{percent} ({}/{of})", (pct / 100.0 * of as f64).round())
}

fn hours(h: f64) -> String {
    if h < 1.0 {
        format!("{:.0}m", h * 60.0)
    } else if h < 48.0 {
        format!("{h:.1}h")
    } else {
        format!("{:.1}d", h / 24.0)
    }
}

#[cfg(test)]
mod tests {
    use super::infra_only;

    #[test]
    fn a_share_of_nothing_is_not_a_percentage() {
        assert_eq!(infra_only(100.0, 0, "%"), "—");
        assert_eq!(infra_only(97.5, 40, "%"), "97.5% (39/40)");
    }
}
