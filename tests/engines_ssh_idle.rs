//! A `canopy serve` killed with `kill -9` cannot close its ssh
//! connections to the owners' hosts (one ControlMaster per host); they
//! close by themselves once idle for `[[ssh]] connection_idle`, so none is
//! left behind. Before, a master was kept for as long as its host answered
//! (`ControlPersist=yes`) and every crash of a server leaked one per host,
//! with its session on the host.
//!
//! The masters inherit the server's environment, which names this test's
//! directory, so the reaper finds them (and fails the test if any is
//! left). Skips visibly without the hosts of `scripts/engines/sshd.sh`;
//! fails under `CANOPY_ENGINES=require`.

mod engines_support;
mod reap_support;

use engines_support::{forget_store, ssh_hosts, ssh_toml};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_canopy");
/// The idle time configured.
const IDLE: &str = "3s";
/// Time enough to start a debug build with ssh hosts (hashing and
/// uploading the binary) on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(120);

#[test]
fn a_killed_servers_ssh_connections_close_once_idle() {
    let name = "a_killed_servers_ssh_connections_close_once_idle";
    let Some(h) = ssh_hosts(name) else { return };
    let dir = tempfile::tempdir().unwrap();
    let reaper = reap_support::Reaper::new(dir.path());
    let store = dir.path().join("store");
    let config = dir.path().join("canopy.toml");
    let toml = ssh_toml(&h, &h.known_hosts, "60s", "").replacen(
        "[[ssh]]\n",
        &format!("[[ssh]]\nconnection_idle = {IDLE:?}\n"),
        1,
    );
    std::fs::write(&config, toml).unwrap();
    let stderr = dir.path().join("serve.stderr");
    let mut serve = Command::new(BIN)
        .arg("--store")
        .arg(&store)
        .args(["serve", "--no-faults"])
        // Named in the environment the masters inherit.
        .env("CANOPY_CONFIG", &config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let said = || std::fs::read_to_string(&stderr).unwrap_or_default();
    // The store's id (its directory on the hosts, removed at the end).
    let start = Instant::now();
    let id = loop {
        if let Some(id) = said().split("(id ").nth(1).and_then(|r| r.split(')').next()) {
            break id.to_string();
        }
        assert!(serve.try_wait().unwrap().is_none(), "canopy serve exited: {}", said());
        assert!(start.elapsed() < DEADLINE, "canopy serve did not start: {}", said());
        std::thread::sleep(Duration::from_millis(100));
    };
    let _forget = forget_store(&h, &id);
    // The engine reaches both hosts: a master per host (`ssh … -M …`,
    // this test's: its environment names the test's directory).
    let masters = || {
        reaper
            .survivors()
            .into_iter()
            .filter(|(_, cmd)| cmd.starts_with("ssh ") && cmd.contains(" -M "))
            .collect::<Vec<_>>()
    };
    while masters().len() < 2 {
        assert!(
            start.elapsed() < DEADLINE,
            "no ssh master for each host: {:?}\n{}",
            reaper.survivors(),
            said()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    serve.kill().unwrap();
    serve.wait().unwrap();
    let killed = Instant::now();
    // Idle from the kill on: gone within the idle time, and some slack
    // for a loaded machine (ssh checks its timers about every second).
    while !masters().is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "ssh masters still open {:?} after the server was killed: {:?}",
            killed.elapsed(),
            masters()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The reaper (dropped last) fails the test on anything else left.
}
