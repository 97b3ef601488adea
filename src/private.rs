//! Creating files and directories only Canopy's user may read: every
//! directory Canopy makes in its store is 0700 and every file 0600,
//! whatever the process's umask and whatever the mode of the store's own
//! directory (an admin's or a unit's state directory is often 0755).
//!
//! Every place that creates something in the store goes through here:
//! the journal and its lock, the local provider's attempt directories and
//! records, the supervisor's logs, shipped logs and their time indexes,
//! collected outputs' manifests, Canopy's own log. A workload's own files
//! keep the modes it gives them; the directories Canopy makes for it do
//! not. Files are created without following a link someone left at the
//! name; atomic replacements go through a fresh temporary file.
//!
//! This module does file-system calls only: no policy, no logging.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

/// The mode of every directory Canopy creates in its store.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file Canopy creates in its store.
pub const FILE_MODE: u32 = 0o600;

/// Creates `path` and any missing parents, each 0700. Directories that
/// already exist keep their mode.
pub fn dir_all(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(path)
}

/// Creates the directory `path` (0700); fails when anything has the name.
pub fn dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(DIR_MODE).create(path)
}

/// [`dir_all`] off the async loop.
pub async fn dir_all_async(path: &Path) -> io::Result<()> {
    tokio::fs::DirBuilder::new().recursive(true).mode(DIR_MODE).create(path).await
}

/// Creates a new file only its owner may read (0600); fails when
/// something, a link included, already has the name.
pub fn new_file(path: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).mode(FILE_MODE).custom_flags(libc::O_CLOEXEC).open(path)
}

/// Opens a file for appending, creating it 0600; never through a link.
pub fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// [`append`] off the async loop.
pub async fn append_async(path: &Path) -> io::Result<tokio::fs::File> {
    tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .await
}

/// Opens a file for reading and writing, creating it 0600 when missing and
/// never truncating it; never through a link.
pub fn open_or_create(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// `<prefix>-<pid>-<n>`: a name no other call in this process, or in
/// another live one, returns.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Writes `bytes` to `path` so that readers see the old file or the whole
/// new one: a fresh 0600 temporary file beside it (`.<name>-<pid>-<n>.tmp`,
/// created exclusively, so writers in several processes never collide and
/// nothing planted there is written through), fsync, rename, fsync the
/// directory. The temporary file is removed when any step fails. The new
/// file is 0600 whatever the old one's mode was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, true)
}

/// [`write_atomic`] without the fsyncs, for records whose loss in a power
/// cut is harmless (the reader then takes the slow path) but which must
/// never be read torn, nor written through a link planted beside them.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes, false)
}

fn replace(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("{} names no file", path.display()))
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!("{}.tmp", unique_name("")));
    let tmp = path.with_file_name(tmp_name);
    let written = (|| {
        let mut f = new_file(&tmp)?;
        f.write_all(bytes)?;
        if durable {
            f.sync_all()?;
        }
        fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    if durable && let Some(dir) = path.parent() {
        // Makes the rename itself durable; a failure here leaves a correct
        // file that may not survive a power loss, so it is not an error.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Takes group and other permissions off `path` when it is a directory or
/// a regular file (never through a link): for what an older Canopy made
/// with the umask's mode. Missing paths are fine.
pub fn tighten(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mode = meta.permissions().mode();
    if (meta.is_dir() || meta.is_file()) && mode & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o7700))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn what_is_made_here_is_private_whatever_the_umask_gives() {
        // The usual umask (022) would make these 0755 and 0644.
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        dir_all(&root.join("a/b")).unwrap();
        dir(&root.join("c")).unwrap();
        new_file(&root.join("c/f")).unwrap();
        append(&root.join("c/g")).unwrap();
        open_or_create(&root.join("c/h")).unwrap();
        write_atomic(&root.join("c/i"), b"x").unwrap();
        for d in ["a", "a/b", "c"] {
            assert_eq!(mode(&root.join(d)), 0o700, "{d}");
        }
        for f in ["c/f", "c/g", "c/h", "c/i"] {
            assert_eq!(mode(&root.join(f)), 0o600, "{f}");
        }
    }

    #[test]
    fn an_old_open_file_is_replaced_private_and_tightened() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("manifest.json");
        fs::write(&f, "old").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        write_atomic(&f, b"new").unwrap();
        assert_eq!(mode(&f), 0o600);
        let d = t.path().join("logs");
        fs::create_dir(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o755)).unwrap();
        tighten(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        tighten(&t.path().join("missing")).unwrap();
    }
}
