//! Which fields exist where, and the closest name to a typo.
//!
//! This module owns the map of the spec's tables to their field names,
//! read from the JSON Schema (so it cannot drift from the types), and the
//! did-you-mean matcher. It does not word messages; [`super::translate`]
//! does.

use super::locate;
use serde_json::Value;
use std::sync::OnceLock;

/// Table path with array indices folded: `inputs[3]` → `inputs[]`.
pub(crate) fn normalise(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[]");
            }
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// The closest candidate to `input`: same word ignoring case and `-`/`_`,
/// or within a small edit distance, or sharing a long prefix.
pub(crate) fn suggest<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| s.to_lowercase().replace('-', "_");
    let needle = norm(input);
    if let Some(c) = candidates.iter().find(|c| norm(c) == needle) {
        return Some(c);
    }
    let limit = (needle.chars().count() / 3).max(1);
    candidates
        .iter()
        .map(|c| (c, strsim::damerau_levenshtein(&needle, &norm(c)), strsim::jaro_winkler(&needle, &norm(c))))
        .filter(|(_, d, jw)| *d <= limit || *jw >= 0.9)
        .min_by(|a, b| a.1.cmp(&b.1).then(b.2.total_cmp(&a.2)))
        .map(|(c, _, _)| *c)
}

/// Every table of the spec (`""`, `resources`, `inputs[]`, …) with its
/// field names, read from the JSON Schema so it cannot drift from the types.
pub(crate) fn field_homes() -> &'static [(String, Vec<String>)] {
    static HOMES: OnceLock<Vec<(String, Vec<String>)>> = OnceLock::new();
    HOMES.get_or_init(|| {
        let schema = schema();
        let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
        let mut out = Vec::new();
        collect_tables(schema, &defs, "", &mut out, 0);
        out
    })
}

fn collect_tables(
    schema: &Value,
    defs: &Value,
    path: &str,
    out: &mut Vec<(String, Vec<String>)>,
    depth: usize,
) {
    if depth > 8 {
        return;
    }
    let Some(s) = resolve(schema, defs, 0) else {
        return;
    };
    if let Some(items) = s.get("items") {
        collect_tables(items, defs, &format!("{path}[]"), out, depth + 1);
        return;
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        out.push((path.to_string(), props.keys().cloned().collect()));
        for (k, v) in props {
            collect_tables(v, defs, &locate::child(path, k), out, depth + 1);
        }
    }
}

/// Follow `$ref`s and pick the object-or-array branch of an `anyOf`. A
/// schema with its own properties or items is the one: its `allOf` only
/// adds conditions (`if`/`then`).
fn resolve<'a>(schema: &'a Value, defs: &'a Value, depth: usize) -> Option<&'a Value> {
    if depth > 8 {
        return None;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next()?;
        return resolve(defs.get(name)?, defs, depth + 1);
    }
    if schema.get("properties").is_some() || schema.get("items").is_some() {
        return Some(schema);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return options
                .iter()
                .filter_map(|o| resolve(o, defs, depth + 1))
                .find(|o| o.get("properties").is_some() || o.get("items").is_some());
        }
    }
    Some(schema)
}

/// The spec's JSON Schema, built once.
fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(super::load::schema)
}

/// A stand-in of the right type for a required field, so that the type
/// check can go on past a spec that lacks it (see [`super::repair`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Placeholder {
    Text,
    List,
    /// A table, with placeholders for its own required fields.
    Table(Vec<(String, Placeholder)>),
}

/// The placeholder for field `name` of the table at `table` (a path; array
/// indices are ignored), or `None` when the schema does not say.
pub(crate) fn placeholder(table: &str, name: &str) -> Option<Placeholder> {
    let root = schema();
    let defs = root.get("$defs").unwrap_or(&Value::Null);
    let mut s = resolve(root, defs, 0)?;
    let path = normalise(&locate::child(table, name));
    for seg in path.split('.') {
        let (field, items) = seg.strip_suffix("[]").map_or((seg, false), |f| (f, true));
        s = resolve(s.get("properties")?.get(field)?, defs, 0)?;
        if items {
            s = resolve(s.get("items")?, defs, 0)?;
        }
    }
    placeholder_for(s, defs, 0)
}

fn placeholder_for(s: &Value, defs: &Value, depth: usize) -> Option<Placeholder> {
    if depth > 8 {
        return None;
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        let required = s.get("required").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let mut fields = Vec::new();
        for name in required.iter().filter_map(Value::as_str) {
            let field = resolve(props.get(name)?, defs, 0)?;
            fields.push((name.to_string(), placeholder_for(field, defs, depth + 1)?));
        }
        return Some(Placeholder::Table(fields));
    }
    match s.get("type").and_then(Value::as_str)? {
        "string" => Some(Placeholder::Text),
        "array" => Some(Placeholder::List),
        _ => None,
    }
}

/// Is `path` (indices folded) a table of the spec?
pub(crate) fn is_table_path(path: &str) -> bool {
    let norm = normalise(path);
    field_homes().iter().any(|(t, _)| *t == norm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_are_close_and_only_close() {
        let fields = ["gpus", "gpu_memory_gb", "accelerator", "cpu_cores"];
        assert_eq!(suggest("gpu", &fields), Some("gpus"));
        assert_eq!(suggest("GPUS", &fields), Some("gpus"));
        assert_eq!(suggest("acelerator", &fields), Some("accelerator"));
        assert_eq!(suggest("banana", &fields), None);
        assert_eq!(suggest("fine_tuning", &["training", "fine-tuning"]), Some("fine-tuning"));
    }

    #[test]
    fn required_fields_have_placeholders_of_their_type() {
        assert_eq!(placeholder("", "name"), Some(Placeholder::Text));
        assert_eq!(placeholder("runtime", "command"), Some(Placeholder::List));
        assert_eq!(
            placeholder("", "runtime"),
            Some(Placeholder::Table(vec![("command".into(), Placeholder::List)]))
        );
        assert_eq!(placeholder("inputs[2]", "source"), Some(Placeholder::Text));
        assert_eq!(placeholder("outputs[0]", "path"), Some(Placeholder::Text));
        assert_eq!(placeholder("resources", "nope"), None);
    }

    #[test]
    fn schema_lists_every_table() {
        let tables: Vec<&str> = field_homes().iter().map(|(t, _)| t.as_str()).collect();
        for t in ["", "runtime", "resources", "resources.accelerator", "retry", "inputs[]", "outputs[]"] {
            assert!(tables.contains(&t), "{t} missing from {tables:?}");
        }
    }
}
