//! `[journal]`: where the journal lives. Absent, it is the SQLite file in
//! Canopy's home (the embedded default). `url = "postgres://USER@HOST:PORT/DB"`
//! puts it on PostgreSQL, with the password read from the environment
//! variable `password_env` names (default `CANOPY_JOURNAL_PASSWORD`), never
//! from the file.

use crate::journal::{Location, shown_url};
use serde::Deserialize;
use std::path::Path;

/// The variable the PostgreSQL password is read from unless
/// `password_env` says otherwise.
pub const PASSWORD_ENV: &str = "CANOPY_JOURNAL_PASSWORD";

/// The `[journal]` table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalEntry {
    /// `postgres://USER@HOST:PORT/DATABASE`; none: the SQLite file.
    #[serde(default)]
    pub url: Option<String>,
    /// The environment variable holding the password (default
    /// `CANOPY_JOURNAL_PASSWORD`); unset means no password (trust or peer
    /// authentication on the server's side).
    #[serde(default)]
    pub password_env: Option<String>,
}

impl JournalEntry {
    /// Checks the table when the file is read: a PostgreSQL URL, and no
    /// password written in it.
    pub fn check(&self) -> Result<(), String> {
        let Some(url) = &self.url else {
            return match &self.password_env {
                Some(_) => Err("[journal] password_env is set without a url; add url = \"postgres://USER@HOST:PORT/DATABASE\" or remove it".into()),
                None => Ok(()),
            };
        };
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(format!(
                "[journal] url {} is not a PostgreSQL URL; write postgres://USER@HOST:PORT/DATABASE (the SQLite journal needs no url)",
                shown_url(url)
            ));
        }
        if shown_url(url) != *url {
            return Err(format!(
                "[journal] url holds a password; remove it from the file ({}) and put it in the environment variable {} instead",
                shown_url(url),
                self.password_env.as_deref().unwrap_or(PASSWORD_ENV)
            ));
        }
        Ok(())
    }

    /// Where the journal is: `store` (the SQLite file) without a url, else
    /// PostgreSQL with the password from `env`.
    pub fn location(&self, store: &Path, env: impl Fn(&str) -> Option<String>) -> Location {
        match &self.url {
            None => Location::File(store.to_path_buf()),
            Some(url) => Location::Postgres {
                url: url.clone(),
                password: env(self.password_env.as_deref().unwrap_or(PASSWORD_ENV)).filter(|p| !p.is_empty()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_takes_its_password_from_the_named_variable_only() {
        let entry: JournalEntry =
            toml::from_str("url = \"postgres://canopy@db:5432/canopy\"\npassword_env = \"PGPW\"").unwrap();
        entry.check().unwrap();
        let at = entry.location(Path::new("/h/canopy.db"), |k| (k == "PGPW").then(|| "s3cret".into()));
        assert_eq!(
            at,
            Location::Postgres {
                url: "postgres://canopy@db:5432/canopy".into(),
                password: Some("s3cret".into())
            }
        );
        assert!(!format!("{at:?}").contains("s3cret"));
        let default = JournalEntry::default();
        assert_eq!(
            default.location(Path::new("/h/canopy.db"), |_| None),
            Location::File("/h/canopy.db".into())
        );
    }

    #[test]
    fn a_password_in_the_file_or_a_foreign_url_is_refused_without_showing_it() {
        let inline =
            JournalEntry { url: Some("postgres://canopy:s3cret@db/canopy".into()), password_env: None };
        let err = inline.check().unwrap_err();
        assert!(err.contains("CANOPY_JOURNAL_PASSWORD") && !err.contains("s3cret"), "{err}");
        let mysql = JournalEntry { url: Some("mysql://db/canopy".into()), password_env: None };
        assert!(mysql.check().unwrap_err().contains("not a PostgreSQL URL"));
        let orphan = JournalEntry { url: None, password_env: Some("X".into()) };
        assert!(orphan.check().unwrap_err().contains("without a url"));
    }
}
