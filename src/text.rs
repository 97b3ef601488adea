//! Text that someone else chose, made safe to show on a terminal.
//!
//! Workload names, labels, reasons, a workload's stderr (the classifier's
//! evidence, log lines), events' messages, an error a server sent: any of
//! it may carry bytes that act on the operator's terminal instead of
//! showing (`ESC [2J` clears the screen, OSC 52 writes the clipboard, a
//! bidi override reverses what follows). The CLI and the console show such
//! text only through this module. One convention everywhere: each control
//! character (C0, DEL, C1, and so every escape sequence's introducer) and
//! each invisible format character becomes `�` (U+FFFD), so it shows
//! instead of acting; the rest of an escape sequence is plain text then.

use std::borrow::Cow;

/// Whether `c` acts on a terminal or hides text instead of showing:
/// control characters (C0, DEL, C1) and the invisible format characters
/// that reorder or hide text (bidi overrides and isolates, zero-width
/// spaces and joiners, the BOM, soft hyphens, interlinear annotations).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

/// One line of someone else's text (a cell, a name, a reason), made safe:
/// line and tab breaks become a space, so it stays one line; every other
/// [hidden](is_hidden) character becomes `�`. Borrowed when there is
/// nothing to replace.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hidden) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\t' | '\n' | '\r' | '\u{2028}' | '\u{2029}' => ' ',
                c if is_hidden(c) => '\u{FFFD}',
                c => c,
            })
            .collect(),
    )
}

/// Several lines of someone else's text (a log, a rendered diagnostic),
/// made safe: `\n` and `\t` stay; a carriage return ends the line (`\r\n`
/// is one break, and a progress bar's `\r` shows each update on its own
/// line rather than writing over what came before); every other
/// [hidden](is_hidden) character becomes `�`. Borrowed when there is
/// nothing to replace.
pub fn sanitize_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| is_hidden(c) && c != '\n' && c != '\t') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push('\n');
            }
            c if is_hidden(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `canopy logs` writes a workload's bytes as they are: when asked
/// (`--raw`) or when they go to a pipe or a file, where nothing renders
/// them. On a terminal they go through [`LogText`].
pub fn logs_raw(raw_asked: bool, stdout_is_terminal: bool) -> bool {
    raw_asked || !stdout_is_terminal
}

/// A log's bytes, arriving in chunks, as safe text for a terminal
/// ([`sanitize_lines`]). A UTF-8 sequence or a `\r\n` split across two
/// chunks is joined; invalid UTF-8 becomes `�`.
#[derive(Debug, Default)]
pub struct LogText {
    /// The start of a UTF-8 sequence the last chunk ended in.
    partial: Vec<u8>,
    /// The last chunk ended in `\r` (already written as a line break).
    after_cr: bool,
}

impl LogText {
    /// The next chunk, as text to write.
    pub fn push(&mut self, chunk: &[u8]) -> String {
        let mut bytes = std::mem::take(&mut self.partial);
        bytes.extend_from_slice(chunk);
        let keep = incomplete_tail(&bytes);
        self.partial = bytes.split_off(bytes.len() - keep);
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        let joined = self.after_cr && text.starts_with('\n');
        if joined {
            text.remove(0);
        }
        if joined || !text.is_empty() {
            self.after_cr = text.ends_with('\r');
        }
        sanitize_lines(&text).into_owned()
    }

    /// What is left when the log ends: an unfinished UTF-8 sequence, as `�`.
    pub fn finish(&mut self) -> String {
        let rest = std::mem::take(&mut self.partial);
        if rest.is_empty() { String::new() } else { "\u{FFFD}".into() }
    }
}

/// How many bytes at the end of `b` start a UTF-8 sequence that the next
/// chunk may finish (0 when `b` ends on a boundary or in invalid bytes).
fn incomplete_tail(b: &[u8]) -> usize {
    for back in 1..=3.min(b.len()) {
        let byte = b[b.len() - back];
        if byte & 0xC0 == 0x80 {
            continue; // a continuation byte: look further back
        }
        let need = match byte {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return 0,
        };
        return if need > back { back } else { 0 };
    }
    0
}

/// `value` as pretty JSON for a terminal: what `serde_json` writes, with
/// every [hidden](is_hidden) character that it leaves raw (DEL, C1, bidi
/// and zero-width characters) written as a `\uXXXX` escape too. The same
/// JSON to a parser; nothing that acts on a terminal.
pub fn json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Escaping(Default::default()));
    value.serialize(&mut ser)?;
    // serde_json writes only UTF-8.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// [`json_pretty`] for the CLI's `--json`: every timestamp (an object's
/// `at` or `…_at` key holding epoch milliseconds) gets an RFC 3339 twin
/// beside it (`submitted_at_rfc3339`, in UTC), so a reader need not know
/// the unit. The milliseconds stay as they are.
pub fn json_with_times<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut v = serde_json::to_value(value)?;
    add_rfc3339(&mut v);
    json_pretty(&v)
}

/// Epoch milliseconds from 1973 to 5138: what a timestamp field holds.
const MS_RANGE: std::ops::RangeInclusive<i64> = 100_000_000_000..=99_999_999_999_999;

fn add_rfc3339(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Array(items) => items.iter_mut().for_each(add_rfc3339),
        serde_json::Value::Object(map) => {
            let mut twins = Vec::new();
            for (k, x) in map.iter_mut() {
                add_rfc3339(x);
                let stamp = k == "at" || k.ends_with("_at");
                if let (true, Some(ms)) = (stamp, x.as_i64().filter(|ms| MS_RANGE.contains(ms)))
                    && let Ok(t) = jiff::Timestamp::from_millisecond(ms)
                {
                    twins.push((format!("{k}_rfc3339"), serde_json::Value::String(t.to_string())));
                }
            }
            for (k, t) in twins {
                map.entry(k).or_insert(t);
            }
        }
        _ => {}
    }
}

/// serde_json's pretty formatter, escaping hidden characters in strings.
struct Escaping<'a>(serde_json::ser::PrettyFormatter<'a>);

impl serde_json::ser::Formatter for Escaping<'_> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_hidden(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                // Every hidden character is in the Basic Multilingual Plane.
                write!(w, "\\u{:04x}", u32::from(c))?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }

    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// How long ago `then` was at `now`, in the largest whole unit: `42s`,
/// `5m`, `3h`, `2d`.
pub fn age(now: crate::engine::model::Millis, then: crate::engine::model::Millis) -> String {
    let s = now.secs_since(then).max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn json_timestamps_get_an_rfc3339_twin_and_other_numbers_do_not() {
        let v = serde_json::json!({
            "workload": { "submitted_at": 1_700_000_000_123_i64, "attempts": 3, "ended_at": null },
            "events": [{ "at": 1_700_000_000_000_i64, "seq": 1_700_000_000_000_i64 }],
            "ttl_at": 5,
        });
        let out: serde_json::Value = serde_json::from_str(&json_with_times(&v).unwrap()).unwrap();
        assert_eq!(out["workload"]["submitted_at"], 1_700_000_000_123_i64, "the milliseconds stay");
        assert_eq!(out["workload"]["submitted_at_rfc3339"], "2023-11-14T22:13:20.123Z");
        assert_eq!(out["events"][0]["at_rfc3339"], "2023-11-14T22:13:20Z");
        assert!(out["events"][0].get("seq_rfc3339").is_none(), "only timestamp keys");
        assert!(out.get("ttl_at_rfc3339").is_none(), "not a plausible time");
        assert!(out["workload"].get("ended_at_rfc3339").is_none(), "null stays null");
    }

    use super::*;

    #[test]
    fn sanitize_shows_what_would_act_on_the_terminal() {
        assert!(matches!(sanitize("local:alice"), Cow::Borrowed("local:alice")));
        assert_eq!(sanitize("a\x1b[2Jb"), "a\u{FFFD}[2Jb");
        assert_eq!(sanitize("x\u{9b}31m\u{7f}"), "x\u{FFFD}31m\u{FFFD}");
        assert_eq!(sanitize("evil\u{202E}txt.exe"), "evil\u{FFFD}txt.exe");
        assert_eq!(sanitize("a\u{200B}b\u{2066}c\u{FEFF}"), "a\u{FFFD}b\u{FFFD}c\u{FFFD}");
        assert_eq!(sanitize("one\ntwo\tthree\r"), "one two three ");
        assert_eq!(sanitize("ünïcödé ✓ 日本"), "ünïcödé ✓ 日本");
    }

    #[test]
    fn sanitize_lines_keeps_lines_and_tabs_only() {
        assert!(matches!(sanitize_lines("a\n\tb\n"), Cow::Borrowed(_)));
        assert_eq!(sanitize_lines("\x1b[2J\x1b]52;c;aGk=\x07x"), "\u{FFFD}[2J\u{FFFD}]52;c;aGk=\u{FFFD}x");
        assert_eq!(sanitize_lines("a\r\nb\rc\u{85}\u{202E}"), "a\nb\nc\u{FFFD}\u{FFFD}");
    }

    #[test]
    fn logs_are_raw_only_when_asked_or_not_on_a_terminal() {
        assert!(!logs_raw(false, true));
        assert!(logs_raw(true, true));
        assert!(logs_raw(false, false));
        assert!(logs_raw(true, false));
    }

    #[test]
    fn log_text_joins_what_chunks_split() {
        let mut l = LogText::default();
        let all = "é日\x1b[31m\r\nok\u{9b}".as_bytes();
        let mut shown = String::new();
        for b in all {
            shown.push_str(&l.push(std::slice::from_ref(b)));
        }
        shown.push_str(&l.finish());
        assert_eq!(shown, "é日\u{FFFD}[31m\nok\u{FFFD}");
        let mut l = LogText::default();
        assert_eq!(l.push(b"a\r"), "a\n");
        assert_eq!(l.push(b"\n"), "");
        assert_eq!(l.push(b"\n"), "\n");
        assert_eq!(l.push(b"a\xff\xe6\x97"), "a\u{FFFD}");
        assert_eq!(l.finish(), "\u{FFFD}");
    }

    #[test]
    fn json_pretty_escapes_what_serde_json_leaves_raw() {
        let v = serde_json::json!({ "r": "\x1b[2J\u{7f}\u{9b}\u{202E}é" });
        let s = json_pretty(&v).unwrap();
        assert!(!s.chars().any(|c| is_hidden(c) && c != '\n'), "{s:?}");
        assert_eq!(s, "{\n  \"r\": \"\\u001b[2J\\u007f\\u009b\\u202eé\"\n}");
        assert_eq!(serde_json::from_str::<serde_json::Value>(&s).unwrap(), v);
        assert_eq!(json_pretty(&[1, 2]).unwrap(), serde_json::to_string_pretty(&[1, 2]).unwrap());
    }
}
