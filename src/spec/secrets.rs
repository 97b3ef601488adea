//! Recognising secret values so that they are never echoed back.
//!
//! This module owns two small judgements: whether an environment variable
//! *name* says it holds a secret (`HF_TOKEN`, `DB_PASSWORD`), and whether a
//! *value* looks like a known credential (`hf_…`, `ghp_…`, `AKIA…`, a JWT, a
//! PEM private key). It also finds such values in raw spec text so that
//! diagnostics and rendered source lines can be scrubbed. It never logs,
//! stores or returns a secret value itself, only byte ranges and booleans.

use std::ops::Range;

/// How every "secret written inline" message begins. Rendering uses it to
/// mask the value under the caret, whatever its shape.
pub(crate) const INLINE_SECRET: &str = "a secret value is written inline in";

/// Words in an environment variable name that mark it as holding a secret.
/// Matched against whole `_`-separated words (so `TOKENIZERS_PARALLELISM`
/// and `MAX_TOKENS` are not secrets, while `HF_TOKEN` is).
const SECRET_WORDS: &[&str] =
    &["TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "APIKEY", "CREDENTIAL", "CREDENTIALS"];

/// Consecutive word pairs that mark a secret (`OPENAI_API_KEY`).
const SECRET_PAIRS: &[(&str, &str)] = &[("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY")];

/// Whether an environment variable name says it holds a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    words.iter().any(|w| SECRET_WORDS.contains(w))
        || words.windows(2).any(|pair| SECRET_PAIRS.iter().any(|(a, b)| pair[0] == *a && pair[1] == *b))
}

/// A value that cannot be a secret even under a secret-sounding name:
/// empty, a number, a boolean or an absolute file path (such as
/// `GOOGLE_APPLICATION_CREDENTIALS = "/secrets/gcp.json"`).
pub(crate) fn harmless(value: &str) -> bool {
    let v = value.trim();
    v.is_empty()
        || v.parse::<f64>().is_ok()
        || matches!(v.to_ascii_lowercase().as_str(), "true" | "false" | "yes" | "no" | "on" | "off")
        || (v.starts_with('/') && !v.chars().any(char::is_whitespace))
}

/// Whether `value` contains something shaped like a known credential.
pub fn looks_like_credential(value: &str) -> bool {
    !credential_ranges(value).is_empty()
}

/// A token prefix, the characters allowed after it, and how many of them
/// a real credential has at least.
struct Prefixed {
    prefix: &'static str,
    body: fn(u8) -> bool,
    min_len: usize,
    exact: bool,
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}
fn alnum_dash_underscore(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}
fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

const PREFIXED: &[Prefixed] = &[
    Prefixed { prefix: "hf_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "ghp_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "gho_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "ghu_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "ghs_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "ghr_", body: alnum, min_len: 20, exact: false },
    Prefixed { prefix: "github_pat_", body: alnum_underscore, min_len: 20, exact: false },
    Prefixed { prefix: "glpat-", body: alnum_dash_underscore, min_len: 20, exact: false },
    Prefixed { prefix: "sk-", body: alnum_dash_underscore, min_len: 20, exact: false },
    Prefixed { prefix: "xoxb-", body: alnum_dash, min_len: 10, exact: false },
    Prefixed { prefix: "xoxp-", body: alnum_dash, min_len: 10, exact: false },
    Prefixed { prefix: "AKIA", body: upper_digit, min_len: 16, exact: true },
    Prefixed { prefix: "ASIA", body: upper_digit, min_len: 16, exact: true },
];

/// Byte ranges of credential-shaped tokens in `text`.
pub(crate) fn credential_ranges(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if i > 0 && bytes[i - 1].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        if let Some(end) = match_at(text, i) {
            out.push(i..end);
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// The end of a credential starting exactly at byte `i`, if one does.
fn match_at(text: &str, i: usize) -> Option<usize> {
    let rest = &text.as_bytes()[i..];
    for p in PREFIXED {
        if rest.starts_with(p.prefix.as_bytes()) {
            let body = rest[p.prefix.len()..].iter().take_while(|b| (p.body)(**b)).count();
            let ok = if p.exact { body == p.min_len } else { body >= p.min_len };
            if ok {
                return Some(i + p.prefix.len() + body);
            }
        }
    }
    if rest.starts_with(b"-----BEGIN ") {
        let header_end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        let header = &text[i..i + header_end];
        if header.contains("PRIVATE KEY-----") {
            let end = text[i..]
                .find("-----END ")
                .and_then(|e| text[i + e + 9..].find("-----").map(|f| i + e + 9 + f + 5))
                .unwrap_or(text.len());
            return Some(end);
        }
    }
    jwt_at(rest).map(|len| i + len)
}

/// A JWT: `eyJ…` `.` `eyJ…` `.` signature, each part base64url.
fn jwt_at(rest: &[u8]) -> Option<usize> {
    let seg = |s: &[u8]| s.iter().take_while(|b| alnum_dash_underscore(**b)).count();
    if !rest.starts_with(b"eyJ") {
        return None;
    }
    let a = seg(rest);
    if a < 10 || rest.get(a) != Some(&b'.') || !rest[a + 1..].starts_with(b"eyJ") {
        return None;
    }
    let b = seg(&rest[a + 1..]);
    if b < 10 || rest.get(a + 1 + b) != Some(&b'.') {
        return None;
    }
    let c = seg(&rest[a + b + 2..]);
    Some(a + b + 2 + c)
}

/// Byte ranges in raw spec text (TOML or JSON) that must never be shown:
/// credential-shaped tokens anywhere, passwords and signatures in URIs,
/// and the string value assigned to any key whose name looks secret
/// (`HF_TOKEN = "…"`, `"HF_TOKEN": "…"`).
pub(crate) fn secret_ranges(source: &str) -> Vec<Range<usize>> {
    let mut out = credential_ranges(source);
    out.extend(uri_secret_ranges(source));
    let bytes = source.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'));
        if !starts_word {
            i += 1;
            continue;
        }
        let len =
            bytes[i..].iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-').count();
        let word = &source[i..i + len];
        if is_secret_name(word)
            && let Some(range) = assigned_string(source, i + len)
            && !harmless(&source[range.clone()])
        {
            out.push(range);
        }
        i += len.max(1);
    }
    out.sort_by_key(|r| r.start);
    out
}

/// Passwords in `scheme://user:password@host` and values of secret query
/// parameters (`?token=…`, `X-Amz-Signature=…`, `sig=…`).
fn uri_secret_ranges(source: &str) -> Vec<Range<usize>> {
    let bytes = source.as_bytes();
    let stop = |b: u8| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'`');
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = source[from..].find("://") {
        let start = from + found + 3;
        let end = start + bytes[start..].iter().take_while(|b| !stop(**b)).count();
        let uri = &source[start..end];
        let authority_len = uri.find(['/', '?', '#']).unwrap_or(uri.len());
        if let Some(at) = uri[..authority_len].rfind('@')
            && let Some(colon) = uri[..at].find(':')
        {
            out.push(start + colon + 1..start + at);
        }
        if let Some(q) = uri.find('?') {
            let mut offset = start + q + 1;
            for pair in uri[q + 1..].split('&') {
                if let Some((k, v)) = pair.split_once('=') {
                    let k = k.to_ascii_lowercase();
                    if !v.is_empty() && is_secret_query_key(&k) {
                        out.push(offset + k.len() + 1..offset + pair.len());
                    }
                }
                offset += pair.len() + 1;
            }
        }
        from = end.max(start);
    }
    out
}

/// A query parameter that carries a credential.
pub(crate) fn is_secret_query_key(key: &str) -> bool {
    is_secret_name(key)
        || matches!(key, "sig" | "signature" | "x-amz-signature" | "x-amz-credential" | "x-goog-signature")
}

/// After a key ending at `at`, skip a closing quote, `=` or `:` and
/// whitespace; if a string follows, return the range of its contents.
fn assigned_string(source: &str, at: usize) -> Option<Range<usize>> {
    let bytes = source.as_bytes();
    let mut j = at;
    if matches!(bytes.get(j), Some(b'"' | b'\'')) {
        j += 1;
    }
    while matches!(bytes.get(j), Some(b' ' | b'\t')) {
        j += 1;
    }
    if !matches!(bytes.get(j), Some(b'=' | b':')) {
        return None;
    }
    j += 1;
    while matches!(bytes.get(j), Some(b' ' | b'\t')) {
        j += 1;
    }
    let rest = &source[j..];
    for delim in ["\"\"\"", "'''", "\"", "'"] {
        if rest.starts_with(delim) {
            let start = j + delim.len();
            let escapes = delim.starts_with('"');
            let end = find_close(source, start, delim, escapes).unwrap_or(source.len());
            return Some(start..end);
        }
    }
    None
}

/// Where the string opened before `start` closes (the delimiter's offset).
fn find_close(source: &str, start: usize, delim: &str, escapes: bool) -> Option<usize> {
    let bytes = source.as_bytes();
    let mut k = start;
    while k < bytes.len() {
        if escapes && bytes[k] == b'\\' {
            k += 2;
            continue;
        }
        if bytes[k..].starts_with(delim.as_bytes()) {
            return Some(k);
        }
        if delim.len() == 1 && bytes[k] == b'\n' {
            return Some(k);
        }
        k += 1;
    }
    None
}

/// Replace every occurrence of each secret (at least 4 bytes long, to avoid
/// mangling ordinary words) in `text` with `<redacted>`.
pub(crate) fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "<redacted>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_whole_words() {
        for name in
            ["HF_TOKEN", "GITHUB_TOKEN", "DB_PASSWORD", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "hf_token"]
        {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["TOKENIZERS_PARALLELISM", "MAX_TOKENS", "BATCH_SIZE", "PWD", "KEYBOARD"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }

    #[test]
    fn credentials_are_recognised() {
        let hf = format!("hf_{}", "a1B2".repeat(9));
        let akia = "AKIAIOSFODNN7EXAMPLE";
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl";
        for v in [
            hf.as_str(),
            akia,
            jwt,
            "Bearer sk-proj-abcdefghijklmnopqrstuvwx",
            "-----BEGIN RSA PRIVATE KEY-----\nMII\n-----END RSA PRIVATE KEY-----",
        ] {
            assert!(looks_like_credential(v), "{v}");
        }
        for v in ["hf_transfer", "task-abcdefghijklmnopqrstuvwxyz", "64", "/data/set", "AKIA"] {
            assert!(!looks_like_credential(v), "{v}");
        }
    }

    #[test]
    fn secret_ranges_cover_values_of_secret_keys() {
        let src = "env = { HF_TOKEN = \"plainvalue\", A = \"b\" }\n\"DB_PASSWORD\": \"hunter22\"";
        let ranges = secret_ranges(src);
        let found: Vec<&str> = ranges.iter().map(|r| &src[r.clone()]).collect();
        assert_eq!(found, ["plainvalue", "hunter22"]);
    }
}
