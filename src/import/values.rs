//! The small value grammars SkyPilot and dstack share with nobody: sizes
//! (`32+`, `64GB`, `1024MB`), ranges (`24GB..80GB`, `1..4`, `8GB..`) and
//! durations (`2h`, `1d`, `3600`).
//!
//! Pure functions from text to numbers; each error says what was expected,
//! with an example, and never repeats more than the offending token.

use std::time::Duration;

/// An amount in GB (GiB, as both tools count) and whether it is a minimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Amount {
    pub gb: f64,
    pub at_least: bool,
}

/// GB per unit, case-insensitive; both tools count in powers of 1024.
fn unit_gb(unit: &str) -> Option<f64> {
    Some(match unit.to_ascii_uppercase().as_str() {
        "" | "GB" | "G" | "GIB" => 1.0,
        "KB" | "K" | "KIB" => 1.0 / (1024.0 * 1024.0),
        "MB" | "M" | "MIB" => 1.0 / 1024.0,
        "TB" | "T" | "TIB" => 1024.0,
        "PB" | "P" | "PIB" => 1024.0 * 1024.0,
        _ => return None,
    })
}

/// A number followed by an optional unit: `64`, `64GB`, `1.5TB`, `512MB`.
pub fn size_gb(text: &str) -> Option<f64> {
    let t = text.trim().replace(' ', "");
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let gb = n * unit_gb(unit)?;
    (gb.is_finite() && gb >= 0.0).then_some(gb)
}

/// SkyPilot's `memory` and `disk_size`: `32`, `32+`, `64GB`, `64GB+`.
pub fn skypilot_size(text: &str) -> Option<Amount> {
    let t = text.trim();
    let (body, at_least) = match t.strip_suffix('+') {
        Some(b) => (b, true),
        None => (t, false),
    };
    size_gb(body).map(|gb| Amount { gb, at_least })
}

/// SkyPilot's `cpus`: `4`, `4+`, `0.5`.
pub fn skypilot_count(text: &str) -> Option<Amount> {
    let t = text.trim();
    let (body, at_least) = match t.strip_suffix('+') {
        Some(b) => (b, true),
        None => (t, false),
    };
    let n: f64 = body.trim().parse().ok()?;
    (n.is_finite() && n > 0.0).then_some(Amount { gb: n, at_least })
}

/// An inclusive range with either end open, as dstack writes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// `a..b`, `a..`, `..b` or `a` (exactly a), each end read by `one`.
pub fn range(text: &str, one: impl Fn(&str) -> Option<f64>) -> Option<Range> {
    let t = text.trim().replace(' ', "");
    let r = match t.split_once("..") {
        Some((lo, hi)) => Range {
            min: if lo.is_empty() { None } else { Some(one(lo)?) },
            max: if hi.is_empty() { None } else { Some(one(hi)?) },
        },
        None => {
            let v = one(&t)?;
            Range { min: Some(v), max: Some(v) }
        }
    };
    let ordered = match (r.min, r.max) {
        (None, None) => false,
        (Some(a), Some(b)) => a <= b,
        _ => true,
    };
    ordered.then_some(r)
}

/// A whole, non-negative count: `8`.
pub fn count(text: &str) -> Option<f64> {
    text.trim().parse::<u32>().ok().map(f64::from)
}

/// dstack's durations: seconds as a number, or `<n>s|m|h|d|w`.
pub fn dstack_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    if let Ok(secs) = t.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let unit = t.chars().last()?;
    let n: u64 = t[..t.len() - unit.len_utf8()].trim().parse().ok()?;
    let mult = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        'w' => 604_800,
        _ => return None,
    };
    n.checked_mul(mult).map(Duration::from_secs)
}

/// `24.0` → `24`, `0.5` → `0.5`: for messages.
pub fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { format!("{n}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_the_units_both_tools_document() {
        assert_eq!(skypilot_size("32+"), Some(Amount { gb: 32.0, at_least: true }));
        assert_eq!(skypilot_size("64GB"), Some(Amount { gb: 64.0, at_least: false }));
        assert_eq!(skypilot_size("1024MB").unwrap().gb, 1.0);
        assert_eq!(skypilot_size("1tb").unwrap().gb, 1024.0);
        assert_eq!(skypilot_size("lots"), None);
        assert_eq!(skypilot_size("32x"), None);
        assert_eq!(skypilot_count("4+"), Some(Amount { gb: 4.0, at_least: true }));
        assert_eq!(skypilot_count("0"), None);
    }

    #[test]
    fn ranges_open_at_either_end() {
        assert_eq!(range("24GB..80GB", size_gb), Some(Range { min: Some(24.0), max: Some(80.0) }));
        assert_eq!(range("8GB..", size_gb), Some(Range { min: Some(8.0), max: None }));
        assert_eq!(range("..4", count), Some(Range { min: None, max: Some(4.0) }));
        assert_eq!(range("2", count), Some(Range { min: Some(2.0), max: Some(2.0) }));
        assert_eq!(range("8..2", count), None);
        assert_eq!(range("..", count), None);
        assert_eq!(range("1.5..2", count), None);
    }

    #[test]
    fn durations_as_dstack_writes_them() {
        assert_eq!(dstack_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(dstack_duration("1d"), Some(Duration::from_secs(86_400)));
        assert_eq!(dstack_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(dstack_duration("2 w"), Some(Duration::from_secs(1_209_600)));
        assert_eq!(dstack_duration("2y"), None);
        assert_eq!(dstack_duration("h"), None);
    }
}
