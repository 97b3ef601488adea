//! `canopy.toml`: which real engines Canopy drives and how.
//!
//! This module owns the file's format, where it is found (`--config FILE`,
//! else `$CANOPY_CONFIG`, else `<home>/canopy.toml` when present) and its
//! validation into typed provider configurations. It reads the file and
//! nothing else: credentials are named here by environment variable and
//! resolved by the adapters at start, so no secret is ever written in the
//! file, and none ever appears in an error from this module.
//!
//! ```toml
//! include_demo_fleet = false        # default true: the simulated demo fleet
//! default_tenant = "team-a"         # the socket owner's tenant (see [[tenant]])
//!
//! [engine]                          # outage and failure thresholds
//! unreachable_after = "5m"          # status polls failing this long end an attempt
//! exclusion_ttl = "30m"             # a workload's failed nodes/pools are retried after
//! quarantine_cooldown = "30m"       # a quarantined node's first cool-down
//! patience = true                   # work of 2h+ may wait for capacity at half the price
//! patience_max_wait = "6h"          # ... a quarter of its expected runtime, this long at most
//!
//! [outputs]                         # collecting outputs, every provider
//! max_output_size = "8GiB"          # per output (a file, or a directory's files)
//! max_attempt_size = "32GiB"        # all of one attempt's outputs together
//! collect_timeout = "10m"           # then collection stops; the rest is skipped
//!
//! [local]
//! nodes = 2                         # offer this machine as 2 nodes (gangs run here)
//!
//! [[slurm]]
//! name = "slurm"                    # provider name, default "slurm"
//! url = "http://127.0.0.1:6820"     # slurmrestd
//! user = "root"                     # X-SLURM-USER-NAME
//! token_env = "CANOPY_SLURM_JWT"    # the JWT is read from this variable
//! jobs_dir = "/shared/canopy-jobs"  # on a filesystem shared with the nodes
//! jobs_retention = "1d"             # an attempt's directory, once Canopy has its logs and outputs
//! lend_limit_gpus = 8
//! startup_limit = "10m"             # pending longer → stopped, class capacity
//! pin_by_feature = false            # nodes carry a feature named after them
//! [slurm.partitions.debug]          # overrides for partition `debug`
//! pool = "h100"                     # pool name (default: the partition's)
//! capabilities = ["infiniband"]
//! gpu_memory_gb = 80
//! lend_limit_gpus = 4
//! [slurm.topology]                  # declared: Slurm does not report these
//! fabric = { kind = "infiniband", gbps = 200 }   # every pool's inter-node network
//! pools = { debug = { kind = "roce", gbps = 100 } }  # a pool's own, over `fabric`
//! switches = { sw1 = ["n1", "n2"] } # each node's leaf switch (Slurm node names)
//!
//! [[ray]]
//! name = "ray"
//! url = "http://127.0.0.1:8265"
//! token_env = "CANOPY_RAY_TOKEN"    # optional: Ray's token auth
//! jobs_dir = "/shared/canopy-jobs"
//! capabilities = ["ray"]
//! startup_limit = "2m"
//! [ray.topology]                    # node names as Canopy shows them
//! fabric = { kind = "ethernet", gbps = 25 }
//! switches = { tor1 = ["ray-127.0.0.1", "ray-127.0.0.2"] }
//!
//! [[ssh]]                           # owners' machines over SSH (docs/ssh.md)
//! name = "owners"                   # provider name, default "ssh"
//! lease = "30s"                     # a host's workloads stop this long after Canopy last reached it
//! known_hosts = "/etc/canopy/known_hosts"   # default for the hosts below
//! [[ssh.hosts]]
//! name = "gpu-a"                    # the node's name
//! address = "127.0.0.1"
//! port = 2222
//! user = "owner-a"                  # the unprivileged user workloads run as
//! key = "/etc/canopy/id_ed25519"    # the key file's path, never the key
//! pool = "lab-a"
//! owner = "alice"
//! [ssh.pools.lab-a]
//! region = "eu-central"
//! lend_limit_gpus = 2
//! windows = ["mon-fri 20:00-08:00", "sat-sun"]
//! timezone = "Europe/Berlin"
//!
//! [webhooks]                        # calling applications back (README, "Webhooks")
//! secret_env = "CANOPY_WEBHOOK_SECRET"  # the signing secret is read from this variable
//! allow_http = false                # plain http:// receivers
//! allow = ["10.1.2.3/32"]           # networks the default refuses (loopback, link-local)
//! max_in_flight = 8                 # deliveries in flight at once
//! retry_for = "1d"                  # a failing delivery is tried this long
//! [[webhooks.subscription]]         # every workload's ends go here too
//! url = "https://hooks.example.com/canopy"
//! events = ["failed"]
//!
//! [[flavor]]                        # quotas count in flavors (crate::tenant::config)
//! name = "gpu"
//! cpu_only = false                  # pools with accelerators
//! [[tenant]]                        # shared compute: who may use how much
//! name = "team-a"
//! cohort = "research"               # lends unused quota to, borrows from, its cohort
//! [tenant.quota.gpu]
//! gpus = { nominal = 8, borrowing_limit = 4 }
//! [[tenant]]
//! name = "team-b"
//! cohort = "research"
//! [tenant.quota.gpu]
//! gpus = 4
//! ```

use crate::providers::collect::OutputLimits;
use crate::units::{ByteSize, HumanDuration};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod journal;
mod ssh;
mod webhooks;
pub use journal::{JournalEntry, PASSWORD_ENV as JOURNAL_PASSWORD_ENV};
pub use ssh::*;
pub use webhooks::{SECRET_ENV as WEBHOOK_SECRET_ENV, SubscriptionEntry, WebhooksEntry};

/// The name of the configuration file in Canopy's home.
pub const FILE_NAME: &str = "canopy.toml";
/// The environment variable naming a configuration file.
pub const ENV_VAR: &str = "CANOPY_CONFIG";

/// The whole file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Whether the simulated demo fleet joins the real providers.
    #[serde(default = "yes")]
    pub include_demo_fleet: bool,
    #[serde(default)]
    pub slurm: Vec<SlurmEntry>,
    #[serde(default)]
    pub ray: Vec<RayEntry>,
    #[serde(default)]
    pub ssh: Vec<SshEntry>,
    #[serde(default)]
    pub outputs: OutputsEntry,
    #[serde(default)]
    pub engine: EngineEntry,
    #[serde(default)]
    pub local: LocalEntry,
    /// The tenant of the store's owner on the socket (and of tokens made
    /// before tenants were configured).
    #[serde(default)]
    pub default_tenant: Option<String>,
    /// `[[tenant]]`: who shares the fleet, with quotas per flavor.
    #[serde(default)]
    pub tenant: Vec<crate::tenant::TenantDef>,
    /// `[[flavor]]`: the selectors over pools quotas are counted in.
    #[serde(default)]
    pub flavor: Vec<crate::tenant::FlavorDef>,
    /// `[fair_share]`: the half-life tenants' usage decays with.
    #[serde(default)]
    pub fair_share: Option<crate::tenant::fair::FairShareDef>,
    /// `[[budget]]`: spend limits per period on tenants' and tokens' work.
    #[serde(default)]
    pub budget: Vec<crate::tenant::BudgetDef>,
    /// `[webhooks]`: signing, target policy, retries, server-wide
    /// subscriptions.
    #[serde(default)]
    pub webhooks: WebhooksEntry,
    /// `[journal]`: the journal on PostgreSQL instead of the SQLite file.
    #[serde(default)]
    pub journal: JournalEntry,
}

/// `[local]`: how this machine is offered.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalEntry {
    /// Split this machine into this many equal nodes, so multi-node
    /// (gang) work runs here: each gets 1/N of the CPUs, memory, disk and
    /// GPUs, and all talk over loopback. 1 when unset.
    #[serde(default)]
    pub nodes: Option<u32>,
}

impl Config {
    /// The tenants, flavors and owners the file defines, validated (empty
    /// when it defines none).
    pub fn tenancy(&self) -> Result<crate::tenant::Tenancy, String> {
        crate::tenant::Tenancy::from_defs(&self.tenant, &self.flavor, self.default_tenant.as_deref())
            .and_then(|t| t.with_fair_share(self.fair_share.as_ref()))
            .and_then(|t| t.with_budgets(&self.budget))
            .map_err(|e| e.to_string())
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            include_demo_fleet: true,
            slurm: Vec::new(),
            ray: Vec::new(),
            ssh: Vec::new(),
            outputs: OutputsEntry::default(),
            engine: EngineEntry::default(),
            local: LocalEntry::default(),
            default_tenant: None,
            tenant: Vec::new(),
            flavor: Vec::new(),
            fair_share: None,
            budget: Vec::new(),
            webhooks: WebhooksEntry::default(),
            journal: JournalEntry::default(),
        }
    }
}

/// `[engine]`: how long an outage is tolerated and how long failures are
/// held against nodes and pools. Unset keys keep the core's defaults.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineEntry {
    /// Status polls failing this long end a running attempt (the blip
    /// tolerance; default 5m).
    #[serde(default)]
    pub unreachable_after: Option<HumanDuration>,
    /// A workload's excluded nodes and pools are forgotten this long after
    /// its last failure (default 30m).
    #[serde(default)]
    pub exclusion_ttl: Option<HumanDuration>,
    /// A quarantined node's first cool-down (default 30m; doubles on
    /// repeats).
    #[serde(default)]
    pub quarantine_cooldown: Option<HumanDuration>,
    /// Whether work expected to run 2 hours or more may wait a while for
    /// capacity at half the price or less that running work is due to
    /// free (default true).
    #[serde(default)]
    pub patience: Option<bool>,
    /// The longest such a wait lasts (default 6h; it is also at most a
    /// quarter of the work's expected runtime).
    #[serde(default)]
    pub patience_max_wait: Option<HumanDuration>,
}

impl EngineEntry {
    /// `core` with this section's settings applied.
    pub fn apply(&self, core: &mut crate::engine::core::CoreConfig) {
        if let Some(d) = self.unreachable_after {
            core.unreachable_after_s = d.0.as_secs_f64();
        }
        if let Some(d) = self.exclusion_ttl {
            core.exclusion_ttl_s = d.0.as_secs_f64();
        }
        if let Some(d) = self.quarantine_cooldown {
            core.health.cooldown_s = d.0.as_secs_f64();
            core.health.max_cooldown_s = core.health.max_cooldown_s.max(core.health.cooldown_s);
        }
        if self.patience == Some(false) && core.placement == crate::engine::core::PlacementPolicy::HealthAware
        {
            core.placement = crate::engine::core::PlacementPolicy::Eager;
        }
        if let Some(d) = self.patience_max_wait {
            core.patience.max_wait_s = d.0.as_secs_f64();
        }
    }
}

/// `[outputs]`: limits on collecting outputs, for every provider. Unset
/// keys keep the defaults of [`OutputLimits`] (8 GiB per output, 32 GiB per
/// attempt, 10 minutes).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputsEntry {
    #[serde(default)]
    pub max_output_size: Option<ByteSize>,
    #[serde(default)]
    pub max_attempt_size: Option<ByteSize>,
    #[serde(default)]
    pub collect_timeout: Option<HumanDuration>,
}

impl OutputsEntry {
    pub fn limits(&self) -> OutputLimits {
        let d = OutputLimits::default();
        OutputLimits {
            max_output_bytes: self.max_output_size.map_or(d.max_output_bytes, |b| b.0),
            max_attempt_bytes: self.max_attempt_size.map_or(d.max_attempt_bytes, |b| b.0),
            collect_timeout: self.collect_timeout.map_or(d.collect_timeout, |t| t.0),
        }
    }
}

fn yes() -> bool {
    true
}

/// One Slurm cluster reached through slurmrestd.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmEntry {
    #[serde(default = "slurm_name")]
    pub name: String,
    pub url: String,
    #[serde(default = "root")]
    pub user: String,
    /// The environment variable holding the JWT (never the JWT itself).
    pub token_env: String,
    /// Where job directories are made; must be shared with the nodes.
    pub jobs_dir: PathBuf,
    /// How long an attempt's directory stays once Canopy has its logs and
    /// outputs (default a day).
    #[serde(default)]
    pub jobs_retention: Option<HumanDuration>,
    #[serde(default)]
    pub lend_limit_gpus: Option<u32>,
    #[serde(default)]
    pub startup_limit: Option<HumanDuration>,
    #[serde(default)]
    pub pin_by_feature: bool,
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub partitions: BTreeMap<String, PartitionOverride>,
    /// Declared fabric and switches (`[slurm.topology]`).
    #[serde(default)]
    pub topology: TopologyEntry,
}

fn slurm_name() -> String {
    "slurm".into()
}
fn root() -> String {
    "root".into()
}

/// Overrides for one partition's pool.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionOverride {
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub gpu_memory_gb: Option<f64>,
    #[serde(default)]
    pub lend_limit_gpus: Option<u32>,
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    /// Leave the partition out of the fleet.
    #[serde(default)]
    pub skip: bool,
}

/// One Ray cluster reached through its Jobs API (the dashboard port).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RayEntry {
    #[serde(default = "ray_name")]
    pub name: String,
    pub url: String,
    /// The environment variable holding Ray's auth token, if Ray has one.
    #[serde(default)]
    pub token_env: Option<String>,
    pub jobs_dir: PathBuf,
    /// How long an attempt's directory stays once Canopy has its logs and
    /// outputs (default a day).
    #[serde(default)]
    pub jobs_retention: Option<HumanDuration>,
    #[serde(default)]
    pub lend_limit_gpus: Option<u32>,
    #[serde(default)]
    pub startup_limit: Option<HumanDuration>,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub gpu_memory_gb: Option<f64>,
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    #[serde(default)]
    pub region: Option<String>,
    /// Python for the entrypoint wrapper on the Ray nodes.
    #[serde(default)]
    pub python: Option<String>,
    /// Declared fabric and switches (`[ray.topology]`).
    #[serde(default)]
    pub topology: TopologyEntry,
}

/// `[slurm.topology]` / `[ray.topology]`: what the engine cannot report
/// about its network, declared by the operator: each pool's inter-node
/// fabric and each node's leaf switch (the fleet file's pool `fabric` and
/// node `switch`). Node names are checked against the engine's inventory
/// when the provider starts.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyEntry {
    /// Every pool's fabric, unless `pools` names its own.
    #[serde(default)]
    pub fabric: Option<FabricEntry>,
    /// Pool name → its fabric.
    #[serde(default)]
    pub pools: BTreeMap<String, FabricEntry>,
    /// Switch name → the nodes on it.
    #[serde(default)]
    pub switches: BTreeMap<String, Vec<String>>,
    /// The file this was read from, for errors found later (a node the
    /// engine does not have); set by [`load`].
    #[serde(skip)]
    pub declared_in: Option<PathBuf>,
}

/// `{ kind = "infiniband", gbps = 200 }`, as in fleet files.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FabricEntry {
    pub kind: crate::accel::Fabric,
    /// Gbit/s per node.
    pub gbps: f64,
}

impl FabricEntry {
    pub fn to_fabric(self) -> crate::fleet::NodeFabric {
        crate::fleet::NodeFabric { kind: self.kind, gbps: self.gbps }
    }
}

impl TopologyEntry {
    /// The fabric declared for `pool`.
    pub fn fabric_of(&self, pool: &str) -> Option<crate::fleet::NodeFabric> {
        self.pools.get(pool).copied().or(self.fabric).map(FabricEntry::to_fabric)
    }

    /// The switch declared for `node`.
    pub fn switch_of(&self, node: &str) -> Option<String> {
        self.switches.iter().find(|(_, nodes)| nodes.iter().any(|n| n == node)).map(|(s, _)| s.clone())
    }

    /// Declared nodes the engine does not have, as `switches.SW` key and
    /// node name; `has` answers for the engine's nodes.
    pub fn unknown_nodes(&self, has: impl Fn(&str) -> bool) -> Vec<(String, String)> {
        self.switches
            .iter()
            .flat_map(|(sw, nodes)| nodes.iter().map(move |n| (sw.clone(), n.clone())))
            .filter(|(_, n)| !has(n))
            .collect()
    }

    /// Declared pools the engine does not have; `has` answers for its pools.
    pub fn unknown_pools(&self, has: impl Fn(&str) -> bool) -> Vec<String> {
        self.pools.keys().filter(|p| !has(p)).cloned().collect()
    }

    /// Where the declaration was read, for messages.
    pub fn file(&self) -> String {
        self.declared_in.as_ref().map_or_else(|| FILE_NAME.to_string(), |p| p.display().to_string())
    }

    /// What this `[<section>.topology]` names that the engine (`engine`,
    /// say "Slurm") does not have, given the nodes and pools it reports, as
    /// one message naming the file, the keys and what to do; `None` when
    /// everything it names exists.
    pub fn mismatch(
        &self,
        section: &str,
        engine: &str,
        provider: &str,
        nodes: &[&str],
        pools: &[&str],
    ) -> Option<String> {
        let mut problems: Vec<String> = self
            .unknown_nodes(|n| nodes.contains(&n))
            .into_iter()
            .map(|(sw, n)| format!("[{section}.topology] switches.{sw} names node {n:?}"))
            .collect();
        problems.extend(
            self.unknown_pools(|p| pools.contains(&p))
                .into_iter()
                .map(|p| format!("[{section}.topology] pools.{p} names pool {p:?}")),
        );
        (!problems.is_empty()).then(|| {
            format!(
                "{}: provider {provider}: {}, which {engine} does not have (its nodes: {}; its pools: {}); \
                 correct the name or remove it",
                self.file(),
                problems.join("; "),
                nodes.join(", "),
                pools.join(", ")
            )
        })
    }

    fn check(&self, section: &str) -> Result<(), String> {
        let fabrics = self
            .fabric
            .iter()
            .map(|f| ("fabric".to_string(), f))
            .chain(self.pools.iter().map(|(p, f)| (format!("pools.{p}"), f)));
        for (key, f) in fabrics {
            if !(f.gbps.is_finite() && f.gbps > 0.0) {
                return Err(format!("[{section}.topology] {key}: gbps must be positive, got {}", f.gbps));
            }
        }
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for (sw, nodes) in &self.switches {
            if nodes.is_empty() {
                return Err(format!(
                    "[{section}.topology] switches.{sw} lists no nodes; list them or remove it"
                ));
            }
            for n in nodes {
                if let Some(other) = seen.insert(n, sw) {
                    return Err(format!(
                        "[{section}.topology] node {n:?} is on two switches ({other} and {sw}); a node hangs off one"
                    ));
                }
            }
        }
        Ok(())
    }
}

fn ray_name() -> String {
    "ray".into()
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration {path}: {source}; check the path given by --config or ${ENV_VAR}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("configuration {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
}

/// Which file to read: the flag, else `$CANOPY_CONFIG`, else the home's
/// `canopy.toml` when it exists. `None` when there is none.
pub fn locate(flag: Option<&Path>, home: &Path) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let p = home.join(FILE_NAME);
    p.is_file().then_some(p)
}

/// Reads and checks a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.into(), source })?;
    let mut cfg = parse(&text).map_err(|message| ConfigError::Parse { path: path.into(), message })?;
    for t in cfg.slurm.iter_mut().map(|s| &mut s.topology).chain(cfg.ray.iter_mut().map(|r| &mut r.topology))
    {
        t.declared_in = Some(path.to_path_buf());
    }
    Ok(cfg)
}

/// Parses and checks configuration text.
pub fn parse(text: &str) -> Result<Config, String> {
    let cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
    cfg.tenancy()?;
    let mut names: Vec<&str> = cfg
        .slurm
        .iter()
        .map(|s| s.name.as_str())
        .chain(cfg.ray.iter().map(|r| r.name.as_str()))
        .chain(cfg.ssh.iter().map(|r| r.name.as_str()))
        .collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!(
            "provider name {:?} is used twice; give each [[slurm]]/[[ray]]/[[ssh]] its own `name`",
            w[0]
        ));
    }
    for n in &names {
        if matches!(*n, "local") || n.is_empty() {
            return Err(format!("provider name {n:?} is reserved or empty; choose another `name`"));
        }
    }
    for url in cfg.slurm.iter().map(|s| &s.url).chain(cfg.ray.iter().map(|r| &r.url)) {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!("url {url:?} must start with http:// or https://"));
        }
    }
    for s in &cfg.slurm {
        if s.token_env.is_empty() {
            return Err(format!("[[slurm]] {}: token_env must name an environment variable", s.name));
        }
        s.topology.check("slurm").map_err(|m| format!("[[slurm]] {}: {m}", s.name))?;
    }
    for r in &cfg.ray {
        r.topology.check("ray").map_err(|m| format!("[[ray]] {}: {m}", r.name))?;
    }
    cfg.webhooks.check()?;
    cfg.journal.check()?;
    let mut core = crate::engine::core::CoreConfig::default();
    cfg.engine.apply(&mut core);
    let unreachable_after = std::time::Duration::from_secs_f64(core.unreachable_after_s);
    let mut hosts: Vec<&str> = Vec::new();
    for s in &cfg.ssh {
        s.check(unreachable_after)?;
        for h in &s.hosts {
            if hosts.contains(&h.name.as_str()) {
                return Err(format!("ssh host name {:?} is used twice; node names must be unique", h.name));
            }
            hosts.push(&h.name);
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let doc = include_str!("mod.rs");
        let example: String = doc
            .lines()
            .skip_while(|l| !l.starts_with("//! ```toml"))
            .skip(1)
            .take_while(|l| !l.starts_with("//! ```"))
            .map(|l| l.trim_start_matches("//!").trim_start_matches(' '))
            .collect::<Vec<_>>()
            .join("\n");
        let cfg = parse(&example).unwrap();
        assert!(!cfg.include_demo_fleet);
        assert_eq!(cfg.slurm[0].token_env, "CANOPY_SLURM_JWT");
        assert_eq!(cfg.slurm[0].partitions["debug"].pool.as_deref(), Some("h100"));
        assert_eq!(cfg.ray[0].capabilities, vec!["ray".to_string()]);
        let tenancy = cfg.tenancy().unwrap();
        assert_eq!(tenancy.tenants.len(), 2);
        assert_eq!(tenancy.default_tenant.as_deref(), Some("team-a"));
        let e = parse("default_tenant = \"nobody\"\n[[tenant]]\nname = \"a\"").unwrap_err();
        assert!(e.contains("default_tenant = \"nobody\" is not a [[tenant]]"), "{e}");
        assert_eq!(cfg.outputs.limits(), OutputLimits::default());
        let small = parse("[outputs]\nmax_output_size = \"1MiB\"\ncollect_timeout = \"30s\"").unwrap();
        let l = small.outputs.limits();
        assert_eq!((l.max_output_bytes, l.max_attempt_bytes), (1 << 20, 32 << 30));
        assert_eq!(l.collect_timeout.as_secs(), 30);
        assert!(parse("[outputs]\nmax_output_size = \"lots\"").is_err());
        let eng = parse("[engine]\nexclusion_ttl = \"2m\"\nunreachable_after = \"20s\"").unwrap();
        let mut core = crate::engine::core::CoreConfig::default();
        eng.engine.apply(&mut core);
        assert_eq!((core.exclusion_ttl_s, core.unreachable_after_s), (120.0, 20.0));
        assert!(parse("[engine]\nblip = \"1s\"").is_err());
        use crate::engine::core::PlacementPolicy;
        assert!(core.placement.patient(), "patient unless told otherwise");
        let eng = parse("[engine]\npatience = false").unwrap();
        let mut core = crate::engine::core::CoreConfig::default();
        eng.engine.apply(&mut core);
        assert_eq!(core.placement, PlacementPolicy::Eager);
        let eng = parse("[engine]\npatience_max_wait = \"90m\"").unwrap();
        let mut core = crate::engine::core::CoreConfig::default();
        eng.engine.apply(&mut core);
        assert_eq!((core.placement, core.patience.max_wait_s), (PlacementPolicy::HealthAware, 5400.0));
        assert!(parse("[engine]\npatience = \"soon\"").is_err());
        let topo = &cfg.slurm[0].topology;
        assert_eq!(topo.switch_of("n2").as_deref(), Some("sw1"));
        assert_eq!(topo.fabric_of("debug").map(|f| f.gbps), Some(100.0), "the pool's own");
        assert_eq!(topo.fabric_of("other").map(|f| f.kind), Some(crate::accel::Fabric::Infiniband));
        assert_eq!(cfg.ray[0].topology.switch_of("ray-127.0.0.2").as_deref(), Some("tor1"));
        let ssh = &cfg.ssh[0];
        assert_eq!((ssh.name.as_str(), ssh.lease().as_secs(), ssh.hosts[0].port), ("owners", 30, 2222));
        assert_eq!(ssh.pools["lab-a"].windows.len(), 2);
    }

    #[test]
    fn ssh_mistakes_are_named() {
        let host = "[[ssh.hosts]]\nname='a'\naddress='10.0.0.1'\nuser='u'\nknown_hosts='/k'\n";
        let key = parse(&format!("[[ssh]]\n{host}key='-----BEGIN OPENSSH PRIVATE KEY-----'\n")).unwrap_err();
        assert!(key.contains("looks like key material") && key.contains("path"), "{key}");
        let ok = parse(&format!("[[ssh]]\n{host}key='/k/id'\n")).unwrap();
        assert_eq!(ok.ssh[0].lease(), DEFAULT_SSH_LEASE);
        let lease =
            parse(&format!("[engine]\nunreachable_after='30s'\n[[ssh]]\nlease='30s'\n{host}key='/k'\n"))
                .unwrap_err();
        assert!(lease.contains("must be shorter than [engine] unreachable_after"), "{lease}");
        assert_eq!(ok.ssh[0].connection_idle(), DEFAULT_SSH_CONNECTION_IDLE);
        let idle = parse(&format!("[[ssh]]\nconnection_idle='5s'\n{host}key='/k'\n")).unwrap();
        assert_eq!(idle.ssh[0].connection_idle().as_secs(), 5);
        let idle = parse(&format!("[[ssh]]\nconnection_idle='1s'\n{host}key='/k'\n")).unwrap_err();
        assert!(idle.contains("[[ssh]] ssh: connection_idle 1s is too short; give at least 2s"), "{idle}");
        let nohk = parse("[[ssh]]\n[[ssh.hosts]]\nname='a'\naddress='h'\nuser='u'\nkey='/k'\n").unwrap_err();
        assert!(nohk.contains("known_hosts") && nohk.contains("host_key"), "{nohk}");
        let tz = parse(&format!("[[ssh]]\n{host}key='/k'\npool='p'\n[ssh.pools.p]\nwindows=['sat-sun']\n"))
            .unwrap_err();
        assert!(tz.contains("no timezone"), "{tz}");
        let pool = "pool='p'\n[ssh.pools.p]\ntimezone='Europe/Berlin'\n";
        let day =
            parse(&format!("[[ssh]]\n{host}key='/k'\n{pool}windows=['mon-fry 20:00-08:00']\n")).unwrap_err();
        assert!(day.contains("[ssh.pools.p] windows") && day.contains("\"fry\" is not a day"), "{day}");
        let zone =
            parse(&format!("[[ssh]]\n{host}key='/k'\npool='p'\n[ssh.pools.p]\ntimezone='Mars/Base'\n"))
                .unwrap_err();
        assert!(zone.contains("unknown time zone \"Mars/Base\""), "{zone}");
        assert!(parse(&format!("[[ssh]]\n{host}key='/k'\npassword='x'\n")).is_err());
    }

    #[test]
    fn topology_mistakes_are_named() {
        let base = "[[slurm]]\nurl='http://a'\ntoken_env='T'\njobs_dir='/j'\n[slurm.topology]\n";
        let two = parse(&format!("{base}switches = {{ a = ['n1'], b = ['n1'] }}")).unwrap_err();
        assert!(two.contains("\"n1\" is on two switches (a and b)"), "{two}");
        let gbps = parse(&format!("{base}fabric = {{ kind = 'infiniband', gbps = 0 }}")).unwrap_err();
        assert!(gbps.contains("[slurm.topology] fabric: gbps must be positive"), "{gbps}");
        let kind = parse(&format!("{base}fabric = {{ kind = 'myrinet', gbps = 10 }}")).unwrap_err();
        assert!(kind.contains("myrinet"), "{kind}");
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("canopy.toml");
        std::fs::write(&path, format!("{base}switches = {{ sw1 = ['n1', 'n9'] }}")).unwrap();
        let cfg = load(&path).unwrap();
        let topo = &cfg.slurm[0].topology;
        assert_eq!(topo.unknown_nodes(|n| n == "n1"), vec![("sw1".to_string(), "n9".to_string())]);
        assert_eq!(topo.file(), path.display().to_string());
        let m = topo.mismatch("ray", "Ray", "ray-iad", &["n1"], &["gpu"]).unwrap();
        assert_eq!(
            m,
            format!(
                "{}: provider ray-iad: [ray.topology] switches.sw1 names node \"n9\", which Ray does not have \
                 (its nodes: n1; its pools: gpu); correct the name or remove it",
                path.display()
            )
        );
        assert_eq!(topo.mismatch("ray", "Ray", "ray-iad", &["n1", "n9"], &[]), None);
    }

    #[test]
    fn rejects_duplicate_names_and_unknown_keys() {
        let two = "[[slurm]]\nurl='http://a'\ntoken_env='T'\njobs_dir='/j'\n[[ray]]\nname='slurm'\nurl='http://b'\njobs_dir='/j'\n";
        assert!(parse(two).unwrap_err().contains("used twice"));
        assert!(parse("[[slurm]]\nurl='http://a'\ntoken='secret'\n").is_err());
        assert!(parse("").unwrap().include_demo_fleet);
    }
}
