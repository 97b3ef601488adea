//! Small value types shared by specs and fleets: durations written the way
//! operators write them (`"90s"`, `"2h"`, `"1h30m"`) and glob patterns for
//! provider and region allow-lists (`"eu-*"`, `"onprem-?"`), and sizes in
//! bytes written the same way (`"8GiB"`, `"500MB"`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A duration written as a human string (`"45s"`, `"2h"`, `"1h30m"`, `"3d"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct HumanDuration(pub Duration);

impl HumanDuration {
    pub fn from_secs(secs: u64) -> Self {
        Self(Duration::from_secs(secs))
    }
    pub fn as_secs(&self) -> u64 {
        self.0.as_secs()
    }
    pub fn as_hours_f64(&self) -> f64 {
        self.0.as_secs_f64() / 3600.0
    }
}

impl fmt::Display for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl std::str::FromStr for HumanDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.is_empty() {
            return Err("empty duration; write it like \"90s\", \"45m\" or \"2h\"".into());
        }
        humantime::parse_duration(t).map(HumanDuration).map_err(|e| {
            format!("invalid duration {s:?} ({e}); write it like \"90s\", \"45m\", \"2h\" or \"1h30m\"")
        })
    }
}

/// A duration as [`HumanDuration`] parses it: for clap's `value_parser`
/// and every other place a duration is read, so all accept the same.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    s.parse::<HumanDuration>().map(|d| d.0)
}

impl Serialize for HumanDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An instant as users write it, in milliseconds since the epoch: RFC 3339
/// (`2026-12-01T08:00:00Z`, `…+01:00`), or a date and time without an
/// offset (`2026-12-01 08:00:00`, `2026-12-01T08:00`) or a date alone,
/// both taken as UTC. Durations are [`HumanDuration`]'s; instants and time
/// zones are jiff's everywhere in Canopy.
pub fn parse_timestamp_ms(s: &str) -> Option<i64> {
    let t = s.trim();
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Some(ts.as_millisecond());
    }
    let civil = t.parse::<jiff::civil::DateTime>().ok().or_else(|| {
        t.parse::<jiff::civil::Date>().ok().map(|d| d.to_datetime(jiff::civil::Time::midnight()))
    })?;
    civil.to_zoned(jiff::tz::TimeZone::UTC).ok().map(|z| z.timestamp().as_millisecond())
}

/// Milliseconds since the epoch as `2026-12-01 08:00:00 UTC`.
pub fn utc_seconds(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(
        |_| format!("{ms} ms since the epoch"),
        |t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string(),
    )
}

/// The unit spellings [`HumanDuration`]'s parser (humantime) accepts.
pub const DURATION_UNITS: &[&str] = &[
    "nanos", "nsec", "ns", "usec", "us", "µs", "millis", "msec", "ms", "seconds", "second", "secs", "sec",
    "s", "minutes", "minute", "mins", "min", "m", "hours", "hour", "hrs", "hr", "h", "days", "day", "d",
    "weeks", "week", "wks", "wk", "w", "months", "month", "M", "years", "year", "yrs", "yr", "y",
];

/// [`DURATION_UNITS`] as one short alternation (an editor shows the
/// pattern in its error); a test holds the two equal.
const DURATION_UNIT_PATTERN: &str = concat!(
    r"n(?:anos|sec|s)|usec|[uµ]s|m(?:illis|sec|s)|s(?:ec(?:ond)?s?)?|m(?:in(?:ute)?s?)?",
    r"|h(?:(?:ou)?rs?)?|d(?:ays?)?|w(?:(?:ee)?ks?)?|M|months?|y(?:(?:ea)?rs?)?"
);

/// A regular expression (ECMA 262, Python and Rust `regex` alike) for the
/// spellings [`HumanDuration`] parses: `0`, or spans of a number (digits,
/// optionally a fraction, spaces allowed between digits) and a unit, one
/// after another with or without spaces. What it cannot say: a number too
/// large, or a fraction finer than a nanosecond (`1.5ns`, `0.1234567891s`),
/// which the parser refuses. A test holds it to the parser.
pub fn duration_pattern() -> String {
    let span = format!(r"[0-9](?:\s*[0-9])*(?:\s*\.(?:\s*[0-9])+)?\s*(?:{DURATION_UNIT_PATTERN})");
    format!(r"^\s*(?:0\s*|(?:{span}\s*)+)$")
}

impl schemars::JsonSchema for HumanDuration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A duration such as \"90s\", \"45m\", \"2h\" or \"1h30m\": numbers each with a unit (ns, us, ms, s, m, h, d, w, M for months, y, or their longer spellings like \"min\", \"hours\", \"days\").",
            "pattern": duration_pattern()
        })
    }
}

/// A shell-style glob over names: `*` matches any run of characters, `?`
/// one character. Matching is case-sensitive and anchored at both ends.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Glob(String);

impl Glob {
    pub fn new(pattern: impl Into<String>) -> Self {
        Self(pattern.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// Whether `name` matches. Iterative with one backtrack point, so it is
    /// linear in practice and never recursive.
    pub fn matches(&self, name: &str) -> bool {
        let p = self.0.as_bytes();
        let n = name.as_bytes();
        let (mut pi, mut ni) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            if pi < p.len() && (p[pi] == b'?' || p[pi] == n[ni]) {
                pi += 1;
                ni += 1;
            } else if pi < p.len() && p[pi] == b'*' {
                star = Some((pi, ni));
                pi += 1;
            } else if let Some((sp, sn)) = star {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            } else {
                return false;
            }
        }
        while pi < p.len() && p[pi] == b'*' {
            pi += 1;
        }
        pi == p.len()
    }
}

/// True when `name` matches any of `patterns`, or `patterns` is empty (no
/// restriction).
pub fn allowed(patterns: &[Glob], name: &str) -> bool {
    patterns.is_empty() || patterns.iter().any(|g| g.matches(name))
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Glob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Glob {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Glob(String::deserialize(d)?))
    }
}

impl schemars::JsonSchema for Glob {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Glob".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A name or a glob: `*` matches any run of characters, `?` one character."
        })
    }
}

/// A size in bytes, written as a number of bytes or with a unit: `"8GiB"`,
/// `"512 MiB"`, `"10GB"` (binary units are powers of 1024, decimal ones of
/// 1000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&human_bytes(self.0))
    }
}

impl std::str::FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = (&t[..split], t[split..].trim());
        let bad = || format!("invalid size {s:?}; write it like \"8GiB\", \"500MiB\" or \"10GB\"");
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let mult: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "t" | "tib" => 1 << 40,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            "tb" => 1_000_000_000_000,
            _ => return Err(bad()),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(|| format!("size {s:?} is too large"))
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bytes(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bytes(n) => Ok(ByteSize(n)),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// A span of seconds as an operator reads it: `45s`, `14m`, `3h 5m`, `2d 4h`.
pub fn human_secs(s: f64) -> String {
    let s = if s.is_finite() { s.max(0.0).round() as u64 } else { 0 };
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => match (s % 3600) / 60 {
            0 => format!("{}h", s / 3600),
            m => format!("{}h {m}m", s / 3600),
        },
        _ => match (s % 86400) / 3600 {
            0 => format!("{}d", s / 86400),
            h => format!("{}d {h}h", s / 86400),
        },
    }
}

/// `n` bytes for people: `512 B`, `1.5 KiB`, `8.0 GiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    #[test]
    fn instants_parse_as_rfc3339_or_as_utc_without_an_offset() {
        let at = 1_764_576_000_000; // 2025-12-01T08:00:00Z
        for s in [
            "2025-12-01T08:00:00Z",
            "2025-12-01T09:00:00+01:00",
            "2025-12-01 08:00:00",
            "2025-12-01T08:00",
            " 2025-12-01T08:00:00.000Z ",
        ] {
            assert_eq!(parse_timestamp_ms(s), Some(at), "{s}");
        }
        assert_eq!(parse_timestamp_ms("2025-12-01"), Some(at - 8 * 3_600_000));
        for bad in ["yesterday", "2025-13-01", "", "30d"] {
            assert_eq!(parse_timestamp_ms(bad), None, "{bad}");
        }
        assert_eq!(utc_seconds(at), "2025-12-01 08:00:00 UTC");
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("2 fortnights").unwrap_err().contains("write it like"));
    }

    use super::*;

    #[test]
    fn glob_matches_like_a_shell() {
        let g = Glob::new("eu-*");
        assert!(g.matches("eu-west"));
        assert!(g.matches("eu-"));
        assert!(!g.matches("us-east"));
        assert!(Glob::new("onprem-?").matches("onprem-a"));
        assert!(!Glob::new("onprem-?").matches("onprem-ab"));
        assert!(Glob::new("*-gpu-*").matches("cloud-gpu-h100"));
        assert!(Glob::new("exact").matches("exact"));
        assert!(!Glob::new("exact").matches("exactly"));
        assert!(allowed(&[], "anything"));
    }

    #[test]
    fn durations_parse_as_operators_write_them() {
        assert_eq!("2h".parse::<HumanDuration>().unwrap().as_secs(), 7200);
        assert_eq!("1h30m".parse::<HumanDuration>().unwrap().as_secs(), 5400);
        assert_eq!("90s".parse::<HumanDuration>().unwrap().as_secs(), 90);
        assert!("two hours".parse::<HumanDuration>().is_err());
        assert!("".parse::<HumanDuration>().is_err());
    }

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!("8GiB".parse::<ByteSize>().unwrap().0, 8 << 30);
        assert_eq!("512 MiB".parse::<ByteSize>().unwrap().0, 512 << 20);
        assert_eq!("10GB".parse::<ByteSize>().unwrap().0, 10_000_000_000);
        assert_eq!("100".parse::<ByteSize>().unwrap().0, 100);
        assert!("eight gigs".parse::<ByteSize>().is_err());
        assert!("99999999999TiB".parse::<ByteSize>().is_err());
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(8 << 30), "8.0 GiB");
        assert_eq!(human_bytes(1536), "1.5 KiB");
    }
}
