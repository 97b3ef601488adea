//! The webhook outbox read back: deliveries still pending (what the core
//! resumes after a restart) and a workload's deliveries (what its events
//! and the API show). Written by [`super::write`] with the rest of a
//! commit.

use super::codec::{millis, opt_millis};
use super::db::{Exec, Row};
use super::{Journal, JournalError, failed};
use crate::engine::model::{DeliveryRecord, DeliveryState, WorkloadId};

const COLUMNS: &str = "id, workload, event, url, body, created_at, state, tries, next_at, last";

fn row(r: &Row) -> rusqlite::Result<DeliveryRecord> {
    let state: String = r.get(6)?;
    Ok(DeliveryRecord {
        id: r.get::<i64>(0)?.try_into().unwrap_or(0),
        workload: WorkloadId(r.get::<i64>(1)?.try_into().unwrap_or(0)),
        event: r.get(2)?,
        url: r.get(3)?,
        body: r.get(4)?,
        created_at: millis(r, 5)?,
        state: DeliveryState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                6,
                rusqlite::types::Type::Text,
                format!("unknown delivery state {state:?}").into(),
            )
        })?,
        tries: r.get(7)?,
        next_at: opt_millis(r, 8)?,
        last: r.get(9)?,
    })
}

impl Journal {
    /// Every delivery not yet delivered or given up, oldest first.
    pub fn pending_deliveries(&self) -> Result<Vec<DeliveryRecord>, JournalError> {
        let err = failed(&self.store, "read pending deliveries");
        self.conn
            .query_map(
                &format!("SELECT {COLUMNS} FROM deliveries WHERE state = 'pending' ORDER BY id"),
                &[],
                row,
            )
            .map_err(&err)
    }

    /// A workload's deliveries, oldest first.
    pub fn deliveries(&self, id: WorkloadId) -> Result<Vec<DeliveryRecord>, JournalError> {
        let err = failed(&self.store, "read deliveries");
        let id = i64::try_from(id.0).unwrap_or(i64::MAX);
        self.conn
            .query_map(
                &format!("SELECT {COLUMNS} FROM deliveries WHERE workload = ?1 ORDER BY id"),
                &[&id],
                row,
            )
            .map_err(&err)
    }

    /// The highest delivery id used, 0 in a new store (ids are never
    /// reused, so a receiver's duplicate check holds across restarts).
    pub fn last_delivery_id(&self) -> Result<u64, JournalError> {
        let id: Option<i64> = self
            .conn
            .query_one("SELECT max(id) FROM deliveries", &[], |r| r.get(0))
            .map_err(failed(&self.store, "read deliveries"))?;
        Ok(id.and_then(|i| u64::try_from(i).ok()).unwrap_or(0))
    }
}
