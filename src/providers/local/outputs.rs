//! A local attempt's outputs: collected by the supervisor, next to the
//! files, and handed to the engine by the provider.
//!
//! After the workload exits 0 and its process group is gone, the supervisor
//! ([`supervise_collection`]) runs the hardened collection of
//! [`crate::providers::collect`] from `outputs/` into a fresh `collected/`
//! (0700) and writes `collected.json`: each artifact's name, size and
//! checksum, what was skipped and why, and the error when a required output
//! could not be collected. Only then does it write `exit.json`.
//!
//! The provider ([`take`]) reads that manifest and moves each output the
//! engine's spec names from `collected/<name>` into the engine's
//! destination: a rename, or, across filesystems, a copy by the same
//! hardened collection whose checksum must match the manifest's. It never
//! opens a path under `outputs/`. An attempt of an older version, with an
//! exit record but no manifest, is collected from `outputs/` by the
//! hardened collection here instead.

use super::layout::{AttemptDir, CollectedArtifact, CollectedManifest, write_json};
use crate::providers::collect::{self, OutputLimits, Wanted, remove_existing};
use crate::providers::{Artifact, Collection};
use crate::spec::Spec;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The supervisor's collection: `outputs/` → `collected/`, then
/// `collected.json`. Anything already at those names (left there by the
/// workload) is removed first.
pub fn supervise_collection(
    dir: &AttemptDir,
    spec: Result<&Spec, String>,
    limits: &OutputLimits,
) -> io::Result<()> {
    let collected = spec.and_then(|spec| {
        let prepare = || {
            remove_existing(&dir.collected())?;
            remove_existing(&dir.collected_manifest())?;
            // Fresh and private: fails rather than use something that
            // appeared at the name since.
            fs::DirBuilder::new().mode(0o700).create(dir.collected())
        };
        prepare().map_err(|e| format!("cannot prepare {}: {e}", dir.collected().display()))?;
        collect::collect(&dir.outputs(), spec, &dir.collected(), limits)
    });
    let manifest = match collected {
        Ok(c) => CollectedManifest {
            artifacts: c
                .artifacts
                .into_iter()
                .map(|a| CollectedArtifact { name: a.name, bytes: a.bytes, sha256: a.sha256 })
                .collect(),
            skipped: c.skipped,
            error: None,
        },
        Err(e) => CollectedManifest { error: Some(e), ..Default::default() },
    };
    write_json(&dir.collected_manifest(), &manifest)
}

/// Hands the attempt's outputs to the engine: moves what the supervisor
/// collected into `dest/<name>`, or, for an attempt without a manifest,
/// collects them here.
pub fn take(dir: &AttemptDir, spec: &Spec, dest: &Path, limits: &OutputLimits) -> Result<Collection, String> {
    let manifest = super::layout::read_json::<CollectedManifest>(&dir.collected_manifest())
        .map_err(|e| format!("cannot read the supervisor's collection record: {e}"))?;
    let Some(m) = manifest else {
        // An attempt of a version whose supervisor did not collect.
        return collect::collect(&dir.outputs(), spec, dest, limits);
    };
    if let Some(e) = m.error {
        return Err(e);
    }
    let wanted = collect::wanted(spec)?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dest)
        .map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let mut out = Collection::default();
    for w in &wanted {
        out.skipped.extend(m.skipped.iter().filter(|s| s.name == w.name).cloned());
        let Some(a) = m.artifacts.iter().find(|a| a.name == w.name) else {
            if w.required {
                let why = out.skipped.iter().find(|s| s.name == w.name).map_or_else(
                    || "the supervisor's collection does not list it".to_string(),
                    |s| format!("{}: {}", s.path, s.reason),
                );
                return Err(format!(
                    "required output {:?} ({}) was not collected: {why}; see {}",
                    w.name,
                    w.shown,
                    dir.collected_manifest().display()
                ));
            }
            continue;
        };
        let target = dest.join(&w.name);
        move_one(dir, a, &target, limits)?;
        out.artifacts.push(Artifact {
            name: a.name.clone(),
            path: target,
            bytes: a.bytes,
            sha256: a.sha256.clone(),
        });
    }
    Ok(out)
}

/// Moves `collected/<name>` to `target`, replacing what is there. When it
/// is gone but `target` exists, an earlier call moved it.
fn move_one(
    dir: &AttemptDir,
    a: &CollectedArtifact,
    target: &Path,
    limits: &OutputLimits,
) -> Result<(), String> {
    let src = dir.collected().join(&a.name);
    let meta = match fs::symlink_metadata(&src) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound && fs::symlink_metadata(target).is_ok() => {
            return Ok(());
        }
        Err(e) => return Err(format!("cannot find collected output {}: {e}", src.display())),
    };
    if !(meta.is_file() || meta.is_dir()) {
        return Err(format!(
            "{} is not a file or directory: something changed the attempt's collected outputs after the \
             supervisor wrote them; refusing them",
            src.display()
        ));
    }
    remove_existing(target).map_err(|e| format!("cannot replace {}: {e}", target.display()))?;
    match fs::rename(&src, target) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EXDEV) => copy_across(dir, a, target, limits),
        Err(e) => Err(format!("cannot move {} to {}: {e}", src.display(), target.display())),
    }
}

/// Copies `collected/<name>` to another filesystem with the hardened
/// collection, checks it against the manifest, then removes the source.
fn copy_across(
    dir: &AttemptDir,
    a: &CollectedArtifact,
    target: &Path,
    limits: &OutputLimits,
) -> Result<(), String> {
    let dest = target.parent().unwrap_or(Path::new("/"));
    let w =
        Wanted { name: a.name.clone(), rel: PathBuf::from(&a.name), shown: a.name.clone(), required: true };
    let got = collect::collect_wanted(&dir.collected(), std::slice::from_ref(&w), dest, limits)?;
    match got.artifacts.first() {
        Some(c) if c.sha256 == a.sha256 && c.bytes == a.bytes => {}
        _ => {
            let _ = remove_existing(target);
            return Err(format!(
                "the copy of {} does not match what the supervisor collected; refusing it",
                dir.collected().join(&a.name).display()
            ));
        }
    }
    let _ = remove_existing(&dir.collected().join(&a.name));
    Ok(())
}
