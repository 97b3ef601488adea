//! Shared by `tests/engines_*.rs`: finding the engines that
//! `scripts/engines/start.sh` runs, skipping visibly when they are not
//! there (failing instead when `CANOPY_ENGINES=require`), starting an
//! engine over a temporary store with a generated `canopy.toml`, and
//! bounded waits on the journal. Nothing here asserts on elapsed time.
#![allow(dead_code)]

use canopy::app::{self, EngineOptions, Running};
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::core::CoreConfig;
use canopy::engine::model::{AttemptRecord, WorkloadId, WorkloadRecord};
use canopy::home::Home;
use canopy::journal::Journal;
use canopy::providers::local::ShimCommand;
use canopy::providers::sim::SimConfig;
use canopy::spec::Spec;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const JWT_VAR: &str = "CANOPY_TEST_SLURM_JWT";

/// Where the engines are.
#[derive(Debug, Clone)]
pub struct Engines {
    pub slurm_url: String,
    pub ray_url: String,
    pub dir: PathBuf,
    pub jobs_dir: PathBuf,
}

/// Engines serialise: they share two Slurm nodes and one Ray head.
pub static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn answers(url: &str) -> bool {
    let c = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().unwrap();
    c.get(url).send().await.is_ok_and(|r| r.status().is_success())
}

/// slurmrestd answers its ping even when slurmctld is gone; the cluster is
/// usable only when every controller pings `UP`.
async fn slurm_up(url: &str, jwt: &str) -> bool {
    let c = reqwest::Client::builder().timeout(Duration::from_secs(3)).build().unwrap();
    let Ok(r) = c.get(url).header("X-SLURM-USER-NAME", "root").header("X-SLURM-USER-TOKEN", jwt).send().await
    else {
        return false;
    };
    let Ok(v) = r.json::<serde_json::Value>().await else { return false };
    v["pings"].as_array().is_some_and(|p| !p.is_empty() && p.iter().all(|x| x["ping"] == "UP"))
}

/// The engines, or `None` after printing `SKIPPED: …` (a panic under
/// `CANOPY_ENGINES=require`). `need` is "slurm", "ray" or "both".
pub async fn engines(test: &str, need: &str) -> Option<Engines> {
    let dir =
        PathBuf::from(std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into()));
    let e = Engines {
        slurm_url: std::env::var("CANOPY_SLURM_URL").unwrap_or_else(|_| "http://127.0.0.1:6820".into()),
        ray_url: std::env::var("CANOPY_RAY_URL").unwrap_or_else(|_| "http://127.0.0.1:8265".into()),
        jobs_dir: dir.join("jobs"),
        dir,
    };
    let mut missing = Vec::new();
    if need != "ray" {
        let jwt = std::env::var("CANOPY_SLURM_JWT")
            .ok()
            .or_else(|| std::fs::read_to_string(e.dir.join("slurm/rest/root.jwt")).ok())
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        match jwt {
            Some(t) => {
                if !slurm_up(&format!("{}/slurm/v0.0.38/ping", e.slurm_url), &t).await {
                    missing.push(format!("slurmrestd with a controller that pings UP at {}", e.slurm_url));
                }
                // SAFETY (test only): set once, to the same value, before any
                // engine reads it; no other thread reads this variable's old value.
                unsafe { std::env::set_var(JWT_VAR, t) }
            }
            None => missing
                .push("the slurmrestd JWT ($CANOPY_SLURM_JWT or <engines>/slurm/rest/root.jwt)".to_string()),
        }
    }
    if need != "slurm" && !answers(&format!("{}/api/version", e.ray_url)).await {
        missing.push(format!("Ray at {}", e.ray_url));
    }
    if missing.is_empty() {
        if need != "ray" {
            slurm_nodes_back().await;
        }
        return Some(e);
    }
    let why =
        format!("{test}: {} not reachable; start them with scripts/engines/start.sh", missing.join(", "));
    if std::env::var("CANOPY_ENGINES").as_deref() == Ok("require") {
        panic!("CANOPY_ENGINES=require but {why}");
    }
    // Straight to the process's stderr: the test harness captures
    // `eprintln!` of passing tests, and a skip must be visible.
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
    None
}

pub fn slurm_toml(e: &Engines, extra: &str) -> String {
    format!(
        "[[slurm]]\nurl = {:?}\ntoken_env = {JWT_VAR:?}\njobs_dir = {:?}\npin_by_feature = true\n{extra}\n",
        e.slurm_url,
        e.jobs_dir.display().to_string()
    )
}

pub fn ray_toml(e: &Engines, extra: &str) -> String {
    format!("[[ray]]\nurl = {:?}\njobs_dir = {:?}\n{extra}\n", e.ray_url, e.jobs_dir.display().to_string())
}

/// An engine over a fresh store, with only `local` and the given engines.
pub async fn start(root: &Path, toml: &str) -> Running {
    let cfg = root.join("canopy.toml");
    std::fs::write(&cfg, format!("include_demo_fleet = false\n{toml}")).unwrap();
    let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
    let opts = EngineOptions {
        home: Home::new(root.join("home")),
        fleet: None,
        shim,
        sim: SimConfig::no_faults(),
        core: CoreConfig::default(),
        poll_every: Some(Duration::from_millis(250)),
        config: Some(cfg),
        server: canopy::server::ServerOptions::default(),
        new_journal: false,
        advertise: String::new(),
    };
    app::start(opts).await.unwrap()
}

pub fn spec(v: serde_json::Value) -> Spec {
    serde_json::from_value(v).unwrap()
}

pub async fn submit(r: &Running, spec: Spec) -> WorkloadId {
    match r.handle.command(Command::Submit { spec: Box::new(spec), idempotency_key: None }).await {
        CommandResult::Submitted { id, .. } => id,
        other => panic!("submit failed: {other:?}"),
    }
}

/// Waits until the engine's fleet holds pools of `provider` (its first
/// inventory is in), so that what is judged at submit sees them.
pub async fn wait_for_pools(r: &Running, provider: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let has = r.handle.status().borrow().as_ref().is_some_and(|s| {
            let f = &s.fleet;
            f.providers.iter().any(|p| p.name == provider && !p.pools.is_empty())
        });
        if has {
            return;
        }
        assert!(Instant::now() < deadline, "no pools of {provider} in the engine's fleet");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Submits `spec` and expects it refused as unschedulable; the message.
pub async fn refused_at_submit(r: &Running, spec: Spec) -> String {
    match r.handle.command(Command::Submit { spec: Box::new(spec), idempotency_key: None }).await {
        CommandResult::Error { code: canopy::engine::command::Refusal::Unschedulable, message } => message,
        other => panic!("expected a refusal at submit, got {other:?}"),
    }
}

/// A spec with `runtime.image`, allowed only on `provider`.
pub fn image_spec(name: &str, provider: &str) -> Spec {
    spec(serde_json::json!({
        "name": name,
        "runtime": { "image": "localhost/canopy-test:latest", "command": ["true"] },
        "resources": { "cpu_cores": 0.1, "memory_gb": 0.1 },
        "constraints": { "providers": [provider] },
    }))
}

pub fn journal(root: &Path) -> Journal {
    Journal::open(&Home::new(root.join("home")).store()).unwrap()
}

/// Polls the journal until `ok` holds for the workload and its attempts.
pub async fn wait(
    root: &Path,
    id: WorkloadId,
    within: Duration,
    what: &str,
    ok: impl Fn(&WorkloadRecord, &[AttemptRecord]) -> bool,
) -> (WorkloadRecord, Vec<AttemptRecord>) {
    let deadline = Instant::now() + within;
    loop {
        let j = journal(root);
        let w = j.workload(id).unwrap().unwrap();
        let a = j.attempts(id).unwrap();
        if ok(&w, &a) {
            return (w, a);
        }
        if Instant::now() > deadline {
            let events: Vec<String> = j.events(id).unwrap().into_iter().map(|e| e.message).collect();
            panic!(
                "{id}: gave up waiting for {what}; state {:?}, attempts {a:#?}, events {events:#?}",
                w.state
            );
        }
        drop(j);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every file under `dir` whose name is `name`, with its content.
pub fn find_files(dir: &Path, name: &str) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(find_files(&p, name));
        } else if p.file_name().is_some_and(|n| n == name) {
            out.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_default()));
        }
    }
    out
}

/// The test cluster's `slurm.conf`, for `scontrol`.
/// Waits (bounded) until no Slurm node is down or drained: a test that
/// took a node down resumes it when it ends, and slurmd takes a moment to
/// register again; a gang pinned to both nodes would be refused meanwhile.
async fn slurm_nodes_back() {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = std::process::Command::new("sinfo")
            .env("SLURM_CONF", slurm_conf())
            .args(["-h", "-N", "-o", "%N %t"])
            .output();
        let Ok(out) = out else { return };
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let unready = text.lines().any(|l| {
            let state = l.split_whitespace().nth(1).unwrap_or("");
            state.starts_with("down") || state.starts_with("drain") || state.ends_with('*')
        });
        if !unready || std::time::Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn slurm_conf() -> PathBuf {
    let dir = std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into());
    PathBuf::from(dir).join("slurm/etc/slurm.conf")
}

/// Runs a command, panicking with its output when it fails.
pub fn sh(cmd: &str) -> String {
    let out =
        std::process::Command::new("sh").env("SLURM_CONF", slurm_conf()).arg("-c").arg(cmd).output().unwrap();
    assert!(out.status.success(), "{cmd}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stops whatever a store left at the engines, even when the test panics
/// (a failed assertion must not leave GPUs held for the next test).
pub struct Cleanup {
    pub store_id: String,
    pub engines: Engines,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let prefix = format!("canopy-{}-", self.store_id);
        let _ = std::process::Command::new("sh")
            .env("SLURM_CONF", slurm_conf())
            .arg("-c")
            .arg(format!(
                "squeue -h -o '%i %j' | awk '$2 ~ /^{prefix}/ {{print $1}}' | xargs -r scancel; \
                 curl -s {u}/api/jobs/ | python3 -c 'import json,sys; [print(j[\"submission_id\"]) for j in json.load(sys.stdin) if (j.get(\"submission_id\") or \"\").startswith(\"{prefix}\") and j[\"status\"] in (\"PENDING\",\"RUNNING\")]' \
                 | xargs -r -I{{}} curl -s -X POST {u}/api/jobs/{{}}/stop",
                u = self.engines.ray_url
            ))
            .output();
    }
}

/// Files under `dir` (not following links) whose bytes contain `needle`.
#[allow(dead_code)]
pub fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file()
                && let Ok(bytes) = std::fs::read(e.path())
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                hits.push(e.path());
            }
        }
    }
    hits
}

/// A secret value no one else would write, and the SHA-256 a workload
/// prints to prove it saw it (the command itself never holds the value).
#[allow(dead_code)]
pub fn canary() -> (String, String) {
    use sha2::Digest;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let value = format!("canopy-canary-{}-{nanos}", std::process::id());
    let sha = hex::encode(sha2::Sha256::digest(value.as_bytes()));
    (value, sha)
}

/// One of the two test sshd `scripts/engines/sshd.sh` runs: an asset
/// owner's host.
#[derive(Debug, Clone)]
pub struct SshHost {
    /// `a` or `b`, as `sshd.sh` names it.
    pub name: &'static str,
    pub addr: String,
    pub port: u16,
    pub user: String,
}

/// The two owners' hosts and the client's files. Tests that take a host
/// down use [`SshHosts::stop`] / [`SshHosts::cut`], which bring it back
/// when dropped.
#[derive(Debug, Clone)]
pub struct SshHosts {
    pub a: SshHost,
    pub b: SshHost,
    /// `$CANOPY_SSH_DIR`, by default `<engines>/ssh`.
    pub dir: PathBuf,
    /// Authorised for both owners.
    pub key: PathBuf,
    /// Pins both hosts' keys.
    pub known_hosts: PathBuf,
    /// The same host names with another key: a changed host key.
    pub known_hosts_changed: PathBuf,
    /// No entries: an unknown host key.
    pub known_hosts_empty: PathBuf,
}

fn ssh_host(name: &'static str, var: &str, default_port: u16, default_user: &str) -> SshHost {
    // CANOPY_SSH_A / CANOPY_SSH_B: `user@addr:port`.
    let spec = std::env::var(var).unwrap_or_else(|_| format!("{default_user}@127.0.0.1:{default_port}"));
    let (user, rest) = spec.split_once('@').unwrap_or((default_user, &spec));
    let (addr, port) = rest.rsplit_once(':').unwrap_or((rest, "22"));
    SshHost {
        name,
        addr: addr.into(),
        port: port.parse().unwrap_or_else(|_| panic!("{var}={spec:?}: the port is not a number")),
        user: user.into(),
    }
}

impl SshHosts {
    pub fn host(&self, name: &str) -> &SshHost {
        if name == "a" { &self.a } else { &self.b }
    }

    /// `ssh … <host> <command>` as the host's owner, host keys checked
    /// strictly against `known_hosts`.
    pub fn ssh(&self, host: &SshHost, known_hosts: &Path, command: &str) -> std::process::Output {
        std::process::Command::new("ssh")
            .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5"])
            .arg("-o")
            .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
            .arg("-i")
            .arg(&self.key)
            .arg("-p")
            .arg(host.port.to_string())
            .arg(format!("{}@{}", host.user, host.addr))
            .arg(command)
            .stdin(std::process::Stdio::null())
            .output()
            .expect("cannot run ssh")
    }

    /// Stops host `name`'s sshd (no new connections; established sessions
    /// stay, see `scripts/engines/sshd.sh`) until the guard is dropped.
    pub fn stop(&self, name: &str) -> SshdDown {
        sshd_sh(&["stop", name]);
        SshdDown { name: name.to_string() }
    }

    /// Ends host `name`'s established ssh sessions (not the processes they
    /// started); with [`SshHosts::stop`] first, the host is off the network.
    pub fn cut(&self, name: &str) {
        sshd_sh(&["cut", name]);
    }

    /// A lock on the hosts across test processes (nextest runs each test in
    /// its own): tests that take a host down hold it exclusively, others
    /// shared. Released when the file is dropped.
    pub fn lock(&self, exclusive: bool) -> std::fs::File {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(std::env::temp_dir().join("canopy-ssh-hosts.lock"))
            .expect("cannot open the ssh hosts' lock file");
        if exclusive { f.lock() } else { f.lock_shared() }.expect("cannot lock the ssh hosts");
        f
    }
}

/// A host whose sshd a test stopped; started again when dropped, even when
/// the test panics.
pub struct SshdDown {
    name: String,
}

impl SshdDown {
    /// Starts the host's sshd again now.
    pub fn start(self) {}
}

impl Drop for SshdDown {
    fn drop(&mut self) {
        sshd_sh(&["start", &self.name]);
    }
}

fn sshd_sh(args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/engines/sshd.sh");
    let out = std::process::Command::new(&script).args(args).output().expect("cannot run sshd.sh");
    assert!(
        out.status.success(),
        "{} {}: {}{}",
        script.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The two owners' hosts, or `None` after printing `SKIPPED: …` (a panic
/// under `CANOPY_ENGINES=require`). Each host must admit its owner with
/// the client key and the pinned host key (`ssh … true`).
pub fn ssh_hosts(test: &str) -> Option<SshHosts> {
    let engines =
        PathBuf::from(std::env::var("CANOPY_ENGINES_DIR").unwrap_or_else(|_| "/tmp/canopy-engines".into()));
    let dir = std::env::var("CANOPY_SSH_DIR").map_or_else(|_| engines.join("ssh"), PathBuf::from);
    let hosts = SshHosts {
        a: ssh_host("a", "CANOPY_SSH_A", 2222, "canopy-owner-a"),
        b: ssh_host("b", "CANOPY_SSH_B", 2223, "canopy-owner-b"),
        key: dir.join("client_ed25519"),
        known_hosts: dir.join("known_hosts"),
        known_hosts_changed: dir.join("known_hosts.changed"),
        known_hosts_empty: dir.join("known_hosts.empty"),
        dir,
    };
    let mut missing = Vec::new();
    if !hosts.key.is_file() || !hosts.known_hosts.is_file() {
        missing.push(format!("the client key and known_hosts in {}", hosts.dir.display()));
    } else {
        for h in [&hosts.a, &hosts.b] {
            let out = hosts.ssh(h, &hosts.known_hosts, "true");
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                missing.push(format!("sshd for {}@{}:{} ({why})", h.user, h.addr, h.port));
            }
        }
    }
    if missing.is_empty() {
        return Some(hosts);
    }
    let why =
        format!("{test}: {} not reachable; start them with scripts/engines/start.sh ssh", missing.join(", "));
    if std::env::var("CANOPY_ENGINES").as_deref() == Ok("require") {
        panic!("CANOPY_ENGINES=require but {why}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
    None
}

// ── ssh hosts as the engines_ssh tests configure them ──────────────────

/// The node name Canopy gives an owner's host.
pub fn node_of(h: &SshHost) -> String {
    format!("owner-{}", h.name)
}

/// `[[ssh]]` with both hosts in pool `lab` (or as `pools` says), pinned
/// host keys from `known_hosts`, and the debug `canopy` as the uploaded
/// binary, or `$CANOPY_SSH_TEST_BINARY` (e.g. a static musl build, see
/// docs/ssh.md).
pub fn ssh_toml(h: &SshHosts, known_hosts: &Path, lease: &str, extra: &str) -> String {
    let binary =
        std::env::var("CANOPY_SSH_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_canopy").to_string());
    let mut s = format!(
        "[engine]\nunreachable_after = \"3m\"\n[[ssh]]\nlease = {lease:?}\nknown_hosts = {:?}\nbinary = {binary:?}\n",
        known_hosts.display().to_string(),
    );
    for host in [&h.a, &h.b] {
        s.push_str(&format!(
            "[[ssh.hosts]]\nname = {:?}\naddress = {:?}\nport = {}\nuser = {:?}\nkey = {:?}\npool = \"lab\"\nowner = \"owner {}\"\n",
            node_of(host),
            host.addr,
            host.port,
            host.user,
            h.key.display().to_string(),
            host.name
        ));
    }
    s.push_str("[ssh.pools.lab]\nregion = \"owners\"\ncapabilities = [\"owners\"]\n");
    s.push_str(extra);
    s
}

pub fn ssh_spec(name: &str, script: &str, extra: serde_json::Value) -> canopy::spec::Spec {
    let mut v = serde_json::json!({
        "name": name,
        "runtime": { "command": ["sh", "-c", script], "stop_grace": "5s" },
        "resources": { "gpus": 0, "cpu_cores": 0.1, "memory_gb": 0.1 },
        "constraints": { "providers": ["ssh"], "capabilities": ["owners"] },
    });
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in e {
            if k == "runtime" {
                for (rk, rx) in x.as_object().unwrap() {
                    o["runtime"][rk] = rx.clone();
                }
            } else {
                o.insert(k.clone(), x.clone());
            }
        }
    }
    spec(v)
}

/// Removes the store's directory (its lease, the empty attempts
/// directory) from both hosts when the test ends, whatever happens.
pub struct ForgetStore(Vec<PathBuf>);

impl Drop for ForgetStore {
    fn drop(&mut self) {
        for d in &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

pub fn forget_store(h: &SshHosts, store: &str) -> ForgetStore {
    ForgetStore([&h.a, &h.b].iter().map(|x| home_of(&x.user).join(".canopy-host").join(store)).collect())
}

/// The host user's home, as root sees it.
pub fn home_of(user: &str) -> PathBuf {
    PathBuf::from(sh(&format!("getent passwd {user} | cut -d: -f6")).trim())
}

pub fn host_named<'a>(h: &'a SshHosts, node: &str) -> &'a SshHost {
    if node == node_of(&h.a) { &h.a } else { &h.b }
}
