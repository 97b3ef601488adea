//! Canopy for agents: a Model Context Protocol server (the official Rust
//! SDK, `rmcp`) whose tools map onto the HTTP API and go through its
//! authorization, never around it.
//!
//! - `canopy mcp` serves it on stdio, as the caller whose token the CLI
//!   would use (`CANOPY_SERVER`/`CANOPY_TOKEN`, or the store's socket): a
//!   thin client of the running server ([`upstream::Upstream::Remote`]).
//! - `canopy serve` mounts it at `/mcp` (Streamable HTTP, [`http`]): the
//!   bearer token is authenticated as the API does, a foreign `Origin` is
//!   refused, and each tool calls the API's own router in process with the
//!   caller's credentials ([`upstream::Upstream::InProcess`]).
//!
//! Either way every tool call is an API request of the caller's, decided
//! and audited by `server::authz` as that request is. The tools offered
//! follow the caller's role ([`tools::offered`]); destructive ones take
//! two steps ([`confirm`]); an agent's spend limit is a token budget
//! ([`budget`]). Results follow the CLI's rules for other people's text.

pub mod budget;
pub mod calls;
pub mod confirm;
pub mod fleet;
pub mod http;
pub mod resources;
pub mod tools;
pub mod upstream;

use crate::client::Client;
use crate::engine::model::Millis;
use crate::server::auth::{Principal, Role};
use crate::server::listen::Peer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, InitializeResult, ListResourceTemplatesResult,
    ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use std::sync::Arc;
use upstream::Upstream;

/// How the MCP server behaves, on `canopy mcp` and on `/mcp` alike.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct McpOptions {
    /// A `submit` whose plan estimates more than this (US dollars, the
    /// high end of its range) takes a confirmation; `None`: never.
    pub confirm_above_usd: Option<f64>,
    /// Browser origins (`https://host:port`) allowed to call `/mcp`; a
    /// request with any other `Origin` is refused (403). Empty: none.
    pub allowed_origins: Vec<String>,
}

impl McpOptions {
    /// The default confirmation threshold for `submit`.
    pub const DEFAULT_CONFIRM_ABOVE_USD: f64 = 25.0;
}

/// Who calls, as the API answered (`GET /v1/whoami`) or authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub name: String,
    pub token_id: Option<String>,
    pub role: Role,
    pub tenant: Option<String>,
}

impl Caller {
    /// What a confirmation is bound to: the principal and its token.
    pub fn key(&self) -> String {
        match &self.token_id {
            Some(t) => format!("{} (token {t})", self.name),
            None => self.name.clone(),
        }
    }
}

impl From<&Principal> for Caller {
    fn from(p: &Principal) -> Self {
        Caller { name: p.name.clone(), token_id: p.token_id.clone(), role: p.role, tenant: p.tenant.clone() }
    }
}

/// What one tool call works with.
pub struct Ctx<'a> {
    pub caller: &'a Caller,
    pub up: &'a Upstream,
    pub book: &'a confirm::Book,
    pub options: &'a McpOptions,
    pub now: Millis,
}

enum Mode {
    /// One caller for the process's life (`canopy mcp`).
    Stdio { up: Upstream, me: Caller },
    /// The API's router; the caller is each HTTP request's.
    Http { router: axum::Router },
}

struct Shared {
    mode: Mode,
    book: confirm::Book,
    options: McpOptions,
}

/// The MCP server.
#[derive(Clone)]
pub struct CanopyMcp {
    shared: Arc<Shared>,
}

impl CanopyMcp {
    /// For `canopy mcp`: `client` reaches the API as `me`.
    pub fn stdio(client: Client, me: Caller, options: McpOptions) -> CanopyMcp {
        let mode = Mode::Stdio { up: Upstream::Remote(Box::new(client)), me };
        CanopyMcp { shared: Arc::new(Shared { mode, book: Default::default(), options }) }
    }

    /// For `/mcp`: tools call `router` (the API's) in process.
    pub fn http(router: axum::Router, options: McpOptions) -> CanopyMcp {
        CanopyMcp {
            shared: Arc::new(Shared { mode: Mode::Http { router }, book: Default::default(), options }),
        }
    }

    pub fn options(&self) -> &McpOptions {
        &self.shared.options
    }

    /// The caller of this request and how to reach the API as them.
    fn session(&self, ctx: &RequestContext<RoleServer>) -> Result<(Caller, Upstream), ErrorData> {
        match &self.shared.mode {
            Mode::Stdio { up, me } => Ok((me.clone(), up.clone())),
            Mode::Http { router } => {
                let parts = ctx.extensions.get::<axum::http::request::Parts>().ok_or_else(|| {
                    ErrorData::internal_error("an MCP request over HTTP came without its HTTP request", None)
                })?;
                // Set by `http::guard`, which authenticated the request.
                let p = parts.extensions.get::<Principal>().ok_or_else(|| {
                    ErrorData::internal_error("an MCP request over HTTP came without its principal", None)
                })?;
                let peer = parts
                    .extensions
                    .get::<axum::extract::ConnectInfo<Peer>>()
                    .map(|c| c.0.clone())
                    .ok_or_else(|| {
                        ErrorData::internal_error("an MCP request came without its connection", None)
                    })?;
                let authorization = parts.headers.get(axum::http::header::AUTHORIZATION).cloned();
                Ok((Caller::from(p), Upstream::InProcess { router: router.clone(), peer, authorization }))
            }
        }
    }
}

const INSTRUCTIONS: &str = "Canopy runs AI/GPU workloads across providers. `plan` a spec to see where it would run \
and what it would cost; `submit` it with an idempotency key; follow it with `status`, `explain`, `logs` and \
`events`; read its outputs with `artifacts` (small text files are resources). `cancel` takes two calls: the first \
answers a confirmation id. Every call acts as your token, with its role and limits.";

impl ServerHandler for CanopyMcp {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().enable_resources().build())
            .with_server_info(Implementation::new("canopy", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (caller, _) = self.session(&ctx)?;
        Ok(ListToolsResult::with_all_items(tools::offered(caller.role).map(|t| t.tool()).collect()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (caller, up) = self.session(&ctx)?;
        let c = Ctx {
            caller: &caller,
            up: &up,
            book: &self.shared.book,
            options: &self.shared.options,
            now: crate::server::authz::now(),
        };
        let args = request.arguments.map(serde_json::Value::Object).unwrap_or(serde_json::Value::Null);
        Ok(calls::call(&c, &request.name, args).await.into())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![resources::template()]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (_, up) = self.session(&ctx)?;
        Ok(resources::read(&up, &request.uri).await?.into())
    }
}
