//! `[[ssh]]` in `canopy.toml`: owners' machines reached over SSH, their
//! hosts and pools, and the checks on them (a key given as a path, never
//! as key material; a lease the engine's outage threshold allows).

use crate::units::HumanDuration;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Owners' machines reached over SSH (`[[ssh]]`), grouped into pools.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshEntry {
    #[serde(default = "ssh_name")]
    pub name: String,
    /// How long a host's supervisors keep their workloads running without
    /// hearing from Canopy (default 60s); shorter than
    /// `[engine] unreachable_after`.
    #[serde(default)]
    pub lease: Option<HumanDuration>,
    /// How long an idle connection to a host stays open (default 2m; at
    /// least 2s): the connection (an ssh master multiplexing every
    /// command) is opened again when needed, and one a `canopy serve`
    /// killed without closing it is gone at most this long after its last
    /// command.
    #[serde(default)]
    pub connection_idle: Option<HumanDuration>,
    /// The known_hosts file for hosts that name none of their own.
    #[serde(default)]
    pub known_hosts: Option<PathBuf>,
    /// The Canopy build uploaded to hosts of this program's architecture
    /// (default: this program; e.g. a static musl build, docs/ssh.md).
    #[serde(default)]
    pub binary: Option<PathBuf>,
    /// Builds for hosts of other architectures, by `uname -m`
    /// (`{ aarch64 = "/opt/canopy/aarch64/canopy" }`); one named here for
    /// this program's architecture replaces `binary`.
    #[serde(default)]
    pub binaries: BTreeMap<String, PathBuf>,
    pub hosts: Vec<SshHostEntry>,
    #[serde(default)]
    pub pools: BTreeMap<String, SshPoolEntry>,
}

/// The lease when `[[ssh]]` sets none.
pub const DEFAULT_SSH_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// The time an unreachable host's supervisors need, past the lease, to
/// notice it ran out and stop their workloads; `lease` plus this must fit
/// in `[engine] unreachable_after`.
pub const SSH_LEASE_MARGIN: std::time::Duration = std::time::Duration::from_secs(10);

/// How long an idle connection to a host stays open when `[[ssh]]` sets
/// nothing: long enough that the engine's inventory refresh (every 30 s)
/// keeps an idle engine's connection (it is replaced once unused for half
/// of this), short enough that a killed server's go soon.
pub const DEFAULT_SSH_CONNECTION_IDLE: std::time::Duration = std::time::Duration::from_secs(120);

impl SshEntry {
    pub fn lease(&self) -> std::time::Duration {
        self.lease.map_or(DEFAULT_SSH_LEASE, |d| d.0)
    }

    pub fn connection_idle(&self) -> std::time::Duration {
        self.connection_idle.map_or(DEFAULT_SSH_CONNECTION_IDLE, |d| d.0)
    }
}

/// One host of an `[[ssh]]` provider.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshHostEntry {
    /// The node's name in Canopy.
    pub name: String,
    pub address: String,
    #[serde(default = "ssh_port")]
    pub port: u16,
    pub user: String,
    /// The private key's file (never the key itself).
    pub key: PathBuf,
    /// This host's known_hosts file, instead of the provider's.
    #[serde(default)]
    pub known_hosts: Option<PathBuf>,
    /// The host's public key (`ssh-ed25519 AAAA…`), instead of a
    /// known_hosts file.
    #[serde(default)]
    pub host_key: Option<String>,
    #[serde(default = "ssh_pool")]
    pub pool: String,
    /// Who lends it, for the audit trail and `canopy fleet`.
    #[serde(default)]
    pub owner: Option<String>,
}

/// `[ssh.pools.NAME]`: what a pool of hosts offers and when.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshPoolEntry {
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub lend_limit_gpus: Option<u32>,
    /// When the hosts are lent (`"mon-fri 20:00-08:00"`, `"sat-sun"`);
    /// always when empty.
    #[serde(default)]
    pub windows: Vec<String>,
    /// The IANA time zone of `windows` (required with them).
    #[serde(default)]
    pub timezone: Option<String>,
}

fn ssh_name() -> String {
    "ssh".into()
}
fn ssh_port() -> u16 {
    22
}
fn ssh_pool() -> String {
    "default".into()
}

impl SshEntry {
    /// Checks what can be checked without the hosts: names, keys given by
    /// path, a host key or known_hosts for every host, the lease against
    /// the engine's blip tolerance.
    pub(super) fn check(&self, unreachable_after: std::time::Duration) -> Result<(), String> {
        let at = format!("[[ssh]] {}", self.name);
        if self.hosts.is_empty() {
            return Err(format!("{at}: lists no hosts; add [[ssh.hosts]] entries or remove it"));
        }
        let lease = self.lease();
        if lease < std::time::Duration::from_secs(2) {
            return Err(format!("{at}: lease {} is too short; give at least 2s", HumanDuration(lease)));
        }
        let idle = self.connection_idle();
        if idle < std::time::Duration::from_secs(2) {
            return Err(format!(
                "{at}: connection_idle {} is too short; give at least 2s",
                HumanDuration(idle)
            ));
        }
        if lease + SSH_LEASE_MARGIN >= unreachable_after {
            return Err(format!(
                "{at}: lease {} (plus {}s for supervisors to stop their workloads) must be shorter than \
                 [engine] unreachable_after ({}): otherwise work from an unreachable host could be \
                 started elsewhere while it still runs there. Shorten the lease or raise unreachable_after",
                HumanDuration(lease),
                SSH_LEASE_MARGIN.as_secs(),
                HumanDuration(unreachable_after)
            ));
        }
        let mut names: Vec<&str> = Vec::new();
        for h in &self.hosts {
            let hat = format!("{at}: host {:?}", h.name);
            if h.name.is_empty() || names.contains(&h.name.as_str()) {
                return Err(format!("{hat}: host names must be non-empty and unique"));
            }
            names.push(&h.name);
            if h.address.is_empty() || h.address.starts_with('-') || h.address.contains(char::is_whitespace) {
                return Err(format!("{hat}: address {:?} is not a host name or IP address", h.address));
            }
            if h.user.is_empty()
                || h.user.starts_with('-')
                || h.user.contains(|c: char| c.is_whitespace() || c == '@')
            {
                return Err(format!("{hat}: user {:?} is not a user name", h.user));
            }
            let key = h.key.to_string_lossy();
            if looks_like_key_material(&key) {
                return Err(format!(
                    "{hat}: `key` holds what looks like key material; give the path of the private key's \
                     file instead (key = \"/path/id_ed25519\"), and keep the key itself out of canopy.toml"
                ));
            }
            match (&h.host_key, &h.known_hosts, &self.known_hosts) {
                (Some(_), Some(_), _) => {
                    return Err(format!("{hat}: give host_key or known_hosts, not both"));
                }
                (Some(k), _, _)
                    if !k.trim_start().starts_with("ssh-") && !k.trim_start().starts_with("ecdsa-") =>
                {
                    return Err(format!(
                        "{hat}: host_key must be a public host key like \"ssh-ed25519 AAAA…\" (see \
                         `ssh-keyscan`, checked with the owner)"
                    ));
                }
                (None, None, None) => {
                    return Err(format!(
                        "{hat}: says nothing about the host's key; set known_hosts (here or for the \
                         provider) or host_key, so Canopy can verify it is talking to this host"
                    ));
                }
                _ => {}
            }
            if h.pool.is_empty() {
                return Err(format!("{hat}: pool must not be empty"));
            }
        }
        for (name, p) in &self.pools {
            if !self.hosts.iter().any(|h| &h.pool == name) {
                return Err(format!("{at}: [ssh.pools.{name}] has no hosts; set `pool = {name:?}` on some"));
            }
            if !p.windows.is_empty() && p.timezone.is_none() {
                return Err(format!(
                    "{at}: [ssh.pools.{name}] has lend windows but no timezone; name one such as \
                     \"Europe/Berlin\" so the windows mean the same wherever Canopy runs"
                ));
            }
            if let Some(tz) = &p.timezone {
                crate::providers::window::LendWindows::parse(&p.windows, tz)
                    .map_err(|m| format!("{at}: [ssh.pools.{name}] windows: {m}"))?;
            }
            if p.price_per_hour.is_some_and(|v| !(v.is_finite() && v >= 0.0)) {
                return Err(format!("{at}: [ssh.pools.{name}] price_per_hour must be zero or more"));
            }
        }
        Ok(())
    }
}

/// Whether a `key` value is a key rather than a path to one.
fn looks_like_key_material(key: &str) -> bool {
    key.contains("-----BEGIN")
        || key.contains("PRIVATE KEY")
        || key.contains('\n')
        || key.starts_with("ssh-")
        || key.starts_with("AAAA")
        || (key.len() > 64 && !key.contains('/'))
}
