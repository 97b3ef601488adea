//! What a spec problem looks like to a user: [`Diagnostic`], its one-line
//! form (`spec.toml:12:1: error: …`) and its rustc-style rendering with the
//! source line and a caret.
//!
//! This module owns presentation and byte-offset → line:col arithmetic. It
//! does not decide what is wrong (that is [`super::load`] and
//! [`super::validate`]). Rendering masks secret-looking values in the
//! source line it shows, so a rendered diagnostic never reprints a secret.

use super::secrets;
use serde::Serialize;
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One problem in a spec, with where it is and what to do about it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Diagnostic {
    pub severity: Severity,
    pub file: String,
    /// 1-based; 0 when there is no position (e.g. the file is unreadable).
    pub line: usize,
    /// 1-based, in characters.
    pub col: usize,
    /// Dotted key path, e.g. `resources.gpu_memory_gb.min`; `""` for the document.
    pub path: String,
    /// What is wrong, one sentence.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

impl Diagnostic {
    /// A diagnostic at a byte offset of `source`.
    pub(crate) fn at(severity: Severity, file: &str, source: &str, offset: usize, path: &str) -> Self {
        let (line, col) = line_col(source, offset);
        Self {
            severity,
            file: file.to_string(),
            line,
            col,
            path: path.to_string(),
            message: String::new(),
            help: None,
        }
    }

    /// A diagnostic about the whole file, with no position.
    pub(crate) fn whole_file(file: &str, message: String, help: Option<String>) -> Self {
        Self {
            severity: Severity::Error,
            file: file.to_string(),
            line: 0,
            col: 0,
            path: String::new(),
            message,
            help,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// rustc-style: the message, the location, the source line with a
    /// `^^^` under the offending token, and the help. Secret-looking values
    /// on the shown line are masked with `*`.
    pub fn render(&self, source: &str) -> String {
        let mut out = format!("{}: {}\n", self.severity, self.message);
        let location = if self.line == 0 {
            self.file.clone()
        } else {
            format!("{}:{}:{}", self.file, self.line, self.col)
        };
        let shown = (self.line > 0).then(|| source_line(source, self.line)).flatten();
        let gutter = if shown.is_some() { self.line.to_string().len() } else { 1 };
        let pad = " ".repeat(gutter);
        out.push_str(&format!("{pad}--> {location}\n"));
        if let Some((start, text)) = shown {
            let mut masked = mask_line(source, start, text);
            if self.message.starts_with(secrets::INLINE_SECRET) {
                masked = mask_token(&masked, self.col.saturating_sub(1));
            }
            let (display, caret_at, caret_len) = expand_tabs(&masked, self.col.saturating_sub(1));
            out.push_str(&format!("{pad} |\n"));
            out.push_str(&format!("{} | {}\n", self.line, display.trim_end()));
            out.push_str(&format!("{pad} | {}{}\n", " ".repeat(caret_at), "^".repeat(caret_len)));
        }
        if let Some(help) = &self.help {
            out.push_str(&format!("{pad} = help: {help}\n"));
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}: {}", self.file, self.severity, self.message)?;
        } else {
            write!(f, "{}:{}:{}: {}: {}", self.file, self.line, self.col, self.severity, self.message)?;
        }
        if let Some(help) = &self.help {
            write!(f, "\n  help: {help}")?;
        }
        Ok(())
    }
}

/// 1-based line and character column of a byte offset (clamped to the text).
pub(crate) fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = source[line_start..offset].chars().count() + 1;
    (line, col)
}

/// Byte offset of a 1-based line and byte column, as serde_json reports
/// them (its column counts bytes and points at the last byte it read).
pub(crate) fn offset_of(source: &str, line: usize, byte_col: usize) -> usize {
    let start = source.split_inclusive('\n').take(line.saturating_sub(1)).map(str::len).sum::<usize>();
    (start + byte_col.saturating_sub(1)).min(source.len())
}

/// The 1-based `line` of `source` and its byte offset, without the newline.
fn source_line(source: &str, line: usize) -> Option<(usize, &str)> {
    let mut start = 0;
    for (i, text) in source.split('\n').enumerate() {
        if i + 1 == line {
            return Some((start, text.strip_suffix('\r').unwrap_or(text)));
        }
        start += text.len() + 1;
    }
    None
}

/// The line with every character that falls in a secret range, or repeats
/// a secret found elsewhere in the source, replaced by `*` (same character
/// count, so columns stay put).
fn mask_line(source: &str, line_start: usize, text: &str) -> String {
    let ranges = secrets::secret_ranges(source);
    let mut hidden: Vec<std::ops::Range<usize>> = ranges
        .iter()
        .filter_map(|r| {
            let start = r.start.max(line_start);
            let end = r.end.min(line_start + text.len());
            (start < end).then(|| start - line_start..end - line_start)
        })
        .collect();
    for r in &ranges {
        let secret = source.get(r.clone()).unwrap_or("");
        if secret.len() >= 4 {
            hidden.extend(text.match_indices(secret).map(|(i, s)| i..i + s.len()));
        }
    }
    text.char_indices().map(|(i, c)| if hidden.iter().any(|r| r.contains(&i)) { '*' } else { c }).collect()
}

/// The line with the token at character column `col0` masked: its inside
/// when quoted, all of it otherwise.
fn mask_token(line: &str, col0: usize) -> String {
    let chars: Vec<char> = line.chars().collect();
    let len = token_len(&chars, col0);
    let quoted = matches!(chars.get(col0), Some('"' | '\''));
    let (from, to) = if quoted && len >= 2 { (col0 + 1, col0 + len - 1) } else { (col0, col0 + len) };
    chars.iter().enumerate().map(|(i, c)| if (from..to).contains(&i) { '*' } else { *c }).collect()
}

/// Expand tabs to four spaces; return the display text and where (in
/// display columns) and how wide the caret goes for character column `col0`.
fn expand_tabs(line: &str, col0: usize) -> (String, usize, usize) {
    let chars: Vec<char> = line.chars().collect();
    let len = token_len(&chars, col0);
    let mut display = String::new();
    let (mut caret_at, mut caret_end) = (None, None);
    for (i, c) in chars.iter().enumerate() {
        if i == col0 {
            caret_at = Some(display.chars().count());
        }
        if c == &'\t' {
            display.push_str("    ");
        } else {
            display.push(*c);
        }
        if i + 1 == col0 + len {
            caret_end = Some(display.chars().count());
        }
    }
    let width = display.chars().count();
    let at = caret_at.unwrap_or(width);
    let end = caret_end.unwrap_or(at + 1);
    (display, at, end.saturating_sub(at).max(1))
}

/// How many characters the token starting at `col0` spans: a quoted
/// string, a bracketed group on the same line, or a bare word.
fn token_len(chars: &[char], col0: usize) -> usize {
    let Some(&first) = chars.get(col0) else {
        return 1;
    };
    let rest = &chars[col0..];
    match first {
        '"' | '\'' => {
            let mut i = 1;
            while i < rest.len() {
                if rest[i] == '\\' && first == '"' {
                    i += 2;
                    continue;
                }
                if rest[i] == first {
                    return i + 1;
                }
                i += 1;
            }
            rest.len()
        }
        '[' | '{' => {
            let mut depth = 0usize;
            let mut quote: Option<char> = None;
            for (i, c) in rest.iter().enumerate() {
                match (quote, c) {
                    (Some(q), c) if *c == q => quote = None,
                    (Some(_), _) => {}
                    (None, '"' | '\'') => quote = Some(*c),
                    (None, '[' | '{') => depth += 1,
                    (None, ']' | '}') => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
            }
            1
        }
        _ => rest
            .iter()
            .take_while(|c| !c.is_whitespace() && !matches!(c, ',' | ']' | '}' | '=' | '#'))
            .count()
            .max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_characters() {
        let src = "a = 1\nné = \"x\"\n";
        assert_eq!(line_col(src, 0), (1, 1));
        let x = src.find("\"x\"").unwrap();
        assert_eq!(line_col(src, x), (2, 6));
        assert_eq!(line_col(src, src.len()), (3, 1));
    }

    #[test]
    fn render_puts_a_caret_under_the_token() {
        let src = "[resources]\ngpu = 1\n";
        let d = Diagnostic {
            severity: Severity::Error,
            file: "spec.toml".into(),
            line: 2,
            col: 1,
            path: "resources.gpu".into(),
            message: "unknown field `gpu` in [resources]".into(),
            help: Some("did you mean `gpus`?".into()),
        };
        let r = d.render(src);
        assert_eq!(
            r,
            "error: unknown field `gpu` in [resources]\n --> spec.toml:2:1\n  |\n2 | gpu = 1\n  | ^^^\n  = help: did you mean `gpus`?\n"
        );
        assert_eq!(
            d.to_string(),
            "spec.toml:2:1: error: unknown field `gpu` in [resources]\n  help: did you mean `gpus`?"
        );
    }
}
