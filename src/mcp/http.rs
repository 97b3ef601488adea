//! `/mcp` on `canopy serve`: the MCP server over Streamable HTTP (rmcp's
//! tower service, stateless, JSON answers), behind a guard that refuses a
//! foreign `Origin` (403, before anything else: the transport's defence
//! against DNS rebinding from a browser) and authenticates the caller as
//! the API does ([`authz::principal`]: the socket's owner, or a bearer
//! token; a bad token is 401 and counted for the audit trail). The tools
//! then call the API's router in process as that caller.

use super::CanopyMcp;
use crate::server::Served;
use crate::server::authz;
use crate::server::error::ApiError;
use crate::server::listen::Peer;
use axum::Router;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

/// The path it is served at.
pub const PATH: &str = "/mcp";

/// The `/mcp` route, its tools calling `api` (the API's router).
pub fn router(state: Served, api: Router) -> Router {
    let mcp = CanopyMcp::http(api, state.options.mcp.clone());
    // Stateless: each POST carries its caller, nothing is kept between
    // requests but the confirmation book. Host is not checked (a server
    // has many names); the Origin guard and the bearer token are what
    // keep a browser page from acting.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service =
        StreamableHttpService::new(move || Ok(mcp.clone()), Arc::new(NeverSessionManager::default()), config);
    Router::new()
        .route_service(PATH, service)
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(())
}

/// Whether `origin` may call: exactly one of the allowed origins
/// (scheme, host and port as the browser sends them), ignoring ASCII case.
pub fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let o = origin.trim_end_matches('/');
    allowed.iter().any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(o))
}

async fn guard(
    State(state): State<Served>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or("(not text)");
        if !origin_allowed(o, &state.options.mcp.allowed_origins) {
            tracing::warn!(origin = %crate::text::sanitize(o), "refused an MCP request from a foreign Origin");
            return crate::server::error::closing(
                ApiError::forbidden(format!(
                    "requests from Origin {:?} may not call {PATH}; a server admits a browser origin with \
                     `canopy serve --mcp-allow-origin ORIGIN`",
                    crate::text::sanitize(o)
                ))
                .into_response(),
            );
        }
    }
    let now = authz::now();
    let principal = match authz::principal(&state, &peer, req.headers(), &authz::MCP, PATH, now).await {
        Ok(p) => p,
        Err(refused) => return crate::server::error::closing(refused),
    };
    req.extensions_mut().insert(principal);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_are_allowed() {
        let allowed = vec!["https://console.example.com".to_string(), "http://localhost:5173".to_string()];
        assert!(origin_allowed("https://console.example.com", &allowed));
        assert!(origin_allowed("HTTPS://Console.Example.com/", &allowed));
        assert!(origin_allowed("http://localhost:5173", &allowed));
        for foreign in
            ["https://evil.example", "http://localhost:5174", "https://console.example.com.evil", "null"]
        {
            assert!(!origin_allowed(foreign, &allowed), "{foreign}");
        }
        assert!(!origin_allowed("http://localhost", &[]));
    }
}
