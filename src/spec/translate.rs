//! Turning serde's and the parsers' error messages into ours.
//!
//! serde says "unknown field `gpu`, expected one of `gpus`, …" or "invalid
//! type: string \"8\", expected f64". This module rewrites such text into a
//! sentence that names the key path, plus a help line: a did-you-mean, the
//! table a misplaced key belongs to, or an example of the right form. It
//! never copies a value the user wrote into a message (values may be
//! secrets), except numbers and enum-like words. It does not locate errors;
//! [`super::locate`] does.

use super::Format;
use super::fields::{field_homes, normalise, suggest};
use super::locate;

/// Where an error happened, as far as the locator could tell.
pub(crate) struct Context<'a> {
    pub format: Format,
    /// Path of the entry the error points at ("" when unknown).
    pub path: &'a str,
    /// Its table's path.
    pub parent: &'a str,
    /// The source text of the value the error points at, if any.
    pub snippet: &'a str,
}

/// The rewritten error: the path it concerns, the message and the help.
pub(crate) struct Translated {
    pub path: String,
    pub message: String,
    pub help: Option<String>,
}

const DURATION_FIELDS: &[&str] =
    &["expected_runtime", "max_runtime", "startup_within", "backoff", "backoff_max"];

/// Rewrite a serde data error (type, unknown field, missing field, …).
pub(crate) fn data_error(raw: &str, cx: &Context<'_>) -> Translated {
    if let Some(rest) = raw.strip_prefix("unknown field `") {
        let (name, expected) = split_quoted(rest);
        // The locator points at the unknown key itself, so its parent is the table.
        let table = if cx.path == locate::child(cx.parent, name) { cx.parent } else { cx.path };
        let path = locate::child(table, name);
        return Translated {
            message: format!("unknown field `{name}` {}", in_table(table, cx.format)),
            help: Some(unknown_field_help(name, table, &expected, cx.format)),
            path,
        };
    }
    if let Some(rest) = raw.strip_prefix("unknown variant `") {
        let (value, expected) = split_quoted(rest);
        let help = match suggest(value, &expected) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("use one of {}", list(&expected)),
        };
        return Translated {
            message: format!("unknown value `{value}` for {}", subject(&without_index(cx.path))),
            help: Some(help),
            path: cx.path.to_string(),
        };
    }
    if let Some(rest) = raw.strip_prefix("missing field `") {
        let (name, _) = split_quoted(rest);
        let where_ =
            if cx.path.is_empty() { String::new() } else { format!(" {}", in_table(cx.path, cx.format)) };
        return Translated {
            message: format!("missing required field `{name}`{where_}"),
            help: Some(missing_field_help(name, cx.path, cx.format)),
            path: locate::child(cx.path, name),
        };
    }
    if let Some(rest) = raw.strip_prefix("duplicate field `") {
        let (name, _) = split_quoted(rest);
        return Translated {
            message: format!("`{name}` is set twice {}", in_table(cx.parent, cx.format)),
            help: Some("remove one of the two".into()),
            path: cx.path.to_string(),
        };
    }
    if let Some(rest) = raw.strip_prefix("invalid type: ") {
        return invalid_type(rest, cx);
    }
    if let Some(rest) = raw.strip_prefix("invalid value: ") {
        return invalid_value(rest, cx);
    }
    custom(raw, cx)
}

/// `name`, then the backtick-quoted names after it ("expected one of `a`, `b`").
fn split_quoted(rest: &str) -> (&str, Vec<&str>) {
    let cut = ["`, expected", "`, there are no"]
        .iter()
        .filter_map(|m| rest.rfind(m))
        .max()
        .or_else(|| rest.rfind('`'))
        .unwrap_or(rest.len());
    let name = &rest[..cut];
    let tail = &rest[cut.saturating_add(1).min(rest.len())..];
    let expected = tail.split('`').skip(1).step_by(2).collect();
    (name, expected)
}

fn without_index(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// "in [resources]", "at the top level", "in `resources`" (JSON).
pub(crate) fn in_table(table: &str, format: Format) -> String {
    if table.is_empty() {
        return "at the top level".into();
    }
    format!("in {}", table_name(table, format))
}

fn table_name(table: &str, format: Format) -> String {
    match format {
        Format::Json => format!("`{table}`"),
        Format::Toml => {
            let bare = without_index(table);
            if table.ends_with(']') { format!("[[{bare}]]") } else { format!("[{bare}]") }
        }
    }
}

fn list(items: &[&str]) -> String {
    items.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
}

fn unknown_field_help(name: &str, table: &str, expected: &[&str], format: Format) -> String {
    let here = normalise(table);
    // A key that is valid somewhere else was probably put in the wrong table.
    let homes: Vec<&String> = field_homes()
        .iter()
        .filter(|(t, fields)| *t != here && fields.iter().any(|f| f == name))
        .map(|(t, _)| t)
        .collect();
    let home = homes.iter().find(|t| t.is_empty()).or(homes.first());
    if let Some(home) = home {
        if home.is_empty() {
            return match format {
                Format::Toml => format!(
                    "`{name}` is a top-level field: move it above the first [table] header (here it is read as part of {})",
                    table_name(table, format)
                ),
                Format::Json => {
                    format!("`{name}` is a top-level field: move it to the outermost object")
                }
            };
        }
        return format!("`{name}` belongs in {}: move it there", table_name(home, format));
    }
    if let Some(s) = suggest(name, expected) {
        return format!("did you mean `{s}`?");
    }
    if expected.is_empty() {
        return "remove it: this table takes no fields".into();
    }
    format!("remove it, or use one of {}", list(expected))
}

fn missing_field_help(name: &str, table: &str, format: Format) -> String {
    let norm = normalise(table);
    let example = match (norm.as_str(), name) {
        ("", "name") => Some(("name = \"my-workload\"", "\"name\": \"my-workload\"")),
        ("", "runtime") => Some((
            "[runtime]` with `command = [\"python\", \"main.py\"]",
            "\"runtime\": { \"command\": [\"python\", \"main.py\"] }",
        )),
        ("runtime", "command") => {
            Some(("command = [\"python\", \"main.py\"]", "\"command\": [\"python\", \"main.py\"]"))
        }
        ("inputs[]", "name") => Some(("name = \"dataset\"", "\"name\": \"dataset\"")),
        ("inputs[]", "source") => Some(("source = \"s3://bucket/path\"", "\"source\": \"s3://bucket/path\"")),
        ("outputs[]", "name") => Some(("name = \"results\"", "\"name\": \"results\"")),
        ("outputs[]", "path") => Some(("path = \"/outputs/results\"", "\"path\": \"/outputs/results\"")),
        _ => None,
    };
    let where_ = match (format, table.is_empty()) {
        (Format::Toml, true) => "at the top of the file, before any [table]".to_string(),
        (Format::Json, true) => "to the outermost object".to_string(),
        (_, false) => format!("to {}", table_name(table, format)),
    };
    match (example, format) {
        (Some((toml, _)), Format::Toml) => format!("add `{toml}` {where_}"),
        (Some((_, json)), Format::Json) => format!("add `{json}` {where_}"),
        (None, _) => format!("add `{name}` {where_}"),
    }
}

/// What serde calls a type, in words a user would use.
fn expected_words(exp: &str, format: Format) -> &'static str {
    match exp {
        "u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64" => "a whole number",
        "f32" | "f64" => "a number",
        "a string" | "a borrowed string" | "string" => "a string",
        "a sequence" => "an array",
        "a boolean" => "true or false",
        e if e.starts_with("struct ") || e == "a map" => match format {
            Format::Toml => "a table",
            Format::Json => "an object",
        },
        _ => "another type",
    }
}

fn found_words(found: &str, snippet: &str, format: Format) -> &'static str {
    let kind = found.split([' ', '`', '"']).next().unwrap_or("");
    match kind {
        "string" => "a string",
        "integer" => "a whole number",
        "floating" => "a decimal number",
        "boolean" => "a boolean",
        "sequence" => "an array",
        "null" | "unit" => "null",
        "map" if format == Format::Toml && snippet.starts_with(|c: char| c.is_ascii_digit()) => "a date/time",
        "map" => match format {
            Format::Toml => "a table",
            Format::Json => "an object",
        },
        _ => "something else",
    }
}

fn invalid_type(rest: &str, cx: &Context<'_>) -> Translated {
    let (found, exp) = rest.rsplit_once(", expected ").unwrap_or((rest, ""));
    let want = expected_words(exp, cx.format);
    let got = found_words(found, cx.snippet, cx.format);
    let field = last_field(cx.path);
    // A whole number too large for any integer type serde reads it as
    // (`integer `N` as i128`), or, in JSON, read as a float: the same
    // words on both sides would say nothing.
    if want == "a whole number"
        && let Some(range) = int_range(exp)
        && let Some(number) = whole_number(found, cx.snippet)
    {
        return Translated {
            path: cx.path.to_string(),
            message: format!("{} must be a whole number from {range}, not {number}", subject(cx.path)),
            help: Some(format!("use a number from {range}")),
        };
    }
    let message = if want == "another type" {
        format!("{} has the wrong type ({got})", subject(cx.path))
    } else {
        format!("{} must be {want}, not {got}", subject(cx.path))
    };
    let unquoted = cx.snippet.trim_matches(|c| c == '"' || c == '\'');
    let help = if DURATION_FIELDS.contains(&field) {
        "write the duration as a quoted string, like \"2h\", \"45m\" or \"1h30m\"".to_string()
    } else if field == "command" && got == "a string" {
        "write the command as an array of arguments, like [\"python\", \"train.py\"]; no shell splits it for you".into()
    } else if got == "a string"
        && ((want.contains("number") && unquoted.parse::<f64>().is_ok())
            || (want == "true or false" && matches!(unquoted, "true" | "false")))
    {
        format!("remove the quotes: write {unquoted}")
    } else if want == "a whole number" && got == "a decimal number" {
        "use a whole number, without a decimal point".into()
    } else if want == "a string" {
        "put the value in double quotes".into()
    } else if want == "an array" {
        "put the value in brackets, like [\"a\", \"b\"]".into()
    } else if want == "a table" {
        format!("write it as a table: a [{}] header, or {{ key = value, … }}", without_index(cx.path))
    } else {
        format!("change it to {want}")
    };
    Translated { path: cx.path.to_string(), message, help: Some(help) }
}

fn invalid_value(rest: &str, cx: &Context<'_>) -> Translated {
    let (found, exp) = rest.rsplit_once(", expected ").unwrap_or((rest, ""));
    let number = found.split('`').nth(1).unwrap_or("");
    let (message, help) = if exp.starts_with('u') && number.starts_with('-') {
        (format!("{} cannot be negative", subject(cx.path)), "use 0 or more".to_string())
    } else if let Some(range) = int_range(exp)
        && !number.is_empty()
    {
        (
            format!("{} must be a whole number from {range}, not {number}", subject(cx.path)),
            format!("use a number from {range}"),
        )
    } else {
        (
            format!("{} has an invalid value", subject(cx.path)),
            format!("use {}", expected_words(exp, cx.format)),
        )
    };
    Translated { path: cx.path.to_string(), message, help: Some(help) }
}

/// "0 to 4294967295" for serde's name of an integer type.
fn int_range(exp: &str) -> Option<String> {
    let (lo, hi): (i128, i128) = match exp {
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" => (0, u64::MAX.into()),
        "usize" => (0, usize::MAX as i128),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" => (i64::MIN.into(), i64::MAX.into()),
        _ => return None,
    };
    Some(format!("{lo} to {hi}"))
}

/// The whole number the user wrote, when serde read it as something else:
/// `integer `N` as i128` (too large for 64 bits), or a float (`1e20`) whose
/// source text is a plain integer (JSON).
fn whole_number(found: &str, snippet: &str) -> Option<String> {
    if let Some(n) = found.strip_prefix("integer `").and_then(|r| r.split('`').next()) {
        return Some(n.to_string());
    }
    let digits = snippet.trim().strip_prefix('-').unwrap_or(snippet.trim());
    (found.starts_with("floating") && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| snippet.trim().to_string())
}

/// Messages from our own `Deserialize` impls: "what; how to fix".
fn custom(raw: &str, cx: &Context<'_>) -> Translated {
    let (what, help) = match raw.rsplit_once("; ") {
        Some((w, h)) => (w, Some(h.to_string())),
        None => (raw, None),
    };
    let p = subject(cx.path);
    let message = if what.starts_with("invalid duration") {
        let inner = what.split_once(" (").map(|(_, r)| r.trim_end_matches(')')).unwrap_or("");
        let inner = inner.split(", supported units").next().unwrap_or(inner);
        if inner.is_empty() {
            format!("{p} is not a valid duration")
        } else {
            format!("{p} is not a valid duration ({inner})")
        }
    } else if what.starts_with("empty duration") {
        format!("{p} is empty; it needs a duration")
    } else if what.starts_with("invalid compute capability") {
        format!("{p} is not a valid compute capability")
    } else if what.starts_with("invalid GPU memory") {
        format!("{p} is not a valid GPU memory requirement")
    } else if cx.path.is_empty() {
        what.to_string()
    } else {
        format!("{p}: {what}")
    };
    let help = help.or_else(|| Some("check the value against the spec reference in the README".into()));
    Translated { path: cx.path.to_string(), message, help }
}

/// `` `path` `` for messages, or "this value" when the path is unknown.
fn subject(path: &str) -> String {
    if path.is_empty() { "this value".into() } else { format!("`{path}`") }
}

fn last_field(path: &str) -> &str {
    let bare = path.rsplit('.').next().unwrap_or(path);
    bare.split('[').next().unwrap_or(bare)
}

/// Rewrite a TOML syntax error.
pub(crate) fn toml_syntax(raw: &str, key: &str) -> (String, String) {
    let help = if raw.starts_with("duplicate key") {
        return (format!("`{key}` is defined twice"), "remove one of the two definitions".into());
    } else if raw.starts_with("unclosed array") {
        "close the array with `]`"
    } else if raw.starts_with("unclosed inline table") {
        "close the inline table with `}`"
    } else if raw.starts_with("unclosed table") {
        "close the table header with `]`"
    } else if raw.starts_with("unexpected key or value") {
        "put each `key = value` on its own line"
    } else if raw.starts_with("key with no value") {
        "write it as `key = value`"
    } else if raw.starts_with("string values must be quoted") {
        "put the value in double quotes, like `name = \"value\"`"
    } else if raw.contains("string") && raw.starts_with("invalid") {
        "close the string with the same quote that opened it, on the same line"
    } else if raw.starts_with("missing escaped value") {
        "a backslash starts an escape: write `\\\\` for a backslash, or use a 'literal string' in single quotes"
    } else if raw.starts_with("invalid boolean") {
        "write true or false, in lowercase"
    } else {
        "fix the TOML syntax here; see https://toml.io for the format"
    };
    (format!("TOML syntax error: {raw}"), help.into())
}

/// Rewrite a JSON syntax error (without serde_json's position suffix).
pub(crate) fn json_syntax(raw: &str) -> (String, String) {
    let help = if raw.starts_with("trailing comma") {
        "remove the comma: JSON does not allow one before `}` or `]`"
    } else if raw.starts_with("EOF while parsing") {
        "the document ends too early: close every `{` and `[`"
    } else if raw.starts_with("key must be a string") {
        "put object keys in double quotes"
    } else if raw.starts_with("expected value") {
        "write a JSON value here; strings need double quotes"
    } else if raw.starts_with("trailing characters") {
        "remove everything after the closing `}` of the document"
    } else if raw.starts_with("expected `,` or") {
        "separate entries with a comma"
    } else {
        "fix the JSON syntax here"
    };
    (format!("JSON syntax error: {raw}"), help.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_lists_are_split_into_names() {
        assert_eq!(
            split_quoted("gpu`, expected one of `gpus`, `cpu_cores`"),
            ("gpu", vec!["gpus", "cpu_cores"])
        );
        assert_eq!(split_quoted("mn`, expected `min` or `max`"), ("mn", vec!["min", "max"]));
        assert_eq!(split_quoted("command`"), ("command", vec![]));
    }

    #[test]
    fn out_of_range_whole_numbers_say_the_range() {
        let cx = Context { format: Format::Toml, path: "resources.gpus", parent: "resources", snippet: "" };
        let t = data_error("invalid type: integer `99999999999999999999` as i128, expected u32", &cx);
        assert_eq!(
            t.message,
            "`resources.gpus` must be a whole number from 0 to 4294967295, not 99999999999999999999"
        );
        let t = data_error("invalid value: integer `5000000000`, expected u32", &cx);
        assert_eq!(t.message, "`resources.gpus` must be a whole number from 0 to 4294967295, not 5000000000");
        let json = Context { format: Format::Json, snippet: "99999999999999999999", ..cx };
        let t = data_error("invalid type: floating point `1e20`, expected u32", &json);
        assert!(t.message.ends_with("from 0 to 4294967295, not 99999999999999999999"), "{}", t.message);
        let t = data_error("invalid value: integer `-1`, expected u32", &cx);
        assert_eq!(t.message, "`resources.gpus` cannot be negative");
    }

    #[test]
    fn unlocated_errors_still_read_well() {
        let cx = Context { format: Format::Toml, path: "", parent: "", snippet: "" };
        let t = data_error("invalid type: string \"x\", expected u32", &cx);
        assert_eq!(t.message, "this value must be a whole number, not a string");
    }
}
