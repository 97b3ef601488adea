//! The attempt directories Slurm and Ray attempts run in, under a
//! `jobs_dir` shared with the nodes: who may read them, and how long they
//! stay.
//!
//! Each attempt's directory is Canopy's user's alone (0700): its logs,
//! outputs and work directory are the workload's, and the parent is often
//! world-writable (1777), so every user of the cluster could read them.
//! The jobs therefore run as Canopy's user, as slurmrestd's JWT and a Ray
//! cluster started by that user make them.
//!
//! A directory is kept while the job pends or runs, and after it ends
//! until Canopy has taken what it needs (logs shipped, outputs collected):
//! the engine then *releases* the attempt ([`crate::providers::Provider::release`]),
//! which leaves a [`RELEASED`] mark. A directory released longer ago than
//! the provider's `jobs_retention` is removed by the sweep each provider
//! runs when it lists the store's jobs (every reconcile, once a minute).
//! A directory never released (its engine died before collecting) is
//! never swept: it is still the only copy of what the attempt left.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// The mark an attempt's directory gets once Canopy has taken its logs and
/// outputs.
pub const RELEASED: &str = "released";

/// How long a released attempt directory stays by default: a day to look
/// at what the job left in place.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// Creates `dir` and what the job writes into (`outputs`, `work`), 0700.
/// The `jobs_dir` itself (the admin's) is created only when missing, and
/// keeps the mode it has.
pub fn create_private(dir: &Path, subdirs: &[&Path]) -> std::io::Result<()> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::private::dir_all(dir)?;
    for d in subdirs {
        crate::private::dir_all(d)?;
    }
    Ok(())
}

/// Marks `token`'s directory under `jobs_dir` released: Canopy has what it
/// needs from it. No-op for a token that names no directory of ours.
pub fn mark_released(jobs_dir: &Path, token: &str) -> std::io::Result<()> {
    if !crate::providers::local::layout::valid_token(token) {
        return Ok(());
    }
    let dir = jobs_dir.join(token);
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => crate::private::write_replacing(&dir.join(RELEASED), b""),
        _ => Ok(()),
    }
}

/// This store's attempt directories under `jobs_dir` whose job is not in
/// `live`: real directories (never a link) named by a token of the store.
fn gone_attempt_dirs<'a>(
    jobs_dir: &Path,
    store_id: &str,
    live: &'a HashSet<String>,
) -> impl Iterator<Item = std::path::PathBuf> + 'a {
    let prefix = format!("canopy-{store_id}-");
    std::fs::read_dir(jobs_dir).into_iter().flatten().flatten().filter_map(move |e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with(&prefix) && crate::providers::local::layout::valid_token(&name);
        let dir = e.path();
        (ours && !live.contains(&name) && std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir()))
            .then_some(dir)
    })
}

/// How long ago the regular file `path` was last written; `None` when it
/// is missing or not a regular file (never followed).
fn age_of(path: &Path) -> Option<Duration> {
    std::fs::symlink_metadata(path).ok().filter(|m| m.is_file())?.modified().ok()?.elapsed().ok()
}

/// Removes this store's attempt directories under `jobs_dir` that were
/// released at least `retention` ago and whose job is not in `live`.
/// Returns how many it removed.
pub fn sweep_released(jobs_dir: &Path, store_id: &str, live: &HashSet<String>, retention: Duration) -> usize {
    gone_attempt_dirs(jobs_dir, store_id, live)
        .filter(|dir| age_of(&dir.join(RELEASED)).is_some_and(|age| age >= retention))
        .filter(|dir| std::fs::remove_dir_all(dir).is_ok())
        .count()
}

/// A secret file no job still waiting or running will read is swept
/// only once it is this old: a launch writes it a moment before Slurm or
/// Ray lists the job.
pub const UNREAD_GRACE: Duration = Duration::from_secs(120);

/// Removes the secret files of this store's attempt directories whose job
/// is not in `live` (still pending or running at the provider) and that
/// are older than `grace`: attempts lost before they started (a head
/// restarted, an engine that died) never read theirs. Returns how many it
/// removed.
pub fn sweep_unread(jobs_dir: &Path, store_id: &str, live: &HashSet<String>, grace: Duration) -> usize {
    gone_attempt_dirs(jobs_dir, store_id, live)
        .map(|dir| crate::providers::secrets::secret_file(&dir))
        .filter(|path| age_of(path).is_some_and(|age| age >= grace))
        .filter(|path| std::fs::remove_file(path).is_ok())
        .count()
}

/// [`crate::providers::Provider::release`] for Slurm and Ray: marks the
/// attempt's directory released.
pub fn release(provider: &str, jobs_dir: &Path, token: &str) -> Result<(), crate::providers::ProviderError> {
    mark_released(jobs_dir, token).map_err(|e| crate::providers::ProviderError {
        provider: provider.to_string(),
        message: format!("cannot mark {token}'s directory in {} released: {e}", jobs_dir.display()),
    })
}

/// The sweeps a provider runs when it lists the store's jobs (`owned`):
/// unread secret files of attempts that are gone, and released
/// directories past `retention`. Logs what it removed.
pub fn sweep(
    provider: &str,
    jobs_dir: &Path,
    store_id: &str,
    owned: &[crate::providers::Owned],
    retention: Duration,
) {
    let live: HashSet<String> = owned.iter().filter(|o| o.running).map(|o| o.token.clone()).collect();
    let secrets = sweep_unread(jobs_dir, store_id, &live, UNREAD_GRACE);
    let dirs = sweep_released(jobs_dir, store_id, &live, retention);
    if secrets + dirs > 0 {
        tracing::info!(%provider, secrets, dirs, "swept what gone attempts left in jobs_dir");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn attempt_directories_are_private_and_go_only_once_released_and_old() {
        let t = tempfile::tempdir().unwrap();
        let jobs = t.path().join("jobs");
        let mk = |token: &str| {
            let d = jobs.join(token);
            create_private(&d, &[&d.join("outputs"), &d.join("work")]).unwrap();
            std::fs::write(d.join("stdout.log"), "secret output").unwrap();
            d
        };
        let released = mk("canopy-s1-w1-a1-aa");
        let unreleased = mk("canopy-s1-w2-a1-bb");
        let running = mk("canopy-s1-w3-a1-cc");
        let other = mk("canopy-s2-w1-a1-dd");
        for d in [&released, &released.join("outputs"), &released.join("work")] {
            let mode = std::fs::metadata(d).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", d.display());
        }
        for token in ["canopy-s1-w1-a1-aa", "canopy-s1-w3-a1-cc", "canopy-s2-w1-a1-dd", "../escape", "nope"] {
            mark_released(&jobs, token).unwrap();
        }
        let live: HashSet<String> = ["canopy-s1-w3-a1-cc".to_string()].into();
        assert_eq!(sweep_released(&jobs, "s1", &live, DEFAULT_RETENTION), 0, "released too recently");
        assert_eq!(sweep_released(&jobs, "s1", &live, Duration::ZERO), 1);
        assert!(!released.exists(), "released and old: removed");
        assert!(unreleased.exists(), "never released: still the only copy");
        assert!(running.exists(), "its job still runs");
        assert!(other.exists(), "another store's");
    }

    #[test]
    fn unread_secret_files_of_gone_attempts_are_swept() {
        let t = tempfile::tempdir().unwrap();
        let secrets = vec![("HF_TOKEN".to_string(), crate::providers::SecretValue::new("hf_x"))];
        let dir = |token: &str| {
            let d = t.path().join(token);
            std::fs::create_dir_all(&d).unwrap();
            crate::providers::secrets::write_secret_file(&d, &secrets).unwrap();
            d
        };
        let gone = dir("canopy-s1-w1-a1-aa");
        let pending = dir("canopy-s1-w2-a1-bb");
        let other_store = dir("canopy-s2-w1-a1-cc");
        let live: std::collections::HashSet<String> = ["canopy-s1-w2-a1-bb".to_string()].into();
        // Too fresh: a launch may be about to submit it.
        assert_eq!(sweep_unread(t.path(), "s1", &live, UNREAD_GRACE), 0);
        assert_eq!(sweep_unread(t.path(), "s1", &live, std::time::Duration::ZERO), 1);
        assert!(
            !crate::providers::secrets::secret_file(&gone).exists(),
            "the gone attempt's secret is removed"
        );
        assert!(
            crate::providers::secrets::secret_file(&pending).exists(),
            "a job still waiting keeps its secret"
        );
        assert!(crate::providers::secrets::secret_file(&other_store).exists(), "another store's is not ours");
    }
}
