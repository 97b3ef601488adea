//! `canopy sim` with tenants: the fleet file's `[[tenant]]` and
//! `[[flavor]]` tables and a trace's `tenant` column replay sharing
//! through the engine core. An owner whose capacity is borrowed gets it
//! back within its promise (and waits for the borrower's work to end
//! without a tenancy); the per-tenant rows add up to the run's totals.

use canopy::engine::core::PlacementPolicy;
use canopy::fleet::load;
use canopy::sim::{self, FaultModel, Format, Input, NoSink, PolicyReport};

/// One provider, `lab`, of two 4-GPU nodes, owned by team-a; team-b owns
/// nothing and borrows.
const FLEET: &str = r#"
[[providers]]
name = "lab"
kind = "slurm"

[[providers.pools]]
name = "a100"
region = "eu"
accelerator = { vendor = "nvidia", model = "A100-SXM4-80GB", family = "ampere", compute_capability = "8.0", memory_gb = 80 }
gpus_per_node = 4
cpu_cores = 64
memory_gb = 512
price_per_hour = 8.0
startup = "30s"
nodes = 2

[[flavor]]
name = "lab"
providers = ["lab"]

[[tenant]]
name = "team-a"
cohort = "shared"
owns = ["lab"]
max_reclaim_delay = "10m"
[tenant.quota.lab]
gpus = 8

[[tenant]]
name = "team-b"
cohort = "shared"
"#;

/// team-b takes the whole lab for ten hours; an hour later team-a, the
/// owner, wants half of it for an hour.
const TRACE: &str = "submit_s,duration_s,gpus,tenant,outcome
0,36000,4,team-b,ok
0,36000,4,team-b,ok
3600,3600,4,team-a,ok
";

fn run(with_tenancy: bool) -> PolicyReport {
    run_on(FLEET, with_tenancy)
}

fn run_on(fleet_text: &str, with_tenancy: bool) -> PolicyReport {
    let fleet = load::parse(fleet_text, "lab.toml").expect("fleet");
    let tenancy = load::parse_tenancy(fleet_text, "lab.toml").expect("tenancy");
    let mut jobs = sim::trace::parse(Format::Csv, TRACE, "shared.csv").expect("trace");
    sim::tenants::assign(&mut jobs, &tenancy).expect("tenants");
    let faults = FaultModel::none();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "lab",
        trace_name: "shared.csv",
        tenancy: with_tenancy.then_some(&tenancy),
    };
    let report = sim::simulate(&input, &mut NoSink).expect("runs");
    report.policies.into_iter().next().expect("one policy")
}

fn row<'a>(p: &'a PolicyReport, tenant: &str) -> &'a sim::metrics::TenantReport {
    p.tenants
        .iter()
        .find(|t| t.tenant == tenant)
        .unwrap_or_else(|| panic!("no row for {tenant}: {:?}", p.tenants))
}

#[test]
fn an_owner_gets_its_borrowed_capacity_back_within_its_promise() {
    let p = run(true);
    let a = row(&p, "team-a");
    assert_eq!(a.reclaims, 1, "{a:?}");
    assert_eq!(a.promise_s, Some(600.0));
    assert!(a.reclaim_max_s <= 600.0, "reclaimed in {}s, promised 600s", a.reclaim_max_s);
    assert_eq!(a.reclaims_within_pct, 100.0);
    // It waited for its capacity no longer than the promise.
    assert!(a.queue_p99_h * 3600.0 <= 600.0, "team-a queued {}h", a.queue_p99_h);
    assert!(a.refused_nominal_max_s <= 600.0, "refused its quota for {}s", a.refused_nominal_max_s);
    // The borrower gave one attempt back, and still finished its work.
    let b = row(&p, "team-b");
    assert_eq!(b.reclaimed_attempts, 1, "{b:?}");
    assert_eq!(b.reclaims, 0);
    assert_eq!(p.failures_by_class.get("reclaimed"), Some(&1), "{:?}", p.failures_by_class);
    assert_eq!(p.succeeded, 3, "every job completes: {p:?}");
}

#[test]
fn without_a_tenancy_the_owner_waits_for_the_borrowed_work_to_end() {
    let p = run(false);
    let a = row(&p, "team-a");
    assert_eq!(a.reclaims, 0);
    assert_eq!(a.promise_s, None);
    // team-b's ten V100-hours take about 4.6 hours on the A100s.
    assert!(a.queue_p50_h >= 2.0, "team-a queued only {}h", a.queue_p50_h);
    assert_eq!(p.failures_by_class.get("reclaimed"), None);
}

#[test]
fn a_nominal_quota_no_owner_takes_back_is_refused_while_it_is_borrowed() {
    // The same quotas, but nobody owns the lab: nothing reclaims for
    // team-a, which waits for team-b's borrowed work to end, and the
    // report says how long it was refused its nominal quota.
    let p = run_on(&FLEET.replace("owns = [\"lab\"]\n", ""), true);
    let a = row(&p, "team-a");
    assert_eq!(a.reclaims, 0);
    assert!(a.refused_nominal_max_s >= 2.0 * 3600.0, "refused only {}s", a.refused_nominal_max_s);
    assert!((a.refused_nominal_max_s - a.queue_p50_h * 3600.0).abs() < 120.0, "{a:?}");
}

#[test]
fn the_per_tenant_rows_add_up_to_the_run() {
    for with in [true, false] {
        let p = run(with);
        let names: Vec<&str> = p.tenants.iter().map(|t| t.tenant.as_str()).collect();
        assert_eq!(names, ["team-a", "team-b"]);
        let sum = |f: fn(&sim::metrics::TenantReport) -> f64| p.tenants.iter().map(f).sum::<f64>();
        assert_eq!(p.tenants.iter().map(|t| t.workloads).sum::<usize>(), p.workloads);
        assert_eq!(p.tenants.iter().map(|t| t.succeeded).sum::<usize>(), p.succeeded);
        assert!((sum(|t| t.completed_gpu_h) - p.useful_gpu_h).abs() < 1e-6, "{p:?}");
        assert!((sum(|t| t.used_gpu_h) - p.used_gpu_h).abs() < 1e-6, "{p:?}");
        // Completed work is the trace's: 2 × 4 GPUs × 10 h + 4 GPUs × 1 h.
        assert!((p.useful_gpu_h - 84.0).abs() < 1e-6, "{}", p.useful_gpu_h);
    }
}

#[test]
fn the_report_shows_a_row_per_tenant_and_the_json_carries_them() {
    let fleet = load::parse(FLEET, "lab.toml").expect("fleet");
    let tenancy = load::parse_tenancy(FLEET, "lab.toml").expect("tenancy");
    let mut jobs = sim::trace::parse(Format::Csv, TRACE, "shared.csv").expect("trace");
    sim::tenants::assign(&mut jobs, &tenancy).expect("tenants");
    let faults = FaultModel::none();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "lab",
        trace_name: "shared.csv",
        tenancy: Some(&tenancy),
    };
    let report = sim::simulate(&input, &mut NoSink).expect("runs");
    let md = report.to_markdown();
    assert!(md.contains("canopy per tenant:"), "{md}");
    assert!(md.lines().any(|l| l.starts_with("| team-a | 1 | 1 |") && l.contains("| 10m |")), "{md}");
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).expect("json");
    assert_eq!(v["policies"][0]["tenants"][1]["tenant"], "team-b");
}

#[test]
fn fleet_file_tenancy_mistakes_and_the_demo_with_tenants() {
    let bad = format!("{FLEET}[tenant.quota.nowhere]\ngpus = 1\n");
    let e = load::parse_tenancy(&bad, "lab.toml").unwrap_err().to_string();
    assert!(e.starts_with("lab.toml: [[tenant]] team-b: quota names flavor \"nowhere\""), "{e}");
    // The shipped example is the demo fleet, unchanged, plus its tenancy.
    let shared = include_str!("../assets/fleets/demo-tenants.toml");
    assert!(shared.starts_with(load::DEMO_FLEET));
    let t = load::parse_tenancy(shared, "demo-tenants.toml").expect("tenancy");
    assert_eq!(t.tenants.len(), 4);
    assert_eq!(load::parse(shared, "demo-tenants.toml").expect("fleet"), load::demo().expect("demo"));
}
