//! The job id of an attempt, recorded in its directory so that a launch
//! (or a status poll after a restart) finds its job without listing every
//! job Slurm knows.
//!
//! ```text
//! <jobs_dir>/<token>/
//!   launch.lock      held (flock) while a launch looks up, submits, records
//!   slurm_job.json   {"id": 4711, "submitted": 1718000000}
//!   spec.sha256      the spec the token was claimed for (adoption checks it)
//!   gang.nodes       a gang's nodes in rank order, one a line (Slurm lists
//!                    a job's nodes sorted, not in Canopy's rank order)
//! ```
//!
//! Idempotency rests on the order: the token's directory is created
//! (atomically, by `create_dir`) *before* the submit, and the id is written
//! (atomically, by rename) right after it. So a directory without an id is
//! a launch interrupted between submit and record, and only then must the
//! job list be searched. Owns these file names and nothing else; it never
//! talks to Slurm.

use crate::providers::local::layout::AttemptDir;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, TryLockError};
use std::io;
use std::time::{Duration, Instant};

/// What is recorded about a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobRecord {
    pub id: u64,
    /// When the job was submitted (epoch seconds).
    pub submitted: i64,
}

fn record_path(dir: &AttemptDir) -> std::path::PathBuf {
    dir.path().join("slurm_job.json")
}

/// Creates the token's directory. `true` when this call created it (no
/// launch of this token began before), `false` when it already existed.
pub fn claim(dir: &AttemptDir) -> io::Result<bool> {
    if let Some(parent) = dir.path().parent() {
        fs::create_dir_all(parent)?;
    }
    match fs::create_dir(dir.path()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The recorded job, if any. A record that cannot be parsed (torn by a
/// crash) reads as none: the caller then searches the job list.
pub fn read(dir: &AttemptDir) -> io::Result<Option<JobRecord>> {
    match fs::read(record_path(dir)) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes).ok()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn spec_path(dir: &AttemptDir) -> std::path::PathBuf {
    dir.path().join("spec.sha256")
}

/// Records which spec the token was claimed for, right after the claim.
pub fn write_spec(dir: &AttemptDir, hash: &str) -> io::Result<()> {
    let tmp = dir.path().join("spec.sha256.tmp");
    fs::write(&tmp, hash)?;
    fs::rename(&tmp, spec_path(dir))
}

/// The spec hash recorded at the claim; `None` for directories from
/// before it was recorded (or a claim interrupted before it).
pub fn read_spec(dir: &AttemptDir) -> io::Result<Option<String>> {
    match fs::read_to_string(spec_path(dir)) {
        Ok(s) => Ok(Some(s.trim().to_string()).filter(|s| !s.is_empty())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn nodes_path(dir: &AttemptDir) -> std::path::PathBuf {
    dir.path().join("gang.nodes")
}

/// Records a gang's nodes in rank order, before its submit.
pub fn write_nodes(dir: &AttemptDir, nodes: &[String]) -> io::Result<()> {
    let tmp = dir.path().join("gang.nodes.tmp");
    fs::write(&tmp, nodes.join("\n") + "\n")?;
    fs::rename(&tmp, nodes_path(dir))
}

/// A gang's nodes in rank order; empty for a one-node attempt.
pub fn read_nodes(dir: &AttemptDir) -> io::Result<Vec<String>> {
    match fs::read_to_string(nodes_path(dir)) {
        Ok(s) => Ok(s.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Records the job atomically (write a temporary file, rename): readers
/// see no record or the whole one. Not fsynced, on purpose: a record lost
/// to a power cut leaves the directory without an id, which sends the next
/// launch to the job list, so idempotency holds without paying two
/// fsyncs per launch.
pub fn write(dir: &AttemptDir, rec: JobRecord) -> io::Result<()> {
    let path = record_path(dir);
    let tmp = dir.path().join("slurm_job.json.tmp");
    let bytes = serde_json::to_vec(&rec).map_err(io::Error::other)?;
    fs::write(&tmp, bytes)?;
    fs::rename(&tmp, path)
}

/// Takes the token's launch lock, waiting (without blocking the runtime)
/// up to `wait`. The lock is released when the returned file is dropped.
pub async fn lock(dir: &AttemptDir, wait: Duration) -> io::Result<File> {
    let f = File::options().create(true).truncate(false).write(true).open(dir.lock())?;
    let deadline = Instant::now() + wait;
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} is held by another launch of this token", dir.lock().display()),
                ));
            }
            Err(TryLockError::Error(e)) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn claim_lock_and_record() {
        let root = tempfile::tempdir().unwrap();
        let dir = AttemptDir::at(root.path(), "canopy-s-w-1-1");
        assert!(claim(&dir).unwrap(), "first claim creates the directory");
        assert!(!claim(&dir).unwrap(), "a second claim finds it");
        assert_eq!(read(&dir).unwrap(), None);
        let held = lock(&dir, Duration::from_millis(10)).await.unwrap();
        let err = lock(&dir, Duration::from_millis(50)).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        write(&dir, JobRecord { id: 42, submitted: 7 }).unwrap();
        drop(held);
        let _again = lock(&dir, Duration::from_millis(10)).await.unwrap();
        assert_eq!(read(&dir).unwrap(), Some(JobRecord { id: 42, submitted: 7 }));
        fs::write(record_path(&dir), b"").unwrap();
        assert_eq!(read(&dir).unwrap(), None, "a torn record reads as none");
    }
}
