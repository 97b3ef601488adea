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
//!   start stops those that did (the gang is rolled back); the first rank
//!   to fail stops the others (SIGTERM, the spec's grace, SIGKILL), and
//!   `exit.json` records its end with its rank and node.
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
        };
        return write_json(&dir.exit(), &exit);
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(stdout).stderr(stderr).process_group(0);
    cmd.envs(secrets.iter().map(|(k, v)| (k, v)));
    if let Some(g) = &gang {
        cmd.envs(rank_env(g, 0));
    }
    procfs::die_with_parent(&mut cmd);
    let spawned = cmd.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            // 127/126 as a shell would say: not found / not executable.
            let code = if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
            let msg = format!("canopy: cannot start {:?}: {e}", argv[0]);
            let _ = writeln!(err_for_notes, "{msg}");
            log.note(&msg);
            write_json(&dir.pid(), &PidRecord { supervisor: me, child: None, session })?;
            let exit = ExitRecord {
                code: Some(code),
                signal: None,
                ended_at_ms: super::layout::now_ms(),
                error: Some(msg),
                rank: None,
                lost: None,
            };
            return write_json(&dir.exit(), &exit);
        }
    };
    let pgid = child.id() as i32;
    let child_ref = procfs::proc_ref(pgid);
    write_json(&dir.pid(), &PidRecord { supervisor: me, child: child_ref, session })?;
    log.note(&format!("started {:?} as pid {pgid}", argv[0]));
    let watch = lease.map(|l| LeaseWatch::start(l, pgid, grace, dir));
    let (status, rank) = match &gang {
        None => (child.wait()?, None),
        Some(g) => {
            let mut ranks = vec![child];
            for r in 1..g.nodes.len() {
                let out = append_private(&dir.stdout())?;
                let err = append_private(&dir.stderr())?;
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(out).stderr(err).process_group(pgid);
                cmd.envs(secrets.iter().map(|(k, v)| (k, v)));
                cmd.envs(rank_env(g, r));
                procfs::die_with_parent(&mut cmd);
                match cmd.spawn() {
                    Ok(c) => ranks.push(c),
                    // Not every rank started: stop those that did; the
                    // gang is rolled back as one failed attempt.
                    Err(e) => {
                        let msg = format!("canopy: rank {r} of the gang could not start: {e}");
                        let _ = writeln!(err_for_notes, "{msg}");
                        log.note(&msg);
                        stop_group(pgid, grace, log);
                        for mut c in ranks {
                            let _ = c.wait();
                        }
                        let exit = ExitRecord {
                            code: Some(if e.kind() == io::ErrorKind::NotFound { 127 } else { 126 }),
                            signal: None,
                            ended_at_ms: super::layout::now_ms(),
                            error: Some(msg),
                            rank: Some((r as u32, g.nodes[r].clone())),
                            lost: None,
                        };
                        return write_json(&dir.exit(), &exit);
                    }
                }
            }
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
    let exit =
        ExitRecord { code: status.code(), signal: status.signal(), ended_at_ms, error: None, rank, lost };
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

    #[test]
    fn secrets_on_stdin_are_pairs_and_errors_show_no_value() {
        let got = read_secrets(&br#"[["TOKEN","s3cr3t"],["B",""]]"#[..]).unwrap();
        assert_eq!(got, vec![("TOKEN".to_string(), "s3cr3t".to_string()), ("B".into(), "".into())]);
        let e = read_secrets(&br#"{"TOKEN":"s3cr3t-value"}"#[..]).unwrap_err().to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
    }
}
