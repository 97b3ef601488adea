//! What Canopy keeps in its store is its user's alone: a store in a state
//! directory an admin or a unit made 0755, under a 0755 parent, served by
//! the real `canopy serve` (with the usual umask, 022) while a workload
//! writes stdout, stderr and an output. Every directory Canopy made there
//! is 0700 and every file 0600 (the socket too) — while the engine runs
//! (its journal's WAL beside it) and after it stops — so no other user of
//! the host reads a workload's logs, records or artifacts. The workload's
//! own file keeps the mode it gave it.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{Process, Serve};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The file the workload writes itself, with the mode it chooses.
const OWN_OUTPUT: &str = "outputs/result.txt";

const SPEC: &str = r#"name = "private"

[runtime]
command = ["sh", "-c", "echo to stdout; echo to stderr >&2; echo 42 > $CANOPY_OUTPUT_DIR/outputs/result.txt; chmod 644 $CANOPY_OUTPUT_DIR/outputs/result.txt"]

[resources]
cpu_cores = 0.1
memory_gb = 0.1

[constraints]
providers = ["local"]

[[outputs]]
name = "result"
path = "/outputs/result.txt"
required = true
"#;

/// Every path under `root` (not `root` itself) with its mode, links
/// not followed.
fn walk(root: &Path, out: &mut Vec<(PathBuf, std::fs::Metadata)>) {
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        let Ok(m) = std::fs::symlink_metadata(&p) else { continue };
        let is_dir = m.is_dir();
        out.push((p.clone(), m));
        if is_dir {
            walk(&p, out);
        }
    }
}

/// What others may read, search or write under the store, except the
/// workload's own file.
fn open_to_others(store: &Path) -> Vec<String> {
    let mut all = Vec::new();
    walk(store, &mut all);
    all.into_iter()
        .filter(|(_, m)| !m.file_type().is_symlink() && m.permissions().mode() & 0o077 != 0)
        .filter(|(p, _)| !(p.ends_with(OWN_OUTPUT) && p.starts_with(store.join("attempts"))))
        .map(|(p, m)| {
            format!("{:o} {}", m.permissions().mode() & 0o7777, p.strip_prefix(store).unwrap().display())
        })
        .collect()
}

#[test]
fn nothing_canopy_makes_in_an_open_store_is_readable_by_other_users() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let parent = tmp.path().join("state");
    let store = parent.join("canopy");
    // A unit's state directory: 0755 under a 0755 parent.
    std::fs::create_dir_all(&store).unwrap();
    for d in [&parent, &store] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let spec = tmp.path().join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();

    let serve = Serve::start(&store, &[], Process::default());
    let run = serve.canopy(&["submit", "--wait", spec.to_str().unwrap()]);
    assert!(
        run.status.success(),
        "the workload did not succeed: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let logs = serve.canopy(&["logs", "w-1"]);
    assert!(String::from_utf8_lossy(&logs.stdout).contains("to stdout"), "{logs:?}");

    // Everything the run made is there: its attempt, shipped logs with
    // their time index, the collected output and its manifest, the
    // journal with its WAL, the lock, the socket, Canopy's log.
    let mut all = Vec::new();
    walk(&store, &mut all);
    let names: Vec<String> =
        all.iter().map(|(p, _)| p.strip_prefix(&store).unwrap().display().to_string()).collect();
    for want in [
        "logs/w-1/1/stdout.log",
        "logs/w-1/1/stdout.times",
        "logs/w-1/1/stderr.log",
        "artifacts/w-1/1/result",
        "artifacts/w-1/1/manifest.json",
        "canopy.db",
        "canopy.db-wal",
        "canopy.db.lock",
        "canopy.sock",
        "canopy.log",
    ] {
        assert!(names.iter().any(|n| n == want), "no {want} in the store: {names:?}");
    }
    assert!(
        all.iter().any(|(p, _)| p.ends_with(OWN_OUTPUT)),
        "the workload's own output is not in its attempt: {names:?}"
    );
    let running = open_to_others(&store);

    assert!(serve.stop().success());
    let stopped = open_to_others(&store);
    assert!(
        running.is_empty() && stopped.is_empty(),
        "other users can reach what Canopy made in the store:\nwhile serving:\n  {}\nafter it stopped:\n  {}",
        running.join("\n  "),
        stopped.join("\n  ")
    );

    // The workload's own file keeps its mode: Canopy does not rewrite it.
    let own = all.iter().find(|(p, _)| p.ends_with(OWN_OUTPUT)).unwrap();
    assert_eq!(own.1.permissions().mode() & 0o777, 0o644, "{}", own.0.display());
}
