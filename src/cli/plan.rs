//! `canopy plan SPEC`: where a spec would run now, and why — the ranked
//! candidates with their score breakdown, or the explanation of why nothing
//! fits. Exit 3 when nothing fits, so scripts can tell. For a gang, each
//! candidate lists its nodes (rank 0 first) and its hourly total; the JSON
//! carries them as `gang` and `hourly_usd`.

use super::table::{new_table, usd};
use canopy::fleet::Fleet;
use canopy::health::HealthView;
use canopy::schedule::{Decision, DemandMix, GpuNode, Policy, Requirements, Snapshot, place};
use canopy::spec::load;
use color_eyre::eyre::{Result, eyre};
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;

#[derive(Serialize)]
struct PlanReport<'a> {
    spec: &'a str,
    #[serde(flatten)]
    decision: &'a Decision,
}

/// `demand`: the engine's mix of live work when there is an engine
/// ([`canopy::schedule::DemandMix`]); without one, fit counts every GPU a
/// placement leaves free.
pub fn run(
    spec_path: &Path,
    fleet: &Fleet,
    health: &HealthView,
    demand: Option<&DemandMix>,
    json: bool,
) -> Result<ExitCode> {
    // Read once, safely (a FIFO or /dev/zero is refused).
    let (source, loaded) = load::load_file_and_text(spec_path);
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            errln!("{}", e.render(&source));
            return Err(eyre!(
                "{} is not a valid spec; fix the errors above (canopy validate shows them too)",
                spec_path.display()
            ));
        }
    };
    for w in &loaded.warnings {
        errln!("{}\n", w.render(&source));
    }
    let spec = &loaded.spec;
    let req = Requirements::from_spec(spec);
    let policy = Policy::for_optimize(spec.preferences.optimize);
    let snap = Snapshot::for_plan(fleet, health, demand, &req);
    let decision = place(&req, &snap, &policy);
    if json {
        let name = spec.name.as_str();
        outln!("{}", canopy::text::json_with_times(&PlanReport { spec: name, decision: &decision })?);
    } else {
        print_human(&spec.name, &decision, &snap, &req);
    }
    Ok(match decision {
        Decision::Placed(_) => ExitCode::SUCCESS,
        Decision::Unschedulable(_) => ExitCode::from(super::EXIT_UNSCHEDULABLE),
    })
}

fn print_human(name: &str, decision: &Decision, snap: &Snapshot, req: &Requirements) {
    match decision {
        Decision::Placed(p) => {
            let c = &p.candidates[0];
            let nodes = if c.gang.is_empty() {
                format!("node {}", c.node)
            } else {
                format!("a gang of {} ({}): {}", c.gang.len(), req.topology, c.node_names().join(", "))
            };
            let per_hour = if c.gang.is_empty() { "/h" } else { "/h for the gang" };
            outln!(
                "{name}: {} on {} ({}), {nodes}, ${:.2}{per_hour}, est. {}, starts in ~{}s",
                c.pool,
                c.region,
                c.accelerator,
                c.hourly_usd,
                c.est_cost_usd,
                c.startup_s
            );
            if let Some(g) = c.gpu_node {
                outln!("{g}.");
            }
            outln!();
            let gang = p.candidates.iter().any(|c| !c.gang.is_empty());
            let per_work = p.candidates.iter().any(|c| c.relative_speed != 1.0);
            let mut header = vec![
                "#",
                if gang { "POOL (NODES)" } else { "POOL" },
                "REGION",
                "ACCELERATOR",
                "$/H",
                "EST. COST",
                "STARTUP",
                "SCORE",
                "WHY",
            ];
            if per_work {
                header.insert(5, "$/V100-H");
            }
            let mut t = new_table(&header);
            for (i, c) in p.candidates.iter().enumerate() {
                let mut parts: Vec<_> = c.breakdown.iter().filter(|f| f.weight > 0.0).collect();
                parts.sort_by(|a, b| b.contribution.total_cmp(&a.contribution));
                let mut why: Vec<String> =
                    parts.iter().take(4).map(|f| format!("{} {:.2}", f.factor, f.raw)).collect();
                if let Some(g) = c.gpu_node {
                    why.insert(0, g.short().to_string());
                }
                let pool = if c.gang.is_empty() {
                    c.pool.clone()
                } else {
                    format!("{} ({})", c.pool, c.node_names().join(", "))
                };
                let mut row = vec![
                    (i + 1).to_string(),
                    pool,
                    c.region.clone(),
                    c.accelerator.clone(),
                    usd(c.hourly_usd),
                    c.est_cost_usd.to_string(),
                    format!("{}s", c.startup_s),
                    format!("{:.1}", c.score),
                    why.join(", "),
                ];
                if per_work {
                    row.insert(5, usd(c.priced_hourly()));
                }
                t.add_row(row);
            }
            outln!("{t}");
            if per_work {
                outln!();
                outln!(
                    "Cost compares $/V100-H: the price per hour over the GPUs' training throughput relative to a V100 (a fleet may state it: accelerator.throughput)."
                );
            }
            let k = &p.considered;
            if p.candidates.iter().any(|c| c.gpu_node == Some(GpuNode::KeptForGpuWork)) {
                outln!();
                outln!(
                    "GPU nodes rank after every CPU-only node that fits, whatever their score: work without GPUs would block their GPUs."
                );
            }
            outln!();
            outln!(
                "{} of {} pools feasible ({} nodes in the fleet); the rest are the fallback order.{}",
                k.feasible_pools,
                k.total_pools,
                k.total_nodes,
                if gang { " $/H is each gang's total." } else { "" }
            );
            if !k.ruled_out.is_empty() {
                outln!("Ruled out:");
                for r in &k.ruled_out {
                    outln!("  {}", r.describe(snap, req));
                }
            }
        }
        Decision::Unschedulable(ex) => {
            outln!("{name}: nothing fits.");
            outln!("{ex}");
        }
    }
}
