//! The lease: a file holding the time until which Canopy vouches for the
//! host's work. Whoever speaks for Canopy on the host (the ssh provider's
//! `canopy __host`) renews it; the supervisor of every attempt under a
//! lease stops its workload once it runs out (see [`super::shim`]), so a
//! host that lost contact with Canopy never runs work Canopy has already
//! given up on and placed elsewhere.
//!
//! The file is a small JSON record, `{"renewed_at_ms": …, "expires_at_ms":
//! …}`, both in milliseconds since the Unix epoch by the host's own clock:
//! the renewer and the supervisors share the host, so clock differences
//! between Canopy and the host do not matter (a clock stepped on the host
//! does). It is replaced atomically ([`write_atomic`]), so a reader sees
//! the old record or the new one, never a missing or partial file.
//!
//! This module owns the file's format. It decides nothing about what an
//! expired lease means and signals nothing.

use super::layout::{read_json, write_atomic};
use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often a supervisor reads its lease.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The lease file's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// When it was last renewed, in milliseconds since the Unix epoch.
    pub renewed_at_ms: u64,
    /// Until when it holds, in milliseconds since the Unix epoch.
    pub expires_at_ms: u64,
}

impl LeaseRecord {
    pub fn expires_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.expires_at_ms)
    }
    pub fn renewed_at(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.renewed_at_ms)
    }
}

/// Renews the lease at `path` to hold for `for_` from now (creating it).
pub fn renew(path: &Path, for_: Duration) -> io::Result<()> {
    let now = SystemTime::now();
    let record = LeaseRecord { renewed_at_ms: unix_ms(now), expires_at_ms: unix_ms(now + for_) };
    write_atomic(path, &serde_json::to_vec(&record).map_err(io::Error::other)?)
}

/// Until when the lease at `path` holds; `Ok(None)` when there is no lease
/// file. An unreadable or malformed file is an error.
pub fn read(path: &Path) -> io::Result<Option<SystemTime>> {
    Ok(read_record(path)?.map(|r| r.expires_at()))
}

/// The whole record at `path`; `Ok(None)` when there is no lease file.
pub fn read_record(path: &Path) -> io::Result<Option<LeaseRecord>> {
    read_json::<LeaseRecord>(path)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a supervisor stops its workload, or `None` while the lease holds.
///
/// `missing_since` is when the supervisor first found no readable lease
/// (it keeps it between checks). No readable lease means no lease: after
/// one [`CHECK_EVERY`] of finding none (a renewer that was slow to write
/// the first one is given that much), the workload stops.
pub fn verdict(path: &Path, now: SystemTime, missing_since: &mut Option<SystemTime>) -> Option<String> {
    let problem = match read_record(path) {
        Ok(Some(r)) => {
            *missing_since = None;
            if now < r.expires_at() {
                return None;
            }
            let silent = now.duration_since(r.renewed_at()).unwrap_or_default();
            return Some(format!(
                "lease expired: lost contact with Canopy for {} (the lease in {} ran out; the workload \
                 was stopped so that it never runs twice)",
                human(silent),
                path.display(),
            ));
        }
        Ok(None) => "there is no lease file".to_string(),
        Err(e) => format!("the lease file cannot be read ({e})"),
    };
    let since = *missing_since.get_or_insert(now);
    let for_ = now.duration_since(since).unwrap_or_default();
    (for_ >= CHECK_EVERY).then(|| {
        format!(
            "lease expired: lost contact with Canopy for at least {} ({problem} at {}; the workload \
             was stopped so that it never runs twice)",
            human(for_),
            path.display()
        )
    })
}

/// `1.5s`, `2m3s`: seconds with one decimal below a minute.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 { format!("{:.1}s", d.as_secs_f64()) } else { format!("{}m{}s", s / 60, s % 60) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewed_lease_reads_back_its_deadline() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lease.json");
        assert_eq!(read(&p).unwrap(), None);
        let before = SystemTime::now();
        renew(&p, Duration::from_secs(30)).unwrap();
        let until = read(&p).unwrap().unwrap();
        assert!(
            until >= before + Duration::from_secs(29) && until <= SystemTime::now() + Duration::from_secs(30)
        );
        // Renewing replaces the file; no temporary file is left.
        renew(&p, Duration::from_secs(60)).unwrap();
        assert!(read(&p).unwrap().unwrap() > until);
        let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("lease.json")]);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn verdicts_hold_expire_and_treat_a_missing_lease_as_none() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("lease.json");
        let mut missing = None;
        let now = SystemTime::now();
        // Missing: tolerated for one check period, then the end.
        assert_eq!(verdict(&p, now, &mut missing), None);
        let v = verdict(&p, now + CHECK_EVERY, &mut missing).unwrap();
        assert!(v.starts_with("lease expired: lost contact with Canopy for at least 1.0s"), "{v}");
        assert!(v.contains("there is no lease file"), "{v}");
        // A held lease resets the allowance.
        renew(&p, Duration::from_secs(10)).unwrap();
        assert_eq!(verdict(&p, SystemTime::now(), &mut missing), None);
        assert_eq!(missing, None);
        let v = verdict(&p, SystemTime::now() + Duration::from_secs(12), &mut missing).unwrap();
        assert!(v.starts_with("lease expired: lost contact with Canopy for 12."), "{v}");
        // Garbage is no lease.
        std::fs::write(&p, "not json").unwrap();
        assert_eq!(verdict(&p, now, &mut missing), None);
        let v = verdict(&p, now + Duration::from_secs(2), &mut missing).unwrap();
        assert!(v.contains("cannot be read"), "{v}");
    }
}
