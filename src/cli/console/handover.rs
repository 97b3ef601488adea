//! Handing the engine a console started over to a background
//! `canopy serve`, so scheduling goes on after the console is gone (the
//! operator quit and asked for it, or the terminal hung up).
//!
//! The in-process engine stops first (it gives the store up; its running
//! attempts stay with their providers), then this same binary starts as
//! `canopy --store ROOT serve` in a session of its own, with no terminal,
//! writing to the store's `canopy.log`; it re-adopts the running work as
//! any engine start does. The handover is done when the new engine's
//! socket answers.

use crate::cli::{ConsoleArgs, StoreArgs};
use canopy::app::Running;
use canopy::client::Client;
use canopy::home::Home;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the stopping engine may take to finish its batch.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long the store may stay locked after the engine stopped.
const UNLOCK_WAIT: Duration = Duration::from_secs(10);
/// How long the background engine may take to answer on the socket.
const READY_WAIT: Duration = Duration::from_secs(30);

/// How to start the background engine: the store and the options the
/// console's engine ran with.
#[derive(Debug, Clone)]
pub struct Serve {
    exe: Option<PathBuf>,
    root: PathBuf,
    config: Option<PathBuf>,
    fleet: Option<PathBuf>,
    no_faults: bool,
    log: PathBuf,
    journal: PathBuf,
}

impl Serve {
    pub fn new(home: &Home, store: &StoreArgs, args: &ConsoleArgs) -> Self {
        // Absolute, so the paths mean the same whatever the new process's
        // working directory.
        let abs = |p: &std::path::Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        Serve {
            exe: this_program(),
            root: abs(home.root()),
            config: store.config.as_deref().map(abs),
            fleet: args.fleet.as_deref().map(abs),
            no_faults: args.no_faults,
            log: home.log_file(),
            journal: home.store(),
        }
    }

    /// `canopy --store ROOT [--config FILE] serve [--fleet FILE] [--no-faults]`,
    /// detached: a new session (no controlling terminal, so no SIGHUP when
    /// this one's goes), stdin from /dev/null, output to the store's log.
    fn command(&self) -> Result<Command, String> {
        let exe = self.exe.clone().ok_or("cannot find this program to start `canopy serve`")?;
        let mut c = Command::new(exe);
        c.arg("--store").arg(&self.root);
        if let Some(cfg) = &self.config {
            c.arg("--config").arg(cfg);
        }
        c.arg("serve");
        if let Some(f) = &self.fleet {
            c.arg("--fleet").arg(f);
        }
        if self.no_faults {
            c.arg("--no-faults");
        }
        let log = canopy::private::append(&self.log)
            .map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        let err = log.try_clone().map_err(|e| format!("cannot open {}: {e}", self.log.display()))?;
        c.stdin(Stdio::null()).stdout(log).stderr(err);
        // SAFETY: the closure runs in the forked child before exec and only
        // calls setsid(2), which is async-signal-safe and allocates nothing.
        unsafe {
            c.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        Ok(c)
    }
}

/// This program. When its file was replaced while it ran (a rebuild, an
/// upgrade), the path names nothing any more (Linux shows it with
/// " (deleted)"), but `/proc/self/exe` still runs this very version.
fn this_program() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    if exe.exists() {
        return Some(exe);
    }
    let proc = PathBuf::from("/proc/self/exe");
    proc.exists().then_some(proc)
}

/// Stops `running` and starts the background engine in its place. Returns
/// the new engine's pid once its socket answers.
pub async fn handover(running: Running, serve: &Serve) -> Result<u32, String> {
    if let Err(e) = running.stop(STOP_WAIT).await {
        tracing::warn!(error = %e, "the engine stopped with an error before the handover");
    }
    // The store is given up when the engine's task ends.
    let deadline = Instant::now() + UNLOCK_WAIT;
    while canopy::journal::is_owned(&serve.journal).unwrap_or(false) {
        if Instant::now() >= deadline {
            return Err("the engine in this console did not give the store up in time".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut child = serve.command()?.spawn().map_err(|e| format!("cannot start `canopy serve`: {e}"))?;
    let pid = child.id();
    tracing::info!(pid, "started `canopy serve` to take the engine over");
    let client = Client::for_store(&serve.root).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + READY_WAIT;
    loop {
        if client.get::<serde_json::Value>("/v1/whoami").await.is_ok() {
            return Ok(pid);
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("`canopy serve` stopped at start ({status}); see {}", serve.log.display()));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "`canopy serve` (pid {pid}) did not answer within {}s; see {}",
                READY_WAIT.as_secs(),
                serve.log.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
