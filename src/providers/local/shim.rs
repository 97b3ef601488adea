//! The supervisor shim: a small process, one per attempt, that outlives the
//! engine. It makes itself a session leader at once; it starts the
//! workload, waits for it and records how it ended.
//!
//! Invocation (after whatever leading arguments select the shim, such as
//! `canopy __supervise`): `--attempt <dir> [--lease <file>] -- <argv...>`.
//! The workload gets the shim's environment and working directory as they
//! are; the launcher sets both. The shim writes `pid` once the child runs and `exit.json`
//! (atomically) once it ends, and its own notes to `supervisor.log`; every
//! file it creates is 0600.
//!
//! Guarantees:
//! - The workload does not outlive the supervisor: its leader is started
//!   with `PR_SET_PDEATHSIG(SIGKILL)` (and exits at once should the
//!   supervisor already be gone by then), so a supervisor killed outright
//!   takes it along; what else is left in its group the provider stops when
//!   it finds the supervisor gone (see `state::stop_orphaned`).
//! - When the workload exits 0, the supervisor collects its outputs next to
//!   the files, after the workload's group is gone and before `exit.json`
//!   is written (see [`super::outputs`]), with the limits `launch.json`
//!   gives. What to collect is read from `spec.json` before the workload
//!   starts, since the workload can write in the attempt directory.
//!
//! - A gang (`launch.json` names its nodes) is one launcher per node, all
//!   started here in the workload's one process group, each with its
//!   rank's variables ([`crate::providers::gang`]). A rank that cannot
//!   start (on one machine: its program vanished, the machine could not
//!   fork) stops those that did (SIGTERM, the spec's grace, SIGKILL; the
//!   gang is rolled back) and `exit.json` records it with its rank, node
//!   and `error`, which the provider reports as that node's failed launch.
//!   The first rank to fail stops the others the same way, and `exit.json`
//!   records its end with its rank and node.
//!
//! - Under a lease (`--lease <file>`, see [`super::lease`]), the workload
//!   runs only while Canopy keeps renewing it: the supervisor does not
//!   start it when the lease has run out or there is none, and reads the
//!   lease about every [`lease::CHECK_EVERY`] while it runs; once it has run
//!   out (or no readable lease has been found for a whole check period) the
//!   whole group, every rank of a gang included, gets SIGTERM, the spec's
//!   grace, then SIGKILL, and `exit.json` records why (`lost`), which the
//!   provider reports as [`crate::failure::ProviderEnd::NodeLost`]. Outputs
//!   are not collected then: the attempt did not finish.
//!
//! It must not interpret the command (no shell), touch anything outside the
//! attempt directory, or write environment values anywhere: secrets come
//! on its stdin (`--secrets-on-stdin`) and reach the workload through its
//! environment only, never the supervisor's own.

use super::layout::{
    AttemptDir, ExitRecord, GangRecord, LaunchRecord, PidRecord, append_private, read_json, write_json,
};
use super::{lease, procfs};
use crate::providers::gang::{Rank, launcher_env};
use crate::spec::Spec;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant, SystemTime};

/// Exit status of the shim when its arguments are wrong (a Canopy bug).
pub const USAGE_ERROR: i32 = 2;
/// Exit status of the shim when it could not record the attempt's end.
pub const RECORD_ERROR: i32 = 3;

/// How long processes left in the workload's group after it exits get
/// between SIGTERM and SIGKILL.
const STRAGGLER_GRACE: Duration = Duration::from_secs(2);

/// Runs the supervisor. Returns the shim's own exit status: 0 when the
/// workload's end was recorded (whatever that end was).
pub fn supervise_main(args: &[String]) -> i32 {
    let Some(Args { dir, lease, secrets_on_stdin, argv }) = parse_args(args) else {
        return USAGE_ERROR;
    };
    let dir = AttemptDir::new(dir);
    // Secrets come on stdin, so they are in no process's arguments and not
    // in this supervisor's own environment (`/proc/<pid>/environ`): only
    // the workload's processes hold them.
    let secrets = if secrets_on_stdin {
        match read_secrets(io::stdin().lock()) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(io::stderr(), "canopy supervisor: cannot read the secrets on stdin: {e}");
                return USAGE_ERROR;
            }
        }
    } else {
        Vec::new()
    };
    // Its own session, so it outlives the launcher and its terminal. The
    // launcher does not arrange this (see `launch::start`); a launcher that
    // did makes this fail harmlessly.
    let _ = procfs::setsid();
    let mut log = Notes::open(&dir);
    match run(&dir, lease, &argv, &secrets, &mut log) {
        Ok(()) => 0,
        Err(e) => {
            log.note(&format!("could not record the attempt's end: {e}"));
            RECORD_ERROR
        }
    }
}

/// The supervisor's arguments.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    dir: PathBuf,
    lease: Option<PathBuf>,
    /// The launcher writes the secrets, as JSON `[[name, value], …]`, on
    /// the supervisor's stdin and closes it.
    secrets_on_stdin: bool,
    argv: Vec<String>,
}

/// At most this much of secrets on stdin (every value also has to fit in
/// an environment).
const MAX_SECRETS_BYTES: u64 = 4 << 20;

fn read_secrets(input: impl io::Read) -> io::Result<Vec<(String, String)>> {
    use io::Read;
    let mut buf = Vec::new();
    input.take(MAX_SECRETS_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_SECRETS_BYTES {
        return Err(io::Error::other("more than 4 MiB"));
    }
    // The error names no value: serde_json's messages give positions only.
    serde_json::from_slice(&buf).map_err(|e| io::Error::other(format!("not a JSON list of pairs ({e})")))
}

fn parse_args(args: &[String]) -> Option<Args> {
    let mut it = args.iter();
    if it.next()? != "--attempt" {
        return None;
    }
    let dir = PathBuf::from(it.next()?);
    let mut lease = None;
    let mut next = it.next()?;
    if next == "--lease" {
        lease = Some(PathBuf::from(it.next()?));
        next = it.next()?;
    }
    let secrets_on_stdin = next == "--secrets-on-stdin";
    if secrets_on_stdin {
        next = it.next()?;
    }
    if next != "--" {
        return None;
    }
    let argv: Vec<String> = it.cloned().collect();
    let absolute = dir.is_absolute() && lease.as_ref().is_none_or(|l| l.is_absolute());
    if argv.is_empty() || !absolute { None } else { Some(Args { dir, lease, secrets_on_stdin, argv }) }
}

fn run(
    dir: &AttemptDir,
    lease: Option<PathBuf>,
    argv: &[String],
    secrets: &[(String, String)],
    log: &mut Notes,
) -> io::Result<()> {
    // Every rank runs the same argv with the same secrets; only its
    // launcher variables differ.
    let command = |_rank: usize, rank_env: &[(String, String)]| {
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd.envs(secrets.iter().map(|(k, v)| (k, v)));
        cmd.envs(rank_env.iter().map(|(k, v)| (k, v)));
        cmd
    };
    supervise(dir, lease, &command, log)
}

/// Rank `r`'s command (0 for a single node), given that rank's launcher
/// variables (none for a single node): program, arguments and
/// environment. The supervisor adds stdio, the process group and the
/// parent-death signal.
type RankCommand<'a> = dyn Fn(usize, &[(String, String)]) -> Command + 'a;

/// Starts the workload (every rank of a gang), waits for it, and records
/// its end.
fn supervise(
    dir: &AttemptDir,
    lease: Option<PathBuf>,
    rank_command: &RankCommand<'_>,
    log: &mut Notes,
) -> io::Result<()> {
    let me = procfs::proc_ref(std::process::id() as i32)
        .ok_or_else(|| io::Error::other("cannot read /proc/self/stat"))?;
    let session = procfs::stat(me.pid).map(|s| s.session);
    // Read before the workload runs: it can write in this directory.
    let spec = read_json::<Spec>(&dir.spec())
        .map_err(|e| e.to_string())
        .and_then(|s| s.ok_or_else(|| "spec.json is missing".to_string()))
        .map_err(|e| format!("the supervisor could not read what to collect: {e}"));
    let launch = match read_json::<LaunchRecord>(&dir.launch()) {
        Ok(Some(l)) => Some(l),
        other => {
            log.note(&format!("launch.json unreadable ({other:?}); default output limits apply"));
            None
        }
    };
    let limits = launch.as_ref().map(|l| l.outputs).unwrap_or_default();
    let gang = launch.as_ref().and_then(|l| l.gang.clone()).filter(|g| g.nodes.len() > 1);
    let grace = launch
        .as_ref()
        .and_then(|l| l.stop_grace_ms)
        .map_or(crate::spec::Runtime::DEFAULT_STOP_GRACE, Duration::from_millis);
    let stdout = append_private(&dir.stdout())?;
    let stderr = append_private(&dir.stderr())?;
    let mut err_for_notes = stderr.try_clone()?;
    // Under a lease that has already run out, nothing starts.
    if let Some(l) = &lease
        && let Some(why) = lease_not_held(l)
    {
        let _ = writeln!(err_for_notes, "canopy: {why}");
        log.note(&why);
        write_json(&dir.pid(), &PidRecord { supervisor: me, child: None, session })?;
        let exit = ExitRecord {
            code: None,
            signal: None,
            ended_at_ms: super::layout::now_ms(),
            error: Some(why.clone()),
            rank: None,
            lost: Some(why),
            oom_killed: false,
            boot_failed: None,
        };
        return write_json(&dir.exit(), &exit);
    }
    let env0 = gang.as_ref().map(|g| rank_env(g, 0)).unwrap_or_default();
    let mut cmd = rank_command(0, &env0);
    let program = cmd.get_program().to_owned();
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr).process_group(0);
    procfs::die_with_parent(&mut cmd);
    let spawned = cmd.spawn();
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("canopy: cannot start {program:?}: {e}");
            let _ = writeln!(err_for_notes, "{msg}");
            log.note(&msg);
            write_json(&dir.pid(), &PidRecord { supervisor: me, child: None, session })?;
            let exit = ExitRecord {
                code: Some(not_started_code(&e)),
                signal: None,
                ended_at_ms: super::layout::now_ms(),
                error: Some(msg),
                rank: None,
                lost: None,
                oom_killed: false,
                boot_failed: None,
            };
            return write_json(&dir.exit(), &exit);
        }
    };
    let pgid = child.id() as i32;
    let child_ref = procfs::proc_ref(pgid);
    write_json(&dir.pid(), &PidRecord { supervisor: me, child: child_ref, session })?;
    log.note(&format!("started {program:?} as pid {pgid}"));
    let watch = lease.map(|l| LeaseWatch::start(l, pgid, grace, dir));
    let (status, rank) = match &gang {
        None => {
            let mut child = child;
            (child.wait()?, None)
        }
        Some(g) => {
            let mut ranks = match start_other_ranks(child, g, dir, rank_command, log)? {
                Ok(ranks) => ranks,
                // Not every rank started: stop those that did; the gang is
                // rolled back as one failed attempt, charged to the node of
                // the rank that did not start.
                Err(NotStarted { rank: r, error: e, started }) => {
                    let node = g.nodes[r].clone();
                    let msg = format!(
                        "rank {r} of the gang (node {node}) could not start {program:?}: {e}; \
                         the {} rank(s) that had started were stopped",
                        started.len()
                    );
                    let _ = writeln!(err_for_notes, "canopy: {msg}");
                    log.note(&msg);
                    stop_group(pgid, grace, log);
                    for mut c in started {
                        let _ = c.wait();
                    }
                    if let Some(w) = watch {
                        let _ = w.finish();
                    }
                    clean_up_group(pgid, log);
                    let exit = ExitRecord {
                        code: Some(not_started_code(&e)),
                        signal: None,
                        ended_at_ms: super::layout::now_ms(),
                        error: Some(msg),
                        rank: Some((r as u32, node)),
                        lost: None,
                        oom_killed: false,
                        boot_failed: None,
                    };
                    return write_json(&dir.exit(), &exit);
                }
            };
            log.note(&format!("started {} gang ranks in group {pgid}", ranks.len()));
            let lease_stopping = || watch.as_ref().is_some_and(LeaseWatch::expired);
            let (status, rank) = wait_gang(&mut ranks, pgid, grace, &lease_stopping, log)?;
            (status, rank.map(|r| (r as u32, g.nodes[r].clone())))
        }
    };
    let ended_at_ms = super::layout::now_ms();
    // Waits out the lease's own stop of the group, if it made one.
    let lost = watch.and_then(LeaseWatch::finish);
    clean_up_group(pgid, log);
    // A container: how it ended beyond the client's status, then removed.
    let container = launch
        .as_ref()
        .and_then(|l| l.container_engine.as_deref().map(|e| (e, l.token.as_str())))
        .map(|(engine, token)| super::container::after_exit(engine, token, status.code(), &dir.stderr()))
        .unwrap_or_default();
    if container.oom_killed {
        log.note("the container was killed for memory");
    }
    let exit = ExitRecord {
        code: status.code(),
        signal: status.signal(),
        ended_at_ms,
        error: None,
        rank,
        lost,
        oom_killed: container.oom_killed,
        boot_failed: container.boot_failed,
    };
    log.note(&format!("workload ended: {status}"));
    if let Some(why) = &exit.lost {
        log.note(&format!("not collecting outputs: {why}"));
    } else if status.code() == Some(0) {
        log.note("collecting outputs");
        match super::outputs::supervise_collection(dir, spec.as_ref().map_err(Clone::clone), &limits) {
            Ok(()) => log.note("outputs collected; see collected.json"),
            // Without a manifest the provider collects them itself.
            Err(e) => log.note(&format!("could not record the outputs' collection: {e}")),
        }
    }
    write_json(&dir.exit(), &exit)
}

/// The exit status recorded for a command that could not be started, as
/// a shell would say: 127 not found, 126 found but not executable.
fn not_started_code(e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 }
}

/// A gang's rank that could not be started, and the ranks before it that
/// were (still to be stopped and reaped).
struct NotStarted {
    rank: usize,
    error: io::Error,
    started: Vec<std::process::Child>,
}

/// Starts ranks 1.. of gang `g` in rank 0's process group, each with its
/// own launcher variables and its output appended to the attempt's logs.
/// Stops at the first rank that cannot be started (its program is
/// missing, the machine cannot fork, …) and hands back the ranks that
/// did, for the caller to stop: a gang runs whole or not at all.
fn start_other_ranks(
    rank0: std::process::Child,
    g: &GangRecord,
    dir: &AttemptDir,
    rank_command: &RankCommand<'_>,
    log: &mut Notes,
) -> io::Result<Result<Vec<std::process::Child>, NotStarted>> {
    let pgid = rank0.id() as i32;
    let mut ranks = vec![rank0];
    for r in 1..g.nodes.len() {
        let out = append_private(&dir.stdout())?;
        let err = append_private(&dir.stderr())?;
        let mut cmd = rank_command(r, &rank_env(g, r));
        cmd.stdin(Stdio::null()).stdout(out).stderr(err).process_group(pgid);
        procfs::die_with_parent(&mut cmd);
        match cmd.spawn() {
            Ok(c) => {
                log.note(&format!("started rank {r} (node {}) as pid {}", g.nodes[r], c.id()));
                ranks.push(c);
            }
            Err(error) => return Ok(Err(NotStarted { rank: r, error, started: ranks })),
        }
    }
    Ok(Ok(ranks))
}

/// Why the workload must not start under the lease at `path`, if so: it
/// has run out, or there is no readable lease.
fn lease_not_held(path: &std::path::Path) -> Option<String> {
    let now = SystemTime::now();
    match lease::read_record(path) {
        Ok(Some(r)) if now < r.expires_at() => None,
        Ok(Some(r)) => Some(format!(
            "lease expired: lost contact with Canopy for {} before the workload started (the lease in {} \
             ran out), so it was not started",
            lease::human(now.duration_since(r.renewed_at()).unwrap_or_default()),
            path.display()
        )),
        Ok(None) => Some(format!(
            "lease expired: there is no lease file at {}, so the workload was not started",
            path.display()
        )),
        Err(e) => Some(format!(
            "lease expired: the lease file {} cannot be read ({e}), so the workload was not started",
            path.display()
        )),
    }
}

/// A thread that reads the lease every [`lease::CHECK_EVERY`] while the
/// workload runs and stops the workload's group when it runs out.
struct LeaseWatch {
    /// Dropped (or sent to) when the workload has ended.
    done: mpsc::Sender<()>,
    state: Arc<Mutex<WatchState>>,
    thread: std::thread::JoinHandle<()>,
}

#[derive(Default)]
struct WatchState {
    /// The workload ended: the watch must not stop anything any more.
    ended: bool,
    /// Why the watch stopped the workload.
    expired: Option<String>,
}

impl LeaseWatch {
    fn start(path: PathBuf, pgid: i32, grace: Duration, dir: &AttemptDir) -> Self {
        let (done, wake) = mpsc::channel::<()>();
        let state = Arc::new(Mutex::new(WatchState::default()));
        let shared = Arc::clone(&state);
        let mut log = Notes::open(dir);
        let thread = std::thread::spawn(move || {
            let mut missing_since = None;
            loop {
                match wake.recv_timeout(lease::CHECK_EVERY) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                let Some(why) = lease::verdict(&path, SystemTime::now(), &mut missing_since) else {
                    continue;
                };
                {
                    let mut st = shared.lock().unwrap_or_else(|e| e.into_inner());
                    if st.ended {
                        return;
                    }
                    st.expired = Some(why.clone());
                }
                log.note(&format!("{why}; stopping group {pgid}"));
                stop_group(pgid, grace, &mut log);
                return;
            }
        });
        Self { done, state, thread }
    }

    /// Whether the lease ran out and the watch is stopping the group.
    fn expired(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).expired.is_some()
    }

    /// Ends the watch once the workload has ended. When the lease stopped
    /// the workload, waits until its stop is complete (the grace, SIGKILL)
    /// and returns why.
    fn finish(self) -> Option<String> {
        let expired = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.ended = true;
            st.expired.clone()
        };
        let _ = self.done.send(());
        if expired.is_some() {
            let _ = self.thread.join();
        }
        expired
    }
}

/// Rank `r`'s launcher variables: every node of a split machine is
/// reached over loopback.
fn rank_env(g: &GangRecord, r: usize) -> Vec<(String, String)> {
    let addrs = vec!["127.0.0.1".to_string(); g.nodes.len()];
    launcher_env(&Rank {
        rank: r,
        nodes: &g.nodes,
        addrs: &addrs,
        gpus_per_node: g.gpus_per_node,
        port: g.port,
    })
}

/// Waits for every rank of a gang. The first rank to end other than with
/// exit 0 ends the gang: the others get SIGTERM, `grace`, then SIGKILL
/// (unless `stopping` says the whole group is being stopped already).
/// Returns the gang's status (that rank's, or success when all exited 0)
/// and the failing rank.
fn wait_gang(
    ranks: &mut [std::process::Child],
    pgid: i32,
    grace: Duration,
    stopping: &dyn Fn() -> bool,
    log: &mut Notes,
) -> io::Result<(std::process::ExitStatus, Option<usize>)> {
    let mut ended: Vec<Option<std::process::ExitStatus>> = vec![None; ranks.len()];
    let mut failed: Option<usize> = None;
    loop {
        for (r, c) in ranks.iter_mut().enumerate() {
            if ended[r].is_none()
                && let Some(s) = c.try_wait()?
            {
                ended[r] = Some(s);
                if !s.success() && failed.is_none() {
                    failed = Some(r);
                    if !stopping() {
                        log.note(&format!("rank {r} ended first ({s}); stopping the gang"));
                        stop_group_async(pgid, grace);
                    }
                }
            }
        }
        if ended.iter().all(Option::is_some) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = match failed {
        Some(r) => ended[r],
        None => ended.first().copied().flatten(),
    };
    let status = status.ok_or_else(|| io::Error::other("a gang with no ranks"))?;
    Ok((status, failed))
}

/// SIGTERM to the group now, SIGKILL after `grace` from a helper thread,
/// so the wait loop keeps reaping the ranks meanwhile.
fn stop_group_async(pgid: i32, grace: Duration) {
    let _ = procfs::signal_group(pgid, libc::SIGTERM);
    std::thread::spawn(move || {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if !procfs::group_exists(pgid) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = procfs::signal_group(pgid, libc::SIGKILL);
    });
}

/// SIGTERM, up to `grace` for the group to go, then SIGKILL.
fn stop_group(pgid: i32, grace: Duration, log: &mut Notes) {
    let _ = procfs::signal_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if !procfs::group_exists(pgid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log.note(&format!("group {pgid} still there after {grace:?}; sending SIGKILL"));
    let _ = procfs::signal_group(pgid, libc::SIGKILL);
}

/// Ends processes the workload left in its group (background jobs), so an
/// ended attempt holds nothing. While any member lives the group id cannot
/// be reused, so this never reaches someone else's processes.
fn clean_up_group(pgid: i32, log: &mut Notes) {
    if !procfs::group_exists(pgid) {
        return;
    }
    log.note(&format!("processes remain in group {pgid} after the workload exited; sending SIGTERM"));
    let _ = procfs::signal_group(pgid, libc::SIGTERM);
    let deadline = Instant::now() + STRAGGLER_GRACE;
    while Instant::now() < deadline {
        if !procfs::group_exists(pgid) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log.note(&format!("group {pgid} still there after {STRAGGLER_GRACE:?}; sending SIGKILL"));
    let _ = procfs::signal_group(pgid, libc::SIGKILL);
}

/// The shim's own notes, appended to `supervisor.log`. Best effort: a note
/// that cannot be written is dropped rather than failing the attempt.
struct Notes(Option<File>);

impl Notes {
    fn open(dir: &AttemptDir) -> Self {
        Self(append_private(&dir.supervisor_log()).ok())
    }
    fn note(&mut self, line: &str) {
        if let Some(f) = &mut self.0 {
            let _ = writeln!(f, "{} supervisor[{}]: {line}", super::layout::now_ms(), std::process::id());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn arguments_are_attempt_dir_then_argv() {
        let a = parse_args(&s(&["--attempt", "/r/t", "--", "echo", "a b"])).unwrap();
        assert_eq!(
            a,
            Args { dir: "/r/t".into(), lease: None, secrets_on_stdin: false, argv: s(&["echo", "a b"]) }
        );
        let a = parse_args(&s(&["--attempt", "/r/t", "--secrets-on-stdin", "--", "x"])).unwrap();
        assert!(a.secrets_on_stdin && a.lease.is_none());
        let a = parse_args(&s(&["--attempt", "/r/t", "--lease", "/h/lease.json", "--", "x"])).unwrap();
        assert_eq!(a.lease, Some(PathBuf::from("/h/lease.json")));
        assert!(parse_args(&s(&["--attempt", "/r/t", "--lease", "rel", "--", "x"])).is_none());
        assert!(parse_args(&s(&["--attempt", "/r/t", "--lease", "--", "x"])).is_none());
        assert!(parse_args(&s(&["--attempt", "/r/t", "--"])).is_none());
        assert!(parse_args(&s(&["--attempt", "rel", "--", "x"])).is_none());
        assert!(parse_args(&s(&["/r/t", "--", "x"])).is_none());
        assert_eq!(supervise_main(&s(&["nonsense"])), USAGE_ERROR);
    }

    /// A gang of three on nodes h-1..h-3: rank 0 starts (a real process
    /// that would run a minute and ignores SIGTERM) and rank 1's program
    /// is not there, as when it is missing on that node. Rank 0 is
    /// stopped and gone, rank 2 never starts, and the attempt ends as rank
    /// 1's failed launch on h-2: the node's fault, not the workload's.
    #[test]
    fn a_rank_that_cannot_start_rolls_the_gang_back() {
        let t = tempfile::tempdir().unwrap();
        let dir = AttemptDir::new(t.path().join("attempt"));
        std::fs::create_dir(dir.path()).unwrap();
        let gang = GangRecord { nodes: s(&["h-1", "h-2", "h-3"]), port: 29500, gpus_per_node: 0 };
        let launch = LaunchRecord {
            token: "t".into(),
            attempt: "w-1.1".into(),
            pool: "host".into(),
            node: "h-1".into(),
            container_engine: None,
            launched_at_ms: 0,
            outputs: Default::default(),
            gang: Some(gang),
            stop_grace_ms: Some(300),
        };
        write_json(&dir.launch(), &launch).unwrap();
        let missing = t.path().join("only-on-h-1-and-h-3/train");
        let command = |r: usize, env: &[(String, String)]| {
            let mut c = if r == 1 {
                Command::new(&missing)
            } else {
                let mut c = Command::new("sh");
                c.args(["-c", "trap '' TERM; exec sleep 60"]);
                c
            };
            c.envs(env.iter().map(|(k, v)| (k, v)));
            c
        };
        supervise(&dir, None, &command, &mut Notes::open(&dir)).unwrap();

        let pids = read_json::<PidRecord>(&dir.pid()).unwrap().unwrap();
        let rank0 = pids.child.expect("rank 0 started");
        assert!(!procfs::is_alive(&rank0), "rank 0 is gone");
        let left = procfs::group_members(rank0.pid, pids.session.unwrap(), 0);
        assert_eq!(left, Vec::<i32>::new(), "nothing of the gang is left running");

        let exit = read_json::<ExitRecord>(&dir.exit()).unwrap().unwrap();
        let end = exit.to_end();
        let crate::failure::ProviderEnd::Rank { rank: 1, node, end: inner } = &end else { panic!("{end:?}") };
        assert_eq!(node, "h-2");
        let crate::failure::ProviderEnd::BootFailed { message } = &**inner else { panic!("{end:?}") };
        assert!(message.contains("could not start") && message.contains("No such file"), "{message}");
        let stderr = std::fs::read_to_string(dir.stderr()).unwrap();
        assert!(stderr.contains("canopy: rank 1 of the gang (node h-2) could not start"), "{stderr}");
        let c = crate::engine::classify::classify(&end, &[]);
        assert_eq!(c.class, crate::failure::FailureClass::Node);
        assert!(c.evidence.line.starts_with("rank 1 on h-2: "), "{}", c.evidence.line);
    }

    #[test]
    fn secrets_on_stdin_are_pairs_and_errors_show_no_value() {
        let got = read_secrets(&br#"[["TOKEN","s3cr3t"],["B",""]]"#[..]).unwrap();
        assert_eq!(got, vec![("TOKEN".to_string(), "s3cr3t".to_string()), ("B".into(), "".into())]);
        let e = read_secrets(&br#"{"TOKEN":"s3cr3t-value"}"#[..]).unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
    }
}
