//! Canopy on two owners' hosts over SSH (the two sshd of
//! `scripts/engines/sshd.sh`, users `canopy-owner-a` and `canopy-owner-b`),
//! through the engine: logs and outputs back, a secret that shows in no
//! process's arguments and no file, nothing left on the host after the end
//! or a cancel, the connection cut mid-run (re-adopted), a host that drops
//! off the network (its work stops there once the lease runs out and runs
//! once on the other host), unknown and changed host keys refused, an
//! owner's drain and a lend window that closes. Skips visibly without the
//! hosts; fails under `CANOPY_ENGINES=require`.

mod engines_support;

use canopy::engine::command::{Command, CommandResult};
use canopy::engine::model::{AttemptState, WorkloadState};
use canopy::providers::Provider;
use canopy::providers::ssh::{SshConfig, SshProvider};
use engines_support::*;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

/// Processes of `user` whose command line mentions `needle`.
fn processes_of(user: &str, needle: &str) -> Vec<String> {
    let out = std::process::Command::new("ps").args(["-u", user, "-o", "pid=,args="]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(needle)).map(str::to_owned).collect()
}

/// The attempt directories the store has on `user`'s host.
fn attempts_on(user: &str, store: &str) -> Vec<String> {
    let dir = home_of(user).join(".canopy-host").join(store).join("attempts");
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

/// The attempt directories still on `user`'s host once they have had up
/// to 30 s to go: an ended attempt's directory is removed after its end is
/// journalled, so it may outlive the final state by a moment.
async fn left_on(user: &str, store: &str) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !attempts_on(user, store).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    attempts_on(user, store)
}

/// Every process whose command line or environment holds `needle`, but
/// this test process: `(pid, uid, what it runs)`.
fn holders(needle: &[u8]) -> (Vec<String>, Vec<(i32, u32, String)>) {
    let mut in_args = Vec::new();
    let mut in_env = Vec::new();
    let me = std::process::id() as i32;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let shown = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            in_args.push(format!("{pid}: {shown}"));
        }
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if env.windows(needle.len()).any(|w| w == needle) {
            use std::os::unix::fs::MetadataExt;
            let uid = std::fs::metadata(e.path()).map(|m| m.uid()).unwrap_or(0);
            in_env.push((pid, uid, shown));
        }
    }
    (in_args, in_env)
}

fn uid_of(user: &str) -> u32 {
    sh(&format!("id -u {user}")).trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn logs_and_outputs_come_back_the_secret_stays_hidden_and_nothing_is_left() {
    let Some(h) = ssh_hosts("logs_and_outputs_come_back_the_secret_stays_hidden_and_nothing_is_left") else {
        return;
    };
    let _l = h.lock(false);
    let (canary, sha) = canary();
    // SAFETY (test only): set before the engine starts, read by it only.
    unsafe { std::env::set_var("CANOPY_TEST_SSH_CANARY", &canary) };
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "20s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let script = "echo \"sha=$(printf %s \"$CANOPY_TEST_SSH_CANARY\" | sha256sum | cut -d' ' -f1)\"; \
                  echo \"gpus=[${CUDA_VISIBLE_DEVICES-unset}] user=$(id -un)\"; echo oops >&2; sleep 4; \
                  echo done > \"$CANOPY_OUTPUT_DIR/result.txt\"";
    let s = ssh_spec(
        "ssh-e2e",
        script,
        json!({
            "runtime": { "secrets": ["CANOPY_TEST_SSH_CANARY"] },
            "outputs": [{ "name": "result", "path": "/result.txt", "required": true }],
        }),
    );
    let id = submit(&r, s).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let host = host_named(&h, &a[0].node).clone();
    // While it runs: the value is in no process's arguments. On the
    // owner's side only the attempt's own processes hold it in their
    // environment: never sshd, Canopy's host agent or the supervisor (it
    // reads the secrets on its stdin). (On Canopy's side
    // the operator's processes inherit the environment the operator put
    // it in, as every child of the engine does; ssh sends none of it.)
    let (in_args, in_env) = holders(canary.as_bytes());
    assert!(in_args.is_empty(), "the secret shows in ps: {in_args:?}");
    // SAFETY: getuid cannot fail.
    let operator = unsafe { libc::getuid() };
    let uid = uid_of(&host.user);
    let owner_side: Vec<_> = in_env.iter().filter(|(_, u, _)| *u != operator).collect();
    assert!(!owner_side.is_empty(), "the workload has the secret in its environment: {in_env:?}");
    for (pid, u, what) in owner_side {
        assert!(
            *u == uid && !what.contains("sshd") && !what.contains("__host") && !what.contains("__supervise"),
            "process {pid} ({what}, uid {u}) holds the secret"
        );
    }
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].pool, "ssh/lab");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(
        logs.iter().any(|(_, s)| s.contains(&format!("sha={sha}"))),
        "the workload saw the secret: {logs:?}"
    );
    assert!(
        logs.iter().any(|(_, s)| s.contains(&format!("user={}", host.user))),
        "ran as the owner's user: {logs:?}"
    );
    assert!(logs.iter().any(|(_, s)| s.contains("gpus=[unset]")), "no GPUs on a CPU-only host: {logs:?}");
    let errs = find_files(&t.path().join("home"), "stderr.log");
    assert!(errs.iter().any(|(_, s)| s.contains("oops")), "stderr shipped: {errs:?}");
    let art = find_files(&t.path().join("home"), "result");
    assert_eq!(art.len(), 1, "one artifact collected: {art:?}");
    assert_eq!(art[0].1, "done\n");
    // Nothing of the attempt is left on the host, and the secret is in no
    // file there.
    let store = r.store_id.clone();
    let left = left_on(&host.user, &store).await;
    assert!(left.is_empty(), "attempt directories left on {}: {left:?}", host.user);
    let store_dir = format!("/.canopy-host/{store}/");
    assert!(processes_of(&host.user, &store_dir).is_empty(), "{:?}", processes_of(&host.user, ""));
    let hits = files_containing(&home_of(&host.user), canary.as_bytes());
    assert!(hits.is_empty(), "the secret was written on the host: {hits:?}");
    r.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_connection_leaves_the_attempt_running_and_it_is_readopted() {
    let Some(h) = ssh_hosts("a_cut_connection_leaves_the_attempt_running_and_it_is_readopted") else {
        return;
    };
    let _l = h.lock(true);
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "30s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let s = ssh_spec("ssh-cut", "echo started; sleep 8; echo finished", json!({}));
    let id = submit(&r, s).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let host = host_named(&h, &a[0].node).clone();
    // Cut both ends: the host's sessions, and Canopy's ControlMaster.
    h.cut(host.name);
    for m in control_masters(&host.user) {
        // SAFETY: signalling a process this test identified by pid.
        unsafe { libc::kill(m, libc::SIGKILL) };
    }
    let store_dir = format!("/.canopy-host/{}/", r.store_id);
    assert!(!processes_of(&host.user, &store_dir).is_empty(), "the supervisor outlived the connection");
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1, "re-adopted, not run again: {a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(
        logs.iter().any(|(_, s)| s.matches("started").count() == 1 && s.contains("finished")),
        "{logs:?}"
    );
    r.stop(Duration::from_secs(10)).await.unwrap();
}

/// This process's ssh ControlMasters to `user`'s host.
fn control_masters(user: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> =
            cmd.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        if args.first().is_some_and(|a| a == "ssh")
            && args.iter().any(|a| a == "-M")
            && args.iter().any(|a| a == user)
        {
            out.push(pid);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_off_the_network_stops_its_work_after_the_lease_and_it_runs_once_elsewhere() {
    let Some(h) =
        ssh_hosts("a_host_off_the_network_stops_its_work_after_the_lease_and_it_runs_once_elsewhere")
    else {
        return;
    };
    let _l = h.lock(true);
    let marker = PathBuf::from(format!("/tmp/canopy-ssh-ran-{}", std::process::id()));
    std::fs::write(&marker, "").unwrap();
    sh(&format!("chmod 666 {}", marker.display()));
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "4s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let script = format!(
        "echo \"start $(id -un)\" >> {m}; sleep 15; echo \"done $(id -un)\" >> {m}",
        m = marker.display()
    );
    let id = submit(&r, ssh_spec("ssh-lost", &script, json!({ "runtime": { "stop_grace": "1s" } }))).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let lost = host_named(&h, &a[0].node).clone();
    let down = h.stop(lost.name);
    h.cut(lost.name);
    for m in control_masters(&lost.user) {
        // SAFETY: signalling a process this test identified by pid.
        unsafe { libc::kill(m, libc::SIGKILL) };
    }
    let (w, a) = wait(t.path(), id, LONG * 2, "the end", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "{a:#?}");
    assert_eq!(a[0].class, Some(canopy::failure::FailureClass::Node), "charged to the host: {a:#?}");
    assert_ne!(a[1].node, a[0].node);
    // The lost host stopped the work itself once the lease ran out: it
    // never finished there, and it finished once on the other host.
    let ran = std::fs::read_to_string(&marker).unwrap();
    let other = host_named(&h, &a[1].node).clone();
    assert_eq!(ran.matches("done ").count(), 1, "{ran}");
    assert!(ran.contains(&format!("done {}", other.user)), "{ran}");
    assert!(processes_of(&lost.user, "sleep 15").is_empty(), "{:?}", processes_of(&lost.user, ""));
    let store_dir = format!("/.canopy-host/{}/", r.store_id);
    assert!(processes_of(&lost.user, &store_dir).is_empty(), "{:?}", processes_of(&lost.user, ""));
    let health = journal(t.path()).health_observations(canopy::engine::model::Millis(0)).unwrap();
    assert!(
        health.iter().any(|o| o.node == a[0].node && o.class == Some(canopy::failure::FailureClass::Node)),
        "a node failure is charged to the lost host's health: {health:?}"
    );
    down.start();
    let _ = std::fs::remove_file(&marker);
    r.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn cancel_leaves_no_process_and_no_file_on_the_host() {
    let Some(h) = ssh_hosts("cancel_leaves_no_process_and_no_file_on_the_host") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "20s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let s = ssh_spec("ssh-cancel", "echo up > side-file; sleep 3171 & sleep 3172; wait", json!({}));
    let id = submit(&r, s).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let host = host_named(&h, &a[0].node).clone();
    assert!(!processes_of(&host.user, "sleep 317").is_empty());
    match r.handle.command(Command::Cancel { id }).await {
        CommandResult::Ok { .. } => {}
        other => panic!("cancel: {other:?}"),
    }
    let (w, _) = wait(t.path(), id, LONG, "cancelled", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Cancelled);
    // The attempt's directory goes once its logs are in.
    let left = left_on(&host.user, &r.store_id).await;
    assert!(left.is_empty(), "left: {left:?}");
    assert!(processes_of(&host.user, "sleep 317").is_empty(), "{:?}", processes_of(&host.user, ""));
    let store_dir = format!("/.canopy-host/{}/", r.store_id);
    assert!(processes_of(&host.user, &store_dir).is_empty(), "{:?}", processes_of(&host.user, ""));
    r.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_and_changed_host_keys_are_refused_with_what_to_do() {
    let Some(h) = ssh_hosts("unknown_and_changed_host_keys_are_refused_with_what_to_do") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    for (kh, says) in [(&h.known_hosts_empty, "is not in"), (&h.known_hosts_changed, "has CHANGED")] {
        let cfg = canopy::config::parse(&ssh_toml(&h, kh, "20s", "")).unwrap();
        let c = SshConfig::from_entry(&cfg.ssh[0], "keytest", t.path()).unwrap();
        let p = SshProvider::new(c);
        let e = p.check_host("owner-a").await.unwrap_err();
        assert!(e.contains(says) && e.contains("owner-a") && e.contains(&kh.display().to_string()), "{e}");
        assert!(e.contains("never trusts") || e.contains("ssh-keygen -R"), "says what to do: {e}");
        let inv = p.inventory().await.unwrap();
        let states: Vec<_> = inv.pools[0].nodes.iter().map(|n| n.state).collect();
        assert!(states.iter().all(|s| *s == canopy::fleet::NodeState::Down), "{states:?}");
        // Nothing was added to the file.
        assert_eq!(std::fs::read(kh).unwrap(), std::fs::read(kh).unwrap());
    }
    let empty = std::fs::read_to_string(&h.known_hosts_empty).unwrap();
    assert!(empty.is_empty(), "trust on first use added a key: {empty}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_owners_drain_moves_running_work_with_its_grace() {
    let Some(h) = ssh_hosts("an_owners_drain_moves_running_work_with_its_grace") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "20s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let script = "trap 'echo got SIGTERM on $(id -un); exit 143' TERM; echo started on $(id -un); \
                  for i in $(seq 1 8); do sleep 1; done; echo finished on $(id -un)";
    let id = submit(&r, ssh_spec("ssh-drain", script, json!({}))).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let first = host_named(&h, &a[0].node).clone();
    match r.handle.command(Command::Drain { node: a[0].node.clone(), evict: true, grace_s: Some(5) }).await {
        CommandResult::Ok { .. } => {}
        other => panic!("drain: {other:?}"),
    }
    let (w, a) = wait(t.path(), id, LONG, "the end", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "{a:#?}");
    assert_ne!(a[1].node, a[0].node, "moved to the other owner's host");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(logs.iter().any(|(_, s)| s.contains(&format!("got SIGTERM on {}", first.user))), "{logs:?}");
    let events: Vec<String> = journal(t.path()).events(id).unwrap().into_iter().map(|e| e.message).collect();
    assert!(events.iter().any(|e| e.contains("drain")), "the reclaim is in the record: {events:#?}");
    let left = left_on(&first.user, &r.store_id).await;
    assert!(left.is_empty(), "left: {left:?}");
    r.stop(Duration::from_secs(10)).await.unwrap();
}

/// `HH:MM` in UTC of minute `m` since the epoch.
fn utc_hhmm(m: u64) -> String {
    let m = m % (24 * 60);
    format!("{:02}:{:02}", m / 60, m % 60)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closing_lend_window_stops_running_work_with_grace_and_places_nothing_new() {
    let Some(h) = ssh_hosts("a_closing_lend_window_stops_running_work_with_grace_and_places_nothing_new")
    else {
        return;
    };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    // Owner a lends until two to three minutes from now; the workload's
    // stop grace fits when it is submitted and no longer about 25 s later,
    // when it is asked to stop (closes at - now <= grace + 5 s). Counted
    // from the submission, not the test's start: under CI's load starting
    // the server took more than the 10 s this once left for the launch.
    let unix_now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let now = unix_now();
    let end = (now / 60 + 3) * 60;
    let window = format!("{}-{}", utc_hhmm(now / 60 - 1), utc_hhmm(end / 60));
    let toml = ssh_toml(&h, &h.known_hosts, "20s", "")
        .replace("pool = \"lab\"\nowner = \"owner a\"", "pool = \"evening\"\nowner = \"owner a\"")
        + &format!(
            "[ssh.pools.evening]\ncapabilities = [\"evening\"]\nwindows = [{window:?}]\ntimezone = \"UTC\"\n"
        );
    let r = start(t.path(), &toml).await;
    let _forget = forget_store(&h, &r.store_id);
    let script = "trap 'echo got SIGTERM, saving; exit 0' TERM; echo started; sleep 300 & wait";
    let grace = end - unix_now() - 30;
    let s = ssh_spec(
        "ssh-window",
        script,
        json!({
            "runtime": { "stop_grace": format!("{grace}s") },
            "constraints": { "providers": ["ssh"], "capabilities": ["evening"], "interruptible": true },
        }),
    );
    let id = submit(&r, s).await;
    let (_, a) = wait(t.path(), id, LONG, "the first attempt's end", |_, a| {
        a.first().is_some_and(|a| a.ended_at.is_some())
    })
    .await;
    assert_eq!(a[0].node, "owner-a");
    assert_eq!(a[0].class, Some(canopy::failure::FailureClass::Preempted), "{a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(logs.iter().any(|(_, s)| s.contains("started") && s.contains("got SIGTERM, saving")), "{logs:?}");
    // Nothing new starts there while the window closes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let a = journal(t.path()).attempts(id).unwrap();
    assert!(a.iter().skip(1).all(|a| a.started_at.is_none()), "placed again in a closing window: {a:#?}");
    let _ = r.handle.command(Command::Cancel { id }).await;
    r.stop(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_engine_readopts_work_on_an_owners_host() {
    let Some(h) = ssh_hosts("a_restarted_engine_readopts_work_on_an_owners_host") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let toml = ssh_toml(&h, &h.known_hosts, "20s", "");
    let r = start(t.path(), &toml).await;
    let _forget = forget_store(&h, &r.store_id);
    let id = submit(&r, ssh_spec("ssh-restart", "echo started; sleep 8; echo finished", json!({}))).await;
    wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    r.stop(Duration::from_secs(10)).await.unwrap();
    // A new engine over the same store finds the attempt on its host by
    // its token, renews its lease and follows it to its end.
    let r = start(t.path(), &toml).await;
    let _forget = forget_store(&h, &r.store_id);
    let (w, a) = wait(t.path(), id, LONG, "success", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 1, "adopted, not run again: {a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(
        logs.iter().any(|(_, s)| s.matches("started").count() == 1 && s.contains("finished")),
        "{logs:?}"
    );
    r.stop(Duration::from_secs(10)).await.unwrap();
}

/// An owner takes a host back by removing it from the configuration while
/// work runs there. The next engine asks that host nothing, so it cannot
/// know the attempt is gone: "not found" must wait until the lease the old
/// engine renewed has run out (the host's supervisor stops the work then),
/// or the work would be placed again while it still runs there.
#[tokio::test(flavor = "multi_thread")]
async fn a_host_removed_from_the_configuration_is_not_forgotten_before_its_lease_runs_out() {
    use canopy::engine::model::{AttemptId, WorkloadId};
    use canopy::providers::{AttemptStatus, LaunchRequest};
    use std::sync::Arc;
    let Some(h) =
        ssh_hosts("a_host_removed_from_the_configuration_is_not_forgotten_before_its_lease_runs_out")
    else {
        return;
    };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let store = format!("removed{}", std::process::id());
    let _forget = forget_store(&h, &store);
    let cfg = canopy::config::parse(&ssh_toml(&h, &h.known_hosts, "3s", "")).unwrap();
    let before = SshProvider::start(SshConfig::from_entry(&cfg.ssh[0], &store, t.path()).unwrap());
    let attempt = AttemptId { workload: WorkloadId(1), n: 1 };
    let token = attempt.token(&store, "");
    let spec = ssh_spec("taken-back", "sleep 120", json!({ "runtime": { "stop_grace": "1s" } }));
    let req = LaunchRequest {
        attempt,
        token: token.clone(),
        spec: Arc::new(spec),
        pool: "lab".into(),
        node: node_of(&h.a),
        nodes: vec![node_of(&h.a)],
        checkpoint_dir: None,
        secrets: Vec::new(),
        artifact_dir: t.path().join("artifacts"),
    };
    before.launch(&req).await.unwrap();
    assert!(matches!(before.status(&token).await.unwrap(), AttemptStatus::Pending | AttemptStatus::Running));
    // The engine stops; the owner removes host a; a new engine starts.
    drop(before);
    let mut entry = cfg.ssh[0].clone();
    entry.hosts.retain(|x| x.name != node_of(&h.a));
    let after = SshProvider::start(SshConfig::from_entry(&entry, &store, t.path()).unwrap());
    let e = after.status(&token).await.unwrap_err();
    assert!(e.message.contains("removed from the configuration"), "{e}");
    // Once the lease has run out, the work is gone from the host and only
    // then is the attempt reported not found.
    let deadline = std::time::Instant::now() + LONG;
    loop {
        match after.status(&token).await {
            Ok(AttemptStatus::NotFound) => break,
            Ok(s) => panic!("host a is not configured, yet: {s:?}"),
            Err(_) => assert!(std::time::Instant::now() < deadline, "still unknown after {LONG:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(processes_of(&h.a.user, &token), Vec::<String>::new(), "stopped on the removed host");
}

/// Every new Canopy build is uploaded once per host; builds no Canopy has
/// used for a week are removed so an owner's disk does not fill up with
/// them, while the one in use stays.
#[tokio::test(flavor = "multi_thread")]
async fn builds_unused_for_a_week_are_removed_from_the_host() {
    let Some(h) = ssh_hosts("builds_unused_for_a_week_are_removed_from_the_host") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let bin = home_of(&h.a.user).join(".canopy-host").join("bin");
    let u = &h.a.user;
    sh(&format!(
        "install -d -m 700 -o {u} -g {u} {b} && for n in 00000000000000aa 00000000000000bb; do \
         install -m 700 -o {u} -g {u} /dev/null {b}/canopy-$n; done && touch -d '10 days ago' {b}/canopy-00000000000000aa",
        b = bin.display()
    ));
    let cfg = canopy::config::parse(&ssh_toml(&h, &h.known_hosts, "20s", "")).unwrap();
    let p = SshProvider::new(SshConfig::from_entry(&cfg.ssh[0], "prunetest", t.path()).unwrap());
    p.check_host(&node_of(&h.a)).await.unwrap();
    assert!(!bin.join("canopy-00000000000000aa").exists(), "a build unused for 10 days is removed");
    assert!(bin.join("canopy-00000000000000bb").exists(), "a recent build stays");
    let _ = std::fs::remove_file(bin.join("canopy-00000000000000bb"));
    let _ = std::fs::remove_dir_all(home_of(&h.a.user).join(".canopy-host").join("prunetest"));
}

/// The build uploaded is chosen by the host's architecture
/// (`[ssh.binaries]`): here a distinct build for this machine's own, whose
/// hash names the file the host runs.
#[tokio::test(flavor = "multi_thread")]
async fn the_build_for_the_hosts_architecture_is_uploaded() {
    let Some(h) = ssh_hosts("the_build_for_the_hosts_architecture_is_uploaded") else { return };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    // A build of its own: the test's canopy with a byte appended (an ELF
    // runs the same with trailing bytes), so its hash is new.
    let own = t.path().join("canopy-for-this-arch");
    let mut bytes = std::fs::read(env!("CARGO_BIN_EXE_canopy")).unwrap();
    bytes.push(0);
    std::fs::write(&own, &bytes).unwrap();
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    use sha2::Digest;
    let name = format!("canopy-{}", &hex::encode(sha2::Sha256::digest(&bytes))[..16]);
    let extra = format!("[ssh.binaries]\n{} = {:?}\n", std::env::consts::ARCH, own.display().to_string());
    let cfg = canopy::config::parse(&ssh_toml(&h, &h.known_hosts, "20s", &extra)).unwrap();
    let p = SshProvider::new(SshConfig::from_entry(&cfg.ssh[0], "archtest", t.path()).unwrap());
    p.check_host(&node_of(&h.b)).await.unwrap();
    let uploaded = home_of(&h.b.user).join(".canopy-host").join("bin").join(&name);
    assert!(uploaded.exists(), "{} was not uploaded", uploaded.display());
    let _ = std::fs::remove_file(&uploaded);
    let _ = std::fs::remove_dir_all(home_of(&h.b.user).join(".canopy-host").join("archtest"));
}

/// A workload that counts to 5, one checkpoint per step (`step-N/` with
/// `COMPLETE` last), resuming from the newest complete one it finds in
/// `$CANOPY_CHECKPOINT_DIR` and saying what that directory holds. Its
/// first run writes steps 1–3 complete, each with a link to a file of the
/// owner's outside the checkpoint, and step 4 without `COMPLETE` (cut
/// off), then waits.
const COUNTING: &str = r#"d="$CANOPY_CHECKPOINT_DIR"; start=0
for c in "$d"/step-*/COMPLETE; do [ -e "$c" ] || continue; n=$(basename "$(dirname "$c")"); n=${n#step-}; [ "$n" -gt "$start" ] && start=$n; done
echo "resumed at step $start on $(id -un)"; echo "holds: $(ls -A "$d" | tr '\n' ' ')"
if [ -e "$d/step-$start/leak" ] || [ -L "$d/step-$start/leak" ]; then echo "the link came along"; fi
if [ $start = 0 ]; then
  for s in 1 2 3; do mkdir -p "$d/step-$s"; echo $s > "$d/step-$s/state"; ln -s "$OUTSIDE" "$d/step-$s/leak"; touch "$d/step-$s/COMPLETE"; done
  mkdir -p "$d/step-4"; echo 4 > "$d/step-4/state"
  echo "wrote step 3"; sleep 300
fi
echo "finished at step 5 from $(cat "$d/step-$start/state")""#;

/// The stdout of attempt `n`.
fn attempt_stdout(root: &Path, n: u32) -> String {
    let logs = find_files(&root.join("home"), "stdout.log");
    logs.into_iter()
        .find(|(p, _)| p.parent().and_then(|d| d.file_name()).is_some_and(|d| d == n.to_string().as_str()))
        .map(|(_, s)| s)
        .unwrap_or_default()
}

/// A host that dies mid-run is the reason checkpoints exist: its newest
/// complete checkpoint was copied into Canopy's store while it ran, and
/// the next attempt, on the other host, resumes from it. The checkpoint
/// cut off mid-write never travels, and a link inside a checkpoint is not
/// followed: the owner's file it points at reaches neither Canopy nor the
/// other host.
#[tokio::test(flavor = "multi_thread")]
async fn a_checkpointed_workload_on_a_lost_host_resumes_on_the_other_from_its_last_complete_checkpoint() {
    let Some(h) = ssh_hosts(
        "a_checkpointed_workload_on_a_lost_host_resumes_on_the_other_from_its_last_complete_checkpoint",
    ) else {
        return;
    };
    let _l = h.lock(true);
    let (canary, _) = canary();
    let outside = format!("/tmp/canopy-ssh-outside-{}", std::process::id());
    std::fs::write(&outside, &canary).unwrap();
    sh(&format!("chmod 644 {outside}"));
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "4s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    let s = ssh_spec(
        "ssh-ckpt-lost",
        COUNTING,
        json!({
            "runtime": { "stop_grace": "1s", "env": { "OUTSIDE": outside } },
            "checkpoint": { "path": "/ckpt" },
        }),
    );
    let id = submit(&r, s).await;
    let (_, a) =
        wait(t.path(), id, LONG, "running", |_, a| a.iter().any(|a| a.state == AttemptState::Running)).await;
    let lost = host_named(&h, &a[0].node).clone();
    // While it runs, its newest complete checkpoint reaches Canopy's store.
    let store = t.path().join("home/checkpoints").join(id.to_string());
    let deadline = std::time::Instant::now() + LONG;
    while !store.join("step-3/COMPLETE").is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "step-3 never reached the store: {:?}; logs {}",
            find_files(&store, "state"),
            attempt_stdout(t.path(), 1)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(attempt_stdout(t.path(), 1).contains("resumed at step 0"));
    let down = h.stop(lost.name);
    h.cut(lost.name);
    for m in control_masters(&lost.user) {
        // SAFETY: signalling a process this test identified by pid.
        unsafe { libc::kill(m, libc::SIGKILL) };
    }
    let (w, a) = wait(t.path(), id, LONG * 2, "the end", |w, _| w.state.is_final()).await;
    down.start();
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 2, "{a:#?}");
    assert_ne!(a[1].node, a[0].node, "resumed on the other host");
    let second = attempt_stdout(t.path(), 2);
    let other = host_named(&h, &a[1].node);
    assert!(second.contains(&format!("resumed at step 3 on {}", other.user)), "{second}");
    assert!(second.contains("holds: step-3 \n"), "only the newest complete checkpoint: {second}");
    assert!(second.contains("finished at step 5 from 3"), "{second}");
    assert!(!second.contains("the link came along"), "{second}");
    let resumed = a[1].checkpoint.as_ref().and_then(|c| c.resumed.as_ref()).expect("resumed");
    assert_eq!((resumed.name.as_str(), resumed.attempt), ("step-3", 1));
    let events: Vec<String> = journal(t.path()).events(id).unwrap().into_iter().map(|e| e.message).collect();
    assert!(events.iter().any(|e| e.contains("resumes from checkpoint step-3 of attempt 1")), "{events:#?}");
    // The file the links pointed at reached neither Canopy nor the host
    // that resumed.
    let hits = files_containing(t.path(), canary.as_bytes());
    assert!(hits.is_empty(), "the linked file was copied into Canopy's store: {hits:?}");
    let hits = files_containing(&home_of(&other.user), canary.as_bytes());
    assert!(hits.is_empty(), "the linked file was copied to the other host: {hits:?}");
    let _ = std::fs::remove_file(&outside);
    r.stop(Duration::from_secs(10)).await.unwrap();
}

/// An attempt that fails after writing a checkpoint hands it on through
/// Canopy's store (copied when it ended); one over `checkpoint.max_gb`
/// stays where it was written, and the events say so.
#[tokio::test(flavor = "multi_thread")]
async fn a_failed_attempts_checkpoint_is_handed_on_and_one_over_the_cap_is_not() {
    let Some(h) = ssh_hosts("a_failed_attempts_checkpoint_is_handed_on_and_one_over_the_cap_is_not") else {
        return;
    };
    let _l = h.lock(false);
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "20s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    // Run 1 saves step-1 (100 bytes) and fails; run 2 resumes from it,
    // saves step-2 (5000 bytes, over the 1000-byte cap) and fails; run 3
    // finds step-1 again. The runs are counted in a file of the test's.
    let mark = format!("/tmp/canopy-ssh-ckpt-runs-{}", std::process::id());
    std::fs::write(&mark, "").unwrap();
    sh(&format!("chmod 666 {mark}"));
    let script = r#"d="$CANOPY_CHECKPOINT_DIR"; echo "holds: $(ls -A "$d" | tr '\n' ' ')"
echo run >> "$MARK"; runs=$(wc -l < "$MARK")
if [ "$runs" -ge 3 ]; then echo finished; exit 0; fi
if [ "$runs" = 1 ]; then n=100; else n=5000; fi
mkdir "$d/step-$runs"; head -c $n /dev/zero > "$d/step-$runs/w"; touch "$d/step-$runs/COMPLETE"; exit 3"#;
    let s = ssh_spec(
        "ssh-ckpt-cap",
        script,
        json!({
            "runtime": { "env": { "MARK": mark } },
            "checkpoint": { "path": "/ckpt", "max_gb": 0.000001 },
            "retry": { "app_errors": 2, "backoff": "1s" },
        }),
    );
    let id = submit(&r, s).await;
    let (w, a) = wait(t.path(), id, LONG * 2, "the end", |w, _| w.state.is_final()).await;
    let _ = std::fs::remove_file(&mark);
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    assert_eq!(a.len(), 3, "{a:#?}");
    assert!(attempt_stdout(t.path(), 1).contains("holds: \n"), "{}", attempt_stdout(t.path(), 1));
    assert!(attempt_stdout(t.path(), 2).contains("holds: step-1 \n"), "{}", attempt_stdout(t.path(), 2));
    let third = attempt_stdout(t.path(), 3);
    assert!(third.contains("holds: step-1 \n") && third.contains("finished"), "{third}");
    let events: Vec<String> = journal(t.path()).events(id).unwrap().into_iter().map(|e| e.message).collect();
    assert!(
        events
            .iter()
            .any(|e| e.contains("checkpoint step-2 (4.9 KiB)") && e.contains("over the checkpoint cap")),
        "{events:#?}"
    );
    assert!(events.iter().any(|e| e.contains("resumes from checkpoint step-1 of attempt 1")), "{events:#?}");
    let store = t.path().join("home/checkpoints").join(id.to_string());
    assert!(!store.join("step-2").exists(), "a checkpoint over the cap reached the store");
    r.stop(Duration::from_secs(10)).await.unwrap();
}
