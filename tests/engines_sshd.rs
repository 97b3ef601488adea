//! The two owners' hosts that `scripts/engines/sshd.sh` runs, as the ssh
//! provider's tests find them through `engines_support`: each admits its
//! own owner with the pinned host key and no one else, a changed or an
//! unknown host key is refused, and a host taken down (listener stopped,
//! sessions cut) refuses connections while the work its sessions started
//! in their own session goes on, and comes back.
//! Skips visibly without the hosts; fails under `CANOPY_ENGINES=require`.

mod engines_support;

use engines_support::*;
use std::time::{Duration, Instant};

fn text(o: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn each_host_admits_its_owner_with_the_pinned_key_only() {
    let Some(h) = ssh_hosts("each_host_admits_its_owner_with_the_pinned_key_only") else { return };
    let _l = h.lock(false);
    for host in [&h.a, &h.b] {
        let o = h.ssh(host, &h.known_hosts, "id -un");
        assert!(o.status.success(), "{}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), host.user);
        let o = h.ssh(host, &h.known_hosts_changed, "true");
        assert!(!o.status.success() && text(&o).contains("HOST IDENTIFICATION HAS CHANGED"), "{}", text(&o));
        let o = h.ssh(host, &h.known_hosts_empty, "true");
        assert!(!o.status.success() && text(&o).contains("host key is known"), "{}", text(&o));
    }
    // Host a's sshd admits its own owner only.
    let mut intruder = h.a.clone();
    intruder.user = h.b.user.clone();
    let o = h.ssh(&intruder, &h.known_hosts, "true");
    assert!(!o.status.success() && text(&o).contains("Permission denied"), "{}", text(&o));
}

#[test]
fn a_host_taken_down_refuses_connections_keeps_its_work_and_comes_back() {
    let Some(h) = ssh_hosts("a_host_taken_down_refuses_connections_keeps_its_work_and_comes_back") else {
        return;
    };
    let _l = h.lock(true);
    let mark = format!("/tmp/canopy-sshd-test.{}", std::process::id());
    let pid_file = format!("{mark}.pid");
    let _ = std::fs::remove_file(&pid_file);
    let _ = std::fs::remove_file(format!("{mark}.session"));
    // A session that starts work in its own session, then stays connected.
    let session_file = format!("{mark}.session");
    let cmd = format!(
        "echo $$ > {session_file}; setsid sh -c 'echo $$ > {pid_file}; exec sleep 300' \
         </dev/null >/dev/null 2>&1 & exec sleep 300"
    );
    let mut session = std::process::Command::new("ssh")
        .args(["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", h.known_hosts.display()))
        .arg("-i")
        .arg(&h.key)
        .args(["-p", &h.a.port.to_string(), &format!("{}@{}", h.a.user, h.a.addr), &cmd])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let work: i32 = loop {
        if let Ok(s) = std::fs::read_to_string(&pid_file)
            && let Ok(p) = s.trim().parse()
        {
            break p;
        }
        assert!(Instant::now() < deadline, "the session did not start its work");
        std::thread::sleep(Duration::from_millis(50));
    };
    let alive =
        |pid: i32| std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z"));

    let down = h.stop("a");
    let o = h.ssh(&h.a, &h.known_hosts, "true");
    assert!(!o.status.success(), "host a still accepts connections: {}", text(&o));
    assert!(h.ssh(&h.b, &h.known_hosts, "true").status.success(), "stopping host a stopped host b");
    assert!(session.try_wait().unwrap().is_none(), "stopping the listener ended an established session");

    h.cut("a");
    let deadline = Instant::now() + Duration::from_secs(30);
    while session.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the session survived sshd.sh cut");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(alive(work), "cutting the sessions killed the owner's work");

    down.start();
    let o = h.ssh(&h.a, &h.known_hosts, "true");
    assert!(o.status.success(), "host a did not come back: {}", text(&o));
    // The session's own command is not signalled by a cut: end it and the work.
    let command = std::fs::read_to_string(&session_file).unwrap();
    let o = h.ssh(&h.a, &h.known_hosts, &format!("kill {work} {}", command.trim()));
    assert!(o.status.success(), "{}", text(&o));
    let _ = std::fs::remove_file(&pid_file);
    let _ = std::fs::remove_file(&session_file);
}
