//! Client profiles: named contexts in `$XDG_CONFIG_HOME/canopy/config.toml`
//! (else `~/.config/canopy/config.toml`), as kubeconfig and `gh auth`
//! keep them. A context names one or more servers (requests start at the
//! first that accepts a connection and fail over to the others: several
//! servers may share one journal, docs/ha.md) and where
//! its token comes from: a file or a command, never the file itself, so
//! the profile can be shared or committed without a secret in it.
//!
//! ```toml
//! current_context = "prod"
//!
//! [contexts.prod]
//! servers = ["https://canopy-a.example:8443", "https://canopy-b.example:8443"]
//! token_command = ["pass", "show", "canopy/prod"]
//!
//! [contexts.lab]
//! servers = ["http://10.0.0.5:7878"]
//! token_file = "~/.config/canopy/lab.token"
//! ```
//!
//! Which applies: `--server` (with `--token`/`$CANOPY_TOKEN`) first; else
//! `--context NAME` or `$CANOPY_CONTEXT`; else the profile's
//! `current_context`, unless `--store` or `$CANOPY_HOME` names a local
//! store. Commands that never reach a server (`serve`, `sim`, `validate`,
//! `schema`, `import`, `completions`, `man`) do not read the profile.

use super::StoreArgs;
use color_eyre::eyre::{Result, WrapErr, bail, eyre};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a server of a context may take to accept a connection before
/// the next one is tried.
const CONNECT_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Profile {
    current_context: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, Context>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Context {
    servers: Vec<String>,
    token_file: Option<PathBuf>,
    token_command: Option<Vec<String>>,
}

/// The profile file: `$XDG_CONFIG_HOME/canopy/config.toml`, else
/// `~/.config/canopy/config.toml`.
pub fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("canopy").join("config.toml"))
}

/// Fills `store.server` and `store.token` from the chosen context, when
/// one applies (see the module's documentation).
pub fn apply(store: &mut StoreArgs) -> Result<()> {
    if store.server.is_some() {
        return Ok(());
    }
    let Some(file) = path() else { return Ok(()) };
    let named = store.context.clone();
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match named {
                Some(n) => Err(eyre!("no context {n:?}: there is no profile file at {}", file.display())),
                None => Ok(()),
            };
        }
        Err(e) => return Err(eyre!(e).wrap_err(format!("reading {}", file.display()))),
    };
    let profile: Profile = toml::from_str(&text).map_err(|e| {
        eyre!(
            "{}: {}(a context takes `servers` and `token_file` or `token_command`; a token itself never goes in \
             this file)",
            file.display(),
            e.message()
        )
    })?;
    let name = match named {
        Some(n) => n,
        // A store named (--store, $CANOPY_HOME) is local unless a context
        // is asked for.
        None if store.store.is_some() || std::env::var_os("CANOPY_HOME").is_some() => return Ok(()),
        None => match &profile.current_context {
            Some(n) => n.clone(),
            None => return Ok(()),
        },
    };
    let Some(ctx) = profile.contexts.get(&name) else {
        let known: Vec<&str> = profile.contexts.keys().map(String::as_str).collect();
        bail!("no context {name:?} in {} (it has: {})", file.display(), known.join(", "));
    };
    store.server = Some(reachable(&name, &ctx.servers)?);
    if store.token.is_none() {
        store.token = token(&name, ctx)?;
    }
    Ok(())
}

/// Every one of `servers`, comma-separated for the client, the first that
/// accepts a TCP connection first: requests start there and fail over to
/// the others (`canopy::client::FAILOVER_WAIT`).
fn reachable(context: &str, servers: &[String]) -> Result<String> {
    if servers.is_empty() {
        bail!("context {context:?} lists no servers");
    }
    let mut first = None;
    for (i, s) in servers.iter().enumerate() {
        let Ok(url) = reqwest::Url::parse(s) else {
            bail!("context {context:?}: {s:?} is not a URL (http://HOST:PORT or https://…)");
        };
        if s.contains(',') {
            bail!("context {context:?}: {s:?} holds a comma; list each server as its own string");
        }
        let addrs = url.socket_addrs(|| None).unwrap_or_default();
        if first.is_none()
            && addrs.iter().any(|a| std::net::TcpStream::connect_timeout(a, CONNECT_WAIT).is_ok())
        {
            first = Some(i);
        }
    }
    let mut ordered = servers.to_vec();
    ordered.rotate_left(first.unwrap_or(0));
    Ok(ordered.join(","))
}

/// The context's token: the file's first line, or what the command prints.
fn token(context: &str, ctx: &Context) -> Result<Option<String>> {
    match (&ctx.token_file, &ctx.token_command) {
        (Some(_), Some(_)) => bail!("context {context:?} has both token_file and token_command: keep one"),
        (Some(f), None) => {
            let f = expand_home(f);
            let text = std::fs::read_to_string(&f)
                .wrap_err_with(|| format!("context {context:?}: reading {}", f.display()))?;
            Ok(text.lines().next().map(|l| l.trim().to_string()).filter(|t| !t.is_empty()))
        }
        (None, Some(cmd)) => {
            let Some((program, args)) = cmd.split_first() else {
                bail!("context {context:?}: token_command is empty");
            };
            let out = std::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::inherit())
                .output()
                .wrap_err_with(|| format!("context {context:?}: running token_command {program:?}"))?;
            if !out.status.success() {
                bail!("context {context:?}: token_command {program:?} failed ({})", out.status);
            }
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(text.lines().next().map(|l| l.trim().to_string()).filter(|t| !t.is_empty()))
        }
        (None, None) => Ok(None),
    }
}

/// `~/x` as `$HOME/x`.
fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}
