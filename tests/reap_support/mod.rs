//! Every process a test caused, found by the directory the test gave it,
//! so that none outlives the test.
//!
//! A test makes a unique directory (a `tempfile::tempdir()`) and names it
//! to everything it starts: `--store DIR`, `CANOPY_HOME=DIR`, a spec or
//! trace inside it. What those start in turn names it too: a console's
//! engine handed over to a background `canopy serve` gets `--store DIR`
//! (in a session of its own, so no process-group kill reaches it), a
//! workload's supervisor gets its attempt directory under the store, the
//! workload its output directory. [`Reaper`] finds them by scanning
//! `/proc` for that directory in a process's command line or environment,
//! whoever its parent now is.
//!
//! Declared first in a test (so dropped last, after the test's own
//! guards), it waits a moment for what is still ending to end. Whatever
//! is left is a leak: it is killed, and the test fails naming it (unless
//! the test is failing already, in which case it is only killed).
#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

/// How long processes may take to end by themselves once the test has
/// torn down (a console that lost its terminal stops its engine, which
/// may take its 10 s stop and more on a loaded machine). As long as the
/// tests' other waits; a passing run waits only as long as its processes
/// take to go.
const SETTLE: Duration = Duration::from_secs(60);
/// How long a leaked process may take to obey SIGTERM before SIGKILL.
const TERM_WAIT: Duration = Duration::from_secs(5);

/// Fails the test if a process naming its directory outlives it.
pub struct Reaper {
    mark: String,
}

impl Reaper {
    /// Watches for processes that name `dir` (absolute, unique to the test).
    pub fn new(dir: &Path) -> Reaper {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        Reaper { mark: dir.display().to_string() }
    }

    /// Live processes (not this one, not zombies) whose command line or
    /// environment names the directory: (pid, command line).
    pub fn survivors(&self) -> Vec<(i32, String)> {
        survivors(&self.mark)
    }

    /// Waits up to [`SETTLE`] for every survivor to end; what is left.
    fn settle(&self) -> Vec<(i32, String)> {
        let start = Instant::now();
        loop {
            let left = self.survivors();
            if left.is_empty() || start.elapsed() >= SETTLE {
                return left;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let leaked = self.settle();
        if leaked.is_empty() {
            return;
        }
        kill_all(&self.mark, &leaked);
        let list: Vec<String> = leaked.iter().map(|(pid, cmd)| format!("  pid {pid}: {cmd}")).collect();
        if std::thread::panicking() {
            eprintln!(
                "the failing test left {} process(es) running; killed:\n{}",
                leaked.len(),
                list.join("\n")
            );
        } else {
            panic!(
                "the test left {} process(es) running {}s after its teardown (now killed):\n{}",
                leaked.len(),
                SETTLE.as_secs(),
                list.join("\n")
            );
        }
    }
}

/// SIGTERM, then SIGKILL to whatever still runs after [`TERM_WAIT`].
fn kill_all(mark: &str, procs: &[(i32, String)]) {
    for (pid, _) in procs {
        // SAFETY: kill(2) on a process this test caused (it names the
        // test's own directory); no memory is involved.
        unsafe { libc::kill(*pid, libc::SIGTERM) };
    }
    let start = Instant::now();
    while !survivors(mark).is_empty() && start.elapsed() < TERM_WAIT {
        std::thread::sleep(Duration::from_millis(100));
    }
    for (pid, _) in survivors(mark) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

fn survivors(mark: &str) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found: Vec<(i32, String)> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            // A zombie's command line is empty: it has ended.
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok().filter(|c| !c.is_empty())?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ").trim_end().to_string();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            (cmd.contains(mark) || String::from_utf8_lossy(&env).contains(mark)).then_some((pid, cmd))
        })
        .collect();
    found.sort();
    found
}
