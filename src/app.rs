//! Wiring the embedded default into a running engine: the store in a
//! [`Home`], the fleet (this host as the `local` provider, plus the demo
//! fleet or a fleet file served by the simulator), the provider adapters,
//! and the engine shell on the current tokio runtime.
//!
//! Owns start-up order only: take ownership of the store, open the
//! journal, take inventory, compose the fleet, restore the core, start the
//! shell. Decisions stay in the core; I/O stays in the shell and adapters.

use crate::engine::clock::{Clock, SystemClock};
use crate::engine::core::{Core, CoreConfig, Restore};
use crate::engine::shell::{self, EngineHandle, Providers, ShellConfig, ShellError};
use crate::fleet::{Fleet, ProviderDef, ProviderKind, load};
use crate::home::Home;
use crate::journal::{HealthWindow, Journal, JournalError, Ownership, acquire_owner};
use crate::providers::Provider;
use crate::providers::local::{LocalConfig, LocalProvider, ShimCommand};

/// On a PostgreSQL journal: the lease file this host's local attempts run
/// under, in the server's home, renewed with the journal's lease.
const LOCAL_LEASE: &str = "local.lease";
use crate::providers::sim::{SimConfig, SimMarket, SimProvider};
use crate::server::{ServerOptions, Serving};
use std::path::PathBuf;
use std::sync::Arc;

/// What to start.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    pub home: Home,
    /// A fleet file for the simulated providers; the demo fleet when `None`.
    pub fleet: Option<PathBuf>,
    /// How the local provider starts its supervisor.
    pub shim: ShimCommand,
    pub sim: SimConfig,
    pub core: CoreConfig,
    /// Status polling interval and friends; `None` for the defaults.
    pub poll_every: Option<std::time::Duration>,
    /// `canopy.toml` given by `--config`; else `$CANOPY_CONFIG`, else
    /// `<home>/canopy.toml` when present (see [`crate::config`]).
    pub config: Option<PathBuf>,
    /// How the API is served: always on the store's socket, on TCP when
    /// asked.
    pub server: ServerOptions,
    /// Start a new journal even though the store holds attempts, logs or
    /// artifacts of an old one (`canopy serve --new-journal`).
    pub new_journal: bool,
    /// On a PostgreSQL journal: the API URL written into the lease row, so
    /// standbys forward to it (empty: none; see `canopy serve --advertise`).
    pub advertise: String,
}

impl EngineOptions {
    /// The embedded default in `home`, with the supervisor in this binary.
    pub fn embedded(home: Home) -> Result<Self, AppError> {
        let shim = ShimCommand::current_exe()
            .map_err(|e| AppError::Setup(format!("cannot find this program: {e}")))?;
        Ok(Self {
            home,
            fleet: None,
            shim,
            sim: SimConfig::demo(),
            core: CoreConfig::default(),
            poll_every: None,
            config: None,
            server: ServerOptions::default(),
            new_journal: false,
            advertise: String::new(),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Fleet(#[from] crate::fleet::load::FleetFileError),
    #[error("composing the fleet: {0}")]
    Compose(#[from] crate::fleet::FleetError),
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Serve(#[from] crate::server::ServeError),
}

/// A started engine, serving its API.
pub struct Running {
    pub handle: EngineHandle,
    pub task: tokio::task::JoinHandle<Result<(), ShellError>>,
    /// The fleet it started with.
    pub fleet: Fleet,
    pub store_id: String,
    /// The journal as shown: its file, or its PostgreSQL URL without a
    /// password.
    pub journal: String,
    /// The API on the store's socket (and TCP when asked).
    pub serving: Serving,
    /// What an operator must hear about the store on start (also logged).
    pub notices: Vec<String>,
    /// On a PostgreSQL journal: turns true when the lease's renewer finds
    /// another server took the lease (the server then steps down).
    pub lease_lost: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Running {
    /// Stops serving, then stops the engine and waits for it (at most
    /// `wait`). Running attempts stay with their providers.
    pub async fn stop(self, wait: std::time::Duration) -> Result<(), ShellError> {
        self.serving.stop().await;
        self.handle.shutdown();
        match tokio::time::timeout(wait, self.task).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(ShellError::Join(e.to_string())),
            Err(_) => Ok(()),
        }
    }
}

/// Starts the engine. Fails with a clear message when another engine owns
/// the store.
pub async fn start(opts: EngineOptions) -> Result<Running, AppError> {
    start_owning(opts, None).await
}

/// The configuration `opts` starts with, and the home with its journal
/// where `[journal]` puts it.
pub fn configured(opts: &EngineOptions) -> Result<(crate::config::Config, Home), AppError> {
    let config = match crate::config::locate(opts.config.as_deref(), opts.home.root()) {
        Some(path) => crate::config::load(&path)?,
        None => crate::config::Config::default(),
    };
    // `[journal] url`: the journal on PostgreSQL; the home keeps the rest.
    let home = match config.journal.url {
        Some(_) => opts
            .home
            .clone()
            .with_journal(config.journal.location(&opts.home.store(), |k| std::env::var(k).ok())),
        None => opts.home.clone(),
    };
    Ok((config, home))
}

/// [`start`], with the journal's ownership already taken (a standby that
/// took the lease), or taken here when `None`.
pub async fn start_owning(opts: EngineOptions, owned: Option<Ownership>) -> Result<Running, AppError> {
    let mut notices = Vec::new();
    if let Some(w) = opts
        .home
        .prepare()
        .map_err(|e| AppError::Setup(format!("cannot create {}: {e}", opts.home.root().display())))?
    {
        notices.push(w);
    }
    let (config, home) = configured(&opts)?;
    let home = &home;
    let location = home.journal();
    let on_postgres = matches!(location, crate::journal::Location::Postgres { .. });
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let now = clock.now();
    let mut lease_lost = None;
    let mut lease_epoch = None;
    let (lock, mut journal, keep_id) = if on_postgres {
        // The client blocks on a runtime of its own: off the async loop.
        // A new database starts a new journal; the SQLite file's checks for
        // leftovers of a lost journal do not apply to it.
        let lock = match owned {
            Some(lock) => lock,
            None => off_loop(|| location.take(now, config.journal.lease_term(), &opts.advertise))?,
        };
        let mut journal = off_loop(|| location.open())?;
        // Every write checks the lease's epoch: once another server takes
        // the journal over, this one's writes are refused.
        if let Ownership::Lease(lease) = &lock {
            journal.fence(lease);
            // This host's local work runs only while this server vouches
            // for it, renewed with the journal's lease (see below).
            lease.vouch_locally(&home.root().join(LOCAL_LEASE)).map_err(|e| {
                AppError::Setup(format!("cannot write the local lease in {}: {e}", home.root().display()))
            })?;
            lease_lost = Some(lease.lost());
            lease_epoch = Some(lease.epoch());
            off_loop(|| crate::ha::record_takeover(&mut journal, lease, now))?;
        }
        (lock, journal, None)
    } else {
        let lock = Ownership::File(acquire_owner(&home.store(), now)?);
        let mut keep_id = None;
        if home.journal_is_new() {
            if opts.new_journal {
                // Old attempts keep their store id, so they are recognised as
                // this store's (and listed as unknown), never as a stranger's.
                keep_id = home.store_id_on_disk();
            } else {
                refuse_over_leftovers(home)?;
            }
        }
        let journal = Journal::open_with_id(&home.store(), keep_id.as_deref())?;
        home.secure_journal();
        (lock, journal, keep_id)
    };
    if keep_id.is_some() {
        let adopted = adopt_local_attempts(home, &mut journal, now)?;
        if !adopted.is_empty() {
            notices.push(format!(
                "a new journal was started over a lost one: adopted {} attempt(s) this host still had ({}); \
                 their earlier history is gone",
                adopted.len(),
                adopted.join(", ")
            ));
        }
    }

    let mut local_cfg = LocalConfig::new(home.attempts(), opts.shim.clone());
    local_cfg.outputs = config.outputs.limits();
    local_cfg.nodes = config.local.nodes.unwrap_or(1).clamp(1, 64);
    if on_postgres {
        local_cfg.lease = Some(home.root().join(LOCAL_LEASE));
    }
    let local = LocalProvider::new(local_cfg);
    let ssh =
        SshSetup { store: journal.store_id().to_string(), state_dir: home.root().join("ssh"), renew: true };
    let (fleet, simulated, engines) = compose(&config, &local, opts.fleet.as_deref(), &ssh).await?;

    let local: Arc<dyn Provider> = Arc::new(local);
    let mut providers: Providers = Providers::new();
    providers.insert(local.name().to_string(), local.clone());
    for (_, p) in engines {
        providers.insert(p.name().to_string(), p);
    }
    let market = Arc::new(
        SimMarket::new(&simulated, opts.sim.clone())
            .map_err(|e| AppError::Setup(format!("simulator: {e}")))?,
    );
    // The local provider and the simulated ones (which execute through
    // it) run their attempts on this host.
    let mut on_this_host = std::collections::BTreeSet::from([local.name().to_string()]);
    for p in SimProvider::all(&market, &local, &clock) {
        on_this_host.insert(p.name().to_string());
        providers.insert(p.name().to_string(), p);
    }

    let store_id = journal.store_id().to_string();
    let mut core_config = opts.core.clone();
    config.engine.apply(&mut core_config);
    let webhooks = config.webhooks.resolve(|k| std::env::var(k).ok()).map_err(AppError::Setup)?;
    let (rules, sender) = webhooks.map_or((None, None), |(r, s)| (Some(r), Some(s)));
    core_config.webhooks = rules;
    if on_postgres {
        // Attempts of a lost leader on its own host are not this server's
        // to re-launch or to take for running (see `CoreConfig::host_bound`).
        let term = config.journal.lease_term().as_secs_f64();
        core_config.host_bound = Some(crate::engine::core::HostBound {
            providers: on_this_host,
            // The old leader's local lease lapses within a term of its last
            // renewal (at most a term before this takeover, plus the third
            // of a term the standby waits between tries); its supervisors
            // read it every second; five seconds for clocks and slow hosts.
            hold_s: term + term / 3.0 + 1.0 + 5.0,
        });
    }
    let mut core = Core::new(store_id.clone(), fleet.clone(), core_config);
    let id_floor = home.max_workload_on_disk();
    let restored = off_loop(|| -> Result<_, AppError> {
        let tenancy = tenancy_at_start(&mut journal, &config, now)?;
        core.handle(crate::engine::core::Event::SetTenancy { tenancy: Box::new(tenancy) }, now);
        let since = crate::engine::model::Millis(now.0 - 7 * 24 * 3600 * 1000);
        let rec = journal.load_live(HealthWindow { since, limit: 100_000 })?;
        let max_id = rec.max_workload_id.map_or(0, |w| w.0);
        if id_floor > max_id {
            notices.push(format!(
                "the journal knows workloads up to w-{max_id}, but this store has logs or artifacts up to \
                 w-{id_floor}: the journal was restored from an older copy or lost its last commits. Their \
                 history is gone from the journal; new workloads start at w-{}, so none shares their logs",
                id_floor + 1
            ));
        }
        let restored = core.restore(
            Restore {
                workloads: rec.workloads,
                attempts: rec.attempts,
                health: rec.health,
                max_id,
                id_floor,
                intents: rec.intents,
            },
            now,
        );
        if let Some(since) = core.fair_share_horizon(now) {
            let uses = journal.gpu_use_since(since)?;
            core.restore_fair_share(&uses, now);
        }
        // Ended attempts are kept for budgets whether or not any is set now:
        // one set later counts what its period already spent.
        let horizon = crate::engine::model::Millis(now.0 - crate::engine::core::HORIZON_MS);
        core.restore_budgets(journal.closed_attempts_since(horizon)?, now);
        // Deliveries not yet delivered go on after a restart, in order.
        core.restore_deliveries(journal.pending_deliveries()?, journal.last_delivery_id()?);
        Ok(restored)
    })?;
    let mut cfg = ShellConfig::new(home.artifacts(), home.logs());
    cfg.webhooks = sender;
    if let Some(p) = opts.poll_every {
        cfg.poll_every = p;
    }
    let (handle, task) = shell::start(core, journal, lock, providers, cfg, clock, restored);
    let mut server_options = opts.server.clone();
    server_options.lease_term = config.journal.lease_term();
    let serving =
        match crate::server::serve(handle.clone(), home.clone(), store_id.clone(), server_options).await {
            Ok(s) => s,
            Err(e) => {
                handle.shutdown();
                let _ = task.await;
                return Err(e.into());
            }
        };
    // Standbys forward to the address the listener actually has (port 0
    // picks one only now).
    if let Some(epoch) = lease_epoch {
        let tls = opts.server.tls.is_some();
        let address = crate::ha::advertised(
            Some(&opts.advertise).filter(|a| !a.is_empty()).map(|a| a.as_str()),
            serving.tcp,
            tls,
        );
        if address != opts.advertise {
            let r = serving.state.read(move |j| j.advertise(epoch, &address)).await;
            if let Err(e) = r {
                tracing::warn!(error = %e, "could not advertise this server's address; standbys cannot forward to it");
            }
        }
    }
    for n in &notices {
        tracing::warn!("{n}");
    }
    Ok(Running { handle, task, fleet, store_id, journal: location.shown(), serving, notices, lease_lost })
}

/// A new journal over a lost one takes back what the local provider still
/// has on this host: each attempt directory of this store whose workload is
/// running, or ended without anyone collecting it, becomes a workload (its
/// spec from `spec.json`) with that one live attempt, so the engine follows
/// it to its end as usual. Earlier attempts and events are gone with the
/// old journal. Returns the adopted workloads.
fn adopt_local_attempts(
    home: &Home,
    journal: &mut Journal,
    now: crate::engine::model::Millis,
) -> Result<Vec<String>, AppError> {
    use crate::engine::model::*;
    use crate::providers::local::layout::{AttemptDir, LaunchRecord, read_json};
    use crate::providers::local::state::{Observed, observe};
    let store_id = journal.store_id().to_string();
    let mut newest: std::collections::BTreeMap<WorkloadId, (AttemptId, String, String)> = Default::default();
    for token in home.leftovers().attempts {
        let Some((a, nonce)) = AttemptId::parse_token(&token, &store_id) else { continue };
        if newest.get(&a.workload).is_none_or(|(b, ..)| b.n < a.n) {
            newest.insert(a.workload, (a, nonce.to_string(), token.clone()));
        }
    }
    let mut records = Vec::new();
    let mut adopted = Vec::new();
    for (id, (a, nonce, token)) in newest {
        let dir = AttemptDir::at(&home.attempts(), &token);
        if !matches!(observe(&dir), Ok(Observed::Running(_) | Observed::Ended(_))) {
            continue;
        }
        let (Ok(Some(spec)), Ok(Some(launch))) =
            (read_json::<crate::spec::Spec>(&dir.spec()), read_json::<LaunchRecord>(&dir.launch()))
        else {
            continue;
        };
        let at = Millis(launch.launched_at_ms);
        let pool =
            if launch.pool.contains('/') { launch.pool.clone() } else { format!("local/{}", launch.pool) };
        let w = WorkloadRecord {
            id,
            name: spec.name.clone(),
            spec_hash: spec.content_hash(),
            idempotency_key: None,
            priority: spec.priority,
            state: WorkloadState::Running,
            submitted_at: at,
            updated_at: now,
            attempts: a.n,
            app_failures: 0,
            not_before: None,
            cost_usd: 0.0,
            est_cost_usd: 0.0,
            reason: Some("adopted into a new journal after the old one was lost".into()),
            class: None,
            submitted_by: None,
            acknowledged: None,
            exclusions: None,
            retried_as: None,
            tenant: None,
            spec: spec.into(),
        };
        let att = AttemptRecord {
            id: a,
            provider: crate::providers::local::PROVIDER_NAME.into(),
            pool,
            node: launch.node.clone(),
            region: String::new(),
            state: AttemptState::Running,
            price_per_hour: 0.0,
            est_cost_usd: 0.0,
            gpus: w.spec.resources.gpus,
            gpu_memory_gb: 0.0,
            score: 0.0,
            score_breakdown: String::new(),
            placed_at: at,
            started_at: Some(at),
            ended_at: None,
            exit_code: None,
            class: None,
            rule: None,
            evidence: None,
            cost_usd: 0.0,
            provider_ref: None,
            nonce,
            stop: None,
            nodes: Vec::new(),
            checkpoint: None,
        };
        let message = format!("adopted {token} into a new journal (the old one was lost)");
        records.push(Record::Workload(Box::new(w)));
        records.push(Record::Attempt(Box::new(att)));
        records.push(Record::Event(EventRecord {
            at: now,
            workload: id,
            attempt: Some(a),
            kind: EventKind::Adopted,
            message,
        }));
        adopted.push(id.to_string());
    }
    if !records.is_empty() {
        journal.append(&records)?;
    }
    Ok(adopted)
}

/// A store whose journal is missing or empty but which holds what an old
/// journal's workloads left (attempt directories, logs, artifacts) is not
/// started over silently: a new store there would sit next to live
/// attempts it cannot account for.
fn refuse_over_leftovers(home: &Home) -> Result<(), AppError> {
    let left = home.leftovers();
    if left.is_empty() {
        return Ok(());
    }
    let list = |v: &[String]| {
        let mut s = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > 5 {
            s.push_str(&format!(" and {} more", v.len() - 5));
        }
        s
    };
    let mut found = Vec::new();
    if !left.attempts.is_empty() {
        found.push(format!("{} attempt directories ({})", left.attempts.len(), list(&left.attempts)));
    }
    if !left.workloads.is_empty() {
        found.push(format!(
            "logs or artifacts of {} workloads ({})",
            left.workloads.len(),
            list(&left.workloads)
        ));
    }
    Err(AppError::Setup(format!(
        "{} is missing or empty, but the store {} holds {}: starting would begin a new store beside them. \
         If the journal was moved or deleted by mistake, put it back (canopy.db, and canopy.db-wal if there \
         was one). To start a new journal here anyway, run `canopy serve --new-journal`: what this host \
         still runs is adopted, attempts elsewhere are listed by `canopy fleet`, and new workload ids start \
         above the old ones.",
        home.store().display(),
        home.root().display(),
        found.join(" and ")
    )))
}

/// Runs `f`, which may call the PostgreSQL client (it blocks on a runtime
/// of its own), outside the async loop's context: in place on a
/// multi-threaded runtime (the engine's, `canopy serve`'s), directly
/// elsewhere (SQLite only: a current-thread runtime cannot host the
/// PostgreSQL client, and its first call says so).
fn off_loop<T>(f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi { tokio::task::block_in_place(f) } else { f() }
}

/// The fleet an engine starts with: this host, the real engines
/// `canopy.toml` names (inventory taken live), and the simulated fleet (a
/// fleet file, else the demo fleet when the configuration includes it).
/// Also the simulated part and the engines' adapters.
#[allow(clippy::type_complexity)]
async fn compose(
    config: &crate::config::Config,
    local: &LocalProvider,
    fleet_file: Option<&std::path::Path>,
    ssh: &SshSetup,
) -> Result<(Fleet, Fleet, Vec<(ProviderDef, Arc<dyn Provider>)>), AppError> {
    let local_def = match local.inventory().await {
        Ok(inv) => provider_def(local.name(), ProviderKind::Local, None, inv),
        Err(e) => return Err(AppError::Setup(format!("cannot take this host's inventory: {e}"))),
    };
    let engines = engine_providers(config, ssh).await?;
    let simulated = match fleet_file {
        Some(path) => load::load_file(path)?,
        None if config.include_demo_fleet => load::demo()?,
        None => Fleet::default(),
    }
    // A fleet file may mark GPUs as Canopy's (to show lend limits in
    // `canopy fleet`), but a starting engine holds only what its live
    // attempts hold: anything else in use belongs to someone else.
    .with_canopy_holdings_as_others()?;
    let mut defs = vec![local_def];
    defs.extend(engines.iter().map(|(def, _)| def.clone()));
    let fleet = simulated.with_providers(defs)?;
    Ok((fleet, simulated, engines))
}

/// The fleet an engine over `home` would run with, taken live, for the
/// commands that answer without one (`canopy fleet`, `canopy plan`): the
/// configuration decides, the demo fleet joins only when it says so.
pub async fn configured_fleet(home: &Home, config: Option<&std::path::Path>) -> Result<Fleet, AppError> {
    let config = match crate::config::locate(config, home.root()) {
        Some(path) => crate::config::load(&path)?,
        None => crate::config::Config::default(),
    };
    // Only its inventory is asked for: no supervisor is ever started.
    let local = LocalProvider::new(LocalConfig::new(
        home.attempts(),
        ShimCommand::current_exe().map_err(|e| AppError::Setup(format!("cannot find this program: {e}")))?,
    ));
    // A probe only: it renews no lease and starts nothing on the hosts.
    let ssh = SshSetup {
        store: home.store_id_on_disk().unwrap_or_else(|| "probe".into()),
        state_dir: home.root().join("ssh"),
        renew: false,
    };
    Ok(compose(&config, &local, None, &ssh).await?.0)
}

/// The real engines `canopy.toml` names, each with the fleet entry built
/// from its inventory. An engine that cannot be reached stops the start:
/// its running attempts could not be re-adopted, and its capacity would
/// silently vanish from placement.
async fn engine_providers(
    config: &crate::config::Config,
    ssh: &SshSetup,
) -> Result<Vec<(ProviderDef, Arc<dyn Provider>)>, AppError> {
    use crate::providers::ray::{RayConfig, RayProvider};
    use crate::providers::slurm::{SlurmConfig, SlurmProvider};
    use crate::providers::ssh::{SshConfig, SshProvider};
    let mut out: Vec<(Arc<dyn Provider>, ProviderKind, Option<u32>)> = Vec::new();
    let limits = config.outputs.limits();
    for e in &config.slurm {
        let mut cfg = SlurmConfig::from_entry(e).map_err(AppError::Setup)?;
        cfg.outputs = limits;
        let p = SlurmProvider::new(cfg).map_err(AppError::Setup)?;
        out.push((Arc::new(p), ProviderKind::Slurm, e.lend_limit_gpus));
    }
    for e in &config.ray {
        let mut cfg = RayConfig::from_entry(e).map_err(AppError::Setup)?;
        cfg.outputs = limits;
        let p = RayProvider::new(cfg).map_err(AppError::Setup)?;
        out.push((Arc::new(p), ProviderKind::Ray, e.lend_limit_gpus));
    }
    for e in &config.ssh {
        let mut cfg = SshConfig::from_entry(e, &ssh.store, &ssh.state_dir).map_err(AppError::Setup)?;
        cfg.outputs = limits;
        // An unreachable host is a node that is down, not a failed start.
        let p = if ssh.renew { SshProvider::start(cfg) } else { SshProvider::new(cfg) };
        out.push((Arc::new(p), ProviderKind::Ssh, None));
    }
    let mut ready = Vec::new();
    for (p, kind, lend) in out {
        let inv = p.inventory().await.map_err(|e| {
            AppError::Setup(format!(
                "cannot take the inventory of provider {}: {e}; start the engine or remove its entry from canopy.toml",
                p.name()
            ))
        })?;
        ready.push((provider_def(p.name(), kind, lend, inv), p));
    }
    Ok(ready)
}

/// What the ssh providers need from the engine: the store they work for
/// (its own directory and lease on each host), where to keep pinned host
/// keys, and whether to renew leases (an engine) or only probe.
struct SshSetup {
    store: String,
    state_dir: std::path::PathBuf,
    renew: bool,
}

/// A fleet entry from a provider's inventory.
pub fn provider_def(
    name: &str,
    kind: ProviderKind,
    lend_limit_gpus: Option<u32>,
    inv: crate::providers::Inventory,
) -> ProviderDef {
    ProviderDef { name: name.to_string(), kind, lend_limit_gpus, pools: inv.into_pool_defs() }
}

/// The tenancy in force at start: the journal's, unless canopy.toml's
/// tables differ from the ones it was last seeded from; then the file's,
/// journalled and audited as set by the configuration file.
fn tenancy_at_start(
    journal: &mut Journal,
    config: &crate::config::Config,
    now: crate::engine::model::Millis,
) -> Result<crate::tenant::Tenancy, AppError> {
    use crate::tenant::doc::{AtStart, SET_BY_FILE, TenancyDoc, at_start};
    let file = TenancyDoc {
        default_tenant: config.default_tenant.clone(),
        tenant: config.tenant.clone(),
        flavor: config.flavor.clone(),
        fair_share: config.fair_share.clone(),
        budget: config.budget.clone(),
    };
    let stored = journal.tenancy()?;
    let doc = match at_start(&file, stored.as_ref().map(|r| (r.document.as_str(), r.seeded_from.as_str()))) {
        AtStart::None => return Ok(crate::tenant::Tenancy::default()),
        AtStart::Stored(doc) => doc,
        AtStart::File(doc) => {
            let row = crate::journal::TenancyRow {
                document: doc.to_json(),
                seeded_from: doc.to_json(),
                set_by: SET_BY_FILE.into(),
                set_at: now,
            };
            let audit = crate::engine::model::AuditRecord {
                at: now,
                principal: SET_BY_FILE.into(),
                origin: "configuration file".into(),
                action: "tenants-set".into(),
                target: None,
                outcome: format!(
                    "ok: {} tenants, {} flavors, {} budgets",
                    doc.tenant.len(),
                    doc.flavor.len(),
                    doc.budget.len()
                ),
                reason: None,
            };
            journal.set_tenancy(&row, &audit)?;
            doc
        }
    };
    // The file's tables were validated when it was read; the journal's
    // when an admin set them. A version that no longer validates (a newer
    // Canopy's rules) is an error to fix, not one to start around.
    doc.tenancy().map_err(|e| {
        AppError::Setup(format!(
            "the tenancy in force (set by {}) is not valid: {e}; fix canopy.toml's [[tenant]]/[[flavor]] tables \
             (a changed file replaces it at start) or PUT /v1/tenants",
            stored.map_or(SET_BY_FILE.to_string(), |r| r.set_by)
        ))
    })
}
