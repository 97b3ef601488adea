//! The `slurm` provider: attempts as batch jobs submitted through
//! slurmrestd (JWT auth), one job per attempt, named after its token.
//!
//! Launch looks the token up first and adopts an existing job instead of
//! submitting twice: the job id is recorded in the token's directory right
//! after the submit (see [`record`]), and the whole job list is searched
//! only when that directory exists without an id (a launch interrupted
//! between submit and record). Status maps Slurm's states (see [`map`]); a job Slurm
//! requeued (a node failed under it) is cancelled and reported as a lost
//! node, so an attempt never runs twice; a job pending longer than the
//! configured startup limit is cancelled and reported as a capacity miss,
//! so the engine places it elsewhere.
//!
//! **Gangs.** A launch over several nodes is one job over all of them
//! (see [`script`]): pinned to the chosen nodes, one launcher per node,
//! `MASTER_ADDR` the first node's address as Slurm knows it (`NodeAddr`:
//! nodes may share a host name). When one launcher fails, srun stops the
//! others and says which failed in the job's stderr; the end is reported
//! as that rank's ([`ProviderEnd::Rank`], see [`map::rank_end`]). A rank
//! that never started (slurmd could not launch its task, or its launcher
//! could not start the program on that node while others could) is that
//! node's failed launch ([`ProviderEnd::BootFailed`]). A gang's holdings
//! count on every node it runs on.
//!
//! **Declared topology.** Slurm reports no fabric and no switches (without
//! its topology plugin); `[slurm.topology]` in canopy.toml declares them.
//! A declared node Slurm does not have fails the first inventory (the
//! engine's start) with the file and key to fix; later, when a node leaves
//! the cluster, it is only logged.
//!
//! **Shared filesystem.** Each job's directory `<jobs_dir>/<token>/` holds
//! its `stdout.log`, `stderr.log`, `work/` and `outputs/` (the local
//! provider's layout). Canopy reads logs and collects outputs from there
//! through its own filesystem, so `jobs_dir` must be the same path on the
//! Canopy host and on every node (NFS, Lustre… or one machine).
//!
//! This module owns the adapter's state (the token → job id cache) and its
//! configuration. It must not decide retries, and the JWT never appears in
//! a log line, an error or the journal. Version-specific wire types live
//! in [`v0038`].

pub mod lost;
pub mod map;
pub mod record;
pub mod script;
pub mod v0038;

use crate::config::SlurmEntry;
use crate::failure::ProviderEnd;
use crate::providers::collect::OutputLimits;
use crate::providers::local::layout::{AttemptDir, valid_token};
use crate::providers::{
    AttemptStatus, Collection, Inventory, LaunchAck, LaunchError, LaunchRequest, LogChunk, LogStream, Owned,
    Provider, ProviderError, SecretValue,
};
use crate::spec::Spec;
use map::{JobStatus, JobView, NodeView, PoolSettings};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use v0038::{Api, CallError, Job};

/// A configured Slurm provider, token resolved.
#[derive(Debug, Clone)]
pub struct SlurmConfig {
    pub name: String,
    pub url: String,
    pub user: String,
    pub token: SecretValue,
    pub jobs_dir: PathBuf,
    /// How long a released attempt directory stays ([`crate::providers::jobs_dir`]).
    pub jobs_retention: Duration,
    pub lend_limit_gpus: Option<u32>,
    /// Pending longer than this: cancelled, class capacity.
    pub startup_limit: Duration,
    pub pin_by_feature: bool,
    pub pools: PoolSettings,
    pub request_timeout: Duration,
    /// Size and time limits on collecting outputs (`[outputs]` in
    /// canopy.toml).
    pub outputs: OutputLimits,
}

impl SlurmConfig {
    /// From a `[[slurm]]` entry, reading the JWT from the named variable.
    pub fn from_entry(e: &SlurmEntry) -> Result<Self, String> {
        let token = std::env::var(&e.token_env).map_err(|_| {
            format!(
                "provider {}: environment variable {} (token_env) is not set; export the slurmrestd JWT \
                 there, e.g. `export {}=$(scontrol token lifespan=86400 | cut -d= -f2)`",
                e.name, e.token_env, e.token_env
            )
        })?;
        Ok(Self {
            name: e.name.clone(),
            url: e.url.clone(),
            user: e.user.clone(),
            token: SecretValue::new(token),
            jobs_dir: e.jobs_dir.clone(),
            jobs_retention: e.jobs_retention.map_or(crate::providers::jobs_dir::DEFAULT_RETENTION, |d| d.0),
            lend_limit_gpus: e.lend_limit_gpus,
            startup_limit: e.startup_limit.map_or(Duration::from_secs(600), |d| d.0),
            pin_by_feature: e.pin_by_feature,
            pools: PoolSettings {
                region: e.region.clone().unwrap_or_else(|| "onprem".into()),
                startup: Duration::from_secs(5),
                partitions: e.partitions.clone(),
                topology: e.topology.clone(),
            },
            request_timeout: Duration::from_secs(30),
            outputs: OutputLimits::default(),
        })
    }
}

/// What the adapter remembers about a job it launched or adopted.
#[derive(Debug, Clone, Copy)]
struct Known {
    id: u64,
    /// When Slurm took the job (epoch seconds), for the startup limit.
    submitted: i64,
}

pub struct SlurmProvider {
    cfg: SlurmConfig,
    api: Api,
    /// Pool name → (partition, GRES type), from the last inventory.
    pools: Mutex<HashMap<String, (String, Option<String>)>>,
    jobs: Mutex<HashMap<String, Known>>,
    /// Tokens whose launch began here, and when: until Slurm lists the
    /// job, a status poll racing the launch reads pending, not "gone".
    launching: Mutex<HashMap<String, std::time::Instant>>,
    /// Node name → the address Slurm reaches it at, from the last inventory.
    addrs: Mutex<HashMap<String, String>>,
    /// One-node attempts whose node (Slurm's choice) is recorded: a
    /// requeued job's node list is empty, and the node it lost must still
    /// be known. Gangs record theirs at launch.
    noted: Mutex<std::collections::HashSet<String>>,
    /// Whether an inventory has checked the declared topology yet.
    topology_checked: std::sync::atomic::AtomicBool,
}

/// How long a launch begun here keeps an unlisted job pending.
const LAUNCH_GRACE: Duration = Duration::from_secs(120);

impl SlurmProvider {
    pub fn new(cfg: SlurmConfig) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(cfg.request_timeout)
            .build()
            .map_err(|e| format!("provider {}: cannot build an HTTP client: {e}", cfg.name))?;
        let api = Api::new(client, &cfg.url, &cfg.user, cfg.token.clone());
        Ok(Self {
            cfg,
            api,
            pools: Mutex::new(HashMap::new()),
            jobs: Mutex::new(HashMap::new()),
            launching: Mutex::new(HashMap::new()),
            noted: Mutex::new(Default::default()),
            addrs: Mutex::new(HashMap::new()),
            topology_checked: std::sync::atomic::AtomicBool::new(false),
        })
    }

    pub fn config(&self) -> &SlurmConfig {
        &self.cfg
    }

    fn err(&self, what: &str, e: CallError) -> ProviderError {
        ProviderError { provider: self.cfg.name.clone(), message: format!("{what} at {}: {e}", self.cfg.url) }
    }

    fn remember(&self, token: &str, k: Known) {
        if let Ok(mut m) = self.jobs.lock() {
            m.insert(token.to_string(), k);
        }
    }

    fn known(&self, token: &str) -> Option<Known> {
        self.jobs.lock().ok().and_then(|m| m.get(token).copied())
    }

    /// The newest job carrying `token`: the cached or recorded id first,
    /// the whole job list only when neither names a job Slurm knows.
    async fn find(&self, token: &str) -> Result<Option<(Known, Job)>, CallError> {
        if let Some(found) = self.find_recorded(token).await? {
            return Ok(Some(found));
        }
        self.find_listed(token).await
    }

    /// The job by its cached or recorded id, without listing jobs.
    async fn find_recorded(&self, token: &str) -> Result<Option<(Known, Job)>, CallError> {
        let k = match self.known(token) {
            Some(k) => Some(k),
            None => record::read(&AttemptDir::at(&self.cfg.jobs_dir, token))
                .ok()
                .flatten()
                .map(|r| Known { id: r.id, submitted: r.submitted }),
        };
        let Some(k) = k else { return Ok(None) };
        Ok(self.api.job(k.id).await?.map(|job| {
            self.remember(token, k);
            (k, job)
        }))
    }

    /// What this Canopy's running jobs hold, per node: jobs named with a
    /// token whose directory under `jobs_dir` records that job id. Slurm
    /// counts them as allocated, and so does the engine (its live
    /// attempts), so the inventory leaves them out of "used by others".
    async fn held_by_canopy(&self) -> Result<HashMap<String, map::Held>, CallError> {
        let mut held: HashMap<String, map::Held> = HashMap::new();
        for j in self.api.jobs().await? {
            let running =
                matches!(j.job_state.as_str(), "RUNNING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED");
            if !running || !j.name.starts_with("canopy-") || !valid_token(&j.name) || j.nodes.is_empty() {
                continue;
            }
            let ours = self.known(&j.name).map(|k| k.id).or_else(|| {
                record::read(&AttemptDir::at(&self.cfg.jobs_dir, &j.name)).ok().flatten().map(|r| r.id)
            });
            if ours != Some(j.job_id) {
                continue;
            }
            // Every node of a gang, each with its own share.
            let allocated: Vec<(String, u32, u64)> = j
                .job_resources
                .iter()
                .flat_map(|r| &r.allocated_nodes)
                .map(|a| (a.nodename.clone(), a.cpus_used, a.memory_allocated))
                .collect();
            for (node, h) in
                map::held_per_node(&j.nodes, &j.tres_alloc_str, &j.tres_req_str, &j.gres_detail, &allocated)
            {
                let e = held.entry(node).or_default();
                e.gpus += h.gpus;
                e.cpus += h.cpus;
                e.memory_mb += h.memory_mb;
            }
        }
        Ok(held)
    }

    /// The newest job carrying `token`, from the whole job list.
    async fn find_listed(&self, token: &str) -> Result<Option<(Known, Job)>, CallError> {
        let jobs = self.api.jobs().await?;
        let found = jobs.into_iter().filter(|j| owns(j, token)).max_by_key(|j| j.job_id);
        Ok(found.map(|j| {
            let k = Known { id: j.job_id, submitted: j.submit_time };
            self.remember(token, k);
            (k, j)
        }))
    }

    /// Records a job in the token's directory; a failure is only logged:
    /// the directory then exists without an id, and the next launch of
    /// the token searches the job list (idempotency holds either way).
    fn record(&self, dir: &AttemptDir, token: &str, k: Known) {
        self.remember(token, k);
        if let Err(e) = record::write(dir, record::JobRecord { id: k.id, submitted: k.submitted }) {
            tracing::warn!(provider = %self.cfg.name, %token, error = %e, "could not record the Slurm job id");
        }
    }

    fn shaping(&self, req: &LaunchRequest) -> script::Shaping {
        let (partition, gpu_type) = self
            .pools
            .lock()
            .ok()
            .and_then(|m| m.get(&req.pool).cloned())
            .map_or((None, None), |(p, t)| (Some(p), t));
        let pin_node = self.cfg.pin_by_feature.then(|| req.node.clone());
        script::Shaping { partition, gpu_type, pin_node }
    }
}

impl SlurmProvider {
    /// Checks the declared topology against what Slurm reports: on the
    /// first inventory an unknown node or pool is an error naming the file
    /// and key; afterwards (a node removed from the cluster) a warning.
    fn check_topology(&self, nodes: &[v0038::Node], views: &[NodeView]) -> Result<(), ProviderError> {
        let mut have: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        have.sort_unstable();
        let pools: Vec<String> = map::pools(views, &self.cfg.pools).into_iter().map(|p| p.def.name).collect();
        let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
        let mismatch = self.cfg.pools.topology.mismatch("slurm", "Slurm", &self.cfg.name, &have, &pools);
        crate::providers::topology_verdict(&self.topology_checked, &self.cfg.name, mismatch)
    }

    /// The addresses of `nodes` as Slurm knows them (`NodeAddr`), asking
    /// Slurm for nodes the last inventory did not see.
    async fn addresses(&self, nodes: &[String]) -> Result<Vec<String>, CallError> {
        let cached =
            |m: &HashMap<String, String>| nodes.iter().map(|n| m.get(n).cloned()).collect::<Option<Vec<_>>>();
        if let Some(a) = self.addrs.lock().ok().and_then(|m| cached(&m)) {
            return Ok(a);
        }
        let listed = self.api.nodes().await?;
        let m: HashMap<String, String> = listed
            .into_iter()
            .map(|n| {
                let addr = if n.address.is_empty() { n.name.clone() } else { n.address };
                (n.name, addr)
            })
            .collect();
        Ok(nodes.iter().map(|n| m.get(n).cloned().unwrap_or_else(|| n.clone())).collect())
    }

    /// Submits a gang: its rank order recorded, every launcher's
    /// environment worked out, one job over all its nodes.
    async fn gang_job(
        &self,
        req: &LaunchRequest,
        dir: &AttemptDir,
        secret_path: Option<&str>,
    ) -> Result<(String, v0038::JobProperties), LaunchError> {
        let addrs = self.addresses(&req.nodes).await.map_err(|e| LaunchError::Api(e.to_string()))?;
        let (shared, own) = script::split_envs(&script::rank_envs(req, &addrs));
        let props = script::gang_properties(req, &self.cfg.jobs_dir, &self.shaping(req), &shared)
            .map_err(LaunchError::Invalid)?;
        record::write_nodes(dir, &req.nodes).map_err(|e| {
            LaunchError::Api(format!("cannot record the gang's nodes in {}: {e}", dir.path().display()))
        })?;
        let text = script::gang_script(
            &req.spec.runtime.command,
            &script::workdir(req, &self.cfg.jobs_dir),
            secret_path,
            &req.nodes,
            &own,
        );
        Ok((text, props))
    }

    /// A failed gang's end as its failing rank's, from srun's report in
    /// the job's stderr; `end` unchanged when none names a rank.
    fn gang_end(&self, token: &str, job: &Job, end: ProviderEnd) -> ProviderEnd {
        let gang = job.node_count > 1 || job.nodes.contains([',', '[']);
        let failed = matches!(
            end,
            ProviderEnd::Exited { code } if code != 0
        ) || matches!(
            end,
            ProviderEnd::Signaled { .. } | ProviderEnd::OutOfMemory | ProviderEnd::Unknown { .. }
        );
        if !gang || !failed {
            return end;
        }
        let dir = AttemptDir::at(&self.cfg.jobs_dir, token);
        let mut nodes = record::read_nodes(&dir).unwrap_or_default();
        if nodes.is_empty() {
            nodes = map::expand_hostlist(&job.nodes);
        }
        let stderr = read_tail(&dir.stderr(), RANK_END_TAIL).unwrap_or_default();
        map::rank_end(&String::from_utf8_lossy(&stderr), &nodes).unwrap_or(end)
    }
}

impl SlurmProvider {
    /// Records the node Slurm runs a one-node attempt on, once.
    fn note_node(&self, token: &str, job: &Job) {
        if job.node_count > 1 || job.nodes.is_empty() {
            return;
        }
        let Ok(mut noted) = self.noted.lock() else { return };
        if noted.contains(token) {
            return;
        }
        let dir = AttemptDir::at(&self.cfg.jobs_dir, token);
        match record::write_nodes(&dir, &map::expand_hostlist(&job.nodes)) {
            Ok(()) => {
                noted.insert(token.to_string());
            }
            Err(e) => tracing::warn!(%token, error = %e, "cannot record the node a Slurm job runs on"),
        }
    }

    /// A lost node's end, with the node Slurm lost named (see
    /// [`lost::lost_end`]); `end` as it was when Slurm's node list cannot
    /// be read or names none of the attempt's nodes down.
    async fn lost_end(&self, token: &str, job: &Job, end: ProviderEnd) -> ProviderEnd {
        let dir = AttemptDir::at(&self.cfg.jobs_dir, token);
        let mut nodes = record::read_nodes(&dir).unwrap_or_default();
        if nodes.is_empty() {
            nodes = map::expand_hostlist(&job.nodes);
        }
        if nodes.is_empty() {
            return end;
        }
        match self.api.nodes().await {
            Ok(listed) => {
                let views: Vec<lost::NodeView> = listed
                    .into_iter()
                    .map(|n| lost::NodeView {
                        name: n.name,
                        state: n.state,
                        flags: n.state_flags,
                        reason: n.reason,
                    })
                    .collect();
                lost::lost_end(&nodes, &views, end)
            }
            Err(e) => {
                tracing::warn!(provider = %self.cfg.name, error = %e, "cannot list nodes to tell which one Slurm lost");
                end
            }
        }
    }
}

/// How much of a gang's `stderr.log` is read to find which rank ended it:
/// srun's and the launchers' lines come last, and the workload controls
/// the file's size.
const RANK_END_TAIL: u64 = 4 << 20;

/// The last `max` bytes of the file at `path` (all of it when smaller).
fn read_tail(path: &std::path::Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut out = Vec::new();
    f.take(max).read_to_end(&mut out)?;
    Ok(out)
}

fn owns(j: &Job, token: &str) -> bool {
    j.name == token || j.comment.strip_prefix(script::COMMENT_PREFIX) == Some(token)
}

fn view(j: &Job) -> JobView {
    JobView {
        state: j.job_state.clone(),
        reason: j.state_reason.clone(),
        nodes: j.nodes.clone(),
        exit_code: j.exit_code,
        restart_cnt: j.restart_cnt,
    }
}

fn epoch_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

impl SlurmProvider {
    /// Where the attempt stands at the provider (see `status`).
    async fn status_of(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let Some((k, job)) = self.find(token).await.map_err(|e| self.err("reading the job", e))? else {
            let racing =
                self.launching.lock().ok().and_then(|m| m.get(token).map(|t| t.elapsed() < LAUNCH_GRACE));
            return Ok(if racing == Some(true) { AttemptStatus::Pending } else { AttemptStatus::NotFound });
        };
        match map::job_status(&view(&job)) {
            JobStatus::Requeued(end) => {
                if !map::is_final(&job.job_state) {
                    self.api.cancel(k.id).await.map_err(|e| self.err("cancelling the requeued job", e))?;
                }
                Ok(AttemptStatus::Ended(self.lost_end(token, &job, end).await))
            }
            JobStatus::Status(AttemptStatus::Ended(end @ ProviderEnd::NodeLost { .. })) => {
                Ok(AttemptStatus::Ended(self.lost_end(token, &job, end).await))
            }
            JobStatus::Status(AttemptStatus::Pending) => {
                let since = if job.submit_time > 0 { job.submit_time } else { k.submitted };
                let waited = epoch_now() - since;
                if waited >= self.cfg.startup_limit.as_secs() as i64 {
                    self.api.cancel(k.id).await.map_err(|e| self.err("cancelling the pending job", e))?;
                    let message = format!(
                        "{}: still pending after {waited}s (reason {}), past the startup limit of {}s",
                        self.cfg.name,
                        job.state_reason,
                        self.cfg.startup_limit.as_secs()
                    );
                    return Ok(AttemptStatus::Ended(ProviderEnd::LaunchRejected { message, capacity: true }));
                }
                Ok(AttemptStatus::Pending)
            }
            JobStatus::Status(AttemptStatus::Ended(end)) => {
                Ok(AttemptStatus::Ended(self.gang_end(token, &job, end)))
            }
            JobStatus::Status(AttemptStatus::Running) => {
                self.note_node(token, &job);
                Ok(AttemptStatus::Running)
            }
            JobStatus::Status(s) => Ok(s),
        }
    }
}

#[async_trait::async_trait]
impl Provider for SlurmProvider {
    fn name(&self) -> &str {
        &self.cfg.name
    }

    async fn inventory(&self) -> Result<Inventory, ProviderError> {
        let nodes = self.api.nodes().await.map_err(|e| self.err("listing nodes", e))?;
        let held = self.held_by_canopy().await.map_err(|e| self.err("listing jobs", e))?;
        let views: Vec<NodeView> = nodes
            .iter()
            .map(|n| NodeView {
                name: n.name.clone(),
                state: n.state.clone(),
                flags: n.state_flags.clone(),
                gres: n.gres.clone(),
                gres_used: n.gres_used.clone(),
                cpus: n.cpus,
                alloc_cpus: n.alloc_cpus,
                memory_mb: n.real_memory,
                alloc_memory_mb: n.alloc_memory,
                partitions: n.partitions.clone(),
                held_by_canopy: held.get(&n.name).copied().unwrap_or_default(),
            })
            .collect();
        self.check_topology(&nodes, &views)?;
        if let Ok(mut m) = self.addrs.lock() {
            m.clear();
            m.extend(
                nodes.iter().filter(|n| !n.address.is_empty()).map(|n| (n.name.clone(), n.address.clone())),
            );
        }
        let pools = map::pools(&views, &self.cfg.pools);
        if let Ok(mut m) = self.pools.lock() {
            m.clear();
            for p in &pools {
                let partition = p
                    .def
                    .capabilities
                    .iter()
                    .find_map(|c| c.strip_prefix(map::PARTITION_TAG))
                    .unwrap_or(&p.def.name)
                    .to_string();
                let kind =
                    p.def.capabilities.iter().find_map(|c| c.strip_prefix(map::GRES_TAG)).map(str::to_string);
                m.insert(p.def.name.clone(), (partition, kind));
            }
        }
        Ok(Inventory { pools })
    }

    async fn launch(&self, req: &LaunchRequest) -> Result<LaunchAck, LaunchError> {
        if !valid_token(&req.token) {
            return Err(LaunchError::Invalid(format!("token {:?} cannot name a Slurm job", req.token)));
        }
        crate::providers::refuse_image(
            &req.spec,
            &format!("Slurm provider {}", self.cfg.name),
            "Slurm 22.05's --container needs an OCI bundle unpacked on shared storage and the cluster's \
             oci.conf; image names came with scrun in 23.02",
        )?;
        if let Ok(mut m) = self.launching.lock() {
            m.insert(req.token.clone(), std::time::Instant::now());
        }
        let dir = AttemptDir::at(&self.cfg.jobs_dir, &req.token);
        let io = |what: &str, e: std::io::Error| {
            LaunchError::Api(format!(
                "{what} {}: {e}; jobs_dir must be writable and shared with the nodes",
                dir.path().display()
            ))
        };
        let fresh = record::claim(&dir).map_err(|e| io("cannot create", e))?;
        // Held until this launch has submitted and recorded, so a second
        // launch of the same token (a re-send) waits and then adopts.
        let _lock = record::lock(&dir, self.cfg.request_timeout).await.map_err(|e| io("cannot lock", e))?;
        let api_err = |e: CallError| LaunchError::Api(e.to_string());
        let adopt = |k: Known| LaunchAck { provider_ref: k.id.to_string(), adopted: true };
        let hash = req.spec.content_hash();
        if fresh {
            record::write_spec(&dir, &hash).map_err(|e| io("cannot write the spec hash in", e))?;
        } else {
            // Only this attempt is adopted: a directory claimed for another
            // spec under the same token (a journal restored from an older
            // copy, before tokens carried nonces) is not ours to report on.
            match record::read_spec(&dir).map_err(|e| io("cannot read the spec hash in", e))? {
                Some(h) if h != hash => {
                    return Err(LaunchError::Rejected(format!(
                        "{} was claimed for another spec; it is not adopted as this attempt",
                        dir.path().display()
                    )));
                }
                _ => {}
            }
            // A recorded job is adopted even when Slurm has forgotten it
            // (finished past MinJobAge): it ran, it must not run again.
            let recorded = record::read(&dir).map_err(|e| io("cannot read the job record in", e))?;
            if let Some(k) =
                self.known(&req.token).or(recorded.map(|r| Known { id: r.id, submitted: r.submitted }))
            {
                self.remember(&req.token, k);
                return Ok(adopt(k));
            }
            // The directory exists without an id: a launch interrupted
            // between submit and record. Only now search the job list.
            if let Some((k, _)) = self.find_listed(&req.token).await.map_err(api_err)? {
                self.record(&dir, &req.token, k);
                return Ok(adopt(k));
            }
        }
        crate::providers::jobs_dir::create_private(dir.path(), &[&dir.outputs(), &dir.work()])
            .map_err(|e| io("cannot create directories in", e))?;
        let secret_file = crate::providers::secrets::write_secret_file(dir.path(), &req.secrets)
            .map_err(|e| io("cannot write the secret file in", e))?;
        let secret_path = secret_file.as_ref().and_then(|p| p.to_str());
        let (text, props) = if req.is_gang() {
            self.gang_job(req, &dir, secret_path).await?
        } else {
            let props = script::properties(req, &self.cfg.jobs_dir, &self.shaping(req))
                .map_err(LaunchError::Invalid)?;
            let text = script::script(
                &req.spec.runtime.command,
                &script::workdir(req, &self.cfg.jobs_dir),
                secret_path,
            );
            (text, props)
        };
        match self.api.submit(&text, &props).await {
            Ok(id) => {
                self.record(&dir, &req.token, Known { id, submitted: epoch_now() });
                Ok(LaunchAck { provider_ref: id.to_string(), adopted: false })
            }
            // "Requested node configuration is not available", bad
            // partition, "Required node not available (down, drained or
            // reserved)": the node Canopy chose is not free right now.
            Err(CallError::Slurm { numbers, message, .. })
                if numbers.iter().any(|n| matches!(n, 2014 | 2000 | 2068)) =>
            {
                Err(LaunchError::Capacity(format!("{}: {message}", self.cfg.name)))
            }
            Err(CallError::Slurm { status: 400, message, .. }) => Err(LaunchError::Rejected(message)),
            Err(e) => Err(LaunchError::Api(e.to_string())),
        }
    }

    async fn status(&self, token: &str) -> Result<AttemptStatus, ProviderError> {
        let status = self.status_of(token).await?;
        if matches!(status, AttemptStatus::Ended(_) | AttemptStatus::NotFound) {
            // However the attempt ended (lost while still pending, too),
            // its secret file is not left on the shared file system, and
            // its node needs no more noting.
            crate::providers::secrets::remove_unread(&self.cfg.jobs_dir, token);
            if let Ok(mut noted) = self.noted.lock() {
                noted.remove(token);
            }
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
        let dir = AttemptDir::at(&self.cfg.jobs_dir, token);
        let path = match stream {
            LogStream::Stdout => dir.stdout(),
            LogStream::Stderr => dir.stderr(),
        };
        read_from(&path, offset, max)
            .await
            .map_err(|message| ProviderError { provider: self.cfg.name.clone(), message })
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
        match self.find(token).await.map_err(|e| self.err("finding the job", e))? {
            Some((k, job)) if !map::is_final(&job.job_state) => {
                self.api.cancel(k.id).await.map_err(|e| self.err("cancelling the job", e))
            }
            _ => Ok(()),
        }
    }

    /// SIGTERM first (for a gang: [`script::GANG_STOP_SIGNAL`] to its
    /// batch shell, which sends SIGTERM to every launcher), then, when the
    /// job has not ended within `grace`, a cancel (SIGKILL).
    async fn terminate_within(&self, token: &str, grace: Duration) -> Result<(), ProviderError> {
        crate::providers::secrets::remove_unread(&self.cfg.jobs_dir, token);
        let Some((k, job)) = self.find(token).await.map_err(|e| self.err("finding the job", e))? else {
            return Ok(());
        };
        if map::is_final(&job.job_state) {
            return Ok(());
        }
        // A pending job has nothing to stop gracefully.
        if job.job_state != "PENDING" && !grace.is_zero() {
            let gang = job.node_count > 1 || job.nodes.contains([',', '[']);
            let signal = if gang { script::GANG_STOP_SIGNAL } else { "SIGTERM" };
            self.api.signal(k.id, Some(signal)).await.map_err(|e| self.err("signalling the job", e))?;
            let deadline = std::time::Instant::now() + grace;
            while std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(250).min(grace)).await;
                match self.api.job(k.id).await {
                    Ok(Some(j)) if !map::is_final(&j.job_state) => {}
                    Ok(_) => return Ok(()),
                    Err(e) => {
                        tracing::debug!(provider = %self.cfg.name, %token, error = %e, "polling a stopping job")
                    }
                }
            }
        }
        self.api.cancel(k.id).await.map_err(|e| self.err("cancelling the job", e))
    }

    async fn list_owned(&self, store_id: &str) -> Result<Vec<Owned>, ProviderError> {
        let prefix = format!("canopy-{store_id}-");
        let jobs = self.api.jobs().await.map_err(|e| self.err("listing jobs", e))?;
        let owned: Vec<Owned> = jobs
            .into_iter()
            .filter(|j| j.name.starts_with(&prefix))
            .map(|j| Owned {
                running: !map::is_final(&j.job_state),
                provider_ref: j.job_id.to_string(),
                token: j.name,
            })
            .collect();
        let retention = self.cfg.jobs_retention;
        crate::providers::jobs_dir::sweep(&self.cfg.name, &self.cfg.jobs_dir, store_id, &owned, retention);
        Ok(owned)
    }
}

/// Up to `max` bytes of a file from `offset`; nothing yet when the file
/// does not exist (the job has not started).
pub async fn read_from(path: &Path, offset: u64, max: usize) -> Result<LogChunk, String> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    let mut f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogChunk { data: Vec::new(), next_offset: offset });
        }
        Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
    };
    f.seek(std::io::SeekFrom::Start(offset))
        .await
        .map_err(|e| format!("cannot seek {}: {e}", path.display()))?;
    let mut data = Vec::new();
    f.take(max as u64)
        .read_to_end(&mut data)
        .await
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let next_offset = offset + data.len() as u64;
    Ok(LogChunk { data, next_offset })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_stderr_is_read_by_its_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stderr.log");
        let mut text = "x".repeat(3 << 20);
        text.push_str("\nsrun: error: n2: task 1: Exited with exit code 3\n");
        std::fs::write(&path, &text).unwrap();
        let tail = read_tail(&path, 1 << 20).unwrap();
        assert_eq!(tail.len(), 1 << 20);
        assert!(String::from_utf8_lossy(&tail).ends_with("task 1: Exited with exit code 3\n"));
        std::fs::write(&path, "short\n").unwrap();
        assert_eq!(read_tail(&path, 1 << 20).unwrap(), b"short\n");
    }
}
