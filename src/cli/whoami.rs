//! `canopy whoami`: who the server takes this CLI for (the token's name,
//! or `local:USER` on the store's socket), with its role, tenant and
//! scopes, as `gh auth status` and `kubectl auth whoami` answer.

use super::StoreArgs;
use super::workloads::with_api;
use canopy::server::api::WhoAmI;
use color_eyre::eyre::Result;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct WhoamiArgs {
    /// Machine-readable output: the server's answer as it is.
    #[arg(long)]
    pub json: bool,
}

pub fn run(store: &StoreArgs, args: &WhoamiArgs) -> Result<ExitCode> {
    let me = match with_api(store, async |c| c.get::<WhoAmI>("/v1/whoami").await)? {
        Ok(me) => me,
        Err(code) => return Ok(code),
    };
    if args.json {
        outln!("{}", canopy::text::json_with_times(&me)?);
        return Ok(ExitCode::SUCCESS);
    }
    let scopes = if me.scopes.is_empty() { "all (no limit)".to_string() } else { me.scopes.join(", ") };
    let server = match &store.server {
        Some(url) => url.clone(),
        None => canopy::server::listen::socket_path(store.home().root()).display().to_string(),
    };
    outln!("principal  {}", me.principal);
    outln!("role       {}", me.role);
    outln!("tenant     {}", me.tenant.as_deref().unwrap_or("-"));
    outln!("scopes     {scopes}");
    outln!("origin     {}", me.origin);
    outln!("server     {server}");
    Ok(ExitCode::SUCCESS)
}
