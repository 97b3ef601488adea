//! The usage report against a real server over a simulated GPU market:
//! `GET /v1/usage` groups that sum to the total under every grouping, a
//! tenant's token that counts only its own tenant's work, and `canopy
//! usage --csv` whose totals equal `--json`'s to the last digit.

mod api_support;

use api_support::{Api, Who};
use canopy::providers::sim::SimConfig;
use canopy::server::ServerOptions;
use serde_json::Value;
use std::collections::BTreeSet;

const TENANTS: &str = r#"
default_tenant = "team-a"
[[flavor]]
name = "any"
[[tenant]]
name = "team-a"
cohort = "lab"
owns = ["onprem-fra"]
[tenant.quota.any]
gpus = 16
[[tenant]]
name = "team-b"
cohort = "lab"
[tenant.quota.any]
gpus = 16
"#;

const COLUMNS: [&str; 10] = [
    "attempts",
    "gpu_ms",
    "useful_gpu_ms",
    "wasted_infra_gpu_ms",
    "wasted_own_gpu_ms",
    "decision_gpu_ms",
    "idle_gpu_ms",
    "live_gpu_ms",
    "cpu_core_ms",
    "cost_micro_usd",
];

fn gpu_spec(name: &str, script: &str) -> String {
    format!(
        "name = {name:?}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ngpus = 1\ncpu_cores = 1\nmemory_gb = 4\n\n[retry]\nmax_attempts = 1\n"
    )
}

/// A server whose simulated boots take about a second, with one workload
/// of team-a that succeeds and one of team-b that fails on its own.
async fn start() -> (Api, String, String) {
    let sim = SimConfig { time_scale: 0.005, ..SimConfig::no_faults() };
    let mut api = Api::start_sim(ServerOptions::default(), TENANTS, sim).await;
    let a_sub = api.tenant_token("a-sub", "submitter", &[], "team-a").await;
    let b_sub = api.tenant_token("b-sub", "submitter", &[], "team-b").await;
    let good = api.submit_new(Who::Token(&a_sub), &gpu_spec("good", "sleep 1; echo done")).await;
    let bad =
        api.submit_new(Who::Token(&b_sub), &gpu_spec("bad", "sleep 1; echo 'ValueError' >&2; exit 3")).await;
    assert_eq!(api.wait_final(&good).await["workload"]["state"], "succeeded");
    let b = api.wait_final(&bad).await;
    assert_eq!(
        (b["workload"]["state"].as_str(), b["workload"]["class"].as_str()),
        (Some("failed"), Some("app"))
    );
    (api, good, bad)
}

fn n(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_sum_to_the_total_and_a_tenant_counts_only_its_own() {
    let (mut api, good, bad) = start().await;
    let all = api.get(Who::Owner, "/v1/usage").await.expect(200).json();
    let total = all["total"].clone();
    assert_eq!(n(&total, "attempts"), 2, "{all}");
    assert!(n(&total, "useful_gpu_ms") >= 1000, "team-a's second of work is useful: {all}");
    assert!(n(&total, "wasted_own_gpu_ms") >= 1000, "team-b's is lost to its own error: {all}");
    assert_eq!(total["lost_by_class_gpu_ms"]["app"], total["wasted_own_gpu_ms"]);
    for by in ["tenant", "owner", "provider", "pool", "accelerator", "user"] {
        let r = api.get(Who::Owner, &format!("/v1/usage?by={by}")).await.expect(200).json();
        assert_eq!(r["total"], total, "every attempt has ended: the same total by {by}");
        let groups = r["groups"].as_array().unwrap();
        for c in COLUMNS {
            assert_eq!(groups.iter().map(|g| n(g, c)).sum::<u64>(), n(&total, c), "{c} by {by}: {r}");
        }
    }
    let keys = |r: &Value| -> Vec<String> {
        r["groups"].as_array().unwrap().iter().map(|g| g["key"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(keys(&all), ["team-a", "team-b"]);

    // The counters agree with the report once the work has ended.
    let m = api.get(Who::Owner, "/metrics").await.expect(200).text;
    for (g, tenant) in all["groups"].as_array().unwrap().iter().zip(["team-a", "team-b"]) {
        for (kind, col) in
            [("useful", "useful_gpu_ms"), ("wasted_own", "wasted_own_gpu_ms"), ("idle", "idle_gpu_ms")]
        {
            let ms = n(g, col);
            let line = format!(
                "canopy_usage_gpu_seconds_total{{tenant=\"{tenant}\",kind=\"{kind}\"}} {}.{:03}\n",
                ms / 1000,
                ms % 1000
            );
            assert!(m.contains(&line), "{line} in {m}");
        }
    }

    // A tenant's viewer: its own tenant's rows only, whatever the grouping.
    let a_view = api.tenant_token("a-view", "viewer", &[], "team-a").await;
    let b_view = api.tenant_token("b-view", "viewer", &[], "team-b").await;
    let mine = api.get(Who::Token(&a_view), "/v1/usage").await.expect(200);
    assert_eq!(keys(&mine.json()), ["team-a"]);
    let mut a_row = all["groups"][0].clone();
    a_row["key"] = "total".into();
    assert_eq!(mine.json()["total"], a_row, "a's total is a's group in the admin's report");
    let by_user = api.get(Who::Token(&b_view), "/v1/usage?by=user").await.expect(200);
    assert_eq!(keys(&by_user.json()), ["b-sub"], "{}", by_user.text);
    assert!(!by_user.text.contains("a-sub") && !by_user.text.contains("team-a"), "{}", by_user.text);
    assert_eq!(by_user.json()["owners"], serde_json::json!([]), "b owns nothing");
    // …and its rows are its own attempts.
    let rows = api.get(Who::Token(&b_view), "/v1/usage?rows=true").await.expect(200).json();
    let rows = rows["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0]["attempt"].as_str(), rows[0]["tenant"].as_str()),
        (Some(&*format!("{bad}.1")), Some("team-b"))
    );

    // The cost is the journal's: the sum of every attempt's cost_usd
    // (each row rounded once to a millionth of a dollar).
    let mut journal_usd = 0.0;
    for id in [&good, &bad] {
        for a in api.workload(id).await["attempts"].as_array().unwrap() {
            journal_usd += a["cost_usd"].as_f64().unwrap();
        }
    }
    let ledger_usd = n(&total, "cost_micro_usd") as f64 / 1e6;
    assert!((ledger_usd - journal_usd).abs() <= 2e-6, "{ledger_usd} vs the journal's {journal_usd}");

    // Per day (the console's chart): the days' groups and totals sum to
    // the window's, column by column.
    let d = api.get(Who::Owner, "/v1/usage?since=2d&per_day=true").await.expect(200).json();
    let days = d["days"].as_array().unwrap();
    assert!((2..=3).contains(&days.len()), "two days back and today: {d}");
    for c in COLUMNS.iter().filter(|c| **c != "cost_micro_usd") {
        assert_eq!(days.iter().map(|x| n(&x["total"], c)).sum::<u64>(), n(&d["total"], c), "{c}: {d}");
    }
    let r = api.get(Who::Owner, "/v1/usage?per_day=true").await.expect(400);
    assert!(r.text.contains("give since"), "{}", r.text);
    // A tenant's viewer's days are its own tenant's, as its window is.
    let d = api.get(Who::Token(&b_view), "/v1/usage?since=2d&per_day=true&by=user").await.expect(200);
    assert!(!d.text.contains("team-a") && !d.text.contains("a-sub"), "{}", d.text);
    let days = d.json()["days"].as_array().unwrap().clone();
    let keys_seen: BTreeSet<String> = days
        .iter()
        .flat_map(|x| x["groups"].as_array().unwrap().iter().map(|g| g["key"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(keys_seen, BTreeSet::from(["b-sub".to_string()]), "{}", d.text);

    // Mistakes are 400s that name the parameter.
    let r = api.get(Who::Owner, "/v1/usage?by=colour").await.expect(400);
    assert!(r.text.contains("one of tenant, owner"), "{}", r.text);
    api.get(Who::Owner, "/v1/usage?since=1h&until=2h").await.expect(400);
    api.get(Who::Owner, "/v1/usage?since=yesterday").await.expect(400);
    // A window before anything ran counts nothing.
    let r = api.get(Who::Owner, "/v1/usage?until=1000").await.expect(200).json();
    assert_eq!(n(&r["total"], "attempts"), 0, "{r}");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn canopy_usage_csv_totals_equal_its_json_totals() {
    let (api, _, _) = start().await;
    let root = api.root.clone();
    let run = move |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_canopy"))
            .arg("--store")
            .arg(&root)
            .arg("usage")
            .args(args)
            .env_remove("CANOPY_SERVER")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let (json, csv, table, rows) = tokio::task::spawn_blocking(move || {
        let json = run(&["--by", "pool", "--json"]);
        (json, run(&["--by", "pool", "--csv"]), run(&["--by", "pool"]), run(&["--rows", "--csv"]))
    })
    .await
    .unwrap();
    let json: Value = serde_json::from_str(&json).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(header[..2], ["line", "pool"]);
    let total: Vec<&str> = lines.iter().find(|l| l.starts_with("total,")).unwrap().split(',').collect();
    // CSV: seconds with three decimals and dollars with six; JSON: ms and µ$.
    let exact = |s: &str, scale: u64| -> u64 {
        let (whole, frac) = s.split_once('.').unwrap();
        whole.parse::<u64>().unwrap() * scale + frac.parse::<u64>().unwrap()
    };
    let t = &json["total"];
    assert_eq!(total[2].parse::<u64>().unwrap(), n(t, "attempts"));
    for (i, k) in COLUMNS.iter().enumerate().skip(1) {
        let scale = if *k == "cost_micro_usd" { 1_000_000 } else { 1000 };
        assert_eq!(exact(total[i + 2], scale), n(t, k), "{k}: {csv}");
    }
    // The groups' lines sum to the total line, column by column.
    let groups: Vec<Vec<&str>> =
        lines.iter().filter(|l| l.starts_with("group,")).map(|l| l.split(',').collect()).collect();
    assert_eq!(groups.len(), json["groups"].as_array().unwrap().len());
    for i in 3..total.len() {
        let scale = if i == total.len() - 1 { 1_000_000 } else { 1000 };
        assert_eq!(groups.iter().map(|g| exact(g[i], scale)).sum::<u64>(), exact(total[i], scale), "{csv}");
    }
    assert!(table.contains("TOTAL") && table.contains("USEFUL"), "{table}");
    // The rows' CSV: one line per attempt, summing to the same total.
    let rows: Vec<Vec<&str>> = rows.lines().skip(1).map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len() as u64, n(t, "attempts"));
    assert_eq!(rows.iter().map(|r| exact(r[14], 1000)).sum::<u64>(), n(t, "gpu_ms"));
    assert_eq!(rows.iter().map(|r| exact(r[22], 1_000_000)).sum::<u64>(), n(t, "cost_micro_usd"));
    api.finish().await;
}
