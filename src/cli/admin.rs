//! `canopy token` and `canopy audit`: managing who may call the API, and
//! reading what they did. Both go through the API (the socket, as the
//! store's owner, or `--server` with an admin or operator token).

use super::StoreArgs;
use super::table::{cut, new_table};
use super::workloads::{local_time, now, with_api};
use canopy::engine::model::AuditRecord;
use canopy::server::api::{NewTokenRequest, NewTokenResponse};
use canopy::server::auth::Role;
use canopy::text::sanitize;
use color_eyre::eyre::{Result, eyre};
use std::process::ExitCode;

#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Make a token. Its secret is printed once; only a salted hash is kept.
    Create {
        #[arg(long)]
        name: String,
        /// viewer, submitter, operator or admin.
        #[arg(long, value_parser = parse_role)]
        role: Role,
        /// Limit an operator to a provider or pool (repeatable):
        /// provider=NAME or pool=PROVIDER/POOL.
        #[arg(long = "scope", value_name = "SCOPE")]
        scopes: Vec<String>,
        /// Lifetime, e.g. 30d, 12h.
        #[arg(long, value_parser = canopy::units::parse_duration)]
        expires: Option<std::time::Duration>,
        /// The tenant it belongs to (required for non-admin tokens when
        /// tenants are configured; `canopy tenants` lists them).
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List tokens (never their secrets).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token by name: it stops working at once.
    Revoke { name: String },
}

fn parse_role(s: &str) -> Result<Role, String> {
    s.parse()
}

pub fn token(store: &StoreArgs, cmd: TokenCommand) -> Result<ExitCode> {
    match cmd {
        TokenCommand::Create { name, role, scopes, expires, tenant, json } => {
            let expires_at = match expires {
                Some(d) => {
                    Some(now().0 + i64::try_from(d.as_millis()).map_err(|_| eyre!("--expires is too long"))?)
                }
                None => None,
            };
            let req = NewTokenRequest { name, role, scopes, expires_at, tenant };
            match with_api(store, async |c| c.post::<_, NewTokenResponse>("/v1/tokens", &req).await)? {
                Ok(t) if json => outln!("{}", canopy::text::json_with_times(&t)?),
                Ok(t) => {
                    outln!("{}", t.token);
                    errln!(
                        "token {:?} ({}{}{}) created. This is the only time it is shown: keep it in a secret store and pass it as CANOPY_TOKEN.",
                        t.name,
                        t.role,
                        if t.scopes.is_empty() {
                            String::new()
                        } else {
                            format!(", {}", t.scopes.join(", "))
                        },
                        t.tenant.as_deref().map(|x| format!(", tenant {x}")).unwrap_or_default()
                    );
                }
                Err(code) => return Ok(code),
            }
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::List { json } => {
            let rows = match with_api(store, async |c| c.tokens().await)? {
                Ok(r) => r,
                Err(code) => return Ok(code),
            };
            if json {
                outln!("{}", canopy::text::json_with_times(&rows)?);
                return Ok(ExitCode::SUCCESS);
            }
            let now = now();
            let mut t = new_table(&["NAME", "ROLE", "TENANT", "SCOPES", "CREATED", "BY", "STATE"]);
            for r in &rows {
                let state = match (r.revoked_at, r.expires_at) {
                    (Some(at), _) => format!("revoked {}", local_time(at)),
                    (None, Some(e)) if e <= now => format!("expired {}", local_time(e)),
                    (None, Some(e)) => format!("expires {}", local_time(e)),
                    (None, None) => "active".into(),
                };
                t.add_row(vec![
                    r.name.clone(),
                    r.role.clone(),
                    r.tenant.clone().unwrap_or_else(|| "-".into()),
                    r.scopes.join(", "),
                    local_time(r.created_at),
                    r.created_by.clone(),
                    state,
                ]);
            }
            outln!("{t}");
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::Revoke { name } => {
            let path = format!("/v1/tokens/{name}");
            match with_api(store, async |c| c.delete::<serde_json::Value>(&path).await)? {
                Ok(v) => outln!("{}", v["message"].as_str().unwrap_or("revoked")),
                Err(code) => return Ok(code),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// Only what happened within this long (e.g. 1h, 7d).
    #[arg(long, value_parser = canopy::units::parse_duration)]
    since: Option<std::time::Duration>,
    /// Only this principal's requests.
    #[arg(long)]
    principal: Option<String>,
    #[arg(long, default_value_t = 200)]
    limit: usize,
    #[arg(long)]
    json: bool,
}

pub fn audit(store: &StoreArgs, a: AuditArgs) -> Result<ExitCode> {
    let mut q = format!("/v1/audit?limit={}", a.limit);
    if let Some(d) = a.since {
        q.push_str(&format!("&since={}", now().0 - i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)));
    }
    if let Some(p) = &a.principal {
        q.push_str(&format!("&principal={}", url_escape(p)));
    }
    let rows = match with_api(store, async |c| c.get::<Vec<AuditRecord>>(&q).await)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    if a.json {
        outln!("{}", canopy::text::json_with_times(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = new_table(&["AT", "WHO", "FROM", "ACTION", "TARGET", "OUTCOME", "REASON"]);
    for r in &rows {
        // Reasons and targets are other people's text: the table makes
        // each cell safe for a terminal.
        t.add_row(vec![
            local_time(r.at),
            r.principal.clone(),
            r.origin.clone(),
            r.action.clone(),
            r.target.clone().unwrap_or_default(),
            cut(&sanitize(&r.outcome), 60),
            r.reason.clone().unwrap_or_default(),
        ]);
    }
    outln!("{t}");
    Ok(ExitCode::SUCCESS)
}

/// Percent-encodes what a query value cannot hold as is.
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Debug, clap::Args)]
pub struct TenantsArgs {
    #[command(subcommand)]
    pub command: Option<TenantsCommand>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum TenantsCommand {
    /// Replace the tenant and flavor tables with FILE's (TOML as in
    /// canopy.toml, or JSON when it ends in .json): in force at once,
    /// audited, kept across restarts until canopy.toml's tables change.
    Apply { file: std::path::PathBuf },
}

/// The budgets' table: spent of limit this period, what running work is
/// expected to spend still, when the period renews, and what each holds.
fn print_budgets(budgets: &[canopy::tenant::budget::Standing]) {
    use canopy::tenant::budget::{gpu_hours, usd};
    if budgets.is_empty() {
        return;
    }
    let mut t =
        new_table(&["BUDGET", "FOR", "PERIOD", "SPENT", "RUNNING WORK EXPECTS", "RENEWS", "HOLDS", "HARD"]);
    for b in budgets {
        let mut expects = Vec::new();
        if b.limit_micro_usd.is_some() {
            expects.push(usd(b.committed.micro_usd));
        }
        if b.limit_gpu_ms.is_some() {
            expects.push(gpu_hours(b.committed.gpu_ms));
        }
        t.add_row(vec![
            sanitize(&b.name).into_owned(),
            sanitize(&b.scope).into_owned(),
            b.period.as_str().to_string(),
            format!("{} ({:.0}%)", b.spent_text(), b.fraction() * 100.0),
            expects.join(", "),
            local_time(b.end),
            b.holding.to_string(),
            if b.hard { "yes" } else { "no" }.to_string(),
        ]);
    }
    outln!("\n{t}");
}

/// GPUs and CPU cores as a cell: `8 GPUs, 64 cores`; `-` for nothing.
fn amount_cell(gpus: Option<u64>, cpu_milli: Option<u64>) -> String {
    let mut parts = Vec::new();
    if let Some(g) = gpus {
        parts.push(format!("{g} GPUs"));
    }
    if let Some(c) = cpu_milli {
        parts.push(format!("{} cores", c as f64 / 1000.0));
    }
    if parts.is_empty() { "-".into() } else { parts.join(", ") }
}

pub fn tenants(store: &StoreArgs, args: TenantsArgs) -> Result<ExitCode> {
    use canopy::server::tenants::TenantsView;
    let view = match args.command {
        Some(TenantsCommand::Apply { file }) => {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| eyre!("cannot read {}: {e}; check the path", file.display()))?;
            let ct = if file.extension().is_some_and(|e| e == "json") {
                "application/json"
            } else {
                "application/toml"
            };
            with_api(store, async |c| c.put_text::<TenantsView>("/v1/tenants", ct, text.clone()).await)?
        }
        None => with_api(store, async |c| c.get::<TenantsView>("/v1/tenants").await)?,
    };
    let v = match view {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    if args.json {
        outln!("{}", canopy::text::json_with_times(&v.tenants)?);
        return Ok(ExitCode::SUCCESS);
    }
    if !v.configured {
        outln!("no tenants are configured: everyone shares the fleet without quotas");
        print_budgets(&v.budgets);
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = new_table(&[
        "TENANT",
        "COHORT",
        "WEIGHT",
        "FLAVOR",
        "NOMINAL",
        "BORROW LIMIT",
        "LEND LIMIT",
        "IN USE",
        "BORROWED",
        "LENT",
        "WAITING",
        "RECLAIMS",
    ]);
    for r in &v.tenants {
        let l = &r.limits;
        let limit = |f: fn(&canopy::tenant::Limit) -> Option<u64>| {
            let g = l.gpus.as_ref().map(|x| f(x).map_or("any".to_string(), |n| format!("{n} GPUs")));
            let c = l
                .cpu
                .as_ref()
                .map(|x| f(x).map_or("any".to_string(), |n| format!("{} cores", n as f64 / 1000.0)));
            let parts: Vec<String> = g.into_iter().chain(c).collect();
            if parts.is_empty() { "-".to_string() } else { parts.join(", ") }
        };
        t.add_row(vec![
            sanitize(&r.tenant).into_owned(),
            r.cohort.clone().unwrap_or_else(|| "-".into()),
            r.weight.to_string(),
            if r.flavor.is_empty() { "-".into() } else { r.flavor.clone() },
            amount_cell(l.gpus.map(|x| x.nominal), l.cpu.map(|x| x.nominal)),
            limit(|x| x.borrowing),
            limit(|x| x.lending),
            amount_cell(Some(r.in_use.gpus), (r.in_use.cpu_milli > 0).then_some(r.in_use.cpu_milli)),
            amount_cell(Some(r.borrowed.gpus), (r.borrowed.cpu_milli > 0).then_some(r.borrowed.cpu_milli)),
            amount_cell(Some(r.lent.gpus), (r.lent.cpu_milli > 0).then_some(r.lent.cpu_milli)),
            r.waiting.to_string(),
            v.reclaims.get(&r.tenant).copied().unwrap_or(0).to_string(),
        ]);
    }
    outln!("{t}");
    if !v.fair_share.is_empty() {
        // Served first first: decayed usage over weight, lowest first.
        let mut f = new_table(&["FAIR SHARE", "TENANT", "USAGE (DECAYED)", "SHARE", "FAIR SHARE"]);
        for s in &v.fair_share {
            f.add_row(vec![
                s.position.to_string(),
                sanitize(&s.tenant).into_owned(),
                format!("{:.1} GPU-h", s.usage_gpu_hours),
                format!("{:.2}", s.share),
                format!("{:.2}", s.fair_share),
            ]);
        }
        outln!("\n{f}");
    }
    print_budgets(&v.budgets);
    if let Some(by) = &v.set_by {
        errln!(
            "set by {}{}",
            sanitize(by),
            v.set_at.map(|t| format!(" {}", local_time(t))).unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
