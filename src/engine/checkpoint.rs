//! Checkpoints between attempts, on Canopy's side: a workload with
//! `[checkpoint]` writes each checkpoint as a directory under
//! `$CANOPY_CHECKPOINT_DIR` and marks it complete by creating the file
//! `COMPLETE` inside it last (`step-300/COMPLETE`). Canopy keeps the
//! workload's checkpoint directory in its store (`checkpoints/w-17/`) and
//! hands it to every attempt in place (by reference) where the provider
//! shares the file system, as the local provider does; a provider that
//! does not ([`crate::providers::Provider::copies_checkpoints`]) copies
//! the newest complete one to the attempt and back, within the spec's cap.
//!
//! Before each launch [`prepare`] leaves only the newest complete
//! checkpoint there (`keep = "latest"`): a checkpoint cut off mid-write has
//! no `COMPLETE` and is removed, so it never poisons the next attempt.
//! After each attempt [`newest_complete`] says which one it left.
//!
//! What the workload wrote is hostile input: links are never followed (a
//! linked directory or a linked `COMPLETE` is not a checkpoint, and
//! removing a link removes the link only), and sizes are summed over
//! regular files alone, with a bound on how many entries are visited.
//! Shell-side I/O only: the engine core sees [`Found`] values.

use crate::spec::Checkpoint;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::time::UNIX_EPOCH;

/// Most directory entries visited when sizing one checkpoint.
pub const MAX_ENTRIES: usize = 100_000;

/// A complete checkpoint found in a checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its directory's name.
    pub name: String,
    /// When it was marked complete: `COMPLETE`'s modification time (ms
    /// since the Unix epoch).
    pub at_ms: i64,
    /// Bytes of its regular files.
    pub bytes: u64,
}

/// The newest complete checkpoint in `dir` (by completion time, then
/// name); `None` when there is none or `dir` does not exist.
pub fn newest_complete(dir: &Path) -> io::Result<Option<Found>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut best: Option<(i64, String)> = None;
    for entry in entries {
        let entry = entry?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if let Some(at) = completed_at(&entry.path())
            && best.as_ref().is_none_or(|(t, n)| (at, &name) > (*t, n))
        {
            best = Some((at, name));
        }
    }
    Ok(best.map(|(at_ms, name)| {
        let bytes = regular_bytes(&dir.join(&name));
        Found { name, at_ms, bytes }
    }))
}

/// Makes `dir` ready for an attempt: created if missing (0700), and
/// everything in it removed but the newest complete checkpoint, which is
/// returned. A newest checkpoint larger than the spec's `max_gb` is kept:
/// handed on in place it needs no copy; a provider that copies leaves it
/// behind, and the caller says so.
pub fn prepare(dir: &Path) -> io::Result<Option<Found>> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let keep = newest_complete(dir)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if keep.as_ref().is_some_and(|k| entry.file_name().to_str() == Some(k.name.as_str())) {
            continue;
        }
        let path = entry.path();
        // `file_type` does not follow links: a link is removed as a file.
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(keep)
}

/// The spec's cap on a checkpoint copied through Canopy's store, in bytes.
pub fn cap_bytes(spec: &Checkpoint) -> u64 {
    let cap = spec.max_gb.unwrap_or(Checkpoint::DEFAULT_MAX_GB);
    (cap * 1e9) as u64
}

/// Whether a checkpoint of `bytes` is over the spec's cap.
pub fn over_cap(spec: &Checkpoint, bytes: u64) -> bool {
    bytes > cap_bytes(spec)
}

/// When `path`, a real directory (not a link), was marked complete: its
/// `COMPLETE` (a regular file, not a link) modification time, ms since
/// the Unix epoch; `None` when it is not a complete checkpoint.
pub fn completed_at(path: &Path) -> Option<i64> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.file_type().is_dir() {
        return None;
    }
    let marker = std::fs::symlink_metadata(path.join(Checkpoint::COMPLETE_MARKER)).ok()?;
    if !marker.file_type().is_file() {
        return None;
    }
    let t = marker.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(t.as_millis()).ok()
}

/// Bytes of the regular files under `root`, links not followed.
fn regular_bytes(root: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return total;
            }
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                total += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkpoint(dir: &Path, name: &str, complete: bool) {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("weights.bin"), vec![0u8; 100]).unwrap();
        if complete {
            std::fs::write(d.join("COMPLETE"), b"").unwrap();
            // Distinct completion times, oldest first.
            std::thread::sleep(std::time::Duration::from_millis(15));
        }
    }

    #[test]
    fn only_the_newest_complete_checkpoint_is_handed_on() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("w-1");
        std::fs::create_dir_all(&dir).unwrap();
        checkpoint(&dir, "step-100", true);
        checkpoint(&dir, "step-200", true);
        // Cut off mid-write: no COMPLETE.
        checkpoint(&dir, "step-300", false);
        std::fs::write(dir.join("stray.tmp"), b"x").unwrap();
        let kept = prepare(&dir).unwrap().unwrap();
        assert_eq!(kept.name, "step-200");
        assert_eq!(kept.bytes, 100);
        let mut left: Vec<String> =
            std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, ["step-200"]);
    }

    #[test]
    fn links_are_neither_checkpoints_nor_followed_when_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        checkpoint(&outside, "precious", true);
        let dir = tmp.path().join("w-2");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(outside.join("precious"), dir.join("step-9")).unwrap();
        checkpoint(&dir, "step-1", false);
        std::os::unix::fs::symlink(outside.join("precious/COMPLETE"), dir.join("step-1/COMPLETE")).unwrap();
        assert_eq!(newest_complete(&dir).unwrap(), None);
        assert_eq!(prepare(&dir).unwrap(), None);
        assert!(outside.join("precious/COMPLETE").exists(), "the link's target is untouched");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[test]
    fn a_missing_directory_has_no_checkpoint_and_is_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("checkpoints/w-3");
        assert_eq!(newest_complete(&dir).unwrap(), None);
        assert_eq!(prepare(&dir).unwrap(), None);
        assert!(dir.is_dir());
    }
}
