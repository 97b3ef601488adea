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
