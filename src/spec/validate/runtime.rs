//! Checks on `[runtime]`: the command, the environment and secret names,
//! above all that no secret value is written inline. Messages name the
//! variable, never its value.

use super::{Findings, MAX_ARGV, control_char, control_message};
use crate::spec::Runtime;
use crate::spec::locate::{child, item};
use crate::spec::secrets::{INLINE_SECRET, harmless, is_secret_name, looks_like_credential};
use std::collections::BTreeMap;

pub(super) fn check(rt: &Runtime, f: &mut Findings) {
    image(rt, f);
    command(rt, f);
    if let Some(dir) = &rt.workdir {
        if !dir.starts_with('/') {
            f.error(
                "runtime.workdir",
                "`runtime.workdir` must be an absolute path",
                "write it from the root, like \"/workspace\"",
            );
        } else if let Some(c) = control_char(dir, &[]) {
            f.error(
                "runtime.workdir",
                control_message("runtime.workdir", c),
                "remove it: a directory path cannot usefully hold control characters",
            );
        }
    }
    env(rt, f);
    secrets(rt, f);
}

fn image(rt: &Runtime, f: &mut Findings) {
    if let Some(image) = &rt.image {
        if image.trim().is_empty() {
            f.error(
                "runtime.image",
                "`runtime.image` is empty",
                "name a container image, like \"registry.example.com/app:v1\", or remove the line to run a plain process",
            );
        } else if let Some(c) = control_char(image, &[]) {
            f.error(
                "runtime.image",
                control_message("runtime.image", c),
                "write the image reference alone, like \"registry.example.com/app:v1\"",
            );
        } else if image.chars().any(char::is_whitespace) {
            f.error(
                "runtime.image",
                "`runtime.image` contains whitespace",
                "write the image reference alone, like \"registry.example.com/app:v1\"; arguments go in runtime.command",
            );
        }
    }
}

fn command(rt: &Runtime, f: &mut Findings) {
    let argv = &rt.command;
    match argv.first() {
        None => f.error(
            "runtime.command",
            "`runtime.command` is empty",
            "write the program and its arguments, like [\"python\", \"train.py\"]",
        ),
        Some(program) if program.trim().is_empty() => f.error(
            "runtime.command[0]",
            "the program name (`runtime.command[0]`) is empty",
            "put the program first, like [\"python\", \"train.py\"]",
        ),
        Some(program) if program.contains(' ') && argv.len() == 1 && !program.starts_with('/') => f.error(
            "runtime.command[0]",
            "`runtime.command` is one string with spaces, but no shell splits it",
            "split it into arguments, like [\"python\", \"train.py\"], or use [\"sh\", \"-c\", \"…\"]",
        ),
        Some(_) => {}
    }
    if argv.len() > MAX_ARGV {
        f.error(
            "runtime.command",
            format!("`runtime.command` has {} arguments; at most {MAX_ARGV} are allowed", argv.len()),
            "pass long argument lists through a file or an input instead",
        );
    }
    for (i, arg) in argv.iter().enumerate() {
        let path = item("runtime.command", i);
        if let Some(c) = control_char(arg, ARG_CONTROLS) {
            f.error(
                &path,
                control_message(&path, c),
                "remove it: an argument may hold tabs and newlines (a multi-line program), no other control characters",
            );
        }
        if looks_like_credential(arg) {
            f.error(
                &path,
                format!("{INLINE_SECRET} {path}"),
                "move it out of the spec: list the variable in runtime.secrets and read it from the environment",
            );
        }
    }
}

/// The control characters an argument or an environment value may hold:
/// a multi-line `python -c` program is legitimate.
const ARG_CONTROLS: &[char] = &['\t', '\n'];

/// POSIX portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub(crate) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn env(rt: &Runtime, f: &mut Findings) {
    for (name, value) in &rt.env {
        let path = child("runtime.env", name);
        if !is_env_name(name) {
            f.error_at_key(
                &path,
                format!("`{name}` is not a valid environment variable name"),
                "start with a letter or `_` and use only letters, digits and `_`, like `BATCH_SIZE`",
            );
        }
        if looks_like_credential(value) || (is_secret_name(name) && !harmless(value)) {
            f.error(
                &path,
                format!("{INLINE_SECRET} {path}"),
                format!("move it out of the spec and list `{name}` in runtime.secrets"),
            );
        }
        if rt.secrets.iter().any(|s| s == name) {
            f.error_at_key(
                &path,
                format!("`{name}` is both a plain variable in runtime.env and a secret in runtime.secrets"),
                format!("remove runtime.env.{name}: the secret is exported under the same name"),
            );
        }
        if let Some(c) = control_char(value, ARG_CONTROLS) {
            f.error(
                &path,
                control_message(&path, c),
                "remove it: an environment value may hold tabs and newlines, no other control characters",
            );
        }
    }
}

fn secrets(rt: &Runtime, f: &mut Findings) {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, name) in rt.secrets.iter().enumerate() {
        let path = item("runtime.secrets", i);
        if looks_like_credential(name) {
            f.error(
                &path,
                format!("{path} looks like a secret value, not the name of a secret"),
                "list secrets by name, like \"HF_TOKEN\"; the value is resolved at launch, never written in the spec",
            );
            continue;
        }
        if !is_env_name(name) {
            f.error(
                &path,
                format!("`{path}` is not a valid secret name"),
                "secrets are exported as environment variables: use letters, digits and `_`, like \"HF_TOKEN\"",
            );
        }
        match seen.get(name.as_str()) {
            Some(first) => f.error(
                &path,
                format!("secret `{name}` is listed twice (first at runtime.secrets[{first}])"),
                "remove the duplicate",
            ),
            None => {
                seen.insert(name, i);
            }
        }
    }
}
