//! Reaching one owner's host: the operator's OpenSSH client, one
//! ControlMaster connection per host multiplexing every short command
//! (through the `openssh` crate), the Canopy binary uploaded once per
//! build, and one `__host` request per command.
//!
//! Host keys are OpenSSH's to check, strictly: only the configured
//! known_hosts file counts (`GlobalKnownHostsFile=/dev/null`), an unknown
//! or changed key refuses the connection ([`TransportError::UnknownHostKey`],
//! [`TransportError::ChangedHostKey`]) and nothing is ever added to the
//! file. Only the configured key is offered (`IdentitiesOnly=yes`), never
//! interactively (`BatchMode=yes`).
//!
//! The binary goes to `~/.canopy-host/bin/canopy-<sha256 prefix>`: written
//! under a temporary name, its SHA-256 checked on the host, then renamed,
//! mode 0700; the build is chosen by the host's `uname -m` ([`Binaries`]).
//!
//! This module owns connections and the wire; it knows nothing of
//! attempts, leases or windows. Secret values pass through it only inside
//! a request's stdin.

use super::protocol::{HOST_SUBCOMMAND, Reply, Request};
use openssh::{KnownHosts, Session, SessionBuilder, Stdio};
use serde::de::DeserializeOwned;
use sha2::Digest;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Where and as whom to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The node's name, for messages.
    pub name: String,
    pub address: String,
    pub port: u16,
    pub user: String,
    pub key: PathBuf,
    pub known_hosts: PathBuf,
}

impl Target {
    /// `user@address:port`, for messages.
    pub fn shown(&self) -> String {
        format!("{}@{}:{}", self.user, self.address, self.port)
    }
}

/// Uploaded builds unused this many days are removed from hosts.
pub const PRUNE_AFTER_DAYS: u32 = 7;

/// The Canopy builds uploaded to hosts, by architecture (`uname -m`),
/// each hashed once, when a host of that architecture first needs it.
#[derive(Debug, Default)]
pub struct Binaries {
    paths: BTreeMap<String, PathBuf>,
    hashed: std::sync::Mutex<BTreeMap<String, Arc<Hashed>>>,
}

/// A build's hash, computed once (or why it could not be read).
type Hashed = tokio::sync::OnceCell<Result<Binary, String>>;

impl Binaries {
    pub fn new(paths: BTreeMap<String, PathBuf>) -> Self {
        Self { paths, hashed: Default::default() }
    }

    /// The build for `arch`, hashed; an error that says how to give one
    /// when there is none.
    pub async fn for_arch(&self, arch: &str) -> Result<Binary, String> {
        let Some(path) = self.paths.get(arch).cloned() else {
            let have: Vec<&str> = self.paths.keys().map(String::as_str).collect();
            return Err(format!(
                "the host is {arch}, and Canopy has builds for {} only; Canopy uploads itself to run there, \
                 so give a Canopy build for {arch} in [[ssh]] `binaries = {{ {arch} = \"/path/to/canopy\" }}`, \
                 or remove the host",
                have.join(", ")
            ));
        };
        let cell = self.hashed.lock().unwrap().entry(arch.to_string()).or_default().clone();
        cell.get_or_init(|| async move {
            tokio::task::spawn_blocking(move || Binary::load(&path))
                .await
                .unwrap_or_else(|e| Err(format!("hashing the binary failed: {e}")))
        })
        .await
        .clone()
    }
}

/// One Canopy build uploaded to hosts.
#[derive(Debug, Clone)]
pub struct Binary {
    pub path: PathBuf,
    pub sha256: String,
}

impl Binary {
    /// Hashes the file (blocking: call from a blocking task).
    pub fn load(path: &Path) -> Result<Self, String> {
        let mut f = std::fs::File::open(path)
            .map_err(|e| format!("cannot read the Canopy binary to upload ({}): {e}", path.display()))?;
        let mut h = sha2::Sha256::new();
        std::io::copy(&mut f, &mut HashWriter(&mut h))
            .map_err(|e| format!("cannot read the Canopy binary to upload ({}): {e}", path.display()))?;
        Ok(Self { path: path.to_path_buf(), sha256: hex::encode(h.finalize()) })
    }

    /// Its name on hosts.
    pub fn remote_name(&self) -> String {
        format!("canopy-{}", &self.sha256[..16])
    }
}

struct HashWriter<'a>(&'a mut sha2::Sha256);

impl Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    #[error(
        "host {host} ({at}) refused: its host key is not in {known_hosts}, and Canopy never trusts a host \
         on first use. Get the key's fingerprint from the host's owner, compare it with `ssh-keyscan -p \
         {port} {address} | ssh-keygen -lf -`, and add the line to {known_hosts} (or set host_key)"
    )]
    UnknownHostKey { host: String, at: String, address: String, port: u16, known_hosts: String },
    #[error(
        "host {host} ({at}) refused: its host key has CHANGED from the one in {known_hosts}. This may be \
         an attack; Canopy will not connect. If the owner reinstalled the host, confirm the new key's \
         fingerprint with them, then replace its line: ssh-keygen -R '[{address}]:{port}' -f {known_hosts}"
    )]
    ChangedHostKey { host: String, at: String, address: String, port: u16, known_hosts: String },
    #[error("host {host} ({at}) is unreachable: {message}")]
    Unreachable { host: String, at: String, message: String },
    #[error("host {host} ({at}): {message}")]
    Setup { host: String, at: String, message: String },
    /// The host answered, with an error.
    #[error("host {host}: {message}")]
    Remote { host: String, message: String },
    /// Canopy's own side of a transfer failed (reading what it sends,
    /// writing what it receives): the host is not to blame.
    #[error("host {host}: {message}")]
    Local { host: String, message: String },
}

impl TransportError {
    /// Whether Canopy could not reach the host at all (as opposed to the
    /// host answering with an error, or Canopy's own side failing).
    pub fn is_unreachable(&self) -> bool {
        !matches!(self, TransportError::Remote { .. } | TransportError::Local { .. })
    }
}

/// Chunks between a transfer's blocking side and its connection.
const CHUNK: usize = 256 * 1024;
/// Chunks in flight between them.
const IN_FLIGHT: usize = 8;
/// The most read past what a finished consumer took.
const DRAIN: u64 = 1 << 20;

/// A blocking writer that hands what it is given to an async task.
struct ChannelWriter(tokio::sync::mpsc::Sender<Vec<u8>>);

impl Write for ChannelWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len().min(CHUNK);
        self.0
            .blocking_send(buf[..n].to_vec())
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the host stopped reading"))?;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A blocking reader of what an async task receives.
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    at: usize,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.buf.len() {
            match self.rx.blocking_recv() {
                Some(b) => (self.buf, self.at) = (b, 0),
                None => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// `ControlPersist`'s whole seconds for `idle`, at least 1.
fn idle_s(idle: Duration) -> std::num::NonZeroUsize {
    let s = usize::try_from(idle.as_secs_f64().ceil() as u64).unwrap_or(usize::MAX);
    std::num::NonZeroUsize::new(s).unwrap_or(std::num::NonZeroUsize::MIN)
}

/// One host's connection, opened on first use and again after it drops.
pub struct Transport {
    target: Target,
    store: String,
    binaries: Arc<Binaries>,
    control_dir: PathBuf,
    config_file: PathBuf,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    /// The uploaded binary's path on the host, once checked.
    remote_bin: tokio::sync::Mutex<Option<String>>,
    connect_timeout: Duration,
    /// How long the master stays open with no command on it
    /// (`ControlPersist`): one left by a killed server goes by itself.
    idle: Duration,
    /// When the connection was last handed to a command.
    handed: std::sync::Mutex<Option<std::time::Instant>>,
}

impl Transport {
    pub fn new(
        target: Target,
        store: String,
        binaries: Arc<Binaries>,
        control_dir: PathBuf,
        idle: Duration,
    ) -> Self {
        let config_file = control_dir.join("ssh_config");
        Self {
            target,
            store,
            binaries,
            control_dir,
            config_file,
            session: tokio::sync::Mutex::new(None),
            remote_bin: tokio::sync::Mutex::new(None),
            connect_timeout: Duration::from_secs(10),
            idle,
            handed: std::sync::Mutex::new(None),
        }
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    fn setup_err(&self, message: impl Into<String>) -> TransportError {
        TransportError::Setup {
            host: self.target.name.clone(),
            at: self.target.shown(),
            message: message.into(),
        }
    }

    fn unreachable(&self, message: impl Into<String>) -> TransportError {
        TransportError::Unreachable {
            host: self.target.name.clone(),
            at: self.target.shown(),
            message: message.into(),
        }
    }

    /// The ssh options Canopy insists on beyond what the builder sets.
    fn write_config(&self) -> Result<(), TransportError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.control_dir)
            .map_err(|e| self.setup_err(format!("cannot create {}: {e}", self.control_dir.display())))?;
        // A shared temporary directory: someone else may have made it first.
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::symlink_metadata(&self.control_dir)
                .map_err(|e| self.setup_err(format!("cannot read {}: {e}", self.control_dir.display())))?;
            // SAFETY: getuid cannot fail.
            let me = unsafe { libc::getuid() };
            if !m.is_dir() || m.uid() != me || m.mode() & 0o077 != 0 {
                return Err(self.setup_err(format!(
                    "{} is not a private directory of this user (owner uid {}, mode {:o}); remove it, or \
                     set TMPDIR to a private directory",
                    self.control_dir.display(),
                    m.uid(),
                    m.mode() & 0o7777
                )));
            }
        }
        let text = "# Written by Canopy for its ssh provider.\nGlobalKnownHostsFile /dev/null\n\
                    HashKnownHosts no\nUpdateHostKeys no\nCheckHostIP no\nServerAliveCountMax 3\n";
        crate::providers::local::layout::write_atomic(&self.config_file, text.as_bytes())
            .map_err(|e| self.setup_err(format!("cannot write {}: {e}", self.config_file.display())))
    }

    /// The connection, opened when there is none, or when it may be
    /// about to close by itself: a master idle for its whole `idle` exits
    /// (so one a killed server left does not stay), and one not handed
    /// out for half of it is replaced rather than raced (the old one ends
    /// now, or once the commands still on it have).
    async fn session(&self) -> Result<Arc<Session>, TransportError> {
        let mut slot = self.session.lock().await;
        let now = std::time::Instant::now();
        let last = self.handed.lock().unwrap_or_else(|p| p.into_inner()).replace(now);
        if last.is_some_and(|t| now.duration_since(t) >= self.idle / 2)
            && let Some(old) = slot.take()
            && let Ok(old) = Arc::try_unwrap(old)
        {
            let _ = old.close().await;
        }
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        self.write_config()?;
        let t = &self.target;
        if !t.key.is_file() {
            return Err(self.setup_err(format!(
                "the key file {} does not exist or is not a file; check `key` in canopy.toml",
                t.key.display()
            )));
        }
        if !t.known_hosts.is_file() {
            return Err(self.setup_err(format!(
                "the known_hosts file {} does not exist; check `known_hosts` in canopy.toml",
                t.known_hosts.display()
            )));
        }
        let mut b = SessionBuilder::default();
        b.user(t.user.clone())
            .port(t.port)
            .keyfile(&t.key)
            .known_hosts_check(KnownHosts::Strict)
            .user_known_hosts_file(&t.known_hosts)
            .config_file(&self.config_file)
            .control_directory(&self.control_dir)
            .control_persist(openssh::ControlPersist::IdleFor(idle_s(self.idle)))
            .connect_timeout(self.connect_timeout)
            .server_alive_interval(Duration::from_secs(5));
        let s = b.connect(&t.address).await.map_err(|e| self.connect_error(e))?;
        let s = Arc::new(s);
        *slot = Some(s.clone());
        Ok(s)
    }

    fn connect_error(&self, e: openssh::Error) -> TransportError {
        let text = match &e {
            openssh::Error::Connect(io) => io.to_string(),
            other => format!(
                "{other}: {}",
                std::error::Error::source(other).map(|s| s.to_string()).unwrap_or_default()
            ),
        };
        let t = &self.target;
        let (host, at, address, port, known_hosts) =
            (t.name.clone(), t.shown(), t.address.clone(), t.port, t.known_hosts.display().to_string());
        if text.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
            || text.contains("has changed and you have requested strict")
        {
            TransportError::ChangedHostKey { host, at, address, port, known_hosts }
        } else if text.contains("host key is known") || text.contains("Host key verification failed") {
            TransportError::UnknownHostKey { host, at, address, port, known_hosts }
        } else {
            let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("ssh failed").trim();
            self.unreachable(line.to_string())
        }
    }

    /// Forgets the connection (it dropped); the next call opens another.
    async fn reset(&self) {
        let old = self.session.lock().await.take();
        *self.remote_bin.lock().await = None;
        if let Some(s) = old {
            // Ends the master if it still lives; errors mean it is gone.
            if let Ok(s) = Arc::try_unwrap(s) {
                let _ = s.close().await;
            }
        }
    }

    /// Checks the connection works, opening it when needed.
    pub async fn connect(&self) -> Result<(), TransportError> {
        let s = self.session().await?;
        if s.check().await.is_err() {
            self.reset().await;
            self.session().await?;
        }
        Ok(())
    }

    /// Runs a shell command on the host; its stdout, or an error with its
    /// stderr.
    async fn shell(
        &self,
        s: &Session,
        script: &str,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<u8>, TransportError> {
        let cmd = format!("sh -c {}", shell_escape::unix::escape(script.into()));
        let mut c = s.raw_command(cmd);
        c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().await.map_err(|e| self.unreachable(e.to_string()))?;
        if let (Some(data), Some(mut w)) = (stdin, child.stdin().take()) {
            w.write_all(data)
                .await
                .map_err(|e| self.unreachable(format!("cannot write to the host: {e}")))?;
            w.shutdown().await.map_err(|e| self.unreachable(format!("cannot write to the host: {e}")))?;
        }
        let out = child.wait_with_output().await.map_err(|e| self.unreachable(e.to_string()))?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(TransportError::Remote {
                host: self.target.name.clone(),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// The binary's path on the host, uploading it when missing.
    async fn remote_binary(&self, s: &Session) -> Result<String, TransportError> {
        let mut slot = self.remote_bin.lock().await;
        if let Some(p) = slot.as_ref() {
            return Ok(p.clone());
        }
        let out = String::from_utf8_lossy(&self.shell(s, "uname -m; printf '%s\\n' \"$HOME\"", None).await?)
            .into_owned();
        let mut lines = out.lines();
        let (arch, home) =
            (lines.next().unwrap_or("").trim().to_string(), lines.next().unwrap_or("").to_string());
        let bin = &self.binaries.for_arch(&arch).await.map_err(|e| self.setup_err(e))?;
        let name = bin.remote_name();
        // Builds no Canopy has used for a week go (a running supervisor
        // keeps its executable's inode; an engine that still wants one
        // uploads it again); this one is marked used.
        let probe = format!(
            "b=\"$HOME/.canopy-host/bin\"; \
             if [ -x \"$b/{name}\" ]; then echo present; touch \"$b/{name}\"; else echo absent; fi; \
             find \"$b\" -maxdepth 1 -type f -name 'canopy-*' ! -name '{name}' -mtime +{PRUNE_AFTER_DAYS} \
             -exec rm -f {{}} + 2>/dev/null || true"
        );
        let out = String::from_utf8_lossy(&self.shell(s, &probe, None).await?).into_owned();
        let present = out.lines().next();
        if !home.starts_with('/') {
            return Err(
                self.setup_err(format!("the user's HOME on the host is {home:?}, not an absolute path"))
            );
        }
        let remote = format!("{home}/.canopy-host/bin/{name}");
        if present != Some("present") {
            self.upload(s, bin, &name).await?;
        }
        *slot = Some(remote.clone());
        Ok(remote)
    }

    async fn upload(&self, s: &Session, bin: &Binary, name: &str) -> Result<(), TransportError> {
        let data = tokio::fs::read(&bin.path)
            .await
            .map_err(|e| self.setup_err(format!("cannot read {}: {e}", bin.path.display())))?;
        let script = format!(
            "set -e; umask 077; d=\"$HOME/.canopy-host/bin\"; mkdir -p \"$d\"; chmod 700 \"$HOME/.canopy-host\" \"$d\"; \
             t=\"$d/.upload-$$\"; trap 'rm -f \"$t\"' EXIT; cat > \"$t\"; \
             s=$(sha256sum \"$t\" | cut -d' ' -f1); \
             if [ \"$s\" != {sha} ]; then echo \"the upload arrived with SHA-256 $s, not {sha}\" >&2; exit 3; fi; \
             chmod 700 \"$t\"; mv -f \"$t\" \"$d/{name}\"; trap - EXIT",
            sha = bin.sha256
        );
        self.shell(s, &script, Some(&data)).await.map_err(|e| match e {
            TransportError::Remote { message, .. } => {
                self.setup_err(format!("uploading Canopy to ~/.canopy-host/bin/{name} failed: {message}"))
            }
            other => other,
        })?;
        tracing::info!(host = %self.target.name, "uploaded Canopy as ~/.canopy-host/bin/{name}");
        Ok(())
    }

    /// Sends one request; its stdout when it succeeded.
    pub async fn call_raw(&self, req: &Request) -> Result<Vec<u8>, TransportError> {
        let out = self.request(req).await?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        Err(self.remote_failure(&out))
    }

    /// Sends one request and reads its JSON reply (a failed request
    /// answers `{"error": …}` on stdout too).
    pub async fn call<T: DeserializeOwned>(&self, req: &Request) -> Result<T, TransportError> {
        let out = self.request(req).await?;
        if out.stdout.is_empty() {
            return Err(self.remote_failure(&out));
        }
        match serde_json::from_slice::<Reply<T>>(&out.stdout) {
            Ok(Reply::Ok(v)) => Ok(v),
            Ok(Reply::Error(message)) => {
                Err(TransportError::Remote { host: self.target.name.clone(), message })
            }
            Err(e) => Err(TransportError::Remote {
                host: self.target.name.clone(),
                message: format!(
                    "answered something Canopy cannot read ({e}); is the uploaded binary intact?"
                ),
            }),
        }
    }

    fn remote_failure(&self, out: &std::process::Output) -> TransportError {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let message = if err.is_empty() { format!("the host agent failed ({})", out.status) } else { err };
        TransportError::Remote { host: self.target.name.clone(), message }
    }

    fn local_err(&self, message: impl Into<String>) -> TransportError {
        TransportError::Local { host: self.target.name.clone(), message: message.into() }
    }

    /// Starts one request's `__host` on an open connection: the child,
    /// with the request line already written to its stdin.
    async fn start<'s>(
        &self,
        s: &'s Session,
        req: &Request,
    ) -> Result<openssh::Child<&'s Session>, TransportError> {
        let mut body =
            serde_json::to_vec(req).map_err(|e| self.setup_err(format!("cannot encode a request: {e}")))?;
        body.push(b'\n');
        let bin = self.remote_binary(s).await?;
        let cmd = format!(
            "{} {HOST_SUBCOMMAND} --store {}",
            shell_escape::unix::escape(bin.as_str().into()),
            shell_escape::unix::escape(self.store.as_str().into())
        );
        let mut c = s.raw_command(cmd);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().await.map_err(|e| self.unreachable(e.to_string()))?;
        if let Some(w) = child.stdin().as_mut() {
            w.write_all(&body)
                .await
                .map_err(|e| self.unreachable(format!("cannot write to the host: {e}")))?;
        }
        Ok(child)
    }

    /// Sends one request followed on its stdin by what `produce` writes
    /// (run on a blocking thread, fed to the host as it writes: nothing is
    /// held whole in memory), and reads the JSON reply. A host that
    /// answers before reading it all (a refusal) is answered as it says.
    pub async fn call_with_payload<T: DeserializeOwned>(
        &self,
        req: &Request,
        produce: impl FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
    ) -> Result<T, TransportError> {
        let r = self.with_payload(req, produce).await;
        if matches!(r, Err(TransportError::Unreachable { .. })) {
            self.reset().await;
        }
        r
    }

    async fn with_payload<T: DeserializeOwned>(
        &self,
        req: &Request,
        produce: impl FnOnce(&mut dyn Write) -> Result<(), String> + Send + 'static,
    ) -> Result<T, TransportError> {
        let s = self.session().await?;
        let mut child = self.start(&s, req).await?;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(IN_FLIGHT);
        let producer = tokio::task::spawn_blocking(move || produce(&mut ChannelWriter(tx)));
        let mut stdin = child.stdin().take();
        let mut sent = Ok(());
        while let Some(chunk) = rx.recv().await {
            if let Some(w) = stdin.as_mut()
                && let Err(e) = w.write_all(&chunk).await
            {
                sent = Err(format!("cannot write to the host: {e}"));
                break;
            }
        }
        drop(rx);
        if let Some(mut w) = stdin.take() {
            let _ = w.shutdown().await;
        }
        let produced = producer.await.map_err(|e| self.local_err(format!("the sending task failed: {e}")))?;
        let out = child.wait_with_output().await.map_err(|e| self.unreachable(e.to_string()))?;
        match serde_json::from_slice::<Reply<T>>(&out.stdout) {
            // The host's word: a refusal it gave before reading everything
            // included.
            Ok(Reply::Error(message)) => {
                Err(TransportError::Remote { host: self.target.name.clone(), message })
            }
            Ok(Reply::Ok(v)) if out.status.success() => {
                produced.map_err(|m| self.local_err(m))?;
                Ok(v)
            }
            _ => {
                produced.map_err(|m| self.local_err(m))?;
                sent.map_err(|m| self.unreachable(m))?;
                Err(self.remote_failure(&out))
            }
        }
    }

    /// Sends one request and hands its stdout, as it arrives, to `consume`
    /// (run on a blocking thread: nothing is held whole in memory). Its
    /// answer once the host has exited 0; the host's error otherwise.
    pub async fn call_streamed<R: Send + 'static>(
        &self,
        req: &Request,
        consume: impl FnOnce(&mut dyn std::io::Read) -> Result<R, String> + Send + 'static,
    ) -> Result<R, TransportError> {
        let r = self.streamed(req, consume).await;
        if matches!(r, Err(TransportError::Unreachable { .. })) {
            self.reset().await;
        }
        r
    }

    async fn streamed<R: Send + 'static>(
        &self,
        req: &Request,
        consume: impl FnOnce(&mut dyn std::io::Read) -> Result<R, String> + Send + 'static,
    ) -> Result<R, TransportError> {
        use tokio::io::AsyncReadExt;
        let s = self.session().await?;
        let mut child = self.start(&s, req).await?;
        if let Some(mut w) = child.stdin().take() {
            let _ = w.shutdown().await;
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(IN_FLIGHT);
        let consumer = tokio::task::spawn_blocking(move || {
            let mut r = ChannelReader { rx, buf: Vec::new(), at: 0 };
            let answer = consume(&mut r);
            // What a consumer that is done left unread (a tar stream's
            // padding) is taken off the connection for the host to finish;
            // a little only.
            if answer.is_ok() {
                let _ = std::io::copy(&mut std::io::Read::take(&mut r, DRAIN), &mut std::io::sink());
            }
            answer
        });
        let mut stdout = child.stdout().take();
        let mut stderr_pipe = child.stderr().take();
        let pump = async {
            let tx = tx;
            let Some(out) = stdout.as_mut() else { return Ok(()) };
            loop {
                let mut buf = vec![0u8; CHUNK];
                let n = out.read(&mut buf).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Ok(());
                }
                buf.truncate(n);
                if tx.send(buf).await.is_err() {
                    // The consumer stopped (it refused what came): stop here.
                    return Err(String::new());
                }
            }
        };
        let errs = async {
            let mut e = Vec::new();
            if let Some(p) = stderr_pipe.as_mut() {
                let _ = p.read_to_end(&mut e).await;
            }
            e
        };
        let (pumped, stderr) = tokio::join!(pump, errs);
        let answer = consumer.await.map_err(|e| self.local_err(format!("the receiving task failed: {e}")))?;
        if let Err(m) = pumped {
            // Stopped early: the host may still be writing; let it go.
            drop(stdout);
            let _ = child.disconnect().await;
            return Err(match answer {
                _ if !m.is_empty() => self.unreachable(m),
                Err(refused) => self.local_err(refused),
                Ok(_) => self.local_err("the host sent more than was asked for"),
            });
        }
        drop(stdout);
        let status = child.wait().await.map_err(|e| self.unreachable(e.to_string()))?;
        if !status.success() {
            let err = String::from_utf8_lossy(&stderr).trim().to_string();
            let message = if err.is_empty() { format!("the host agent failed ({status})") } else { err };
            return Err(TransportError::Remote { host: self.target.name.clone(), message });
        }
        answer.map_err(|m| self.local_err(m))
    }

    /// Runs one request, opening the connection (once more when it had
    /// dropped) and uploading Canopy when needed.
    async fn request(&self, req: &Request) -> Result<std::process::Output, TransportError> {
        let body =
            serde_json::to_vec(req).map_err(|e| self.setup_err(format!("cannot encode a request: {e}")))?;
        let mut tried_again = false;
        loop {
            let s = self.session().await?;
            let outcome = match self.remote_binary(&s).await {
                Ok(bin) => self.run(&s, &bin, &body).await,
                Err(e) => Err(e),
            };
            match outcome {
                // The master died (killed, network cut): open another once.
                Err(TransportError::Unreachable { .. }) if !tried_again => {
                    tried_again = true;
                    drop(s);
                    self.reset().await;
                }
                other => return other,
            }
        }
    }

    async fn run(&self, s: &Session, bin: &str, body: &[u8]) -> Result<std::process::Output, TransportError> {
        let cmd = format!(
            "{} {HOST_SUBCOMMAND} --store {}",
            shell_escape::unix::escape(bin.into()),
            shell_escape::unix::escape(self.store.as_str().into())
        );
        let mut c = s.raw_command(cmd);
        c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().await.map_err(|e| self.unreachable(e.to_string()))?;
        if let Some(mut w) = child.stdin().take() {
            w.write_all(body)
                .await
                .map_err(|e| self.unreachable(format!("cannot write to the host: {e}")))?;
            w.shutdown().await.map_err(|e| self.unreachable(format!("cannot write to the host: {e}")))?;
        }
        match child.wait_with_output().await {
            Ok(o) => Ok(o),
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                // The binary went missing (the owner cleaned up): upload again.
                *self.remote_bin.lock().await = None;
                Err(self.unreachable("the uploaded Canopy binary is gone from the host"))
            }
            Err(e) => Err(self.unreachable(e.to_string())),
        }
    }

    /// Closes the connection.
    pub async fn close(&self) {
        self.reset().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_host_of_an_architecture_without_a_build_is_told_how_to_give_one() {
        let b = Binaries::new(BTreeMap::from([("x86_64".to_string(), PathBuf::from("/nonexistent/canopy"))]));
        let e = b.for_arch("riscv64").await.unwrap_err();
        assert!(e.contains("the host is riscv64") && e.contains("builds for x86_64 only"), "{e}");
        assert!(e.contains("binaries = { riscv64 = "), "{e}");
        let e = b.for_arch("x86_64").await.unwrap_err();
        assert!(e.contains("cannot read the Canopy binary to upload (/nonexistent/canopy)"), "{e}");
    }
}
