//! The API's OpenAPI 3.1 document, derived from the route table the router
//! and the authorization layer use ([`ROUTES`]) and from the types the
//! handlers take and return: [`contract`] ties each route to its query
//! type, body type and answer type, and the schemas are schemars' output
//! for those same types (the spec's included), generated straight into
//! `components.schemas`. `docs/openapi.json` is this document; a test
//! keeps them equal (`CANOPY_BLESS=1 cargo test --test api_openapi`
//! rewrites it), and another runs `openapi-spec-validator` and
//! schemathesis against a served one (`tests/openapi_tools.rs`).

use super::api::{
    ArtifactView, AuditQuery, CommandAnswer, CordonBody, DrainBody, EventsQuery, Health, ListQuery, LogQuery,
    Page, ReasonBody, SubmitQuery, UnexcludeBody, WhoAmI, WorkloadView,
};
use super::authz::{Need, ROUTES};
use super::error::ErrorAnswer;
use super::tenants::TenantsView;
use super::tokens::{NewTokenRequest, NewTokenResponse, TokenView};
use super::usage::UsageQuery;
use crate::engine::model::{AuditRecord, EventRecord};
use crate::spec::Spec;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Where the schemas live in the document.
const SCHEMAS: &str = "/components/schemas";

/// A schema of one of the handlers' types, from a generator.
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// A query type's own schema, not kept among the components.
fn inline<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    T::json_schema(g)
}

/// What a request carries in its body.
#[derive(Clone, Copy)]
enum Body {
    None,
    /// A spec: TOML, or JSON as [`Spec`].
    Spec,
    /// The tenant tables: TOML, or JSON as [`crate::tenant::TenancyDoc`].
    Tenancy,
    /// JSON of this type; `true` when it must be there.
    Json(SchemaFn, bool),
}

/// What a 2xx answer carries.
#[derive(Clone, Copy)]
enum Answer {
    /// JSON of this type, with these statuses.
    Json(&'static [u16], SchemaFn),
    /// Text of this media type (a log, metrics, an event stream).
    Text(&'static str),
    /// A file's bytes.
    Bytes,
}

/// What one route takes and returns: the handler's own types.
#[derive(Clone, Copy)]
struct Contract {
    query: Option<SchemaFn>,
    body: Body,
    answer: Answer,
    /// Error statuses beyond those every route may answer (see [`operation`]).
    errors: &'static [u16],
}

const fn c(query: Option<SchemaFn>, body: Body, answer: Answer, errors: &'static [u16]) -> Contract {
    Contract { query, body, answer, errors }
}

/// The contract of each route of [`ROUTES`]; a test holds the two to
/// the same routes.
fn contract(method: &str, path: &str) -> Option<Contract> {
    const OK: &[u16] = &[200];
    let command = |body: SchemaFn| {
        c(None, Body::Json(body, false), Answer::Json(OK, of::<CommandAnswer>), &[409, 413, 422])
    };
    Some(match (method, path) {
        ("GET", "/healthz") => c(None, Body::None, Answer::Json(OK, of::<Health>), &[503]),
        ("GET", "/metrics") => c(None, Body::None, Answer::Text("text/plain"), &[]),
        ("GET", "/v1/openapi.json") => c(None, Body::None, Answer::Json(OK, openapi_schema), &[]),
        ("GET", "/v1/whoami") => c(None, Body::None, Answer::Json(OK, of::<WhoAmI>), &[]),
        ("POST", "/v1/workloads") => c(
            Some(inline::<SubmitQuery>),
            Body::Spec,
            Answer::Json(&[200, 201], of::<WorkloadView>),
            &[409, 413, 422, 503],
        ),
        ("GET", "/v1/workloads") => {
            c(Some(inline::<ListQuery>), Body::None, Answer::Json(OK, of::<Page>), &[])
        }
        ("GET", "/v1/workloads/{id}") => c(None, Body::None, Answer::Json(OK, of::<WorkloadView>), &[]),
        ("GET", "/v1/workloads/{id}/events") => {
            c(None, Body::None, Answer::Json(OK, of::<Vec<EventRecord>>), &[])
        }
        ("GET", "/v1/workloads/{id}/logs") => {
            c(Some(inline::<LogQuery>), Body::None, Answer::Text("text/plain"), &[])
        }
        ("GET", "/v1/workloads/{id}/artifacts") => {
            c(None, Body::None, Answer::Json(OK, of::<Vec<ArtifactView>>), &[])
        }
        ("GET", "/v1/workloads/{id}/artifacts/{attempt}/{name}") => {
            c(None, Body::None, Answer::Bytes, &[422])
        }
        (
            "POST",
            "/v1/workloads/{id}/cancel" | "/v1/workloads/{id}/retry" | "/v1/workloads/{id}/acknowledge",
        ) => command(of::<ReasonBody>),
        ("POST", "/v1/workloads/{id}/unexclude") => command(of::<UnexcludeBody>),
        ("POST", "/v1/plan") => c(None, Body::Spec, Answer::Json(OK, plan_schema), &[413, 422, 503]),
        ("GET", "/v1/fleet") => c(None, Body::None, Answer::Json(OK, fleet_schema), &[503]),
        ("GET", "/v1/events") => {
            c(Some(inline::<EventsQuery>), Body::None, Answer::Json(OK, of::<Vec<EventRecord>>), &[])
        }
        ("POST", "/v1/nodes/{name}/cordon") => command(of::<CordonBody>),
        ("POST", "/v1/nodes/{name}/drain") => command(of::<DrainBody>),
        ("POST", "/v1/nodes/{name}/uncordon" | "/v1/nodes/{name}/unquarantine") => command(of::<ReasonBody>),
        ("GET", "/v1/stream") => c(None, Body::None, Answer::Text("text/event-stream"), &[]),
        ("GET", "/v1/audit") => {
            c(Some(inline::<AuditQuery>), Body::None, Answer::Json(OK, of::<Vec<AuditRecord>>), &[])
        }
        ("GET", "/v1/tokens") => c(None, Body::None, Answer::Json(OK, of::<Vec<TokenView>>), &[]),
        ("POST", "/v1/tokens") => c(
            None,
            Body::Json(of::<NewTokenRequest>, true),
            Answer::Json(&[201], of::<NewTokenResponse>),
            &[409, 413, 422],
        ),
        ("DELETE", "/v1/tokens/{name}") => c(None, Body::None, Answer::Json(OK, of::<CommandAnswer>), &[]),
        ("GET", "/v1/tenants") => c(None, Body::None, Answer::Json(OK, of::<TenantsView>), &[]),
        ("PUT", "/v1/tenants") => c(None, Body::Tenancy, Answer::Json(OK, of::<TenantsView>), &[413, 422]),
        ("GET", "/v1/usage") => c(
            Some(inline::<UsageQuery>),
            Body::None,
            Answer::Json(OK, of::<crate::usage::report::Report>),
            &[],
        ),
        ("GET", "/v1/servers") => {
            c(None, Body::None, Answer::Json(OK, of::<super::servers::ServersView>), &[503])
        }
        _ => return None,
    })
}

/// This document: an object (its own schema is OpenAPI's).
fn openapi_schema(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({ "type": "object", "required": ["openapi", "paths"] })
}

/// `POST /v1/plan`'s answer: the scheduler's decision (its candidates and
/// scores, or why nothing fits) with the spec's name, whether it fits and
/// the spec's warnings.
fn plan_schema(g: &mut SchemaGenerator) -> Schema {
    let warnings = g.subschema_for::<Vec<crate::spec::load::Diagnostic>>();
    schemars::json_schema!({
        "type": "object",
        "required": ["decision", "spec", "fits", "warnings"],
        "properties": {
            "decision": { "type": "string", "enum": ["placed", "unschedulable"],
                "description": "placed: `candidates` ranks where it would run (the first is the placement) with `considered`; unschedulable: `explanation` says why nothing fits." },
            "spec": { "type": "string", "description": "The spec's name." },
            "fits": { "type": "boolean", "description": "Whether it would be placed now." },
            "warnings": warnings,
            "candidates": { "type": "array", "items": { "type": "object" } },
            "considered": { "type": "object" },
        }
    })
}

/// `GET /v1/fleet`'s answer: the engine's fleet status as the console
/// reads it.
fn fleet_schema(g: &mut SchemaGenerator) -> Schema {
    let millis = g.subschema_for::<crate::engine::model::Millis>();
    schemars::json_schema!({
        "type": "object",
        "required": ["at", "fleet", "health", "blocked", "unreachable"],
        "properties": {
            "at": millis,
            "fleet": { "type": "object", "description": "Providers, pools and nodes with their states and allocations." },
            "health": { "type": "object", "description": "Each node's and pool's health: quarantines, failure rates." },
            "blocked": { "type": "integer", "minimum": 0, "description": "Workloads waiting because nothing fits them now." },
            "unreachable": { "type": "object", "additionalProperties": { "type": "string" },
                "description": "Providers whose last status call failed, with the error." },
            "unreachable_since": { "type": "object", "additionalProperties": { "type": "integer" } },
            "intents": { "type": "object", "additionalProperties": { "type": "object" },
                "description": "Operators' standing cordons and drains by node: who, when, why, until." },
            "unknown_attempts": { "type": "object", "additionalProperties": { "type": "string" } },
            "fair_share": { "type": "array", "items": { "type": "object" } },
            "demand": { "type": "object", "description": "GPUs of the live work (waiting or running) by GPUs per node, which placement's fit factor reads.",
                "properties": { "gpus_by_width": { "type": "array", "items": { "type": "integer", "minimum": 0 } } } },
        }
    })
}

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
    json!({ "description": desc, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/ErrorAnswer" } } } })
}

fn error_text(code: u16) -> &'static str {
    match code {
        400 => "The request is malformed: a query parameter, path or header (`field` names it)",
        401 => "No valid token (TCP only)",
        403 => "The principal's role or scopes do not allow it",
        404 => "No such workload, attempt, node or token (or one the caller may not see)",
        409 => "It clashes with the current state",
        413 => "The body is over its size limit",
        422 => "The body does not parse or validate; `field` (and for a spec `problems`) say where",
        503 => "The engine has not published its fleet yet, or the store cannot be read; try again",
        _ => "Error",
    }
}

/// A query type's fields as query parameters: each property its own
/// parameter, its description moved up, `null` left out (a parameter is
/// either there or not).
fn query_parameters(g: &mut SchemaGenerator, query: SchemaFn) -> Vec<Value> {
    let schema = query(g);
    let obj = resolve(g, schema.to_value());
    let required: Vec<Value> = obj.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(Value::Object(props)) = obj.get("properties") else { return Vec::new() };
    props
        .iter()
        .map(|(name, s)| {
            let mut s = s.clone();
            not_null(&mut s);
            integer_bounds(&mut s);
            let description = s.as_object_mut().and_then(|o| o.remove("description"));
            let mut p = json!({ "name": name, "in": "query", "required": required.contains(&json!(name)), "schema": s });
            if let Some(d) = description {
                p["description"] = d;
            }
            p
        })
        .collect()
}

/// The schema itself where `schema` is a reference into the generator's
/// definitions.
fn resolve(g: &SchemaGenerator, schema: Value) -> Value {
    let name = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#"))
        .and_then(|r| r.strip_prefix(SCHEMAS))
        .and_then(|r| r.strip_prefix('/'));
    match name.and_then(|n| g.definitions().get(n)) {
        Some(def) => def.clone(),
        None => schema,
    }
}

/// An integer parameter's range, from its Rust type's format: a query
/// string with a larger number does not parse (400), so the document
/// says where valid values end.
fn integer_bounds(s: &mut Value) {
    let Some(obj) = s.as_object_mut() else { return };
    if obj.get("type") != Some(&json!("integer")) {
        return;
    }
    let (min, max): (Value, Value) = match obj.get("format").and_then(Value::as_str) {
        Some("uint8") => (0.into(), u8::MAX.into()),
        Some("uint16") => (0.into(), u16::MAX.into()),
        Some("uint32") => (0.into(), u32::MAX.into()),
        Some("uint" | "uint64") => (0.into(), u64::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("int64") => (i64::MIN.into(), i64::MAX.into()),
        _ => return,
    };
    obj.entry("minimum").or_insert(min);
    obj.entry("maximum").or_insert(max);
}

/// Drops `null` from a schema's types: `[T, null]` → `T`, and
/// `anyOf: [S, {type: null}]` → `S`.
fn not_null(s: &mut Value) {
    let Some(obj) = s.as_object_mut() else { return };
    if let Some(Value::Array(types)) = obj.get_mut("type") {
        types.retain(|t| t != "null");
        if types.len() == 1 {
            let only = types.remove(0);
            obj.insert("type".into(), only);
        }
    }
    if let Some(Value::Array(options)) = obj.get("anyOf")
        && options.len() == 2
        && let Some(keep) = options.iter().find(|o| **o != json!({ "type": "null" }))
        && options.contains(&json!({ "type": "null" }))
        && let Value::Object(keep) = keep.clone()
    {
        obj.remove("anyOf");
        for (k, v) in keep {
            obj.entry(k).or_insert(v);
        }
    }
}

fn path_parameters(path: &str) -> Vec<Value> {
    path.split('/')
        .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
        .map(|name| {
            let (schema, d) = match name {
                // Ids are SQLite integers: 63 bits, so at most 18 digits here.
                "id" => (
                    json!({ "type": "string", "pattern": "^(w-)?[0-9]{1,18}$" }),
                    "The workload: `w-17` (or `17`)",
                ),
                "attempt" => {
                    (json!({ "type": "integer", "minimum": 1, "maximum": u32::MAX }), "The attempt's number")
                }
                "name" if path.starts_with("/v1/nodes/") => (json!({ "type": "string" }), "The node's name"),
                "name" if path.starts_with("/v1/tokens/") => {
                    (json!({ "type": "string" }), "The token's name")
                }
                _ => (json!({ "type": "string" }), "The output's name"),
            };
            json!({ "name": name, "in": "path", "required": true, "description": d, "schema": schema })
        })
        .collect()
}

/// The two generators: answers are described as they are written
/// (serialize), bodies and queries as they are read (deserialize).
struct Generators {
    out: SchemaGenerator,
    input: SchemaGenerator,
}

fn generator(input: bool) -> SchemaGenerator {
    let settings = SchemaSettings::draft2020_12().with(|s| s.definitions_path = SCHEMAS.into());
    if input { settings.for_deserialize() } else { settings.for_serialize() }.into_generator()
}

fn operation(g: &mut Generators, method: &str, path: &str, need: Need, summary: &str, k: Contract) -> Value {
    let mut params = path_parameters(path);
    if let Some(q) = k.query {
        params.extend(query_parameters(&mut g.input, q));
    }
    let mut responses = Map::new();
    match k.answer {
        Answer::Json(statuses, schema) => {
            let schema = schema(&mut g.out).to_value();
            for s in statuses {
                let desc = match (method, *s) {
                    ("POST", 201) if path == "/v1/workloads" => {
                        "Submitted; committed to the journal (fsync'd)"
                    }
                    ("POST", 200) if path == "/v1/workloads" => {
                        "The workload an earlier request with this Idempotency-Key submitted"
                    }
                    (_, 201) => "Created",
                    _ => "OK",
                };
                responses.insert(
                    s.to_string(),
                    json!({ "description": desc, "content": { "application/json": { "schema": schema } } }),
                );
            }
        }
        Answer::Text(media) => {
            responses.insert(
                "200".into(),
                json!({ "description": "OK", "content": { media: { "schema": { "type": "string" } } } }),
            );
        }
        Answer::Bytes => {
            responses.insert(
                "200".into(),
                json!({ "description": "The file", "content": { "application/octet-stream": { "schema": { "type": "string", "format": "binary" } } } }),
            );
        }
    }
    let mut errors: Vec<u16> = k.errors.to_vec();
    if need != Need::Public {
        errors.extend([400, 401, 403]);
    }
    if path.contains('{') {
        errors.push(404);
    }
    if matches!(need, Need::ReadWorkload | Need::OwnWorkload | Need::Node) {
        // The facts a decision needs could not be read.
        errors.push(503);
    }
    errors.sort_unstable();
    errors.dedup();
    for e in errors {
        responses.insert(e.to_string(), error_response(error_text(e)));
    }
    let mut op = json!({
        "summary": summary,
        "operationId": format!("{}{}", method.to_lowercase(), path.replace(['/', '{', '}', '.'], "_")),
        "x-canopy-role": role(need),
        "parameters": params,
        "responses": responses,
    });
    if need == Need::Public {
        op["security"] = json!([]);
    }
    match k.body {
        Body::None => {}
        Body::Spec => {
            let spec = of::<Spec>(&mut g.input).to_value();
            op["requestBody"] = json!({ "required": true, "content": {
                "application/toml": { "schema": { "type": "string" } },
                "application/json": { "schema": spec } } });
        }
        Body::Tenancy => {
            let doc = of::<crate::tenant::TenancyDoc>(&mut g.input).to_value();
            op["requestBody"] = json!({ "required": true, "content": {
                "application/toml": { "schema": { "type": "string" } },
                "application/json": { "schema": doc } } });
        }
        Body::Json(schema, required) => {
            let schema = schema(&mut g.input).to_value();
            op["requestBody"] =
                json!({ "required": required, "content": { "application/json": { "schema": schema } } });
        }
    }
    extras(&mut op, method, path);
    op
}

/// What the types cannot say: headers, and the words of a few answers.
fn extras(op: &mut Value, method: &str, path: &str) {
    let params = |op: &mut Value| -> Vec<Value> { op["parameters"].as_array().cloned().unwrap_or_default() };
    match (method, path) {
        ("POST", "/v1/workloads") => {
            let mut p = params(op);
            p.push(json!({ "name": "Idempotency-Key", "in": "header", "required": false,
                "description": "Scoped to the principal and kept for the life of the store: the same key and spec return the same workload (200), another spec is 409.",
                "schema": { "type": "string", "minLength": 1, "maxLength": 256 } }));
            op["parameters"] = Value::Array(p);
            op["responses"]["422"]["description"] =
                "The spec does not parse or validate (`problems` has each with line and column), or nothing could ever run it (`unschedulable`)".into();
        }
        ("GET", "/v1/workloads/{id}/logs") => {
            let r = &mut op["responses"]["200"];
            r["description"] =
                "Log bytes; without follow, X-Canopy-Next-Offset says where the next read starts".into();
            r["headers"] = json!({
                "X-Canopy-Next-Offset": { "description": "Where the next read starts (without follow)",
                    "schema": { "type": "integer" } },
                "X-Canopy-Log-Times": { "description": "When the bytes were written (without follow; absent for logs shipped before times were kept): OFFSET:MILLIS pairs, comma-separated, oldest first. Each is the byte offset where a chunk of the log starts and when Canopy first read it from the provider (Unix milliseconds); the first covers the read's start. A line's time is that of the chunk holding its first byte. A read spanning very many chunks is cut short where the times would no longer fit.",
                    "schema": { "type": "string" } }
            });
        }
        ("GET", "/v1/stream") => {
            let mut p = params(op);
            p.push(json!({ "name": "Last-Event-ID", "in": "header", "required": false,
                "description": "STORE:SEQ of the last batch seen; the stream resumes after it",
                "schema": { "type": "string" } }));
            op["parameters"] = Value::Array(p);
            op["responses"]["200"]["description"] =
                "Server-sent events: hello, batch (id STORE:SEQ), status, resync".into();
        }
        ("GET", "/v1/usage") => {
            op["x-canopy-role"] = json!(
                "viewer (with tenants: its tenant's workloads; operator also within scopes; admin all; an owner also its owner line)"
            );
            op["responses"]["200"]["description"] = "The report: groups, total and owners. Figures are integers (GPU-milliseconds, CPU core-milliseconds, millionths of a dollar) so the groups sum to the total exactly; see docs/usage.md".into();
        }
        _ => {}
    }
}

/// Merges the two generators' definitions: one name for a type both
/// describe alike; where reading and writing differ (fields with defaults
/// are optional to send but always written), the written form is
/// `NameOutput` and every reference from an answer to it says so.
fn merge(g: Generators, paths: &mut Map<String, Value>) -> Map<String, Value> {
    let Generators { mut out, mut input } = g;
    let mut schemas = input.take_definitions(true);
    let mut written = out.take_definitions(true);
    written.values_mut().for_each(null_means_unset);
    let renamed: BTreeMap<String, String> = written
        .iter()
        .filter(|(name, def)| schemas.get(*name).is_some_and(|d| d != *def))
        .map(|(name, _)| (name.clone(), format!("{name}Output")))
        .collect();
    for (name, mut def) in written {
        rename_refs(&mut def, &renamed);
        let name = renamed.get(&name).cloned().unwrap_or(name);
        schemas.entry(name).or_insert(def);
    }
    for op in paths.values_mut().filter_map(Value::as_object_mut).flat_map(|item| item.values_mut()) {
        if let Some(v) = op.get_mut("responses") {
            rename_refs(v, &renamed);
        }
    }
    schemas.values_mut().for_each(present_means_not_null);
    schemas.sort_keys();
    schemas
}

/// An answer writes an unset optional field as `null` where the type
/// says nothing of it (a spec's `gpu_memory_gb = { min = 24 }` is written
/// `{"min": 24, "max": null}`): in what answers carry, each property that
/// may be left out may also be `null`.
fn null_means_unset(v: &mut Value) {
    match v {
        Value::Object(obj) => {
            let required: Vec<Value> =
                obj.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
            if let Some(Value::Object(props)) = obj.get_mut("properties") {
                for (name, p) in props.iter_mut() {
                    if !required.contains(&json!(name)) && !allows_null(p) {
                        *p = json!({ "anyOf": [p.take(), { "type": "null" }] });
                    }
                }
            }
            obj.values_mut().for_each(null_means_unset);
        }
        Value::Array(items) => items.iter_mut().for_each(null_means_unset),
        _ => {}
    }
}

fn allows_null(p: &Value) -> bool {
    let null = json!("null");
    match p {
        Value::Bool(b) => *b,
        Value::Object(o) => {
            o.is_empty()
                || o.get("type")
                    .is_some_and(|t| *t == null || t.as_array().is_some_and(|a| a.contains(&null)))
                || o.get("anyOf").and_then(Value::as_array).is_some_and(|a| a.iter().any(allows_null))
        }
        _ => false,
    }
}

/// The spec's cross-field rules (`if` a field is set `then` …) test that
/// the field is there; an answer writes an unset field as `null` (and a
/// JSON body may send one), which serde reads as unset. In each `if`,
/// "there" becomes "there and not null", so the rules hold for both.
fn present_means_not_null(v: &mut Value) {
    match v {
        Value::Object(obj) => {
            if let Some(cond) = obj.get_mut("if") {
                not_null_where_required(cond);
            }
            obj.values_mut().for_each(present_means_not_null);
        }
        Value::Array(items) => items.iter_mut().for_each(present_means_not_null),
        _ => {}
    }
}

fn not_null_where_required(v: &mut Value) {
    match v {
        Value::Object(obj) => {
            let required: Vec<String> = match obj.get("required") {
                Some(Value::Array(r)) => r.iter().filter_map(|n| n.as_str().map(str::to_string)).collect(),
                _ => Vec::new(),
            };
            for (k, sub) in obj.iter_mut() {
                if k != "properties" {
                    not_null_where_required(sub);
                }
            }
            if required.is_empty() {
                return;
            }
            let props = obj.entry("properties").or_insert_with(|| json!({}));
            let Some(props) = props.as_object_mut() else { return };
            for name in required {
                let not_null = json!({ "not": { "type": "null" } });
                match props.get_mut(&name) {
                    None => {
                        props.insert(name, not_null);
                    }
                    Some(p) => *p = json!({ "allOf": [p.take(), not_null] }),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(not_null_where_required),
        _ => {}
    }
}

fn rename_refs(v: &mut Value, renamed: &BTreeMap<String, String>) {
    match v {
        Value::Object(obj) => {
            if let Some(Value::String(r)) = obj.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
                && let Some(new) = renamed.get(name)
            {
                *r = format!("#/components/schemas/{new}");
            }
            obj.values_mut().for_each(|v| rename_refs(v, renamed));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, renamed)),
        _ => {}
    }
}

/// The document, as pretty JSON with a trailing newline.
pub fn document() -> String {
    let mut g = Generators { out: generator(false), input: generator(true) };
    // The error answer, written by every handler.
    of::<ErrorAnswer>(&mut g.out);
    let mut paths = Map::new();
    for r in ROUTES {
        let Some(k) = contract(r.method, r.path) else { continue };
        let op = operation(&mut g, r.method, r.path, r.need, r.summary, k);
        let entry = paths.entry(r.path.to_string()).or_insert_with(|| json!({}));
        entry[r.method.to_lowercase()] = op;
    }
    let schemas = merge(g, &mut paths);
    let doc = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Canopy API",
            "version": "1",
            "description": "Canopy as a service. On the store's socket (<store>/canopy.sock) the caller is the store's owner (admin); over TCP every request but /healthz and /v1/openapi.json carries `Authorization: Bearer TOKEN`. Errors are {\"error\": {\"code\", \"message\", \"field\"?}} (ErrorAnswer). An unsupported method on a known path is 405 with an Allow header; HEAD works wherever GET does. A 2xx to a state-changing request means the change is committed to the journal with an fsync. /v1 only grows."
        },
        "servers": [{ "url": "http://127.0.0.1:7878" }],
        "security": [{ "bearer": [] }],
        "paths": paths,
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "schemas": schemas,
        }
    });
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
    s.push('\n');
    s
}

/// `GET /v1/openapi.json`.
pub async fn serve() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_has_a_contract_and_every_contract_a_route() {
        for r in ROUTES {
            assert!(contract(r.method, r.path).is_some(), "{} {} has no contract", r.method, r.path);
        }
        assert!(contract("GET", "/v1/nope").is_none());
    }

    /// The per-command bodies the document shows are read as one
    /// [`super::super::views::Reason`]: every field they name is one of its.
    #[test]
    fn command_bodies_name_only_fields_the_handler_reads() {
        let mut g = generator(true);
        let reason = of::<super::super::views::Reason>(&mut g).to_value();
        let reason = resolve(&g, reason);
        let known: Vec<&String> =
            reason["properties"].as_object().map(|p| p.keys().collect()).unwrap_or_default();
        assert!(!known.is_empty());
        for body in [of::<ReasonBody>, of::<UnexcludeBody>, of::<CordonBody>, of::<DrainBody>] {
            let b = body(&mut g).to_value();
            let b = resolve(&g, b);
            for field in b["properties"].as_object().into_iter().flat_map(|p| p.keys()) {
                assert!(known.contains(&field), "{field} is documented but Reason does not read it");
            }
        }
    }
}
