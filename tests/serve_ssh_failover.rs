//! Failover with work on real hosts (issue 33): three `canopy serve` on
//! one PostgreSQL journal whose fleet is the two owners' sshd hosts of
//! `scripts/engines/sshd.sh`. The leader is killed with `kill -9` twice
//! while workloads run on the hosts and more are submitted through
//! `CANOPY_SERVER` listing all three. What runs there is not stopped (the
//! new leader renews the hosts' leases in time) and ends with its one
//! attempt; every acknowledged submit is there once; and, counted on the
//! hosts themselves, no workload started twice and no attempt directory
//! was made twice. Skips visibly without the hosts or PostgreSQL; fails
//! under `CANOPY_ENGINES=require`.

mod engines_support;
mod journal_support;
mod reap_support;
mod standby_support;

use canopy::engine::model::{AttemptState, WorkloadId, WorkloadState};
use engines_support::{SshHosts, forget_store, home_of, ssh_hosts, ssh_toml};
use journal_support::Store;
use standby_support::{BIN, Cluster, DEADLINE};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the long workloads run: past the first failover and then the
/// hosts' lease, so that work a new leader failed to keep (its host's
/// lease not renewed) would be stopped by its host before it ends.
const LONG_S: u64 = 75;
/// The hosts' lease (the default): a host stops Canopy's work there when
/// no server has renewed it for this long. A new leader renews it only
/// once it has started, and a debug build takes 12 s or more to start
/// with ssh hosts (hashing its 170 MB binary to upload), so the lease
/// left at a kill (at least 2/3 of it: it is renewed every third) must
/// cover the journal's term and that; with 15 s this test failed.
const HOST_LEASE: &str = "60s";

/// A spec file running `sleep_s` seconds on an owner's host, that first
/// appends `<workload> <attempt>` to `marker` (in the owner's home), so
/// the host itself counts every start.
fn host_spec(dir: &Path, name: &str, sleep_s: u64, marker: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let script = format!(
        "echo \\\"$CANOPY_WORKLOAD $CANOPY_ATTEMPT\\\" >> \\\"$HOME/{marker}\\\"; sleep {sleep_s}; echo finished"
    );
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\n\n[runtime]\ncommand = [\"sh\", \"-c\", \"{script}\"]\nstop_grace = \"5s\"\n\n\
             [resources]\ngpus = 0\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n\
             [constraints]\nproviders = [\"ssh\"]\ncapabilities = [\"owners\"]\n"
        ),
    )
    .unwrap();
    path
}

/// The starts each host's marker file recorded: workload id → the
/// attempts that started, over both hosts.
fn starts(h: &SshHosts, marker: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for host in [&h.a, &h.b] {
        let text = std::fs::read_to_string(home_of(&host.user).join(marker)).unwrap_or_default();
        for line in text.lines() {
            let (w, a) = line.split_once(' ').unwrap_or((line, ""));
            out.entry(w.to_string()).or_default().push(format!("{a} on {}", host.name));
        }
    }
    out
}

/// Removes the marker files from both hosts, whatever happens.
struct Markers(Vec<PathBuf>);

impl Drop for Markers {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Samples the store's attempt directories on both hosts (the ssh
/// provider's own record of a launch there: one per attempt token) until
/// stopped: every `(host, token)` it saw.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<BTreeSet<(String, String)>>>,
}

impl Sampler {
    fn start(h: &SshHosts, store: &str) -> Sampler {
        let dirs: Vec<(String, PathBuf)> = [&h.a, &h.b]
            .iter()
            .map(|x| (x.name.to_string(), home_of(&x.user).join(".canopy-host").join(store).join("attempts")))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            while !s.load(Ordering::Relaxed) {
                for (host, dir) in &dirs {
                    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                        seen.insert((host.clone(), e.file_name().to_string_lossy().into_owned()));
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        });
        Sampler { stop, thread: Some(thread) }
    }

    fn finish(mut self) -> BTreeSet<(String, String)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Kills whatever the killed servers may have left behind under the
/// test's directory (an ssh connection or request of theirs), once the
/// test is done.
struct Leftovers(reap_support::Reaper);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for (pid, _) in self.0.survivors() {
            // SAFETY: kill(2) on a process naming this test's own directory.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// A `submit --wait` through all three servers, killed if the test
/// fails before it ends.
struct Waiting(Option<Child>);

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Polls the journal until every workload in `ids` is final; their
/// states and attempts.
fn wait_final(s: &Store, ids: &[String]) -> BTreeMap<String, (WorkloadState, Vec<AttemptState>)> {
    let deadline = Instant::now() + Duration::from_secs(LONG_S) + 2 * DEADLINE;
    loop {
        let j = s.open();
        let mut all = BTreeMap::new();
        for id in ids {
            let w: WorkloadId = id.parse().unwrap();
            let rec = j.workload(w).unwrap().unwrap_or_else(|| panic!("{id} is not in the journal"));
            let attempts = j.attempts(w).unwrap().into_iter().map(|a| a.state).collect();
            all.insert(id.clone(), (rec.state, attempts));
        }
        if all.values().all(|(st, _)| st.is_final()) {
            return all;
        }
        assert!(Instant::now() < deadline, "not all final: {all:#?}");
        drop(j);
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What the journal says of `id`'s attempts and events, for a failure.
fn history(s: &Store, id: &str) -> String {
    let j = s.open();
    let w: WorkloadId = id.parse().unwrap();
    let attempts: Vec<String> = j
        .attempts(w)
        .unwrap()
        .iter()
        .map(|a| {
            format!("{:?} on {} exit {:?} {:?}: {:?}", a.state, a.node, a.exit_code, a.class, a.evidence)
        })
        .collect();
    let events: Vec<String> = j.events(w).unwrap().into_iter().map(|e| e.message).collect();
    format!("attempts {attempts:#?}, events {events:#?}")
}

/// Polls the journal until every workload in `ids` has a running attempt.
fn wait_running(s: &Store, ids: &[String]) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let j = s.open();
        let running = ids
            .iter()
            .filter(|id| {
                let w: WorkloadId = id.parse().unwrap();
                j.attempts(w).unwrap().iter().any(|a| a.state == AttemptState::Running)
            })
            .count();
        if running == ids.len() {
            return;
        }
        assert!(Instant::now() < deadline, "{running} of {} running", ids.len());
        drop(j);
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn work_on_ssh_hosts_rides_out_two_kill_9s_of_the_leader_and_starts_once() {
    let name = "work_on_ssh_hosts_rides_out_two_kill_9s_of_the_leader_and_starts_once";
    let Some(h) = ssh_hosts(name) else { return };
    // Shared: this test takes no host down.
    let _lock = h.lock(false);
    let Some(s) = Store::postgres("ssh_failover") else { return };
    let dir = tempfile::tempdir().unwrap();
    let _leftovers = Leftovers(reap_support::Reaper::new(dir.path()));
    let marker = format!(
        "canopy-ssh-failover-{}-{}.starts",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let _markers = Markers([&h.a, &h.b].iter().map(|x| home_of(&x.user).join(&marker)).collect());
    let mut c = Cluster::start(
        dir.path(),
        &s,
        &format!("include_demo_fleet = false\n{}", ssh_toml(&h, &h.known_hosts, HOST_LEASE, "")),
    );
    let store = s.open().store_id().to_string();
    let _forget = forget_store(&h, &store);
    let sampler = Sampler::start(&h, &store);

    // Long work on the hosts, and a `submit --wait` for one more.
    let long = host_spec(dir.path(), "long", LONG_S, &marker);
    let mut ids: Vec<String> = (0..3).map(|_| c.submit(&long).expect("a submit before any kill")).collect();
    let waiter = Command::new(BIN)
        .arg("--store")
        .arg(dir.path().join("waiter"))
        .args(["submit", "--wait", long.to_str().unwrap()])
        .env("CANOPY_SERVER", &c.all)
        .env("CANOPY_TOKEN", &c.token)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut waiter = Waiting(Some(waiter));
    wait_running(&s, &ids);

    // The burst: short work on the hosts, submitted without pause.
    let stop = Arc::new(AtomicBool::new(false));
    let burst = {
        let (all, token, stop) = (c.all.clone(), c.token.clone(), stop.clone());
        let short = host_spec(dir.path(), "short", 1, &marker);
        std::thread::spawn(move || {
            let (mut acked, mut unknown) = (Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                let out =
                    standby_support::through(&all, &token, &["submit", "--json", short.to_str().unwrap()]);
                if !out.status.success() {
                    unknown += 1;
                    continue;
                }
                let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                acked.push(v["id"].as_str().unwrap().to_string());
            }
            (acked, unknown)
        })
    };
    for _ in 0..2 {
        std::thread::sleep(Duration::from_secs(3));
        c.kill_leader();
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let (acked, unknown) = burst.join().unwrap();
    assert!(acked.len() >= 3, "the burst went on across the failovers: {} acknowledged", acked.len());

    // `submit --wait` followed its workload to its end through the last
    // leader: exit 0, it succeeded.
    let mut child = waiter.0.take().unwrap();
    let deadline = Instant::now() + Duration::from_secs(LONG_S) + 2 * DEADLINE;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let waited = child.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "submit --wait: {}", String::from_utf8_lossy(&waited.stderr));

    // Every acknowledged submit is there exactly once; nothing was made
    // beyond what was acknowledged or left unknown.
    let listed = c.listed();
    for id in ids.iter().chain(&acked) {
        assert_eq!(listed.iter().filter(|w| w["id"] == id.as_str()).count(), 1, "{id} exactly once");
    }
    let waited_id = listed
        .iter()
        .filter(|w| w["name"] == "long")
        .map(|w| w["id"].as_str().unwrap().to_string())
        .find(|id| !ids.contains(id))
        .expect("the waited workload");
    ids.push(waited_id);
    let shorts = listed.iter().filter(|w| w["name"] == "short").count();
    assert!(
        shorts >= acked.len() && shorts <= acked.len() + unknown,
        "{shorts} short workloads for {} acknowledged and {unknown} unknown",
        acked.len()
    );

    // The long work was not stopped: each ended well with its one attempt.
    let every: Vec<String> = listed
        .iter()
        .filter(|w| w["name"] == "short" || w["name"] == "long")
        .map(|w| w["id"].as_str().unwrap().to_string())
        .collect();
    let end = wait_final(&s, &every);
    for id in &ids {
        let (state, attempts) = &end[id];
        assert_eq!(
            (state, attempts.as_slice()),
            (&WorkloadState::Succeeded, &[AttemptState::Succeeded][..]),
            "{id} ran through both failovers with one attempt; {}",
            history(&s, id)
        );
    }
    let seen = sampler.finish();

    // Counted on the hosts: no attempt's command started twice, none
    // started beyond the attempts the journal has, and each long
    // workload's one attempt started once, its attempt directory made on
    // one host only.
    let started = starts(&h, &marker);
    for id in &every {
        let lines = started.get(id).cloned().unwrap_or_default();
        let attempts: BTreeSet<&str> = lines.iter().map(|l| l.split(" on ").next().unwrap()).collect();
        assert_eq!(attempts.len(), lines.len(), "{id}: an attempt started twice on the hosts: {lines:?}");
        assert!(lines.len() <= end[id].1.len(), "{id} started {lines:?} for attempts {:?}", end[id].1);
        if end[id].0 == WorkloadState::Succeeded {
            assert!(!lines.is_empty(), "{id} succeeded, so it started on a host: {started:?}");
        }
    }
    for id in &ids {
        assert_eq!(started.get(id).map_or(0, Vec::len), 1, "{id} started once: {started:?}");
    }
    for id in &ids {
        let w: WorkloadId = id.parse().unwrap();
        let prefix = format!("canopy-{store}-w{}-", w.0);
        let dirs: Vec<_> = seen.iter().filter(|(_, t)| t.starts_with(&prefix)).collect();
        assert_eq!(dirs.len(), 1, "{id}: one attempt directory on one host: {dirs:?}");
    }
    for x in &c.servers {
        let said = x.said();
        assert!(!said.contains(&standby_support::password(&s)), "{said}");
    }
}
