//! `/mcp` spoken to directly (JSON-RPC over HTTP, as any Streamable HTTP
//! client sends it) against a real server: no SDK needed, so this runs
//! wherever the tests do. The `logs` tool's tail of a log larger than one
//! read finds the end with a bounded number of API reads (counted from the
//! server's own request counter, not timed), and answers the last bytes
//! with the offset to continue from.

mod api_support;

use api_support::*;
use serde_json::{Value, json};

async fn mcp(api: &Api, token: &str, method: &str, params: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let rb = api
        .request(Who::Token(token), "POST", "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    let r = api.send(rb, Body::Json(body)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()
}

/// How many `GET …/logs` requests the server has answered.
async fn log_reads(api: &Api) -> u64 {
    let text = api.get(Who::Owner, "/metrics").await.expect(200).text;
    text.lines()
        .filter(|l| {
            l.starts_with("canopy_http_requests_total{route=\"/v1/workloads/{id}/logs\",method=\"GET\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logs_tool_tails_a_large_log_in_a_bounded_number_of_reads() {
    let mut api = Api::start().await;
    let token = api.token("agent", "submitter", &[], None).await;
    // 10,000 lines of 100 bytes (1,000,000 bytes), then the last line.
    let script = "i=0; while [ $i -lt 10000 ]; do printf '%099d\\n' $i; i=$((i+1)); done; echo 'THE END'";
    let id = api.submit_new(Who::Token(&token), &local_spec("loud", script, None)).await;
    assert_eq!(api.wait_final(&id).await["workload"]["state"], "succeeded");
    let total = 1_000_000 + "THE END\n".len() as u64;

    let tools = mcp(&api, &token, "tools/list", json!({})).await;
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"logs") && names.contains(&"submit"), "{names:?}");

    let before = log_reads(&api).await;
    let args = json!({ "name": "logs", "arguments": { "id": id, "limit": 64 } });
    let r = mcp(&api, &token, "tools/call", args).await;
    let tail = &r["result"]["structuredContent"];
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert_eq!(tail["offset"], total - 64, "{tail}");
    assert_eq!(tail["next_offset"], total, "{tail}");
    let text = tail["text"].as_str().unwrap();
    assert!(text.ends_with("09999\nTHE END\n"), "{text:?}");
    assert_eq!(text.len(), 64);
    // One read of 256 KiB, doubling probes to 2 MiB (3), a bisection of
    // the 1 MiB between (20) and the tail itself: 25 at most, not one per
    // 256 KiB chunk nor one per byte.
    let reads = log_reads(&api).await - before;
    assert!((2..=25).contains(&reads), "{reads} log reads for one tail");

    // From an offset: what follows, and where to continue.
    let args = json!({ "name": "logs", "arguments": { "id": id, "offset": total - 8 } });
    let r = mcp(&api, &token, "tools/call", args).await;
    assert_eq!(r["result"]["structuredContent"]["text"], "THE END\n", "{r}");
    assert_eq!(r["result"]["structuredContent"]["next_offset"], total, "{r}");
    api.finish().await;
}
