//! Secret resolution: turns the secret *names* a spec lists into values
//! taken from the operator's environment, at launch.
//!
//! This module owns only the lookup and its error. It must never store,
//! log or format a value: values leave here wrapped in [`SecretValue`],
//! whose `Debug` and `Display` are redacted, and [`MissingSecrets`] names
//! the missing secrets without saying anything about the others.

use super::SecretValue;
use std::fmt;

/// Some secrets a spec names have no value in the environment.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct MissingSecrets {
    /// The missing names, in the order the spec lists them.
    pub names: Vec<String>,
}

impl fmt::Display for MissingSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = self.names.join(", ");
        let (noun, pronoun) = if self.names.len() == 1 { ("secret", "it") } else { ("secrets", "them") };
        write!(
            f,
            "{noun} {list} not set in the environment Canopy runs in; export {pronoun} before \
             launching, or remove {pronoun} from the spec's runtime.secrets"
        )
    }
}

/// Looks up each name with `env` (usually `|n| std::env::var(n).ok()`).
/// An empty value counts as set. Duplicate names are resolved once.
pub fn resolve_secrets(
    names: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, SecretValue)>, MissingSecrets> {
    let mut found = Vec::with_capacity(names.len());
    let mut missing = Vec::new();
    for name in names {
        if found.iter().any(|(n, _): &(String, SecretValue)| n == name) || missing.contains(name) {
            continue;
        }
        match env(name) {
            Some(value) => found.push((name.clone(), SecretValue::new(value))),
            None => missing.push(name.clone()),
        }
    }
    if missing.is_empty() { Ok(found) } else { Err(MissingSecrets { names: missing }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HF_TOKEN" => Some("hf_very_secret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn resolves_present_names_in_order_once() {
        let names = vec!["HF_TOKEN".to_string(), "EMPTY".into(), "HF_TOKEN".into()];
        let got = resolve_secrets(&names, env).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].0, "HF_TOKEN");
        assert_eq!(got[0].1.expose(), "hf_very_secret");
        assert_eq!(got[1].1.expose(), "");
    }

    #[test]
    fn missing_names_are_listed_and_values_never_shown() {
        let names = vec!["HF_TOKEN".to_string(), "WANDB_KEY".into(), "AWS_SECRET".into()];
        let err = resolve_secrets(&names, env).unwrap_err();
        assert_eq!(err.names, vec!["WANDB_KEY", "AWS_SECRET"]);
        let msg = err.to_string();
        assert!(msg.contains("WANDB_KEY, AWS_SECRET"), "{msg}");
        assert!(msg.contains("export them"), "{msg}");
        assert!(!msg.contains("hf_very_secret"));
        assert!(!format!("{err:?}").contains("hf_very_secret"));
    }
}

/// Where a job on a shared filesystem finds its secrets: `secrets.env` in
/// its attempt directory, written 0600 by the engine and removed by the
/// job's first line ([`source_and_remove`]), so no engine API, listing,
/// batch script or log ever carries a value (Slurm keeps a job's
/// environment in its state directory; Ray logs `runtime_env`). The values
/// are then only in the workload's own process environment.
pub const SECRET_FILE: &str = "secrets.env";

/// Writes `secrets` to `dir/secrets.env` (0600, created fresh) as
/// `export NAME='value'` lines; `None` when there are none.
pub fn write_secret_file(
    dir: &std::path::Path,
    secrets: &[(String, SecretValue)],
) -> std::io::Result<Option<std::path::PathBuf>> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    if secrets.is_empty() {
        return Ok(None);
    }
    let path = secret_file(dir);
    let _ = std::fs::remove_file(&path);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    let mut text = String::new();
    for (name, value) in secrets {
        text.push_str(&format!("export {name}='{}'\n", value.expose().replace('\'', r"'\''")));
    }
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    Ok(Some(path))
}

/// The shell that loads and removes the secret file before anything else
/// runs; `quoted_path` is already quoted for `/bin/sh`.
pub fn source_and_remove(quoted_path: &str) -> String {
    format!("if [ -f {quoted_path} ]; then . {quoted_path}; rm -f {quoted_path}; fi")
}

/// The secret file of the attempt directory `dir`.
pub fn secret_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(SECRET_FILE)
}

/// Removes the secret file of `token`'s directory under `jobs_dir`: a job
/// stopped before it started never read (and so never removed) it.
pub fn remove_unread(jobs_dir: &std::path::Path, token: &str) {
    if crate::providers::local::layout::valid_token(token) {
        let _ = std::fs::remove_file(secret_file(&jobs_dir.join(token)));
    }
}

#[cfg(test)]
mod file_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_secret_file_is_private_and_sourced_once() {
        let t = tempfile::tempdir().unwrap();
        let secrets = vec![("HF_TOKEN".to_string(), SecretValue::new("a'b c$d"))];
        let path = write_secret_file(t.path(), &secrets).unwrap().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let q = format!("'{}'", path.display());
        let out = std::process::Command::new("sh")
            .args(["-c", &format!("{}; printf '%s' \"$HF_TOKEN\"", source_and_remove(&q))])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a'b c$d");
        assert!(!path.exists(), "removed once read");
        assert_eq!(write_secret_file(t.path(), &[]).unwrap(), None);
    }
}
