//! The attempt directory `<root>/<token>/`: everything the local provider
//! knows about one attempt lives here, so a fresh provider over the same
//! root re-adopts it.
//!
//! This module owns the file names, the on-disk records (`pid`,
//! `exit.json`, `launch.json`, `collected.json`), atomic writes, and the
//! mapping of a spec's output paths into the directory. It is shared by the
//! provider and the supervisor shim. It never spawns or signals processes,
//! and nothing it writes may hold a secret value.
//!
//! The workload may write anywhere in its attempt directory, so records are
//! written and read defensively: files are created 0600 and fresh
//! (`O_EXCL`, never through a link someone left at the temporary name), and
//! a record is read only when it is a regular file reached without a link,
//! and only up to [`MAX_RECORD_BYTES`].
//!
//! ```text
//! <root>/<token>/
//!   launch.lock      held (flock) by the launcher until the supervisor is up
//!   launch.json      token, attempt, pool, node, container engine if any
//!   spec.json        the spec (secret names only)
//!   pid              supervisor and child pids with their start times
//!   exit.json        the child's exit code or signal and end time (and
//!                    why it was stopped when its lease ran out)
//!   collected.json   what the supervisor collected after a clean exit
//!   collected/<name> the collected outputs, until the provider moves them
//!   stdout.log, stderr.log, supervisor.log   (files 0600, directory 0700)
//!   work/            default working directory
//!   inputs/<name>    staged inputs
//!   outputs/<P>      spec output path P (absolute) lands at outputs/P
//! ```

use crate::failure::ProviderEnd;
use crate::providers::Skipped;
use crate::providers::collect::OutputLimits;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// The most a record file may hold; a larger one is refused unread.
pub const MAX_RECORD_BYTES: u64 = 16 << 20;

/// Paths inside one attempt directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptDir {
    path: PathBuf,
}

impl AttemptDir {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
    pub fn at(root: &Path, token: &str) -> Self {
        Self { path: root.join(token) }
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn lock(&self) -> PathBuf {
        self.path.join("launch.lock")
    }
    pub fn launch(&self) -> PathBuf {
        self.path.join("launch.json")
    }
    pub fn spec(&self) -> PathBuf {
        self.path.join("spec.json")
    }
    pub fn pid(&self) -> PathBuf {
        self.path.join("pid")
    }
    pub fn exit(&self) -> PathBuf {
        self.path.join("exit.json")
    }
    pub fn stdout(&self) -> PathBuf {
        self.path.join("stdout.log")
    }
    pub fn stderr(&self) -> PathBuf {
        self.path.join("stderr.log")
    }
    pub fn supervisor_log(&self) -> PathBuf {
        self.path.join("supervisor.log")
    }
    pub fn work(&self) -> PathBuf {
        self.path.join("work")
    }
    pub fn inputs(&self) -> PathBuf {
        self.path.join("inputs")
    }
    pub fn outputs(&self) -> PathBuf {
        self.path.join("outputs")
    }
    pub fn collected(&self) -> PathBuf {
        self.path.join("collected")
    }
    pub fn collected_manifest(&self) -> PathBuf {
        self.path.join("collected.json")
    }
    /// Where the spec output path `spec_path` lands: `outputs/<spec_path>`.
    pub fn output(&self, spec_path: &str) -> Result<PathBuf, String> {
        Ok(self.outputs().join(relative_output(spec_path)?))
    }
}

/// A spec output path without its leading `/`, checked to stay inside the
/// outputs directory: absolute, no `..`, not `/` itself.
pub fn relative_output(spec_path: &str) -> Result<PathBuf, String> {
    let p = Path::new(spec_path);
    if !p.is_absolute() {
        return Err(format!("output path {spec_path:?} must be absolute, like \"/outputs/result.json\""));
    }
    let mut rel = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(s) => rel.push(s),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(format!("output path {spec_path:?} must not contain \"..\""));
            }
        }
    }
    if rel.as_os_str().is_empty() {
        return Err(format!("output path {spec_path:?} names the root; name a file or directory under it"));
    }
    Ok(rel)
}

/// Whether `token` is safe as a directory (and container) name: ASCII
/// letters, digits, `-`, `_`, `.`, not starting with `.`.
pub fn valid_token(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= 200
        && !token.starts_with('.')
        && token.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A process as the kernel identifies it over time: a pid alone may be
/// recycled, a pid with its start time (clock ticks since boot) is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcRef {
    pub pid: i32,
    pub start_time: u64,
}

/// The `pid` file: written by the supervisor once the child is started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PidRecord {
    pub supervisor: ProcRef,
    /// `None` when the command could not be started (exit.json says why).
    pub child: Option<ProcRef>,
    /// The supervisor's session, which the workload's process group is in
    /// (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<i32>,
}

/// The `exit.json` file: how the child ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// Exit status, when it exited.
    pub code: Option<i32>,
    /// Terminating signal, when it was killed.
    pub signal: Option<i32>,
    /// Milliseconds since the Unix epoch.
    pub ended_at_ms: i64,
    /// Why the command could not be started, when it could not (with
    /// `rank`: why that rank of a gang could not, after the ranks before
    /// it had started and were stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a gang: the rank whose end this is (the first to fail, after
    /// which the others were stopped), and its node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<(u32, String)>,
    /// Why the supervisor stopped the workload for the host's sake, not
    /// the workload's: its lease ran out ([`super::lease`]). The end is
    /// then the node's ([`ProviderEnd::NodeLost`]), whatever the exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<String>,
    /// A container killed for memory ([`super::container::after_exit`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
    /// A container the engine never created, and the engine's message
    /// (e.g. an image that does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_failed: Option<String>,
}

impl ExitRecord {
    pub fn to_end(&self) -> ProviderEnd {
        if let Some(message) = &self.lost {
            return ProviderEnd::NodeLost { message: message.clone() };
        }
        if let Some(message) = &self.boot_failed {
            return ProviderEnd::BootFailed { message: message.clone() };
        }
        if self.oom_killed {
            return ProviderEnd::OutOfMemory;
        }
        let end = match (self.code, self.signal) {
            (_, Some(signal)) => ProviderEnd::Signaled { signal },
            (Some(code), None) => ProviderEnd::Exited { code },
            (None, None) => {
                ProviderEnd::Unknown { message: "exit.json records neither code nor signal".into() }
            }
        };
        match (&self.rank, &self.error) {
            // A rank that could not start while others had: its node's
            // launch failed, not the workload (the same command started
            // elsewhere), so the gang is rolled back as that node's fault.
            (Some((rank, node)), Some(message)) => ProviderEnd::Rank {
                rank: *rank,
                node: node.clone(),
                end: Box::new(ProviderEnd::BootFailed { message: message.clone() }),
            },
            (Some((rank, node)), None) => {
                ProviderEnd::Rank { rank: *rank, node: node.clone(), end: Box::new(end) }
            }
            (None, _) => end,
        }
    }
}

/// The `launch.json` file: what the launcher decided, for the calls after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchRecord {
    pub token: String,
    /// `w-17.2`.
    pub attempt: String,
    pub pool: String,
    pub node: String,
    /// The container engine program (`podman`, `docker`) when the workload
    /// runs in a container named after the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_engine: Option<String>,
    pub launched_at_ms: i64,
    /// What the supervisor may collect (defaults in records of older
    /// versions).
    #[serde(default)]
    pub outputs: OutputLimits,
    /// A gang: one launcher per node, all started by the supervisor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang: Option<GangRecord>,
    /// Between SIGTERM and SIGKILL when a gang's ranks are stopped because
    /// one failed (the spec's `runtime.stop_grace`), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_grace_ms: Option<u64>,
}

/// A gang's launchers: the nodes in rank order, the rendezvous port and
/// the GPUs per node, from which each rank's environment is made
/// ([`crate::providers::gang::launcher_env`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GangRecord {
    pub nodes: Vec<String>,
    pub port: u16,
    pub gpus_per_node: u32,
}

/// The `collected.json` file: what the supervisor collected into
/// `collected/` after the workload exited 0, written before `exit.json`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CollectedManifest {
    pub artifacts: Vec<CollectedArtifact>,
    #[serde(default)]
    pub skipped: Vec<Skipped>,
    /// Why collection failed (a required output could not be collected);
    /// the provider reports it as the outputs' error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One output in `collected/<name>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectedArtifact {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

// Records are created private (0600, never through a link) by the one
// module that makes every file and directory of the store.
pub use crate::private::{
    append as append_private, new_file as create_private, unique_name, write_atomic, write_replacing,
};

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    write_atomic(path, &bytes)
}

/// Opens a file the workload may have replaced, for reading: never through
/// a link, never blocking (a FIFO), and only if it is a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(f)
}

/// Reads a JSON record; `Ok(None)` when the file does not exist. Refuses
/// anything but a regular file of at most [`MAX_RECORD_BYTES`].
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {m}", path.display()));
    let f = match open_regular(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(invalid("is a symbolic link, which records never are".into()));
        }
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.take(MAX_RECORD_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_RECORD_BYTES {
        return Err(invalid(format!("larger than {MAX_RECORD_BYTES} bytes")));
    }
    serde_json::from_slice(&bytes).map(Some).map_err(|e| invalid(e.to_string()))
}

/// Milliseconds since the Unix epoch, from the wall clock. Only the edges
/// (the supervisor, the launcher) read it, to stamp records.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn output_paths_map_under_the_outputs_dir() {
        let d = AttemptDir::at(Path::new("/r"), "t");
        assert_eq!(d.output("/outputs/p.jsonl").unwrap(), Path::new("/r/t/outputs/outputs/p.jsonl"));
        assert_eq!(d.output("/ckpt").unwrap(), Path::new("/r/t/outputs/ckpt"));
        assert!(d.output("relative/x").unwrap_err().contains("absolute"));
        assert!(d.output("/a/../../etc").unwrap_err().contains(".."));
        assert!(d.output("/").is_err());
    }

    #[test]
    fn tokens_are_plain_names() {
        assert!(valid_token("canopy-3f9a1c-w17-a2"));
        assert!(!valid_token(""));
        assert!(!valid_token(".hidden"));
        assert!(!valid_token("a/b"));
        assert!(!valid_token(".."));
        assert!(!valid_token("a b"));
    }

    #[test]
    fn exit_records_map_to_provider_ends() {
        let r = |code, signal| ExitRecord {
            code,
            signal,
            ended_at_ms: 0,
            error: None,
            rank: None,
            lost: None,
            oom_killed: false,
            boot_failed: None,
        };
        assert_eq!(r(Some(0), None).to_end(), ProviderEnd::Exited { code: 0 });
        assert_eq!(r(None, Some(9)).to_end(), ProviderEnd::Signaled { signal: 9 });
        let lost = ExitRecord { lost: Some("lease expired: …".into()), ..r(None, Some(15)) };
        assert_eq!(lost.to_end(), ProviderEnd::NodeLost { message: "lease expired: …".into() });
        // A rank that ended is that rank's end; a rank that never started
        // is its node's failed launch, not the workload's exit 127.
        let ended = ExitRecord { rank: Some((1, "h-2".into())), ..r(Some(127), None) };
        let exited = Box::new(ProviderEnd::Exited { code: 127 });
        assert_eq!(ended.to_end(), ProviderEnd::Rank { rank: 1, node: "h-2".into(), end: exited });
        let why = "rank 1 of the gang (node h-2) could not start \"train\": No such file or directory";
        let unstarted = ExitRecord { error: Some(why.into()), ..ended };
        let boot = Box::new(ProviderEnd::BootFailed { message: why.into() });
        assert_eq!(unstarted.to_end(), ProviderEnd::Rank { rank: 1, node: "h-2".into(), end: boot });
        // A single command that could not start is still exit 127.
        let alone = ExitRecord { error: Some("cannot start \"train\"".into()), ..r(Some(127), None) };
        assert_eq!(alone.to_end(), ProviderEnd::Exited { code: 127 });
    }

    #[test]
    fn atomic_writes_replace_whole_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("exit.json");
        write_json(&p, &r_exit()).unwrap();
        write_json(&p, &r_exit()).unwrap();
        assert_eq!(read_json::<ExitRecord>(&p).unwrap(), Some(r_exit()));
        assert!(!dir.path().join("exit.json.tmp").exists());
        let left: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("exit.json")], "no temporary file is left");
        assert_eq!(read_json::<ExitRecord>(&dir.path().join("none")).unwrap(), None);
    }

    fn r_exit() -> ExitRecord {
        ExitRecord {
            code: Some(3),
            signal: None,
            ended_at_ms: 5,
            error: None,
            rank: None,
            lost: None,
            oom_killed: false,
            boot_failed: None,
        }
    }

    #[test]
    fn records_are_never_read_or_written_through_links_or_fifos() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "keep").unwrap();
        // A link at the temporary name is replaced, not written through.
        let p = dir.path().join("exit.json");
        std::os::unix::fs::symlink(&victim, dir.path().join("exit.json.tmp")).unwrap();
        write_json(&p, &r_exit()).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        // A record that is a link (to /dev/zero, say) or a FIFO is refused,
        // promptly.
        let zero = dir.path().join("zero.json");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(read_json::<ExitRecord>(&zero).unwrap_err().to_string().contains("symbolic link"));
        let fifo = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(read_json::<ExitRecord>(&fifo).unwrap_err().to_string().contains("not a regular file"));
    }
}
