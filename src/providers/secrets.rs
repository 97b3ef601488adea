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
