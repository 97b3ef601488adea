//! Shipping an attempt's logs into the store: what is new since the last
//! call, secrets masked in place, each chunk's time kept beside it; and
//! reading a log's last lines.

use super::*;

/// Where an attempt's shipped logs live.
pub fn log_dir(root: &std::path::Path, attempt: AttemptId) -> PathBuf {
    root.join(attempt.workload.to_string()).join(attempt.n.to_string())
}

/// Copies what is new in an attempt's logs since the last call into the
/// log store. The shipped file's length is the offset, so shipping resumes
/// where it stopped after a restart. At most 8 MiB per stream per call, so
/// one chatty workload cannot hog the engine. Secret values the workload
/// prints are masked byte for byte (`*`), keeping lengths and offsets.
/// Each chunk's offset and the time it was first read go in the index
/// beside the log ([`crate::engine::log_times`]) before the chunk does, so every
/// line keeps the time it was written (to within a poll), however late
/// it is read.
pub(super) async fn ship_logs(
    p: &dyn Provider,
    token: &str,
    dir: &std::path::Path,
    mask: &[SecretValue],
    clock: &dyn Clock,
) {
    use tokio::io::AsyncWriteExt;
    const CHUNK: usize = 256 * 1024;
    // Private (0700 directories, 0600 files): logs may hold what no other
    // user of this host should read.
    if crate::private::dir_all_async(dir).await.is_err() {
        return;
    }
    for (stream, file) in [(LogStream::Stdout, "stdout.log"), (LogStream::Stderr, "stderr.log")] {
        let path = dir.join(file);
        let Ok(mut f) = crate::private::append_async(&path).await else {
            continue;
        };
        let mut offset = f.metadata().await.map(|m| m.len()).unwrap_or(0);
        // Where the next chunk lands in the shipped file (the provider's
        // offsets could skip).
        let mut at = offset;
        let mut times: Option<crate::engine::log_times::Writer> = None;
        for _ in 0..32 {
            match p.logs(token, stream, offset, CHUNK).await {
                Ok(mut c) if !c.data.is_empty() => {
                    let read_at = clock.now();
                    if times.is_none() {
                        times = crate::engine::log_times::Writer::open(&path).await.ok();
                    }
                    let Some(t) = times.as_mut() else { break };
                    if t.record(at, read_at).await.is_err() {
                        break;
                    }
                    mask_secrets(&mut c.data, mask);
                    if f.write_all(&c.data).await.is_err() {
                        break;
                    }
                    at += c.data.len() as u64;
                    offset = c.next_offset;
                }
                Ok(_) => break,
                Err(e) => {
                    tracing::debug!(%token, error = %e, "log shipping paused");
                    break;
                }
            }
        }
        let _ = f.flush().await;
    }
}

/// Overwrites every occurrence of each secret value with `*`. Values
/// shorter than 4 bytes are left alone: masking them would shred ordinary
/// text and protect nothing. (A value split across two chunks is not seen;
/// chunks are 256 KiB, so that takes a workload printing it at a boundary.)
pub fn mask_secrets(data: &mut [u8], secrets: &[SecretValue]) {
    for s in secrets {
        let v = s.expose().as_bytes();
        if v.len() < 4 || data.len() < v.len() {
            continue;
        }
        let mut i = 0;
        while i + v.len() <= data.len() {
            if &data[i..i + v.len()] == v {
                data[i..i + v.len()].fill(b'*');
                i += v.len();
            } else {
                i += 1;
            }
        }
    }
}

/// The last `lines` lines of a file, reading at most its last 256 KiB.
pub async fn tail_lines_of(path: &std::path::Path, lines: usize) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncSeekExt};
    const WINDOW: u64 = 256 * 1024;
    let Ok(mut f) = tokio::fs::File::open(path).await else { return Vec::new() };
    let len = f.metadata().await.map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(WINDOW);
    if f.seek(std::io::SeekFrom::Start(start)).await.is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    if f.read_to_end(&mut buf).await.is_err() {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&buf);
    let mut all: Vec<&str> = text.lines().collect();
    if start > 0 && !all.is_empty() {
        all.remove(0); // a partial first line
    }
    all[all.len().saturating_sub(lines)..].iter().map(|s| s.to_string()).collect()
}
