//! The tables of `docs/sim-tenants.md`, regenerated in one command: a
//! trace replayed on a fleet file with tenants, once with its tenancy and
//! once without (the same jobs, labelled with the same tenants, competing
//! in one queue as before tenants), on every seed, through the library
//! code `canopy sim` runs (`canopy::sim::simulate`).
//!
//! ```sh
//! cargo run --release --example sim_tenants
//! cargo run --release --example sim_tenants -- [--trace FILE] [--fleet FLEET.toml] [--seeds 0-9] [--policy canopy]
//!     [--arrivals-x N]
//! ```
//!
//! `--arrivals-x N` replays the trace N times as fast (every submit time
//! divided by N), to load the fleet until owners need their capacity back.
//!
//! Jobs without a `tenant` column go to tenants round-robin by arrival
//! (`canopy::sim::tenants::assign`). Prints, in Markdown: per seed the
//! completed GPU-hours with and without tenants, owners' reclaims and
//! their latency against the promise, and the longest refusal of a
//! nominal quota; then per tenant over all seeds; then the verdict
//! against issue 25's targets.

use canopy::fleet::load;
use canopy::sim::metrics::TenantReport;
use canopy::sim::{self, FaultModel, Input, NoSink, PolicyReport};
use canopy::usage::Line;
use std::fmt::Write;

const USAGE: &str = "usage: sim_tenants [--trace FILE] [--fleet FLEET.toml] [--seeds 0-9|3|0,4,7] [--policy canopy] [--arrivals-x N]";

struct Args {
    trace: String,
    fleet: String,
    seeds: Vec<u64>,
    policy: String,
    /// Arrivals this many times as fast: every submit time divided by it.
    arrivals_x: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        trace: "assets/traces/gavel_msr_seed0_ee9e8c.trace".into(),
        fleet: "assets/fleets/demo-tenants.toml".into(),
        seeds: (0..10).collect(),
        policy: "canopy".into(),
        arrivals_x: 1.0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--trace" => a.trace = value()?,
            "--fleet" => a.fleet = value()?,
            "--policy" => a.policy = value()?,
            "--arrivals-x" => a.arrivals_x = canopy::sim::seeds::parse_positive("--arrivals-x", &value()?)?,
            "--seeds" => a.seeds = canopy::sim::seeds::parse_seeds(&value()?)?,
            _ => return Err(format!("unknown argument {flag:?}\n{USAGE}")),
        }
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("sim_tenants: {e}");
        std::process::exit(2);
    }
}

fn secs(s: f64) -> String {
    if s < 120.0 { format!("{s:.0}s") } else { format!("{:.1}m", s / 60.0) }
}

fn hours(h: f64) -> String {
    if h < 1.0 { format!("{:.0}m", h * 60.0) } else { format!("{h:.1}h") }
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    let fleet_text = std::fs::read_to_string(&a.fleet).map_err(|e| format!("{}: {e}", a.fleet))?;
    let fleet = load::parse(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
    let tenancy = load::parse_tenancy(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
    if tenancy.is_empty() {
        return Err(format!("{} has no [[tenant]] tables; see docs/sim.md, \"Tenants\"", a.fleet));
    }
    let text = std::fs::read_to_string(&a.trace).map_err(|e| format!("{}: {e}", a.trace))?;
    let mut jobs =
        sim::trace::parse(sim::trace::detect(&a.trace, &text), &text, &a.trace).map_err(|e| e.to_string())?;
    for j in &mut jobs {
        j.submit_s /= a.arrivals_x;
    }
    sim::tenants::assign(&mut jobs, &tenancy)?;
    let faults = FaultModel::default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} jobs from {}{} on {} ({} nodes), policy {}, {} tenants assigned round-robin by arrival\n",
        jobs.len(),
        a.trace,
        if a.arrivals_x == 1.0 { String::new() } else { format!(", arrivals ×{}", a.arrivals_x) },
        a.fleet,
        fleet.nodes.len(),
        a.policy,
        tenancy.tenants.len()
    );
    out.push_str("| seed | completed GPU-h, tenants | without | ratio | reclaims | within promise | reclaim p99 / max | attempts reclaimed | longest refused nominal quota (tenant) | queue p99, tenants / without |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut all: Vec<(PolicyReport, PolicyReport)> = Vec::new();
    for &seed in &a.seeds {
        let policy = sim::parse_policy(&a.policy, seed)?;
        let one = |with: bool| -> Result<PolicyReport, String> {
            let input = Input {
                fleet: &fleet,
                jobs: &jobs,
                faults: &faults,
                seed,
                policies: &[policy],
                optimize: Default::default(),
                fleet_name: &a.fleet,
                trace_name: &a.trace,
                tenancy: with.then_some(&tenancy),
            };
            let r = sim::simulate(&input, &mut NoSink)?;
            r.policies.into_iter().next().ok_or_else(|| "no run".to_string())
        };
        let (with, without) = (one(true)?, one(false)?);
        let (reclaims, within, lat) = reclaim_figures(&with.tenants);
        let (refused, who) = with
            .tenants
            .iter()
            .map(|t| (t.refused_nominal_max_s, t.tenant.as_str()))
            .fold((0.0, "—"), |m, x| if x.0 > m.0 { x } else { m });
        let _ = writeln!(
            out,
            "| {seed} | {:.0} | {:.0} | {:.4} | {reclaims} | {} | {} | {} | {} ({who}) | {} / {} |",
            with.useful_gpu_h,
            without.useful_gpu_h,
            with.useful_gpu_h / without.useful_gpu_h.max(1e-9),
            pct(within, reclaims),
            lat,
            with.tenants.iter().map(|t| t.reclaimed_attempts).sum::<usize>(),
            secs(refused),
            hours(with.queue_p99_h),
            hours(without.queue_p99_h),
        );
        all.push((with, without));
    }
    // Per tenant over all seeds.
    let _ = writeln!(
        out,
        "\nPer tenant, seeds {}–{} (GPU-hours summed; queue and latency: the median seed's p50, the worst seed's p99 and max):\n",
        a.seeds.first().copied().unwrap_or(0),
        a.seeds.last().copied().unwrap_or(0)
    );
    out.push_str("| tenant | promise | completed GPU-h, tenants / without | queue p50, tenants / without | queue p99, tenants / without | reclaims | within promise | reclaim p99 / max | its attempts reclaimed | longest refused nominal quota |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for t in &tenancy.tenants {
        let rows = |with: bool| -> Vec<&TenantReport> {
            all.iter()
                .filter_map(|(w, wo)| (if with { w } else { wo }).tenants.iter().find(|r| r.tenant == t.name))
                .collect()
        };
        let (w, wo) = (rows(true), rows(false));
        let sum = |v: &[&TenantReport], f: fn(&TenantReport) -> f64| v.iter().map(|r| f(r)).sum::<f64>();
        let median = |v: &[&TenantReport], f: fn(&TenantReport) -> f64| {
            let mut x: Vec<f64> = v.iter().map(|r| f(r)).collect();
            x.sort_by(f64::total_cmp);
            x.get(x.len() / 2).copied().unwrap_or(0.0)
        };
        let max =
            |v: &[&TenantReport], f: fn(&TenantReport) -> f64| v.iter().map(|r| f(r)).fold(0.0, f64::max);
        let reclaims: usize = w.iter().map(|r| r.reclaims).sum();
        let within: f64 = w.iter().map(|r| r.reclaims_within_pct / 100.0 * r.reclaims as f64).sum();
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} / {:.0} | {} / {} | {} / {} | {reclaims} | {} | {} / {} | {} | {} |",
            t.name,
            secs(t.max_reclaim_delay.as_secs_f64()),
            sum(&w, |r| r.completed_gpu_h),
            sum(&wo, |r| r.completed_gpu_h),
            hours(median(&w, |r| r.queue_p50_h)),
            hours(median(&wo, |r| r.queue_p50_h)),
            hours(max(&w, |r| r.queue_p99_h)),
            hours(max(&wo, |r| r.queue_p99_h)),
            pct(within.round() as usize, reclaims),
            secs(max(&w, |r| r.reclaim_p99_s)),
            secs(max(&w, |r| r.reclaim_max_s)),
            w.iter().map(|r| r.reclaimed_attempts).sum::<usize>(),
            secs(max(&w, |r| r.refused_nominal_max_s)),
        );
    }
    // The targets.
    let reclaims: usize = all.iter().flat_map(|(w, _)| &w.tenants).map(|r| r.reclaims).sum();
    let within: f64 = all
        .iter()
        .flat_map(|(w, _)| &w.tenants)
        .map(|r| r.reclaims_within_pct / 100.0 * r.reclaims as f64)
        .sum();
    let within_pct = if reclaims == 0 { 100.0 } else { 100.0 * within / reclaims as f64 };
    let (mut worst_refused, mut worst_excess) = (0.0f64, f64::NEG_INFINITY);
    for r in all.iter().flat_map(|(w, _)| &w.tenants) {
        worst_refused = worst_refused.max(r.refused_nominal_max_s);
        if let Some(p) = r.promise_s {
            worst_excess = worst_excess.max(r.refused_nominal_max_s - p);
        }
    }
    let ratios: Vec<f64> = all.iter().map(|(w, wo)| w.useful_gpu_h / wo.useful_gpu_h.max(1e-9)).collect();
    let worst_ratio =
        ratios.iter().copied().max_by(|x, y| (x - 1.0).abs().total_cmp(&(y - 1.0).abs())).unwrap_or(1.0);
    let total = |with: bool| {
        all.iter().map(|(w, wo)| if with { w.useful_gpu_h } else { wo.useful_gpu_h }).sum::<f64>()
    };
    let yes = |b: bool| if b { "met" } else { "**missed**" };
    let _ = writeln!(out, "\nAgainst the targets (issue 25):\n");
    let _ = writeln!(
        out,
        "- owners' reclaims within their promise: {within_pct:.2} % of {reclaims} (≥ 99 %): {}",
        yes(within_pct >= 99.0)
    );
    let _ = writeln!(
        out,
        "- longest a tenant was refused its nominal quota: {} (at most its reclaim delay): {}",
        secs(worst_refused),
        yes(worst_excess <= 0.0)
    );
    let _ = writeln!(
        out,
        "- completed GPU-hours with tenants / without: {:.4} over all seeds, furthest seed {:.4} (within 3 %): {}",
        total(true) / total(false).max(1e-9),
        worst_ratio,
        yes((worst_ratio - 1.0).abs() <= 0.03)
    );
    // The usage ledger of the runs with tenants, as `canopy usage` counts
    // it (`canopy::sim::usage`: the server's ledger and report code).
    let mut ledger: std::collections::BTreeMap<String, Line> = std::collections::BTreeMap::new();
    let mut total = Line { key: "total".into(), ..Line::default() };
    for r in all.iter().filter_map(|(w, _)| w.usage.as_ref()) {
        for g in &r.groups {
            sim::usage::add(ledger.entry(g.key.clone()).or_default(), g);
        }
        sim::usage::add(&mut total, &r.total);
    }
    let mut lines: Vec<(&str, &Line)> = ledger.iter().map(|(k, l)| (k.as_str(), l)).collect();
    lines.push(("total", &total));
    let _ = write!(
        out,
        "\nThe usage ledger with tenants, seeds summed (as `canopy usage` counts it: GPU-hours held from launch, cost at the price at launch):\n\n{}",
        sim::usage::lines_table("tenant", &lines)
    );
    print!("{out}");
    Ok(())
}

/// Reclaims, how many within promise, and "p99 / max" of their latency
/// (the worst tenant's p99).
fn reclaim_figures(rows: &[TenantReport]) -> (usize, usize, String) {
    let n: usize = rows.iter().map(|r| r.reclaims).sum();
    let within =
        rows.iter().map(|r| (r.reclaims_within_pct / 100.0 * r.reclaims as f64).round() as usize).sum();
    if n == 0 {
        return (0, 0, "—".into());
    }
    let p99 = rows.iter().map(|r| r.reclaim_p99_s).fold(0.0, f64::max);
    let max = rows.iter().map(|r| r.reclaim_max_s).fold(0.0, f64::max);
    (n, within, format!("{} / {}", secs(p99), secs(max)))
}

fn pct(a: usize, of: usize) -> String {
    if of == 0 { "—".into() } else { format!("{:.1} %", 100.0 * a as f64 / of as f64) }
}
