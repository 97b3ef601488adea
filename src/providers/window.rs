//! Lend windows: when an owner's machine may run Canopy's work.
//!
//! An owner lends a host only at certain times ("weeknights and
//! weekends"), written in the owner's own IANA time zone so daylight saving
//! moves the window with the owner's clock, not with UTC:
//!
//! ```toml
//! windows = ["mon-fri 20:00-08:00", "sat-sun"]
//! timezone = "Europe/Berlin"
//! ```
//!
//! Each entry is `[DAYS] [HH:MM-HH:MM]`. `DAYS` is a day (`mon`), a range
//! (`mon-fri`, `fri-mon`), a list (`mon,wed,fri`) or one of `daily`,
//! `weekdays`, `weekends`; omitted, every day. A time range names the day
//! it *starts* on and may run past midnight (`mon-fri 20:00-08:00` ends on
//! Saturday at 08:00); omitted, the whole day. `24:00` ends at midnight.
//! Windows that touch or overlap are one window: `["20:00-08:00",
//! "sat-sun"]` is open from Friday 20:00 to Monday 08:00 without a gap.
//!
//! This module is pure time arithmetic: it answers whether a window is open
//! at an instant, when the opening closes and when the next one opens. The
//! provider that lends the host decides what to do with the answers (no new
//! placement outside a window, stop running work with grace before it
//! closes). It must not read the clock itself: callers pass the instant.

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use std::time::SystemTime;

/// How far ahead [`LendWindows::closes_at`] and [`LendWindows::opens_at`]
/// look, in days: a weekly pattern repeats within 8.
const HORIZON_DAYS: i64 = 9;

/// One entry: the days it starts on and its time of day.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// Monday first.
    days: [bool; 7],
    start: Time,
    /// Minutes after `start` (1..=1440).
    minutes: i64,
}

/// When a host is lent; see the module documentation for the syntax.
#[derive(Debug, Clone)]
pub struct LendWindows {
    rules: Vec<Rule>,
    tz: TimeZone,
    tz_name: String,
    written: Vec<String>,
}

impl PartialEq for LendWindows {
    fn eq(&self, other: &Self) -> bool {
        self.rules == other.rules && self.tz_name == other.tz_name
    }
}

impl Default for LendWindows {
    fn default() -> Self {
        Self::always()
    }
}

impl LendWindows {
    /// Lent at all times.
    pub fn always() -> Self {
        Self { rules: Vec::new(), tz: TimeZone::UTC, tz_name: "UTC".into(), written: Vec::new() }
    }

    /// Parses `windows` in `timezone` (an IANA name such as
    /// `Europe/Berlin`). No windows at all means always lent. The error
    /// names the entry and what is wrong with it.
    pub fn parse(windows: &[String], timezone: &str) -> Result<Self, String> {
        let tz = TimeZone::get(timezone).map_err(|_| {
            format!("unknown time zone {timezone:?}: use an IANA name such as \"Europe/Berlin\" or \"UTC\"")
        })?;
        let rules = windows
            .iter()
            .map(|w| parse_rule(w).map_err(|e| format!("lend window {w:?}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { rules, tz, tz_name: timezone.to_string(), written: windows.to_vec() })
    }

    /// Whether the host is lent at all times.
    pub fn is_always(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn is_open(&self, at: SystemTime) -> bool {
        self.is_always() || self.opening_at(ts(at)).is_some()
    }

    /// When the opening that `at` falls in closes; `None` when the window
    /// is closed at `at`, or does not close within a week (always lent, or
    /// open every day around the clock).
    pub fn closes_at(&self, at: SystemTime) -> Option<SystemTime> {
        let (_, end) = self.opening_at(ts(at))?;
        end.map(SystemTime::from)
    }

    /// When the window next opens, if it is closed at `at`; `None` when it
    /// is open at `at`, or never opens.
    pub fn opens_at(&self, at: SystemTime) -> Option<SystemTime> {
        if self.is_open(at) {
            return None;
        }
        let t = ts(at);
        self.intervals(t).into_iter().map(|(s, _)| s).find(|s| *s > t).map(SystemTime::from)
    }

    /// The windows as written, with their zone: `mon-fri 20:00-08:00,
    /// sat-sun (Europe/Berlin)`; `always` when unrestricted.
    pub fn describe(&self) -> String {
        if self.is_always() {
            return "always".into();
        }
        format!("{} ({})", self.written.join(", "), self.tz_name)
    }

    /// The merged opening containing `t`: its start and, unless it lasts
    /// a week or more from `t` (so never closes, as far as a weekly
    /// pattern goes), its end.
    fn opening_at(&self, t: Timestamp) -> Option<(Timestamp, Option<Timestamp>)> {
        let week = jiff::SignedDuration::from_hours(7 * 24);
        self.intervals(t)
            .into_iter()
            .find(|(s, e)| *s <= t && t < *e)
            .map(|(s, e)| (s, (t.duration_until(e) < week).then_some(e)))
    }

    /// Every opening from two days before `t` to [`HORIZON_DAYS`] after,
    /// sorted, with touching and overlapping ones merged.
    fn intervals(&self, t: Timestamp) -> Vec<(Timestamp, Timestamp)> {
        let today = t.to_zoned(self.tz.clone()).date();
        let mut all = Vec::new();
        for offset in -2..HORIZON_DAYS {
            let Ok(day) = today.checked_add(offset.days()) else { continue };
            for rule in &self.rules {
                if !rule.days[weekday_index(day.weekday())] {
                    continue;
                }
                if let Some(iv) = self.interval(day, rule) {
                    all.push(iv);
                }
            }
        }
        all.sort();
        let mut merged: Vec<(Timestamp, Timestamp)> = Vec::new();
        for (s, e) in all {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        merged
    }

    /// A rule's opening that starts on `day`, in absolute time. Daylight
    /// saving gaps and folds resolve as the wall clock would (jiff's
    /// "compatible" disambiguation).
    fn interval(&self, day: Date, rule: &Rule) -> Option<(Timestamp, Timestamp)> {
        let start_civil = day.to_datetime(rule.start);
        let end_civil = start_civil.checked_add(rule.minutes.minutes()).ok()?;
        let start = start_civil.to_zoned(self.tz.clone()).ok()?.timestamp();
        let end = end_civil.to_zoned(self.tz.clone()).ok()?.timestamp();
        (end > start).then_some((start, end))
    }
}

fn ts(at: SystemTime) -> Timestamp {
    Timestamp::try_from(at).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn weekday_index(d: Weekday) -> usize {
    d.to_monday_zero_offset() as usize
}

const DAY_NAMES: [&str; 7] = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

fn parse_rule(text: &str) -> Result<Rule, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (days, times) = match words.as_slice() {
        [] => return Err("is empty; write e.g. \"mon-fri 20:00-08:00\" or \"sat-sun\"".into()),
        [one] if one.contains(':') => ([true; 7], Some(*one)),
        [one] => (parse_days(one)?, None),
        [d, t] => (parse_days(d)?, Some(*t)),
        _ => {
            return Err("has more than a day part and a time part; write e.g. \"mon-fri 20:00-08:00\"".into());
        }
    };
    let Some(times) = times else {
        return Ok(Rule { days, start: Time::midnight(), minutes: 24 * 60 });
    };
    let (a, b) = times
        .split_once('-')
        .ok_or_else(|| format!("time range {times:?} needs a start and an end, as in 20:00-08:00"))?;
    let start = parse_minute(a)?;
    let end = parse_minute(b)?;
    if start == 24 * 60 {
        return Err(format!("a window cannot start at {a:?}; use 00:00"));
    }
    let minutes = if end > start { end - start } else { end + 24 * 60 - start };
    let minutes = if minutes == 0 { 24 * 60 } else { minutes };
    let start = Time::new((start / 60) as i8, (start % 60) as i8, 0, 0).map_err(|e| e.to_string())?;
    Ok(Rule { days, start, minutes })
}

/// `HH:MM`, as minutes after midnight (`24:00` is 1440).
fn parse_minute(s: &str) -> Result<i64, String> {
    let bad = || format!("{s:?} is not a time of day; write HH:MM, 00:00 to 24:00");
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.is_empty() || h.len() > 2 || m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (i64, i64) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if h > 24 || m > 59 || (h == 24 && m != 0) {
        return Err(bad());
    }
    Ok(h * 60 + m)
}

fn parse_days(s: &str) -> Result<[bool; 7], String> {
    let mut days = [false; 7];
    match s.to_ascii_lowercase().as_str() {
        "daily" | "everyday" => return Ok([true; 7]),
        "weekdays" => return Ok([true, true, true, true, true, false, false]),
        "weekends" => return Ok([false, false, false, false, false, true, true]),
        _ => {}
    }
    for part in s.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (day_index(a)?, day_index(b)?);
                let mut i = a;
                loop {
                    days[i] = true;
                    if i == b {
                        break;
                    }
                    i = (i + 1) % 7;
                }
            }
            None => days[day_index(part)?] = true,
        }
    }
    Ok(days)
}

fn day_index(s: &str) -> Result<usize, String> {
    let lower = s.to_ascii_lowercase();
    DAY_NAMES
        .iter()
        .position(|d| lower.len() >= 3 && d.starts_with(&lower[..3]) && day_word(&lower))
        .ok_or_else(|| {
            format!(
                "{s:?} is not a day; use mon, tue, wed, thu, fri, sat, sun, a range (mon-fri), a list \
                 (mon,wed) or daily, weekdays, weekends"
            )
        })
}

/// Whether `s` is a day's short or full English name.
fn day_word(s: &str) -> bool {
    const FULL: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];
    DAY_NAMES.contains(&s) || FULL.contains(&s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn at(tz: &str, y: i16, mo: i8, d: i8, h: i8, mi: i8) -> SystemTime {
        SystemTime::from(date(y, mo, d).at(h, mi, 0, 0).in_tz(tz).unwrap().timestamp())
    }

    fn berlin(windows: &[&str]) -> LendWindows {
        let w: Vec<String> = windows.iter().map(|s| s.to_string()).collect();
        LendWindows::parse(&w, "Europe/Berlin").unwrap()
    }

    // 2026-12-07 is a Monday.
    #[test]
    fn weeknights_and_weekends_are_one_window_from_friday_evening_to_monday_morning() {
        let w = berlin(&["mon-fri 20:00-08:00", "sat-sun"]);
        let tz = "Europe/Berlin";
        assert!(!w.is_open(at(tz, 2026, 12, 7, 12, 0)), "Monday noon is the owner's");
        assert!(w.is_open(at(tz, 2026, 12, 7, 21, 0)));
        assert!(w.is_open(at(tz, 2026, 12, 8, 7, 59)), "Tuesday 07:59, Monday's night");
        assert!(!w.is_open(at(tz, 2026, 12, 8, 8, 0)));
        assert_eq!(w.closes_at(at(tz, 2026, 12, 7, 21, 0)), Some(at(tz, 2026, 12, 8, 8, 0)));
        // Friday night runs into the weekend, which ends at midnight:
        // Sunday night is not a weeknight in "mon-fri".
        assert_eq!(w.closes_at(at(tz, 2026, 12, 11, 22, 0)), Some(at(tz, 2026, 12, 14, 0, 0)));
        let nightly = berlin(&["20:00-08:00", "weekends"]);
        assert_eq!(nightly.closes_at(at(tz, 2026, 12, 11, 22, 0)), Some(at(tz, 2026, 12, 14, 8, 0)));
        assert_eq!(w.opens_at(at(tz, 2026, 12, 7, 12, 0)), Some(at(tz, 2026, 12, 7, 20, 0)));
        assert_eq!(w.opens_at(at(tz, 2026, 12, 7, 21, 0)), None, "already open");
        assert_eq!(w.closes_at(at(tz, 2026, 12, 7, 12, 0)), None, "closed: nothing to close");
    }

    #[test]
    fn the_window_follows_the_owners_clock_across_daylight_saving() {
        // Berlin leaves summer time on 2026-10-25 (03:00 CEST → 02:00 CET):
        // 20:00 local is 18:00 UTC before and 19:00 UTC after.
        let w = berlin(&["20:00-08:00"]);
        let utc = "UTC";
        assert!(w.is_open(at(utc, 2026, 10, 23, 18, 30)));
        assert!(!w.is_open(at(utc, 2026, 10, 26, 18, 30)));
        assert!(w.is_open(at(utc, 2026, 10, 26, 19, 30)));
        // The night of the change is an hour longer.
        let open = at("Europe/Berlin", 2026, 10, 24, 20, 0);
        let closes = w.closes_at(open).unwrap();
        assert_eq!(closes.duration_since(open).unwrap().as_secs(), 13 * 3600);
    }

    #[test]
    fn always_open_windows_never_close() {
        assert!(LendWindows::always().is_open(SystemTime::now()));
        assert_eq!(LendWindows::always().closes_at(SystemTime::now()), None);
        let w = berlin(&["daily"]);
        assert!(w.is_open(SystemTime::now()));
        assert_eq!(w.closes_at(SystemTime::now()), None);
        assert_eq!(berlin(&["00:00-24:00"]).closes_at(SystemTime::now()), None);
    }

    #[test]
    fn day_lists_ranges_that_wrap_and_full_names() {
        let w = berlin(&["fri-mon 09:00-17:00", "Wednesday"]);
        let tz = "Europe/Berlin";
        assert!(w.is_open(at(tz, 2026, 12, 7, 10, 0)), "Monday is in fri-mon");
        assert!(!w.is_open(at(tz, 2026, 12, 8, 10, 0)), "Tuesday is not");
        assert!(w.is_open(at(tz, 2026, 12, 9, 23, 0)), "all of Wednesday");
        assert_eq!(w.describe(), "fri-mon 09:00-17:00, Wednesday (Europe/Berlin)");
        let lst = berlin(&["mon,wed 10:00-11:00"]);
        assert!(lst.is_open(at(tz, 2026, 12, 9, 10, 30)));
        assert!(!lst.is_open(at(tz, 2026, 12, 8, 10, 30)));
    }

    #[test]
    fn mistakes_are_named_with_the_entry() {
        let e = |w: &str, tz: &str| LendWindows::parse(&[w.to_string()], tz).unwrap_err();
        assert!(e("mon-fri", "Mars/Olympus").contains("unknown time zone \"Mars/Olympus\""));
        assert!(e("mon-fry 20:00-08:00", "UTC").contains("\"fry\" is not a day"), "{}", e("mon-fry", "UTC"));
        assert!(e("mon 25:00-08:00", "UTC").contains("\"25:00\" is not a time of day"));
        assert!(e("mon 20:00", "UTC").contains("needs a start and an end"));
        assert!(e("mon 20:00-08:00 extra", "UTC").contains("more than a day part"));
        assert!(e("24:00-08:00", "UTC").contains("cannot start"));
        assert!(e("monk", "UTC").contains("is not a day"));
    }
}
