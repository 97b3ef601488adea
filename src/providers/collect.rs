//! Collecting a workload's outputs into Canopy's artifact store without
//! letting the workload turn the copy against the host.
//!
//! The outputs directory and everything in it belong to the workload, which
//! may have left anything there. This module guarantees:
//!
//! - **Regular files and directories only.** FIFOs, sockets and devices are
//!   never opened for reading, and **no symbolic link is ever followed**,
//!   whether it is an output itself, a path component on the way to it, an
//!   entry of a directory output or the outputs root. The walk starts from a
//!   descriptor of the outputs root and opens each component relative to
//!   its parent with `O_NOFOLLOW` (`O_DIRECTORY` for directories); files are
//!   opened with `O_NONBLOCK` (a FIFO swapped in cannot block the open) and
//!   refused unless `fstat` says they are regular. What is left behind is
//!   returned as [`Skipped`], with the reason.
//! - **Bounded size.** Each output may bring at most
//!   [`OutputLimits::max_output_bytes`] (8 GiB by default) and the attempt
//!   all together [`OutputLimits::max_attempt_bytes`] (32 GiB). A file whose
//!   size exceeds what remains is skipped, never started; a copy reads at
//!   most the size the file had when opened, so a file that grows while it
//!   is read cannot take the copy past the bound.
//! - **Bounded time.** Collection stops at
//!   [`OutputLimits::collect_timeout`] (10 minutes by default); what was not
//!   copied by then is skipped with that reason. Nothing here blocks on
//!   anything the workload controls, so the caller always gets an answer.
//! - **Sparse files stay sparse.** Holes are found with `SEEK_DATA` /
//!   `SEEK_HOLE` and left as holes in the copy (and hashed as the zeros they
//!   read as); the size limits apply to the file's apparent size.
//! - **Private copies.** Files written into the store are mode 0600 and
//!   directories 0700, created fresh (`O_EXCL`, never through a link).
//!
//! A required output that is missing, is not a regular file or directory,
//! or lost content to a limit (a file over a bound, the deadline) fails the
//! collection with a message naming the output, the reason and what to do.
//! Entries of a directory output that are links, FIFOs and the like are
//! skipped and reported without failing it: the directory's files are all
//! there.
//!
//! Checksums: a file's is the SHA-256 of its bytes; a directory's is the
//! SHA-256 of its files' sorted `relative/path <sha256>\n` lines.
//!
//! It reads only under the outputs root it is given and writes only under
//! `dest`. Used by every provider whose outputs are files: the local
//! provider's supervisor (next to the files), and the engine for Slurm and
//! Ray job directories on a shared filesystem.

use crate::providers::local::layout::{relative_output, valid_token};
use crate::providers::{Artifact, Collection, Skipped};
use crate::spec::Spec;
use crate::units::human_bytes;
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, Instant};

pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 8 << 30;
pub const DEFAULT_MAX_ATTEMPT_BYTES: u64 = 32 << 30;
pub const DEFAULT_COLLECT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// Directory outputs nested deeper than this are cut off there (each level
/// holds a descriptor open while it is walked).
const MAX_DEPTH: usize = 64;
/// Skipped entries recorded per output; the rest are counted in one line.
const MAX_SKIPPED_PER_OUTPUT: usize = 100;
const BUF: usize = 256 * 1024;

/// How much, and for how long, one attempt's outputs may be collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputLimits {
    /// Bytes one output (a file, or a directory's files together) may bring.
    pub max_output_bytes: u64,
    /// Bytes all of an attempt's outputs together may bring.
    pub max_attempt_bytes: u64,
    /// When collection stops, counted from its start.
    #[serde(rename = "collect_timeout_ms", with = "millis")]
    pub collect_timeout: Duration,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self {
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_attempt_bytes: DEFAULT_MAX_ATTEMPT_BYTES,
            collect_timeout: DEFAULT_COLLECT_TIMEOUT,
        }
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// One output to collect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Its name in the store (`dest/<name>`); a [`valid_token`].
    pub name: String,
    /// Where it lies under the outputs root.
    pub rel: PathBuf,
    /// How the user knows it: the spec's output path.
    pub shown: String,
    pub required: bool,
}

/// What the message for a required output the workload did not write
/// says, so the engine can tell the workload's mistake from a storage
/// failure ([`crate::engine::classify::collection_failure`]).
pub const NOT_WRITTEN: &str = ") was not written: ";
/// Said when the output is at its spec path itself, outside the outputs
/// directory, written since the attempt started.
pub const WRITTEN_OUTSIDE: &str = "outputs must be under $CANOPY_OUTPUT_DIR";

/// A required output missing under `root`: where it was expected, and,
/// when the workload wrote its spec path itself (an absolute path outside
/// `$CANOPY_OUTPUT_DIR`, on this machine since the outputs directory was
/// made), that it did.
fn not_written(root: &Path, w: &Wanted) -> String {
    let expected = root.join(&w.rel);
    let started = fs::metadata(root).and_then(|m| m.modified()).ok();
    let outside = fs::symlink_metadata(&w.shown).and_then(|m| m.modified()).ok();
    let wrote_outside = matches!((started, outside), (Some(s), Some(o)) if o >= s);
    let what = if wrote_outside {
        format!(
            "the workload wrote {} itself; {WRITTEN_OUTSIDE}: write $CANOPY_OUTPUT_DIR{}",
            w.shown, w.shown
        )
    } else {
        format!("the workload must write it under $CANOPY_OUTPUT_DIR{}", w.shown)
    };
    format!(
        "required output {:?} ({}{NOT_WRITTEN}expected at {}; {what}",
        w.name,
        w.shown,
        expected.display()
    )
}

/// The spec's outputs as [`Wanted`], with each spec path `P` under the
/// outputs root at `P` (without its leading `/`).
pub fn wanted(spec: &Spec) -> Result<Vec<Wanted>, String> {
    spec.outputs
        .iter()
        .map(|o| {
            if !valid_token(&o.name) {
                return Err(format!("output name {:?} cannot name a file in the artifact store", o.name));
            }
            let rel = relative_output(&o.path).map_err(|e| format!("output {:?}: {e}", o.name))?;
            Ok(Wanted { name: o.name.clone(), rel, shown: o.path.clone(), required: o.required })
        })
        .collect()
}

/// Copies each of the spec's outputs found under `root` into
/// `dest/<output name>`, replacing what was there. See the module docs for
/// what is collected and what is not.
pub fn collect(root: &Path, spec: &Spec, dest: &Path, limits: &OutputLimits) -> Result<Collection, String> {
    collect_wanted(root, &wanted(spec)?, dest, limits)
}

/// [`collect`] on a blocking thread, for the adapters that collect from
/// a shared filesystem engine-side (Slurm, Ray): an error names `provider`.
pub async fn collect_off_thread(
    provider: &str,
    root: std::path::PathBuf,
    spec: &Spec,
    dest: &Path,
    limits: OutputLimits,
) -> Result<Collection, crate::providers::ProviderError> {
    let (spec, dest) = (spec.clone(), dest.to_path_buf());
    tokio::task::spawn_blocking(move || collect(&root, &spec, &dest, &limits))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
        .map_err(|message| crate::providers::ProviderError { provider: provider.to_string(), message })
}

/// [`collect`] for an explicit list of outputs.
pub fn collect_wanted(
    root: &Path,
    wanted: &[Wanted],
    dest: &Path,
    limits: &OutputLimits,
) -> Result<Collection, String> {
    let started = Instant::now();
    let deadline =
        started.checked_add(limits.collect_timeout).unwrap_or(started + Duration::from_secs(1 << 40));
    let root_fd = match rfs::openat(rfs::CWD, root, dir_flags(), Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) => Err(None),
        Err(Errno::LOOP | Errno::NOTDIR) => Err(Some(Skip::not_collectable(
            "the outputs directory itself is a symbolic link or not a directory",
        ))),
        Err(e) => Err(Some(Skip::unreadable(format!("the outputs directory cannot be opened: {e}")))),
    };

    // First find every output, so a missing required one fails the
    // collection before anything is copied.
    let mut found = Vec::with_capacity(wanted.len());
    let mut out = Collection::default();
    for w in wanted {
        let f = match &root_fd {
            Ok(fd) => locate(fd.as_fd(), &w.rel),
            Err(None) => Found::Missing,
            Err(Some(skip)) => Found::Skip(skip.clone()),
        };
        match (&f, w.required) {
            (Found::Missing, true) => return Err(not_written(root, w)),
            (Found::Skip(s), true) => return Err(s.required_error(w, None)),
            (Found::Missing, false) => tracing::debug!(output = %w.name, "optional output not written"),
            (Found::Skip(s), false) => out.skipped.push(s.record(w, None)),
            _ => {}
        }
        found.push(f);
    }

    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dest)
        .map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let dest_fd = rfs::openat(rfs::CWD, dest, dir_flags(), Mode::empty())
        .map_err(|e| format!("cannot open {}: {e}", dest.display()))?;
    let mut budget = limits.max_attempt_bytes;
    let mut failure: Option<String> = None;
    for (w, f) in wanted.iter().zip(found) {
        let target = dest.join(&w.name);
        let cap = limits.max_output_bytes.min(budget);
        let bound = Bound { cap, limits: *limits, attempt_left: budget, deadline };
        let name = OsStr::new(&w.name);
        if matches!(f, Found::Missing | Found::Skip(_)) {
            continue;
        }
        // Whatever an earlier collection left under the name goes.
        remove_existing(&target).map_err(|e| write_error(&target, &e))?;
        let got = match f {
            Found::Missing | Found::Skip(_) => continue,
            _ if Instant::now() >= deadline => Err(Skip::deadline(limits)),
            Found::File(_, size) if size > cap => Err(Skip::too_big(size, &bound)),
            Found::File(file, size) => match copy_into(&file, size, dest_fd.as_fd(), name, deadline) {
                Ok(copied) => Ok(copied),
                Err(CopyError::Write(e)) => return Err(write_error(&target, &e)),
                Err(CopyError::Deadline) => Err(Skip::deadline(limits)),
                Err(CopyError::Read(e)) => Err(Skip::unreadable(format!("it could not be read: {e}"))),
            }
            .inspect_err(|_| {
                let _ = fs::remove_file(&target);
            }),
            Found::Dir(fd) => {
                let made = rfs::mkdirat(dest_fd.as_fd(), name, Mode::RWXU)
                    .and_then(|()| rfs::openat(dest_fd.as_fd(), name, dir_flags(), Mode::empty()))
                    .map_err(|e| write_error(&target, &e.into()))?;
                let mut walk = Walk::new(w, bound);
                walk.dir(fd, made.as_fd(), Path::new(""), 0).map_err(|e| write_error(&target, &e))?;
                walk.finish();
                out.skipped.append(&mut walk.skipped);
                if walk.stopped {
                    // Incomplete: none of it is kept.
                    let _ = remove_existing(&target);
                    Err(Skip::deadline(limits))
                } else {
                    if let (Some((rel, s)), true) = (&walk.lost, w.required) {
                        failure.get_or_insert_with(|| s.required_error(w, Some(rel)));
                    }
                    Ok(walk.checksum())
                }
            }
        };
        match got {
            Ok((bytes, sha256)) => {
                budget -= bytes.min(budget);
                out.artifacts.push(Artifact { name: w.name.clone(), path: target, bytes, sha256 });
            }
            Err(s) => {
                if w.required {
                    failure.get_or_insert_with(|| s.required_error(w, None));
                }
                out.skipped.push(s.record(w, None));
            }
        }
    }
    match failure {
        Some(message) => Err(message),
        None => Ok(out),
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

fn file_flags() -> OFlags {
    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC
}

fn write_error(target: &Path, e: &io::Error) -> String {
    format!("cannot write {} into the artifact store: {e}", target.display())
}

/// Why something was not collected, and what the user can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Skip {
    /// Reads after "was not collected: ".
    reason: String,
    hint: &'static str,
    /// Whether content the workload meant to deliver was lost (a limit, an
    /// unreadable file), as opposed to something that is never collected.
    lost: bool,
}

const NOT_COLLECTABLE_HINT: &str = "write a regular file, or a directory of regular files: Canopy never follows \
     symbolic links and never reads FIFOs, sockets or devices";
const SIZE_HINT: &str =
    "write less, or raise max_output_size / max_attempt_size under [outputs] in canopy.toml";
const DEADLINE_HINT: &str =
    "write fewer or smaller files, or raise collect_timeout under [outputs] in canopy.toml";
const UNREADABLE_HINT: &str = "make it readable by the user Canopy runs as";

impl Skip {
    fn not_collectable(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), hint: NOT_COLLECTABLE_HINT, lost: false }
    }
    fn of_type(t: FileType) -> Self {
        Self::not_collectable(match t {
            FileType::Symlink => "it is a symbolic link, and links are never followed",
            FileType::Fifo => "it is a FIFO (named pipe)",
            FileType::Socket => "it is a socket",
            FileType::CharacterDevice | FileType::BlockDevice => "it is a device",
            _ => "it is not a regular file or directory",
        })
    }
    fn unreadable(reason: impl Into<String>) -> Self {
        Self { reason: reason.into(), hint: UNREADABLE_HINT, lost: true }
    }
    fn too_big(size: u64, b: &Bound) -> Self {
        let (size, l) = (human_bytes(size), &b.limits);
        let reason = if b.cap == l.max_output_bytes {
            format!("it is {size}, over the limit of {} per output", human_bytes(l.max_output_bytes))
        } else if b.cap < b.attempt_left {
            format!(
                "it is {size}, more than the {} left of the limit of {} per output",
                human_bytes(b.cap),
                human_bytes(l.max_output_bytes)
            )
        } else {
            format!(
                "it is {size}, more than the {} left of the limit of {} for all of an attempt's outputs",
                human_bytes(b.cap),
                human_bytes(l.max_attempt_bytes)
            )
        };
        Self { reason, hint: SIZE_HINT, lost: true }
    }
    fn deadline(limits: &OutputLimits) -> Self {
        Self {
            reason: format!(
                "collection stopped at its deadline of {} before it was copied",
                crate::units::HumanDuration(limits.collect_timeout)
            ),
            hint: DEADLINE_HINT,
            lost: true,
        }
    }
    fn record(&self, w: &Wanted, inner: Option<&Path>) -> Skipped {
        let path = match inner {
            Some(rel) => format!("{}/{}", w.shown.trim_end_matches('/'), rel.to_string_lossy()),
            None => w.shown.clone(),
        };
        Skipped { name: w.name.clone(), path, reason: self.reason.clone() }
    }
    fn required_error(&self, w: &Wanted, inner: Option<&Path>) -> String {
        let what = match inner {
            Some(_) => format!("was not collected in full: {}", self.record(w, inner).path),
            None => "was not collected".into(),
        };
        format!(
            "required output {:?} ({}) {what}: {}; {} (the output is $CANOPY_OUTPUT_DIR{})",
            w.name, w.shown, self.reason, self.hint, w.shown
        )
    }
}

/// An output as found under the root.
enum Found {
    File(File, u64),
    Dir(OwnedFd),
    Missing,
    Skip(Skip),
}

/// Walks `rel` from `root` one component at a time, never through a link.
fn locate(root: BorrowedFd<'_>, rel: &Path) -> Found {
    let names: Vec<&OsStr> = rel
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect();
    let Some((last, parents)) = names.split_last() else { return Found::Missing };
    let mut held: Option<OwnedFd> = None;
    for name in parents {
        let at = held.as_ref().map_or(root, |fd| fd.as_fd());
        match rfs::openat(at, *name, dir_flags(), Mode::empty()) {
            Ok(fd) => held = Some(fd),
            Err(Errno::NOENT) => return Found::Missing,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Found::Skip(Skip::not_collectable(format!(
                    "it is under {name:?}, which is a symbolic link or not a directory"
                )));
            }
            Err(e) => {
                return Found::Skip(Skip::unreadable(format!(
                    "{name:?} on the way to it cannot be opened: {e}"
                )));
            }
        }
    }
    let at = held.as_ref().map_or(root, |fd| fd.as_fd());
    match open_entry(at, last) {
        Ok(Entry::File(f, size)) => Found::File(f, size),
        Ok(Entry::Dir(fd)) => Found::Dir(fd),
        Ok(Entry::Missing) => Found::Missing,
        Err(s) => Found::Skip(s),
    }
}

enum Entry {
    File(File, u64),
    Dir(OwnedFd),
    Missing,
}

/// Opens `name` in `dir` if it is a regular file or a directory, without
/// following a link and without blocking.
fn open_entry(dir: BorrowedFd<'_>, name: &OsStr) -> Result<Entry, Skip> {
    let unreadable = |e: Errno| Skip::unreadable(format!("it cannot be read: {}", io::Error::from(e)));
    let st = match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(Entry::Missing),
        Err(e) => return Err(unreadable(e)),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => match rfs::openat(dir, name, dir_flags(), Mode::empty()) {
            Ok(fd) => Ok(Entry::Dir(fd)),
            Err(Errno::NOENT) => Ok(Entry::Missing),
            // Swapped for something else since the stat.
            Err(Errno::LOOP | Errno::NOTDIR) => Err(Skip::of_type(FileType::Symlink)),
            Err(e) => Err(unreadable(e)),
        },
        FileType::RegularFile => {
            let fd = match rfs::openat(dir, name, file_flags(), Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(Entry::Missing),
                Err(Errno::LOOP) => return Err(Skip::of_type(FileType::Symlink)),
                Err(e) => return Err(unreadable(e)),
            };
            let st = rfs::fstat(&fd).map_err(unreadable)?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => {
                    Ok(Entry::File(File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
                }
                other => Err(Skip::of_type(other)),
            }
        }
        other => Err(Skip::of_type(other)),
    }
}

/// The size bound for one output.
#[derive(Debug, Clone, Copy)]
struct Bound {
    /// What this output may still bring.
    cap: u64,
    limits: OutputLimits,
    /// What the attempt had left when this output started.
    attempt_left: u64,
    deadline: Instant,
}

/// A directory output being copied.
struct Walk<'a> {
    w: &'a Wanted,
    bound: Bound,
    /// `(relative path, bytes, sha256)` of each file copied.
    files: Vec<(String, u64, String)>,
    skipped: Vec<Skipped>,
    /// How many skips were not recorded (past [`MAX_SKIPPED_PER_OUTPUT`]).
    unrecorded: usize,
    /// The first entry whose content was lost, and why.
    lost: Option<(PathBuf, Skip)>,
    /// The deadline passed: nothing more was copied.
    stopped: bool,
}

impl<'a> Walk<'a> {
    fn new(w: &'a Wanted, bound: Bound) -> Self {
        Self { w, bound, files: Vec::new(), skipped: Vec::new(), unrecorded: 0, lost: None, stopped: false }
    }

    fn skip(&mut self, rel: &Path, s: Skip) {
        if s.lost && self.lost.is_none() {
            self.lost = Some((rel.to_path_buf(), s.clone()));
        }
        if self.skipped.len() < MAX_SKIPPED_PER_OUTPUT {
            self.skipped.push(s.record(self.w, Some(rel)));
        } else {
            self.unrecorded += 1;
        }
    }

    /// Copies directory `src` into `dst`; `Err` only when writing fails.
    fn dir(&mut self, src: OwnedFd, dst: BorrowedFd<'_>, rel: &Path, depth: usize) -> io::Result<()> {
        let names = match list(&src) {
            Ok(n) => n,
            Err(e) => {
                let shown = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
                self.skip(shown, Skip::unreadable(format!("its entries could not be listed: {e}")));
                return Ok(());
            }
        };
        for name in names {
            if self.stopped || Instant::now() >= self.bound.deadline {
                self.stopped = true;
                return Ok(());
            }
            let r = rel.join(&name);
            match open_entry(src.as_fd(), &name) {
                Ok(Entry::Missing) => {}
                Err(s) => self.skip(&r, s),
                Ok(Entry::Dir(_)) if depth + 1 >= MAX_DEPTH => self
                    .skip(&r, Skip::not_collectable(format!("it is nested deeper than {MAX_DEPTH} levels"))),
                Ok(Entry::Dir(fd)) => {
                    rfs::mkdirat(dst, &name, Mode::RWXU)?;
                    let made = rfs::openat(dst, &name, dir_flags(), Mode::empty())?;
                    self.dir(fd, made.as_fd(), &r, depth + 1)?;
                }
                Ok(Entry::File(_, size)) if size > self.bound.cap => {
                    self.skip(&r, Skip::too_big(size, &self.bound))
                }
                Ok(Entry::File(file, size)) => {
                    match copy_into(&file, size, dst, &name, self.bound.deadline) {
                        Ok((bytes, sha)) => {
                            self.bound.cap -= bytes.min(self.bound.cap);
                            self.files.push((r.to_string_lossy().into_owned(), bytes, sha));
                        }
                        Err(e) => {
                            let _ = rfs::unlinkat(dst, &name, AtFlags::empty());
                            match e {
                                CopyError::Write(e) => return Err(e),
                                CopyError::Deadline => self.stopped = true,
                                CopyError::Read(e) => {
                                    self.skip(&r, Skip::unreadable(format!("it could not be read: {e}")))
                                }
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Notes the skips that were counted but not recorded.
    fn finish(&mut self) {
        if self.unrecorded > 0 {
            let reason = format!("{} more entries were skipped", self.unrecorded);
            self.skipped.push(Skipped { name: self.w.name.clone(), path: self.w.shown.clone(), reason });
        }
    }

    /// Total bytes and the directory checksum of the module docs.
    fn checksum(&mut self) -> (u64, String) {
        self.files.sort();
        let mut h = Sha256::new();
        let mut bytes = 0u64;
        for (rel, n, sha) in &self.files {
            h.update(format!("{rel} {sha}\n").as_bytes());
            bytes += n;
        }
        (bytes, hex::encode(h.finalize()))
    }
}

/// The names in a directory, sorted, without `.` and `..`.
fn list(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in rfs::Dir::read_from(dir)? {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n != b"." && n != b".." {
            names.push(OsStr::from_bytes(n).to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Why a file copy stopped.
enum CopyError {
    Deadline,
    Read(io::Error),
    Write(io::Error),
}

/// Creates `dir/name` (0600, never through a link) and copies at most
/// `size` bytes of `src` into it, holes as holes. Returns the bytes copied
/// and their SHA-256.
fn copy_into(
    src: &File,
    size: u64,
    dir: BorrowedFd<'_>,
    name: &OsStr,
    deadline: Instant,
) -> Result<(u64, String), CopyError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        rfs::openat(dir, name, flags, Mode::RUSR | Mode::WUSR).map_err(|e| CopyError::Write(e.into()))?;
    let dst = File::from(fd);
    let copied = copy_sparse(src, size, &dst, deadline)?;
    dst.sync_all().map_err(CopyError::Write)?;
    Ok(copied)
}

fn copy_sparse(src: &File, size: u64, dst: &File, deadline: Instant) -> Result<(u64, String), CopyError> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; BUF];
    let mut pos = 0u64;
    let end_of_file = size;
    'file: while pos < end_of_file {
        if Instant::now() >= deadline {
            return Err(CopyError::Deadline);
        }
        // Where the next data starts; ENXIO: only a hole is left. A
        // filesystem without hole support reports data everywhere.
        let data = match rfs::seek(src, rfs::SeekFrom::Data(pos)) {
            Ok(d) => d.min(end_of_file),
            Err(Errno::NXIO) => end_of_file,
            Err(_) => pos,
        };
        if data > pos {
            hash_zeros(&mut h, data - pos, deadline)?;
            pos = data;
            continue;
        }
        let hole = match rfs::seek(src, rfs::SeekFrom::Hole(pos)) {
            Ok(e) if e > pos => e.min(end_of_file),
            _ => end_of_file,
        };
        while pos < hole {
            if Instant::now() >= deadline {
                return Err(CopyError::Deadline);
            }
            let want = usize::try_from(hole - pos).unwrap_or(BUF).min(BUF);
            let n = src.read_at(&mut buf[..want], pos).map_err(CopyError::Read)?;
            if n == 0 {
                // The file shrank while being read: copy what there was.
                break 'file;
            }
            h.update(&buf[..n]);
            dst.write_all_at(&buf[..n], pos).map_err(CopyError::Write)?;
            pos += n as u64;
        }
    }
    // Extends over a trailing hole without writing it.
    dst.set_len(pos).map_err(CopyError::Write)?;
    Ok((pos, hex::encode(h.finalize())))
}

fn hash_zeros(h: &mut Sha256, mut n: u64, deadline: Instant) -> Result<(), CopyError> {
    static ZEROS: [u8; BUF] = [0; BUF];
    let mut rounds = 0u32;
    while n > 0 {
        let k = usize::try_from(n).unwrap_or(BUF).min(BUF);
        h.update(&ZEROS[..k]);
        n -= k as u64;
        rounds += 1;
        if rounds.is_multiple_of(64) && Instant::now() >= deadline {
            return Err(CopyError::Deadline);
        }
    }
    Ok(())
}

/// Removes `p` from the artifact store (never following a link).
pub fn remove_existing(p: &Path) -> io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn want(name: &str, required: bool) -> Wanted {
        Wanted { name: name.into(), rel: name.into(), shown: format!("/{name}"), required }
    }

    fn sha(b: &[u8]) -> String {
        hex::encode(Sha256::digest(b))
    }

    #[test]
    fn directory_checksums_cover_names_and_contents() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir_all(src.join("ck/sub")).unwrap();
        fs::write(src.join("ck/a.txt"), "hello").unwrap();
        fs::write(src.join("ck/sub/b.txt"), "world").unwrap();
        let limits = OutputLimits::default();
        let c = collect_wanted(&src, &[want("ck", true)], &t.path().join("dst"), &limits).unwrap();
        let line = |p: &str, c: &str| format!("{p} {}\n", sha(c.as_bytes()));
        let expect = sha(format!("{}{}", line("a.txt", "hello"), line("sub/b.txt", "world")).as_bytes());
        assert_eq!((c.artifacts[0].bytes, c.artifacts[0].sha256.as_str()), (10, expect.as_str()));
        assert_eq!(fs::read_to_string(t.path().join("dst/ck/sub/b.txt")).unwrap(), "world");
        fs::write(src.join("ck/a.txt"), "hellO").unwrap();
        let again = collect_wanted(&src, &[want("ck", true)], &t.path().join("dst"), &limits).unwrap();
        assert_ne!(again.artifacts[0].sha256, expect);
    }

    #[test]
    fn sparse_files_stay_sparse_and_hash_as_their_bytes() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir(&src).unwrap();
        let len = 64u64 << 20;
        let f = File::create(src.join("sparse")).unwrap();
        f.write_all_at(b"head", 0).unwrap();
        f.write_all_at(b"middle", 32 << 20).unwrap();
        f.set_len(len).unwrap();
        drop(f);
        let c =
            collect_wanted(&src, &[want("sparse", true)], &t.path().join("dst"), &OutputLimits::default())
                .unwrap();
        let mut expect = vec![0u8; len as usize];
        expect[..4].copy_from_slice(b"head");
        expect[32 << 20..(32 << 20) + 6].copy_from_slice(b"middle");
        assert_eq!((c.artifacts[0].bytes, c.artifacts[0].sha256.clone()), (len, sha(&expect)));
        let copy = fs::metadata(t.path().join("dst/sparse")).unwrap();
        assert_eq!(copy.len(), len);
        let src_blocks = fs::metadata(src.join("sparse")).unwrap().blocks();
        if src_blocks * 512 < len / 2 {
            // Where the source is sparse, so is the copy.
            assert!(copy.blocks() * 512 < len / 2, "{} blocks", copy.blocks());
        }
        assert_eq!(fs::read(t.path().join("dst/sparse")).unwrap(), expect);
    }

    #[test]
    fn collection_stops_at_its_deadline_with_the_reason() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir(&src).unwrap();
        fs::write(src.join("a"), "a").unwrap();
        let limits = OutputLimits { collect_timeout: Duration::ZERO, ..Default::default() };
        let c = collect_wanted(&src, &[want("a", false)], &t.path().join("dst"), &limits).unwrap();
        assert!(c.artifacts.is_empty());
        assert!(c.skipped[0].reason.contains("deadline of 0s"), "{:?}", c.skipped);
        let err = collect_wanted(&src, &[want("a", true)], &t.path().join("dst"), &limits).unwrap_err();
        assert!(err.contains("required output \"a\"") && err.contains("collect_timeout"), "{err}");
    }

    #[test]
    fn a_linked_outputs_root_is_not_followed() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("elsewhere");
        fs::create_dir(&real).unwrap();
        fs::write(real.join("a"), "host").unwrap();
        std::os::unix::fs::symlink(&real, t.path().join("outputs")).unwrap();
        let limits = OutputLimits::default();
        let c =
            collect_wanted(&t.path().join("outputs"), &[want("a", false)], &t.path().join("dst"), &limits)
                .unwrap();
        assert!(c.artifacts.is_empty());
        assert!(c.skipped[0].reason.contains("outputs directory itself"), "{:?}", c.skipped);
    }
}
