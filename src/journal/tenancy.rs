//! The tenancy in force: one row holding the tenant and flavor tables as
//! last set (by canopy.toml or an admin), who set them and when, and the
//! canopy.toml tables they were last seeded from. The journal stores and
//! reads it; which version wins at start is the caller's rule.

use super::db::Exec;
use super::{Journal, JournalError, failed};
use crate::engine::model::{AuditRecord, Millis, Record};
use rusqlite::params;

/// The stored tenancy row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenancyRow {
    /// The tables in force, as JSON (`crate::tenant::TenancyDoc`).
    pub document: String,
    /// The canopy.toml tables (JSON) that were last applied from the file.
    pub seeded_from: String,
    pub set_by: String,
    pub set_at: Millis,
}

impl Journal {
    /// Replaces the tenancy in force, with its audit record, in one
    /// transaction.
    pub fn set_tenancy(&mut self, row: &TenancyRow, audit: &AuditRecord) -> Result<u64, JournalError> {
        let records = [Record::Audit(Box::new(audit.clone()))];
        let (seq, _) = self.append_with(&records, "store the tenancy", |tx| {
            tx.execute(
                "INSERT INTO tenancy (id, document, seeded_from, set_by, set_at) VALUES (1, ?1, ?2, ?3, ?4) \
                 ON CONFLICT (id) DO UPDATE SET document = excluded.document, \
                 seeded_from = excluded.seeded_from, set_by = excluded.set_by, set_at = excluded.set_at",
                params![row.document, row.seeded_from, row.set_by, row.set_at.0],
            )
        })?;
        Ok(seq)
    }

    /// The tenancy in force, if one was ever stored.
    pub fn tenancy(&self) -> Result<Option<TenancyRow>, JournalError> {
        self.conn
            .query_opt("SELECT document, seeded_from, set_by, set_at FROM tenancy WHERE id = 1", &[], |r| {
                Ok(TenancyRow {
                    document: r.get(0)?,
                    seeded_from: r.get(1)?,
                    set_by: r.get(2)?,
                    set_at: Millis(r.get(3)?),
                })
            })
            .map_err(failed(&self.store, "read the tenancy"))
    }
}
