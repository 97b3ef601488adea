//! The API's OpenAPI 3.1 document, generated from the route table the
//! router and the authorization layer use ([`ROUTES`]) and from the spec's
//! JSON Schema. `docs/openapi.json` is this document; a test keeps them
//! equal (`CANOPY_BLESS=1 cargo test` rewrites it).

use super::authz::{Need, ROUTES};
use serde_json::{Value, json};

fn role(need: Need) -> &'static str {
    match need {
        Need::Public => "anyone (no token)",
        Need::Read => "viewer",
        Need::ReadWorkload => {
            "viewer (with tenants: its tenant's workloads; operator also within scopes; admin all)"
        }
        Need::Submit => "submitter",
        Need::Audit => "operator",
        Need::OwnWorkload => "submitter (own workloads); operator (within scopes); admin",
        Need::Node => "operator (within scopes); admin",
        Need::Admin => "admin",
    }
}

fn error_response(desc: &str) -> Value {
    json!({ "description": desc, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } })
}

fn operation(method: &str, path: &str, need: Need, summary: &str) -> Value {
    let params: Vec<Value> = path
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
        .collect();
    let mut op = json!({
        "summary": summary,
        "operationId": format!("{}{}", method.to_lowercase(), path.replace(['/', '{', '}', '.'], "_")),
        "x-canopy-role": role(need),
        "parameters": params,
        "responses": {
            "200": { "description": "OK" },
            "400": error_response("The request is malformed"),
            "401": error_response("No valid token (TCP only)"),
            "403": error_response("The principal's role or scopes do not allow it"),
        }
    });
    if need == Need::Public {
        op["security"] = json!([]);
    }
    let spec_body = json!({
        "required": true,
        "content": {
            "application/toml": { "schema": { "type": "string" } },
            "application/json": { "schema": { "$ref": "#/components/schemas/Spec" } }
        }
    });
    match (method, path) {
        ("POST", "/v1/workloads") => {
            op["requestBody"] = spec_body;
            op["parameters"] = json!([{ "name": "Idempotency-Key", "in": "header", "required": false,
                "description": "Scoped to the principal and kept for the life of the store: the same key and spec return the same workload (200), another spec is 409.",
                "schema": { "type": "string", "maxLength": 256 } }]);
            let r = &mut op["responses"];
            r["201"] = json!({ "description": "Submitted; committed to the journal (fsync'd)" });
            r["200"] = json!({ "description": "The workload an earlier request with this key submitted" });
            r["409"] = error_response("The idempotency key was used with another spec");
            r["413"] = error_response("The body is over the spec size limit");
            r["422"] = error_response(
                "The spec does not parse or validate; `problems` has each with line and column",
            );
        }
        ("POST", "/v1/plan") => {
            op["requestBody"] = spec_body;
            op["responses"]["422"] = error_response("The spec does not parse or validate");
        }
        ("GET", "/v1/workloads") => {
            op["parameters"] = json!(["state", "name", "label", "provider", "submitted_by", "limit", "cursor"]
                .iter()
                .map(|n| json!({ "name": n, "in": "query", "required": false, "schema": { "type": "string" } }))
                .collect::<Vec<_>>());
        }
        ("GET", "/v1/usage") => {
            op["x-canopy-role"] = json!(
                "viewer (with tenants: its tenant's workloads; operator also within scopes; admin all; an owner also its owner line)"
            );
            op["parameters"] = json!([
                { "name": "by", "in": "query", "required": false, "description": "Group by: tenant (default), owner, provider, pool, accelerator, user",
                    "schema": { "type": "string", "enum": ["tenant", "owner", "provider", "pool", "accelerator", "user"] } },
                { "name": "since", "in": "query", "required": false, "description": "Window start: RFC 3339, epoch ms, or a duration ago (30d); the beginning by default",
                    "schema": { "type": "string" } },
                { "name": "until", "in": "query", "required": false, "description": "Window end, not included: as since; now by default",
                    "schema": { "type": "string" } },
                { "name": "rows", "in": "query", "required": false, "description": "true: add the ledger's rows, one per attempt with time in the window, with their figures",
                    "schema": { "type": "boolean" } },
                { "name": "per_day", "in": "query", "required": false, "description": "true: add the same grouping per UTC day of the window (needs since; at most 400 days)",
                    "schema": { "type": "boolean" } }
            ]);
            op["responses"]["200"] = json!({ "description": "The report: groups, total and owners. Figures are integers (GPU-milliseconds, CPU core-milliseconds, millionths of a dollar) so the groups sum to the total exactly; see docs/usage.md" });
        }
        ("GET", "/v1/workloads/{id}/logs") => {
            let mut p = op["parameters"].as_array().cloned().unwrap_or_default();
            for n in ["stream", "attempt", "offset", "limit", "follow"] {
                p.push(
                    json!({ "name": n, "in": "query", "required": false, "schema": { "type": "string" } }),
                );
            }
            op["parameters"] = Value::Array(p);
            op["responses"]["200"] = json!({ "description": "Log bytes; header X-Canopy-Next-Offset says where the next read starts",
                "headers": {
                    "X-Canopy-Next-Offset": { "description": "Where the next read starts (without follow)",
                        "schema": { "type": "integer" } },
                    "X-Canopy-Log-Times": { "description": "When the bytes were written (without follow; absent for logs shipped before times were kept): OFFSET:MILLIS pairs, comma-separated, oldest first. Each is the byte offset where a chunk of the log starts and when Canopy first read it from the provider (Unix milliseconds); the first covers the read's start. A line's time is that of the chunk holding its first byte. A read spanning very many chunks is cut short where the times would no longer fit.",
                        "schema": { "type": "string" } }
                },
                "content": { "text/plain": { "schema": { "type": "string" } } } });
        }
        ("GET", "/v1/stream") => {
            op["parameters"] = json!([{ "name": "Last-Event-ID", "in": "header", "required": false,
                "description": "STORE:SEQ of the last batch seen; the stream resumes after it",
                "schema": { "type": "string" } }]);
            op["responses"]["200"] = json!({ "description": "Server-sent events: hello, batch (id STORE:SEQ), status, resync",
                "content": { "text/event-stream": { "schema": { "type": "string" } } } });
        }
        (_, p)
            if p.starts_with("/v1/nodes/")
                || p.ends_with("/cancel")
                || p.ends_with("/retry")
                || p.ends_with("/acknowledge")
                || p.ends_with("/unexclude") =>
        {
            op["requestBody"] = json!({ "required": false, "content": { "application/json": { "schema": {
                "type": "object", "properties": { "reason": { "type": "string" }, "until": { "type": "string" },
                    "node": { "type": "string", "description": "unexclude only: the node or pool to clear (all without it)" },
                    "evict": { "type": "boolean", "description": "drain only: stop running work and place it again" },
                    "grace": { "type": "string", "description": "evicting drain only: SIGTERM to SIGKILL, e.g. 30s" } } } } } });
            op["responses"]["404"] = error_response("No such workload or node");
            op["responses"]["409"] = error_response("It clashes with the current state");
        }
        _ => {}
    }
    op
}

/// The document, as pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut paths = serde_json::Map::new();
    for r in ROUTES {
        let entry = paths.entry(r.path.to_string()).or_insert_with(|| json!({}));
        entry[r.method.to_lowercase()] = operation(r.method, r.path, r.need, r.summary);
    }
    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Canopy API",
            "version": "1",
            "description": "Canopy as a service. On the store's socket (<store>/canopy.sock) the caller is the store's owner (admin); over TCP every request but /healthz and /v1/openapi.json carries `Authorization: Bearer TOKEN`. Errors are {\"error\": {\"code\", \"message\", \"field\"?}}. A 2xx to a state-changing request means the change is committed to the journal with an fsync. /v1 only grows."
        },
        "servers": [{ "url": "http://127.0.0.1:7878" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": { "error": { "type": "object", "required": ["code", "message"], "properties": {
                        "code": { "type": "string" }, "message": { "type": "string" }, "field": { "type": "string" },
                        "problems": { "type": "array", "items": { "type": "object" } } } } }
                },
                "Spec": crate::spec::load::schema(),
            }
        }
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}
