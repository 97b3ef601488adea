//! Checkpoints copied between Canopy's store and an owner's host, which
//! share no file system: tar streams over the host's SSH connection, both
//! ways, under the spec's cap (`checkpoint.max_gb`).
//!
//! Both ends treat a checkpoint as [`crate::engine::checkpoint`] does: a
//! directory whose `COMPLETE` (a regular file) is written last. A copy
//! never carries `COMPLETE`; the receiving end writes it after everything
//! else has arrived and been renamed into place, so a copy cut off midway
//! is never complete there and never handed on.
//!
//! What a workload wrote is hostile input. Sending ([`write_tar`]) never
//! follows a link: links, FIFOs, sockets and devices are left out, and
//! the number of entries and bytes are bounded. Receiving ([`unpack`])
//! takes directories and regular files only, at relative paths without
//! `..`, within the same bounds, into a fresh private directory, files
//! created new (`O_EXCL`, never through a link).
//!
//! ```text
//! on the host:  ~/.canopy-host/<store>/checkpoints/<token>/
//!                   ckpt/          the attempt's $CANOPY_CHECKPOINT_DIR
//!                   handed.json    the checkpoint Canopy handed it (name, time here)
//!                   incoming/      a checkpoint arriving from Canopy
//! in the store: <checkpoints>/w-17/<name>/COMPLETE   holds where it came from (Marker)
//!               <checkpoints>/.incoming-w-17-…       a checkpoint arriving from a host
//! ```
//!
//! No process is spawned or signalled here; callers own the transport.

use crate::engine::checkpoint::{self, Found, MAX_ENTRIES};
use crate::providers::collect::remove_existing;
use crate::providers::local::layout;
use crate::spec::Checkpoint;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// The most a `COMPLETE` marker of Canopy's is read.
const MARKER_MAX: u64 = 4096;

/// How much a tar stream may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Bytes of regular files.
    pub max_bytes: u64,
    /// Entries (directories and files).
    pub max_entries: usize,
}

impl Bounds {
    /// A checkpoint's: `max_bytes`, and as many entries as Canopy ever
    /// visits in one checkpoint.
    pub fn checkpoint(max_bytes: u64) -> Self {
        Self { max_bytes, max_entries: MAX_ENTRIES }
    }
}

/// Whether `name` can be a checkpoint's directory name: one plain path
/// component.
pub fn valid_name(name: &str) -> bool {
    let mut c = Path::new(name).components();
    matches!((c.next(), c.next()), (Some(Component::Normal(n)), None) if n == name)
}

/// Unpacks a tar stream into the existing directory `into`: directories
/// (0700) and regular files (0600) only, at relative paths without `..`,
/// files created new, at most `b`. The bytes of files written; an error
/// naming the entry that was refused. What was unpacked before an error
/// stays: callers unpack into a directory of their own and remove it.
pub fn unpack(r: impl Read, into: &Path, b: Bounds) -> Result<u64, String> {
    let mut archive = tar::Archive::new(r);
    let mut total = 0u64;
    let mut count = 0usize;
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        count += 1;
        if count > b.max_entries {
            return Err(format!("more than the {} entries allowed", b.max_entries));
        }
        let path = entry.path().map_err(|e| e.to_string())?.into_owned();
        let safe = path.components().any(|c| matches!(c, Component::Normal(_)))
            && path.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
        if !safe {
            return Err(format!("entry {} leaves the directory it is unpacked into", path.display()));
        }
        let at = into.join(&path);
        match entry.header().entry_type() {
            tar::EntryType::Directory => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(&at)
                    .map_err(|e| format!("cannot create {}: {e}", at.display()))?;
            }
            tar::EntryType::Regular => {
                let size = entry.size();
                total = total.saturating_add(size);
                if total > b.max_bytes {
                    return Err(format!("more than the {} bytes allowed", b.max_bytes));
                }
                if let Some(p) = at.parent() {
                    std::fs::DirBuilder::new()
                        .recursive(true)
                        .mode(0o700)
                        .create(p)
                        .map_err(|e| format!("cannot create {}: {e}", p.display()))?;
                }
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(&at)
                    .map_err(|e| format!("cannot create {}: {e}", at.display()))?;
                let n = io::copy(&mut (&mut entry).take(size), &mut f)
                    .map_err(|e| format!("cannot write {}: {e}", at.display()))?;
                if n != size {
                    return Err(format!("entry {} was cut off ({n} of {size} bytes)", path.display()));
                }
            }
            other => {
                return Err(format!("entry {} is a {other:?}, not a file or directory", path.display()));
            }
        }
    }
    Ok(total)
}

/// Writes the content of checkpoint directory `root` as a tar stream:
/// directories and regular files under their paths inside it, its own
/// `COMPLETE` left out (the receiver writes it last). Links are never
/// followed and, like FIFOs, sockets and devices, left out. Fails when
/// `root` is not a real directory or holds more than `b`. The bytes of
/// files written.
pub fn write_tar(root: &Path, out: impl Write, b: Bounds) -> Result<u64, String> {
    let meta = std::fs::symlink_metadata(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    if !meta.file_type().is_dir() {
        return Err(format!("{} is not a directory", root.display()));
    }
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    let mut total = 0u64;
    let mut count = 0usize;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?
            .collect::<io::Result<Vec<_>>>()
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = rel.join(e.file_name());
            if name.as_os_str() == Checkpoint::COMPLETE_MARKER {
                continue;
            }
            // Does not follow links.
            let ft = e.file_type().map_err(|err| format!("cannot read {}: {err}", e.path().display()))?;
            if !ft.is_dir() && !ft.is_file() {
                continue;
            }
            count += 1;
            if count > b.max_entries {
                return Err(format!(
                    "{} holds more than the {} entries a checkpoint may",
                    root.display(),
                    b.max_entries
                ));
            }
            let mut h = tar::Header::new_gnu();
            if ft.is_dir() {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o700);
                h.set_size(0);
                tar.append_data(&mut h, &name, io::empty())
                    .map_err(|err| format!("cannot send {}: {err}", name.display()))?;
                stack.push(name);
                continue;
            }
            // Replaced by something else since it was listed: never read
            // through a link or block on a FIFO.
            let f = match layout::open_regular(&e.path()) {
                Ok(f) => f,
                Err(err) if err.raw_os_error() == Some(libc::ELOOP) => continue,
                Err(err) if err.kind() == io::ErrorKind::InvalidData => continue,
                Err(err) => return Err(format!("cannot read {}: {err}", e.path().display())),
            };
            let size = f.metadata().map_err(|err| format!("cannot read {}: {err}", name.display()))?.len();
            total = total.saturating_add(size);
            if total > b.max_bytes {
                return Err(format!(
                    "{} holds more than the {} bytes a checkpoint may (checkpoint.max_gb)",
                    root.display(),
                    b.max_bytes
                ));
            }
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o600);
            h.set_size(size);
            tar.append_data(&mut h, &name, Exact { inner: f.take(size), left: size })
                .map_err(|err| format!("cannot send {}: {err}", name.display()))?;
        }
    }
    tar.into_inner().and_then(|mut w| w.flush()).map_err(|e| format!("cannot send the checkpoint: {e}"))?;
    Ok(total)
}

/// Reads exactly `left` bytes, failing when the file ends sooner (it
/// shrank while it was sent): a tar entry must be as long as its header
/// says.
struct Exact<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let n = self.inner.read(buf)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file shrank while it was sent"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// What Canopy writes in the `COMPLETE` of a checkpoint it copied from a
/// host: which attempt wrote it and when it was complete there, so the
/// next look knows Canopy already holds it (even after a restart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    pub token: String,
    pub host: String,
    /// Its `COMPLETE`'s time on the host's clock.
    pub host_at_ms: i64,
}

/// The marker of checkpoint `name` in `dir`, when Canopy copied it there.
fn marker_of(dir: &Path, name: &str) -> Option<Marker> {
    let f = layout::open_regular(&dir.join(name).join(Checkpoint::COMPLETE_MARKER)).ok()?;
    let mut bytes = Vec::new();
    f.take(MARKER_MAX).read_to_end(&mut bytes).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Whether the newest complete checkpoint in `dir` is the one `token`
/// left as `name`, complete at `host_at_ms` on its host.
pub fn holds(dir: &Path, token: &str, name: &str, host_at_ms: i64) -> bool {
    let Ok(Some(newest)) = checkpoint::newest_complete(dir) else { return false };
    newest.name == name
        && marker_of(dir, name).is_some_and(|m| m.token == token && m.host_at_ms == host_at_ms)
}

/// Receives checkpoint `name` as a tar stream into `dir`, a workload's
/// checkpoint directory in Canopy's store: unpacked beside `dir` (never
/// inside it, where it could pass for a checkpoint), renamed into place
/// (replacing one of the same name), and only then marked complete with
/// `marker`; the older checkpoints in `dir` go. Returns it as `dir` now
/// holds it.
pub fn receive(
    dir: &Path,
    name: &str,
    tar: impl Read,
    max_bytes: u64,
    marker: &Marker,
) -> Result<Found, String> {
    if !valid_name(name) {
        return Err(format!("{name:?} cannot name a checkpoint"));
    }
    let parent = dir.parent().ok_or_else(|| format!("{} has no parent directory", dir.display()))?;
    let base = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for d in [parent, dir] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let staging = parent.join(layout::unique_name(&format!(".incoming-{base}")));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let result = (|| {
        unpack(tar, &staging, Bounds::checkpoint(max_bytes))?;
        install(dir, &staging, name, &serde_json::to_vec(marker).map_err(|e| e.to_string())?)
    })();
    let _ = remove_existing(&staging);
    result
}

/// Moves the checkpoint content at `staging` into `dir` as `name`, then
/// writes its `COMPLETE` (holding `marker`) last and removes every other
/// entry of `dir`.
pub fn install(dir: &Path, staging: &Path, name: &str, marker: &[u8]) -> Result<Found, String> {
    let complete = staging.join(Checkpoint::COMPLETE_MARKER);
    remove_existing(&complete).map_err(|e| format!("cannot remove {}: {e}", complete.display()))?;
    let target = dir.join(name);
    let parent = dir.parent().unwrap_or(dir);
    let replaced = parent.join(layout::unique_name(".replaced"));
    let had = std::fs::symlink_metadata(&target).is_ok();
    if had {
        std::fs::rename(&target, &replaced)
            .map_err(|e| format!("cannot move {} aside: {e}", target.display()))?;
    }
    std::fs::rename(staging, &target)
        .map_err(|e| format!("cannot move the checkpoint to {}: {e}", target.display()))?;
    if had {
        let _ = remove_existing(&replaced);
    }
    let at = target.join(Checkpoint::COMPLETE_MARKER);
    let mut f = layout::create_private(&at).map_err(|e| format!("cannot create {}: {e}", at.display()))?;
    f.write_all(marker)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", at.display()))?;
    drop(f);
    let kept = checkpoint::prepare(dir).map_err(|e| format!("cannot tidy {}: {e}", dir.display()))?;
    match kept {
        Some(f) if f.name == name => Ok(f),
        _ => Err(format!("{} was written but is not the newest complete checkpoint there", target.display())),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A tar archive in memory, as `build` writes it.
    pub(in crate::providers::ssh) fn tar_with(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        build(&mut b);
        b.into_inner().unwrap()
    }

    /// A private entry's header of `kind` and `size`.
    pub(in crate::providers::ssh) fn header(kind: tar::EntryType, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o600);
        h
    }

    /// A tar entry at a raw path, bypassing the builder's own checks (a
    /// hostile sender writes whatever it likes).
    fn raw_entry(b: &mut tar::Builder<Vec<u8>>, path: &str, kind: tar::EntryType, data: &[u8]) {
        let mut h = header(kind, data.len() as u64);
        let field = &mut h.as_old_mut().name;
        field[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
    }

    fn limits() -> Bounds {
        Bounds { max_bytes: 1 << 20, max_entries: 100 }
    }

    #[test]
    fn unpacking_takes_files_and_directories_inside_the_directory_only() {
        let t = tempfile::tempdir().unwrap();
        let ok = tar_with(|b| {
            b.append_data(&mut header(tar::EntryType::Directory, 0), "dir", io::empty()).unwrap();
            b.append_data(&mut header(tar::EntryType::Regular, 2), "dir/a", &b"hi"[..]).unwrap();
        });
        assert_eq!(unpack(&ok[..], t.path(), limits()).unwrap(), 2);
        assert_eq!(std::fs::read(t.path().join("dir/a")).unwrap(), b"hi");

        let outside = tempfile::tempdir().unwrap();
        for (path, says) in [
            ("../escaped", "leaves the directory"),
            ("dir/../../escaped", "leaves the directory"),
            ("/tmp/escaped-absolute", "leaves the directory"),
        ] {
            let into = tempfile::tempdir().unwrap();
            let bad = tar_with(|b| raw_entry(b, path, tar::EntryType::Regular, b"x"));
            let e = unpack(&bad[..], &into.path().join("sub"), limits()).unwrap_err();
            assert!(e.contains(says), "{path}: {e}");
            assert!(!into.path().join("escaped").exists() && !Path::new("/tmp/escaped-absolute").exists());
        }
        drop(outside);
    }

    #[test]
    fn unpacking_refuses_links_devices_and_what_is_over_its_bounds() {
        let t = tempfile::tempdir().unwrap();
        for kind in
            [tar::EntryType::Symlink, tar::EntryType::Link, tar::EntryType::Fifo, tar::EntryType::Char]
        {
            let mut h = header(kind, 0);
            if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
                h.set_link_name("/etc/passwd").unwrap();
            }
            let into = t.path().join(format!("{kind:?}"));
            std::fs::create_dir(&into).unwrap();
            let bad = tar_with(|b| b.append_data(&mut h, "x", io::empty()).unwrap());
            let e = unpack(&bad[..], &into, limits()).unwrap_err();
            assert!(e.contains("not a file or directory"), "{kind:?}: {e}");
            assert!(std::fs::symlink_metadata(into.join("x")).is_err(), "{kind:?} left something");
        }
        let big = tar_with(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 4), "big", &b"1234"[..]).unwrap();
        });
        let e = unpack(&big[..], t.path(), Bounds { max_bytes: 3, max_entries: 10 }).unwrap_err();
        assert!(e.contains("more than the 3 bytes"), "{e}");
        let many = tar_with(|b| {
            for i in 0..3 {
                b.append_data(&mut header(tar::EntryType::Directory, 0), format!("d{i}"), io::empty())
                    .unwrap();
            }
        });
        let e = unpack(&many[..], t.path(), Bounds { max_bytes: 3, max_entries: 2 }).unwrap_err();
        assert!(e.contains("more than the 2 entries"), "{e}");
        // A file planted where an entry lands is never written through.
        let into = t.path().join("planted");
        std::fs::create_dir(&into).unwrap();
        std::os::unix::fs::symlink(t.path().join("victim"), into.join("f")).unwrap();
        let f = tar_with(|b| {
            b.append_data(&mut header(tar::EntryType::Regular, 1), "f", &b"x"[..]).unwrap();
        });
        assert!(unpack(&f[..], &into, limits()).is_err());
        assert!(!t.path().join("victim").exists());
    }

    #[test]
    fn sending_leaves_out_links_and_complete_and_the_copy_is_complete_only_at_the_end() {
        let t = tempfile::tempdir().unwrap();
        let secret = t.path().join("secret");
        std::fs::write(&secret, "owner's secret").unwrap();
        let src = t.path().join("ckpt/step-3");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("state"), "3").unwrap();
        std::fs::write(src.join("sub/w.bin"), [7u8; 10]).unwrap();
        std::fs::write(src.join("COMPLETE"), "").unwrap();
        std::os::unix::fs::symlink(&secret, src.join("leak")).unwrap();
        std::os::unix::fs::symlink(t.path(), src.join("sub/up")).unwrap();
        let mut tar = Vec::new();
        assert_eq!(write_tar(&src, &mut tar, limits()).unwrap(), 11);
        let store = t.path().join("store/w-1");
        let marker = Marker { token: "tok".into(), host: "h".into(), host_at_ms: 5 };
        let found = receive(&store, "step-3", &tar[..], 1 << 20, &marker).unwrap();
        // Its files, and the marker in its COMPLETE.
        let marked = serde_json::to_vec(&marker).unwrap().len() as u64;
        assert_eq!((found.name.as_str(), found.bytes), ("step-3", 11 + marked));
        assert_eq!(std::fs::read_to_string(store.join("step-3/state")).unwrap(), "3");
        for gone in ["step-3/leak", "step-3/sub/up"] {
            assert!(std::fs::symlink_metadata(store.join(gone)).is_err(), "{gone} was copied");
        }
        assert!(holds(&store, "tok", "step-3", 5));
        assert!(!holds(&store, "tok", "step-3", 6), "another time on the host is another checkpoint");
        assert!(!holds(&store, "other", "step-3", 5));
        // Nothing staged is left beside the store's directory.
        let left: Vec<_> =
            std::fs::read_dir(t.path().join("store")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["w-1"]);
        // Over the cap: refused while sending, and nothing arrives.
        let e = write_tar(&src, io::sink(), Bounds { max_bytes: 10, max_entries: 100 }).unwrap_err();
        assert!(e.contains("more than the 10 bytes"), "{e}");
        // A link is not a checkpoint to send.
        std::os::unix::fs::symlink(&src, t.path().join("linked")).unwrap();
        assert!(write_tar(&t.path().join("linked"), io::sink(), limits()).is_err());
    }

    #[test]
    fn a_copy_cut_off_is_never_complete_and_the_older_checkpoint_stays() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store/w-2");
        let src = t.path().join("step-1");
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("state"), [1u8; 600]).unwrap();
        let mut tar = Vec::new();
        write_tar(&src, &mut tar, limits()).unwrap();
        let marker = Marker { token: "tok".into(), host: "h".into(), host_at_ms: 1 };
        receive(&store, "step-1", &tar[..], 1 << 20, &marker).unwrap();
        // The next one is cut off mid-file.
        std::fs::write(src.join("state"), [2u8; 600]).unwrap();
        let mut tar = Vec::new();
        write_tar(&src, &mut tar, limits()).unwrap();
        tar.truncate(700);
        assert!(receive(&store, "step-2", &tar[..], 1 << 20, &marker).is_err());
        let newest = checkpoint::newest_complete(&store).unwrap().unwrap();
        assert_eq!(newest.name, "step-1");
        assert_eq!(std::fs::read(store.join("step-1/state")).unwrap(), [1u8; 600]);
        assert!(std::fs::symlink_metadata(store.join("step-2")).is_err());
        assert!(!valid_name("../x") && !valid_name("a/b") && !valid_name("..") && valid_name("step-3"));
    }
}
