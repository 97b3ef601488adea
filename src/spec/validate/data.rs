//! Checks on `[[inputs]]` and `[[outputs]]`: names, URI schemes, absolute
//! paths without `..`, duplicates, sizes, and credentials hidden in URIs.

use super::{Findings, MAX_INPUTS, MAX_OUTPUTS, bad_name_char, control_char, control_message};
use crate::spec::Spec;
use crate::spec::fields::suggest;
use crate::spec::locate::{child, item};
use crate::spec::secrets::{INLINE_SECRET, is_secret_query_key, looks_like_credential};
use std::collections::BTreeMap;

/// URI schemes an input source may use.
pub const INPUT_SCHEMES: &[&str] = &["file", "s3", "gs", "az", "hf", "http", "https"];

pub(super) fn check(spec: &Spec, f: &mut Findings) {
    if spec.inputs.len() > MAX_INPUTS {
        f.error(
            "inputs",
            format!("there are {} inputs; at most {MAX_INPUTS} are allowed", spec.inputs.len()),
            "group files under a common prefix and list the prefix once",
        );
    }
    if spec.outputs.len() > MAX_OUTPUTS {
        f.error(
            "outputs",
            format!("there are {} outputs; at most {MAX_OUTPUTS} are allowed", spec.outputs.len()),
            "write outputs into a few directories and list the directories",
        );
    }
    names(f, "inputs", spec.inputs.iter().map(|i| i.name.as_str()), "input");
    names(f, "outputs", spec.outputs.iter().map(|o| o.name.as_str()), "output");
    let mut mounts = BTreeMap::new();
    for (i, input) in spec.inputs.iter().enumerate() {
        let at = item("inputs", i);
        source(f, &child(&at, "source"), &input.source);
        if input.region.as_deref().is_some_and(|r| r.trim().is_empty()) {
            f.error(
                &child(&at, "region"),
                "`region` is empty",
                "name the region the data lives in, like \"eu-west\", or remove it",
            );
        }
        if let Some(size) = input.size_gb
            && (!size.is_finite() || size < 0.0)
        {
            f.error(
                &child(&at, "size_gb"),
                "`size_gb` must be a number of GB, 0 or more",
                "give the approximate size, like 120",
            );
        }
        if let Some(mount) = &input.mount {
            let path = child(&at, "mount");
            if absolute_path(f, &path, mount, "/data/dataset") {
                duplicate(f, &mut mounts, &path, mount, "mount path");
            }
        }
    }
    if let Some(c) = &spec.checkpoint {
        absolute_path(f, "checkpoint.path", &c.path, "/ckpt");
        if let Some(gb) = c.max_gb
            && (!gb.is_finite() || gb <= 0.0)
        {
            f.error(
                "checkpoint.max_gb",
                "`checkpoint.max_gb` must be a positive number of GB",
                "give the largest checkpoint to hand on, like 50",
            );
        }
        if c.interval.is_some_and(|i| i.0.is_zero()) {
            f.error(
                "checkpoint.interval",
                "`checkpoint.interval` is 0",
                "give how often the workload saves one, like \"30m\", or remove it",
            );
        }
    }
    let mut paths = BTreeMap::new();
    for (i, output) in spec.outputs.iter().enumerate() {
        let path = child(&item("outputs", i), "path");
        let example = format!("/outputs/{}", if output.name.is_empty() { "results" } else { &output.name });
        if absolute_path(f, &path, &output.path, &example) {
            duplicate(f, &mut paths, &path, &output.path, "output path");
        }
    }
}

/// Names present, well formed and unique within `list`.
fn names<'a>(f: &mut Findings, list: &str, names: impl Iterator<Item = &'a str>, what: &str) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, name) in names.enumerate() {
        let path = child(&item(list, i), "name");
        if name.trim().is_empty() {
            f.error(
                &path,
                format!("{what} name is empty"),
                format!("give the {what} a name, like \"dataset\""),
            );
            continue;
        }
        if let Some(c) = bad_name_char(name) {
            f.error(
                &path,
                format!("{what} name contains {c:?}, which is not allowed"),
                "use letters, digits, `-`, `_` and `.` only",
            );
        }
        match seen.get(name) {
            Some(first) => f.error(
                &path,
                format!("{what} name `{name}` is used twice (first at {list}[{first}])"),
                format!("give each {what} its own name"),
            ),
            None => {
                seen.insert(name, i);
            }
        }
    }
}

/// An absolute path without `..`. Returns whether it is acceptable.
fn absolute_path(f: &mut Findings, path: &str, value: &str, example: &str) -> bool {
    if value.trim().is_empty() {
        f.error(path, format!("`{path}` is empty"), format!("write an absolute path, like \"{example}\""));
        false
    } else if !value.starts_with('/') {
        f.error(
            path,
            format!("`{path}` must be an absolute path"),
            format!("write it from the root, like \"{example}\""),
        );
        false
    } else if let Some(c) = control_char(value, &[]) {
        f.error(
            path,
            control_message(path, c),
            format!("remove it: write a plain path, like \"{example}\"; a path with control characters cannot be collected or shown"),
        );
        false
    } else if value.split('/').any(|c| c == "..") {
        f.error(
            path,
            format!("`{path}` contains a `..` component"),
            format!("write the path without `..`, like \"{example}\"; it must stay inside the workload's filesystem"),
        );
        false
    } else {
        true
    }
}

/// `/a//b/./c/` → `/a/b/c`, so that spellings of one path compare equal.
fn normalise(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|c| !c.is_empty() && *c != ".").collect();
    format!("/{}", parts.join("/"))
}

fn duplicate(f: &mut Findings, seen: &mut BTreeMap<String, String>, path: &str, value: &str, what: &str) {
    let key = normalise(value);
    match seen.get(&key) {
        Some(first) => f.error(
            path,
            format!("{what} `{key}` is used twice (first at {first})"),
            format!("give each entry its own {what}"),
        ),
        None => {
            seen.insert(key, path.to_string());
        }
    }
}

fn source(f: &mut Findings, path: &str, uri: &str) {
    if uri.trim().is_empty() {
        f.error(path, format!("`{path}` is empty"), "write where the data is, like \"s3://bucket/dataset\"");
        return;
    }
    if inline_credential(uri) {
        f.error(
            path,
            format!("{INLINE_SECRET} {path}"),
            "remove the credential from the URI; give access through runtime.secrets (e.g. AWS_SECRET_ACCESS_KEY) instead",
        );
        return;
    }
    if let Some(c) = control_char(uri, &[]) {
        f.error(
            path,
            control_message(path, c),
            "remove it: a URI holds no control characters (percent-encode them, like %1B, if the name really has them)",
        );
        return;
    }
    let Some((scheme, rest)) = uri.split_once("://") else {
        let help = if uri.starts_with('/') {
            "write a local path as a file URI, like \"file:///data/set\""
        } else {
            "write it as a URI, like \"s3://bucket/dataset\" or \"file:///data/set\""
        };
        f.error(path, format!("`{path}` has no scheme"), help);
        return;
    };
    let lower = scheme.to_ascii_lowercase();
    if !INPUT_SCHEMES.contains(&lower.as_str()) {
        let known = INPUT_SCHEMES.join(", ");
        let help = match suggest(scheme, INPUT_SCHEMES) {
            Some(s) => format!("did you mean `{s}://`? Known schemes: {known}"),
            None => format!("use one of the known schemes: {known}"),
        };
        f.error(path, format!("`{path}` uses an unknown scheme `{scheme}`"), help);
        return;
    }
    if lower == "file" && !rest.starts_with('/') {
        f.error(
            path,
            format!("`{path}` is not an absolute file URI"),
            "write three slashes before an absolute path, like \"file:///data/set\"",
        );
    } else if rest.trim_matches('/').is_empty() {
        f.error(
            path,
            format!("`{path}` names no location after `{scheme}://`"),
            "add the bucket or host and path, like \"s3://bucket/dataset\"",
        );
    }
}

/// A credential inside a URI: a known token shape, a password in the
/// user-info part, or a signed-URL / token query parameter.
fn inline_credential(uri: &str) -> bool {
    if looks_like_credential(uri) {
        return true;
    }
    let after_scheme = uri.split_once("://").map_or(uri, |(_, r)| r);
    let authority = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && userinfo.contains(':')
    {
        return true;
    }
    let query = uri.split_once('?').map_or("", |(_, q)| q);
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .any(|(k, v)| !v.is_empty() && is_secret_query_key(&k.to_ascii_lowercase()))
}
