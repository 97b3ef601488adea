//! API tokens: who may call the service, as salted hashes. The journal
//! stores and reads rows; making secrets and checking them is the
//! server's job (`server::auth`). A token's secret never reaches the store.

use super::codec::opt_millis;
use super::db::Exec;
use super::{Journal, JournalError, failed};
use crate::engine::model::{AuditRecord, Millis, Record};
use rusqlite::params;
use serde::{Deserialize, Serialize};

/// One token as stored: no secret, only `sha256(salt || secret)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRow {
    /// The public part of the token, which finds its row.
    pub id: String,
    pub name: String,
    /// `viewer`, `submitter`, `operator` or `admin`.
    pub role: String,
    /// `provider=NAME` or `pool=PROVIDER/POOL`; empty for no limit.
    pub scopes: Vec<String>,
    #[serde(skip_serializing)]
    pub salt: String,
    #[serde(skip_serializing)]
    pub hash: String,
    pub created_at: Millis,
    pub created_by: String,
    pub expires_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
    /// The tenant it belongs to; `None` for tokens made before tenants
    /// (and for admins, who act across tenants).
    #[serde(default)]
    pub tenant: Option<String>,
}

impl Journal {
    /// Stores a new token and its audit record in one transaction. Fails
    /// when a live token already has this name.
    pub fn insert_token(&mut self, t: &TokenRow, audit: &AuditRecord) -> Result<u64, JournalError> {
        let scopes = serde_json::to_string(&t.scopes)
            .map_err(|e| JournalError::Invalid { what: "a token's scopes".into(), detail: e.to_string() })?;
        let records = [Record::Audit(Box::new(audit.clone()))];
        let (seq, _) = self.append_with(&records, "store a token", |tx| {
            tx.execute(
                "INSERT INTO tokens (id, name, role, scopes, salt, hash, created_at, created_by, expires_at, tenant) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    t.id,
                    t.name,
                    t.role,
                    scopes,
                    t.salt,
                    t.hash,
                    t.created_at.0,
                    t.created_by,
                    t.expires_at.map(|m| m.0),
                    t.tenant
                ],
            )
        })?;
        Ok(seq)
    }

    /// Revokes the live token named `name`. Returns whether there was one
    /// and the sequence number of the audit record's batch, which is
    /// written either way.
    pub fn revoke_token(
        &mut self,
        name: &str,
        now: Millis,
        audit: &AuditRecord,
    ) -> Result<(bool, u64), JournalError> {
        let records = [Record::Audit(Box::new(audit.clone()))];
        let (seq, n) = self.append_with(&records, "revoke a token", |tx| {
            tx.execute(
                "UPDATE tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL",
                params![name, now.0],
            )
        })?;
        Ok((n > 0, seq))
    }

    /// Every token, revoked ones too, oldest first.
    pub fn tokens(&self) -> Result<Vec<TokenRow>, JournalError> {
        let err = failed(&self.store, "read tokens");
        let sql = "SELECT id, name, role, scopes, salt, hash, created_at, created_by, expires_at, revoked_at, tenant \
                   FROM tokens ORDER BY created_at, id";
        self.conn
            .query_map(sql, &[], |r| {
                let scopes: String = r.get(3)?;
                Ok(TokenRow {
                    id: r.get(0)?,
                    name: r.get(1)?,
                    role: r.get(2)?,
                    scopes: serde_json::from_str(&scopes).map_err(|e| {
                        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, e.into())
                    })?,
                    salt: r.get(4)?,
                    hash: r.get(5)?,
                    created_at: Millis(r.get(6)?),
                    created_by: r.get(7)?,
                    expires_at: opt_millis(r, 8)?,
                    revoked_at: opt_millis(r, 9)?,
                    tenant: r.get(10)?,
                })
            })
            .map_err(&err)
    }
}
