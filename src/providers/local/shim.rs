//! The supervisor shim: a small process, one per attempt, that outlives the
//! engine. It makes itself a session leader at once; it starts the
//! workload, waits for it and records how it ended.
//!
//! Invocation (after whatever leading arguments select the shim, such as
//! `canopy __supervise`): `--attempt <dir> -- <argv...>`. The workload gets
//! the shim's environment and working directory as they are; the launcher
//! sets both. The shim writes `pid` once the child runs and `exit.json`
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
//! It must not interpret the command (no shell), touch anything outside the
//! attempt directory, or write environment values anywhere: secrets reach
//! the workload through the environment only.

use super::layout::{AttemptDir, ExitRecord, LaunchRecord, PidRecord, append_private, read_json, write_json};
use super::procfs;
use crate::spec::Spec;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    let Some((dir, argv)) = parse_args(args) else {
        return USAGE_ERROR;
    };
    let dir = AttemptDir::new(dir);
    // Its own session, so it outlives the launcher and its terminal. The
    // launcher does not arrange this (see `launch::start`); a launcher that
    // did makes this fail harmlessly.
    let _ = procfs::setsid();
    let mut log = Notes::open(&dir);
    match run(&dir, &argv, &mut log) {
        Ok(()) => 0,
        Err(e) => {
            log.note(&format!("could not record the attempt's end: {e}"));
            RECORD_ERROR
        }
    }
}

fn parse_args(args: &[String]) -> Option<(PathBuf, Vec<String>)> {
    let mut it = args.iter();
    if it.next()? != "--attempt" {
        return None;
    }
    let dir = PathBuf::from(it.next()?);
    if it.next()? != "--" {
        return None;
    }
    let argv: Vec<String> = it.cloned().collect();
    if argv.is_empty() || !dir.is_absolute() { None } else { Some((dir, argv)) }
}

fn run(dir: &AttemptDir, argv: &[String], log: &mut Notes) -> io::Result<()> {
    let me = procfs::proc_ref(std::process::id() as i32)
        .ok_or_else(|| io::Error::other("cannot read /proc/self/stat"))?;
    let session = procfs::stat(me.pid).map(|s| s.session);
    // Read before the workload runs: it can write in this directory.
    let spec = read_json::<Spec>(&dir.spec())
        .map_err(|e| e.to_string())
        .and_then(|s| s.ok_or_else(|| "spec.json is missing".to_string()))
        .map_err(|e| format!("the supervisor could not read what to collect: {e}"));
    let limits = match read_json::<LaunchRecord>(&dir.launch()) {
        Ok(Some(l)) => l.outputs,
        other => {
            log.note(&format!("launch.json unreadable ({other:?}); default output limits apply"));
            Default::default()
        }
    };
    let stdout = append_private(&dir.stdout())?;
    let stderr = append_private(&dir.stderr())?;
    let mut err_for_notes = stderr.try_clone()?;
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(stdout).stderr(stderr).process_group(0);
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
            };
            return write_json(&dir.exit(), &exit);
        }
    };
    let pgid = child.id() as i32;
    let child_ref = procfs::proc_ref(pgid);
    write_json(&dir.pid(), &PidRecord { supervisor: me, child: child_ref, session })?;
    log.note(&format!("started {:?} as pid {pgid}", argv[0]));
    let status = child.wait()?;
    let ended_at_ms = super::layout::now_ms();
    clean_up_group(pgid, log);
    let exit = ExitRecord { code: status.code(), signal: status.signal(), ended_at_ms, error: None };
    log.note(&format!("workload ended: {status}"));
    if status.code() == Some(0) {
        log.note("collecting outputs");
        match super::outputs::supervise_collection(dir, spec.as_ref().map_err(Clone::clone), &limits) {
            Ok(()) => log.note("outputs collected; see collected.json"),
            // Without a manifest the provider collects them itself.
            Err(e) => log.note(&format!("could not record the outputs' collection: {e}")),
        }
    }
    write_json(&dir.exit(), &exit)
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
        let (dir, argv) = parse_args(&s(&["--attempt", "/r/t", "--", "echo", "a b"])).unwrap();
        assert_eq!(dir, PathBuf::from("/r/t"));
        assert_eq!(argv, s(&["echo", "a b"]));
        assert!(parse_args(&s(&["--attempt", "/r/t", "--"])).is_none());
        assert!(parse_args(&s(&["--attempt", "rel", "--", "x"])).is_none());
        assert!(parse_args(&s(&["/r/t", "--", "x"])).is_none());
        assert_eq!(supervise_main(&s(&["nonsense"])), USAGE_ERROR);
    }
}
