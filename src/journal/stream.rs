//! Reading commits back as numbered batches (what the API's event stream
//! resumes from) and the audit trail.

use super::codec::millis;
use super::db::{DbError, Exec};
use super::{Journal, JournalError, failed};
use crate::engine::model::{AuditRecord, Batch, Millis, Record};
use rusqlite::params;

/// How many of the newest batches the store keeps for clients that resume
/// the event stream; a client further behind reloads (resync).
pub const BATCHES_KEPT: u64 = 20_000;

/// Which audit records [`Journal::audit`] lists.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    /// At or after this.
    pub since: Option<Millis>,
    /// Of this principal.
    pub principal: Option<String>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
    /// Whose action starts with this, ignoring ASCII case (`cord`:
    /// cordons).
    pub action: Option<String>,
    /// Whose outcome starts with this, ignoring ASCII case (`denied`).
    pub outcome: Option<String>,
    /// Whose target starts with this, ignoring ASCII case.
    pub target: Option<String>,
    /// At or before this: the cursor of the next older page (records of
    /// the cursor's millisecond come again; a reader drops those it has).
    pub until: Option<Millis>,
}

impl Journal {
    /// Up to `limit` batches committed after `after`, oldest first.
    pub fn batches_since(&self, after: u64, limit: usize) -> Result<Vec<Batch>, JournalError> {
        let err = failed(&self.store, "read batches");
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(i64, String)> = self
            .conn
            .query_map(
                "SELECT seq, records FROM batches WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                params![after, limit],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(&err)?;
        rows.into_iter()
            .map(|(seq, json)| {
                let records: Vec<Record> = serde_json::from_str(&json).map_err(|e| {
                    err(DbError::Sqlite(rusqlite::Error::FromSqlConversionFailure(
                        1,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )))
                })?;
                Ok(Batch { seq: u64::try_from(seq).unwrap_or(0), records })
            })
            .collect()
    }

    /// The oldest batch still kept and the newest; `(0, 0)` in a new store.
    pub fn batch_range(&self) -> Result<(u64, u64), JournalError> {
        let (lo, hi): (Option<i64>, Option<i64>) = self
            .conn
            .query_one("SELECT min(seq), max(seq) FROM batches", &[], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(failed(&self.store, "read batches"))?;
        let u = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0);
        Ok((u(lo), u(hi)))
    }

    /// The audit trail, newest first.
    pub fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, JournalError> {
        Ok(self.audit_before(filter, None)?.into_iter().map(|(_, a)| a).collect())
    }

    /// The audit trail, newest first, from before the record numbered
    /// `before` (all when `None`), each with its number: a reader that
    /// keeps only some records (a tenant's share) continues from the last
    /// number it was given until its page is full.
    pub fn audit_before(
        &self,
        filter: &AuditFilter,
        before: Option<i64>,
    ) -> Result<Vec<(i64, AuditRecord)>, JournalError> {
        let err = failed(&self.store, "read the audit trail");
        let limit = filter.limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        // A prefix test without LIKE, whose `%` and `_` a value may hold.
        // The casts name the parameters' type for PostgreSQL.
        let sql = "SELECT seq, at, principal, origin, action, target, outcome, reason FROM audit \
                   WHERE at >= ?1 AND at <= ?4 AND seq < ?8 AND (CAST(?2 AS TEXT) IS NULL OR principal = ?2) \
                   AND (CAST(?5 AS TEXT) IS NULL OR lower(substr(action, 1, length(CAST(?5 AS TEXT)))) = lower(?5)) \
                   AND (CAST(?6 AS TEXT) IS NULL OR lower(substr(outcome, 1, length(CAST(?6 AS TEXT)))) = lower(?6)) \
                   AND (CAST(?7 AS TEXT) IS NULL \
                        OR lower(substr(coalesce(target, ''), 1, length(CAST(?7 AS TEXT)))) = lower(?7)) \
                   ORDER BY seq DESC LIMIT ?3";
        let since = filter.since.map_or(i64::MIN, |m| m.0);
        let until = filter.until.map_or(i64::MAX, |m| m.0);
        let before = before.unwrap_or(i64::MAX);
        let args = params![
            since,
            filter.principal,
            limit,
            until,
            filter.action,
            filter.outcome,
            filter.target,
            before
        ];
        self.conn
            .query_map(sql, args, |r| {
                let record = AuditRecord {
                    at: millis(r, 1)?,
                    principal: r.get(2)?,
                    origin: r.get(3)?,
                    action: r.get(4)?,
                    target: r.get(5)?,
                    outcome: r.get(6)?,
                    reason: r.get(7)?,
                };
                Ok((r.get(0)?, record))
            })
            .map_err(&err)
    }
}

impl Journal {
    /// How many workloads are in each state.
    pub fn count_by_state(&self) -> Result<Vec<(String, u64)>, JournalError> {
        self.counts("SELECT state, count(*) FROM workloads GROUP BY state ORDER BY state")
    }

    /// How many ended attempts each failure class has (`none` for successes).
    pub fn attempts_by_class(&self) -> Result<Vec<(String, u64)>, JournalError> {
        self.counts(
            "SELECT coalesce(class, 'none'), count(*) FROM attempts WHERE ended_at IS NOT NULL \
             GROUP BY 1 ORDER BY 1",
        )
    }

    fn counts(&self, sql: &str) -> Result<Vec<(String, u64)>, JournalError> {
        let err = failed(&self.store, "count rows");
        self.conn
            .query_map(sql, &[], |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?.max(0) as u64)))
            .map_err(&err)
    }
}
