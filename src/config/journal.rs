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
    /// How long the leader's lease lasts without renewal (`"15s"` when
    /// unset; at least 3s): a standby takes over within about this long
    /// after the leader dies or freezes. Renewals, and a standby's tries,
    /// come every third of it.
    #[serde(default)]
    pub lease_term: Option<String>,
}

impl JournalEntry {
    /// Checks the table when the file is read: a PostgreSQL URL, and no
    /// password written in it.
    pub fn check(&self) -> Result<(), String> {
        if let Some(t) = &self.lease_term {
            let d = crate::units::parse_duration(t)
                .map_err(|e| format!("[journal] lease_term {t:?}: {e}; write a duration such as \"15s\""))?;
            if d < crate::journal::MIN_LEASE_TERM {
                return Err(format!(
                    "[journal] lease_term {t:?} is shorter than 3s: renewals would not keep up; give 3s or more"
                ));
            }
            if self.url.is_none() {
                return Err("[journal] lease_term is set without a url; a SQLite journal has no lease".into());
            }
        }
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

    /// The lease's term: `lease_term`, else [`crate::journal::LEASE_TERM`]
    /// (checked when the file was read).
    pub fn lease_term(&self) -> std::time::Duration {
        self.lease_term
            .as_deref()
            .and_then(|t| crate::units::parse_duration(t).ok())
            .map_or(crate::journal::LEASE_TERM, |d| d.max(crate::journal::MIN_LEASE_TERM))
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
        let inline = JournalEntry {
            url: Some("postgres://canopy:s3cret@db/canopy".into()),
            password_env: None,
            lease_term: None,
        };
        let err = inline.check().unwrap_err();
        assert!(err.contains("CANOPY_JOURNAL_PASSWORD") && !err.contains("s3cret"), "{err}");
        let mysql =
            JournalEntry { url: Some("mysql://db/canopy".into()), password_env: None, lease_term: None };
        assert!(mysql.check().unwrap_err().contains("not a PostgreSQL URL"));
        let orphan = JournalEntry { url: None, password_env: Some("X".into()), lease_term: None };
        assert!(orphan.check().unwrap_err().contains("without a url"));
    }

    #[test]
    fn the_lease_term_is_read_and_too_short_a_term_refused() {
        let url = "url = \"postgres://canopy@db/canopy\"\n";
        let e: JournalEntry = toml::from_str(&format!("{url}lease_term = \"4s\"")).unwrap();
        e.check().unwrap();
        assert_eq!(e.lease_term(), std::time::Duration::from_secs(4));
        let e: JournalEntry = toml::from_str(url).unwrap();
        assert_eq!(e.lease_term(), crate::journal::LEASE_TERM);
        let short: JournalEntry = toml::from_str(&format!("{url}lease_term = \"1s\"")).unwrap();
        assert!(short.check().unwrap_err().contains("shorter than 3s"));
        let bad: JournalEntry = toml::from_str(&format!("{url}lease_term = \"soon\"")).unwrap();
        assert!(bad.check().unwrap_err().contains("lease_term"));
        let sqlite: JournalEntry = toml::from_str("lease_term = \"5s\"").unwrap();
        assert!(sqlite.check().unwrap_err().contains("without a url"));
    }
}
