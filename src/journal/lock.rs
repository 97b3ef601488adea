//! Exclusive ownership of a store by one engine process.
//!
//! An OS advisory lock on a sibling file, `<store>.lock`, held for the
//! engine's lifetime. It is released on drop, and by the OS when the
//! process dies however it dies (kill -9 included), so a stale lock never
//! needs clearing by hand. The file also says who holds it, for
//! the error a second engine gets. Readers do not take it.
//!
//! Whether a store is owned is asked with [`is_owned`], which never takes
//! ownership and never writes the file: a probe that took the exclusive
//! lock, however briefly, would make an engine starting at that moment
//! fail, and would overwrite the owner's details with its own.
//!
//! The lock is per open file description (`flock` on Unix, `LockFileEx` on
//! Windows): two opens conflict even within one process. std opens files
//! close-on-exec, so processes the engine launches do not inherit it.

use super::JournalError;
use crate::engine::model::Millis;
use std::ffi::OsString;
use std::fs::{File, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Held by the engine that owns a store; dropping it gives the store up.
#[derive(Debug)]
pub struct OwnerLock {
    file: File,
    path: PathBuf,
}

impl Drop for OwnerLock {
    /// Unlocks explicitly rather than only closing: a process being spawned
    /// at this moment holds a copy of the descriptor until it execs, and
    /// closing ours alone would leave the store locked until then.
    fn drop(&mut self) {
        if let Err(e) = self.file.unlock() {
            tracing::warn!(path = %self.path.display(), error = %e, "could not unlock the store; it unlocks when this process exits");
        }
    }
}

impl OwnerLock {
    /// The lock file, `<store>.lock`.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The lock file that guards the store at `store`.
pub fn lock_path(store: &Path) -> PathBuf {
    let mut name = OsString::from(store.as_os_str());
    name.push(".lock");
    PathBuf::from(name)
}

/// How long [`acquire_owner`] keeps trying while the lock is held: an
/// [`is_owned`] probe holds it for microseconds, an engine for its lifetime.
const PROBE_GRACE: Duration = Duration::from_millis(200);
const PROBE_RETRY: Duration = Duration::from_millis(5);

/// Takes ownership of the store at `store` for this process, or says who
/// has it. `now` is recorded in the lock file as the start of ownership.
/// Blocks for up to 200 ms while another process probes the lock.
pub fn acquire_owner(store: &Path, now: Millis) -> Result<OwnerLock, JournalError> {
    let path = lock_path(store);
    let io = |source| JournalError::Lock { path: path.clone(), source };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::private::dir_all(dir).map_err(io)?;
    }
    // Not truncated on open: until we hold the lock, the contents are the
    // current owner's. Private (0600) like everything in the store.
    let mut file = crate::private::open_or_create(&path).map_err(io)?;
    let deadline = Instant::now() + PROBE_GRACE;
    let locked = loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if Instant::now() < deadline => std::thread::sleep(PROBE_RETRY),
            other => break other,
        }
    };
    match locked {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut owner = String::new();
            // Best effort: the owner may be between taking the lock and
            // writing its details.
            let _ = file.read_to_string(&mut owner);
            return Err(JournalError::Owned { store: store.to_path_buf(), owner: describe(&owner) });
        }
        Err(TryLockError::Error(source)) => return Err(io(source)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "pid={}\nsince={}\n", std::process::id(), now.0).map_err(io)?;
    file.flush().map_err(io)?;
    Ok(OwnerLock { file, path })
}

/// Whether an engine owns the store at `store` right now. Takes a shared
/// lock for an instant and writes nothing, so it never takes ownership nor
/// disturbs the owner's details; an engine starting meanwhile waits the
/// instant out (see [`acquire_owner`]).
pub fn is_owned(store: &Path) -> Result<bool, JournalError> {
    let path = lock_path(store);
    let file = match File::open(&path) {
        Ok(f) => f,
        // No engine has ever started on this store.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => return Err(JournalError::Lock { path, source }),
    };
    match file.try_lock_shared() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(false)
        }
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(source)) => Err(JournalError::Lock { path, source }),
    }
}

/// `pid 4242, since 2026-11-29 18:20:11 UTC` from the lock file's lines.
fn describe(contents: &str) -> String {
    let field = |key: &str| {
        contents
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let pid = field("pid").unwrap_or("unknown");
    let since = field("since")
        .and_then(|ms| ms.parse::<i64>().ok())
        .map(crate::units::utc_seconds)
        .unwrap_or_else(|| "an unknown time".into());
    format!("pid {pid}, since {since}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_ownership_neither_takes_it_nor_makes_a_starting_engine_fail() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("canopy.db");
        assert!(!is_owned(&store).unwrap(), "a store no engine ever started on");
        // Probes hammering the lock while engines start and stop: every
        // start succeeds, and the owner's details stay its own.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let prober = {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = is_owned(&store).unwrap();
                }
            })
        };
        for i in 0..200 {
            let lock = acquire_owner(&store, Millis(i)).unwrap();
            assert!(is_owned(&store).unwrap());
            let contents = std::fs::read_to_string(lock.path()).unwrap();
            assert_eq!(contents, format!("pid={}\nsince={i}\n", std::process::id()));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        prober.join().unwrap();
        assert!(!is_owned(&store).unwrap());
    }

    #[test]
    fn describes_the_owner_from_the_lock_file() {
        assert_eq!(describe("pid=4242\nsince=1795976411000\n"), "pid 4242, since 2026-11-29 18:20:11 UTC");
        assert_eq!(describe(""), "pid unknown, since an unknown time");
    }
}
