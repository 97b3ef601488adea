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

use crate::providers::local::layout::{AttemptDir, write_replacing};
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
    // Canopy's user's alone: the job's logs and outputs land here.
    match crate::private::dir(dir.path()) {
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
    write_replacing(&spec_path(dir), hash.as_bytes())
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
    write_replacing(&nodes_path(dir), (nodes.join("\n") + "\n").as_bytes())
}

/// The attempt's nodes in rank order: a gang's from its launch, a one-node
/// attempt's once it was seen running; empty before.
pub fn read_nodes(dir: &AttemptDir) -> io::Result<Vec<String>> {
    match fs::read_to_string(nodes_path(dir)) {
        Ok(s) => Ok(s.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Records the job atomically (write a fresh temporary file, rename):
/// readers see no record or the whole one. Not fsynced, on purpose: a
/// record lost to a power cut leaves the directory without an id, which
/// sends the next launch to the job list, so idempotency holds without
/// paying two fsyncs per launch. The job may already be running and can
/// write to this directory (its work directory is below it), so the
/// temporary file's name is unique and created exclusively: a link it
/// planted is never written through.
pub fn write(dir: &AttemptDir, rec: JobRecord) -> io::Result<()> {
    let bytes = serde_json::to_vec(&rec).map_err(io::Error::other)?;
    write_replacing(&record_path(dir), &bytes)
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

    #[test]
    fn links_the_job_planted_in_its_directory_are_never_written_through() {
        // The job runs below its attempt directory and may plant links at
        // the names a writer would use for its temporary files.
        let root = tempfile::tempdir().unwrap();
        let dir = AttemptDir::at(root.path(), "canopy-s-w-1-1");
        claim(&dir).unwrap();
        let victim = root.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        for name in ["slurm_job.json.tmp", "spec.sha256.tmp", "gang.nodes.tmp"] {
            std::os::unix::fs::symlink(&victim, dir.path().join(name)).unwrap();
        }
        write_spec(&dir, "abc").unwrap();
        write_nodes(&dir, &["n2".into(), "n1".into()]).unwrap();
        write(&dir, JobRecord { id: 42, submitted: 7 }).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(read(&dir).unwrap(), Some(JobRecord { id: 42, submitted: 7 }));
        assert_eq!(read_spec(&dir).unwrap().as_deref(), Some("abc"));
        assert_eq!(read_nodes(&dir).unwrap(), ["n2", "n1"]);
    }
}
