//! The tools: their names, what they take (schemars types, the API's own
//! where it has one) and which API route each maps onto. Which tools a
//! caller is offered follows from those routes' entries in the
//! authorization table ([`authz::ROUTES`]): a tool is offered to a role
//! that every route it calls allows, so a viewer sees read-only tools only.
//! Offering is a courtesy; the API decides each call.

use crate::server::api::ListQuery;
use crate::server::auth::Role;
use crate::server::authz;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use std::sync::Arc;

/// One tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    /// The API routes (`METHOD /path` as in [`authz::ROUTES`]) it calls.
    pub routes: &'static [(&'static str, &'static str)],
    /// Changes something (submits, cancels, retries).
    pub mutating: bool,
    /// Takes a two-step confirmation ([`super::confirm`]): always for
    /// `cancel`, above the cost threshold for `submit`.
    pub destructive: bool,
    schema: fn() -> JsonObject,
}

impl ToolDef {
    /// The least role every route it calls allows.
    pub fn least_role(&self) -> Role {
        self.routes
            .iter()
            .filter_map(|(m, p)| authz::ROUTES.iter().find(|r| r.method == *m && r.path == *p))
            .filter_map(|r| authz::least_role(r.need))
            .max()
            .unwrap_or(Role::Viewer)
    }

    /// As MCP lists it.
    pub fn tool(&self) -> Tool {
        let ann = ToolAnnotations::new()
            .read_only(!self.mutating)
            .destructive(self.destructive)
            .idempotent(!self.mutating || self.name == "submit")
            .open_world(false);
        Tool::new(self.name, self.description, Arc::new((self.schema)())).with_annotations(ann)
    }
}

fn schema<T: JsonSchema>() -> JsonObject {
    let s = schemars::schema_for!(T);
    match serde_json::to_value(s) {
        Ok(serde_json::Value::Object(o)) => o,
        _ => JsonObject::new(),
    }
}

const WORKLOAD: &str = "/v1/workloads/{id}";

/// Every tool, in the order they are listed.
pub const TOOLS: &[ToolDef] = &[
    ToolDef {
        name: "plan",
        description: "Where a spec would run now (a dry run): the ranked candidates with their cost, startup \
                      time and score breakdown, or why nothing fits.",
        routes: &[("POST", "/v1/plan")],
        mutating: false,
        destructive: false,
        schema: schema::<PlanInput>,
    },
    ToolDef {
        name: "submit",
        description: "Submit a workload spec (TOML text or a JSON object) with an idempotency key; answers the \
                      workload and the plan it was placed by. Above the server's cost threshold it first \
                      answers the plan and a confirmation id: call again with `confirm` to submit.",
        routes: &[("POST", "/v1/plan"), ("POST", "/v1/workloads")],
        mutating: true,
        destructive: true,
        schema: schema::<SubmitInput>,
    },
    ToolDef {
        name: "status",
        description: "One workload: its state, reason, attempts and placements.",
        routes: &[("GET", WORKLOAD)],
        mutating: false,
        destructive: false,
        schema: schema::<IdInput>,
    },
    ToolDef {
        name: "list",
        description: "Workloads, newest first, with filters (state, name, label, provider, submitted_by, \
                      tenant, unresolved) and a cursor for the next page.",
        routes: &[("GET", "/v1/workloads")],
        mutating: false,
        destructive: false,
        schema: schema::<ListQuery>,
    },
    ToolDef {
        name: "explain",
        description: "Why a workload waits (its reason, queue position, budget or quota hold) or why it was \
                      placed where it was (each attempt's pool, node, price and the placement events).",
        routes: &[("GET", WORKLOAD), ("GET", "/v1/workloads/{id}/events")],
        mutating: false,
        destructive: false,
        schema: schema::<IdInput>,
    },
    ToolDef {
        name: "logs",
        description: "A bounded read of an attempt's log: by default the last `limit` bytes (a tail); with \
                      `offset`, from there. Answers `next_offset` to continue from. Control characters are \
                      replaced.",
        routes: &[("GET", "/v1/workloads/{id}/logs")],
        mutating: false,
        destructive: false,
        schema: schema::<LogsInput>,
    },
    ToolDef {
        name: "events",
        description: "A workload's events, oldest first; without `id`, the newest events across the workloads \
                      the caller may see.",
        routes: &[("GET", "/v1/workloads/{id}/events"), ("GET", "/v1/events")],
        mutating: false,
        destructive: false,
        schema: schema::<EventsInput>,
    },
    ToolDef {
        name: "artifacts",
        description: "A workload's collected outputs. Small text files are readable as MCP resources (their \
                      `uri`, canopy://workloads/{id}/artifacts/{attempt}/{name}).",
        routes: &[("GET", "/v1/workloads/{id}/artifacts")],
        mutating: false,
        destructive: false,
        schema: schema::<IdInput>,
    },
    ToolDef {
        name: "cancel",
        description: "Cancel a workload, in two steps: the first call answers what would be cancelled and a \
                      confirmation id (good for 2 minutes); call again with `confirm` to cancel.",
        routes: &[("POST", "/v1/workloads/{id}/cancel")],
        mutating: true,
        destructive: true,
        schema: schema::<CancelInput>,
    },
    ToolDef {
        name: "retry",
        description: "Submit an ended workload's spec again.",
        routes: &[("POST", "/v1/workloads/{id}/retry")],
        mutating: true,
        destructive: false,
        schema: schema::<RetryInput>,
    },
    ToolDef {
        name: "fleet",
        description: "The fleet: capacity by provider and pool (nodes, GPUs free and in use, cordons, \
                      quarantines) and health.",
        routes: &[("GET", "/v1/fleet")],
        mutating: false,
        destructive: false,
        schema: schema::<FleetInput>,
    },
];

/// The tool named `name`.
pub fn find(name: &str) -> Option<&'static ToolDef> {
    TOOLS.iter().find(|t| t.name == name)
}

/// The tools offered to `role`.
pub fn offered(role: Role) -> impl Iterator<Item = &'static ToolDef> {
    TOOLS.iter().filter(move |t| role >= t.least_role())
}

/// A spec: TOML text, or JSON (text or an object).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum SpecInput {
    /// TOML (or JSON) text, as a spec file holds it.
    Text(String),
    /// The spec as a JSON object.
    Object(#[schemars(with = "crate::spec::Spec")] serde_json::Map<String, serde_json::Value>),
}

impl SpecInput {
    /// The body and content type the API takes it as.
    pub fn body(&self) -> (Vec<u8>, &'static str) {
        match self {
            SpecInput::Object(o) => (serde_json::to_vec(o).unwrap_or_default(), "application/json"),
            SpecInput::Text(t) if t.trim_start().starts_with('{') => {
                (t.as_bytes().to_vec(), "application/json")
            }
            SpecInput::Text(t) => (t.as_bytes().to_vec(), "application/toml"),
        }
    }
}

/// `plan`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanInput {
    pub spec: SpecInput,
}

/// `submit`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitInput {
    pub spec: SpecInput,
    /// Required: the same key with the same spec answers the same workload,
    /// so a retried call never submits twice.
    pub idempotency_key: String,
    /// The confirmation id a first call answered (above the cost threshold).
    #[serde(default)]
    pub confirm: Option<String>,
}

/// A workload's id (`w-17`).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdInput {
    pub id: String,
}

/// `logs`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogsInput {
    pub id: String,
    /// `stdout` (default) or `stderr`.
    #[serde(default)]
    pub stream: Option<crate::engine::handle::Stream>,
    /// The attempt's number; the latest by default.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// Read from this byte offset (a previous answer's `next_offset`);
    /// without it, the log's last `limit` bytes.
    #[serde(default)]
    pub offset: Option<u64>,
    /// At most this many bytes (default 16 KiB, at most 256 KiB).
    #[serde(default)]
    #[schemars(range(min = 1, max = 262144))]
    pub limit: Option<usize>,
}

/// `events`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsInput {
    /// A workload's id; without it, the newest events of all.
    #[serde(default)]
    pub id: Option<String>,
    /// At most this many (default 200, at most 10,000), the newest.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// `cancel`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelInput {
    pub id: String,
    /// Why, for the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
    /// The confirmation id the first call answered.
    #[serde(default)]
    pub confirm: Option<String>,
}

/// `retry`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryInput {
    pub id: String,
    /// Why, for the audit trail.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `fleet` takes nothing.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetInput {}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(role: Role) -> Vec<&'static str> {
        offered(role).map(|t| t.name).collect()
    }

    #[test]
    fn a_viewer_is_offered_read_only_tools_and_a_submitter_all() {
        assert_eq!(
            names(Role::Viewer),
            ["plan", "status", "list", "explain", "logs", "events", "artifacts", "fleet"]
        );
        assert!(offered(Role::Viewer).all(|t| !t.mutating && !t.destructive));
        let all: Vec<&str> = TOOLS.iter().map(|t| t.name).collect();
        for role in [Role::Submitter, Role::Operator, Role::Admin] {
            assert_eq!(names(role), all, "{role}");
        }
    }

    #[test]
    fn every_route_a_tool_calls_is_in_the_authorization_table() {
        for t in TOOLS {
            for (m, p) in t.routes {
                assert!(
                    authz::ROUTES.iter().any(|r| r.method == *m && r.path == *p),
                    "{}: {m} {p} is not a route",
                    t.name
                );
            }
        }
    }

    #[test]
    fn each_tool_lists_with_an_object_schema_and_its_hints() {
        for t in TOOLS {
            let tool = t.tool();
            assert_eq!(tool.input_schema.get("type").and_then(|v| v.as_str()), Some("object"), "{}", t.name);
            let ann = tool.annotations.expect("annotations");
            assert_eq!(ann.read_only_hint, Some(!t.mutating), "{}", t.name);
        }
        // submit's spec takes the API's own spec schema.
        let submit = find("submit").map(ToolDef::tool).expect("submit");
        let text = serde_json::to_string(&submit.input_schema).unwrap_or_default();
        assert!(text.contains("idempotency_key") && text.contains("\"Spec\""), "{text}");
    }
}
