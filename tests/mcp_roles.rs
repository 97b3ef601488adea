//! Who may use which MCP tool, over `/mcp` on a real server: one literal
//! table of every tool and every role, each cell checked by what the tool
//! did (a cancel cancels, a submit submits), beside `api_roles`' table of
//! the routes. A tool follows the rules of the routes it calls: where the
//! route refuses, the tool's call is an error and nothing changes, and a
//! two-step tool's confirmation buys nothing its caller may not do.

mod api_support;

use api_support::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// Columns of [`TOOLS`], in order (`nobody` is refused by `/mcp` itself).
const ROLES: [&str; 5] = ["viewer", "submitter", "operator", "scoped-op", "admin"];

/// Every tool and who may use it, on workloads of the store's owner
/// (which ran on the local provider, outside `scoped-op`'s scope): as
/// `api_roles`' rows for the routes each calls.
#[rustfmt::skip]
const TOOLS: &[(&str, [bool; 5])] = &[
    //              viewer submitter operator scoped-op admin
    ("plan",      [true,  true,     true,    true,     true]),
    ("submit",    [false, true,     true,    true,     true]),
    ("status",    [true,  true,     true,    true,     true]),
    ("list",      [true,  true,     true,    true,     true]),
    ("explain",   [true,  true,     true,    true,     true]),
    ("logs",      [true,  true,     true,    true,     true]),
    ("events",    [true,  true,     true,    true,     true]),
    ("artifacts", [true,  true,     true,    true,     true]),
    ("cancel",    [false, false,    true,    false,    true]),
    ("retry",     [false, false,    true,    false,    true]),
    ("fleet",     [true,  true,     true,    true,     true]),
];

async fn mcp(api: &Api, who: Who<'_>, method: &str, params: Value) -> Reply {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let rb = api
        .request(who, "POST", "/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    api.send(rb, Body::Json(body)).await
}

/// `tools/call`'s result: whether it is an error, and its content.
async fn call(api: &Api, token: &str, tool: &str, args: Value) -> (bool, Value) {
    let r = mcp(api, Who::Token(token), "tools/call", json!({ "name": tool, "arguments": args })).await;
    assert_eq!(r.status, 200, "{tool}: {}", r.text);
    let v = r.json();
    (v["result"]["isError"] == json!(true), v["result"]["structuredContent"].clone())
}

async fn total(api: &Api) -> u64 {
    api.get(Who::Owner, "/v1/workloads?limit=1").await.expect(200).json()["total"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_allows_exactly_the_roles_in_the_table() {
    let listed: BTreeSet<&str> = TOOLS.iter().map(|(t, _)| *t).collect();
    let served: BTreeSet<&str> = canopy::mcp::tools::TOOLS.iter().map(|t| t.name).collect();
    assert_eq!(listed, served, "the table and the server's tools differ");

    let mut api = Api::start().await;
    let mut tokens = Vec::new();
    for role in ROLES {
        let (role_name, scopes) = match role {
            "scoped-op" => ("operator", vec![format!("provider={SCOPED_PROVIDER}")]),
            r => (r, vec![]),
        };
        let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
        tokens.push(api.token(role, role_name, &scopes, None).await);
    }
    let nobody = mcp(&api, Who::Nobody, "tools/list", json!({})).await;
    assert_eq!(nobody.status, 401, "{}", nobody.text);

    let done = api.submit_new(Who::Owner, &local_spec("done", "echo hi", None)).await;
    assert_eq!(api.wait_final(&done).await["workload"]["state"], "succeeded");

    let mut failures = Vec::new();
    for (tool, row) in TOOLS {
        for (col, allowed) in row.iter().enumerate() {
            let token = tokens[col].as_str();
            let who = ROLES[col];
            let (did, detail) = match *tool {
                "submit" => {
                    let before = total(&api).await;
                    let key = format!("mcp-{who}");
                    let args = json!({ "spec": queued_spec("by-mcp"), "idempotency_key": key });
                    let (err, v) = call(&api, token, tool, args).await;
                    let grew = total(&api).await - before;
                    (!err && grew == 1, format!("error {err}, {grew} new workload(s): {v}"))
                }
                "cancel" => {
                    // A waiting workload of the owner's; both steps, so a
                    // confirmation alone proves nothing.
                    let id = api.submit_new(Who::Owner, &queued_spec("to-cancel")).await;
                    let (err, v) = call(&api, token, tool, json!({ "id": id })).await;
                    let confirmed = match v["confirm"].as_str() {
                        Some(c) if !err => {
                            Some(call(&api, token, tool, json!({ "id": id, "confirm": c })).await)
                        }
                        _ => None,
                    };
                    let state = api.workload(&id).await["workload"]["state"].clone();
                    (
                        state == "cancelled",
                        format!("first step: error {err} {v}; second: {confirmed:?}; now {state}"),
                    )
                }
                "retry" => {
                    // The first allowed retry submits the spec again; a
                    // later one answers that same workload (`existing`).
                    let before = total(&api).await;
                    let (err, v) = call(&api, token, tool, json!({ "id": done })).await;
                    let grew = total(&api).await - before;
                    let retried = grew == 1 || (grew == 0 && v["existing"] == json!(true));
                    (
                        !err && v["id"].is_string() && retried,
                        format!("error {err}, {grew} new workload(s): {v}"),
                    )
                }
                read => {
                    let args = match read {
                        "plan" => json!({ "spec": queued_spec("planned") }),
                        "list" | "fleet" => json!({}),
                        _ => json!({ "id": done }),
                    };
                    let (err, v) = call(&api, token, read, args).await;
                    (!err, format!("error {err}: {v}"))
                }
            };
            if did != *allowed {
                failures.push(format!("{tool} as {who}: want allowed={allowed}, got {detail}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} cells are wrong:\n{}", failures.len(), failures.join("\n"));
    api.finish().await;
}
