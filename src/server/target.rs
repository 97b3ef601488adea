//! What a request acts on, decoded once from its path.
//!
//! The authorization middleware decodes the path's parameters exactly once
//! (axum percent-decodes each segment), parses them into a [`Target`], and
//! hands that same value to the handler as an extension. Authorization
//! decides on it and the handler acts on it, so the two can never read
//! the path differently: `w%2D8` is `w-8` for both, and `w%252D8` is
//! `w%2D8`, which is no workload id, for both. A parameter that does not
//! parse is refused here, before any decision, never allowed for want of
//! facts.

use super::authz::Route;
use super::error::{ApiError, ApiResult};
use crate::engine::model::WorkloadId;
use std::fmt;

/// The thing a route's path names, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Target {
    /// The route has no path parameter.
    #[default]
    None,
    Workload(WorkloadId),
    /// One collected output file of one attempt.
    Artifact {
        workload: WorkloadId,
        attempt: u32,
        name: String,
    },
    Node(String),
    Token(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::None => Ok(()),
            Target::Workload(id) => write!(f, "{id}"),
            Target::Artifact { workload, attempt, name } => write!(f, "{workload}.{attempt}/{name}"),
            Target::Node(n) => f.write_str(n),
            Target::Token(n) => write!(f, "token {n}"),
        }
    }
}

impl Target {
    /// The workload this target is, or belongs to.
    pub fn workload(&self) -> ApiResult<WorkloadId> {
        match self {
            Target::Workload(id) | Target::Artifact { workload: id, .. } => Ok(*id),
            other => Err(mismatch("a workload", other)),
        }
    }

    /// The node this target is.
    pub fn node(&self) -> ApiResult<&str> {
        match self {
            Target::Node(n) => Ok(n),
            other => Err(mismatch("a node", other)),
        }
    }

    /// The token name this target is.
    pub fn token(&self) -> ApiResult<&str> {
        match self {
            Target::Token(n) => Ok(n),
            other => Err(mismatch("a token", other)),
        }
    }

    /// The audit trail's target: what the engine's own records name.
    pub fn audited(&self) -> Option<String> {
        match self {
            Target::None => None,
            Target::Token(n) => Some(n.clone()),
            other => Some(other.to_string()),
        }
    }
}

/// A handler asked for a target its route does not have: a programming
/// error, answered as one rather than acted on.
fn mismatch(want: &str, got: &Target) -> ApiError {
    ApiError::internal(format!("this endpoint acts on {want}, but its path named {got:?}"))
}

/// The longest parameter accepted: node and token names are far shorter.
const MAX_PARAM: usize = 256;

/// Parses the decoded path parameters of `route` into its target.
/// `params` are `(name, value)` as axum matched and percent-decoded them.
pub fn decode<'a>(route: &Route, params: impl IntoIterator<Item = (&'a str, &'a str)>) -> ApiResult<Target> {
    let mut id = None;
    let mut attempt = None;
    let mut name = None;
    for (key, value) in params {
        if value.len() > MAX_PARAM {
            return Err(
                ApiError::bad_request(format!("the path's {key} is over {MAX_PARAM} bytes")).field(key)
            );
        }
        if value.chars().any(char::is_control) {
            return Err(
                ApiError::bad_request(format!("the path's {key} holds a control character")).field(key)
            );
        }
        match key {
            "id" => id = Some(value.parse::<WorkloadId>().map_err(|e| ApiError::bad_request(e).field("id"))?),
            "attempt" => {
                attempt = Some(value.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{value:?} is not an attempt number; attempts count from 1"
                    ))
                    .field("attempt")
                })?)
            }
            "name" => name = Some(value.to_string()),
            // The command's name: the route itself, already matched on it.
            "op" => {}
            other => {
                return Err(ApiError::internal(format!(
                    "the route {} has an unknown parameter {other}",
                    route.path
                )));
            }
        }
    }
    let target = match (id, attempt, name) {
        (None, None, None) => Target::None,
        (Some(id), None, None) => Target::Workload(id),
        (Some(workload), Some(attempt), Some(name)) => Target::Artifact { workload, attempt, name },
        (None, None, Some(name)) if route.path.starts_with("/v1/nodes/") => Target::Node(name),
        (None, None, Some(name)) if route.path.starts_with("/v1/tokens/") => Target::Token(name),
        _ => {
            return Err(ApiError::internal(format!(
                "the route {} has parameters it cannot name",
                route.path
            )));
        }
    };
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::authz::ROUTES;

    fn route(path: &str) -> &'static Route {
        ROUTES.iter().find(|r| r.path == path).unwrap()
    }

    #[test]
    fn decoded_ids_parse_and_anything_else_is_refused() {
        let cancel = route("/v1/workloads/{id}/cancel");
        assert_eq!(
            decode(cancel, [("id", "w-8"), ("op", "cancel")]).unwrap(),
            Target::Workload(WorkloadId(8))
        );
        // What a double-encoded `w%252D8` decodes to once: no workload id.
        let e = decode(cancel, [("id", "w%2D8"), ("op", "cancel")]).unwrap_err();
        assert_eq!((e.status.as_u16(), e.body.field.as_deref()), (400, Some("id")));
        // Past 63 bits: refused, not a 500 from the store.
        let e = decode(cancel, [("id", "w-9223372036854775808")]).unwrap_err();
        assert_eq!(e.status.as_u16(), 400, "{}", e.body.message);
        let art = route("/v1/workloads/{id}/artifacts/{attempt}/{name}");
        assert_eq!(
            decode(art, [("id", "w-3"), ("attempt", "2"), ("name", "result")]).unwrap(),
            Target::Artifact { workload: WorkloadId(3), attempt: 2, name: "result".into() }
        );
        assert!(decode(art, [("id", "w-3"), ("attempt", "0"), ("name", "x")]).is_err());
        assert!(decode(art, [("id", "w-3"), ("attempt", "-1"), ("name", "x")]).is_err());
        let drain = route("/v1/nodes/{name}/drain");
        assert_eq!(decode(drain, [("name", "vm"), ("op", "drain")]).unwrap(), Target::Node("vm".into()));
        assert!(decode(drain, [("name", "a\nb")]).is_err());
        let token = route("/v1/tokens/{name}");
        assert_eq!(decode(token, [("name", "ci")]).unwrap(), Target::Token("ci".into()));
    }
}
