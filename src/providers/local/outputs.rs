//! Collecting an attempt's outputs into Canopy's artifact store, with
//! sizes and SHA-256 checksums computed while copying.
//!
//! This module owns the copy and the checksum convention of [`Artifact`]:
//! a file's checksum is the SHA-256 of its bytes; a directory's is the
//! SHA-256 of its sorted `relative/path <sha256>\n` lines. Symlinks to
//! files are followed; symlinks to directories are skipped (they can loop).
//! It reads only the attempt's outputs and writes only under `dest`.

use super::layout::{AttemptDir, valid_token};
use crate::providers::Artifact;
use crate::spec::Spec;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Copies each output the workload wrote into `dest/<output name>`.
/// Missing optional outputs are skipped; a missing required one fails the
/// whole collection before anything is copied.
pub fn collect(dir: &AttemptDir, spec: &Spec, dest: &Path) -> Result<Vec<Artifact>, String> {
    let mut present = Vec::new();
    for o in &spec.outputs {
        if !valid_token(&o.name) {
            return Err(format!("output name {:?} cannot name a file in the artifact store", o.name));
        }
        let src = dir.output(&o.path).map_err(|e| format!("output {:?}: {e}", o.name))?;
        if fs::metadata(&src).is_ok() {
            present.push((o, src));
        } else if o.required {
            return Err(format!(
                "required output {:?} ({}) was not written: expected at {}; the workload must write it \
                 under $CANOPY_OUTPUT_DIR{}",
                o.name,
                o.path,
                src.display(),
                o.path
            ));
        } else {
            tracing::debug!(output = %o.name, "optional output not written; skipped");
        }
    }
    fs::create_dir_all(dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let mut artifacts = Vec::new();
    for (o, src) in present {
        let target = dest.join(&o.name);
        remove_existing(&target).map_err(|e| format!("cannot replace {}: {e}", target.display()))?;
        let (bytes, sha256) = copy_hashed(&src, &target)
            .map_err(|e| format!("cannot copy output {:?} from {}: {e}", o.name, src.display()))?;
        artifacts.push(Artifact { name: o.name.clone(), path: target, bytes, sha256 });
    }
    Ok(artifacts)
}

/// Copies a file or directory tree; used to stage inputs by copy.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    copy_hashed(src, dst).map(|_| ())
}

/// Copies `src` (file or directory) to `dst`; returns total bytes and the
/// checksum described in the module docs.
pub fn copy_hashed(src: &Path, dst: &Path) -> io::Result<(u64, String)> {
    if fs::metadata(src)?.is_dir() {
        let mut entries = Vec::new();
        copy_dir(src, dst, Path::new(""), &mut entries)?;
        entries.sort();
        let mut h = Sha256::new();
        let mut total = 0;
        for (rel, bytes, sha) in &entries {
            h.update(format!("{rel} {sha}\n").as_bytes());
            total += bytes;
        }
        Ok((total, hex::encode(h.finalize())))
    } else {
        copy_file(src, dst)
    }
}

fn copy_dir(src: &Path, dst: &Path, rel: &Path, out: &mut Vec<(String, u64, String)>) -> io::Result<()> {
    fs::create_dir_all(dst)?;
    let mut names: Vec<PathBuf> =
        fs::read_dir(src)?.map(|e| e.map(|e| PathBuf::from(e.file_name()))).collect::<io::Result<_>>()?;
    names.sort();
    for name in names {
        let (s, d, r) = (src.join(&name), dst.join(&name), rel.join(&name));
        let ft = fs::symlink_metadata(&s)?.file_type();
        if ft.is_dir() {
            copy_dir(&s, &d, &r, out)?;
        } else if ft.is_file() || (ft.is_symlink() && fs::metadata(&s).is_ok_and(|m| m.is_file())) {
            let (bytes, sha) = copy_file(&s, &d)?;
            out.push((r.to_string_lossy().into_owned(), bytes, sha));
        } else {
            tracing::warn!(path = %s.display(), "not a file or directory (or a link to a directory); skipped");
        }
    }
    Ok(())
}

fn copy_file(src: &Path, dst: &Path) -> io::Result<(u64, String)> {
    let mut from = File::open(src)?;
    let mut to = File::create(dst)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
    to.sync_all()?;
    Ok((total, hex::encode(h.finalize())))
}

fn remove_existing(p: &Path) -> io::Result<()> {
    match fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(p),
        Ok(_) => fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_checksums_cover_names_and_contents() {
        let t = tempfile::tempdir().unwrap();
        let src = t.path().join("src");
        fs::create_dir_all(src.join("sub")).unwrap();
        fs::write(src.join("a.txt"), "hello").unwrap();
        fs::write(src.join("sub/b.txt"), "world").unwrap();
        let (bytes, sha) = copy_hashed(&src, &t.path().join("dst")).unwrap();
        assert_eq!(bytes, 10);
        let line = |p: &str, c: &str| format!("{p} {}\n", hex::encode(Sha256::digest(c.as_bytes())));
        let expect =
            hex::encode(Sha256::digest(format!("{}{}", line("a.txt", "hello"), line("sub/b.txt", "world"))));
        assert_eq!(sha, expect);
        assert_eq!(fs::read_to_string(t.path().join("dst/sub/b.txt")).unwrap(), "world");
        fs::write(src.join("a.txt"), "hellO").unwrap();
        assert_ne!(copy_hashed(&src, &t.path().join("dst2")).unwrap().1, sha);
    }
}
