//! Where a Canopy installation keeps its state: one directory holding the
//! store (SQLite journal), attempt directories of the local provider, the
//! log store, the artifact store and Canopy's own log file.
//!
//! Resolved from `--store DIR`, else `$CANOPY_HOME`, else
//! `$XDG_STATE_HOME/canopy`, else `~/.local/state/canopy`.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
    /// Where the journal is when not the SQLite file ([`Home::store`]):
    /// `[journal] url` in canopy.toml.
    journal: Option<crate::journal::Location>,
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into(), journal: None }
    }

    /// The default location, from the environment.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let root = var("CANOPY_HOME")
            .or_else(|| var("XDG_STATE_HOME").map(|p| p.join("canopy")))
            .or_else(|| var("HOME").map(|p| p.join(".local/state/canopy")))
            .unwrap_or_else(|| PathBuf::from(".canopy"));
        Self { root, journal: None }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The journal (SQLite).
    pub fn store(&self) -> PathBuf {
        self.root.join("canopy.db")
    }

    /// This home with its journal at `at` (PostgreSQL, from `[journal]`).
    pub fn with_journal(mut self, at: crate::journal::Location) -> Self {
        self.journal = Some(at);
        self
    }

    /// Where the journal is: the SQLite file [`Home::store`] unless
    /// [`Home::with_journal`] said otherwise.
    pub fn journal(&self) -> crate::journal::Location {
        self.journal.clone().unwrap_or_else(|| crate::journal::Location::File(self.store()))
    }
    /// The local provider's attempt directories.
    pub fn attempts(&self) -> PathBuf {
        self.root.join("attempts")
    }
    /// Shipped logs: `logs/w-17/2/stdout.log`.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// Workloads' checkpoints, handed from attempt to attempt:
    /// `checkpoints/w-17/<checkpoint>/COMPLETE`.
    pub fn checkpoints(&self) -> PathBuf {
        self.root.join("checkpoints")
    }
    /// Collected outputs: `artifacts/w-17/2/<output>`.
    pub fn artifacts(&self) -> PathBuf {
        self.root.join("artifacts")
    }
    /// Canopy's own log (tracing), never the terminal.
    pub fn log_file(&self) -> PathBuf {
        self.root.join("canopy.log")
    }
}

/// The workload id in an attempt token `canopy-<store>-w<N>-a<M>[-nonce]`.
fn attempt_workload(token: &str) -> Option<u64> {
    let (_, rest) = token.strip_prefix("canopy-")?.split_once("-w")?;
    rest.split_once("-a")?.0.parse().ok()
}

/// What a store directory holds besides its journal: found when the
/// journal is missing or empty, so an engine does not silently start a
/// new store next to live attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Attempt directories of the local provider (their names).
    pub attempts: Vec<String>,
    /// Workloads with shipped logs or collected artifacts (`w-N`).
    pub workloads: Vec<String>,
}

impl Leftovers {
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty() && self.workloads.is_empty()
    }
}

impl Home {
    /// The largest workload id with a log or artifact directory here
    /// (`logs/w-N`, `artifacts/w-N`); 0 when none. Above the journal's
    /// largest id only when the journal lost history.
    pub fn max_workload_on_disk(&self) -> u64 {
        let left = self.leftovers();
        let dirs = left.workloads.iter().filter_map(|n| n.strip_prefix("w-")?.parse().ok());
        let attempts = left.attempts.iter().filter_map(|t| attempt_workload(t));
        dirs.chain(attempts).max().unwrap_or(0)
    }

    /// The store id the attempt directories here carry (the most common
    /// one), for a journal started over next to them.
    pub fn store_id_on_disk(&self) -> Option<String> {
        let mut count: std::collections::BTreeMap<String, usize> = Default::default();
        for t in self.leftovers().attempts {
            if let Some(id) = t.strip_prefix("canopy-").and_then(|r| r.split_once("-w")).map(|(id, _)| id)
                && id.len() == 6
                && id.bytes().all(|b| b.is_ascii_hexdigit())
            {
                *count.entry(id.to_string()).or_default() += 1;
            }
        }
        count.into_iter().max_by_key(|(_, n)| *n).map(|(id, _)| id)
    }

    fn workload_dirs(&self) -> Vec<String> {
        let mut names: Vec<String> = [self.logs(), self.artifacts()]
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.strip_prefix("w-").is_some_and(|d| d.parse::<u64>().is_ok()))
            .collect();
        names.sort_by_key(|n| n[2..].parse::<u64>().unwrap_or(0));
        names.dedup();
        names
    }

    /// What is here besides the journal.
    pub fn leftovers(&self) -> Leftovers {
        let mut attempts: Vec<String> = std::fs::read_dir(self.attempts())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.starts_with("canopy-"))
            .collect();
        attempts.sort();
        Leftovers { attempts, workloads: self.workload_dirs() }
    }

    /// Whether the journal is missing or empty (zero bytes).
    pub fn journal_is_new(&self) -> bool {
        std::fs::metadata(self.store()).map_or(true, |m| m.len() == 0)
    }

    /// Creates the store directory private to its owner (0700), or, when
    /// it exists, makes what Canopy keeps in it private (an older Canopy
    /// made some of it with the umask's mode) and returns a warning if
    /// others may read the store's directory itself.
    pub fn prepare(&self) -> std::io::Result<Option<String>> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        match std::fs::metadata(&self.root) {
            Ok(m) if m.permissions().mode() & 0o077 != 0 => {
                self.tighten()?;
                Ok(Some(format!(
                    "the store {} is readable by other users (mode {:o}); what Canopy keeps in it is \
                     private, but `chmod 700 {}` closes it too",
                    self.root.display(),
                    m.permissions().mode() & 0o777,
                    self.root.display()
                )))
            }
            Ok(_) => {
                self.tighten()?;
                Ok(None)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = self.root.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::DirBuilder::new().mode(0o700).create(&self.root).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists { Ok(()) } else { Err(e) }
                })?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Takes group and other permissions off what Canopy keeps at the top
    /// of the store: no one else can then reach anything below them,
    /// whatever an older Canopy created there. The operator's own files
    /// (`canopy.toml`) are left as they are.
    fn tighten(&self) -> std::io::Result<()> {
        for p in [
            self.attempts(),
            self.logs(),
            self.artifacts(),
            self.checkpoints(),
            self.root.join("ssh"),
            self.log_file(),
            crate::journal::lock_path(&self.store()),
        ] {
            crate::private::tighten(&p)?;
        }
        Ok(())
    }

    /// Makes the journal's files private to the owner (0600): SQLite
    /// creates them with the process's umask.
    pub fn secure_journal(&self) {
        use std::os::unix::fs::PermissionsExt;
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.store().into_os_string();
            p.push(suffix);
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_store_is_private_and_an_open_one_is_flagged() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path().join("a/store"));
        assert_eq!(home.prepare().unwrap(), None);
        let mode = std::fs::metadata(home.root()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(home.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let warning = home.prepare().unwrap().unwrap();
        assert!(warning.contains("chmod 700"), "{warning}");
    }

    #[test]
    fn what_an_older_canopy_left_open_is_made_private_and_the_operators_files_are_not() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path().join("store"));
        home.prepare().unwrap();
        let open =
            |p: &std::path::Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        std::fs::create_dir_all(home.logs().join("w-1/1")).unwrap();
        std::fs::create_dir_all(home.attempts()).unwrap();
        std::fs::write(home.log_file(), "").unwrap();
        let config = home.root().join("canopy.toml");
        std::fs::write(&config, "").unwrap();
        for (p, m) in [
            (home.logs(), 0o755),
            (home.attempts(), 0o755),
            (home.log_file(), 0o644),
            (config.clone(), 0o644),
        ] {
            open(&p, m).unwrap();
        }
        home.prepare().unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&home.logs()), 0o700);
        assert_eq!(mode(&home.attempts()), 0o700);
        assert_eq!(mode(&home.log_file()), 0o600);
        assert_eq!(mode(&config), 0o644, "the operator's configuration is theirs");
    }

    #[test]
    fn leftovers_and_ids_on_disk() {
        let t = tempfile::tempdir().unwrap();
        let home = Home::new(t.path());
        assert!(home.leftovers().is_empty());
        std::fs::create_dir_all(home.logs().join("w-9/1")).unwrap();
        std::fs::create_dir_all(home.artifacts().join("w-12/1")).unwrap();
        std::fs::create_dir_all(home.attempts().join("canopy-abc123-w9-a1")).unwrap();
        assert_eq!(home.max_workload_on_disk(), 12);
        std::fs::create_dir_all(home.attempts().join("canopy-abc123-w30-a2-00ff00ff00ff00ff")).unwrap();
        assert_eq!(home.max_workload_on_disk(), 30);
        assert_eq!(home.store_id_on_disk().as_deref(), Some("abc123"));
        let l = home.leftovers();
        assert_eq!(l.workloads, vec!["w-9", "w-12"]);
        assert_eq!(l.attempts, vec!["canopy-abc123-w30-a2-00ff00ff00ff00ff", "canopy-abc123-w9-a1"]);
    }
}
