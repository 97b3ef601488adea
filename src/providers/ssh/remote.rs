//! `canopy __host`: the host side of the `ssh` provider, run by the
//! uploaded Canopy binary as the owner's unprivileged user.
//!
//! Each call performs one [`Request`] read from stdin on a
//! [`LocalProvider`] over `~/.canopy-host/<store id>/attempts`, so an
//! attempt on an owner's host is exactly a local attempt there: its own
//! directory, a supervisor in its own session that outlives the SSH
//! connection, re-adoption by token, outputs collected next to the files
//! with the local safety rules. What the SSH provider adds lives in the
//! store's directory beside the attempts:
//!
//! ```text
//! ~/.canopy-host/<store>/lease            the deadline Canopy renews (this host's clock)
//! ~/.canopy-host/<store>/attempts/<token>/   a local attempt directory, plus
//!     ssh-gpus.json                        the GPU indices it was given
//!     fetch/, fetch.json                   outputs staged for Canopy to fetch, and what they are
//! ~/.canopy-host/<store>/checkpoints/<token>/   its checkpoints (see [`super::checkpoints`])
//! ```
//!
//! Secret values arrive in the request on stdin and go on the
//! supervisor's stdin, as the local launcher hands them, and from there
//! into the workload's environment only; they are never written to a file
//! or an argument list. A workload with `runtime.image` runs in the
//! owner's own container engine (podman, or docker), detected with
//! `<engine> info` at each probe and launch, exactly as the local
//! provider runs one (see `super::container`).
//!
//! This module must not touch anything outside the store's directory nor
//! signal processes the local provider would not.

use super::checkpoints;
use super::protocol::{self, Listed, Probe, Reply, Request, Status};
use crate::providers::collect;
use crate::providers::local::container::ContainerEngine;
use crate::providers::local::layout::{self, AttemptDir, valid_token};
use crate::providers::local::state::{self, Observed};
use crate::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand};
use crate::providers::{AttemptStatus, LaunchRequest, Provider, SecretValue};
use serde::Serialize;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Exit status when the request itself is wrong (a Canopy bug or a
/// version mismatch).
pub const USAGE_ERROR: i32 = 2;
/// Exit status when the request failed; the reason is on stdout or stderr.
pub const FAILED: i32 = 1;

/// The most a request may hold (a spec and secret values).
const MAX_REQUEST: u64 = 64 << 20;

/// The store's directory on this host.
pub fn store_dir(home: &Path, store: &str) -> PathBuf {
    home.join(".canopy-host").join(store)
}

/// Runs one request. Returns the process's exit status.
pub fn host_main(args: &[String]) -> i32 {
    let store = match args {
        [flag, store] if flag == "--store" && valid_token(store) => store.clone(),
        _ => {
            eprintln!("usage: canopy __host --store <store id> < request.json");
            return USAGE_ERROR;
        }
    };
    let Some(home) = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute()) else {
        eprintln!("canopy __host: HOME is not set to an absolute path on this host");
        return FAILED;
    };
    // The request is the first line; a checkpoint sent along follows it.
    let mut stdin = std::io::stdin().lock();
    let mut text = Vec::new();
    if let Err(e) = (&mut stdin).take(MAX_REQUEST).read_until(b'\n', &mut text) {
        eprintln!("canopy __host: cannot read the request: {e}");
        return USAGE_ERROR;
    }
    let req: Request = match serde_json::from_slice(&text) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("canopy __host: the request is not one this version understands: {e}");
            return USAGE_ERROR;
        }
    };
    drop(text);
    if let Request::Launch(l) = &req {
        // The workload's devices: the local plan passes the vendor's
        // visible-devices variable on from the launcher's environment.
        // Set while this process has one thread, before the runtime starts.
        for (name, value) in visible_devices(l) {
            match value {
                // SAFETY: single-threaded here; nothing reads the environment concurrently.
                Some(v) => unsafe { std::env::set_var(name, v) },
                // SAFETY: as above.
                None => unsafe { std::env::remove_var(name) },
            }
        }
    }
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("canopy __host: cannot start: {e}");
            return FAILED;
        }
    };
    let host = Host::new(store_dir(&home, &store), store);
    rt.block_on(host.serve(req, &mut stdin))
}

/// The visible-devices variables a launch sets (`Some`) or clears
/// (`None`): the host vendor's to the attempt's indices, every other
/// vendor's cleared, so the workload sees only what it was given.
pub fn visible_devices(l: &protocol::Launch) -> Vec<(&'static str, Option<String>)> {
    use crate::accel::devices;
    let kind = devices::of(l.vendor.unwrap_or(crate::accel::Vendor::Nvidia), l.family);
    let set = l.gpus.as_ref().map(|ids| kind.visible(ids));
    devices::visible_envs()
        .into_iter()
        .map(|name| (name, set.as_ref().filter(|(n, _)| n == name).map(|(_, v)| v.clone())))
        .collect()
}

struct Host {
    dir: PathBuf,
    store: String,
    provider: LocalProvider,
}

impl Host {
    fn new(dir: PathBuf, store: String) -> Self {
        let shim = ShimCommand::current_exe().unwrap_or_else(|_| ShimCommand {
            program: PathBuf::from("/proc/self/exe"),
            args: vec!["__supervise".into()],
        });
        let mut cfg = LocalConfig::new(dir.join("attempts"), shim);
        // The owner's own podman (or docker), when it answers `info`.
        cfg.containers = ContainerPolicy::Detect;
        cfg.lease = Some(dir.join("lease"));
        Self { provider: LocalProvider::new(cfg), dir, store }
    }

    fn attempt(&self, token: &str) -> Result<AttemptDir, String> {
        if valid_token(token) {
            Ok(AttemptDir::at(&self.dir.join("attempts"), token))
        } else {
            Err(format!("{token:?} is not an attempt token"))
        }
    }

    fn lease(&self) -> PathBuf {
        self.dir.join("lease")
    }

    /// The store's directory and its attempts, private to the owner's user.
    fn make_dir(&self) -> Result<(), String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(self.dir.join("attempts"))
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))
    }

    async fn serve(&self, req: Request, payload: &mut dyn Read) -> i32 {
        match req {
            Request::Probe => answer(self.probe().await),
            Request::Launch(l) => answer(self.launch(*l).await),
            Request::Status { token } => answer(self.status(&token).await),
            Request::Logs { token, stream, offset, max } => raw(self
                .provider
                .logs(&token, stream.into(), offset, max)
                .await
                .map(|c| c.data)
                .map_err(|e| e.message)),
            Request::Terminate { token, grace_ms } => {
                let r = match grace_ms {
                    Some(ms) => self.provider.terminate_within(&token, Duration::from_millis(ms)).await,
                    None => self.provider.terminate(&token).await,
                };
                answer(r.map_err(|e| e.message))
            }
            Request::Outputs { token, spec } => answer(self.outputs(&token, &spec).await),
            Request::Fetch { token } => match self.attempt(&token) {
                Ok(dir) => fetch(&dir.path().join("fetch")),
                Err(e) => raw(Err(e)),
            },
            Request::List => answer(self.list().await),
            Request::Renew { for_ms } => answer(self.renew(for_ms)),
            Request::Cleanup { token } => answer(self.cleanup(&token)),
            Request::PutCheckpoint { token, name, max_bytes } => {
                answer(self.put_checkpoint(&token, &name, max_bytes, payload))
            }
            Request::NewestCheckpoint { token } => answer(self.newest_checkpoint(&token)),
            Request::FetchCheckpoint { token, name, at_ms, max_bytes } => {
                self.fetch_checkpoint(&token, &name, at_ms, max_bytes)
            }
        }
    }

    /// The attempt's checkpoints: `ckpt/` (its `$CANOPY_CHECKPOINT_DIR`),
    /// `handed.json`, `incoming/`.
    fn checkpoints(&self, token: &str) -> Result<PathBuf, String> {
        self.attempt(token)?;
        Ok(self.dir.join("checkpoints").join(token))
    }

    /// Receives the checkpoint Canopy hands the attempt, before its launch
    /// (never into a directory a running workload uses): unpacked, moved
    /// into `ckpt/`, then marked complete, and noted as handed.
    fn put_checkpoint(
        &self,
        token: &str,
        name: &str,
        max_bytes: u64,
        tar: &mut dyn Read,
    ) -> Result<protocol::HostCheckpoint, String> {
        use std::os::unix::fs::DirBuilderExt;
        if !checkpoints::valid_name(name) {
            return Err(format!("{name:?} cannot name a checkpoint"));
        }
        if self.attempt(token)?.path().exists() {
            return Err(format!("{token} was launched already; its checkpoint directory is in use"));
        }
        let root = self.checkpoints(token)?;
        collect::remove_existing(&root).map_err(|e| format!("cannot clear {}: {e}", root.display()))?;
        let (incoming, ckpt) = (root.join("incoming"), root.join("ckpt"));
        for d in [&incoming, &ckpt] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        let r = (|| {
            checkpoints::unpack(tar, &incoming, checkpoints::Bounds::checkpoint(max_bytes))
                .map_err(|m| format!("the checkpoint from Canopy was refused: {m}"))?;
            checkpoints::install(&ckpt, &incoming, name, b"")
        })();
        let _ = collect::remove_existing(&incoming);
        let f = r?;
        let handed = protocol::HostCheckpoint { name: f.name, at_ms: f.at_ms, bytes: f.bytes, handed: true };
        let record = root.join("handed.json");
        layout::write_json(&record, &handed)
            .map_err(|e| format!("cannot write {}: {e}", record.display()))?;
        Ok(handed)
    }

    /// The newest complete checkpoint the attempt has.
    fn newest_checkpoint(&self, token: &str) -> Result<Option<protocol::HostCheckpoint>, String> {
        let root = self.checkpoints(token)?;
        let ckpt = root.join("ckpt");
        let Some(f) = crate::engine::checkpoint::newest_complete(&ckpt)
            .map_err(|e| format!("cannot read {}: {e}", ckpt.display()))?
        else {
            return Ok(None);
        };
        let handed = layout::read_json::<protocol::HostCheckpoint>(&root.join("handed.json"))
            .ok()
            .flatten()
            .is_some_and(|h| h.name == f.name && h.at_ms == f.at_ms);
        Ok(Some(protocol::HostCheckpoint { name: f.name, at_ms: f.at_ms, bytes: f.bytes, handed }))
    }

    /// Sends checkpoint `name` as a tar stream; fails (exit 1) when it is
    /// not the complete checkpoint of `at_ms`, before or after it was sent
    /// (the workload changed it meanwhile), or is over `max_bytes`.
    fn fetch_checkpoint(&self, token: &str, name: &str, at_ms: i64, max_bytes: u64) -> i32 {
        let send = || -> Result<(), String> {
            if !checkpoints::valid_name(name) {
                return Err(format!("{name:?} cannot name a checkpoint"));
            }
            let dir = self.checkpoints(token)?.join("ckpt").join(name);
            let same = || crate::engine::checkpoint::completed_at(&dir) == Some(at_ms);
            if !same() {
                return Err(format!("checkpoint {name} is no longer the one complete at {at_ms}"));
            }
            let out = std::io::BufWriter::new(std::io::stdout().lock());
            checkpoints::write_tar(&dir, out, checkpoints::Bounds::checkpoint(max_bytes))?;
            if !same() {
                return Err(format!("checkpoint {name} changed while it was sent"));
            }
            Ok(())
        };
        match send() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{e}");
                FAILED
            }
        }
    }

    async fn probe(&self) -> Result<Probe, String> {
        let attempts = self.dir.join("attempts");
        let containers =
            self.provider.container_engine().await.map(ContainerEngine::tags).unwrap_or_default();
        let inv = crate::providers::local::inventory::inventory(&attempts, containers.clone(), 1).await?;
        let shape =
            inv.pools.into_iter().next().map(|p| p.def.shape).ok_or("the host reported no capacity")?;
        Ok(Probe { arch: std::env::consts::ARCH.to_string(), shape, now_ms: layout::now_ms(), containers })
    }

    async fn launch(&self, l: protocol::Launch) -> Result<protocol::LaunchOutcome, String> {
        let dir = self.attempt(&l.token)?;
        // The supervisor must find a live lease from its first check.
        self.renew(l.lease_ms)?;
        // Its own checkpoint directory, holding what Canopy put there.
        let checkpoint_dir = if l.checkpoint && l.spec.checkpoint.is_some() {
            use std::os::unix::fs::DirBuilderExt;
            let ckpt = self.checkpoints(&l.token)?.join("ckpt");
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&ckpt)
                .map_err(|e| format!("cannot create {}: {e}", ckpt.display()))?;
            Some(ckpt)
        } else {
            None
        };
        let req = LaunchRequest {
            attempt: l.attempt,
            token: l.token.clone(),
            spec: Arc::new(l.spec),
            pool: l.pool,
            node: l.node,
            secrets: l.secrets.into_iter().map(|(k, v)| (k, SecretValue::new(v))).collect(),
            artifact_dir: dir.outputs(),
            nodes: l.nodes,
            checkpoint_dir,
        };
        let r = self.provider.launch(&req).await;
        if let (Ok(ack), Some(ids)) = (&r, &l.gpus)
            && !ack.adopted
        {
            // Best effort: only `list` reads it, to account GPUs again
            // after Canopy restarts.
            let _ = layout::write_json(&dir.path().join("ssh-gpus.json"), ids);
        }
        Ok(protocol::LaunchOutcome::from_result(r))
    }

    async fn status(&self, token: &str) -> Result<Status, String> {
        Ok(match self.provider.status(token).await.map_err(|e| e.message)? {
            AttemptStatus::Pending => Status::Pending,
            // The host's own processes are never reclaimed with notice.
            AttemptStatus::Running | AttemptStatus::Reclaiming { .. } => Status::Running,
            AttemptStatus::Ended(end) => Status::Ended { end },
            AttemptStatus::NotFound => Status::NotFound,
        })
    }

    /// Moves what the supervisor collected into `fetch/` and says what it
    /// is. Asked again (its reply was lost on the way), it answers the same
    /// from `fetch.json`: the first call moved the files, so collecting
    /// again would find nothing.
    async fn outputs(&self, token: &str, spec: &crate::spec::Spec) -> Result<protocol::Staged, String> {
        let dir = self.attempt(token)?;
        let staging = dir.path().join("fetch");
        let staged = dir.path().join("fetch.json");
        if let Ok(Some(c)) = layout::read_json::<protocol::Staged>(&staged) {
            return Ok(c);
        }
        crate::providers::collect::remove_existing(&staging)
            .map_err(|e| format!("cannot clear {}: {e}", staging.display()))?;
        let mut c = self.provider.outputs(token, spec, &staging).await.map_err(|e| e.message)?;
        for a in &mut c.artifacts {
            a.path = a
                .path
                .strip_prefix(&staging)
                .map(Path::to_path_buf)
                .unwrap_or_else(|_| a.name.clone().into());
        }
        layout::write_json(&staged, &c).map_err(|e| format!("cannot write {}: {e}", staged.display()))?;
        Ok(c)
    }

    async fn list(&self) -> Result<Vec<Listed>, String> {
        let owned = self.provider.list_owned(&self.store).await.map_err(|e| e.message)?;
        Ok(owned
            .into_iter()
            .map(|o| {
                let gpus = self
                    .attempt(&o.token)
                    .ok()
                    .and_then(|d| {
                        layout::read_json::<Vec<u32>>(&d.path().join("ssh-gpus.json")).ok().flatten()
                    })
                    .unwrap_or_default();
                Listed { token: o.token, provider_ref: o.provider_ref, running: o.running, gpus }
            })
            .collect())
    }

    fn renew(&self, for_ms: u64) -> Result<i64, String> {
        self.make_dir()?;
        crate::providers::local::lease::renew(&self.lease(), Duration::from_millis(for_ms))
            .map_err(|e| format!("cannot renew the lease at {}: {e}", self.lease().display()))?;
        Ok(layout::now_ms())
    }

    /// Removes an attempt that holds no process any more.
    fn cleanup(&self, token: &str) -> Result<(), String> {
        let dir = self.attempt(token)?;
        let o = state::observe(&dir).map_err(|e| format!("cannot read {}: {e}", dir.path().display()))?;
        if o.holds_processes() {
            return Err(format!("{} still runs; stop it before cleaning up", dir.path().display()));
        }
        let ckpt = self.checkpoints(token)?;
        collect::remove_existing(&ckpt).map_err(|e| format!("cannot remove {}: {e}", ckpt.display()))?;
        if matches!(o, Observed::Missing) {
            return Ok(());
        }
        std::fs::remove_dir_all(dir.path())
            .map_err(|e| format!("cannot remove {}: {e}", dir.path().display()))
    }
}

/// Writes a JSON reply; exit 0 for `Ok`.
fn answer<T: Serialize>(r: Result<T, String>) -> i32 {
    let (reply, code) = match r {
        Ok(v) => (Reply::Ok(v), 0),
        Err(e) => (Reply::Error(e), FAILED),
    };
    let mut out = std::io::stdout().lock();
    match serde_json::to_writer(&mut out, &reply).and_then(|()| out.flush().map_err(serde_json::Error::io)) {
        Ok(()) => code,
        Err(_) => FAILED,
    }
}

/// Writes raw bytes (exit 0), or the error on stderr (exit 1).
fn raw(r: Result<Vec<u8>, String>) -> i32 {
    match r {
        Ok(bytes) => {
            let mut out = std::io::stdout().lock();
            if out.write_all(&bytes).and_then(|()| out.flush()).is_ok() { 0 } else { FAILED }
        }
        Err(e) => {
            eprintln!("{e}");
            FAILED
        }
    }
}

/// The staging directory as a tar stream: its entries under their own
/// names, links archived as links (Canopy refuses them), never followed.
fn fetch(staging: &Path) -> i32 {
    let write = || -> std::io::Result<()> {
        let out = std::io::stdout().lock();
        let mut tar = tar::Builder::new(std::io::BufWriter::new(out));
        tar.follow_symlinks(false);
        let mut names: Vec<_> = std::fs::read_dir(staging)?.collect::<std::io::Result<Vec<_>>>()?;
        names.sort_by_key(|e| e.file_name());
        for e in names {
            let ft = e.file_type()?;
            if ft.is_dir() {
                tar.append_dir_all(e.file_name(), e.path())?;
            } else {
                tar.append_path_with_name(e.path(), e.file_name())?;
            }
        }
        tar.into_inner()?.flush()
    };
    match write() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("cannot send {}: {e}", staging.display());
            FAILED
        }
    }
}
