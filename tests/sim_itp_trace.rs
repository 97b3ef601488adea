//! `canopy sim` on the Microsoft ITP trace (`assets/traces/elasticflow_itp_cluster08.csv`,
//! docs/sim-itp.md) through the real binary: the file is recognised by its
//! header, every job is read, and every job runs on the demo fleet, the
//! 32-GPU ones as gangs (no node of the demo fleet has more than 8 GPUs).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/traces/elasticflow_itp_cluster08.csv");

fn sim(args: &[&str]) -> String {
    let out = Command::new(BIN).arg("sim").args(["--trace", TRACE]).args(args).output().expect("runs canopy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "canopy sim failed: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_whole_trace_runs_gangs_included() {
    let text = std::fs::read_to_string(TRACE).expect("trace");
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 13_047);
    let gangs = rows.iter().filter(|r| r[3] == "32").count();
    assert_eq!(gangs, 9, "the trace's 32-GPU jobs");

    let v: serde_json::Value = serde_json::from_str(&sim(&["--policy", "canopy", "--json"])).expect("json");
    assert_eq!(v["jobs"], 13_047);
    let p = &v["policies"][0];
    assert_eq!(p["policy"], "canopy");
    assert_eq!(p["workloads"], 13_047);
    // Every job ran, the 32-GPU ones too: on the demo fleet only as 4 × 8.
    assert_eq!(p["never_ran"], 0, "{p}");
    assert_eq!(p["succeeded"].as_u64().unwrap() + p["failed"].as_u64().unwrap(), 13_047, "{p}");
    // The work completed is most of the trace's 67,100 GPU-hours (a quarter
    // of the jobs fail on their own, by the fault model).
    let useful = p["useful_gpu_h"].as_f64().unwrap();
    assert!((30_000.0..67_100.0).contains(&useful), "{useful}");
}

#[test]
fn a_prefix_prints_the_comparison_table() {
    let md = sim(&["--limit", "300", "--policy", "canopy,cheapest-first"]);
    assert!(md.starts_with("300 jobs from "), "{md}");
    assert!(
        md.contains("elasticflow_itp_cluster08.csv on the demo fleet (77 nodes, 304 GPUs), seed 0"),
        "{md}"
    );
    assert!(md.contains("\n| canopy | ") && md.contains("\n| cheapest-first | "), "{md}");
    assert!(md.contains("canopy vs cheapest-first: GPU-h wasted ×"), "{md}");
}

#[test]
fn a_fault_model_file_is_read_and_a_bad_share_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good.toml"), dir.path().join("bad.toml"));
    std::fs::write(&good, "saves_on_sigterm = 1.0\npreempt_notice_s = 30\n").unwrap();
    std::fs::write(&bad, "saves_on_sigterm = 2.0\n").unwrap();
    let md = sim(&["--limit", "200", "--policy", "canopy", "--faults", good.to_str().unwrap()]);
    assert!(md.contains("\n| canopy | "), "{md}");
    let out = Command::new(BIN)
        .arg("sim")
        .args(["--trace", TRACE, "--limit", "10", "--faults", bad.to_str().unwrap()])
        .output()
        .expect("runs canopy");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}: saves_on_sigterm is a share and must be ≤ 1, not 2", bad.display())),
        "{stderr}"
    );
}
