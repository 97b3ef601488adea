//! `/metrics` as an operator's dashboards read it, scraped from a real
//! server after real requests and workloads: the fleet's GPUs and nodes
//! per pool, retries by class and completion times, build and process
//! facts, HTTP requests by route template, `HEAD /metrics`, and the whole
//! scrape passed through Prometheus' own checker (`promtool`).

mod api_support;

use api_support::{Api, Body, DEADLINE, NODE_IN_SCOPE, Who, local_spec};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// One sample: its name, labels and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a scrape (comment lines skipped). Label values here
/// hold no `,` or `"`, which keeps the split simple.
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            let value = if value == "+Inf" { f64::INFINITY } else { value.parse().unwrap() };
            Sample { name: name.to_string(), labels, value }
        })
        .collect()
}

/// The sum of `name`'s samples whose labels include all of `want`.
fn sum(s: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    s.iter()
        .filter(|x| {
            x.name == name && want.iter().all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|x| x.value)
        .sum()
}

async fn scrape(api: &Api) -> String {
    let m = api.get(Who::Owner, "/metrics").await.expect(200);
    assert!(m.headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    m.text
}

/// Every family a dashboard reads, with the values the fleet and the
/// requests made give it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_the_fleet_the_work_and_the_requests() {
    let api = Api::start().await;
    let app = Who::Owner;

    // Work: one that succeeds, one that fails once and is retried (its
    // exit code is an application error, which `app_errors` retries).
    let ok = api.submit_new(app, &local_spec("fine", "echo hi", None)).await;
    let retry = "\n[retry]\nmax_attempts = 2\napp_errors = 1\nbackoff = \"1s\"\nbackoff_max = \"1s\"\n";
    let flaky = api.submit_new(app, &format!("{}{retry}", local_spec("flaky", "exit 3", None))).await;
    assert_eq!(api.wait_final(&ok).await["workload"]["state"], "succeeded");
    let flaky = api.wait_final(&flaky).await;
    assert_eq!(flaky["workload"]["state"], "failed", "{flaky}");
    let attempts = flaky["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{flaky}");
    let class = attempts[0]["class"].as_str().unwrap().to_string();

    // Requests: two reads of one workload (two ids, one route template),
    // a path no route has, and a cordon.
    api.get(app, &format!("/v1/workloads/{ok}")).await.expect(200);
    api.get(app, "/v1/workloads/w-99999").await.expect(404);
    api.get(app, "/no/such/path").await.expect(404);
    // The demo fleet has cordoned nodes of its own: one more.
    let cordoned_before = sum(&samples(&scrape(&api).await), "canopy_nodes", &[("state", "cordoned")]);
    api.call(
        app,
        "POST",
        &format!("/v1/nodes/{NODE_IN_SCOPE}/cordon"),
        Body::Json(json!({"reason": "test"})),
    )
    .await
    .expect(200);

    // The cordon is in the fleet the engine publishes within a second.
    let deadline = std::time::Instant::now() + DEADLINE;
    let text = loop {
        let text = scrape(&api).await;
        if sum(&samples(&text), "canopy_nodes", &[("state", "cordoned")]) == cordoned_before + 1.0 {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "no cordoned node in /metrics:\n{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let s = samples(&text);
    let status = api.get(app, "/v1/fleet").await.expect(200).json();
    let fleet = &status["fleet"];

    // Build info.
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(sum(&s, "canopy_build_info", &[("version", version)]), 1.0, "{text}");

    // GPUs and nodes per pool, equal to the fleet's.
    let providers = fleet["providers"].as_array().unwrap();
    let (mut gpus, mut nodes) = (0.0, 0.0);
    for p in fleet["pools"].as_array().unwrap() {
        let provider = providers[p["provider"].as_u64().unwrap() as usize]["name"].as_str().unwrap();
        let pool = p["name"].as_str().unwrap();
        let n = (p["nodes"]["end"].as_u64().unwrap() - p["nodes"]["start"].as_u64().unwrap()) as f64;
        let g = n * p["shape"]["gpus_per_node"].as_f64().unwrap();
        let at = [("provider", provider), ("pool", pool)];
        assert_eq!(sum(&s, "canopy_gpus", &at), g, "{provider}/{pool}");
        assert_eq!(sum(&s, "canopy_nodes", &at), n, "{provider}/{pool}: each node once");
        let range =
            p["nodes"]["start"].as_u64().unwrap() as usize..p["nodes"]["end"].as_u64().unwrap() as usize;
        for state in ["ready", "cordoned", "draining", "down"] {
            let quarantined =
                |name: &Value| status["health"]["nodes"][name.as_str().unwrap()]["quarantined"] == true;
            let want = fleet["nodes"].as_array().unwrap()[range.clone()]
                .iter()
                .filter(|x| x["state"] == state && !(state == "ready" && quarantined(&x["name"])))
                .count() as f64;
            assert_eq!(
                sum(&s, "canopy_nodes", &[at[0], at[1], ("state", state)]),
                want,
                "{provider}/{pool} {state}"
            );
        }
        assert!(sum(&s, "canopy_gpus_free", &at) <= g, "{provider}/{pool}");
        let score = sum(&s, "canopy_pool_health_score", &at);
        assert!((0.0..=1.0).contains(&score), "{provider}/{pool}: {score}");
        gpus += g;
        nodes += n;
    }
    assert!(gpus > 0.0 && sum(&s, "canopy_gpus", &[]) == gpus, "{text}");
    assert_eq!(sum(&s, "canopy_nodes", &[]), nodes);
    assert_eq!(sum(&s, "canopy_gpus_held", &[]), 0.0, "nothing runs now");

    // Retries by the class of the failure, and completion times.
    assert_eq!(sum(&s, "canopy_retries_total", &[("class", &class)]), 1.0, "{text}");
    assert_eq!(sum(&s, "canopy_retries_total", &[]), 1.0, "{text}");
    let done = |state| sum(&s, "canopy_workload_completion_seconds_count", &[("state", state)]);
    assert_eq!((done("succeeded"), done("failed"), done("cancelled")), (1.0, 1.0, 0.0), "{text}");
    // The retry waited its 1 s back-off: the failure took at least that.
    assert!(sum(&s, "canopy_workload_completion_seconds_sum", &[("state", "failed")]) >= 1.0, "{text}");
    let inf = sum(&s, "canopy_workload_completion_seconds_bucket", &[("state", "failed"), ("le", "+Inf")]);
    assert_eq!(inf, 1.0);
    // A second scrape reads only new events: the counts stay.
    let again = samples(&scrape(&api).await);
    assert_eq!(sum(&again, "canopy_retries_total", &[]), 1.0);
    assert_eq!(sum(&again, "canopy_workload_completion_seconds_count", &[]), 2.0);

    // HTTP requests by route template, never the path sent.
    let by = |route, method, status| {
        sum(&s, "canopy_http_requests_total", &[("route", route), ("method", method), ("status", status)])
    };
    assert!(by("/v1/workloads/{id}", "GET", "200") >= 1.0, "{text}");
    assert_eq!(by("/v1/workloads/{id}", "GET", "404"), 1.0, "{text}");
    assert_eq!(by("unmatched", "GET", "404"), 1.0, "{text}");
    assert_eq!(by("/v1/nodes/{name}/cordon", "POST", "200"), 1.0, "{text}");
    assert_eq!(by("/v1/workloads", "POST", "201"), 2.0, "{text}");
    for x in s.iter().filter(|x| x.name.starts_with("canopy_http_")) {
        let route = &x.labels["route"];
        assert!(!route.contains(&ok) && !route.contains("w-99999") && !route.contains("no/such"), "{route}");
    }
    let count = sum(&s, "canopy_http_request_duration_seconds_count", &[("route", "/v1/workloads/{id}")]);
    assert_eq!(count, by("/v1/workloads/{id}", "GET", "200") + 1.0, "{text}");

    // Process metrics, read from /proc on Linux.
    if cfg!(target_os = "linux") {
        assert!(sum(&s, "process_resident_memory_bytes", &[]) > 1e6, "{text}");
        assert!(sum(&s, "process_open_fds", &[]) >= 3.0, "{text}");
        assert!(sum(&s, "process_cpu_seconds_total", &[]) > 0.0, "{text}");
        let start = sum(&s, "process_start_time_seconds", &[]);
        let now = api_support::now_ms() as f64 / 1000.0;
        assert!(start > now - 3600.0 && start <= now + 1.0, "{start} vs {now}");
    }

    // The cost counter is usage's, per tenant.
    assert!(text.contains("# TYPE canopy_usage_cost_usd_total counter"), "{text}");
    api.finish().await;
}

/// `HEAD /metrics`: 200, the same content type, no body, and the same
/// authorization as `GET`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_metrics_answers_like_get_without_a_body() {
    let api = Api::start().await;
    let head = api.call(Who::Owner, "HEAD", "/metrics", Body::Empty).await;
    assert_eq!(head.status, 200, "{}", head.text);
    assert!(head.text.is_empty(), "{}", head.text);
    let get = api.get(Who::Owner, "/metrics").await.expect(200);
    assert_eq!(head.headers["content-type"], get.headers["content-type"]);
    // The length the body would have had (the scrape grows by the HEAD's
    // own count in between, so not the GET's).
    let length: usize = head.headers["content-length"].to_str().unwrap().parse().unwrap();
    assert!(length > 1000 && length <= get.text.len(), "{length}");
    assert_eq!(api.call(Who::Nobody, "HEAD", "/metrics", Body::Empty).await.status, 401);
    let s = samples(&scrape(&api).await);
    let heads = sum(&s, "canopy_http_requests_total", &[("route", "/metrics"), ("method", "HEAD")]);
    assert_eq!(heads, 2.0, "the owner's 200 and the 401");
    api.finish().await;
}

/// The whole scrape through `promtool check metrics`, Prometheus' own
/// parser and linter (Debian's `prometheus` package; `.ci/run` installs
/// it). Skipped, saying so, only where promtool is not installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_a_real_scrape() {
    let Ok(version) = std::process::Command::new("promtool").arg("--version").output() else {
        eprintln!(
            "SKIPPED promtool_accepts_a_real_scrape: promtool is not on PATH (apt-get install prometheus)"
        );
        return;
    };
    assert!(version.status.success());
    // With tenants and a budget, so their families are checked too.
    let tenancy = "default_tenant = \"ops\"\n[[tenant]]\nname = \"ops\"\n\
                   [[budget]]\ntenant = \"ops\"\nperiod = \"day\"\nusd = 100\ngpu_hours = 10\n";
    let api = Api::start_configured(canopy::server::ServerOptions::default(), tenancy).await;
    let id = api.submit_new(Who::Owner, &local_spec("fine", "echo hi", None)).await;
    api.wait_final(&id).await;
    api.get(Who::Owner, "/no/such/path").await.expect(404);
    let text = scrape(&api).await;
    assert!(text.contains("canopy_budget_spent_usd{budget=\"ops-day\""), "{text}");
    let checked = tokio::time::timeout(DEADLINE, async {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(text.as_bytes()).await.unwrap();
        child.wait_with_output().await.unwrap()
    })
    .await
    .expect("promtool answers");
    let said =
        format!("{}{}", String::from_utf8_lossy(&checked.stdout), String::from_utf8_lossy(&checked.stderr));
    assert!(checked.status.success() && said.trim().is_empty(), "promtool: {said}\n--- the scrape:\n{text}");
    api.finish().await;
}
