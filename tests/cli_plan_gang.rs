//! `canopy plan` for a gang on the demo fleet, as an operator reads it:
//! the nodes of each candidate set and the gang's hourly total, or how
//! close the fleet came when no set fits.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

fn plan(spec: &str, json: bool) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gang.toml");
    std::fs::write(&path, spec).unwrap();
    let mut cmd = Command::new(BIN);
    cmd.arg("--store").arg(dir.path().join("home")).arg("plan").arg(&path).env("NO_COLOR", "1");
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn gang(fabric: &str, topology: &str) -> String {
    format!(
        "name = \"pretrain\"\n[runtime]\ncommand = [\"torchrun\", \"train.py\"]\n\
         [resources]\nnodes = 2\ngpus = 8\nfabric = {fabric:?}\n[resources.accelerator]\nmodel = \"H100\"\n\
         [constraints]\ntopology = {topology:?}\n"
    )
}

#[test]
fn a_gang_plan_names_both_nodes_behind_one_switch_and_the_gangs_price() {
    let (code, out) = plan(&gang("roce", "same-switch"), false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("a gang of 2 (same-switch)"), "{out}");
    assert!(out.contains("cloud-a-h100x8-ondemand-00, cloud-a-h100x8-ondemand-01"), "{out}");
    assert!(out.contains("$63.00/h for the gang"), "two nodes at $31.50/h: {out}");
    let (_, json) = plan(&gang("roce", "same-switch"), true);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let first = &v["candidates"][0];
    assert_eq!(first["gang"].as_array().map(Vec::len), Some(2), "{json}");
    assert_eq!(first["hourly_usd"].as_f64(), Some(63.0), "{json}");
}

#[test]
fn when_no_set_fits_the_plan_says_how_close_the_fleet_came() {
    let (code, out) = plan(&gang("infiniband", "same-switch"), false);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("0/") && out.contains("nodes are available for a gang of 2"), "{out}");
    assert!(out.contains("only 1 node with 8 free GPUs in any same-switch domain"), "{out}");
    assert!(out.contains("accelerator model is not H100"), "{out}");
    // The same request over one pool fits: fra-h100-03 and -05.
    let (code, out) = plan(&gang("infiniband", "same-pool"), false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("fra-h100-03") && out.contains("fra-h100-05"), "{out}");
}
