//! The `ray` provider: attempts as Ray jobs submitted through the Jobs
//! REST API, with `submission_id` = the attempt's token.
//!
//! Launch asks for the token first and adopts a job that already has it
//! (Ray answers a duplicate `submission_id` with HTTP 500, so a lost answer
//! must never lead to a second submission). A job still pending after the
//! configured startup limit while Ray's scheduler reports its request among
//! the demands it cannot grant is asked to stop and reported as a capacity
//! miss, so the engine places it elsewhere; one whose request Ray is not
//! waiting on is being started (its supervisor, its runtime env) and is
//! waited for up to [`STARTING_FOR`] more (Ray itself fails it after
//! `RAY_JOB_START_TIMEOUT_SECONDS`; its stop of a pending job is a no-op,
//! ray-project/ray#58353). Such a job is *abandoned*: the adapter remembers
//! its token and keeps stopping it — a background re-stop every second,
//! and again on every `list_owned` — until Ray reports it ended, so a job
//! Canopy gave up on never runs untracked for more than a moment. Logs come from Ray's log endpoint (stdout and
//! stderr interleaved, served as stdout); outputs are collected from
//! `<jobs_dir>/<token>/outputs`, which, like Slurm's, must be a filesystem
//! shared between Canopy and the Ray nodes.
//!
//! **Gangs.** The Jobs API has no placement groups, so a launch over
//! several nodes submits Canopy's own driver ([`GANG_DRIVER`], Python,
//! written into the attempt's directory with its `gang.json`) as the
//! entrypoint. It asks Ray for a `STRICT_SPREAD` placement group of one
//! bundle per rank (each pinned to the node Canopy chose, through Ray's
//! `node:<ip>` resource), waits for it at most the startup limit, starts
//! one launcher per bundle with its [`crate::providers::gang`]
//! environment, streams their output, and when one rank fails stops the
//! others and ends with a `CANOPY-GANG-END` line that `status` reads into
//! [`ProviderEnd::Rank`]. A rank that cannot start (its actor does not
//! come up, its process cannot be started on its node) stops those that
//! did and ends the gang as that rank's failed launch
//! ([`ProviderEnd::BootFailed`]). A placement group Ray cannot place in
//! time runs nothing and ends as a capacity refusal.
//!
//! Owns the adapter and its configuration. Must not decide retries; the
//! optional auth token never reaches a log line, an error or the journal.
//! Secret values are passed in the job's `runtime_env`, which Ray shows to
//! anyone who can read its Jobs API.

pub mod api;
pub mod map;

use crate::config::RayEntry;
use crate::failure::ProviderEnd;
use crate::providers::collect::OutputLimits;
use crate::providers::local::layout::{AttemptDir, valid_token};
use crate::providers::slurm::script::quote;
use crate::providers::{
    AttemptStatus, Collection, Inventory, LaunchAck, LaunchError, LaunchRequest, LogChunk, LogStream, Owned,
    Provider, ProviderError, SecretValue,
};
use crate::spec::Spec;
use api::{Api, CallError, RuntimeEnv, Submit};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RayConfig {
    pub name: String,
    pub url: String,
    pub token: Option<SecretValue>,
    pub jobs_dir: PathBuf,
    /// How long a released attempt directory stays ([`crate::providers::jobs_dir`]).
    pub jobs_retention: Duration,
    pub lend_limit_gpus: Option<u32>,
    pub startup_limit: Duration,
    pub pools: map::PoolSettings,
    pub request_timeout: Duration,
    /// Size and time limits on collecting outputs (`[outputs]` in
    /// canopy.toml).
    pub outputs: OutputLimits,
    /// The Python that runs a gang's driver on the head node (Ray's own).
    pub python: String,
}

/// The gang driver, run by Ray as a gang's entrypoint (see the module doc).
pub const GANG_DRIVER: &str = include_str!("gang_driver.py");
/// The metadata key marking a gang's job, with its size.
pub const GANG_KEY: &str = "canopy_gang";
/// How long a stopping gang's ranks get between SIGTERM and SIGKILL.
const GANG_STOP_GRACE_S: u64 = 5;

impl RayConfig {
    pub fn from_entry(e: &RayEntry) -> Result<Self, String> {
        let token = match &e.token_env {
            Some(var) => Some(SecretValue::new(std::env::var(var).map_err(|_| {
                format!("provider {}: environment variable {var} (token_env) is not set; export Ray's auth token there", e.name)
            })?)),
            None => None,
        };
        Ok(Self {
            name: e.name.clone(),
            url: e.url.clone(),
            token,
            jobs_dir: e.jobs_dir.clone(),
            jobs_retention: e.jobs_retention.map_or(crate::providers::jobs_dir::DEFAULT_RETENTION, |d| d.0),
            lend_limit_gpus: e.lend_limit_gpus,
            startup_limit: e.startup_limit.map_or(Duration::from_secs(300), |d| d.0),
            pools: map::PoolSettings {
                provider: e.name.clone(),
                region: e.region.clone().unwrap_or_else(|| "onprem".into()),
                capabilities: e.capabilities.clone(),
                gpu_memory_gb: e.gpu_memory_gb,
                price_per_hour: e.price_per_hour.unwrap_or(0.0),
                lend_limit_gpus: None,
                startup: Duration::from_secs(5),
                topology: e.topology.clone(),
            },
            request_timeout: Duration::from_secs(30),
            outputs: OutputLimits::default(),
            python: e.python.clone().unwrap_or_else(|| "python".into()),
        })
    }
}

/// How long a launch begun here keeps a job Ray has not listed yet
/// pending. Once Ray has listed it, "no such job" means Ray lost it (a
/// restarted head), reported at once.
const LAUNCH_GRACE: Duration = Duration::from_secs(120);

/// How long past the startup limit a pending job Ray is still starting
/// (its request is not among what Ray cannot grant: its supervisor is
/// being started, its runtime env set up) is waited for: Ray's own
/// default start timeout (`RAY_JOB_START_TIMEOUT_SECONDS`, 15 min), which
/// fails it first when set lower.
const STARTING_FOR: Duration = Duration::from_secs(900);

/// How long one read of Ray's unmet resource demands answers for every
/// pending job.
const DEMANDS_FRESH: Duration = Duration::from_secs(2);

/// A resource request as Ray names it: resource → amount.
type Shape = BTreeMap<String, f64>;

/// How often an abandoned job is stopped again, and for how long at most
/// (Ray fails a job pending past `RAY_JOB_START_TIMEOUT_SECONDS`, 15 min by
/// default; a running one stops at the first re-stop).
const RESTOP_EVERY: Duration = Duration::from_secs(1);
const RESTOP_FOR: Duration = Duration::from_secs(3600);

/// The job metadata key holding the SHA-256 of the spec it was submitted
/// for: adoption checks it.
pub const SPEC_HASH_KEY: &str = "canopy_spec_sha256";

pub struct RayProvider {
    cfg: RayConfig,
    api: Api,
    /// Pool name → accelerator type, from the last inventory.
    accel: Mutex<HashMap<String, String>>,
    /// Node name → its IP, from the last inventory (a gang's bundles are
    /// pinned with Ray's `node:<ip>` resource).
    node_ips: Mutex<HashMap<String, String>>,
    /// Whether an inventory has checked the declared topology yet.
    topology_checked: std::sync::atomic::AtomicBool,
    /// First time this adapter saw each token pending.
    pending_since: Mutex<HashMap<String, Instant>>,
    /// Tokens Ray has listed since this adapter launched or adopted them.
    listed: Mutex<HashSet<String>>,
    /// What each job launched here asks Ray for (its entrypoint's
    /// resources), to tell a job waiting for capacity from one Ray is
    /// starting.
    requests: Mutex<HashMap<String, BTreeMap<String, f64>>>,
    /// Ray's unmet resource demands, and when they were read.
    demands: tokio::sync::Mutex<Option<(Instant, Vec<Shape>)>>,
    /// Tokens given up on while pending (Ray ignores their stop): stopped
    /// again until Ray reports them ended.
    abandoned: Arc<Mutex<HashSet<String>>>,
}

impl RayProvider {
    pub fn new(cfg: RayConfig) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(cfg.request_timeout)
            .build()
            .map_err(|e| format!("provider {}: cannot build an HTTP client: {e}", cfg.name))?;
        let api = Api::new(client, &cfg.url, cfg.token.clone());
        Ok(Self {
            cfg,
            api,
            accel: Mutex::new(HashMap::new()),
            node_ips: Mutex::new(HashMap::new()),
            topology_checked: std::sync::atomic::AtomicBool::new(false),
            pending_since: Mutex::new(HashMap::new()),
            listed: Mutex::new(HashSet::new()),
            requests: Mutex::new(HashMap::new()),
            demands: tokio::sync::Mutex::new(None),
            abandoned: Arc::new(Mutex::new(HashSet::new())),
        })
    }

    /// Tokens given up on whose jobs Ray has not yet reported ended.
    pub fn abandoned(&self) -> Vec<String> {
        self.abandoned.lock().map(|s| s.iter().cloned().collect()).unwrap_or_default()
    }

    /// Gives up on a pending job: asks Ray to stop it now, and keeps asking
    /// in the background (and on every `list_owned`) until it has ended.
    async fn abandon(&self, token: &str) -> Result<(), CallError> {
        let first = self.abandoned.lock().map(|mut s| s.insert(token.to_string())).unwrap_or(false);
        if first && let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (api, set, token) = (self.api.clone(), self.abandoned.clone(), token.to_string());
            let provider = self.cfg.name.clone();
            rt.spawn(async move {
                let until = Instant::now() + RESTOP_FOR;
                while Instant::now() < until {
                    tokio::time::sleep(RESTOP_EVERY).await;
                    if !restop(&api, &set, &token).await {
                        return;
                    }
                }
                tracing::warn!(%provider, %token, "gave up re-stopping an abandoned Ray job");
            });
        }
        self.api.stop(token).await
    }

    /// One re-stop of every abandoned job.
    async fn restop_abandoned(&self) {
        for token in self.abandoned() {
            restop(&self.api, &self.abandoned, &token).await;
        }
    }
}

/// Stops an abandoned job again; false (and forgotten) once it has ended
/// or Ray no longer knows it.
async fn restop(api: &Api, set: &Mutex<HashSet<String>>, token: &str) -> bool {
    let ended = match api.job(token).await {
        Ok(Some(j)) => map::is_final(&j.status),
        Ok(None) => true,
        Err(e) => {
            tracing::debug!(%token, error = %e, "re-stop of an abandoned Ray job: status unknown");
            false
        }
    };
    if ended {
        if let Ok(mut s) = set.lock() {
            s.remove(token);
        }
        return false;
    }
    if let Err(e) = api.stop(token).await {
        tracing::debug!(%token, error = %e, "re-stop of an abandoned Ray job failed; will retry");
    }
    true
}

impl RayProvider {
    fn err(&self, what: &str, e: CallError) -> ProviderError {
        ProviderError { provider: self.cfg.name.clone(), message: format!("{what} at {}: {e}", self.cfg.url) }
    }

    fn submission(&self, req: &LaunchRequest) -> Result<Submit, String> {
        let dir = AttemptDir::at(&self.cfg.jobs_dir, &req.token);
        let utf8 =
            |p: &Path| p.to_str().map(str::to_string).ok_or_else(|| format!("{} is not UTF-8", p.display()));
        let workdir = match &req.spec.runtime.workdir {
            Some(w) => w.clone(),
            None => utf8(&dir.work())?,
        };
        let argv: Vec<String> = req.spec.runtime.command.iter().map(|w| quote(w)).collect();
        // Secrets reach the job through a 0600 file it reads and removes
        // first: never runtime_env (Ray lists and logs it).
        let secrets = if req.secrets.is_empty() {
            String::new()
        } else {
            let path = crate::providers::secrets::secret_file(dir.path());
            format!("{}; ", crate::providers::secrets::source_and_remove(&quote(&utf8(&path)?)))
        };
        let entrypoint = if req.is_gang() {
            let config = self.gang_config(req, &workdir)?;
            let driver = dir.path().join("canopy_gang.py");
            let config_path = dir.path().join("gang.json");
            let write = |p: &Path, bytes: &[u8]| {
                std::fs::write(p, bytes).map_err(|e| format!("cannot write {}: {e}", p.display()))
            };
            write(&driver, GANG_DRIVER.as_bytes())?;
            write(&config_path, &serde_json::to_vec_pretty(&config).map_err(|e| e.to_string())?)?;
            format!(
                "exec {} {} {}",
                quote(&self.cfg.python),
                quote(&utf8(&driver)?),
                quote(&utf8(&config_path)?)
            )
        } else {
            format!("{secrets}mkdir -p {wd} && cd {wd} && exec {}", argv.join(" "), wd = quote(&workdir))
        };
        let mut env_vars: BTreeMap<String, String> = req.spec.runtime.env.clone();
        env_vars.insert("CANOPY_OUTPUT_DIR".into(), utf8(&dir.outputs())?);
        env_vars.insert("CANOPY_ATTEMPT_TOKEN".into(), req.token.clone());
        if !req.is_gang() {
            env_vars.extend(crate::providers::gang::one_node_env(
                &req.node,
                req.spec.resources.gpus,
                &req.token,
            ));
        }
        // Handed on in place: the nodes must see Canopy's checkpoint
        // directory (docs/engines.md).
        if let Some(d) = &req.checkpoint_dir {
            env_vars.insert("CANOPY_CHECKPOINT_DIR".into(), utf8(d)?);
        }
        let r = &req.spec.resources;
        let mut resources = BTreeMap::new();
        if r.gpus > 0
            && let Some(kind) = self.accel.lock().ok().and_then(|m| m.get(&req.pool).cloned())
        {
            resources.insert(format!("{}{kind}", map::ACCEL_PREFIX), r.gpus as f64);
        }
        let mut metadata = BTreeMap::new();
        metadata.insert("canopy_token".into(), req.token.clone());
        metadata.insert(SPEC_HASH_KEY.into(), req.spec.content_hash());
        if req.is_gang() {
            // The driver holds nothing (Ray runs it on the head node); the
            // placement group's bundles hold what the ranks need.
            metadata.insert(GANG_KEY.into(), req.nodes.len().to_string());
            return Ok(Submit {
                entrypoint,
                submission_id: req.token.clone(),
                runtime_env: RuntimeEnv { env_vars },
                entrypoint_num_cpus: None,
                entrypoint_num_gpus: None,
                entrypoint_resources: BTreeMap::new(),
                metadata,
            });
        }
        Ok(Submit {
            entrypoint,
            submission_id: req.token.clone(),
            runtime_env: RuntimeEnv { env_vars },
            entrypoint_num_cpus: Some(r.cpu_cores),
            entrypoint_num_gpus: (r.gpus > 0).then_some(r.gpus as f64),
            entrypoint_resources: resources,
            metadata,
        })
    }

    /// What the gang driver reads (`gang.json`): the argv, one bundle and
    /// one launcher environment per rank (addresses as `@CANOPY_ADDR_<i>@`,
    /// filled in by the driver from where Ray placed each bundle), the
    /// secret file and the bounds.
    fn gang_config(&self, req: &LaunchRequest, workdir: &str) -> Result<serde_json::Value, String> {
        let r = &req.spec.resources;
        let accel = self.accel.lock().ok().and_then(|m| m.get(&req.pool).cloned());
        let ips = self.node_ips.lock().map(|m| m.clone()).unwrap_or_default();
        let bundles: Vec<BTreeMap<String, f64>> = req
            .nodes
            .iter()
            .map(|node| {
                let mut b = BTreeMap::new();
                b.insert("CPU".to_string(), if r.cpu_cores > 0.0 { r.cpu_cores } else { 0.01 });
                if r.gpus > 0 {
                    b.insert("GPU".to_string(), r.gpus as f64);
                    if let Some(kind) = &accel {
                        b.insert(format!("{}{kind}", map::ACCEL_PREFIX), r.gpus as f64);
                    }
                }
                if let Some(ip) = ips.get(node) {
                    b.insert(format!("node:{ip}"), 0.001);
                }
                b
            })
            .collect();
        let addrs: Vec<String> = (0..req.nodes.len()).map(|i| format!("@CANOPY_ADDR_{i}@")).collect();
        let port = crate::providers::gang::rendezvous_port(&req.token);
        let envs: Vec<BTreeMap<String, String>> = (0..req.nodes.len())
            .map(|rank| {
                crate::providers::gang::launcher_env(&crate::providers::gang::Rank {
                    rank,
                    nodes: &req.nodes,
                    addrs: &addrs,
                    gpus_per_node: r.gpus,
                    port,
                })
                .into_iter()
                .collect()
            })
            .collect();
        let dir = AttemptDir::at(&self.cfg.jobs_dir, &req.token);
        let secret_file = (!req.secrets.is_empty())
            .then(|| crate::providers::secrets::secret_file(dir.path()).to_string_lossy().into_owned());
        let names: Vec<&str> = req.secrets.iter().map(|(n, _)| n.as_str()).collect();
        Ok(serde_json::json!({
            "token": req.token,
            "argv": req.spec.runtime.command,
            "workdir": workdir,
            "nodes": req.nodes,
            "bundles": bundles,
            "envs": envs,
            "secret_file": secret_file,
            "secret_names": names,
            "placement_timeout_s": self.cfg.startup_limit.as_secs().max(1),
            "stop_grace_s": GANG_STOP_GRACE_S,
        }))
    }

    /// A failed gang's end, from the driver's last word in the job's logs.
    async fn gang_end(&self, token: &str, end: ProviderEnd) -> ProviderEnd {
        match self.api.logs(token).await {
            Ok(logs) => map::gang_end(&logs).unwrap_or(end),
            Err(e) => {
                tracing::debug!(provider = %self.cfg.name, %token, error = %e, "reading a gang's logs");
                end
            }
        }
    }

    /// Checks the declared topology against Ray's nodes and pools: an
    /// error naming the file and key on the first inventory, a warning
    /// later (a node that left).
    fn check_topology(&self, pools: &[crate::providers::InventoryPool]) -> Result<(), ProviderError> {
        let nodes: Vec<&str> = pools.iter().flat_map(|p| &p.nodes).map(|n| n.name.as_str()).collect();
        let names: Vec<&str> = pools.iter().map(|p| p.def.name.as_str()).collect();
        let mismatch = self.cfg.pools.topology.mismatch("ray", "Ray", &self.cfg.name, &nodes, &names);
        crate::providers::topology_verdict(&self.topology_checked, &self.cfg.name, mismatch)
    }

    fn pending_for(&self, token: &str, start_ms: Option<i64>) -> Duration {
        let seen = self
            .pending_since
            .lock()
            .ok()
            .map(|mut m| *m.entry(token.to_string()).or_insert_with(Instant::now));
        let by_adapter = seen.map_or(Duration::ZERO, |t| t.elapsed());
        let by_ray = start_ms.map_or(Duration::ZERO, |ms| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            now.saturating_sub(Duration::from_millis(ms.max(0) as u64))
        });
        by_adapter.max(by_ray)
    }
}

impl RayProvider {
    /// Forgets what this adapter kept about a job that ended or is gone.
    fn forget(&self, token: &str) {
        if let Ok(mut m) = self.pending_since.lock() {
            m.remove(token);
        }
        if let Ok(mut s) = self.listed.lock() {
            s.remove(token);
        }
        if let Ok(mut m) = self.requests.lock() {
            m.remove(token);
        }
    }

    /// Whether Ray is still starting this pending job rather than waiting
    /// for capacity for it: Ray's scheduler does not report its request
    /// among the demands it cannot grant. `false` when that cannot be
    /// told (a job this adapter did not launch, Ray's report unreadable).
    async fn starting(&self, token: &str) -> bool {
        let Some(request) = self.requests.lock().ok().and_then(|m| m.get(token).cloned()) else {
            return false;
        };
        let mut cached = self.demands.lock().await;
        let fresh = cached.as_ref().filter(|(at, _)| at.elapsed() < DEMANDS_FRESH).map(|(_, d)| d.clone());
        let unmet = match fresh {
            Some(d) => d,
            None => match self.api.unmet_demands().await {
                Ok(Some(d)) => {
                    *cached = Some((Instant::now(), d.clone()));
                    d
                }
                Ok(None) => return false,
                Err(e) => {
                    tracing::debug!(provider = %self.cfg.name, error = %e, "reading Ray's unmet demands");
                    return false;
                }
            },
        };
        !map::waits_for_resources(&request, &unmet)
    }

    /// Where the attempt stands at the provider (see `status`).
    async fn status_of(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let Some(job) = self.api.job(token).await.map_err(|e| self.err("reading the job", e))? else {
            // Only a launch Ray has not listed yet may be racing its poll.
            let listed = self.listed.lock().ok().is_some_and(|s| s.contains(token));
            let racing = !listed
                && self
                    .pending_since
                    .lock()
                    .ok()
                    .and_then(|m| m.get(token).map(|t| t.elapsed() < LAUNCH_GRACE))
                    == Some(true);
            if racing {
                return Ok(AttemptStatus::Pending);
            }
            self.forget(token);
            return Ok(AttemptStatus::NotFound);
        };
        if let Ok(mut s) = self.listed.lock() {
            s.insert(token.to_string());
        }
        let status = map::job_status(&job);
        if status != AttemptStatus::Pending {
            if matches!(status, AttemptStatus::Ended(_)) {
                self.forget(token);
            } else if let Ok(mut m) = self.pending_since.lock() {
                m.remove(token);
            }
            let gang = job.metadata.as_ref().is_some_and(|m| m.contains_key(GANG_KEY));
            return Ok(match status {
                AttemptStatus::Ended(end) if gang && job.status == "FAILED" => {
                    AttemptStatus::Ended(self.gang_end(token, end).await)
                }
                s => s,
            });
        }
        let waited = self.pending_for(token, job.start_time);
        if waited < self.cfg.startup_limit {
            return Ok(AttemptStatus::Pending);
        }
        // Past the limit, a job Ray is still starting (not waiting for
        // capacity) is progressing: it is waited for, within bounds.
        if waited < self.cfg.startup_limit + STARTING_FOR && self.starting(token).await {
            return Ok(AttemptStatus::Pending);
        }
        self.abandon(token).await.map_err(|e| self.err("stopping the pending job", e))?;
        self.forget(token);
        let message = format!(
            "{}: still pending after {}s, past the startup limit of {}s (Ray cannot fit it now)",
            self.cfg.name,
            waited.as_secs(),
            self.cfg.startup_limit.as_secs()
        );
        Ok(AttemptStatus::Ended(ProviderEnd::LaunchRejected { message, capacity: true }))
    }
}

#[async_trait::async_trait]
impl Provider for RayProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    async fn inventory(&self) -> Result<Inventory, ProviderError> {
        let nodes = self.api.nodes().await.map_err(|e| self.err("listing nodes", e))?;
        let pools = map::pools(&nodes, &self.cfg.pools);
        self.check_topology(&pools)?;
        if let Ok(mut m) = self.node_ips.lock() {
            m.clear();
            m.extend(
                nodes
                    .iter()
                    .filter(|n| !n.node_ip.is_empty())
                    .map(|n| (map::node_name(&self.cfg.pools.provider, n), n.node_ip.clone())),
            );
        }
        if let Ok(mut m) = self.accel.lock() {
            m.clear();
            for p in &pools {
                if let Some(k) = p.def.capabilities.iter().find_map(|c| c.strip_prefix(map::ACCEL_TAG)) {
                    m.insert(p.def.name.clone(), k.to_string());
                }
            }
        }
        Ok(Inventory { pools })
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError> {
        if !valid_token(&req.token) {
            return Err(LaunchError::Invalid(format!("token {:?} cannot be a Ray submission_id", req.token)));
        }
        crate::providers::refuse_image(
            &req.spec,
            &format!("Ray provider {}", self.cfg.name),
            "runtime_env image_uri needs an image carrying the cluster's own Ray and Python",
        )?;
        // Until Ray lists the job, a status poll racing this launch reads
        // pending (see `status`), not "gone".
        if let Ok(mut m) = self.pending_since.lock() {
            m.entry(req.token.clone()).or_insert_with(Instant::now);
        }
        let adopted = LaunchAck { provider_ref: req.token.clone(), adopted: true };
        if let Some(job) = self.api.job(&req.token).await.map_err(|e| LaunchError::Api(e.to_string()))? {
            // Adopt only this attempt: a job submitted for another spec under
            // the same token (a journal restored from an older copy, before
            // tokens carried nonces) is not ours to report on.
            return match job.metadata.as_ref().and_then(|m| m.get(SPEC_HASH_KEY)) {
                Some(h) if *h != req.spec.content_hash() => Err(LaunchError::Rejected(format!(
                    "Ray job {} was submitted for another spec; it is not adopted as this attempt",
                    req.token
                ))),
                _ => Ok(adopted),
            };
        }
        let dir = AttemptDir::at(&self.cfg.jobs_dir, &req.token);
        crate::providers::jobs_dir::create_private(dir.path(), &[&dir.outputs(), &dir.work()]).map_err(
            |e| {
                LaunchError::Api(format!(
                    "cannot create {}: {e}; jobs_dir must be writable and shared with Ray",
                    dir.path().display()
                ))
            },
        )?;
        crate::providers::secrets::write_secret_file(dir.path(), &req.secrets).map_err(|e| {
            LaunchError::Api(format!("cannot write the secret file in {}: {e}", dir.path().display()))
        })?;
        let body = self.submission(req).map_err(LaunchError::Invalid)?;
        if let Ok(mut m) = self.requests.lock() {
            m.insert(req.token.clone(), map::entrypoint_request(&body));
        }
        match self.api.submit(&body).await {
            Ok(()) => Ok(LaunchAck { provider_ref: req.token.clone(), adopted: false }),
            Err(CallError::Duplicate) => Ok(adopted),
            Err(CallError::Http { status: 400, message }) => Err(LaunchError::Rejected(message)),
            Err(e) => Err(LaunchError::Api(e.to_string())),
        }
    }

    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let status = self.status_of(token).await?;
        if matches!(status, AttemptStatus::Ended(_) | AttemptStatus::NotFound) {
            // However the attempt ended (lost while still pending, too),
            // its secret file is not left on the shared file system.
            crate::providers::secrets::remove_unread(&self.cfg.jobs_dir, token);
        }
        Ok(status)
    }

    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<LogChunk, ProviderError> {
        if stream == LogStream::Stderr {
            return Ok(LogChunk { data: Vec::new(), next_offset: offset });
        }
        let text = match self.api.logs(token).await {
            Ok(t) => t.into_bytes(),
            Err(CallError::NotFound) => Vec::new(),
            Err(e) => return Err(self.err("reading logs", e)),
        };
        let start = (offset as usize).min(text.len());
        let end = start.saturating_add(max).min(text.len());
        Ok(LogChunk { data: text[start..end].to_vec(), next_offset: end as u64 })
    }

    async fn outputs(&self, token: &str, spec: &Spec, dest: &Path) -> Result<Collection, ProviderError> {
        let root = AttemptDir::at(&self.cfg.jobs_dir, token).outputs();
        crate::providers::collect::collect_off_thread(&self.cfg.name, root, spec, dest, self.cfg.outputs)
            .await
    }

    /// Canopy has the attempt's logs and outputs: its directory may go once
    /// `jobs_retention` has passed ([`crate::providers::jobs_dir`]).
    async fn release(&self, token: &str) -> Result<(), ProviderError> {
        crate::providers::jobs_dir::release(&self.cfg.name, &self.cfg.jobs_dir, token)
    }

    async fn terminate(&self, token: &str) -> Result<(), ProviderError> {
        crate::providers::secrets::remove_unread(&self.cfg.jobs_dir, token);
        match self.api.job(token).await.map_err(|e| self.err("reading the job", e))? {
            // Ray ignores the stop of a pending job: keep stopping it.
            Some(j) if j.status == "PENDING" => {
                self.abandon(token).await.map_err(|e| self.err("stopping the job", e))
            }
            Some(j) if !map::is_final(&j.status) => {
                self.api.stop(token).await.map_err(|e| self.err("stopping the job", e))
            }
            _ => Ok(()),
        }
    }

    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError> {
        self.restop_abandoned().await;
        let prefix = format!("canopy-{store_id}-");
        let jobs = self.api.jobs().await.map_err(|e| self.err("listing jobs", e))?;
        let owned: Vec<Owned> = jobs
            .into_iter()
            .filter_map(|j| {
                let id = j.submission_id.filter(|s| s.starts_with(&prefix))?;
                Some(Owned { token: id.clone(), provider_ref: id, running: !map::is_final(&j.status) })
            })
            .collect();
        let retention = self.cfg.jobs_retention;
        crate::providers::jobs_dir::sweep(&self.cfg.name, &self.cfg.jobs_dir, store_id, &owned, retention);
        Ok(owned)
    }
}
