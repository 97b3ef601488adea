//! Container images on owners' hosts over SSH (the two sshd of
//! `scripts/engines/sshd.sh`), through the engine: the owner's podman runs
//! an image workload as the local provider does, or, where it cannot hold a
//! container to its memory limit, the image is refused at submit with the
//! reason. Skips visibly without the hosts (or their podman); fails under
//! `CANOPY_ENGINES=require`.

mod engines_support;

use canopy::engine::model::WorkloadState;
use engines_support::*;
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(120);

/// `podman info` as the owner of `host` sees it: rootless, cgroup
/// version, controllers (`true|v1|[]`), or `None` when it does not answer.
fn owners_podman(h: &SshHosts, host: &SshHost) -> Option<String> {
    let format = "'{{.Host.Security.Rootless}}|{{.Host.CgroupsVersion}}|{{.Host.CgroupControllers}}'";
    let out = h.ssh(host, &h.known_hosts, &format!("podman info --format {format}"));
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// An owner's podman runs an image workload the way the local provider
/// does (logs and an output back, the container removed after), where it
/// can hold the container to its memory limit; where it cannot (rootless
/// podman on cgroup v1, as on the CI host) the image is refused at submit
/// with that reason, never run unlimited. Skips visibly where the owners
/// have no podman, or their podman lacks the test image.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_runs_in_the_owners_podman_or_is_refused_with_the_reason() {
    let test = "an_image_runs_in_the_owners_podman_or_is_refused_with_the_reason";
    let Some(h) = ssh_hosts(test) else { return };
    let _l = h.lock(false);
    let (Some(a), Some(b)) = (owners_podman(&h, &h.a), owners_podman(&h, &h.b)) else {
        println!("SKIPPED: {test}: the owners' podman does not answer `podman info` on their hosts");
        return;
    };
    let enforces = |info: &str| {
        let f: Vec<&str> = info.split('|').collect();
        f.first() != Some(&"true")
            || (f.get(1) == Some(&"v2") && f.get(2).is_some_and(|c| c.contains("memory")))
    };
    let image = std::env::var("CANOPY_TEST_IMAGE").unwrap_or_else(|_| "localhost/canopy-test:latest".into());
    let t = tempfile::tempdir().unwrap();
    let r = start(t.path(), &ssh_toml(&h, &h.known_hosts, "20s", "")).await;
    let _forget = forget_store(&h, &r.store_id);
    wait_for_pools(&r, "ssh").await;
    let s = ssh_spec(
        "ssh-image",
        "echo \"in-image user=$(id -u)\"; echo done > /outputs/result.txt",
        json!({
            "runtime": { "image": image },
            "outputs": [{ "name": "result", "path": "/outputs/result.txt", "required": true }],
        }),
    );
    if !(enforces(&a) && enforces(&b)) {
        let m = refused_at_submit(&r, s).await;
        assert!(m.contains("cannot hold a container to its memory limit"), "{m}");
        assert!(m.contains("run the engine as root"), "{m}");
        r.handle.shutdown();
        return;
    }
    for host in [&h.a, &h.b] {
        if !h.ssh(host, &h.known_hosts, &format!("podman image exists {image}")).status.success() {
            println!("SKIPPED: {test}: {}'s podman has no {image} (load it as that user)", host.user);
            r.handle.shutdown();
            return;
        }
    }
    let id = submit(&r, s).await;
    let (w, a) = wait(t.path(), id, LONG, "the end", |w, _| w.state.is_final()).await;
    assert_eq!(w.state, WorkloadState::Succeeded, "{a:#?}");
    let logs = find_files(&t.path().join("home"), "stdout.log");
    assert!(logs.iter().any(|(_, s)| s.contains("in-image")), "{logs:?}");
    let art = find_files(&t.path().join("home"), "result");
    assert_eq!(art.iter().map(|(_, s)| s.as_str()).collect::<Vec<_>>(), ["done\n"], "{art:?}");
    // The container is gone from the owner's podman.
    let host = host_named(&h, &a[0].node);
    let left = h.ssh(host, &h.known_hosts, "podman ps -a --filter label=canopy.token --format '{{.Names}}'");
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "", "containers left on {}", host.user);
    r.handle.shutdown();
}
