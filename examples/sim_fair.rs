//! Fair share against first-come on the same luck (issue 27's judgement):
//! a trace replayed with tenants, once with `[fair_share]` and once
//! without, on every seed, through the library code `canopy sim` runs.
//!
//! ```sh
//! # Philly's virtual clusters (its teams) as tenants, on the demo fleet:
//! cargo run --release --example sim_fair -- --trace assets/traces/pollux_philly_2017-11-06_14d.csv \
//!     --fleet assets/fleets/demo.toml --tenants-from vc
//! # Gavel with the demo fleet's four tenants, round-robin by arrival, 6x as fast:
//! cargo run --release --example sim_fair -- --arrivals-x 6
//! sim_fair [--trace FILE] [--fleet FLEET.toml] [--seeds 0-9] [--half-life 1d] [--arrivals-x N]
//!     [--tenants-from vc] [--threads N]
//! ```
//!
//! `--tenants-from vc` makes each job's tenant its virtual cluster (the
//! Philly CSV's `cluster` column, a job named `vc-<id>`), and the tenancy
//! one tenant per cluster, weight 1, in one cohort, each with an equal
//! nominal share of the fleet's GPUs, one flavor over every pool (no
//! owners): fair share is then the only difference between the two runs.
//! Otherwise the fleet file's tenancy is used, jobs without a tenant
//! going round-robin by arrival.
//!
//! Prints, in Markdown, per seed: Jain's index (mean and lowest sample)
//! with fair share and first-come, completed GPU-hours of both, and the
//! tenant whose p99 queue time grew most; per tenant over the seeds:
//! share ÷ fair share and queue p99 of both; then the verdict against
//! issue 27's targets.

use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Input, NoSink, PolicyReport};
use canopy::tenant::fair::FairShare;
use canopy::tenant::{Tenancy, TenancyDoc};
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const USAGE: &str = "usage: sim_fair [--trace FILE] [--fleet FLEET.toml] [--seeds 0-9|3|0,4,7] [--half-life 1d] [--preempt-after 30m] [--preempt-gaps] \
                     [--arrivals-x N] [--tenants-from vc] [--threads N]";

struct Args {
    trace: String,
    fleet: String,
    seeds: Vec<u64>,
    half_life: Duration,
    arrivals_x: f64,
    from_vc: bool,
    threads: usize,
    /// `--preempt-after D`: fair share also preempts borrowed work that
    /// has run at least D.
    preempt_after: Option<Duration>,
    /// `--preempt-gaps`: with `--preempt-after`, close every tenant's gap
    /// to its demand-aware fair share in one pass.
    preempt_gaps: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        trace: "assets/traces/gavel_msr_seed0_ee9e8c.trace".into(),
        fleet: "assets/fleets/demo-tenants.toml".into(),
        seeds: (0..10).collect(),
        half_life: Duration::from_secs(24 * 3600),
        arrivals_x: 1.0,
        from_vc: false,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        preempt_after: None,
        preempt_gaps: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--trace" => a.trace = value()?,
            "--fleet" => a.fleet = value()?,
            "--half-life" => {
                let v = value()?;
                a.half_life = humantime::parse_duration(&v).map_err(|e| format!("--half-life {v:?}: {e}"))?;
            }
            "--preempt-after" => {
                let v = value()?;
                a.preempt_after =
                    Some(humantime::parse_duration(&v).map_err(|e| format!("--preempt-after {v:?}: {e}"))?);
            }
            "--preempt-gaps" => a.preempt_gaps = true,
            "--arrivals-x" => a.arrivals_x = canopy::sim::seeds::parse_positive("--arrivals-x", &value()?)?,
            "--tenants-from" => match value()?.as_str() {
                "vc" => a.from_vc = true,
                v => return Err(format!("--tenants-from {v:?}: only \"vc\" is known\n{USAGE}")),
            },
            "--threads" => {
                let v = value()?;
                a.threads = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| format!("--threads {v:?}"))?;
            }
            "--seeds" => a.seeds = canopy::sim::seeds::parse_seeds(&value()?)?,
            _ => return Err(format!("unknown argument {flag:?}\n{USAGE}")),
        }
    }
    if a.preempt_gaps && a.preempt_after.is_none() {
        return Err(format!("--preempt-gaps needs --preempt-after\n{USAGE}"));
    }
    Ok(a)
}

fn main() {
    if let Err(e) = run() {
        eprintln!("sim_fair: {e}");
        std::process::exit(2);
    }
}

fn hours(h: f64) -> String {
    if h < 1.0 { format!("{:.0}m", h * 60.0) } else { format!("{h:.1}h") }
}

/// One tenant per virtual cluster, equal weights and nominal shares, one
/// cohort, one flavor over every pool.
fn vc_tenancy(jobs: &mut [sim::Job], total_gpus: u32) -> Result<Tenancy, String> {
    let mut vcs: Vec<String> = Vec::new();
    for j in jobs.iter_mut() {
        let vc =
            j.name.strip_prefix("vc-").ok_or_else(|| format!("job {:?} names no virtual cluster", j.name))?;
        if !vcs.iter().any(|v| v == vc) {
            vcs.push(vc.to_string());
        }
        j.tenant = Some(format!("vc-{vc}").into());
    }
    let nominal = total_gpus / vcs.len().max(1) as u32;
    let mut doc = String::from("[[flavor]]\nname = \"all\"\n");
    for vc in &vcs {
        let _ = write!(
            doc,
            "[[tenant]]\nname = \"vc-{vc}\"\ncohort = \"philly\"\n[tenant.quota.all]\ngpus = {nominal}\n"
        );
    }
    Ok(TenancyDoc::parse(&doc, false).map_err(|e| e.to_string())?.1)
}

fn run() -> Result<(), String> {
    let a = parse_args()?;
    let fleet_text = std::fs::read_to_string(&a.fleet).map_err(|e| format!("{}: {e}", a.fleet))?;
    let fleet = load::parse(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(&a.trace).map_err(|e| format!("{}: {e}", a.trace))?;
    let mut jobs =
        sim::trace::parse(sim::trace::detect(&a.trace, &text), &text, &a.trace).map_err(|e| e.to_string())?;
    for j in &mut jobs {
        j.submit_s /= a.arrivals_x;
    }
    let first_come = if a.from_vc {
        let gpus: u32 = fleet.nodes.iter().map(|n| fleet.pool(n.pool).shape.gpus_per_node).sum();
        vc_tenancy(&mut jobs, gpus)?
    } else {
        let t = load::parse_tenancy(&fleet_text, &a.fleet).map_err(|e| e.to_string())?;
        if t.is_empty() {
            return Err(format!(
                "{} has no [[tenant]] tables; give --tenants-from vc or a fleet with tenants",
                a.fleet
            ));
        }
        sim::tenants::assign(&mut jobs, &t)?;
        Tenancy { fair_share: None, ..t }
    };
    let fair = Tenancy {
        fair_share: Some(FairShare {
            half_life: a.half_life,
            preempt_after: a.preempt_after,
            preempt_gaps: a.preempt_gaps,
        }),
        ..first_come.clone()
    };
    let faults = FaultModel::default();
    // Every (seed, fair?) run, on `threads` threads.
    let work: Vec<(u64, bool)> = a.seeds.iter().flat_map(|&s| [(s, true), (s, false)]).collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(u64, bool, PolicyReport)>> = Mutex::new(Vec::new());
    let failed: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..a.threads.min(work.len()).max(1) {
            scope.spawn(|| {
                while let Some(&(seed, with_fair)) = work.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let one = || -> Result<PolicyReport, String> {
                        let policy = sim::parse_policy("canopy", seed)?;
                        let input = Input {
                            fleet: &fleet,
                            jobs: &jobs,
                            faults: &faults,
                            seed,
                            policies: &[policy],
                            optimize: Default::default(),
                            fleet_name: &a.fleet,
                            trace_name: &a.trace,
                            tenancy: Some(if with_fair { &fair } else { &first_come }),
                        };
                        let r = sim::simulate(&input, &mut NoSink)?;
                        r.policies.into_iter().next().ok_or_else(|| "no run".to_string())
                    };
                    match one() {
                        Ok(r) => results.lock().unwrap_or_else(|e| e.into_inner()).push((seed, with_fair, r)),
                        Err(e) => *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e),
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let get = |seed: u64, f: bool| results.iter().find(|r| r.0 == seed && r.1 == f).map(|r| &r.2);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} jobs from {}{} on {} ({} nodes), policy canopy, {} tenants ({}), half-life {}\n",
        jobs.len(),
        a.trace,
        if a.arrivals_x == 1.0 { String::new() } else { format!(", arrivals ×{}", a.arrivals_x) },
        a.fleet,
        fleet.nodes.len(),
        fair.tenants.len(),
        if a.from_vc { "one per virtual cluster" } else { "the fleet file's, round-robin by arrival" },
        humantime::format_duration(a.half_life)
    );
    out.push_str("| seed | Jain, fair share (mean / lowest) | Jain, first-come | demand-aware Jain, fair share (mean / lowest) | demand-aware, first-come | samples (a tenant capped) | completed GPU-h, fair / first-come | ratio | attempts stopped for others, fair / first-come | queue p99 grew most (tenant: fair / first-come) |\n");
    out.push_str("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    let (mut worst_growth, mut worst_ratio, mut jains) = (0.0f64, 1.0f64, Vec::new());
    let mut demand_jains: Vec<(f64, f64)> = Vec::new();
    // The first index over samples where some tenant was capped, and where
    // none was: (sum of means × samples, samples), fair share then first-come.
    let mut split = [[(0.0f64, 0usize); 2]; 2];
    let mut totals = (0.0, 0.0);
    for &seed in &a.seeds {
        let (Some(f), Some(c)) = (get(seed, true), get(seed, false)) else { continue };
        let (fj, cj) = (f.fairness.clone().unwrap_or_default(), c.fairness.clone().unwrap_or_default());
        jains.push(fj.jain_mean);
        let ratio = f.useful_gpu_h / c.useful_gpu_h.max(1e-9);
        totals.0 += f.useful_gpu_h;
        totals.1 += c.useful_gpu_h;
        if (ratio - 1.0).abs() > (worst_ratio - 1.0).abs() {
            worst_ratio = ratio;
        }
        let mut grew = (0.0f64, String::new());
        for t in &f.tenants {
            let Some(ct) = c.tenants.iter().find(|x| x.tenant == t.tenant) else { continue };
            // Growth counts where first-come's p99 is at least 10 minutes:
            // below that, doubling a few minutes is noise.
            let g = t.queue_p99_h / ct.queue_p99_h.max(1.0 / 6.0);
            if g > grew.0 {
                grew = (g, format!("{}: {} / {}", t.tenant, hours(t.queue_p99_h), hours(ct.queue_p99_h)));
            }
        }
        worst_growth = worst_growth.max(grew.0);
        demand_jains.push((fj.demand_jain_mean, cj.demand_jain_mean));
        for (i, x) in [&fj, &cj].into_iter().enumerate() {
            let capped = x.samples_capped;
            split[i][0].0 += x.jain_mean_capped * capped as f64;
            split[i][0].1 += capped;
            split[i][1].0 += x.jain_mean_uncapped * (x.samples - capped) as f64;
            split[i][1].1 += x.samples - capped;
        }
        let _ = writeln!(
            out,
            "| {seed} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} / {:.3} | {} ({}) | {:.0} / {:.0} | {ratio:.4} | {} / {} | {} (×{:.2}) |",
            fj.jain_mean,
            fj.jain_min,
            cj.jain_mean,
            cj.jain_min,
            fj.demand_jain_mean,
            fj.demand_jain_min,
            cj.demand_jain_mean,
            cj.demand_jain_min,
            fj.samples,
            fj.samples_capped,
            f.useful_gpu_h,
            c.useful_gpu_h,
            f.tenants.iter().map(|t| t.reclaimed_attempts).sum::<usize>(),
            c.tenants.iter().map(|t| t.reclaimed_attempts).sum::<usize>(),
            grew.1,
            grew.0
        );
    }
    let _ = writeln!(
        out,
        "\nPer tenant, seeds {}–{}: share ÷ fair share while backlogged (mean of seeds), queue p99 (worst seed)\n",
        a.seeds.first().copied().unwrap_or(0),
        a.seeds.last().copied().unwrap_or(0)
    );
    out.push_str("| tenant | jobs | share ÷ fair, fair share | share ÷ fair, first-come | held ÷ entitled, fair share | held ÷ entitled, first-come | backlogged samples, fair share (capped; holding no GPU) | queue p99, fair / first-come |\n");
    out.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for t in &fair.tenants {
        let mean_of =
            |f: bool, which: fn(&sim::fairness::Fairness) -> &std::collections::BTreeMap<String, f64>| {
                let v: Vec<f64> = a
                    .seeds
                    .iter()
                    .filter_map(|&s| which(get(s, f)?.fairness.as_ref()?).get(&t.name).copied())
                    .collect();
                if v.is_empty() {
                    "—".to_string()
                } else {
                    format!("{:.2}", v.iter().sum::<f64>() / v.len() as f64)
                }
            };
        let ratio = |f: bool| mean_of(f, |x| &x.share_over_fair);
        let entitled = |f: bool| mean_of(f, |x| &x.held_over_entitled);
        let count =
            |which: fn(&sim::fairness::Fairness) -> &std::collections::BTreeMap<String, usize>| -> usize {
                a.seeds
                    .iter()
                    .filter_map(|&s| which(get(s, true)?.fairness.as_ref()?).get(&t.name).copied())
                    .sum()
            };
        let (backlogged, capped) = (count(|x| &x.backlogged), count(|x| &x.capped));
        let none = count(|x| &x.held_none);
        let p99 = |f: bool| {
            a.seeds
                .iter()
                .filter_map(|&s| {
                    get(s, f)?.tenants.iter().find(|x| x.tenant == t.name).map(|x| x.queue_p99_h)
                })
                .fold(0.0, f64::max)
        };
        let n = a
            .seeds
            .first()
            .and_then(|&s| get(s, true)?.tenants.iter().find(|x| x.tenant == t.name))
            .map_or(0, |x| x.workloads);
        let _ = writeln!(
            out,
            "| {} | {n} | {} | {} | {} | {} | {backlogged} ({capped}; {none}) | {} / {} |",
            t.name,
            ratio(true),
            ratio(false),
            entitled(true),
            entitled(false),
            hours(p99(true)),
            hours(p99(false))
        );
    }
    let mean_jain = jains.iter().sum::<f64>() / jains.len().max(1) as f64;
    let yes = |b: bool| if b { "met" } else { "**missed**" };
    let _ = writeln!(out, "\nAgainst the targets (issue 27):\n");
    let _ = writeln!(
        out,
        "- Jain's index with fair share: mean of seeds {mean_jain:.3}, lowest seed {:.3} (≥ 0.9): {}",
        jains.iter().copied().fold(1.0, f64::min),
        yes(jains.iter().all(|j| *j >= 0.9))
    );
    let dmean = |i: usize| {
        demand_jains.iter().map(|d| if i == 0 { d.0 } else { d.1 }).sum::<f64>()
            / demand_jains.len().max(1) as f64
    };
    let _ = writeln!(
        out,
        "- demand-aware Jain's index (weighted max-min entitlement), for comparison: fair share mean of seeds {:.3}, lowest seed {:.3}; first-come {:.3}, lowest seed {:.3}",
        dmean(0),
        demand_jains.iter().map(|d| d.0).fold(1.0, f64::min),
        dmean(1),
        demand_jains.iter().map(|d| d.1).fold(1.0, f64::min),
    );
    let none: [usize; 2] = [true, false]
        .map(|f| a.seeds.iter().filter_map(|&s| Some(get(s, f)?.fairness.as_ref()?.samples_held_none)).sum());
    let all: [usize; 2] = [true, false]
        .map(|f| a.seeds.iter().filter_map(|&s| Some(get(s, f)?.fairness.as_ref()?.samples)).sum());
    let _ = writeln!(
        out,
        "- samples in which a backlogged tenant held no GPU at all: fair share {} of {}, first-come {} of {}",
        none[0], all[0], none[1], all[1]
    );
    let sm = |x: (f64, usize)| if x.1 == 0 { "—".to_string() } else { format!("{:.3}", x.0 / x.1 as f64) };
    let _ = writeln!(
        out,
        "- the first index over samples where some backlogged tenant could not use its weighted share (demand below it): fair share {} over {} samples, first-come {} over {}; where none was capped: fair share {} over {}, first-come {} over {}",
        sm(split[0][0]),
        split[0][0].1,
        sm(split[1][0]),
        split[1][0].1,
        sm(split[0][1]),
        split[0][1].1,
        sm(split[1][1]),
        split[1][1].1,
    );
    let _ = writeln!(
        out,
        "- no tenant's p99 queue time worse than 2× its first-come figure: worst ×{worst_growth:.2}: {}",
        yes(worst_growth <= 2.0)
    );
    let _ = writeln!(
        out,
        "- completed GPU-hours, fair share / first-come: {:.4} over all seeds, furthest seed {worst_ratio:.4} (within 3 %): {}",
        totals.0 / f64::max(totals.1, 1e-9),
        yes((worst_ratio - 1.0).abs() <= 0.03)
    );
    print!("{out}");
    Ok(())
}
