//! Who may call what, over real HTTP against an engine started in this
//! process (`canopy::app::start`): one literal table of every route and
//! every role (with path parameters written plainly, percent-encoded,
//! mixed and double-encoded), and submitters owning their work while
//! scoped operators act on their nodes only. Split from `api_service`,
//! which covers the endpoints themselves.

mod api_support;

use api_support::*;

use serde_json::{Value, json};
use std::collections::BTreeSet;

// ── Who may call what ────────────────────────────────────────────────────

/// What one principal gets from one route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum May {
    /// Allowed: a 2xx.
    Y,
    /// Forbidden: 403.
    N,
    /// No token: 401.
    U,
    /// Allowed, and the engine answers 409: the node is not quarantined
    /// (past authorization, so the principal may).
    C,
}
use May::{C, N, U, Y};

/// How a path parameter is written in a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Plain,
    /// Every byte percent-encoded: `w-8` → `%77%2D%38`.
    Encoded,
    /// Every other byte, in lower-case hex: `w-8` → `w%2d8`.
    Mixed,
    /// Every byte encoded twice: `w-8` → `%2577%252D%2538`.
    Double,
}

impl Form {
    fn apply(self, s: &str) -> String {
        s.bytes()
            .enumerate()
            .map(|(i, b)| match self {
                Form::Plain => (b as char).to_string(),
                Form::Encoded => format!("%{b:02X}"),
                Form::Mixed if i % 2 == 1 => format!("%{b:02x}"),
                Form::Mixed => (b as char).to_string(),
                Form::Double => format!("%25{b:02X}"),
            })
            .collect()
    }
}

/// The columns of [`MATRIX`], in order.
const ROLES: [&str; 6] = ["nobody", "viewer", "submitter", "operator", "scoped-op", "admin"];

/// Every route of the API and who may call it. `scoped-op` is an operator
/// limited to `provider=onprem-fra`; the node routes act on nodes in that
/// provider, the workload routes on the owner's workloads (which ran on
/// the local provider, or never ran).
#[rustfmt::skip]
const MATRIX: &[(&str, &str, [May; 6])] = &[
    //                                                              nobody viewer submitter operator scoped-op admin
    ("GET",    "/healthz",                                         [Y,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/metrics",                                         [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/openapi.json",                                 [Y,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/whoami",                                       [U,     Y,     Y,        Y,       Y,        Y]),
    ("POST",   "/v1/workloads",                                    [U,     N,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads",                                    [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads/{id}",                               [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads/{id}/events",                        [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads/{id}/logs",                          [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads/{id}/artifacts",                     [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/workloads/{id}/artifacts/{attempt}/{name}",    [U,     Y,     Y,        Y,       Y,        Y]),
    ("POST",   "/v1/workloads/{id}/cancel",                        [U,     N,     N,        Y,       N,        Y]),
    ("POST",   "/v1/workloads/{id}/retry",                         [U,     N,     N,        Y,       N,        Y]),
    // Only a failure can be acknowledged; the owner's workload succeeded.
    ("POST",   "/v1/workloads/{id}/acknowledge",                   [U,     N,     N,        C,       N,        C]),
    // The owner's workload has ended: it excludes nothing any more.
    ("POST",   "/v1/workloads/{id}/unexclude",                     [U,     N,     N,        C,       N,        C]),
    ("POST",   "/v1/plan",                                         [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/fleet",                                        [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/events",                                       [U,     Y,     Y,        Y,       Y,        Y]),
    ("POST",   "/v1/nodes/{name}/cordon",                          [U,     N,     N,        Y,       Y,        Y]),
    ("POST",   "/v1/nodes/{name}/uncordon",                        [U,     N,     N,        Y,       Y,        Y]),
    ("POST",   "/v1/nodes/{name}/drain",                           [U,     N,     N,        Y,       Y,        Y]),
    ("POST",   "/v1/nodes/{name}/unquarantine",                    [U,     N,     N,        C,       C,        C]),
    ("GET",    "/v1/stream",                                       [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/audit",                                        [U,     N,     N,        Y,       Y,        Y]),
    ("GET",    "/v1/tokens",                                       [U,     N,     N,        N,       N,        Y]),
    ("POST",   "/v1/tokens",                                       [U,     N,     N,        N,       N,        Y]),
    ("DELETE", "/v1/tokens/{name}",                                [U,     N,     N,        N,       N,        Y]),
    ("GET",    "/v1/tenants",                                      [U,     Y,     Y,        Y,       Y,        Y]),
    ("GET",    "/v1/usage",                                        [U,     Y,     Y,        Y,       Y,        Y]),
    ("PUT",    "/v1/tenants",                                      [U,     N,     N,        N,       N,        Y]),
    ("GET",    "/v1/servers",                                      [U,     Y,     Y,        Y,       Y,        Y]),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_allows_exactly_the_roles_in_the_table() {
    // The table names every route the server has, and nothing else.
    let table: BTreeSet<(&str, &str)> = MATRIX.iter().map(|(m, p, _)| (*m, *p)).collect();
    let served: BTreeSet<(&str, &str)> =
        canopy::server::authz::ROUTES.iter().map(|r| (r.method, r.path)).collect();
    assert_eq!(table, served, "the role table and the server's routes differ");
    assert_eq!(table.len(), MATRIX.len(), "a route is in the table twice");

    let mut api = Api::start().await;
    let mut tokens = vec![None];
    for role in &ROLES[1..] {
        let (name, role_name, scopes) = match *role {
            "scoped-op" => ("scoped-op", "operator", vec![format!("provider={SCOPED_PROVIDER}")]),
            r => (r, r, vec![]),
        };
        let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
        tokens.push(Some(api.token(name, role_name, &scopes, None).await));
    }
    // A workload of the owner's that ran here, with an output to download.
    let spec = local_spec("done", "printf x > \"$CANOPY_OUTPUT_DIR/outputs/x\"", Some("x"));
    let done = api.submit_new(Who::Owner, &spec).await;
    assert_eq!(api.wait_final(&done).await["workload"]["state"], "succeeded");
    // Each node command goes to a node of its own per principal, so each
    // allowed cordon → uncordon → drain is a real change.
    let node_of = |col: usize| {
        ["fra-h100-02", NODE_IN_SCOPE, "fra-a100-02", NODE_IN_SCOPE, OTHER_NODE_IN_SCOPE, "fra-a100-04"][col]
    };

    let mut failures = Vec::new();
    // Every path parameter as sent plainly, percent-encoded whole, partly
    // (the mixed form), and encoded twice: the first three must get the
    // same answer, since each decodes to the same target; the doubly
    // encoded one decodes to no target, and nothing may act on it.
    for form in [Form::Plain, Form::Encoded, Form::Mixed, Form::Double] {
        for (method, route, row) in MATRIX {
            for (col, want) in row.iter().enumerate() {
                let who = match &tokens[col] {
                    None => Who::Nobody,
                    Some(t) => Who::Token(t),
                };
                let mut path = route.to_string();
                let mut body = Body::Empty;
                match *route {
                    "/v1/workloads" | "/v1/plan" if *method == "POST" => {
                        body = Body::Toml(queued_spec("matrix"))
                    }
                    "/v1/workloads/{id}/cancel" => {
                        // A fresh waiting workload of the owner's for each try.
                        let id = api.submit_new(Who::Owner, &queued_spec("to-cancel")).await;
                        path = path.replace("{id}", &form.apply(&id));
                    }
                    // No tenants before or after: the matrix's tokens stay valid.
                    "/v1/tenants" if *method == "PUT" => body = Body::Json(json!({})),
                    "/v1/tokens" if *method == "POST" => {
                        let name = format!("made-by-{}-{form:?}", ROLES[col]);
                        body = Body::Json(json!({ "name": name, "role": "viewer" }));
                    }
                    "/v1/tokens/{name}" => {
                        let doomed = format!("doomed-{}-{form:?}", ROLES[col]);
                        api.token(&doomed, "viewer", &[], None).await;
                        path = path.replace("{name}", &form.apply(&doomed));
                    }
                    _ => {}
                }
                let name = if route.starts_with("/v1/nodes/") { node_of(col) } else { "result" };
                path = path
                    .replace("{id}", &form.apply(&done))
                    .replace("{attempt}", &form.apply("1"))
                    .replace("{name}", &form.apply(name));
                let r = if *route == "/v1/stream" {
                    // Only the head: the body never ends.
                    let resp = api.request(who, method, &path).send().await.unwrap();
                    let (status, headers) = (resp.status().as_u16(), resp.headers().clone());
                    let text = if status == 200 { String::new() } else { resp.text().await.unwrap() };
                    Reply { status, headers, text }
                } else {
                    api.call(who, method, &path, body).await
                };
                if *method == "POST" && *route == "/v1/tokens" && r.status == 201 {
                    api.secrets.push(r.json()["token"].as_str().unwrap().to_string());
                }
                let has_target = route.contains('{');
                let got_right = match want {
                    // Encoded twice, a target decodes to nothing there is:
                    // refused with the API's error, whoever asks.
                    _ if form == Form::Double && has_target && *want != U => {
                        (400..500).contains(&r.status) && r.json()["error"]["code"].is_string()
                    }
                    Y => r.is_success(),
                    N => r.status == 403 && r.json()["error"]["code"] == "forbidden",
                    U => r.status == 401 && r.json()["error"]["code"] == "unauthorized",
                    C => r.status == 409 && r.json()["error"]["code"] == "conflict",
                };
                if !got_right {
                    failures.push(format!(
                        "{method} {path} as {} ({form:?}): want {want:?}, got {} {}",
                        ROLES[col], r.status, r.text
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the role table's cells are wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitters_own_their_work_and_scoped_operators_their_nodes() {
    let mut api = Api::start().await;
    let alice = api.token("alice", "submitter", &[], None).await;
    let bob = api.token("bob", "submitter", &[], None).await;
    let viewer = api.token("watcher", "viewer", &[], None).await;
    let scope = format!("provider={SCOPED_PROVIDER}");
    let fra_ops = api.token("fra-ops", "operator", &[&scope], None).await;
    let (alice, bob, viewer, fra_ops) =
        (Who::Token(&alice), Who::Token(&bob), Who::Token(&viewer), Who::Token(&fra_ops));

    let a1 = api.submit_new(alice, &queued_spec("alice-1")).await;
    let a2 = api.submit_new(alice, &queued_spec("alice-2")).await;
    let b1 = api.submit_new(bob, &queued_spec("bob-1")).await;

    // A viewer reads but cannot cancel.
    assert_eq!(
        api.get(viewer, &format!("/v1/workloads/{a1}")).await.expect(200).json()["workload"]["state"],
        "queued"
    );
    let r = api.call(viewer, "POST", &format!("/v1/workloads/{a1}/cancel"), Body::Empty).await.expect(403);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("viewer"), "{}", r.text);
    // Bob cannot cancel Alice's work; Alice can.
    let r = api.call(bob, "POST", &format!("/v1/workloads/{a1}/cancel"), Body::Empty).await.expect(403);
    assert!(
        r.json()["error"]["message"].as_str().unwrap().contains("only the workloads it submitted"),
        "{}",
        r.text
    );
    assert_eq!(api.workload(&a1).await["workload"]["state"], "queued", "a refused cancel changed nothing");
    api.call(alice, "POST", &format!("/v1/workloads/{a1}/cancel"), Body::Empty).await.expect(200);
    api.call(bob, "POST", &format!("/v1/workloads/{b1}/cancel"), Body::Empty).await.expect(200);
    assert_eq!(api.wait_final(&a1).await["workload"]["state"], "cancelled");
    assert_eq!(api.wait_final(&b1).await["workload"]["state"], "cancelled");
    // Retrying is the owner's too.
    api.call(bob, "POST", &format!("/v1/workloads/{a1}/retry"), Body::Empty).await.expect(403);
    api.call(alice, "POST", &format!("/v1/workloads/{a1}/retry"), Body::Empty).await.expect(200);

    // The scoped operator: nodes of its provider yes, others no; and no
    // cancelling of work outside its scope.
    api.call(fra_ops, "POST", &format!("/v1/nodes/{NODE_IN_SCOPE}/cordon"), Body::Empty).await.expect(200);
    let r = api
        .call(fra_ops, "POST", &format!("/v1/nodes/{NODE_OUT_OF_SCOPE}/cordon"), Body::Empty)
        .await
        .expect(403);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains(SCOPED_PROVIDER), "{}", r.text);
    api.call(fra_ops, "POST", &format!("/v1/workloads/{a2}/cancel"), Body::Empty).await.expect(403);
    api.call(alice, "POST", &format!("/v1/nodes/{NODE_IN_SCOPE}/uncordon"), Body::Empty).await.expect(403);

    // What the fleet shows: only the node in scope was cordoned.
    let state_of = |fleet: &Value, name: &str| {
        fleet["fleet"]["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|n| n["name"] == name))
            .map(|n| n["state"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{name} is not in {fleet}"))
    };
    wait_until("the cordon to show in the fleet", || async {
        let fleet = api.get(viewer, "/v1/fleet").await.expect(200).json();
        state_of(&fleet, NODE_IN_SCOPE) == "cordoned"
    })
    .await;
    let fleet = api.get(viewer, "/v1/fleet").await.expect(200).json();
    assert_ne!(state_of(&fleet, NODE_OUT_OF_SCOPE), "cordoned");
    api.finish().await;
}
