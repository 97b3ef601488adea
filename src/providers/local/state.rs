//! Reading where an attempt stands from its directory and the process
//! table, and stopping it.
//!
//! This module owns the interpretation of the attempt directory: which
//! files, locks and live processes mean launching, running, ended or lost.
//! It signals only process groups whose leader it has matched by pid *and*
//! start time, or whose supervisor is alive and has not recorded an end
//! (while a group has members its id cannot be reused), or, once the
//! leader is gone, whose remaining members are in the supervisor's session
//! and started after the leader (see [`workload_alive`]).
//!
//! A supervisor that died without recording an end leaves an attempt
//! nobody watches: [`stop_orphaned`] stops whatever of it still runs
//! before the provider reports the end, so nothing of it runs beside a
//! retry.

use super::container;
use super::layout::{AttemptDir, ExitRecord, LaunchRecord, PidRecord, read_json};
use super::procfs;
use std::fs::{File, TryLockError};
use std::io;
use std::time::{Duration, Instant};

/// What the attempt directory and the process table say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// No such attempt directory.
    Missing,
    /// A launcher holds `launch.lock` and the supervisor is not up yet.
    Launching,
    Running(PidRecord),
    Ended(ExitRecord),
    /// No end recorded and no supervisor to record one.
    Lost {
        message: String,
        pids: Option<PidRecord>,
    },
}

pub const SUPERVISOR_DIED: &str = "supervisor died without recording an exit status";
/// How the provider reports an attempt whose supervisor died: a fault of
/// the provider's machinery, not of the node or the workload.
pub const SUPERVISOR_LOST: &str =
    "the supervisor of this attempt died without recording an end; its workload was stopped";
pub const LAUNCH_INTERRUPTED: &str = "the launch was interrupted before the supervisor started";

impl Observed {
    pub fn pids(&self) -> Option<&PidRecord> {
        match self {
            Observed::Running(p) => Some(p),
            Observed::Lost { pids, .. } => pids.as_ref(),
            _ => None,
        }
    }
    /// Whether anything of the attempt may still be running on this host.
    pub fn holds_processes(&self) -> bool {
        match self {
            Observed::Launching | Observed::Running(_) => true,
            Observed::Lost { pids, .. } => pids.as_ref().is_some_and(workload_alive),
            Observed::Missing | Observed::Ended(_) => false,
        }
    }
}

/// Whether anything of the workload the pid file records still runs: its
/// leader (pid and start time), or, with the leader gone, members of its
/// group in the supervisor's session that started after it.
pub fn workload_alive(p: &PidRecord) -> bool {
    let Some(c) = p.child else { return false };
    procfs::is_alive(&c)
        || p.session.is_some_and(|sid| !procfs::group_members(c.pid, sid, c.start_time).is_empty())
}

/// Stops what is left of an attempt whose supervisor died without
/// recording an end: its container, if it ran in one, and every process of
/// its group (SIGKILL; nobody is left to wait for a graceful end). Waits
/// briefly for them to go.
pub async fn stop_orphaned(dir: &AttemptDir, p: &PidRecord) {
    if !workload_alive(p) {
        return;
    }
    let Some(c) = p.child else { return };
    tracing::warn!(attempt = %dir.path().display(), "the supervisor died; stopping its workload (group {})", c.pid);
    if let Ok(Some(l)) = read_json::<LaunchRecord>(&dir.launch())
        && let Some(engine) = &l.container_engine
    {
        stop_container(engine, &l.token, Duration::ZERO).await;
        // Its supervisor is not there to remove it (and its cgroup).
        let (engine, token) = (engine.clone(), l.token.clone());
        let _ = tokio::task::spawn_blocking(move || {
            container::after_exit(&engine, &token, None, std::path::Path::new("/dev/null"))
        })
        .await;
    }
    let _ = procfs::signal_group(c.pid, libc::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(2);
    while workload_alive(p) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads the attempt's state. The order of reads matters: an end recorded
/// while we look is found by the second read of `exit.json`.
pub fn observe(dir: &AttemptDir) -> io::Result<Observed> {
    if !dir.path().is_dir() {
        return Ok(Observed::Missing);
    }
    if let Some(exit) = read_json::<ExitRecord>(&dir.exit())? {
        return Ok(Observed::Ended(exit));
    }
    let mut pids = read_json::<PidRecord>(&dir.pid())?;
    if pids.is_none() {
        if lock_held(dir)? {
            return Ok(Observed::Launching);
        }
        // The supervisor may have written it while we checked the lock.
        pids = read_json::<PidRecord>(&dir.pid())?;
    }
    if let Some(p) = pids
        && procfs::is_alive(&p.supervisor)
    {
        return Ok(Observed::Running(p));
    }
    if let Some(exit) = read_json::<ExitRecord>(&dir.exit())? {
        return Ok(Observed::Ended(exit));
    }
    let message = if pids.is_some() { SUPERVISOR_DIED } else { LAUNCH_INTERRUPTED };
    Ok(Observed::Lost { message: message.into(), pids })
}

/// Whether a launcher still holds `launch.lock`. A process the launcher's
/// process forks shares the lock until it execs, so the lock may look
/// held for an instant after the launcher let go: callers poll.
fn lock_held(dir: &AttemptDir) -> io::Result<bool> {
    let f = match File::open(dir.lock()) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match f.try_lock() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Polls [`observe`] every 50 ms while the launch is in progress, up to
/// `timeout`.
pub async fn observe_settled(dir: &AttemptDir, timeout: Duration) -> io::Result<Observed> {
    let deadline = Instant::now() + timeout;
    loop {
        let o = observe(dir)?;
        if o != Observed::Launching || Instant::now() >= deadline {
            return Ok(o);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How long a container's client gets to return after `<engine> stop`.
const CLIENT_AFTER_STOP: Duration = Duration::from_secs(5);

/// Stops the attempt: SIGTERM to the workload's process group, SIGKILL
/// after `grace`, then waits for the end to be recorded (or, without a
/// supervisor, for the group to be gone). Containers are stopped through
/// their engine first. `Ok` when there was nothing left to stop.
pub async fn terminate(dir: &AttemptDir, grace: Duration, launch_timeout: Duration) -> Result<(), String> {
    let o = observe_settled(dir, launch_timeout).await.map_err(|e| e.to_string())?;
    if o == Observed::Launching {
        return Err(format!("the launch of {} is still in progress; try again", dir.path().display()));
    }
    if !o.holds_processes() {
        return Ok(());
    }
    let launch: Option<LaunchRecord> = read_json(&dir.launch()).map_err(|e| e.to_string())?;
    if let Some(engine) = launch.as_ref().and_then(|l| l.container_engine.as_ref().map(|e| (e, &l.token))) {
        stop_container(engine.0, engine.1, grace).await;
        // The engine's client returns once the container has ended: the
        // workload's own end is recorded, not a SIGTERM to the client.
        if wait_stopped(dir, CLIENT_AFTER_STOP).await? {
            return Ok(());
        }
    }
    if let Some(c) = o.pids().filter(|p| workload_alive(p)).and_then(|p| p.child) {
        let _ = procfs::signal_group(c.pid, libc::SIGTERM);
    }
    if wait_stopped(dir, grace).await? {
        return Ok(());
    }
    let o = observe(dir).map_err(|e| e.to_string())?;
    let child = o.pids().and_then(|p| p.child);
    let ours = matches!(o, Observed::Running(_)) || o.pids().is_some_and(workload_alive);
    if let (Some(c), true) = (child, ours) {
        tracing::info!(attempt = %dir.path().display(), "still running {grace:?} after SIGTERM; sending SIGKILL");
        let _ = procfs::signal_group(c.pid, libc::SIGKILL);
    }
    if wait_stopped(dir, Duration::from_secs(5)).await? {
        return Ok(());
    }
    Err(format!(
        "{} is still running after SIGKILL; look for its processes (see the pid file) and end them by hand",
        dir.path().display()
    ))
}

/// Waits until nothing of the attempt runs: an end is recorded, or the
/// supervisor is gone and the workload's group is empty.
async fn wait_stopped(dir: &AttemptDir, within: Duration) -> Result<bool, String> {
    let deadline = Instant::now() + within;
    loop {
        let o = observe(dir).map_err(|e| e.to_string())?;
        let stopped = match &o {
            Observed::Missing | Observed::Ended(_) => true,
            Observed::Lost { pids, .. } => pids.as_ref().is_none_or(|p| !workload_alive(p)),
            Observed::Launching | Observed::Running(_) => false,
        };
        if stopped {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stop_container(program: &str, token: &str, grace: Duration) {
    let argv = container::stop_argv(std::path::Path::new(program), token, grace);
    let run = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(grace + Duration::from_secs(10), run).await {
        Ok(Ok(s)) if s.success() => {}
        other => tracing::warn!(
            token,
            "`{program} stop` did not succeed ({other:?}); signalling the client instead"
        ),
    }
}
