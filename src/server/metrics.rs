//! `GET /metrics`: Prometheus text exposition. Counts come from the
//! journal's readers and the engine's own counters; never a token, a
//! secret or a workload's text.

use super::Served;
use super::prom::{self, family, label};
use crate::engine::metrics::Histogram;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::fmt::Write;

pub async fn metrics(State(s): State<Served>) -> Response {
    let mut out = String::new();
    family(&mut out, "canopy_build_info", "gauge", "Always 1; the labels say which Canopy this is.");
    let _ = writeln!(out, "canopy_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    let counts = s.read(|j| Ok((j.count_by_state()?, j.attempts_by_class()?))).await;
    let (states, classes) = counts.unwrap_or_default();
    family(&mut out, "canopy_workloads", "gauge", "Workloads by state.");
    for st in ["queued", "placing", "launching", "running", "succeeded", "failed", "cancelled"] {
        let n = states.iter().find(|(k, _)| k == st).map_or(0, |(_, n)| *n);
        let _ = writeln!(out, "canopy_workloads{{state=\"{st}\"}} {n}");
    }
    family(
        &mut out,
        "canopy_attempts_ended_total",
        "counter",
        "Ended attempts by failure class (none: succeeded).",
    );
    for (class, n) in &classes {
        let _ = writeln!(out, "canopy_attempts_ended_total{{class=\"{}\"}} {n}", label(class));
    }
    let queued = states.iter().filter(|(k, _)| k == "queued").map(|(_, n)| *n).sum::<u64>();
    family(&mut out, "canopy_queue_depth", "gauge", "Workloads waiting to be placed.");
    let _ = writeln!(out, "canopy_queue_depth {queued}");
    super::servers::metrics(&s, &mut out).await;
    let status = s.fleet_status();
    if let Some(st) = status {
        family(&mut out, "canopy_blocked_workloads", "gauge", "Queued workloads nothing fits now.");
        let _ = writeln!(out, "canopy_blocked_workloads {}", st.blocked);
        family(
            &mut out,
            "canopy_provider_reachable",
            "gauge",
            "1 when the provider's last status call answered.",
        );
        for p in &st.fleet.providers {
            let up = u8::from(!st.unreachable.contains_key(&p.name));
            let _ = writeln!(out, "canopy_provider_reachable{{provider=\"{}\"}} {up}", label(&p.name));
        }
        super::metrics_fleet::render(&mut out, &st);
        family(
            &mut out,
            "canopy_webhook_deliveries_pending",
            "gauge",
            "Webhook deliveries not yet delivered or given up.",
        );
        let _ = writeln!(out, "canopy_webhook_deliveries_pending {}", st.deliveries_pending);
        family(
            &mut out,
            "canopy_webhook_deliveries_in_flight",
            "gauge",
            "Webhook deliveries being tried now.",
        );
        let _ = writeln!(out, "canopy_webhook_deliveries_in_flight {}", st.deliveries_in_flight);
    }
    let tenancy = s.tenancy();
    budgets(&mut out, &super::tenants::budget_standings(&s, &tenancy));
    // Tenants' flavors need the engine's fleet: a standby leaves them to
    // the leader's scrape.
    if !tenancy.is_empty()
        && s.engine.is_some()
        && let Ok((rows, reclaims)) = super::tenants::now(&s, &tenancy).await
    {
        // Tenants × flavors only: the label sets stay as few as the tables.
        type Gauge = (&'static str, &'static str, fn(&crate::tenant::usage::TenantUsage) -> u64);
        let gauges: [Gauge; 4] = [
            ("canopy_tenant_quota_gpus", "A tenant's nominal GPU quota in a flavor.", |r| {
                r.limits.nominal().gpus
            }),
            ("canopy_tenant_used_gpus", "GPUs a tenant's live attempts hold in a flavor.", |r| r.in_use.gpus),
            (
                "canopy_tenant_borrowed_gpus",
                "GPUs a tenant uses beyond its nominal quota in a flavor.",
                |r| r.borrowed.gpus,
            ),
            (
                "canopy_tenant_lent_gpus",
                "GPUs of a tenant's idle nominal quota that others of its cohort use, in a flavor.",
                |r| r.lent.gpus,
            ),
        ];
        for (name, help, value) in gauges {
            family(&mut out, name, "gauge", help);
            for r in rows.iter().filter(|r| !r.flavor.is_empty()) {
                let _ = writeln!(
                    out,
                    "{name}{{tenant=\"{}\",flavor=\"{}\"}} {}",
                    label(&r.tenant),
                    label(&r.flavor),
                    value(r)
                );
            }
        }
        family(
            &mut out,
            "canopy_tenant_pending_workloads",
            "gauge",
            "A tenant's workloads waiting to be placed.",
        );
        let mut done = std::collections::BTreeSet::new();
        for r in &rows {
            if done.insert(r.tenant.as_str()) {
                let _ = writeln!(
                    out,
                    "canopy_tenant_pending_workloads{{tenant=\"{}\"}} {}",
                    label(&r.tenant),
                    r.waiting
                );
            }
        }
        let fair = super::tenants::fair_standings(&s, &tenancy);
        if !fair.is_empty() {
            type Fair = (&'static str, &'static str, fn(&crate::tenant::fair::Standing) -> f64);
            let gauges: [Fair; 4] = [
                (
                    "canopy_tenant_fair_share_usage_gpu_seconds",
                    "A tenant's GPU usage decayed with the fair-share half-life.",
                    |x| x.usage_gpu_hours * 3600.0,
                ),
                ("canopy_tenant_fair_share_share", "A tenant's share of all tenants' decayed usage.", |x| {
                    x.share
                }),
                (
                    "canopy_tenant_fair_share_target",
                    "A tenant's fair share: its weight over all weights.",
                    |x| x.fair_share,
                ),
                (
                    "canopy_tenant_fair_share_position",
                    "A tenant's place in the serving order (1: first).",
                    |x| x.position as f64,
                ),
            ];
            for (name, help, value) in gauges {
                family(&mut out, name, "gauge", help);
                for x in &fair {
                    let _ = writeln!(out, "{name}{{tenant=\"{}\"}} {}", label(&x.tenant), value(x));
                }
            }
        }
        family(
            &mut out,
            "canopy_tenant_reclaims_in_flight",
            "gauge",
            "An owning tenant's workloads taking its capacity back from borrowed work now.",
        );
        for t in &done {
            let n = reclaims.get(*t).copied().unwrap_or(0);
            let _ = writeln!(out, "canopy_tenant_reclaims_in_flight{{tenant=\"{}\"}} {n}", label(t));
        }
    }
    usage(&s, &mut out).await;
    outcomes(&s, &mut out).await;
    if let Some(m) = s.engine.as_ref().and_then(|e| e.metrics()) {
        histogram(
            &mut out,
            "canopy_journal_write_seconds",
            "Journal commit time, fsync included.",
            &m.journal_write,
        );
        histogram(
            &mut out,
            "canopy_placement_latency_seconds",
            "From submission to first placement.",
            &m.placement,
        );
        family(
            &mut out,
            "canopy_webhook_tries_total",
            "counter",
            "Webhook delivery tries by outcome (failed: to be tried again).",
        );
        for (outcome, n) in crate::engine::metrics::WEBHOOK_OUTCOMES.iter().zip(m.webhook_tries()) {
            let _ = writeln!(out, "canopy_webhook_tries_total{{outcome=\"{outcome}\"}} {n}");
        }
    }
    s.http.render(&mut out);
    super::process_metrics::render(&mut out);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}

/// Per tenant, the GPU time and cost of its ended workloads by ledger
/// column (`crate::usage::counters`): counters, caught up from the events
/// since the previous scrape.
async fn usage(s: &Served, out: &mut String) {
    use crate::usage::Kind;
    let counters = s.usage.clone();
    let default = s.tenancy().default_tenant.clone();
    let read = s
        .read(move |j| {
            let mut c = counters.lock().unwrap_or_else(|e| e.into_inner());
            c.catch_up(j, default.as_deref())?;
            Ok(c.by_tenant.clone())
        })
        .await;
    let by_tenant = match read {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(error = %e, "usage counters not updated");
            return;
        }
    };
    family(
        out,
        "canopy_usage_gpu_seconds_total",
        "counter",
        "GPU time held by a tenant's ended workloads, by ledger column (docs/usage.md).",
    );
    for (tenant, f) in &by_tenant {
        for k in [Kind::Useful, Kind::WastedInfra, Kind::WastedOwn, Kind::Decision, Kind::Idle] {
            let _ = writeln!(
                out,
                "canopy_usage_gpu_seconds_total{{tenant=\"{}\",kind=\"{}\"}} {}",
                label(tenant),
                k.as_str(),
                crate::usage::report::fmt_ms(f.get(k))
            );
        }
    }
    family(
        out,
        "canopy_usage_cost_usd_total",
        "counter",
        "What a tenant's ended workloads cost at the prices in force at launch.",
    );
    for (tenant, f) in &by_tenant {
        let _ = writeln!(
            out,
            "canopy_usage_cost_usd_total{{tenant=\"{}\"}} {}",
            label(tenant),
            crate::usage::report::fmt_micro(f.cost_micro_usd)
        );
    }
}

/// Each budget's period: its limits, what was spent and what running work
/// is expected to spend still, in dollars and GPU-seconds, and the work it
/// holds.
fn budgets(out: &mut String, standings: &[crate::tenant::budget::Standing]) {
    if standings.is_empty() {
        return;
    }
    use crate::tenant::budget::Standing;
    type G = (&'static str, &'static str, fn(&Standing) -> Option<f64>);
    let gauges: [G; 7] = [
        ("canopy_budget_limit_usd", "A budget's limit per period, in dollars.", |b| {
            b.limit_micro_usd.map(|m| m as f64 / 1e6)
        }),
        ("canopy_budget_spent_usd", "What a budget's work spent this period, in dollars.", |b| {
            Some(b.spent.micro_usd as f64 / 1e6)
        }),
        (
            "canopy_budget_committed_usd",
            "What a budget's running work is expected to spend still, in dollars.",
            |b| Some(b.committed.micro_usd as f64 / 1e6),
        ),
        ("canopy_budget_limit_gpu_seconds", "A budget's GPU time per period.", |b| {
            b.limit_gpu_ms.map(|m| m as f64 / 1e3)
        }),
        ("canopy_budget_spent_gpu_seconds", "GPU time a budget's work held this period.", |b| {
            Some(b.spent.gpu_ms as f64 / 1e3)
        }),
        ("canopy_budget_period_end_seconds", "When a budget's period renews (Unix time).", |b| {
            Some(b.end.0 as f64 / 1e3)
        }),
        ("canopy_budget_held_workloads", "Workloads a budget holds.", |b| Some(b.holding as f64)),
    ];
    for (name, help, value) in gauges {
        family(out, name, "gauge", help);
        for b in standings {
            if let Some(v) = value(b) {
                let _ = writeln!(
                    out,
                    "{name}{{budget=\"{}\",scope=\"{}\"}} {v}",
                    label(&b.name),
                    label(&b.scope)
                );
            }
        }
    }
}

/// Automatic retries by class and completion times, caught up from the
/// events since the previous scrape ([`super::outcomes`]).
async fn outcomes(s: &Served, out: &mut String) {
    let outcomes = s.outcomes.clone();
    let read = s
        .read(move |j| {
            let mut o = outcomes.lock().unwrap_or_else(|e| e.into_inner());
            o.catch_up(j)?;
            Ok((o.retries.clone(), o.completion()))
        })
        .await;
    let (retries, completion) = match read {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "retry and completion counters not updated");
            return;
        }
    };
    family(
        out,
        "canopy_retries_total",
        "counter",
        "Automatic retries by the class of the failure that caused them.",
    );
    for (class, n) in &retries {
        let _ = writeln!(out, "canopy_retries_total{{class=\"{class}\"}} {n}");
    }
    let name = "canopy_workload_completion_seconds";
    family(out, name, "histogram", "From submission to a workload's final state, by that state.");
    for (state, snapshot) in super::outcomes::FINAL.iter().zip(completion) {
        prom::histogram_series(out, name, &format!("state=\"{state}\""), snapshot);
    }
}

fn histogram(out: &mut String, name: &str, help: &str, h: &Histogram) {
    family(out, name, "histogram", help);
    prom::histogram_series(out, name, "", h.snapshot());
}
