//! GPU work priced per unit of work, as an operator meets it through the
//! real binary: `canopy fleet --wide` shows each GPU pool's throughput
//! relative to a V100 and names the pools priced as a V100 for want of a
//! figure; `canopy plan` ranks a training job by price per V100-hour and
//! an inference job by price per hour; a fleet's bad figure is refused
//! with the pool named.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

/// Three one-node pools of one GPU each: an H100 at $2.00/h (the table
/// says ×4.5), an unknown `X-9000` at $1.00/h, and an unknown `Y-1` at
/// $1.50/h whose fleet states ×3.
const FLEET: &str = r#"
[[providers]]
name = "lab"
kind = "local"

[[providers.pools]]
name = "h100"
region = "r1"
accelerator = { vendor = "nvidia", model = "H100-SXM5", family = "hopper", compute_capability = "9.0", memory_gb = 80 }
gpus_per_node = 1
cpu_cores = 16
memory_gb = 128
disk_gb = 100
price_per_hour = 2.0
nodes = 1

[[providers.pools]]
name = "x9000"
region = "r1"
accelerator = { vendor = "nvidia", model = "X-9000", family = "hopper", compute_capability = "9.0", memory_gb = 80 }
gpus_per_node = 1
cpu_cores = 16
memory_gb = 128
disk_gb = 100
price_per_hour = 1.0
nodes = 1

[[providers.pools]]
name = "y1"
region = "r1"
accelerator = { vendor = "nvidia", model = "Y-1", family = "hopper", compute_capability = "9.0", memory_gb = 80, throughput = 3.0 }
gpus_per_node = 1
cpu_cores = 16
memory_gb = 128
disk_gb = 100
price_per_hour = 1.5
nodes = 1
"#;

fn canopy(dir: &std::path::Path, fleet: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let path = dir.join("fleet.toml");
    std::fs::write(&path, fleet).unwrap();
    let out = Command::new(BIN)
        .arg("--store")
        .arg(dir.join("home"))
        .args(args)
        .arg("--fleet")
        .arg(&path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn row<'a>(out: &'a str, pool: &str) -> Vec<&'a str> {
    let line =
        out.lines().find(|l| l.split_whitespace().nth(3) == Some(pool)).unwrap_or_else(|| panic!("{out}"));
    line.split_whitespace().collect()
}

#[test]
fn the_wide_fleet_shows_each_gpus_throughput_and_names_the_pools_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = canopy(dir.path(), FLEET, &["fleet", "--wide"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("×V100"), "{out}");
    assert!(row(&out, "h100").contains(&"4.5"), "the table's figure: {out}");
    assert!(row(&out, "y1").contains(&"3"), "the stated figure: {out}");
    assert!(row(&out, "x9000").contains(&"1?"), "neither knows it: {out}");
    assert!(out.contains("priced as a V100") && out.contains("lab/x9000"), "{out}");
    assert!(!out.contains("lab/h100 (") && !out.contains("lab/y1 ("), "only the unknown one is named: {out}");

    let (_, json, _) = canopy(dir.path(), FLEET, &["fleet", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let speed = |pool: &str| {
        v.as_array().unwrap().iter().find(|p| p["pool"] == pool).unwrap()["relative_speed"].clone()
    };
    assert_eq!(
        (speed("h100"), speed("y1"), speed("x9000")),
        (4.5.into(), 3.0.into(), serde_json::Value::Null)
    );
}

fn spec(kind: &str) -> String {
    format!(
        "name = \"job\"\nkind = \"{kind}\"\n[runtime]\ncommand = [\"python\", \"run.py\"]\n[resources]\ngpus = 1\n"
    )
}

#[test]
fn training_goes_where_work_is_cheapest_and_inference_where_hours_are() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.toml");
    let plan = |kind: &str| {
        std::fs::write(&path, spec(kind)).unwrap();
        let (code, out, err) = canopy(dir.path(), FLEET, &["plan", path.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{err}");
        out
    };
    // $2.00 / 4.5 = $0.44 per V100-hour beats $1.50 / 3 = $0.50 and the
    // unknown card's $1.00 / 1.
    let train = plan("training");
    assert!(train.starts_with("job: lab/h100"), "{train}");
    assert!(train.contains("$/V100-H") && train.contains("$0.44"), "{train}");
    // A service pays by the hour: the $1.00 card, and no per-work column.
    let serve = plan("inference");
    assert!(serve.starts_with("job: lab/x9000"), "{serve}");
    assert!(!serve.contains("$/V100-H"), "{serve}");
}

#[test]
fn a_throughput_that_is_not_a_positive_number_is_refused_with_its_pool() {
    let dir = tempfile::tempdir().unwrap();
    let bad = FLEET.replace("throughput = 3.0", "throughput = 0.0");
    let (code, _, err) = canopy(dir.path(), &bad, &["fleet"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("lab/y1") && err.contains("throughput must be a positive number"), "{err}");
}
