//! When each piece of a shipped log was written, as far as Canopy knows:
//! the time the engine first read it from the provider. Next to each
//! shipped `stdout.log` / `stderr.log` the engine keeps `stdout.times` /
//! `stderr.times`, an append-only index of fixed 16-byte records, each
//! the byte offset where a shipped chunk starts (u64, little-endian) and
//! the time it was first read (Unix milliseconds, i64, little-endian).
//! Offsets never go down; a record repeated at one offset (a chunk whose
//! write failed and was shipped again) is superseded by the later one.
//!
//! A line's time is that of the chunk holding its first byte. A log
//! shipped while its attempt ran (every poll) carries a time per poll; one
//! shipped in one go after its attempt ended shares one. Logs shipped
//! before the index existed have none, and readers say so (`None`).
//!
//! Owns the index's format, its writing and its look-ups; knows nothing of
//! providers or of the console.

use super::model::Millis;
use std::path::{Path, PathBuf};

/// (offset where a chunk starts, when it was first read).
pub type Times = Vec<(u64, Millis)>;

/// Bytes per record: offset, then milliseconds.
const RECORD: u64 = 16;

/// At most this many times go with one read of a log; a read whose bytes
/// span more is cut short where the next one starts (so that a log read
/// over HTTP carries them in a header of bounded size).
pub const MAX_PER_READ: usize = 512;

/// The index beside a shipped log: `stdout.log` → `stdout.times`.
pub fn path_for(log: &Path) -> PathBuf {
    log.with_extension("times")
}

fn encode(offset: u64, at: Millis) -> [u8; RECORD as usize] {
    let mut r = [0u8; RECORD as usize];
    r[..8].copy_from_slice(&offset.to_le_bytes());
    r[8..].copy_from_slice(&at.0.to_le_bytes());
    r
}

fn decode(r: &[u8]) -> (u64, Millis) {
    let mut o = [0u8; 8];
    let mut t = [0u8; 8];
    o.copy_from_slice(&r[..8]);
    t.copy_from_slice(&r[8..16]);
    (u64::from_le_bytes(o), Millis(i64::from_le_bytes(t)))
}

/// Appends to a log's index (the engine's log shipping).
pub struct Writer {
    file: tokio::fs::File,
}

impl Writer {
    /// Opens the index beside `log` for appending; a record torn by a
    /// crash (a length not a multiple of 16) is dropped first.
    pub async fn open(log: &Path) -> std::io::Result<Writer> {
        let file = crate::private::append_async(&path_for(log)).await?;
        let len = file.metadata().await?.len();
        if len % RECORD != 0 {
            file.set_len(len - len % RECORD).await?;
        }
        Ok(Writer { file })
    }

    /// Records that the bytes from `offset` were first read at `at`.
    /// Written before those bytes are, so that no shipped byte is ever
    /// without its time.
    pub async fn record(&mut self, offset: u64, at: Millis) -> std::io::Result<()> {
        use tokio::io::AsyncWriteExt;
        self.file.write_all(&encode(offset, at)).await?;
        // tokio's File writes on a background thread: flush waits for it,
        // so the record is on disk before the chunk it times.
        self.file.flush().await
    }
}

/// The times of the chunks that bytes `from..to` of the log at `log` lie
/// in, oldest first: the first is that of the chunk holding byte `from`
/// (its offset may be before it), then one per chunk starting before
/// `to`; at most [`MAX_PER_READ`]. When there were more, also where the
/// read must stop for those to cover it (the offset of the first left
/// out). Empty when the log has no index. Blocking; small reads.
pub fn read(log: &Path, from: u64, to: u64) -> std::io::Result<(Times, Option<u64>)> {
    use std::os::unix::fs::FileExt;
    let f = match std::fs::File::open(path_for(log)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), None)),
        Err(e) => return Err(e),
    };
    let n = f.metadata()?.len() / RECORD;
    let at = |i: u64| -> std::io::Result<(u64, Millis)> {
        let mut r = [0u8; RECORD as usize];
        f.read_exact_at(&mut r, i * RECORD)?;
        Ok(decode(&r))
    };
    // The first record starting after `from`; the one before it covers it.
    let (mut lo, mut hi) = (0u64, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if at(mid)?.0 <= from {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let first = lo.saturating_sub(1);
    // Enough records for the cap, the superseded ones (a failed write
    // ends its shipping round, so at most one per chunk) and the one that
    // says where to stop, in one read.
    let want = n.saturating_sub(first).min(MAX_PER_READ as u64 * 2 + 2);
    let mut buf = vec![0u8; (want * RECORD) as usize];
    f.read_exact_at(&mut buf, first * RECORD)?;
    let mut out: Times = Vec::new();
    for r in buf.chunks_exact(RECORD as usize) {
        let (off, t) = decode(r);
        if off >= to {
            break;
        }
        if out.last().is_some_and(|l| l.0 == off) {
            // The later of two at one offset.
            if let Some(last) = out.last_mut() {
                *last = (off, t);
            }
        } else if out.len() == MAX_PER_READ {
            return Ok((out, Some(off)));
        } else {
            out.push((off, t));
        }
    }
    Ok((out, None))
}

/// The time of the byte at `offset` from `times` (as [`read`] gives
/// them): that of the last chunk starting at or before it.
pub fn time_at(times: &[(u64, Millis)], offset: u64) -> Option<Millis> {
    let i = times.partition_point(|(o, _)| *o <= offset);
    i.checked_sub(1).map(|i| times[i].1)
}

/// `times` as the API's `X-Canopy-Log-Times` header carries them:
/// `OFFSET:MILLIS` pairs, comma-separated.
pub fn to_header(times: &[(u64, Millis)]) -> String {
    let pairs: Vec<String> = times.iter().map(|(o, t)| format!("{o}:{}", t.0)).collect();
    pairs.join(",")
}

/// The times in an `X-Canopy-Log-Times` header; pairs that do not parse
/// are left out.
pub fn from_header(s: &str) -> Times {
    s.split(',')
        .filter_map(|p| {
            let (o, t) = p.trim().split_once(':')?;
            Some((o.parse().ok()?, Millis(t.parse().ok()?)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn chunks_are_found_by_offset_torn_records_dropped_and_reads_capped() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("stdout.log");
        assert_eq!(read(&log, 0, 100).unwrap(), (Vec::new(), None), "no index: no times");
        let mut w = Writer::open(&log).await.unwrap();
        w.record(0, Millis(1_000)).await.unwrap();
        w.record(10, Millis(2_000)).await.unwrap();
        // Shipped again at 20 after a failed write: the later one counts.
        w.record(20, Millis(2_500)).await.unwrap();
        w.record(20, Millis(3_000)).await.unwrap();
        w.record(30, Millis(4_000)).await.unwrap();
        drop(w);
        let (t, cut) = read(&log, 0, 40).unwrap();
        assert_eq!(t, [(0, Millis(1_000)), (10, Millis(2_000)), (20, Millis(3_000)), (30, Millis(4_000))]);
        assert_eq!(cut, None);
        let (t, _) = read(&log, 15, 25).unwrap();
        assert_eq!(t, [(10, Millis(2_000)), (20, Millis(3_000))], "from the chunk holding byte 15");
        assert_eq!(time_at(&t, 15), Some(Millis(2_000)));
        assert_eq!(time_at(&t, 24), Some(Millis(3_000)));
        assert_eq!(time_at(&t, 5), None);
        let (t, _) = read(&log, 35, 36).unwrap();
        assert_eq!(t, [(30, Millis(4_000))], "past the last record: the last chunk");

        // A crash tore the last record: it is dropped on the next open.
        std::fs::OpenOptions::new()
            .append(true)
            .open(path_for(&log))
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[1, 2, 3]))
            .unwrap();
        let mut w = Writer::open(&log).await.unwrap();
        w.record(40, Millis(5_000)).await.unwrap();
        drop(w);
        let (t, _) = read(&log, 39, 50).unwrap();
        assert_eq!(t, [(30, Millis(4_000)), (40, Millis(5_000))]);

        // Many chunks: one read carries at most MAX_PER_READ and says
        // where to stop.
        let many = dir.path().join("stderr.log");
        let mut w = Writer::open(&many).await.unwrap();
        for i in 0..(MAX_PER_READ as u64 + 10) {
            w.record(i * 3, Millis(i as i64)).await.unwrap();
        }
        drop(w);
        let (t, cut) = read(&many, 1, u64::MAX).unwrap();
        assert_eq!(t.len(), MAX_PER_READ);
        assert_eq!(t[0], (0, Millis(0)));
        assert_eq!(cut, Some(MAX_PER_READ as u64 * 3));
        assert_eq!(from_header(&to_header(&t)), t, "through the API's header");
    }
}
