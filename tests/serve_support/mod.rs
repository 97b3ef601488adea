//! What the tests of a real `canopy serve` share (`api_limits`,
//! `store_private`): the binary started over a store with the umask users
//! usually have and, when asked, a low open-file limit; the CLI run
//! against the same store with a deadline; and a stop that reaps the
//! server whatever happens to the test.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_canopy");

/// The longest any single wait may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// A running `canopy serve`; stopped (SIGTERM, then SIGKILL) and reaped
/// when dropped.
pub struct Serve {
    child: Option<Child>,
    pub store: PathBuf,
    pub config: PathBuf,
    stderr: PathBuf,
    /// The TCP URL its ready line names, with `--listen`.
    pub url: Option<String>,
}

/// Settings of the server's process.
#[derive(Default, Clone, Copy)]
pub struct Process {
    /// RLIMIT_NOFILE (soft and hard) for the server.
    pub nofile: Option<u64>,
    /// More environment variables for the server.
    pub env: &'static [(&'static str, &'static str)],
}

/// A `Command` for the binary over `store`, with umask 022 (so anything
/// created without an explicit mode would be group and world readable).
pub fn command(store: &Path, config: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--store").arg(store).arg("--config").arg(config).env("NO_COLOR", "1");
    // SAFETY: runs in the forked child before exec; umask(2) is
    // async-signal-safe and allocates nothing.
    unsafe {
        c.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        });
    }
    c
}

impl Serve {
    /// Starts `canopy serve --no-faults ARGS` over `store` (the demo fleet
    /// and this host) and waits for its ready line.
    pub fn start(store: &Path, args: &[&str], process: Process) -> Serve {
        let dir = store.parent().expect("a store inside a test directory");
        let config = dir.join("canopy.toml");
        if !config.exists() {
            std::fs::write(&config, "include_demo_fleet = true\n").unwrap();
        }
        let stderr = dir.join("serve.stderr");
        let mut c = command(store, &config);
        c.args(["serve", "--no-faults"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .envs(process.env.iter().copied());
        if let Some(n) = process.nofile {
            // SAFETY: as in `command`: setrlimit(2) is async-signal-safe.
            unsafe {
                c.pre_exec(move || {
                    let lim = libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let child = c.spawn().unwrap();
        let mut serve = Serve { child: Some(child), store: store.to_path_buf(), config, stderr, url: None };
        let deadline = Instant::now() + DEADLINE;
        loop {
            let text = serve.stderr_text();
            if text.contains("API on") {
                serve.url = text
                    .split_whitespace()
                    .find(|w| w.starts_with("https://") || w.starts_with("http://"))
                    .map(|u| u.trim_end_matches(['.', ',']).to_string());
                return serve;
            }
            if let Some(status) = serve.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("canopy serve exited ({status}): {text}");
            }
            assert!(Instant::now() < deadline, "canopy serve did not start: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the server has written to its stderr.
    pub fn stderr_text(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Runs `canopy ARGS` against the store (its socket), with a deadline.
    pub fn canopy(&self, args: &[&str]) -> Output {
        self.canopy_with(args, &[])
    }

    /// [`Serve::canopy`] with more environment variables.
    pub fn canopy_with(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut child = command(&self.store, &self.config)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + DEADLINE;
        while child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("canopy {args:?} did not answer within {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child.wait_with_output().unwrap()
    }

    /// `kill -9`: the server dies between any two instructions, as on a
    /// crash or an OOM kill; reaped here.
    pub fn kill9(mut self) {
        let mut child = self.child.take().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGTERM, and waits for the server to exit (SIGKILL past the
    /// deadline, which fails the test).
    pub fn stop(mut self) -> ExitStatus {
        let mut child = self.child.take().unwrap();
        let status = stop(&mut child);
        assert!(status.is_some(), "canopy serve did not stop within {DEADLINE:?} of SIGTERM");
        status.unwrap()
    }
}

fn stop(child: &mut Child) -> Option<ExitStatus> {
    // SAFETY: signals only the server this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = stop(&mut c);
        }
    }
}
