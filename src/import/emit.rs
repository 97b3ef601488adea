//! A [`Spec`] → the TOML a person would write for it: only the fields that
//! differ from the spec's defaults, tables in the order of the README's
//! reference (`name`, `[runtime]`, `[resources]`, `[constraints]`, …),
//! and a comment header.
//!
//! This module owns the text only. Which values are right is the
//! importers' business, and whether the text means the spec is checked by
//! the caller, which loads it back through [`crate::spec::load`].

use crate::spec::Spec;
use serde::Serialize;
use toml::{Table, Value};

/// Top-level keys in the order they are written; keys not listed (a field
/// added to the spec later) follow, scalars before tables.
const ORDER: &[&str] = &[
    "name",
    "kind",
    "priority",
    "expected_runtime",
    "labels",
    "runtime",
    "resources",
    "constraints",
    "preferences",
    "retry",
    "checkpoint",
    "inputs",
    "outputs",
];

/// Keys written even when they equal the default: the spec requires them.
const REQUIRED: &[&str] = &["name", "runtime", "runtime.command"];

/// The TOML text of `spec`, after `header` (each line becomes a `# ` comment).
pub fn to_toml(spec: &Spec, baseline: &Spec, header: &[String]) -> Result<String, String> {
    let full = table(spec)?;
    let base = table(baseline)?;
    let pruned = prune(full, &base, "");
    let mut out = String::new();
    for line in header {
        for l in line.lines() {
            out.push_str(if l.is_empty() { "#\n" } else { "# " });
            if !l.is_empty() {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    if !header.is_empty() {
        out.push('\n');
    }
    let mut keys: Vec<&String> = pruned.keys().collect();
    keys.sort_by_key(|k| (pruned[*k].is_table() || is_table_array(&pruned[*k]), rank(k)));
    let mut scalars_done = false;
    for key in keys {
        let value = &pruned[key];
        let mut one = Table::new();
        one.insert(key.clone(), value.clone());
        let text = toml::to_string_pretty(&one).map_err(|e| e.to_string())?;
        let is_table = value.is_table() || is_table_array(value);
        if is_table && !scalars_done {
            scalars_done = true;
            out.push('\n');
        }
        out.push_str(&text);
        if is_table && !text.ends_with("\n\n") {
            out.push('\n');
        }
    }
    Ok(out.trim_end().to_string() + "\n")
}

fn rank(key: &str) -> usize {
    ORDER.iter().position(|k| *k == key).unwrap_or(ORDER.len())
}

fn is_table_array(v: &Value) -> bool {
    matches!(v, Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_table))
}

fn table<T: Serialize>(v: &T) -> Result<Table, String> {
    match Value::try_from(v).map_err(|e| e.to_string())? {
        Value::Table(t) => Ok(t),
        _ => Err("the spec did not serialize to a table".into()),
    }
}

/// `full` without the entries equal to `base`'s (recursing into tables),
/// keeping [`REQUIRED`] ones and dropping tables left empty.
fn prune(full: Table, base: &Table, prefix: &str) -> Table {
    let mut out = Table::new();
    for (key, value) in full {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        let required = REQUIRED.contains(&path.as_str());
        let kept = match (value, base.get(&key)) {
            (Value::Table(t), Some(Value::Table(b))) => {
                let t = prune(t, b, &path);
                (!t.is_empty() || required).then_some(Value::Table(t))
            }
            (v, Some(b)) if &v == b && !required => None,
            (v, _) => Some(v),
        };
        if let Some(v) = kept {
            out.insert(key, v);
        }
    }
    out
}
