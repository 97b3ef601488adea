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
}

impl Home {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The default location, from the environment.
    pub fn from_env() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let root = var("CANOPY_HOME")
            .or_else(|| var("XDG_STATE_HOME").map(|p| p.join("canopy")))
            .or_else(|| var("HOME").map(|p| p.join(".local/state/canopy")))
            .unwrap_or_else(|| PathBuf::from(".canopy"));
        Self { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    /// The journal (SQLite).
    pub fn store(&self) -> PathBuf {
        self.root.join("canopy.db")
    }
    /// The local provider's attempt directories.
    pub fn attempts(&self) -> PathBuf {
        self.root.join("attempts")
    }
    /// Shipped logs: `logs/w-17/2/stdout.log`.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
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
