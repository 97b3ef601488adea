//! The tables of `docs/usage-month.md`: one month of the Gavel trace
//! shared by four teams (docs/sim-tenants.md's set-up), as an owner and as
//! a tenant would read `canopy usage` for it. The run is `canopy sim`'s
//! (`canopy::sim::simulate`, Canopy's policy, the default fault model);
//! its records go through the usage ledger and report code the server's
//! `GET /v1/usage` runs (`canopy::sim::usage::LedgerTally`), over the
//! window `[start, start + DAYS)` of the run's virtual time.
//!
//! ```sh
//! cargo run --release --example usage_month
//! cargo run --release --example usage_month -- [--trace FILE] [--fleet FLEET.toml] [--seed 0]
//!     [--policy canopy] [--arrivals-x N] [--days 30]
//! ```

use canopy::engine::model::Millis;
use canopy::fleet::load;
use canopy::sim::usage::{LedgerTally, groups_table};
use canopy::sim::{self, EPOCH, FaultModel, Input};
use canopy::usage::report::{By, Report, hours, lost_by_class, usd};
use std::fmt::Write;

const USAGE: &str = "usage: usage_month [--trace FILE] [--fleet FLEET.toml] [--seed N] [--policy canopy] [--arrivals-x N] [--days N]";

struct Args {
    trace: String,
    fleet: String,
    seed: u64,
    policy: String,
    arrivals_x: f64,
    days: i64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        trace: "assets/traces/gavel_msr_seed0_ee9e8c.trace".into(),
        fleet: "assets/fleets/demo-tenants.toml".into(),
        seed: 0,
        policy: "canopy".into(),
        arrivals_x: 1.0,
        days: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        let positive = |flag: &str, v: String| canopy::sim::seeds::parse_positive(flag, &v);
        match flag.as_str() {
            "--trace" => a.trace = value()?,
            "--fleet" => a.fleet = value()?,
            "--policy" => a.policy = value()?,
            "--seed" => {
                let v = value()?;
                a.seed = v.parse().map_err(|_| format!("--seed {v:?} is not a seed"))?;
            }
            "--arrivals-x" => a.arrivals_x = positive("--arrivals-x", value()?)?,
            "--days" => a.days = positive("--days", value()?)?.round() as i64,
            _ => return Err(format!("unknown argument {flag:?}\n{USAGE}")),
        }
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("usage_month: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    let fleet_text = std::fs::read_to_string(&a.fleet).map_err(|e| format!("{}: {e}", a.fleet))?;
    let fleet = load::parse(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
    let tenancy = load::parse_tenancy(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&a.trace).map_err(|e| format!("{}: {e}", a.trace))?;
    let mut jobs =
        sim::trace::parse(sim::trace::detect(&a.trace, &text), &text, &a.trace).map_err(|e| e.to_string())?;
    for j in &mut jobs {
        j.submit_s /= a.arrivals_x;
    }
    sim::tenants::assign(&mut jobs, &tenancy)?;
    let faults = FaultModel::default();
    let policy = sim::parse_policy(&a.policy, a.seed)?;
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: a.seed,
        policies: &[policy],
        optimize: Default::default(),
        fleet_name: &a.fleet,
        trace_name: &a.trace,
        tenancy: (!tenancy.is_empty()).then_some(&tenancy),
    };
    let mut ledger = LedgerTally::new(input.tenancy);
    let report = sim::simulate(&input, &mut ledger)?;
    let p = &report.policies[0];
    let since = EPOCH;
    let until = Millis(EPOCH.0 + a.days * 86_400_000);
    // Work still running when the run stopped counts as live up to then.
    let last = ledger.last_at.unwrap_or(EPOCH);
    let by = |b: By| ledger.window(&fleet, input.tenancy, b, (Some(since), until), last);
    let tenants = by(By::Tenant);
    let owners = by(By::Owner);

    let mut out = String::new();
    let iso = |t: Millis| canopy::providers::sim::signature::iso_utc(t)[..10].to_string();
    let _ = writeln!(
        out,
        "{} jobs from {}{} on {} ({} nodes, {} GPUs), policy {}, seed {}; the run lasts {:.1} days of virtual time; the month: {} days from {} (UTC) to {} (not included)\n",
        jobs.len(),
        a.trace,
        if a.arrivals_x == 1.0 { String::new() } else { format!(", arrivals ×{}", a.arrivals_x) },
        a.fleet,
        fleet.nodes.len(),
        fleet.total_gpus(),
        p.policy,
        a.seed,
        p.makespan_h / 24.0,
        a.days,
        iso(since),
        iso(until),
    );
    out.push_str("### As an owner reads it (`canopy usage --by owner`, its owner lines)\n\n");
    out.push_str(&owner_table(&owners));
    let _ = write!(
        out,
        "\nGPU-hours held on each owner's pools, by whose fault the waste was:\n\n{}",
        groups_table(&owners)
    );
    out.push_str("\n### As a tenant reads it (`canopy usage --by tenant`)\n\n");
    out.push_str(&tenant_table(&tenants));
    out.push_str("\nLost GPU-hours by class (the classes behind the two lost columns):\n\n");
    for g in tenants.groups.iter().chain(std::iter::once(&tenants.total)) {
        let lost = lost_by_class(g);
        let _ = writeln!(out, "- {}: {}", g.key, if lost.is_empty() { "none".into() } else { lost });
    }
    let t = &tenants.total;
    let _ = writeln!(
        out,
        "\nThe groups sum to the total exactly (integer GPU-milliseconds): {} GPU-h held = {} useful + {} lost to the infrastructure + {} lost to the workloads' own errors + {} decisions + {} idle + {} live.",
        hours(t.gpu_ms),
        hours(t.useful_gpu_ms),
        hours(t.wasted_infra_gpu_ms),
        hours(t.wasted_own_gpu_ms),
        hours(t.decision_gpu_ms),
        hours(t.idle_gpu_ms),
        hours(t.live_gpu_ms),
    );
    if let Some(all) = &p.usage {
        let _ = writeln!(
            out,
            "The whole run, as `canopy sim` prints it: {} GPU-h held, {} useful, {} lost to the infrastructure, {} to the workloads' own errors, {}.",
            hours(all.total.gpu_ms),
            hours(all.total.useful_gpu_ms),
            hours(all.total.wasted_infra_gpu_ms),
            hours(all.total.wasted_own_gpu_ms),
            usd(all.total.cost_micro_usd),
        );
    }
    print!("{out}");
    Ok(())
}

/// Per owner: its own work on its pools, what it lent to others and
/// earned for it, and its reclaims against its promise.
fn owner_table(r: &Report) -> String {
    let mut s = String::from(
        "| owner | own GPU-h | lent GPU-h | earned | reclaims | worst | p99 | promise | late |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let secs = |ms: Option<i64>| ms.map_or("—".to_string(), |m| format!("{:.0}s", m as f64 / 1000.0));
    for o in &r.owners {
        let reclaims = if o.reclaims_in_flight > 0 {
            format!("{} ({} stopping)", o.reclaims, o.reclaims_in_flight)
        } else {
            o.reclaims.to_string()
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.owner,
            hours(o.own_gpu_ms),
            hours(o.lent_gpu_ms),
            usd(o.earned_micro_usd),
            reclaims,
            secs(o.worst_reclaim_ms),
            secs(o.p99_reclaim_ms),
            secs(o.promise_ms),
            o.late_reclaims,
        );
    }
    s
}

/// Per tenant: what it used, what of it was useful, what was lost and to
/// whose fault, what it cost and what a useful GPU-hour cost it.
fn tenant_table(r: &Report) -> String {
    let mut s = String::from(
        "| tenant | attempts | GPU-h used | useful | lost: infra | lost: own | decision | idle | cost | $ / useful GPU-h |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for g in r.groups.iter().chain(std::iter::once(&r.total)) {
        let per = if g.useful_gpu_ms == 0 {
            "—".to_string()
        } else {
            format!("${:.3}", g.cost_micro_usd as f64 / 1e6 / (g.useful_gpu_ms as f64 / 3_600_000.0))
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {per} |",
            g.key,
            g.attempts,
            hours(g.gpu_ms),
            hours(g.useful_gpu_ms),
            hours(g.wasted_infra_gpu_ms),
            hours(g.wasted_own_gpu_ms),
            hours(g.decision_gpu_ms),
            hours(g.idle_gpu_ms),
            usd(g.cost_micro_usd),
        );
    }
    s
}
