//! Canopy's MCP server with the official Python MCP SDK (PyPI `mcp`) as a
//! real client (tests/mcp/agent.py), against a real server started here:
//! over Streamable HTTP (`/mcp` on the server) and over stdio (`canopy
//! mcp` as a child process, talking to the server with the agent's token).
//! As a submitter the agent plans, submits, follows to success, reads the
//! log and an artifact (a resource); cancel takes a confirmation and a
//! stale, unknown or foreign confirmation id acts on nothing; a viewer is
//! offered no mutating tool and its crafted call to one is refused by the
//! API and audited; a foreign `Origin` is refused; a token over its budget
//! is refused with the numbers.
//!
//! Skips, saying so, when python3 or its `mcp` package is missing (`.ci/run`
//! installs it).

mod api_support;

use api_support::*;
use canopy::server::ServerOptions;
use std::path::Path;
use std::time::Duration;

fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

/// Whether python3 can import the MCP SDK.
fn python_mcp() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp.client.streamable_http, mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip("python3 or its `mcp` package (pip install mcp) is missing; the MCP agent tests did not run");
    }
    ok
}

const CONFIG: &str = "[[budget]]\ntoken = \"agent-capped\"\nperiod = \"day\"\ngpu_hours = 5\n";

async fn agent(mode: &str) {
    if !python_mcp() {
        return;
    }
    let mut api = Api::start_configured(ServerOptions::default(), CONFIG).await;
    let submitter = api.token("agent", "submitter", &[], None).await;
    let other = api.token("agent-b", "submitter", &[], None).await;
    let viewer = api.token("watcher", "viewer", &[], None).await;
    let capped = api.token("agent-capped", "submitter", &[], None).await;
    let dir = api._tmp.path().join("agent");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let script = "printf 'hello from an agent\\033[31m, in red\\007\\n'; printf 42 > \"$CANOPY_OUTPUT_DIR/outputs/answer.txt\"";
    let spec_ok = write("ok.toml", &local_spec("agent-job", script, Some("answer.txt")));
    let spec_queued = write("queued.toml", &queued_spec("agent-waits"));
    // Ten hours on one GPU: 10 GPU-hours against the token's 5 a day.
    let spec_gpu = write(
        "gpu.toml",
        "name = \"big\"\nexpected_runtime = \"10h\"\n\n[runtime]\ncommand = [\"train\"]\n\n[resources]\ngpus = 1\n",
    );
    // A hundred hours on one GPU: well above the $25 that takes a confirmation.
    let spec_big = write(
        "big.toml",
        "name = \"big-job\"\nexpected_runtime = \"100h\"\n\n[runtime]\ncommand = [\"train\"]\n\n[resources]\ngpus = 1\n",
    );
    let server = format!("http://{}", api.tcp);
    let url = format!("{server}/mcp");
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/agent.py");
    let out = tokio::time::timeout(
        Duration::from_secs(240),
        tokio::process::Command::new("python3")
            .arg(&script_path)
            .arg(mode)
            .env_remove("CANOPY_TOKEN")
            .env("CANOPY_MCP_URL", &url)
            .env("CANOPY_SERVER", &server)
            .env("CANOPY_BIN", env!("CARGO_BIN_EXE_canopy"))
            .env("TOKEN_SUBMITTER", &submitter)
            .env("TOKEN_OTHER", &other)
            .env("TOKEN_VIEWER", &viewer)
            .env("TOKEN_CAPPED", &capped)
            .env("SPEC_OK", &spec_ok)
            .env("SPEC_QUEUED", &spec_queued)
            .env("SPEC_GPU", &spec_gpu)
            .env("SPEC_BIG", &spec_big)
            .output(),
    )
    .await
    .expect("the agent finished")
    .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the {mode} agent failed ({}):\n{stdout}\n{stderr}", out.status);
    for t in [&submitter, &other, &viewer, &capped] {
        assert!(!stdout.contains(t.as_str()) && !stderr.contains(t.as_str()), "a token was printed");
    }
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
    assert!(
        report["capped"].as_str().unwrap_or_default().contains(
            "budget agent-capped-day (token agent-capped, per day): estimated 10.00 GPU-h but 5.00 GPU-h is left"
        ),
        "{report}"
    );

    // The viewer's crafted cancel reached the API, which refused and audited it.
    let queued = report["still_queued"].as_str().unwrap();
    let audit = api.get(Who::Owner, "/v1/audit?principal=watcher&outcome=denied").await.expect(200).json();
    let denied = audit.as_array().unwrap();
    assert!(
        denied.iter().any(|a| a["action"] == "POST /v1/workloads/{id}/cancel"
            && a["target"].as_str().is_some_and(|t| t.contains(queued))),
        "{audit}"
    );
    assert!(denied.iter().any(|a| a["action"] == "POST /v1/workloads"), "{audit}");
    // The confirmed cancel is the agent's own, audited as any cancel.
    let cancelled = report["cancelled"].as_str().unwrap();
    assert_eq!(api.workload(cancelled).await["workload"]["state"], "cancelled");
    // Nothing was submitted for the capped agent, and its neighbour still waits.
    let page = api.get(Who::Owner, "/v1/workloads?submitted_by=agent-capped").await.expect(200).json();
    assert_eq!(page["total"], 0, "{page}");
    assert_eq!(api.workload(queued).await["workload"]["state"], "queued");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_agent_over_streamable_http() {
    agent("http").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_agent_over_stdio() {
    agent("stdio").await;
}
