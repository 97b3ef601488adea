//! Processes as Linux shows them: `/proc/<pid>/stat` for liveness with a
//! start-time check, and signals to process groups.
//!
//! This module owns the only `unsafe` calls of the local provider (libc
//! `kill`, `setsid`, `statvfs`, and `prctl`/`getppid` in the supervisor's
//! spawn hook). It decides nothing: callers say which process or group to
//! signal after checking it is theirs with a [`ProcRef`].

use super::layout::ProcRef;
use std::io;

/// The fields of `/proc/<pid>/stat` the provider needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z` (zombie), `X` (dead)…
    pub state: char,
    pub pgrp: i32,
    pub session: i32,
    /// Clock ticks after boot when the process started.
    pub start_time: u64,
}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // fields[0] is field 3 (state); field N is fields[N - 3].
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        session: fields.get(3)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

pub fn stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// This pid as a [`ProcRef`], if it exists now.
pub fn proc_ref(pid: i32) -> Option<ProcRef> {
    stat(pid).map(|s| ProcRef { pid, start_time: s.start_time })
}

/// Whether the very process `r` names still runs: same pid, same start
/// time, not a zombie.
pub fn is_alive(r: &ProcRef) -> bool {
    stat(r.pid).is_some_and(|s| s.start_time == r.start_time && !matches!(s.state, 'Z' | 'X'))
}

/// Sends `signal` to process group `pgid`. `Ok(false)` when the group no
/// longer exists.
pub fn signal_group(pgid: i32, signal: i32) -> io::Result<bool> {
    if pgid <= 1 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // a negative pid addresses the process group `pgid` (> 1, checked).
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ESRCH) => Ok(false),
        _ => Err(err),
    }
}

/// The live processes of group `pgid` in session `session` that started no
/// earlier than `since` (clock ticks after boot): the members of a group
/// whose leader started at `since`, even after the leader is gone. While a
/// group has members its id cannot be reused, and a reused one would also
/// have to be in a session of the same id.
pub fn group_members(pgid: i32, session: i32, since: u64) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            stat(pid).is_some_and(|s| {
                s.pgrp == pgid
                    && s.session == session
                    && s.start_time >= since
                    && !matches!(s.state, 'Z' | 'X')
            })
        })
        .collect()
}

/// Whether any process (zombies included) is still in group `pgid`.
pub fn group_exists(pgid: i32) -> bool {
    match signal_group(pgid, 0) {
        Ok(exists) => exists,
        // EPERM: it exists but is not ours to signal.
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
    }
}

/// Makes the calling process a session (and group) leader, detached from
/// any terminal. Fails harmlessly when it already leads a group.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid(2) has no arguments and no memory effects.
    if unsafe { libc::setsid() } == -1 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Makes a command's process a session leader before it runs, so it is
/// detached from the launcher's terminal and survives the launcher.
pub fn new_session_on_spawn(cmd: &mut tokio::process::Command) {
    // SAFETY: the closure runs in the forked child before exec; it only
    // calls setsid(2), which is async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
}

/// Makes the spawned process die (SIGKILL) when the calling process does:
/// `PR_SET_PDEATHSIG` in the child before exec. Should the caller already
/// be gone by then (the child was reparented), the child exits at once
/// instead of running unsupervised. For a single-threaded caller only (the
/// supervisor): the signal follows the thread that spawned.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid(2) has no arguments and no memory effects.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child before exec; it calls
    // only prctl(2), getppid(2) and _exit(2), which are async-signal-safe,
    // and allocates nothing (an OS error is stored inline).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Bytes available to unprivileged users on the filesystem holding `path`.
pub fn disk_free_bytes(path: &std::path::Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated string that outlives the call and
    // `st` is a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_command_names() {
        let line = "4242 (we(ird) name) S 1 4240 4240 0 -1 4194560 120 0 0 0 1 2 0 0 20 0 1 0 987654 \
                    1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s, ProcStat { state: 'S', pgrp: 4240, session: 4240, start_time: 987654 });
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_different_start_time_is_not() {
        let me = proc_ref(std::process::id() as i32).unwrap();
        assert!(is_alive(&me));
        assert!(!is_alive(&ProcRef { start_time: me.start_time + 1, ..me }));
        assert!(signal_group(1, 0).is_err());
    }
}
