//! The checked-in OpenAPI document is the one the server serves, and it
//! lists every route the router and the authorization table know.
//! `CANOPY_BLESS=1 cargo test --test api_openapi` rewrites docs/openapi.json.

use canopy::server::authz::ROUTES;

#[test]
fn docs_openapi_json_matches_the_code() {
    let generated = canopy::server::openapi::document();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/openapi.json");
    if std::env::var_os("CANOPY_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "docs/openapi.json is out of date; run `CANOPY_BLESS=1 cargo test --test api_openapi` and commit it"
    );
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for r in ROUTES {
        let op = &doc["paths"][r.path][r.method.to_lowercase()];
        assert!(op.is_object(), "{} {} is missing from the document", r.method, r.path);
        assert!(op["x-canopy-role"].is_string(), "{} {} does not say who may call it", r.method, r.path);
    }
    // The submit body's JSON form is the spec's own schema.
    assert!(doc["components"]["schemas"]["Spec"]["properties"]["runtime"].is_object());
}

mod api_support;
use api_support::{Api, Body, Who};

/// What a client that follows the document meets on the wire: an
/// unsupported method on a known path is 405 with `Allow` and the JSON
/// error, `HEAD` answers wherever `GET` does, and a query string that does
/// not parse is a 400 naming the parameter, in the JSON error shape.
#[tokio::test(flavor = "multi_thread")]
async fn methods_head_and_query_errors_answer_as_documented() {
    let mut api = Api::start().await;
    let token = api.token("ops", "admin", &[], None).await;
    let who = Who::Token(&token);
    let id = api.submit_new(who, &api_support::queued_spec("waits")).await;

    // 405: a known path, a method it does not take.
    for (method, path, allow) in [
        ("DELETE", "/v1/workloads".to_string(), "GET, HEAD, POST"),
        ("PUT", format!("/v1/workloads/{id}"), "GET, HEAD"),
        ("GET", format!("/v1/workloads/{id}/cancel"), "POST"),
        ("POST", "/v1/fleet".to_string(), "GET, HEAD"),
        ("PATCH", "/v1/tokens/ops".to_string(), "DELETE"),
    ] {
        let r = api.call(who, method, &path, Body::Empty).await;
        assert_eq!(r.status, 405, "{method} {path}: {}", r.text);
        assert_eq!(r.headers.get("allow").and_then(|v| v.to_str().ok()), Some(allow), "{method} {path}");
        assert_eq!(r.json()["error"]["code"], "method-not-allowed", "{method} {path}: {}", r.text);
    }
    // Unknown paths and commands stay 404.
    assert_eq!(api.call(who, "GET", "/v1/nope", Body::Empty).await.status, 404);
    assert_eq!(api.call(who, "POST", &format!("/v1/workloads/{id}/explode"), Body::Empty).await.status, 404);

    // HEAD wherever GET: the status and headers of a GET, no body.
    for path in
        ["/healthz", "/v1/openapi.json", "/v1/whoami", "/v1/workloads", &format!("/v1/workloads/{id}")]
    {
        let get = api.call(who, "GET", path, Body::Empty).await;
        let head = api.call(who, "HEAD", path, Body::Empty).await;
        assert_eq!(head.status, get.status, "HEAD {path}");
        assert_eq!(head.status, 200, "HEAD {path}");
        assert!(head.text.is_empty(), "HEAD {path} has a body");
        assert_eq!(head.headers.get("content-type"), get.headers.get("content-type"), "HEAD {path}");
    }

    // A query string that does not parse: 400, JSON, naming the parameter.
    for (path, field) in [
        ("/v1/workloads?limit=abc", "limit"),
        ("/v1/events?limit=-1", "limit"),
        ("/v1/audit?since=yesterday", "since"),
        ("/v1/workloads?unresolved=maybe", "unresolved"),
        ("/v1/usage?rows=often", "rows"),
    ] {
        let r = api.call(who, "GET", path, Body::Empty).await;
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        let e = r.json();
        assert_eq!(e["error"]["code"], "bad-request", "{path}");
        assert_eq!(e["error"]["field"], field, "{path}: {}", r.text);
        assert!(e["error"]["message"].as_str().unwrap().contains(field), "{path}: {}", r.text);
    }
    // A parameter sent empty, as a form sends an unset field, is not given.
    for path in [
        "/v1/workloads?state=&name=&label=&provider=&submitted_by=&tenant=&cursor=",
        "/v1/usage?by=&since=&until=",
        "/v1/audit?principal=&action=",
    ] {
        let r = api.call(who, "GET", path, Body::Empty).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text);
    }
}

/// A log read from an offset past its end answers with nothing yet and the
/// same offset to continue from, however far past: schemathesis found a
/// 500 ("Invalid argument") for an offset beyond what the file system
/// can hold.
#[tokio::test(flavor = "multi_thread")]
async fn a_log_read_past_its_end_is_empty_not_an_error() {
    let api = Api::start().await;
    let id = api.submit_new(Who::Owner, &api_support::local_spec("says", "echo hello", None)).await;
    api.wait_final(&id).await;
    let all = api.get(Who::Owner, &format!("/v1/workloads/{id}/logs")).await.expect(200);
    assert!(all.text.contains("hello"), "{}", all.text);
    for offset in ["6", "4096", "3219303995885632", &u64::MAX.to_string()] {
        let r = api.get(Who::Owner, &format!("/v1/workloads/{id}/logs?offset={offset}")).await.expect(200);
        assert_eq!(r.text, "", "offset {offset}");
        let next = r.headers.get("x-canopy-next-offset").and_then(|v| v.to_str().ok());
        assert_eq!(next, Some(offset), "offset {offset}");
    }
    api.finish().await;
}
