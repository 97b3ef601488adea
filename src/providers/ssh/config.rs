//! The `ssh` provider's configuration: `[[ssh]]` from `canopy.toml` made
//! into hosts and pools, each host's key pinned in a known_hosts file of
//! Canopy's own.

use super::*;

#[derive(Clone)]
pub struct SshConfig {
    pub name: String,
    pub lease: Duration,
    /// The Canopy build uploaded to hosts.
    /// The Canopy builds uploaded to hosts, by architecture (`uname -m`):
    /// this program for its own, plus `[[ssh]] binaries`.
    pub binaries: BTreeMap<String, PathBuf>,
    /// The store's id: each store has its own directory and lease on a host.
    pub store: String,
    /// Where ssh's control sockets and Canopy's ssh_config live (0700).
    pub control_dir: PathBuf,
    /// How long an idle connection to a host stays open.
    pub connection_idle: Duration,
    pub hosts: Vec<HostConfig>,
    pub pools: BTreeMap<String, PoolConfig>,
    /// Grace between SIGTERM and SIGKILL when the spec gives none.
    pub grace: Duration,
    pub outputs: OutputLimits,
    pub clock: Clock,
}

impl std::fmt::Debug for SshConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshConfig")
            .field("name", &self.name)
            .field("lease", &self.lease)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
pub struct HostConfig {
    pub target: Target,
    pub pool: String,
    pub owner: Option<String>,
}

#[derive(Debug, Clone)]
pub struct PoolConfig {
    pub region: String,
    pub price_per_hour: f64,
    pub capabilities: Vec<String>,
    pub lend_limit_gpus: Option<u32>,
    pub windows: LendWindows,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            region: KIND.into(),
            price_per_hour: 0.0,
            capabilities: Vec::new(),
            lend_limit_gpus: None,
            windows: LendWindows::always(),
        }
    }
}

impl SshConfig {
    /// From `[[ssh]]`. A host given by `host_key` gets a known_hosts file
    /// of its own under `state_dir` (0600), holding only that key.
    pub fn from_entry(e: &SshEntry, store: &str, state_dir: &Path) -> Result<Self, String> {
        let at = format!("[[ssh]] {}", e.name);
        let binary = match &e.binary {
            Some(b) => b.clone(),
            None => {
                std::env::current_exe().map_err(|err| format!("{at}: cannot find this program: {err}"))?
            }
        };
        let mut binaries = BTreeMap::from([(std::env::consts::ARCH.to_string(), binary)]);
        binaries.extend(e.binaries.iter().map(|(arch, p)| (arch.clone(), p.clone())));
        let mut pools = BTreeMap::new();
        for h in &e.hosts {
            if pools.contains_key(&h.pool) {
                continue;
            }
            let p = e.pools.get(&h.pool).cloned().unwrap_or_default();
            let windows = if p.windows.is_empty() {
                LendWindows::always()
            } else {
                LendWindows::parse(&p.windows, p.timezone.as_deref().unwrap_or("UTC"))
                    .map_err(|m| format!("{at}: [ssh.pools.{}] windows: {m}", h.pool))?
            };
            pools.insert(
                h.pool.clone(),
                PoolConfig {
                    region: p.region.unwrap_or_else(|| KIND.into()),
                    price_per_hour: p.price_per_hour.unwrap_or(0.0),
                    capabilities: p.capabilities,
                    lend_limit_gpus: p.lend_limit_gpus,
                    windows,
                },
            );
        }
        let mut hosts = Vec::new();
        for h in &e.hosts {
            let known_hosts = match (&h.host_key, &h.known_hosts, &e.known_hosts) {
                (Some(key), _, _) => pinned_known_hosts(state_dir, &e.name, h, key)?,
                (None, Some(k), _) | (None, None, Some(k)) => k.clone(),
                (None, None, None) => return Err(format!("{at}: host {:?} names no known_hosts", h.name)),
            };
            hosts.push(HostConfig {
                target: Target {
                    name: h.name.clone(),
                    address: h.address.clone(),
                    port: h.port,
                    user: h.user.clone(),
                    key: h.key.clone(),
                    known_hosts,
                },
                pool: h.pool.clone(),
                owner: h.owner.clone(),
            });
        }
        Ok(Self {
            name: e.name.clone(),
            lease: e.lease(),
            binaries,
            store: store.to_string(),
            control_dir: default_control_dir(),
            connection_idle: e.connection_idle(),
            hosts,
            pools,
            grace: crate::spec::Runtime::DEFAULT_STOP_GRACE,
            outputs: OutputLimits::default(),
            clock: Arc::new(SystemTime::now),
        })
    }
}

/// `<tmp>/canopy-ssh-<uid>`: short, since control socket paths are
/// limited to about 100 bytes.
fn default_control_dir() -> PathBuf {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir().join(format!("canopy-ssh-{uid}"))
}

fn pinned_known_hosts(
    state_dir: &Path,
    provider: &str,
    h: &crate::config::SshHostEntry,
    key: &str,
) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir.join(provider);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = dir.join(format!("known_hosts-{}", h.name.replace(['/', '\0'], "_")));
    let key = key.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
    let line = format!("[{}]:{} {key}\n", h.address, h.port);
    crate::providers::local::layout::write_atomic(&path, line.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
