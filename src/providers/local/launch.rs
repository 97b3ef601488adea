//! Launching an attempt exactly once per token: claim the attempt
//! directory atomically, start the supervisor in its own session, and
//! adopt instead when the directory already exists.
//!
//! The claim: the launcher builds the directory under a private temporary
//! name, takes `launch.lock` inside it, then renames it to `<token>`. The
//! rename fails when `<token>` exists, so of concurrent launchers exactly
//! one wins, and whoever sees `<token>` also sees a held lock until the
//! supervisor has written its `pid` file. Losers adopt.
//!
//! Adoption checks identity first: the directory's `spec.json` must be the
//! request's spec (compared by canonical hash, see [`spec_identity`]). A
//! directory that holds a different workload's attempt is refused, never
//! adopted and never signalled.
//!
//! Secret values go to the supervisor's environment here and nowhere else.
//! Files the launcher creates in the attempt directory are 0600.

use super::LocalConfig;
use super::layout::{AttemptDir, PidRecord, append_private, create_private, read_json, write_json};
use super::plan::Plan;
use super::state::{self, Observed};
use crate::private;
use crate::providers::{LaunchAck, LaunchError, SecretValue};
use crate::spec::Spec;
use std::fs::{self, File};
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Claims the directory and starts the supervisor, or adopts.
pub async fn launch_planned(
    cfg: &LocalConfig,
    dir: &AttemptDir,
    spec: &Spec,
    plan: Plan,
    secrets: &[(String, SecretValue)],
) -> Result<LaunchAck, LaunchError> {
    let (root, token) = (cfg.root.clone(), plan.record.token.clone());
    let (claim_spec, claim_plan, copy) = (spec.clone(), plan.clone(), cfg.copy_inputs);
    let lock = tokio::task::spawn_blocking(move || claim(&root, &token, &claim_spec, &claim_plan, copy))
        .await
        .map_err(|e| LaunchError::Api(format!("the launch task failed: {e}")))?
        .map_err(|e| {
            LaunchError::Api(format!("cannot create the attempt directory in {}: {e}", cfg.root.display()))
        })?;
    match lock {
        Some(lock) => start(cfg, dir, &plan, secrets, lock).await,
        None => adopt(cfg, dir, spec).await,
    }
}

/// Adopts the attempt in an existing directory, waiting out a launch in
/// progress. An attempt whose launch was interrupted is adopted too (its
/// status says it was lost): a token never runs twice. A directory whose
/// `spec.json` is not `spec` is refused with [`LaunchError::Rejected`].
pub async fn adopt(cfg: &LocalConfig, dir: &AttemptDir, spec: &Spec) -> Result<LaunchAck, LaunchError> {
    check_identity(dir, spec)?;
    let o = state::observe_settled(dir, cfg.launch_timeout)
        .await
        .map_err(|e| LaunchError::Api(format!("cannot read {}: {e}", dir.path().display())))?;
    match o {
        Observed::Launching => Err(LaunchError::Timeout),
        Observed::Missing => {
            Err(LaunchError::Api(format!("{} disappeared while being adopted", dir.path().display())))
        }
        _ => Ok(LaunchAck { provider_ref: provider_ref(dir), adopted: true }),
    }
}

/// Refuses a directory that holds another workload's attempt: its
/// `spec.json` must have `spec`'s identity.
fn check_identity(dir: &AttemptDir, spec: &Spec) -> Result<(), LaunchError> {
    let refuse = |why: String| {
        LaunchError::Rejected(format!(
            "{} already exists and holds a different workload's attempt ({why}); it was neither adopted \
             nor touched. Another Canopy store sharing this attempts directory, or a store that was \
             recreated, can cause this: give each store its own home, or move the directory away if it is \
             no longer needed",
            dir.path().display()
        ))
    };
    let recorded = match read_json::<serde_json::Value>(&dir.spec()) {
        Ok(Some(v)) => v,
        Ok(None) => return Err(refuse("it has no spec.json".into())),
        Err(e) => return Err(refuse(format!("its spec.json cannot be read: {e}"))),
    };
    let recorded = serde_json::from_value::<Spec>(recorded)
        .map_err(|e| refuse(format!("its spec.json is not a spec: {e}")))?;
    if spec_identity(&recorded) != spec_identity(spec) {
        return Err(refuse("its spec.json differs from this launch's spec".into()));
    }
    Ok(())
}

/// The spec's identity: [`Spec::content_hash`] (the engine's `spec_hash`)
/// of the spec as `spec.json` records it, so a spec and the same spec read
/// back from the file hash alike.
pub fn spec_identity(spec: &Spec) -> String {
    serde_json::to_vec(spec)
        .ok()
        .and_then(|b| serde_json::from_slice::<Spec>(&b).ok())
        .map_or_else(|| spec.content_hash(), |s| s.content_hash())
}

/// The supervisor's pid, the handle operators can look up; `-` before it
/// is known.
pub fn provider_ref(dir: &AttemptDir) -> String {
    match read_json::<PidRecord>(&dir.pid()) {
        Ok(Some(p)) => p.supervisor.pid.to_string(),
        _ => "-".into(),
    }
}

/// Builds the attempt directory privately and renames it into place.
/// `Ok(None)`: another launcher got there first.
fn claim(root: &Path, token: &str, spec: &Spec, plan: &Plan, copy_inputs: bool) -> io::Result<Option<File>> {
    // The attempts directory, like everything here, is private (0700):
    // logs and outputs may be sensitive.
    private::dir_all(root)?;
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = root.join(format!(".launching-{token}-{}-{nanos}", std::process::id()));
    private::dir(&tmp)?;
    let result = build_and_rename(&tmp, &root.join(token), spec, plan, copy_inputs);
    if !matches!(result, Ok(Some(_))) {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

fn build_and_rename(
    tmp: &Path,
    dest: &Path,
    spec: &Spec,
    plan: &Plan,
    copy_inputs: bool,
) -> io::Result<Option<File>> {
    let staging = AttemptDir::new(tmp.to_path_buf());
    let lock = create_private(&staging.lock())?;
    // Nobody else can know this fresh private file, so the lock is free.
    lock.try_lock().map_err(io::Error::other)?;
    // work/, inputs/, outputs/ and output paths' parents: Canopy's, so
    // private; what the workload makes in them keeps the workload's modes.
    for d in &plan.dirs {
        private::dir_all(&tmp.join(d))?;
    }
    write_json(&staging.spec(), spec)?;
    write_json(&staging.launch(), &plan.record)?;
    for i in &plan.inputs {
        let at = staging.inputs().join(&i.name);
        if copy_inputs {
            copy_tree(&i.source, &at)?;
        } else {
            std::os::unix::fs::symlink(&i.source, &at)?;
        }
    }
    match fs::rename(tmp, dest) {
        Ok(()) => Ok(Some(lock)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EEXIST | libc::ENOTEMPTY)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Starts the supervisor and waits until it has started the workload.
/// `lock` is released when this returns.
async fn start(
    cfg: &LocalConfig,
    dir: &AttemptDir,
    plan: &Plan,
    secrets: &[(String, SecretValue)],
    lock: File,
) -> Result<LaunchAck, LaunchError> {
    let api = |what: &str, e: io::Error| LaunchError::Api(format!("{what}: {e}"));
    let notes = append_private(&dir.supervisor_log()).map_err(|e| api("cannot create supervisor.log", e))?;
    let mut cmd = tokio::process::Command::new(&cfg.shim.program);
    cmd.args(&cfg.shim.args).arg("--attempt").arg(dir.path());
    if let Some(lease) = &plan.lease {
        cmd.arg("--lease").arg(lease);
    }
    // Secrets go on the supervisor's stdin: in no process's arguments, and
    // not in the supervisor's own environment, only in the workload's.
    let secret_json = (!secrets.is_empty()).then(|| {
        let pairs: Vec<(&str, &str)> = secrets.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
        serde_json::to_vec(&pairs).unwrap_or_default()
    });
    if secret_json.is_some() {
        cmd.arg("--secrets-on-stdin");
    }
    cmd.arg("--")
        .args(&plan.argv)
        .env_clear()
        .envs(&plan.env)
        .current_dir(&plan.cwd)
        .stdin(if secret_json.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::null())
        .stderr(notes);
    // The supervisor makes itself a session leader first thing
    // (`supervise_main`). Not here with a pre-exec hook: any hook makes std
    // fork() the engine, copying its page tables, which was most of the
    // cost of a launch (benches/engine.rs: ~40 → ~180 workloads/s); without
    // one it spawns with posix_spawn. A signal to the engine's process
    // group in the instant before the supervisor's setsid ends the
    // supervisor before it writes `pid`: a failed launch, never a lost run.
    let mut child = cmd.spawn().map_err(|e| {
        api(&format!("cannot start the supervisor {} (LocalConfig.shim)", cfg.shim.program.display()), e)
    })?;
    if let (Some(bytes), Some(mut stdin)) = (secret_json, child.stdin.take()) {
        use tokio::io::AsyncWriteExt;
        // A supervisor that dies before reading fails the launch below.
        let _ = tokio::time::timeout(cfg.launch_timeout, stdin.write_all(&bytes)).await;
        drop(stdin);
    }
    let deadline = Instant::now() + cfg.launch_timeout;
    let outcome = loop {
        if dir.pid().exists() || dir.exit().exists() {
            break Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            if dir.pid().exists() {
                break Ok(());
            }
            break Err(LaunchError::Api(format!(
                "the supervisor exited ({status}) before starting the workload; see {}",
                dir.supervisor_log().display()
            )));
        }
        if Instant::now() >= deadline {
            // Stop it rather than let it start the workload unannounced.
            let _ = child.start_kill();
            let _ = child.wait().await;
            break if dir.pid().exists() { Ok(()) } else { Err(LaunchError::Timeout) };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Reap the supervisor when it ends, so it never lingers as a zombie.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    drop(lock);
    outcome.map(|()| LaunchAck { provider_ref: provider_ref(dir), adopted: false })
}

/// Copies an input file or directory tree into the attempt (inputs are the
/// operator's own files: links in them are followed).
fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    if fs::metadata(src)?.is_dir() {
        private::dir(dst)?;
        let mut names: Vec<_> =
            fs::read_dir(src)?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let s = src.join(&name);
            let ft = fs::symlink_metadata(&s)?.file_type();
            if ft.is_dir() || ft.is_file() || (ft.is_symlink() && fs::metadata(&s).is_ok_and(|m| m.is_file()))
            {
                copy_tree(&s, &dst.join(&name))?;
            } else {
                tracing::warn!(path = %s.display(), "input entry is not a file or directory; not staged");
            }
        }
        Ok(())
    } else {
        io::copy(&mut File::open(src)?, &mut create_private(dst)?).map(|_| ())
    }
}
