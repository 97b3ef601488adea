//! `canopy mcp`: the MCP server on stdio, for an agent host (Claude
//! Desktop, an IDE) to start as a child process. It acts as the caller
//! whose token the CLI would use (`--server`/`CANOPY_SERVER` with
//! `CANOPY_TOKEN`, else the store's socket): every tool call is an API
//! request of that caller's, authorized and audited by the server. Stdout
//! is the protocol; diagnostics go to stderr.

use super::StoreArgs;
use canopy::mcp::{Caller, CanopyMcp, McpOptions};
use canopy::server::api::WhoAmI;
use color_eyre::eyre::{Result, WrapErr, eyre};
use rmcp::ServiceExt;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// A `submit` whose plan estimates more than this many US dollars
    /// takes a confirmation (a second call with the id the first answers);
    /// 0 asks for every submit.
    #[arg(long, value_name = "USD", default_value_t = McpOptions::DEFAULT_CONFIRM_ABOVE_USD, value_parser = parse_usd)]
    pub confirm_above_usd: f64,
}

/// A dollar amount: a finite, non-negative number.
pub fn parse_usd(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not an amount of US dollars (a number of at least 0)")),
    }
}

pub fn run(store: &StoreArgs, args: McpArgs) -> Result<ExitCode> {
    // Stdout carries the protocol: Canopy's own logs go to stderr.
    let filter = tracing_subscriber::EnvFilter::try_from_env("CANOPY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let client = store.client()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let me: WhoAmI = match client.get("/v1/whoami").await {
            Ok(me) => me,
            Err(e) => return Ok(super::workloads::report(store, &e)),
        };
        let caller = Caller { name: me.principal, token_id: None, role: me.role, tenant: me.tenant };
        let options =
            McpOptions { confirm_above_usd: Some(args.confirm_above_usd), allowed_origins: Vec::new() };
        let server = CanopyMcp::stdio(client, caller, options)
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| eyre!("the MCP client did not initialize a session: {e}"))?;
        server.waiting().await.map_err(|e| eyre!("the MCP server stopped: {e}"))?;
        Ok(ExitCode::SUCCESS)
    })
}
