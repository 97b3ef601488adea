//! How model values become column values and back.
//!
//! States, kinds and classes are stored as their `as_str()` names (the
//! same names serde uses, which a test checks), so the store reads well in
//! `sqlite3` and `psql`. Ids are 64-bit integers (i64; `BIGINT` on PostgreSQL).

use super::JournalError;
use super::db::Row;
use crate::engine::model::{Millis, WorkloadId};
use rusqlite::types::Type;
use serde::de::DeserializeOwned;
use serde::de::value::{Error as ValueError, StrDeserializer};

pub(super) fn id_to_sql(id: WorkloadId) -> Result<i64, JournalError> {
    i64::try_from(id.0).map_err(|_| JournalError::Invalid {
        what: format!("workload {id}"),
        detail: "its id is beyond the store's 63-bit range".into(),
    })
}

pub(super) fn id_from_sql(row: &Row, i: usize) -> rusqlite::Result<WorkloadId> {
    let v: i64 = row.get(i)?;
    u64::try_from(v).map(WorkloadId).map_err(|_| rusqlite::Error::IntegralValueOutOfRange(i, v))
}

pub(super) fn millis(row: &Row, i: usize) -> rusqlite::Result<Millis> {
    row.get(i).map(Millis)
}

pub(super) fn opt_millis(row: &Row, i: usize) -> rusqlite::Result<Option<Millis>> {
    row.get::<Option<i64>>(i).map(|v| v.map(Millis))
}

/// A unit enum from its serde name, e.g. `WorkloadState` from `"running"`.
pub(super) fn name<T: DeserializeOwned>(row: &Row, i: usize) -> rusqlite::Result<T> {
    let s = row.get_ref(i)?.as_str()?;
    parse_name(s).map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Text, e.into()))
}

pub(super) fn opt_name<T: DeserializeOwned>(row: &Row, i: usize) -> rusqlite::Result<Option<T>> {
    match row.get_ref(i)?.as_str_or_null()? {
        None => Ok(None),
        Some(s) => parse_name(s)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Text, e.into())),
    }
}

/// A JSON column, e.g. a spec.
pub(super) fn json<T: DeserializeOwned>(row: &Row, i: usize) -> rusqlite::Result<T> {
    let s = row.get_ref(i)?.as_str()?;
    serde_json::from_str(s).map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Text, e.into()))
}

/// A nullable JSON column.
pub(super) fn opt_json<T: DeserializeOwned>(row: &Row, i: usize) -> rusqlite::Result<Option<T>> {
    match row.get_ref(i)?.as_str_or_null()? {
        None => Ok(None),
        Some(s) => serde_json::from_str(s)
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, Type::Text, e.into())),
    }
}

pub(super) fn parse_name<T: DeserializeOwned>(s: &str) -> Result<T, ValueError> {
    T::deserialize(StrDeserializer::<ValueError>::new(s))
}

#[cfg(test)]
mod tests {
    use super::parse_name;
    use crate::engine::model::{AttemptState, EventKind, WorkloadState};
    use crate::failure::FailureClass;

    /// Every variant, by an exhaustive match: adding a variant breaks this
    /// until it is listed, so the round-trip test below covers it.
    fn workload_states() -> Vec<WorkloadState> {
        use WorkloadState::*;
        let all = vec![Queued, Placing, Launching, Running, Succeeded, Failed, Cancelled];
        for s in &all {
            match s {
                Queued | Placing | Launching | Running | Succeeded | Failed | Cancelled => {}
            }
        }
        all
    }

    fn attempt_states() -> Vec<AttemptState> {
        use AttemptState::*;
        let all = vec![Placing, Launching, Running, Terminating, Succeeded, Failed, Cancelled, Lost];
        for s in &all {
            match s {
                Placing | Launching | Running | Terminating | Succeeded | Failed | Cancelled | Lost => {}
            }
        }
        all
    }

    fn event_kinds() -> Vec<EventKind> {
        use EventKind::*;
        let all = vec![
            Submitted,
            Unschedulable,
            Placed,
            Launched,
            Adopted,
            Running,
            StatusUnreachable,
            Ended,
            Retry,
            Failed,
            Succeeded,
            CancelRequested,
            Cancelled,
            TerminateRequested,
            Lost,
            Reconciled,
            Outputs,
            Quarantined,
            Acknowledged,
            Checkpoint,
            Refused,
            Reclaim,
            Budget,
            Webhook,
        ];
        for k in &all {
            match k {
                Submitted | Unschedulable | Placed | Launched | Adopted | Running | StatusUnreachable
                | Ended | Retry | Failed | Succeeded | CancelRequested | Cancelled | TerminateRequested
                | Lost | Reconciled | Outputs | Quarantined | Acknowledged | Checkpoint | Refused
                | Reclaim | Budget | Webhook => {}
            }
        }
        all
    }

    #[test]
    fn stored_names_read_back_as_the_same_value() {
        for s in workload_states() {
            assert_eq!(parse_name::<WorkloadState>(s.as_str()).unwrap(), s);
        }
        for s in attempt_states() {
            assert_eq!(parse_name::<AttemptState>(s.as_str()).unwrap(), s);
        }
        for k in event_kinds() {
            assert_eq!(parse_name::<EventKind>(k.as_str()).unwrap(), k);
        }
        for c in FailureClass::ALL {
            assert_eq!(parse_name::<FailureClass>(c.as_str()).unwrap(), c);
        }
        assert!(parse_name::<WorkloadState>("exploded").is_err());
    }
}
