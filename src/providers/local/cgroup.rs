//! A memory cgroup per container, owned by Canopy, so that an OOM kill is
//! known after the container is gone.
//!
//! Podman's own record (`State.OOMKilled`) stays false on hosts where
//! conmon cannot watch the container's memory cgroup (cgroup v1 in hybrid
//! mode, seen on Debian 12 with runc and cgroupfs), and the container's
//! cgroup is removed when it ends. So the launcher makes
//! `canopy/<token>` in the memory hierarchy with the spec's limit and hands
//! it to the engine as `--cgroup-parent`; the container's own cgroup sits
//! under it and is held to the parent's limit. After the container ends
//! the supervisor reads whether the limit was hit (v1: `memory.failcnt`;
//! v2: `memory.events`' `oom_kill`), then removes the directories.
//!
//! This needs a rootful engine with the cgroupfs manager (what
//! `scripts/containers/setup.sh` configures). Where the directory cannot be
//! made (rootless, systemd-managed slices), the launcher falls back to the
//! engine's own `--memory` and the engine's record of the OOM.

use std::path::PathBuf;

const ROOT: &str = "/sys/fs/cgroup";

fn unified() -> bool {
    std::path::Path::new(ROOT).join("cgroup.controllers").exists()
}

/// `--cgroup-parent` for the container of `token`.
pub fn parent(token: &str) -> String {
    format!("/canopy/{token}")
}

fn memory_dir(token: &str) -> PathBuf {
    if unified() {
        PathBuf::from(ROOT).join("canopy").join(token)
    } else {
        PathBuf::from(ROOT).join("memory/canopy").join(token)
    }
}

/// Makes the cgroup and sets its memory limit. An error says why the
/// engine's own `--memory` is used instead.
pub fn prepare(token: &str, limit_bytes: u64) -> std::io::Result<()> {
    let dir = memory_dir(token);
    std::fs::create_dir_all(&dir)?;
    let (file, value) = if unified() {
        // The parent must hand the memory controller down.
        let canopy = PathBuf::from(ROOT).join("canopy");
        std::fs::write(PathBuf::from(ROOT).join("cgroup.subtree_control"), "+memory")?;
        std::fs::write(canopy.join("cgroup.subtree_control"), "+memory")?;
        ("memory.max", limit_bytes.to_string())
    } else {
        ("memory.limit_in_bytes", limit_bytes.to_string())
    };
    std::fs::write(dir.join(file), value)
}

/// Whether the container of `token` was held to its memory limit: v1's
/// failure count (the limit was hit and reclaim did not make room), or
/// v2's count of OOM kills. `None` when Canopy made no cgroup for it.
pub fn limit_hit(token: &str) -> Option<bool> {
    let dir = memory_dir(token);
    if unified() {
        let events = std::fs::read_to_string(dir.join("memory.events")).ok()?;
        let kills = events
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Some(kills > 0)
    } else {
        let failcnt = std::fs::read_to_string(dir.join("memory.failcnt")).ok()?;
        Some(failcnt.trim().parse::<u64>().unwrap_or(0) > 0)
    }
}

/// Removes `canopy/<token>` (and what the engine made inside it, once
/// empty) from every hierarchy. Best effort: an empty directory left
/// behind holds nothing.
pub fn remove(token: &str) {
    let Ok(hierarchies) = std::fs::read_dir(ROOT) else { return };
    let mut dirs: Vec<PathBuf> = vec![PathBuf::from(ROOT).join("canopy").join(token)];
    dirs.extend(hierarchies.flatten().map(|h| h.path().join("canopy").join(token)));
    for dir in dirs {
        if let Ok(children) = std::fs::read_dir(&dir) {
            for c in children.flatten() {
                if c.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = std::fs::remove_dir(c.path());
                }
            }
        }
        let _ = std::fs::remove_dir(&dir);
    }
}
