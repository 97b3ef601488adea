//! Fetched outputs: the host's tar unpacked into a private staging
//! directory and collected from there with the local collection's rules.

use super::*;

/// Unpacks the fetched tar into a private staging directory beside
/// `dest` (regular files and directories only, relative paths without
/// `..`, no more than the attempt's size limit), then collects each staged
/// artifact into `dest` with the hardened local collection, whose
/// checksums must match the host's.
pub(super) fn receive(
    host: &str,
    tar: &[u8],
    staged: Collection,
    dest: &Path,
    limits: &OutputLimits,
) -> Result<Collection, String> {
    use std::os::unix::fs::DirBuilderExt;
    let parent = dest.parent().unwrap_or(Path::new("/"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let staging = parent.join(format!(".ssh-fetch-{name}-{}", std::process::id()));
    let _ = collect::remove_existing(&staging);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&staging)
        .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
    let result = (|| {
        unpack(host, tar, &staging, limits.max_attempt_bytes)?;
        let wanted: Vec<Wanted> = staged
            .artifacts
            .iter()
            .map(|a| Wanted {
                name: a.name.clone(),
                rel: PathBuf::from(&a.name),
                shown: a.name.clone(),
                required: true,
            })
            .collect();
        let got = collect::collect_wanted(&staging, &wanted, dest, limits)?;
        for a in &staged.artifacts {
            match got.artifacts.iter().find(|g| g.name == a.name) {
                Some(g) if g.sha256 == a.sha256 && g.bytes == a.bytes => {}
                _ => {
                    let _ = collect::remove_existing(&dest.join(&a.name));
                    return Err(format!(
                        "output {:?} arrived from host {host} different from what its supervisor collected \
                         (size or SHA-256); refusing it",
                        a.name
                    ));
                }
            }
        }
        Ok(Collection { artifacts: got.artifacts, skipped: staged.skipped.clone() })
    })();
    let _ = collect::remove_existing(&staging);
    result
}

/// The most entries fetched outputs may hold.
const MAX_OUTPUT_ENTRIES: usize = 1_000_000;

pub(super) fn unpack(host: &str, tar: &[u8], into: &Path, max_bytes: u64) -> Result<(), String> {
    let b = checkpoints::Bounds { max_bytes, max_entries: MAX_OUTPUT_ENTRIES };
    checkpoints::unpack(tar, into, b)
        .map(|_| ())
        .map_err(|m| format!("the outputs from host {host} were refused: {m}"))
}
