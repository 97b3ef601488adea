//! Where each key and value of a spec document sits in its source text.
//!
//! This module owns the mapping between dotted key paths
//! (`resources.gpu_memory_gb.min`, `inputs[0].source`, `runtime.env."A B"`)
//! and byte spans, for TOML (from the spanned `toml` parse) and JSON (from
//! a small best-effort scanner of its own). It does not judge the document;
//! it only answers "where is this path?" and "which path is at this span?".

use std::ops::Range;
use toml::de::{DeTable, DeValue};

/// The path of `key` inside `parent`. Keys that are not plain words are
/// quoted, so a path stays unambiguous.
pub(crate) fn child(parent: &str, key: &str) -> String {
    let plain = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let seg = if plain { key.to_string() } else { format!("{key:?}") };
    if parent.is_empty() { seg } else { format!("{parent}.{seg}") }
}

/// The path of element `i` of the array at `parent`.
pub(crate) fn item(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// The path one level up, or `None` for the document itself.
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let bytes = path.as_bytes();
    let cut = match bytes[bytes.len() - 1] {
        b']' => path.rfind('[').unwrap_or(0),
        b'"' => {
            // A quoted segment: find its opening quote, skipping escaped ones.
            let mut i = bytes.len() - 1;
            loop {
                if i == 0 {
                    break 0;
                }
                i -= 1;
                if bytes[i] == b'"' && (i == 0 || bytes[i - 1] != b'\\') {
                    break i.saturating_sub(1);
                }
            }
        }
        _ => path.rfind('.').unwrap_or(0),
    };
    // `cut` is the index of the separating `.`, or of the `[` of an index.
    Some(&path[..cut])
}

/// Whether to point at a key or at its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Value,
    Key,
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub path: String,
    pub parent: String,
    pub key: Option<Range<usize>>,
    pub value: Range<usize>,
    /// The value is an array (`[...]` or `[[...]]`).
    pub is_array: bool,
    /// The value is a table (TOML) or object (JSON).
    pub is_table: bool,
}

/// Every key and value of one document, with spans.
#[derive(Debug, Default)]
pub(crate) struct Index {
    entries: Vec<Entry>,
}

impl Index {
    pub fn from_toml(root: &toml::Spanned<DeTable<'_>>) -> Self {
        let mut index = Index::default();
        index.push("", "", None, 0..0, (false, true));
        index.walk_toml_table("", root.get_ref());
        index
    }

    fn push(
        &mut self,
        path: &str,
        parent: &str,
        key: Option<Range<usize>>,
        value: Range<usize>,
        kind: (bool, bool),
    ) {
        let (is_array, is_table) = kind;
        self.entries.push(Entry {
            path: path.to_string(),
            parent: parent.to_string(),
            key,
            value,
            is_array,
            is_table,
        });
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    fn walk_toml_table(&mut self, parent: &str, table: &DeTable<'_>) {
        for (key, value) in table.iter() {
            let path = child(parent, key.get_ref());
            self.push(&path, parent, Some(key.span()), value.span(), kind(value.get_ref()));
            self.walk_toml_value(&path, value.get_ref());
        }
    }

    fn walk_toml_value(&mut self, path: &str, value: &DeValue<'_>) {
        match value {
            DeValue::Table(t) => self.walk_toml_table(path, t),
            DeValue::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    let p = item(path, i);
                    self.push(&p, path, None, v.span(), kind(v.get_ref()));
                    self.walk_toml_value(&p, v.get_ref());
                }
            }
            _ => {}
        }
    }

    /// Index a JSON document. Stops quietly at the first syntax error,
    /// keeping what it found before it (serde_json reports the error).
    pub fn from_json(text: &str) -> Self {
        let mut scanner = JsonScanner { text, bytes: text.as_bytes(), pos: 0, index: Index::default() };
        scanner.value("", "", None, 0);
        scanner.index
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path == path)
    }

    /// The byte offset to point at for `path`, walking up to the nearest
    /// ancestor present in the source (a default has no text of its own).
    /// Returns the offset and the path actually found.
    pub fn offset(&self, path: &str, target: Target) -> (usize, &str) {
        let mut p = path;
        loop {
            if let Some(e) = self.get(p) {
                let at = if p == path {
                    match (&e.key, target) {
                        (Some(k), Target::Key) => k.start,
                        _ => e.value.start,
                    }
                } else if !e.is_table && !e.is_array {
                    // A scalar standing in for a table (`gpu_memory_gb = 24`
                    // for `.min`): the value is what the finding is about.
                    e.value.start
                } else {
                    // An ancestor stands in for a path that has no text of
                    // its own (a default): point at whichever comes first,
                    // its key or its `[header]`.
                    e.key.as_ref().map_or(e.value.start, |k| k.start.min(e.value.start))
                };
                return (at, e.path.as_str());
            }
            match parent(p) {
                Some(up) => p = up,
                None => return (0, ""),
            }
        }
    }

    /// The entry whose key or value has exactly this span (TOML errors),
    /// else the innermost value containing its start.
    pub fn at_span(&self, span: &Range<usize>) -> Option<(&Entry, Target)> {
        if span.is_empty() && span.start == 0 {
            // toml reports errors about the document itself at 0..0.
            return self.get("").map(|e| (e, Target::Value));
        }
        if let Some(e) = self.entries.iter().rev().find(|e| e.key.as_ref() == Some(span)) {
            return Some((e, Target::Key));
        }
        if let Some(e) = self.entries.iter().rev().find(|e| &e.value == span && !e.value.is_empty()) {
            return Some((e, Target::Value));
        }
        self.innermost(span.start)
    }

    /// The entry a serde_json error at `offset` (the last byte read) is
    /// about: a key or value ending there, a value starting there, or the
    /// innermost value around it.
    pub fn at_json_offset(&self, offset: usize) -> Option<(&Entry, Target)> {
        let end = offset + 1;
        if let Some(e) = self.entries.iter().rev().find(|e| e.key.as_ref().is_some_and(|k| k.end == end)) {
            return Some((e, Target::Key));
        }
        if let Some(e) = self.entries.iter().find(|e| e.value.end == end) {
            return Some((e, Target::Value));
        }
        if let Some(e) = self.entries.iter().rev().find(|e| e.value.start == offset) {
            return Some((e, Target::Value));
        }
        self.innermost(offset)
    }

    fn innermost(&self, offset: usize) -> Option<(&Entry, Target)> {
        self.entries
            .iter()
            .filter(|e| e.value.contains(&offset))
            .min_by_key(|e| e.value.len())
            .map(|e| (e, Target::Value))
    }
}

/// (is_array, is_table) of a TOML value.
fn kind(value: &DeValue<'_>) -> (bool, bool) {
    (matches!(value, DeValue::Array(_)), matches!(value, DeValue::Table(_)))
}

/// Just enough of JSON to record the span of every key and value.
struct JsonScanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    index: Index,
}

const MAX_JSON_DEPTH: usize = 128;

impl JsonScanner<'_> {
    fn ws(&mut self) {
        while matches!(self.bytes.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.bytes.get(self.pos) == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Scan a value at the cursor; `None` on malformed input.
    fn value(&mut self, path: &str, parent: &str, key: Option<Range<usize>>, depth: usize) -> Option<()> {
        self.ws();
        let start = self.pos;
        // Record the entry before its children so lookups see parents first.
        let slot = self.index.entries.len();
        let first = self.bytes.get(start);
        self.index.push(path, parent, key, start..start, (first == Some(&b'['), first == Some(&b'{')));
        match *self.bytes.get(self.pos)? {
            b'{' if depth < MAX_JSON_DEPTH => {
                self.pos += 1;
                if !self.eat(b'}') {
                    loop {
                        self.ws();
                        let k = self.string()?;
                        let name: String = serde_json::from_str(&self.text[k.clone()]).ok()?;
                        if !self.eat(b':') {
                            return None;
                        }
                        self.value(&child(path, &name), path, Some(k), depth + 1)?;
                        if self.eat(b'}') {
                            break;
                        }
                        if !self.eat(b',') {
                            return None;
                        }
                    }
                }
            }
            b'[' if depth < MAX_JSON_DEPTH => {
                self.pos += 1;
                if !self.eat(b']') {
                    let mut i = 0;
                    loop {
                        self.value(&item(path, i), path, None, depth + 1)?;
                        i += 1;
                        if self.eat(b']') {
                            break;
                        }
                        if !self.eat(b',') {
                            return None;
                        }
                    }
                }
            }
            b'"' => {
                self.string()?;
            }
            _ => {
                let len = self.bytes[self.pos..]
                    .iter()
                    .take_while(|b| !matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r'))
                    .count();
                if len == 0 {
                    return None;
                }
                self.pos += len;
            }
        }
        self.index.entries[slot].value = start..self.pos;
        Some(())
    }

    /// Scan a string at the cursor, returning its span with the quotes.
    fn string(&mut self) -> Option<Range<usize>> {
        let start = self.pos;
        if self.bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        self.pos += 1;
        loop {
            match *self.bytes.get(self.pos)? {
                b'\\' => self.pos += 2,
                b'"' => {
                    self.pos += 1;
                    return Some(start..self.pos);
                }
                _ => self.pos += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_odd_keys_and_walk_up() {
        assert_eq!(child("runtime.env", "HF_TOKEN"), "runtime.env.HF_TOKEN");
        assert_eq!(child("runtime.env", "A B"), "runtime.env.\"A B\"");
        assert_eq!(parent("runtime.env.\"A.B\""), Some("runtime.env"));
        assert_eq!(parent("inputs[3].name"), Some("inputs[3]"));
        assert_eq!(parent("inputs[3]"), Some("inputs"));
        assert_eq!(parent("name"), Some(""));
        assert_eq!(parent(""), None);
    }

    #[test]
    fn json_index_finds_keys_and_values() {
        let src = "{\n  \"resources\": { \"gpus\": 2 },\n  \"inputs\": [ { \"name\": \"a\" } ]\n}";
        let index = Index::from_json(src);
        let gpus = index.get("resources.gpus").unwrap();
        assert_eq!(&src[gpus.value.clone()], "2");
        assert_eq!(&src[gpus.key.clone().unwrap()], "\"gpus\"");
        let name = index.get("inputs[0].name").unwrap();
        assert_eq!(&src[name.value.clone()], "\"a\"");
        let (at, found) = index.offset("resources.disk_gb", Target::Value);
        assert_eq!((at, found), (src.find("\"resources\"").unwrap(), "resources"));
    }
}
