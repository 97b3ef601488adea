//! Keeping the type check going past its first error, so that a spec's
//! problems are reported together rather than one per try.
//!
//! serde stops at the first problem it meets. [`super::load`] asks this
//! module what to do about it ([`Repairs::fix`]): take the entry the error
//! is about out of the document, or put a placeholder of the right type
//! where a required field is missing, then type-check again. What was
//! taken out or made up is *tainted*: what only follows from it (a
//! required field that was taken out is now missing; a semantic rule sees
//! a default where a bad value was) is a consequence, not a problem of its
//! own, and [`Repairs::missing_follows`] and [`Repairs::follows`] say so.
//! Other type errors never follow from a repair (what is left in, put in
//! or defaulted has the right type) and are all reported.
//!
//! The edits keep source positions: TOML is edited as its spanned parse
//! tree ([`remove_toml`], [`insert_toml`]), JSON as a copy of its text in
//! which removed entries are blanked with spaces and inserted text maps
//! back to where it went in ([`JsonText`]). This module words nothing.

use super::fields::{self, Placeholder};
use super::locate::{self, Entry, Target};
use std::borrow::Cow;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

/// At most this many type errors are collected from one spec; past it the
/// check stops (and says so).
pub(crate) const MAX_ROUNDS: usize = 64;

/// One edit that lets the type check go on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Fix {
    /// Take out the entry with this key (a table's field) or, without a
    /// key, the array element with this value span.
    Remove { key: Option<Range<usize>>, value: Range<usize> },
    /// Put a placeholder for `name` into the table at path `table`.
    Insert { table: String, name: String, placeholder: Placeholder },
    /// Nothing sensible can be done: stop checking types.
    Stop,
}

/// What the repairs so far have tainted.
#[derive(Debug, Default)]
pub(crate) struct Repairs {
    /// Paths taken out or made up.
    tainted: Vec<String>,
    /// Arrays that lost an element: the semantic checks see the ones
    /// after it at an index one lower than in the source.
    shifted: Vec<String>,
    /// Fields an unknown key was probably meant to be (`runtme` for
    /// `runtime`): that they are missing is already said.
    meant: Vec<String>,
}

impl Repairs {
    /// Whether a semantic finding at `path` with `message` only follows
    /// from a repair: it is at, under or (short of the document) above a
    /// tainted path, inside an array that lost an element, or its message
    /// names a tainted field.
    pub fn follows(&self, path: &str, message: &str) -> bool {
        self.tainted
            .iter()
            .chain(&self.shifted)
            .any(|t| covers(t, path) || (!path.is_empty() && covers(path, t)) || mentions(message, t))
    }

    /// Whether `path` is missing only because an unknown key that was
    /// probably meant to be it was taken out, or because it was tainted.
    pub fn missing_follows(&self, path: &str) -> bool {
        self.meant.iter().any(|m| m == path) || self.tainted.iter().any(|t| covers(t, path))
    }

    /// What to do about a type error: `raw` is serde's message, `found`
    /// the entry it is about, `path` and `help` the translated
    /// diagnostic's. Records what the fix taints.
    pub fn fix(&mut self, raw: &str, found: Option<(&Entry, Target)>, path: &str, help: Option<&str>) -> Fix {
        if let Some(rest) = raw.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            let table = locate::parent(path).unwrap_or("");
            return match fields::placeholder(table, name) {
                Some(placeholder) => {
                    self.tainted.push(path.to_string());
                    Fix::Insert { table: table.to_string(), name: name.to_string(), placeholder }
                }
                None => Fix::Stop,
            };
        }
        let Some((entry, _)) = found else {
            return Fix::Stop;
        };
        if entry.path.is_empty() {
            return Fix::Stop;
        }
        self.tainted.push(entry.path.clone());
        if entry.key.is_none() {
            self.shifted.push(entry.parent.clone());
        }
        if raw.starts_with("unknown field `")
            && let Some(meant) =
                help.and_then(|h| h.strip_prefix("did you mean `")).and_then(|r| r.split('`').next())
        {
            self.meant.push(locate::child(&entry.parent, meant));
        }
        Fix::Remove { key: entry.key.clone(), value: entry.value.clone() }
    }
}

/// `path` is `t` or inside it.
fn covers(t: &str, path: &str) -> bool {
    path.strip_prefix(t).is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
}

/// `message` names the tainted `path`: the whole path (indices dropped),
/// or its last field in backticks or as `field =`.
fn mentions(message: &str, path: &str) -> bool {
    let bare: String = fields::normalise(path).replace("[]", "");
    let last = bare.rsplit('.').next().unwrap_or(&bare);
    word(message, &bare) || message.contains(&format!("`{last}`")) || message.contains(&format!("{last} ="))
}

/// `needle` occurs in `hay` as a whole word (not inside a longer name).
fn word(hay: &str, needle: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        !before.is_some_and(is_name) && !after.is_some_and(is_name)
    })
}

/// Take out of a TOML tree the field whose key has span `key`, or without
/// one the array element whose value has span `value`. False when there
/// is none.
pub(crate) fn remove_toml(table: &mut DeTable<'_>, key: Option<&Range<usize>>, value: &Range<usize>) -> bool {
    if let Some(k) = key {
        let name = table.iter().find(|(name, _)| name.span() == *k).map(|(name, _)| name.clone());
        if let Some(name) = name {
            // Keys compare by their text: this is the one with that span.
            table.remove(&name);
            return true;
        }
    }
    table.iter_mut().any(|(_, v)| remove_in_value(v.get_mut(), key, value))
}

fn remove_in_value(v: &mut DeValue<'_>, key: Option<&Range<usize>>, value: &Range<usize>) -> bool {
    match v {
        DeValue::Table(t) => remove_toml(t, key, value),
        DeValue::Array(items) => {
            if key.is_none() && items.iter().any(|i| i.span() == *value) {
                let kept: DeArray<'_> = items.iter().filter(|i| i.span() != *value).cloned().collect();
                *items = kept;
                return true;
            }
            items.iter_mut().any(|i| remove_in_value(i.get_mut(), key, value))
        }
        _ => false,
    }
}

/// Put `placeholder` in as field `name` of the table at path `table` of a
/// TOML tree. False when there is no such table.
pub(crate) fn insert_toml(
    root: &mut DeTable<'_>,
    table: &str,
    name: &str,
    placeholder: &Placeholder,
) -> bool {
    insert_in_table(root, "", table, name, placeholder)
}

fn insert_in_table(t: &mut DeTable<'_>, at: &str, target: &str, name: &str, ph: &Placeholder) -> bool {
    if at == target {
        t.insert(Spanned::new(0..0, Cow::Owned(name.to_string())), Spanned::new(0..0, toml_value(ph)));
        return true;
    }
    for (k, v) in t.iter_mut() {
        let path = locate::child(at, k.get_ref());
        if covers(&path, target) {
            return insert_in_value(v.get_mut(), &path, target, name, ph);
        }
    }
    false
}

fn insert_in_value(v: &mut DeValue<'_>, at: &str, target: &str, name: &str, ph: &Placeholder) -> bool {
    match v {
        DeValue::Table(t) => insert_in_table(t, at, target, name, ph),
        DeValue::Array(items) => {
            for (i, it) in items.iter_mut().enumerate() {
                let path = locate::item(at, i);
                if covers(&path, target) {
                    return insert_in_value(it.get_mut(), &path, target, name, ph);
                }
            }
            false
        }
        _ => false,
    }
}

fn toml_value(ph: &Placeholder) -> DeValue<'static> {
    match ph {
        Placeholder::Text => DeValue::String(Cow::Borrowed("")),
        Placeholder::List => DeValue::Array(DeArray::new()),
        Placeholder::Table(fields) => {
            let mut t = DeTable::new();
            for (name, ph) in fields {
                t.insert(Spanned::new(0..0, Cow::Owned(name.clone())), Spanned::new(0..0, toml_value(ph)));
            }
            DeValue::Table(t)
        }
    }
}

fn json_value(ph: &Placeholder) -> String {
    match ph {
        Placeholder::Text => "\"\"".into(),
        Placeholder::List => "[]".into(),
        Placeholder::Table(fields) => {
            let inner: Vec<String> =
                fields.iter().map(|(n, ph)| format!("{n:?}: {}", json_value(ph))).collect();
            format!("{{{}}}", inner.join(", "))
        }
    }
}

/// A JSON spec's text as the repairs left it, and where each of its bytes
/// was in the source, so errors in it point at the source.
pub(crate) struct JsonText {
    bytes: Vec<u8>,
    /// Source offset of each byte (and of the end); inserted bytes map to
    /// the `}` they went in before.
    source: Vec<usize>,
}

impl JsonText {
    pub fn new(text: &str) -> Self {
        Self { bytes: text.as_bytes().to_vec(), source: (0..=text.len()).collect() }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The source offset of byte `at` of the repaired text.
    pub fn to_source(&self, at: usize) -> usize {
        self.source[at.min(self.bytes.len())]
    }

    /// The repaired text's offset of source offset `at` (before any text
    /// inserted there).
    fn here(&self, at: usize) -> usize {
        self.source.partition_point(|&s| s < at)
    }

    /// Blank out the entry `key: value` (or the array element `value`) and
    /// the comma that went with it. False when nothing was there.
    pub fn remove(&mut self, key: Option<&Range<usize>>, value: &Range<usize>) -> bool {
        let start = self.here(key.map_or(value.start, |k| k.start));
        let end = self.here(value.end);
        if start >= end || end > self.bytes.len() {
            return false;
        }
        self.blank(start..end);
        let ws = |b: &u8| b.is_ascii_whitespace();
        let after = end + self.bytes[end..].iter().take_while(|b| ws(b)).count();
        if self.bytes.get(after) == Some(&b',') {
            self.blank(after..after + 1);
        } else if let Some(before) = self.bytes[..start].iter().rposition(|b| !ws(b))
            && self.bytes[before] == b','
        {
            self.blank(before..before + 1);
        }
        true
    }

    fn blank(&mut self, r: Range<usize>) {
        for b in &mut self.bytes[r] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    }

    /// Put `"name": placeholder` in as the last member of the object whose
    /// source span is `object`. False when that is not an object.
    pub fn insert(&mut self, object: &Range<usize>, name: &str, ph: &Placeholder) -> bool {
        let close = object.end.saturating_sub(1);
        // The `}` itself: after anything inserted before it already.
        let at = self.source.partition_point(|&s| s <= close).saturating_sub(1);
        if self.bytes.get(at) != Some(&b'}') || self.source[at] != close {
            return false;
        }
        let last = self.bytes[..at].iter().rposition(|b| !b.is_ascii_whitespace());
        let comma = if last.is_some_and(|i| self.bytes[i] == b'{') { "" } else { ", " };
        let text = format!("{comma}{name:?}: {}", json_value(ph));
        self.bytes.splice(at..at, text.bytes());
        self.source.splice(at..at, std::iter::repeat_n(close, text.len()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_covers_paths_below_and_messages_that_name_it() {
        let r = Repairs {
            tainted: vec![
                "resources.gpus".into(),
                "retry.max_attempts".into(),
                "resources.gpu_memory_gb.mn".into(),
            ],
            ..Repairs::default()
        };
        assert!(r.follows("resources.gpus", "x"));
        assert!(!r.follows("resources.gpus_x", "x"));
        assert!(r.follows(
            "resources.gpu_memory_gb",
            "`resources.gpu_memory_gb` is set but `resources.gpus` is 0"
        ));
        assert!(r.follows("retry.app_errors", "only 2 retries are possible with max_attempts = 3"));
        assert!(!r.follows("retry.backoff", "`retry.backoff` (1m) is longer than `retry.backoff_max` (10s)"));
        assert!(r.follows("resources.gpu_memory_gb", "`resources.gpu_memory_gb` sets no bound"));
        assert!(!r.follows("", "about the whole document"));
    }

    #[test]
    fn json_edits_keep_source_offsets() {
        let src = r#"{"a": 1, "b": {"c": 2}, "d": [3, 4]}"#;
        let mut j = JsonText::new(src);
        let span = |s: &str| {
            let i = src.find(s).unwrap();
            i..i + s.len()
        };
        assert!(j.remove(Some(&span("\"a\"")), &span("1")));
        assert!(j.remove(None, &span("4")));
        let b = src.find('{').unwrap()..src.len();
        let inner = span("{\"c\": 2}");
        assert!(j.insert(&inner, "e", &Placeholder::List));
        assert!(j.insert(&b, "f", &Placeholder::Table(vec![("g".into(), Placeholder::Text)])));
        let text = String::from_utf8(j.bytes().to_vec()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v, serde_json::json!({"b": {"c": 2, "e": []}, "d": [3], "f": {"g": ""}}));
        let at = text.find("\"d\"").unwrap();
        assert_eq!(j.to_source(at), src.find("\"d\"").unwrap());
        let e = text.find("\"e\"").unwrap();
        assert_eq!(j.to_source(e), inner.end - 1, "inserted text maps to its closing brace");
    }

    #[test]
    fn toml_edits_find_their_entry() {
        let src = "a = 1\n[t]\nb = [1, 2]\n[[arr]]\nx = 1\n[[arr]]\nx = 2\n";
        let mut root = DeTable::parse(src).unwrap().into_inner();
        let two = src.find("2]").unwrap();
        assert!(remove_toml(&mut root, None, &(two..two + 1)));
        let a = src.find('a').unwrap();
        assert!(remove_toml(&mut root, Some(&(a..a + 1)), &(4..5)));
        assert!(insert_toml(&mut root, "arr[1]", "y", &Placeholder::Text));
        assert!(!insert_toml(&mut root, "nope", "y", &Placeholder::Text));
        let v: toml::Value =
            serde::Deserialize::deserialize(toml::de::Deserializer::from(Spanned::new(0..0, root))).unwrap();
        let want: toml::Value =
            toml::from_str("[t]\nb = [1]\n[[arr]]\nx = 1\n[[arr]]\nx = 2\ny = \"\"\n").unwrap();
        assert_eq!(v, want);
    }
}
