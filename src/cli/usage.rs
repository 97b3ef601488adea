//! `canopy usage`: GPU time and cost by tenant, owner, provider, pool,
//! accelerator or user, like Slurm's `sreport`: what finished useful
//! work, what was lost and to whose fault, what sat idle. Asks the API
//! (`GET /v1/usage`, the store's socket or `--server`), so it counts what
//! the caller may see.

use super::StoreArgs;
use super::table::new_table;
use super::workloads::{local_time, with_api};
use canopy::usage::report::{self, By, Report, hours, usd};
use color_eyre::eyre::Result;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    /// Group by tenant, owner (of the pool), provider, pool, accelerator or
    /// user (who submitted).
    #[arg(long, default_value = "tenant", value_parser = parse_by)]
    pub by: By,
    /// From this time: RFC 3339 (2026-12-01T00:00:00Z), epoch ms, or a
    /// duration ago (30d). From the beginning when left out.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Up to this time (not included), as --since; now when left out.
    #[arg(long, value_name = "TIME")]
    pub until: Option<String>,
    /// The report as JSON: integer GPU-milliseconds and millionths of a dollar.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// The report as CSV: GPU-seconds and dollars, exact to the last digit.
    #[arg(long)]
    pub csv: bool,
    /// The ledger's rows instead of the groups: one per attempt with where
    /// it ran, for whom, its outcome and its figures in the window.
    #[arg(long)]
    pub rows: bool,
}

fn parse_by(s: &str) -> Result<By, String> {
    s.parse()
}

pub fn run(store: &StoreArgs, args: UsageArgs) -> Result<ExitCode> {
    let mut path = format!("/v1/usage?by={}", args.by.as_str());
    if args.rows {
        path.push_str("&rows=true");
    }
    for (name, v) in [("since", &args.since), ("until", &args.until)] {
        if let Some(v) = v {
            path.push_str(&format!("&{name}={}", canopy::client::encode(v)));
        }
    }
    let r = match with_api(store, async |c| c.get::<Report>(&path).await)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    if args.json {
        outln!("{}", canopy::text::json_with_times(&r)?);
    } else if args.csv && args.rows {
        out!("{}", report::rows_csv(&r.rows));
    } else if args.csv {
        out!("{}", report::csv(&r));
    } else if args.rows {
        print_rows(&r);
    } else {
        print_table(&r);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(r: &Report) {
    let by = r.by.as_str().to_uppercase();
    let mut head = vec![by.as_str()];
    head.extend(report::TABLE_COLUMNS);
    let mut t = new_table(&head);
    for l in r.groups.iter().chain(std::iter::once(&r.total)) {
        let key = if std::ptr::eq(l, &r.total) { "TOTAL".to_string() } else { l.key.clone() };
        t.add_row(std::iter::once(key).chain(report::table_cells(l)));
    }
    outln!("{t}");
    if !r.total.lost_by_class_gpu_ms.is_empty() {
        outln!("\nlost GPU-hours by class: {}", report::lost_by_class(&r.total));
    }
    if !r.owners.is_empty() {
        let mut o = new_table(&[
            "OWNER",
            "OWN GPU-H",
            "LENT GPU-H",
            "EARNED",
            "RECLAIMS",
            "WORST",
            "P99",
            "PROMISE",
            "LATE",
        ]);
        let secs = |ms: Option<i64>| ms.map_or("-".to_string(), |m| format!("{:.0}s", m as f64 / 1000.0));
        for l in &r.owners {
            let reclaims = if l.reclaims_in_flight > 0 {
                format!("{} ({} stopping)", l.reclaims, l.reclaims_in_flight)
            } else {
                l.reclaims.to_string()
            };
            o.add_row([
                l.owner.clone(),
                hours(l.own_gpu_ms),
                hours(l.lent_gpu_ms),
                usd(l.earned_micro_usd),
                reclaims,
                secs(l.worst_reclaim_ms),
                secs(l.p99_reclaim_ms),
                secs(l.promise_ms),
                l.late_reclaims.to_string(),
            ]);
        }
        outln!("\n{o}");
    }
    let since = r.since.map_or("the beginning".to_string(), local_time);
    errln!("from {since} to {} (not included); GPU-hours, cost at the prices at launch", local_time(r.until));
}

fn print_rows(r: &Report) {
    let mut t = new_table(&[
        "ATTEMPT", "TENANT", "USER", "POOL", "NODES", "GPUS", "OUTCOME", "GPU-H", "USEFUL", "LOST", "IDLE",
        "COST",
    ]);
    for row in &r.rows {
        let l = &row.figures;
        let lost = l.wasted_infra_gpu_ms + l.wasted_own_gpu_ms + l.decision_gpu_ms;
        t.add_row([
            row.attempt.clone(),
            row.tenant.clone().unwrap_or_else(|| "-".into()),
            row.user.clone().unwrap_or_else(|| "-".into()),
            row.pool.clone(),
            row.nodes.clone(),
            row.gpus.to_string(),
            row.outcome.clone(),
            hours(l.gpu_ms),
            hours(l.useful_gpu_ms),
            hours(lost),
            hours(l.idle_gpu_ms),
            usd(l.cost_micro_usd),
        ]);
    }
    outln!("{t}");
    errln!("{} attempts; canopy usage without --rows for the totals", r.rows.len());
}
