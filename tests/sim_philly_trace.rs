//! `canopy sim` on two weeks of Microsoft's Philly trace as the Pollux
//! artifact publishes it (`assets/traces/pollux_philly_2017-11-06_14d.csv`,
//! docs/sim-philly.md) through the real binary: the file is recognised by
//! its header, every job is read with its wall-clock submit time made
//! relative, and every job runs on the demo fleet, the 16- and 32-GPU ones
//! as gangs (no node of the demo fleet has more than 8 GPUs).

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
const TRACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/traces/pollux_philly_2017-11-06_14d.csv");

fn sim(args: &[&str]) -> String {
    let out = Command::new(BIN).arg("sim").args(["--trace", TRACE]).args(args).output().expect("runs canopy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "canopy sim failed: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_whole_slice_runs_gangs_included() {
    let text = std::fs::read_to_string(TRACE).expect("trace");
    assert!(text.starts_with("timestamp,duration,num_gpus,gpu_time,cluster\n"));
    let rows: Vec<Vec<&str>> = text.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 12_260);
    let one_gpu = rows.iter().filter(|r| r[2] == "1").count();
    assert_eq!(one_gpu, 11_085, "the slice's one-GPU jobs");
    let gangs = rows.iter().filter(|r| r[2] == "16" || r[2] == "32").count();
    assert_eq!(gangs, 53, "the slice's 16- and 32-GPU jobs");

    let v: serde_json::Value = serde_json::from_str(&sim(&["--policy", "canopy", "--json"])).expect("json");
    assert_eq!(v["jobs"], 12_260);
    let p = &v["policies"][0];
    assert_eq!(p["policy"], "canopy");
    assert_eq!(p["workloads"], 12_260);
    // Every job ran, the gangs too: on the demo fleet only as 2 × 8 and 4 × 8.
    assert_eq!(p["never_ran"], 0, "{p}");
    assert_eq!(p["succeeded"].as_u64().unwrap() + p["failed"].as_u64().unwrap(), 12_260, "{p}");
}

#[test]
fn a_prefix_prints_the_comparison_table() {
    let md = sim(&["--limit", "400", "--policy", "canopy,cheapest-first"]);
    assert!(md.starts_with("400 jobs from "), "{md}");
    assert!(
        md.contains("pollux_philly_2017-11-06_14d.csv on the demo fleet (77 nodes, 304 GPUs), seed 0"),
        "{md}"
    );
    assert!(md.contains("\n| canopy | ") && md.contains("\n| cheapest-first | "), "{md}");
    assert!(md.contains("canopy vs cheapest-first: GPU-h wasted ×"), "{md}");
}
