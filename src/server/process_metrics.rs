//! The standard `process_*` metrics, named as the Prometheus client
//! libraries name them, read from `/proc/self` on Linux. Elsewhere, or
//! when `/proc` cannot be read, the families are left out (a scrape never
//! fails for them).

use std::fmt::Write;

/// What `/proc` says about this process now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Process {
    pub resident_memory_bytes: u64,
    pub virtual_memory_bytes: u64,
    pub cpu_seconds: f64,
    /// Seconds since the Unix epoch.
    pub start_time_seconds: f64,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
}

/// Reads this process's figures; `None` off Linux or without `/proc`.
pub fn read() -> Option<Process> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime = boot.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system; it has no memory
    // effects and any argument is valid (-1 means unknown).
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let (ticks, page) = (u64::try_from(ticks).ok()?, u64::try_from(page).ok()?);
    let mut p = parse_stat(&stat, ticks.max(1), page, btime)?;
    p.open_fds = std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64);
    p.max_fds = std::fs::read_to_string("/proc/self/limits").ok().and_then(|l| max_open_files(&l));
    Some(p)
}

/// The figures in `/proc/self/stat` (proc(5)): after the command name in
/// parentheses (which may hold spaces), utime and stime (fields 14, 15, in
/// clock ticks), starttime (22, ticks after boot), vsize (23, bytes) and
/// rss (24, pages).
fn parse_stat(stat: &str, ticks: u64, page: u64, btime: u64) -> Option<Process> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state).
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let (utime, stime, start, vsize, rss) = (field(14)?, field(15)?, field(22)?, field(23)?, field(24)?);
    Some(Process {
        resident_memory_bytes: rss * page,
        virtual_memory_bytes: vsize,
        cpu_seconds: (utime + stime) as f64 / ticks as f64,
        start_time_seconds: btime as f64 + start as f64 / ticks as f64,
        open_fds: None,
        max_fds: None,
    })
}

/// The soft limit on open files from `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

/// Appends the `process_*` families, when they can be read.
pub fn render(out: &mut String) {
    let Some(p) = read() else { return };
    let mut one = |name: &str, kind: &str, help: &str, v: String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    };
    one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", {
        p.cpu_seconds.to_string()
    });
    one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", {
        p.resident_memory_bytes.to_string()
    });
    one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", {
        p.virtual_memory_bytes.to_string()
    });
    one(
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
        p.start_time_seconds.to_string(),
    );
    if let Some(n) = p.open_fds {
        one("process_open_fds", "gauge", "Number of open file descriptors.", n.to_string());
    }
    if let Some(n) = p.max_fds {
        one("process_max_fds", "gauge", "Maximum number of open file descriptors.", n.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_command_name_with_spaces_and_parentheses() {
        // Fields 1..=24 of a real line, the name holding ") (".
        let stat = "4242 (canopy (x) y) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    250 50 0 0 20 0 8 0 1000 123456789 2048 18446744073709551615";
        let p = parse_stat(stat, 100, 4096, 1_700_000_000).unwrap();
        assert_eq!(p.cpu_seconds, 3.0);
        assert_eq!(p.resident_memory_bytes, 2048 * 4096);
        assert_eq!(p.virtual_memory_bytes, 123_456_789);
        assert_eq!(p.start_time_seconds, 1_700_000_010.0);
    }

    #[test]
    fn the_open_file_limit_is_the_soft_one() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
    }
}
