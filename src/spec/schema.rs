//! The spec's JSON Schema: what editors (taplo, VS Code) check a spec
//! against before `canopy validate` sees it.
//!
//! This module owns the patterns the schema shares with the validator and
//! the transforms that turn rules the field attributes cannot say into
//! JSON Schema (`if`/`then`, item patterns). The limits themselves are the
//! validator's constants ([`super::validate`]); tests hold every pattern
//! here to the validator's own function. What JSON Schema cannot say
//! (cross-field comparisons, credential detection, uniqueness by one key)
//! stays in the validator only: README's "Workload spec" lists it.
//!
//! The schema is published as `schema/canopy-spec.schema.json`; a test
//! keeps that file equal to [`schema`].

use super::Spec;
use crate::accel::{Family, Interconnect};
use serde_json::{Map, Value, json};

/// A name (workload, input, output): letters, digits, `-`, `_`, `.`.
pub const NAME_PATTERN: &str = "^[A-Za-z0-9._-]+$";
/// A label key: a name that may also hold `/`.
pub const LABEL_KEY_PATTERN: &str = "^[A-Za-z0-9._/-]+$";
/// A POSIX portable environment variable name.
pub const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";
/// Not empty nor only whitespace.
pub const NOT_BLANK: &str = r"\S";
/// No control character (C0, DEL, C1): text shown on terminals.
pub const NO_CONTROL: &str = r"^[^\x00-\x1F\x7F-\x9F]*$";
/// No control character but tab and newline: an argument or an
/// environment value (a multi-line `python -c` program is legitimate).
pub const ARG_PATTERN: &str = r"^[^\x00-\x08\x0B-\x1F\x7F-\x9F]*$";
/// A container image reference: no whitespace, no control character.
pub const IMAGE_PATTERN: &str = r"^[^\s\x00-\x1F\x7F-\x9F]+$";
/// An absolute path without control characters.
pub const WORKDIR_PATTERN: &str = r"^/[^\x00-\x1F\x7F-\x9F]*$";
/// An absolute path without control characters and without a `..`
/// component (`...` and `..x` are names like any other).
pub const ABSOLUTE_PATH_PATTERN: &str = concat!(
    r"^/(?:[^/.\x00-\x1F\x7F-\x9F][^/\x00-\x1F\x7F-\x9F]*|\.[^/.\x00-\x1F\x7F-\x9F][^/\x00-\x1F\x7F-\x9F]*|\.\.[^/\x00-\x1F\x7F-\x9F]+|\.)?",
    r"(?:/(?:[^/.\x00-\x1F\x7F-\x9F][^/\x00-\x1F\x7F-\x9F]*|\.[^/.\x00-\x1F\x7F-\x9F][^/\x00-\x1F\x7F-\x9F]*|\.\.[^/\x00-\x1F\x7F-\x9F]+|\.)?)*$"
);

/// An input source: a URI of a known scheme (any case) that names a
/// location, `file://` with an absolute path, no control characters.
pub fn source_pattern() -> String {
    let any_case = |scheme: &str| -> String {
        scheme
            .chars()
            .map(|c| match (c.to_ascii_lowercase(), c.to_ascii_uppercase()) {
                (l, u) if l != u => format!("[{l}{u}]"),
                _ => c.to_string(),
            })
            .collect()
    };
    let others: Vec<String> =
        super::validate::INPUT_SCHEMES.iter().filter(|s| **s != "file").map(|s| any_case(s)).collect();
    let text = r"[^\x00-\x1F\x7F-\x9F]";
    let located = r"[^/\x00-\x1F\x7F-\x9F]";
    format!(
        "^(?:{file}:///{text}*{located}{text}*|(?:{others})://{text}*{located}{text}*)$",
        file = any_case("file"),
        others = others.join("|")
    )
}

/// The spec's JSON Schema, for editors, `canopy schema` and the OpenAPI
/// document.
pub fn schema() -> Value {
    let mut value = schemars::schema_for!(Spec).to_value();
    flatten_options(&mut value);
    if let Some(obj) = value.as_object_mut() {
        obj.insert("$id".into(), "urn:canopy:spec:v1".into());
        obj.insert("title".into(), "Canopy workload spec".into());
        obj.insert(
            "description".into(),
            "What a workload needs (runtime, resources, constraints, preferences, retry policy, inputs and outputs), never which SKU. Written in TOML or JSON.".into(),
        );
    }
    value
}

/// An optional field is one that may be left out: TOML has no null, so
/// `anyOf: [{$ref}, {type: null}]` (which makes editors report every
/// mistake once per branch) becomes the `$ref` alone, `type: [T, null]`
/// becomes `T`, and `default: null` goes (as do null fields of a default
/// table). Documented enums become plain `enum`s (see [`words_as_enum`]).
fn flatten_options(value: &mut Value) {
    match value {
        Value::Object(obj) => {
            if let Some(Value::Array(options)) = obj.get("anyOf")
                && options.len() == 2
                && let Some(keep) = options.iter().position(|o| *o != json!({ "type": "null" }))
                && options.iter().any(|o| *o == json!({ "type": "null" }))
            {
                let inner = options[keep].clone();
                obj.remove("anyOf");
                if let Value::Object(inner) = inner {
                    for (k, v) in inner {
                        obj.entry(k).or_insert(v);
                    }
                }
            }
            if let Some(Value::Array(types)) = obj.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let only = types.remove(0);
                    obj.insert("type".into(), only);
                }
            }
            match obj.get_mut("default") {
                Some(Value::Null) => {
                    obj.remove("default");
                }
                Some(default) => drop_nulls(default),
                None => {}
            }
            words_as_enum(obj);
            obj.values_mut().for_each(flatten_options);
        }
        Value::Array(items) => items.iter_mut().for_each(flatten_options),
        _ => {}
    }
}

/// `oneOf` a list of documented string constants (an enum whose variants
/// have doc comments) becomes an `enum`, with each word's meaning in the
/// description: a misspelt word then reads "not one of [..]" in an editor
/// rather than "not valid under any of the schemas".
fn words_as_enum(obj: &mut Map<String, Value>) {
    let Some(Value::Array(options)) = obj.get("oneOf") else {
        return;
    };
    let words: Option<Vec<(Value, Option<Value>)>> = options
        .iter()
        .map(|o| {
            let word = o.get("const").filter(|c| c.is_string())?;
            Some((word.clone(), o.get("description").cloned()))
        })
        .collect();
    let Some(words) = words else {
        return;
    };
    let meanings: Vec<String> = words
        .iter()
        .filter_map(|(w, d)| Some(format!("`{}`: {}", w.as_str()?, d.as_ref()?.as_str()?)))
        .collect();
    obj.remove("oneOf");
    obj.insert("type".into(), "string".into());
    obj.insert("enum".into(), words.into_iter().map(|(w, _)| w).collect());
    if !meanings.is_empty() {
        let head =
            obj.get("description").and_then(Value::as_str).map(|d| format!("{d}\n\n")).unwrap_or_default();
        obj.insert("description".into(), format!("{head}{}", meanings.join("\n")).into());
    }
}

/// A default table written as TOML would be: unset fields left out.
fn drop_nulls(value: &mut Value) {
    if let Value::Object(obj) = value {
        obj.retain(|_, v| !v.is_null());
        obj.values_mut().for_each(drop_nulls);
    }
}

fn object(schema: &mut schemars::Schema) -> &mut Map<String, Value> {
    schema.ensure_object()
}

/// Adds `rule` to the schema's `allOf`, so that several patterns (or
/// conditions) apply to one value.
fn all_of(schema: &mut schemars::Schema, rule: Value) {
    let obj = object(schema);
    match obj.get_mut("allOf") {
        Some(Value::Array(rules)) => rules.push(rule),
        _ => {
            obj.insert("allOf".into(), json!([rule]));
        }
    }
}

/// Every item of a list is a non-blank string (tags, globs). A `$ref`
/// item goes under `allOf`: draft-7 validators (taplo's) ignore the
/// siblings of a `$ref`.
pub(super) fn items_not_blank(schema: &mut schemars::Schema) {
    if let Some(Value::Object(items)) = object(schema).get_mut("items") {
        if let Some(target) = items.remove("$ref") {
            items.insert("allOf".into(), json!([{ "$ref": target }]));
        }
        items.insert("pattern".into(), NOT_BLANK.into());
    }
}

/// A string that is not blank and holds no control character.
pub(super) fn not_blank_text(schema: &mut schemars::Schema) {
    object(schema).insert("pattern".into(), NOT_BLANK.into());
    all_of(schema, json!({ "pattern": NO_CONTROL }));
}

/// `runtime.command`: the program (the first item) is not blank.
pub(super) fn program_not_blank(schema: &mut schemars::Schema) {
    all_of(schema, json!({ "prefixItems": [{ "pattern": NOT_BLANK }] }));
}

/// `runtime.env`: POSIX names, values without control characters but tab
/// and newline.
pub(super) fn env(schema: &mut schemars::Schema) {
    let obj = object(schema);
    obj.insert("propertyNames".into(), json!({ "pattern": ENV_NAME_PATTERN }));
    obj.insert("additionalProperties".into(), json!({ "type": "string", "pattern": ARG_PATTERN }));
}

/// `labels`: how many, the keys' spelling and length, the values' length
/// and characters.
pub(super) fn labels(schema: &mut schemars::Schema) {
    use super::validate::{MAX_LABEL_KEY_CHARS, MAX_LABEL_VALUE_CHARS, MAX_LABELS};
    let obj = object(schema);
    obj.insert("maxProperties".into(), MAX_LABELS.into());
    obj.insert(
        "propertyNames".into(),
        json!({ "pattern": LABEL_KEY_PATTERN, "maxLength": MAX_LABEL_KEY_CHARS }),
    );
    obj.insert(
        "additionalProperties".into(),
        json!({ "type": "string", "maxLength": MAX_LABEL_VALUE_CHARS, "pattern": NO_CONTROL }),
    );
}

/// `[resources]` with a GPU-only setting needs `gpus` of 1 or more.
pub(super) fn resources(schema: &mut schemars::Schema) {
    all_of(
        schema,
        json!({
            "if": { "anyOf": [
                { "required": ["gpu_memory_gb"] },
                { "required": ["accelerator"] },
                { "required": ["interconnect"] }
            ] },
            "then": {
                "required": ["gpus"],
                "properties": { "gpus": { "minimum": 1 } },
                "description": "gpu_memory_gb, accelerator and interconnect need gpus of 1 or more"
            }
        }),
    );
    // An interconnect one vendor alone has, with the accelerator's vendor
    // named. (A vendor inferred from the families is the validator's.)
    for link in [Interconnect::Pcie, Interconnect::Nvlink, Interconnect::Xgmi] {
        let Some(vendor) = super::validate::link_vendor(link) else { continue };
        all_of(
            schema,
            json!({
                "if": { "properties": { "interconnect": { "const": link.to_string() } }, "required": ["interconnect"] },
                "then": { "properties": { "accelerator": { "properties": { "vendor": { "const": vendor.to_string() } } } } }
            }),
        );
    }
}

/// `accelerator`: with a `vendor`, every `family` is one of that vendor's.
pub(super) fn accelerator(schema: &mut schemars::Schema) {
    let mut vendors = Family::ALL.map(Family::vendor).to_vec();
    vendors.sort();
    vendors.dedup();
    for vendor in vendors {
        let families: Vec<&str> =
            Family::ALL.iter().filter(|f| f.vendor() == vendor).map(|f| f.as_str()).collect();
        all_of(
            schema,
            json!({
                "if": { "properties": { "vendor": { "const": vendor.to_string() } }, "required": ["vendor"] },
                "then": { "properties": { "family": { "items": { "enum": families } } } }
            }),
        );
    }
}

/// `gpu_memory_gb`: GB per GPU, a number or `{ min, max }`, each within
/// what a GPU can have. `min <= max` is the validator's alone.
pub(super) fn gb_range() -> schemars::Schema {
    let bound = json!({ "type": "number", "minimum": 0, "maximum": super::validate::MAX_GPU_MEMORY_GB });
    schemars::json_schema!({
        "description": "GB per GPU: a number (a minimum) or { min, max }; either bound may be omitted.",
        "anyOf": [
            bound,
            {
                "type": "object",
                "properties": { "min": bound, "max": bound },
                "additionalProperties": false
            }
        ]
    })
}

#[cfg(test)]
#[path = "schema_tests.rs"]
mod tests;
