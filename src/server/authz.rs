//! Authorization: the one place that decides whether a principal may make
//! a request. Every route is listed in [`ROUTES`] with what it needs; the
//! middleware finds the caller (peer credentials on the socket, a bearer
//! token on TCP), looks up the facts a decision needs (who submitted a
//! workload, which pool a node is in), and asks [`decide`]. Handlers never
//! check roles themselves.

use super::auth::{Principal, Role};
use super::error::ApiError;
use super::listen::Peer;
use super::target::Target;
use super::{Served, ServerState};
use crate::engine::command::{current_uid, current_user, user_name};
use crate::engine::model::Millis;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{ConnectInfo, MatchedPath, RawPathParams, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// What a route needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Anyone, even without a token.
    Public,
    /// Any principal (viewer and up).
    Read,
    /// Any principal that may see the workload (with tenants: its
    /// tenant's, an operator's within its scopes, an admin's any);
    /// another's is 404, as if it did not exist.
    ReadWorkload,
    /// Submitter and up.
    Submit,
    /// Operator and up: the audit trail.
    Audit,
    /// A submitter's own workload; an operator's within its scopes; any for admins.
    OwnWorkload,
    /// An operator whose scopes cover the node's pool; any for admins.
    Node,
    /// Admins only.
    Admin,
}

/// One route of the API.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub method: &'static str,
    /// As axum matches it (`{id}` for a parameter).
    pub path: &'static str,
    pub need: Need,
    pub summary: &'static str,
}

const fn r(method: &'static str, path: &'static str, need: Need, summary: &'static str) -> Route {
    Route { method, path, need, summary }
}

/// Every route, with what it needs. The router, the middleware and the
/// OpenAPI document all read this table.
pub const ROUTES: &[Route] = &[
    r("GET", "/healthz", Need::Public, "Liveness: 200 while the engine runs"),
    r("GET", "/metrics", Need::Read, "Prometheus metrics"),
    r("GET", "/v1/openapi.json", Need::Public, "This API's OpenAPI 3.1 document"),
    r("GET", "/v1/whoami", Need::Read, "The caller's principal, role and scopes"),
    r("POST", "/v1/workloads", Need::Submit, "Submit a workload (TOML or JSON spec)"),
    r("GET", "/v1/workloads", Need::Read, "List workloads, newest first, with a cursor"),
    r("GET", "/v1/workloads/{id}", Need::ReadWorkload, "One workload with its attempts and placements"),
    r("GET", "/v1/workloads/{id}/events", Need::ReadWorkload, "A workload's events, oldest first"),
    r(
        "GET",
        "/v1/workloads/{id}/logs",
        Need::ReadWorkload,
        "An attempt's log, from an offset; follow streams it",
    ),
    r("GET", "/v1/workloads/{id}/artifacts", Need::ReadWorkload, "A workload's collected outputs"),
    r(
        "GET",
        "/v1/workloads/{id}/artifacts/{attempt}/{name}",
        Need::ReadWorkload,
        "Download one collected output file",
    ),
    r("POST", "/v1/workloads/{id}/cancel", Need::OwnWorkload, "Cancel a workload"),
    r("POST", "/v1/workloads/{id}/retry", Need::OwnWorkload, "Submit an ended workload's spec again"),
    r(
        "POST",
        "/v1/workloads/{id}/acknowledge",
        Need::OwnWorkload,
        "Acknowledge a failed workload: it leaves triage, with who and why recorded",
    ),
    r(
        "POST",
        "/v1/workloads/{id}/unexclude",
        Need::OwnWorkload,
        "Clear the nodes or pools a workload's failures exclude (body: node, reason)",
    ),
    r("POST", "/v1/plan", Need::Read, "Where a spec would run now (dry run)"),
    r("GET", "/v1/fleet", Need::Read, "The live fleet: node states, health, quarantines"),
    r("GET", "/v1/events", Need::Read, "The newest events across all workloads, oldest first"),
    r("POST", "/v1/nodes/{name}/cordon", Need::Node, "Stop placing new work on a node"),
    r("POST", "/v1/nodes/{name}/uncordon", Need::Node, "Let a cordoned or drained node take work"),
    r("POST", "/v1/nodes/{name}/drain", Need::Node, "Stop placing work on a node and move its work"),
    r("POST", "/v1/nodes/{name}/unquarantine", Need::Node, "End a node's quarantine before its cool-down"),
    r("GET", "/v1/stream", Need::Read, "Server-sent events: every durable batch and fleet status"),
    r("GET", "/v1/audit", Need::Audit, "The audit trail, newest first"),
    r("GET", "/v1/tokens", Need::Admin, "List tokens (never their secrets)"),
    r("POST", "/v1/tokens", Need::Admin, "Create a token; its secret is in this answer only"),
    r("DELETE", "/v1/tokens/{name}", Need::Admin, "Revoke a token"),
    r("GET", "/v1/tenants", Need::Read, "Every tenant's quotas and usage totals per flavor"),
    r("PUT", "/v1/tenants", Need::Admin, "Replace the tenant and flavor tables (JSON or TOML), audited"),
    r(
        "GET",
        "/v1/usage",
        Need::Read,
        "GPU time and cost by tenant, owner, provider, pool, accelerator or user: useful, lost by class, idle",
    ),
    r(
        "GET",
        "/v1/servers",
        Need::Read,
        "The servers on this journal: leader, standbys, lease epoch and expiry, last failover",
    ),
];

/// The route `method matched` is, if it is one of ours. Commands share
/// one router entry (`…/{op}`); each has its own line in the table, found
/// by the command's name as the path parameter `op` decoded it. `HEAD`
/// is a `GET` without the body (axum's `get` answers both): it finds the
/// `GET` route and needs what that needs.
pub fn route(method: &Method, matched: &str, op: Option<&str>) -> Option<&'static Route> {
    let method = if *method == Method::HEAD { &Method::GET } else { method };
    let path = match (matched.strip_suffix("/{op}"), op) {
        (Some(prefix), Some(op)) => format!("{prefix}/{op}"),
        (Some(_), None) => return None,
        (None, _) => matched.to_string(),
    };
    ROUTES.iter().find(|r| r.path == path && r.method == method.as_str())
}

/// The methods a matched path takes, for a 405's `Allow` header (`HEAD`
/// with `GET`), in order; empty when the path is no route at all (an
/// unknown command).
pub fn allowed(matched: &str, op: Option<&str>) -> Vec<&'static str> {
    let path = match (matched.strip_suffix("/{op}"), op) {
        (Some(prefix), Some(op)) => format!("{prefix}/{op}"),
        (Some(_), None) => return Vec::new(),
        (None, _) => matched.to_string(),
    };
    let mut methods: Vec<&'static str> = ROUTES.iter().filter(|r| r.path == path).map(|r| r.method).collect();
    if methods.contains(&"GET") {
        methods.push("HEAD");
    }
    methods.sort_unstable();
    methods
}

/// Facts about what a request acts on, looked up for the [`Target`] the
/// handler will act on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Facts {
    /// The decision needs none.
    #[default]
    None,
    Workload {
        submitted_by: Option<String>,
        /// `(provider, provider/pool)` of each attempt.
        pools: Vec<(String, String)>,
        /// `None` without tenants; else the workload's tenant (a workload
        /// from before tenants counts as `default_tenant`'s).
        tenant: Option<Option<String>>,
    },
    Node {
        provider: String,
        pool: String,
    },
}

/// The least role `need` asks for.
pub fn least_role(need: Need) -> Option<Role> {
    match need {
        Need::Public => None,
        Need::Read | Need::ReadWorkload => Some(Role::Viewer),
        Need::Submit | Need::OwnWorkload => Some(Role::Submitter),
        Need::Audit | Need::Node => Some(Role::Operator),
        Need::Admin => Some(Role::Admin),
    }
}

/// Whether `p`'s role is enough for `need` at all, before any facts: a
/// principal that may never make the request learns nothing about its
/// target (not even whether it exists).
pub fn role_allows(p: &Principal, need: Need) -> Result<(), String> {
    match least_role(need) {
        Some(min) if p.role < min => Err(format!("{} is a {}; this needs the {min} role", p.name, p.role)),
        _ => Ok(()),
    }
}

/// Why a request is refused: forbidden (403, the reason says why), or
/// about a workload the principal may not see (404, as if it did not
/// exist: no other tenant's workload leaks by its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    Forbidden(String),
    Hidden(String),
    /// The request itself is wrong (400).
    BadRequest(String),
}

impl Denied {
    pub fn message(&self) -> &str {
        match self {
            Denied::Forbidden(m) | Denied::Hidden(m) | Denied::BadRequest(m) => m,
        }
    }
    pub fn into_error(self) -> ApiError {
        match self {
            Denied::Forbidden(m) => ApiError::forbidden(m),
            Denied::Hidden(m) => ApiError::not_found(m),
            Denied::BadRequest(m) => ApiError::bad_request(m).field("tenant"),
        }
    }
}

impl From<String> for Denied {
    fn from(m: String) -> Self {
        Denied::Forbidden(m)
    }
}

/// Whether `p` sees a workload of `tenant` with attempts on `pools`. The
/// one rule for every workload endpoint, listings and the event stream:
/// without tenants (`tenant` is `None`) everyone sees everything; with
/// them, admins see all, an operator also what ran on a pool within its
/// scopes (unscoped: all), everyone its own tenant's workloads.
pub fn sees(p: &Principal, tenant: Option<&Option<String>>, pools: &[(String, String)]) -> bool {
    let Some(tenant) = tenant else { return true };
    p.role == Role::Admin
        || (p.tenant.is_some() && *tenant == p.tenant)
        || (p.role >= Role::Operator
            && (p.scopes.is_empty() || pools.iter().any(|(prov, pool)| p.in_scope(prov, pool))))
}

/// The same rule as [`sees`], as a listing's filter: `None` when `p` sees
/// every workload, else which ones (its tenant's, and for a scoped
/// operator those with an attempt within its scopes).
pub fn listing(p: &Principal, tenancy: &crate::tenant::Tenancy) -> Option<crate::journal::TenantFilter> {
    if tenancy.is_empty() || p.role == Role::Admin || (p.role >= Role::Operator && p.scopes.is_empty()) {
        return None;
    }
    let mut f = crate::journal::TenantFilter::of(p.tenant.as_deref(), tenancy.default_tenant.as_deref());
    if p.role >= Role::Operator {
        for s in &p.scopes {
            match s {
                super::auth::Scope::Provider(x) => f.providers.push(x.clone()),
                super::auth::Scope::Pool(x) => f.pools.push(x.clone()),
            }
        }
    }
    Some(f)
}

/// A workload's tenant and the `(provider, provider/pool)` of its attempts.
pub type WorkloadFacts<'a> = (&'a Option<String>, &'a [(String, String)]);

/// Whether `p` sees audit record `a` (once it may read the audit trail at
/// all): without tenants, or for admins and unscoped operators, every
/// record; else those about its tenant's workloads (`workload`: the
/// target's tenant and pools, when the target is a workload), about nodes
/// within its scopes (`node`: the target node's `(provider, provider/pool)`),
/// and its own actions.
pub fn sees_audit(
    p: &Principal,
    a: &crate::engine::model::AuditRecord,
    workload: Option<WorkloadFacts<'_>>,
    node: Option<&(String, String)>,
) -> bool {
    if a.principal == p.name {
        return true;
    }
    if let Some((tenant, pools)) = workload {
        return sees(p, Some(tenant), pools);
    }
    if let Some((provider, pool)) = node {
        return p.role >= Role::Operator && p.in_scope(provider, pool);
    }
    p.role == Role::Admin || (p.role >= Role::Operator && p.scopes.is_empty())
}

/// The tenant a submit by `p` is for, `asked` being the one it named:
/// its own; any for an admin (the socket owner is one). Naming another is
/// forbidden; naming one when none are configured, or one that does not
/// exist, is a bad request.
pub fn submit_tenant(
    p: &Principal,
    asked: Option<&str>,
    tenancy: &crate::tenant::Tenancy,
) -> Result<Option<String>, Denied> {
    let Some(asked) = asked else { return Ok(p.tenant.clone()) };
    if tenancy.is_empty() {
        return Err(Denied::BadRequest(format!(
            "tenant {asked:?} is given but no tenants are configured; submit without one"
        )));
    }
    if tenancy.tenant(asked).is_none() {
        let known: Vec<&str> = tenancy.tenants.iter().map(|t| t.name.as_str()).collect();
        return Err(Denied::BadRequest(format!("no tenant {asked:?}; the tenants are {}", known.join(", "))));
    }
    if p.role == Role::Admin || p.tenant.as_deref() == Some(asked) {
        return Ok(Some(asked.to_string()));
    }
    Err(Denied::Forbidden(format!(
        "{} belongs to tenant {}; only an admin may submit for another tenant ({asked})",
        p.name,
        p.tenant.as_deref().unwrap_or("(none)")
    )))
}

/// Whether `p` may make a request that needs `need`, given `facts`; the
/// reason when not.
pub fn decide(p: &Principal, need: Need, facts: &Facts) -> Result<(), Denied> {
    let role = p.role;
    role_allows(p, need)?;
    if let (Need::ReadWorkload | Need::OwnWorkload, Facts::Workload { pools, tenant, .. }) = (need, facts)
        && !sees(p, tenant.as_ref(), pools)
    {
        return Err(Denied::Hidden("no such workload in this store".into()));
    }
    match need {
        Need::Public | Need::Read | Need::Submit | Need::Audit | Need::Admin => Ok(()),
        Need::ReadWorkload => match facts {
            Facts::Workload { .. } => Ok(()),
            _ => Err("the workload this request names could not be determined".to_string().into()),
        },
        Need::OwnWorkload => {
            let Facts::Workload { submitted_by, pools, .. } = facts else {
                return Err("the workload this request names could not be determined".to_string().into());
            };
            let own = submitted_by.as_deref() == Some(p.name.as_str());
            let in_scope = role >= Role::Operator && pools.iter().any(|(prov, pool)| p.in_scope(prov, pool));
            let unscoped_operator = role >= Role::Operator && p.scopes.is_empty();
            if role == Role::Admin || own || unscoped_operator || in_scope {
                Ok(())
            } else if role == Role::Submitter {
                Err(format!(
                    "{} may cancel, retry, acknowledge or unexclude only the workloads it submitted",
                    p.name
                )
                .into())
            } else {
                Err(format!("{} may act only on work within its scopes ({})", p.name, scopes(p)).into())
            }
        }
        Need::Node => match facts {
            Facts::Node { provider, pool } if role < Role::Admin && !p.in_scope(provider, pool) => {
                Err(format!(
                    "{} may act only on nodes within its scopes ({}); this node is in {pool}",
                    p.name,
                    scopes(p)
                )
                .into())
            }
            Facts::Node { .. } => Ok(()),
            _ => Err("the node this request names could not be determined".to_string().into()),
        },
    }
}

fn scopes(p: &Principal) -> String {
    p.scopes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// The principal of the store's owner on the socket.
pub fn owner(uid: u32) -> Principal {
    let user = if uid == current_uid() { current_user() } else { user_name(uid) };
    Principal {
        name: format!("local:{user}"),
        role: Role::Admin,
        scopes: Vec::new(),
        origin: format!("socket (uid {uid})"),
        token_id: None,
        tenant: None,
    }
}

/// The middleware: what the request acts on (decoded once, see
/// [`target`](super::target)), who is calling, may they; the handler gets
/// both as extensions (`Extension<Principal>`, `Extension<Target>`) and
/// acts on exactly that target.
pub async fn middleware(
    state: State<Arc<ServerState>>,
    peer: ConnectInfo<Peer>,
    matched: MatchedPath,
    params: Result<RawPathParams, RawPathParamsRejection>,
    req: Request,
    next: Next,
) -> Response {
    let body = super::error::has_body(req.headers());
    match decide_request(state, peer, matched, params, req).await {
        Ok(req) => next.run(req).await,
        // Refused before the handler read the body: the connection closes.
        Err(refused) if body => super::error::closing(refused),
        Err(refused) => refused,
    }
}

/// The middleware's decision: the request with what the handler needs,
/// or the refusal to answer with (before anything reads its body).
async fn decide_request(
    State(state): State<Arc<ServerState>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    matched: MatchedPath,
    params: Result<RawPathParams, RawPathParamsRejection>,
    mut req: Request,
) -> Result<Request, Response> {
    let params: Vec<(String, String)> = match &params {
        Ok(p) => p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        Err(e) => return Err(ApiError::bad_request(format!("the path cannot be read: {e}")).into_response()),
    };
    let op = params.iter().find(|(k, _)| k == "op").map(|(_, v)| v.as_str());
    let Some(route) = route(req.method(), matched.as_str(), op) else {
        let allow = allowed(matched.as_str(), op);
        if allow.is_empty() {
            return Err(ApiError::not_found(format!(
                "no such endpoint: {} {}",
                req.method(),
                req.uri().path()
            ))
            .into_response());
        }
        let allow = allow.join(", ");
        let e = ApiError::method_not_allowed(format!(
            "{} does not take {}; it takes {allow}",
            req.uri().path(),
            req.method()
        ));
        let mut resp = e.into_response();
        if let Ok(v) = axum::http::HeaderValue::from_str(&allow) {
            resp.headers_mut().insert(axum::http::header::ALLOW, v);
        }
        return Err(resp);
    };
    if route.need == Need::Public {
        return Ok(req);
    }
    let now = now();
    let principal = match principal(&state, &peer, req.headers(), route, matched.as_str(), now).await {
        Ok(p) => p,
        Err(refused) => return Err(refused),
    };
    let action = format!("{} {}", route.method, route.path);
    let denied = |why: String, target: Option<String>| {
        let state = state.clone();
        let principal = principal.clone();
        let action = action.clone();
        async move {
            if route.method != "GET" {
                let a = super::auth::audit(&principal, &action, target, format!("denied: {why}"), now);
                state.write_audit(a).await;
            }
        }
    };
    if let Err(why) = role_allows(&principal, route.need) {
        let target = Some(req.uri().path().to_string());
        denied(why.clone(), target).await;
        return Err(ApiError::forbidden(why).into_response());
    }
    let target = match super::target::decode(route, params.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        Ok(t) => t,
        Err(e) => {
            // Whatever the path names, it is nothing this handler could act
            // on: refused before any decision, and audited as refused.
            denied(e.body.message.clone(), Some(req.uri().path().to_string())).await;
            return Err(e.into_response());
        }
    };
    let facts = match facts(&state, route.need, &target).await {
        Ok(f) => f,
        Err(e) => {
            denied(e.body.message.clone(), target.audited()).await;
            return Err(e.into_response());
        }
    };
    if let Err(why) = decide(&principal, route.need, &facts) {
        denied(why.message().to_string(), target.audited()).await;
        return Err(why.into_error().into_response());
    }
    req.extensions_mut().insert(principal);
    req.extensions_mut().insert(target);
    req.extensions_mut().insert(route);
    Ok(req)
}

/// The route `/mcp` is, for the audit trail of the tokens it refuses: not
/// in [`ROUTES`] (the MCP endpoint is no part of the OpenAPI document; its
/// tools call the routes there, each authorized as itself).
pub static MCP: Route = r("POST", "/mcp", Need::Read, "Model Context Protocol (Streamable HTTP)");

/// Who is calling: the store's owner on the socket; over TCP, the bearer
/// token's principal with its tenant settled. A missing, unknown, expired
/// or revoked token (or one whose tenant is gone) is refused with the
/// answer to send, and counted for the audit trail ([`super::refusals`]).
pub async fn principal(
    state: &Served,
    peer: &Peer,
    headers: &axum::http::HeaderMap,
    route: &'static Route,
    path: &str,
    now: Millis,
) -> Result<Principal, Response> {
    Ok(match peer {
        Peer::Socket { uid } => {
            let mut p = owner(*uid);
            p.tenant = state.tenancy().default_tenant.clone();
            p
        }
        Peer::Tcp { addr, .. } => {
            let bearer = headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
                .map(str::trim);
            let verified = match bearer {
                None => Err(super::auth::TokenError::Missing),
                Some(b) => {
                    let v = state.tokens.verify(b, &addr.to_string(), now);
                    // A standby's copy of the tokens may not have one the
                    // leader just made: read them again, then decide.
                    let id = b.strip_prefix("canopy_").and_then(|r| r.split_once('_')).map(|(id, _)| id);
                    match id {
                        Some(id) if v.is_err() && state.standby.is_some() && !state.tokens.knows(id) => {
                            if let Err(e) = state.reload_tokens(std::time::Instant::now()).await {
                                tracing::warn!(error = %e, "standby: cannot read the tokens again");
                            }
                            state.tokens.verify(b, &addr.to_string(), now)
                        }
                        _ => v,
                    }
                }
            };
            match verified {
                Ok(p) => {
                    let token_tenant = p.tenant.clone();
                    match p.with_tenant(token_tenant.as_deref(), &state.tenancy()) {
                        Ok(p) => p,
                        Err(why) => {
                            tracing::warn!(%addr, path, error = %why, "refused a token without a tenant");
                            // Audited like every refused token: one record a
                            // minute per token, with a count of the repeats.
                            let e = super::auth::TokenError::NoTenant { message: why.clone() };
                            state.refusals.refused(state, bearer, *addr, route, &e, now).await;
                            return Err(ApiError::forbidden(why).into_response());
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(%addr, path, error = %e, "refused a request without a valid token");
                    state.refusals.refused(state, bearer, *addr, route, &e, now).await;
                    return Err(ApiError::unauthorized(e.to_string()).into_response());
                }
            }
        }
    })
}

/// Looks up what a decision about `need` on `target` depends on. A target
/// that does not exist is a 404 here, before the decision; one whose facts
/// cannot be read is refused.
async fn facts(state: &Served, need: Need, target: &Target) -> Result<Facts, ApiError> {
    match need {
        Need::OwnWorkload | Need::ReadWorkload => {
            let id = target.workload()?;
            let tenancy = state.tenancy();
            let read = state
                .read(move |j| {
                    let w = j.workload(id)?;
                    let attempts = j.attempts(id)?;
                    Ok(w.map(|w| (w.submitted_by, w.tenant, attempts)))
                })
                .await;
            match read {
                Ok(Some((submitted_by, tenant, attempts))) => Ok(Facts::Workload {
                    submitted_by,
                    pools: attempts.into_iter().map(|a| (a.provider, a.pool)).collect(),
                    tenant: (!tenancy.is_empty()).then(|| tenant.or_else(|| tenancy.default_tenant.clone())),
                }),
                Ok(None) => Err(ApiError::not_found(format!("no workload {id} in this store"))),
                Err(e) => {
                    Err(ApiError::unavailable(format!("cannot read {id} to authorize the request: {e}")))
                }
            }
        }
        Need::Node => {
            let name = target.node()?;
            let status = state.fleet_status();
            let Some(status) = status else {
                return Err(ApiError::unavailable(
                    "the engine has not published its fleet yet, so the node cannot be checked; try again in a second",
                ));
            };
            let fleet = &status.fleet;
            match fleet.node_by_name(name) {
                Some(i) => {
                    let pool = fleet.node(i).pool;
                    Ok(Facts::Node {
                        provider: fleet.provider_of(pool).name.clone(),
                        pool: fleet.pool_label(pool),
                    })
                }
                None => Err(ApiError::not_found(format!("no node {name:?} in the fleet"))),
            }
        }
        _ => Ok(Facts::None),
    }
}

/// The wall clock, read at the edge.
pub fn now() -> Millis {
    use crate::engine::clock::{Clock, SystemClock};
    SystemClock.now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::auth::Scope;

    fn p(name: &str, role: Role, scopes: &[&str]) -> Principal {
        Principal {
            name: name.into(),
            role,
            scopes: scopes.iter().map(|s| s.parse::<Scope>().unwrap()).collect(),
            origin: "test".into(),
            token_id: None,
            tenant: None,
        }
    }

    fn workload(by: &str, pools: &[(&str, &str)]) -> Facts {
        Facts::Workload {
            submitted_by: Some(by.into()),
            pools: pools.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            tenant: None,
        }
    }

    #[test]
    fn with_tenants_a_workload_of_another_tenant_is_hidden_unless_scopes_or_admin_reach_it() {
        let of = |name: &str, role: Role, scopes: &[&str], tenant: &str| Principal {
            tenant: Some(tenant.into()),
            ..p(name, role, scopes)
        };
        let b_work = |pools: &[(&str, &str)]| Facts::Workload {
            submitted_by: Some("b-sub".into()),
            pools: pools.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            tenant: Some(Some("team-b".into())),
        };
        let on_fra = b_work(&[("onprem-fra", "onprem-fra/a100-40")]);
        let a_view = of("a-view", Role::Viewer, &[], "team-a");
        let a_sub = of("a-sub", Role::Submitter, &[], "team-a");
        let a_fra = of("a-fra", Role::Operator, &["provider=onprem-fra"], "team-a");
        let a_ops = of("a-ops", Role::Operator, &[], "team-a");
        let b_view = of("b-view", Role::Viewer, &[], "team-b");
        let hidden = Err(Denied::Hidden("no such workload in this store".into()));
        assert_eq!(decide(&a_view, Need::ReadWorkload, &on_fra), hidden);
        assert_eq!(decide(&a_sub, Need::OwnWorkload, &on_fra), hidden);
        assert_eq!(decide(&b_view, Need::ReadWorkload, &on_fra), Ok(()));
        assert_eq!(decide(&a_fra, Need::ReadWorkload, &on_fra), Ok(()), "within its scopes");
        assert_eq!(decide(&a_fra, Need::OwnWorkload, &on_fra), Ok(()));
        assert_eq!(decide(&a_fra, Need::ReadWorkload, &b_work(&[("cloud-a", "cloud-a/x")])), hidden);
        assert_eq!(decide(&a_ops, Need::OwnWorkload, &b_work(&[])), Ok(()), "unscoped operators: all");
        assert_eq!(decide(&p("root", Role::Admin, &[]), Need::OwnWorkload, &b_work(&[])), Ok(()));
        // Without tenants, nothing is hidden.
        let untenanted = workload("b-sub", &[]);
        assert_eq!(decide(&a_view, Need::ReadWorkload, &untenanted), Ok(()));
        // Submitting for another tenant: admins only.
        let t = crate::tenant::TenancyDoc::parse(
            "[[tenant]]\nname = \"team-a\"\n[[tenant]]\nname = \"team-b\"",
            false,
        )
        .unwrap()
        .1;
        assert_eq!(submit_tenant(&a_sub, None, &t), Ok(Some("team-a".into())));
        assert!(matches!(submit_tenant(&a_sub, Some("team-b"), &t), Err(Denied::Forbidden(_))));
        assert!(matches!(submit_tenant(&a_sub, Some("team-z"), &t), Err(Denied::BadRequest(_))));
        let root = p("root", Role::Admin, &[]);
        assert_eq!(submit_tenant(&root, Some("team-b"), &t), Ok(Some("team-b".into())));
        let none = crate::tenant::Tenancy::default();
        assert!(matches!(submit_tenant(&root, Some("team-b"), &none), Err(Denied::BadRequest(_))));
    }

    #[test]
    fn every_route_is_in_the_table_once() {
        let mut seen = std::collections::HashSet::new();
        for r in ROUTES {
            assert!(seen.insert((r.method, r.path)), "{} {} twice", r.method, r.path);
        }
    }

    #[test]
    fn ownership_and_scopes_decide_cancels_and_node_commands() {
        let alice = p("alice", Role::Submitter, &[]);
        let fra = p("fra-owner", Role::Operator, &["provider=onprem-fra"]);
        let ops = p("ops", Role::Operator, &[]);
        let viewer = p("v", Role::Viewer, &[]);
        let on_fra = workload("bob", &[("onprem-fra", "onprem-fra/a100-40")]);
        assert!(decide(&alice, Need::OwnWorkload, &workload("alice", &[])).is_ok());
        assert!(decide(&alice, Need::OwnWorkload, &on_fra).is_err(), "not alice's");
        assert!(decide(&fra, Need::OwnWorkload, &on_fra).is_ok(), "in its scope");
        assert!(decide(&fra, Need::OwnWorkload, &workload("bob", &[("cloud-a", "cloud-a/x")])).is_err());
        assert!(decide(&ops, Need::OwnWorkload, &on_fra).is_ok());
        assert!(
            decide(&viewer, Need::OwnWorkload, &workload("v", &[])).is_err(),
            "viewers never change state"
        );
        let fra_node = Facts::Node { provider: "onprem-fra".into(), pool: "onprem-fra/a100-40".into() };
        let other_node = Facts::Node { provider: "cloud-a".into(), pool: "cloud-a/x".into() };
        assert!(decide(&fra, Need::Node, &fra_node).is_ok());
        assert!(decide(&fra, Need::Node, &other_node).unwrap_err().message().contains("within its scopes"));
        assert!(decide(&alice, Need::Node, &fra_node).is_err());
        assert!(decide(&ops, Need::Audit, &Facts::None).is_ok());
        assert!(decide(&ops, Need::Admin, &Facts::None).is_err());
    }
}
