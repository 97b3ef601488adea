//! Spec text → [`Spec`], with diagnostics that point at file:line:col.
//!
//! This module owns the loading pipeline: size limit, parse (TOML, or JSON
//! with the same schema), type check through serde, the semantic checks of
//! [`super::validate`], and turning every problem into a [`Diagnostic`]
//! with a position and a help line. A syntax error stops at the first;
//! type errors (unknown keys, wrong types, bad values, missing fields) and
//! semantic problems are all reported together, the type check going on
//! past each error with the repairs of [`super::repair`]. Secret values found
//! in the text are scrubbed from every message. The only I/O here is
//! [`read`] reading one file (for [`load_file`]); nothing is logged or
//! printed.

use super::locate::{Entry, Index, Target};
use super::repair::{self, Fix, JsonText, Repairs};
use super::validate::{self, MAX_SPEC_BYTES};
use super::{Spec, fields, secrets, translate};
use serde::Deserialize;
use std::fmt;
use std::path::Path;

pub use super::diagnostic::{Diagnostic, Severity};

/// The text format of a spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

impl Format {
    /// `.json` (any case) is JSON; everything else is read as TOML.
    pub fn from_path(p: &Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("json") => Format::Json,
            _ => Format::Toml,
        }
    }
}

/// A spec that loaded without errors, and the warnings it raised.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub spec: Spec,
    pub warnings: Vec<Diagnostic>,
}

/// A spec that did not load: its diagnostics, errors first, then warnings,
/// each group in source order.
#[derive(Debug)]
pub struct SpecError {
    pub diagnostics: Vec<Diagnostic>,
}

impl SpecError {
    fn one(d: Diagnostic) -> Self {
        Self { diagnostics: vec![d] }
    }

    /// Every diagnostic rendered rustc-style against `source`, separated by
    /// blank lines.
    pub fn render(&self, source: &str) -> String {
        self.diagnostics.iter().map(|d| d.render(source)).collect::<Vec<_>>().join("\n")
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// Parse and validate spec text. `file` is only used to label diagnostics.
pub fn parse(text: &str, file: &str, format: Format) -> Result<Loaded, SpecError> {
    if text.len() > MAX_SPEC_BYTES {
        return Err(SpecError::one(too_large(file, text.len() as u64)));
    }
    // Editors do not show a byte-order mark as a column; neither do we.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut hidden: Vec<String> =
        secrets::secret_ranges(text).into_iter().map(|r| text[r].to_string()).collect();
    let parsed = match format {
        Format::Toml => parse_toml(text, file),
        Format::Json => parse_json(text, file),
    };
    let typed = match parsed {
        Ok(typed) => typed,
        Err(d) => return Err(SpecError::one(scrub(d, &hidden))),
    };
    if let Some(spec) = &typed.spec {
        for (name, value) in &spec.runtime.env {
            if (secrets::is_secret_name(name) && !secrets::harmless(value))
                || secrets::looks_like_credential(value)
            {
                hidden.push(value.clone());
            }
        }
    }
    let mut diagnostics = shape(&typed.index, file, text, format);
    // A table written as an array may also fail the type check: say it once.
    let shaped: Vec<String> = diagnostics.iter().map(|d| d.path.clone()).collect();
    diagnostics.extend(typed.errors.list.into_iter().filter(|d| !shaped.contains(&d.path)));
    if let Some(spec) = &typed.spec {
        for finding in validate::check(spec) {
            if typed.errors.repairs.follows(&finding.path, &finding.message) {
                continue;
            }
            let (offset, _) = typed.index.offset(&finding.path, finding.target);
            let mut d = Diagnostic::at(finding.severity, file, text, offset, &finding.path);
            d.message = finding.message;
            d.help = Some(finding.help);
            diagnostics.push(d);
        }
    }
    let mut diagnostics: Vec<Diagnostic> = diagnostics.into_iter().map(|d| scrub(d, &hidden)).collect();
    diagnostics.sort_by_key(|d| (!d.is_error(), d.line, d.col));
    match typed.spec {
        Some(spec) if !diagnostics.iter().any(Diagnostic::is_error) => {
            Ok(Loaded { spec, warnings: diagnostics })
        }
        _ => Err(SpecError { diagnostics }),
    }
}

/// Read and parse a spec file; the format follows the extension.
pub fn load_file(path: &Path) -> Result<Loaded, SpecError> {
    load_file_and_text(path).1
}

/// [`load_file`], with the text that was read (empty when none was), to
/// render the diagnostics against.
pub fn load_file_and_text(path: &Path) -> (String, Result<Loaded, SpecError>) {
    match read(path) {
        Ok(text) => {
            let loaded = parse(&text, &path.display().to_string(), Format::from_path(path));
            (text, loaded)
        }
        Err(e) => (String::new(), Err(e)),
    }
}

/// The text of a spec file, read safely: only a regular file, and at most
/// [`MAX_SPEC_BYTES`] of it. The file is opened without blocking and
/// checked before a byte is read, so a FIFO cannot stall the command and
/// `/dev/zero` cannot fill memory. Callers that show diagnostics against
/// the text read it here once and [`parse`] it.
pub fn read(path: &Path) -> Result<String, SpecError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = path.display().to_string();
    let unreadable = |e: std::io::Error| {
        let help = match e.kind() {
            std::io::ErrorKind::NotFound => "check the path: no file exists there",
            std::io::ErrorKind::PermissionDenied => "check the file's permissions",
            _ if path.is_dir() => "give the path of a spec file, not a directory",
            _ => "check that the path names a readable file",
        };
        SpecError::one(Diagnostic::whole_file(&file, format!("cannot read the spec: {e}"), Some(help.into())))
    };
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(unreadable)?;
    let meta = f.metadata().map_err(unreadable)?;
    let kind = meta.file_type();
    if !kind.is_file() {
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a special file"
        };
        let help = if kind.is_dir() {
            "give the path of a spec file, not a directory"
        } else {
            "give the path of a spec file; to use a spec that a command writes, save it to a file first"
        };
        return Err(SpecError::one(Diagnostic::whole_file(
            &file,
            format!("cannot read the spec: the path names {what}, not a regular file"),
            Some(help.into()),
        )));
    }
    if meta.len() > MAX_SPEC_BYTES as u64 {
        return Err(SpecError::one(too_large(&file, meta.len())));
    }
    // The file may grow after the check: never read more than the limit
    // and one byte to tell.
    let mut bytes = Vec::new();
    (&mut f).take(MAX_SPEC_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(unreadable)?;
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(SpecError::one(too_large(&file, bytes.len() as u64)));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            // The prefix up to `valid_up_to` is UTF-8 by definition.
            let prefix = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let mut d = Diagnostic::at(Severity::Error, &file, &prefix, valid, "");
            d.message = "the spec is not valid UTF-8".into();
            d.help = Some("save the file as UTF-8".into());
            Err(SpecError::one(d))
        }
    }
}

/// The JSON Schema of [`Spec`], for editors and `canopy schema`: see
/// [`super::schema`].
pub fn schema() -> serde_json::Value {
    super::schema::schema()
}

fn too_large(file: &str, bytes: u64) -> Diagnostic {
    Diagnostic::whole_file(
        file,
        format!("the spec is {} KiB; at most {} KiB is allowed", bytes.div_ceil(1024), MAX_SPEC_BYTES / 1024),
        Some("a spec describes the work, not its data: move long lists and values into an input".into()),
    )
}

fn scrub(mut d: Diagnostic, hidden: &[String]) -> Diagnostic {
    d.message = secrets::scrub(&d.message, hidden);
    d.help = d.help.map(|h| secrets::scrub(&h, hidden));
    d
}

/// What the type check found: the spec when it (or its repaired form)
/// deserialized, the located document, and its type errors.
struct Typed {
    spec: Option<Spec>,
    index: Index,
    errors: TypeErrors,
}

/// Every type error, and what the repairs that got past them tainted.
#[derive(Default)]
struct TypeErrors {
    list: Vec<Diagnostic>,
    repairs: Repairs,
}

impl TypeErrors {
    /// Records a type error (unless it is a missing field that follows
    /// from an earlier repair) and returns how to repair it.
    fn record(&mut self, raw: &str, d: Diagnostic, found: Option<(&Entry, Target)>) -> Fix {
        let consequence = raw.starts_with("missing field") && self.repairs.missing_follows(&d.path);
        let fix = self.repairs.fix(raw, found, &d.path, d.help.as_deref());
        if !consequence {
            self.list.push(d);
        }
        fix
    }

    /// The check gave up with problems possibly left: say so.
    fn gave_up(&mut self, file: &str) {
        self.list.push(Diagnostic::whole_file(
            file,
            format!("stopped checking types after {} problems; more may follow", self.list.len()),
            Some("fix these and check again".into()),
        ));
    }
}

fn parse_toml(text: &str, file: &str) -> Result<Typed, Diagnostic> {
    let root = toml::de::DeTable::parse(text).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let key = text.get(span.clone()).unwrap_or("");
        let (message, help) = translate::toml_syntax(e.message(), key);
        let mut d = Diagnostic::at(Severity::Error, file, text, span.start, "");
        d.message = message;
        d.help = Some(help);
        d
    })?;
    let index = Index::from_toml(&root);
    let mut errors = TypeErrors::default();
    let mut tree = root;
    for _ in 0..repair::MAX_ROUNDS {
        let e = match Spec::deserialize(toml::de::Deserializer::from(tree.clone())) {
            Ok(spec) => return Ok(Typed { spec: Some(spec), index, errors }),
            Err(e) => e,
        };
        let span = e.span().unwrap_or(0..0);
        let found = index.at_span(&span);
        let d = data_diagnostic(e.message(), found, span.start, file, text, Format::Toml);
        let fixed = match &errors.record(e.message(), d, found) {
            Fix::Remove { key, value } => repair::remove_toml(tree.get_mut(), key.as_ref(), value),
            Fix::Insert { table, name, placeholder } => {
                repair::insert_toml(tree.get_mut(), table, name, placeholder)
            }
            Fix::Stop => false,
        };
        if !fixed {
            return Ok(Typed { spec: None, index, errors });
        }
    }
    errors.gave_up(file);
    Ok(Typed { spec: None, index, errors })
}

fn parse_json(text: &str, file: &str) -> Result<Typed, Diagnostic> {
    let index = Index::from_json(text);
    let mut errors = TypeErrors::default();
    let mut json = JsonText::new(text);
    for round in 0..repair::MAX_ROUNDS {
        let e = match serde_json::from_slice::<Spec>(json.bytes()) {
            Ok(spec) => return Ok(Typed { spec: Some(spec), index, errors }),
            Err(e) => e,
        };
        let full = e.to_string();
        let mut raw = full.rsplit_once(" at line ").map_or(full.as_str(), |(m, _)| m).to_string();
        // serde_json counts lines and columns in the text it read.
        let repaired = std::str::from_utf8(json.bytes()).unwrap_or(text);
        let offset = json.to_source(super::diagnostic::offset_of(repaired, e.line(), e.column()));
        let data = e.is_data() || {
            // serde_json calls a number where an enum's name belongs
            // "expected value", a syntax error; the document says otherwise.
            let valid = serde_json::from_slice::<serde::de::IgnoredAny>(json.bytes()).is_ok();
            if valid {
                raw = not_a_name(text.get(offset..).unwrap_or(""));
            }
            valid
        };
        let raw = raw.as_str();
        if !data {
            if round > 0 {
                // A repair went wrong; what was found stands.
                return Ok(Typed { spec: None, index, errors });
            }
            let (message, help) = translate::json_syntax(raw);
            let mut d = Diagnostic::at(Severity::Error, file, text, offset, "");
            d.message = message;
            d.help = Some(help);
            return Err(d);
        }
        let found = index.at_json_offset(offset);
        let at = match found {
            Some((entry, Target::Key)) => entry.key.as_ref().map_or(entry.value.start, |k| k.start),
            Some((entry, Target::Value)) if raw.starts_with("missing field") => {
                entry.key.as_ref().map_or(entry.value.start, |k| k.start)
            }
            Some((entry, Target::Value)) => entry.value.start,
            None => offset,
        };
        let d = data_diagnostic(raw, found, at, file, text, Format::Json);
        let fixed = match &errors.record(raw, d, found) {
            Fix::Remove { key, value } => json.remove(key.as_ref(), value),
            Fix::Insert { table, name, placeholder } => {
                index.get(table).is_some_and(|t| json.insert(&t.value, name, placeholder))
            }
            Fix::Stop => false,
        };
        if !fixed {
            return Ok(Typed { spec: None, index, errors });
        }
    }
    errors.gave_up(file);
    Ok(Typed { spec: None, index, errors })
}

/// serde's words for a value where a string (an enum's name) belongs,
/// from the value's source text.
fn not_a_name(value: &str) -> String {
    let value = value.trim_start();
    let number = value.split([',', ']', '}', ' ', '\n']).next().unwrap_or("");
    let found = match value.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') if number.contains(['.', 'e', 'E']) => "floating point",
        Some(b'-' | b'0'..=b'9') => "integer",
        Some(b't' | b'f') => "boolean",
        Some(b'n') => "null",
        Some(b'[') => "sequence",
        Some(b'{') => "map",
        _ => "value",
    };
    format!("invalid type: {found}, expected a string")
}

fn data_diagnostic(
    raw: &str,
    found: Option<(&Entry, Target)>,
    offset: usize,
    file: &str,
    text: &str,
    format: Format,
) -> Diagnostic {
    let (path, parent, snippet) = match found {
        Some((e, target)) => {
            let snippet = if target == Target::Value { text.get(e.value.clone()).unwrap_or("") } else { "" };
            (e.path.as_str(), e.parent.as_str(), snippet)
        }
        None => ("", "", ""),
    };
    let t = translate::data_error(raw, &translate::Context { format, path, parent, snippet });
    let mut d = Diagnostic::at(Severity::Error, file, text, offset, &t.path);
    d.message = t.message;
    d.help = t.help;
    d
}

/// serde lets an array stand in for a table (`resources = [8]` would set
/// `gpus`); a spec must not. Report every table written as an array.
fn shape(index: &Index, file: &str, text: &str, format: Format) -> Vec<Diagnostic> {
    let what = match format {
        Format::Toml => "a table",
        Format::Json => "an object",
    };
    index
        .entries()
        .iter()
        .filter(|e| e.is_array && fields::is_table_path(&e.path))
        .map(|e| {
            let mut d = Diagnostic::at(Severity::Error, file, text, e.value.start, &e.path);
            d.message = format!("`{}` must be {what}, not an array", e.path);
            d.help = Some(match format {
                Format::Toml => format!("write it as a [{}] table of `key = value` lines", e.path),
                Format::Json => "write it as an object of named fields".into(),
            });
            d
        })
        .collect()
}
