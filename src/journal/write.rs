//! Appending the engine core's records: one transaction per call.

use super::codec::id_to_sql;
use super::db::{DbError, Dialect, Exec, Tx, value_of};
use super::{Journal, JournalError, failed};
use crate::engine::model::{AttemptRecord, EventRecord, HealthObservation, Record, WorkloadRecord};
use rusqlite::params;
use rusqlite::types::Value;
use std::collections::HashMap;
use std::sync::LazyLock;

/// A row's values, in the order of its statement's parameters.
macro_rules! row {
    ($($v:expr),* $(,)?) => {
        vec![$(value_of(&$v)?),*]
    };
}

const UPSERT_WORKLOAD: &str = "
    INSERT INTO workloads (id, name, state, live, priority, submitted_at, updated_at, attempts,
        app_failures, not_before, cost_usd, est_cost_usd, reason, class, idempotency_key, spec_hash, spec,
        submitted_by, acknowledged, exclusions, tenant)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)
    ON CONFLICT (id) DO UPDATE SET
        name = excluded.name, state = excluded.state, live = excluded.live,
        priority = excluded.priority, submitted_at = excluded.submitted_at,
        updated_at = excluded.updated_at, attempts = excluded.attempts,
        app_failures = excluded.app_failures, not_before = excluded.not_before,
        cost_usd = excluded.cost_usd, est_cost_usd = excluded.est_cost_usd,
        reason = excluded.reason, class = excluded.class,
        idempotency_key = excluded.idempotency_key, spec_hash = excluded.spec_hash,
        spec = excluded.spec, submitted_by = excluded.submitted_by,
        acknowledged = excluded.acknowledged, exclusions = excluded.exclusions, tenant = excluded.tenant";

const UPSERT_ATTEMPT: &str = "
    INSERT INTO attempts (workload, n, provider, pool, node, region, state, price_per_hour,
        est_cost_usd, gpus, gpu_memory_gb, score, score_breakdown, placed_at, started_at, ended_at,
        exit_code, class, rule, evidence, cost_usd, provider_ref, nonce, stop, nodes, checkpoint)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
        ?20, ?21, ?22, ?23, ?24, ?25, ?26)
    ON CONFLICT (workload, n) DO UPDATE SET
        provider = excluded.provider, pool = excluded.pool, node = excluded.node,
        region = excluded.region, state = excluded.state,
        price_per_hour = excluded.price_per_hour, est_cost_usd = excluded.est_cost_usd,
        gpus = excluded.gpus, gpu_memory_gb = excluded.gpu_memory_gb, score = excluded.score,
        score_breakdown = excluded.score_breakdown, placed_at = excluded.placed_at,
        started_at = excluded.started_at, ended_at = excluded.ended_at,
        exit_code = excluded.exit_code, class = excluded.class, rule = excluded.rule,
        evidence = excluded.evidence, cost_usd = excluded.cost_usd,
        provider_ref = excluded.provider_ref, nonce = excluded.nonce, stop = excluded.stop,
        nodes = excluded.nodes, checkpoint = excluded.checkpoint";

const INSERT_EVENT: &str =
    "INSERT INTO events (at, workload, attempt, kind, message) VALUES (?1, ?2, ?3, ?4, ?5)";

const INSERT_AUDIT: &str = "INSERT INTO audit (at, principal, origin, action, target, outcome, reason) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// `RETURNING` gives the new row's number on both stores (SQLite's rowid,
/// PostgreSQL's identity column).
const INSERT_BATCH: &str = "INSERT INTO batches (at, records) VALUES (?1, ?2) RETURNING seq";

/// Batches kept for clients resuming the event stream; older ones are
/// pruned every [`PRUNE_EVERY`] commits.
const PRUNE_EVERY: u64 = 256;

const INSERT_HEALTH: &str = "INSERT INTO health_observations (at, provider, pool, node, class, ran_s, lift, free) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// Kept apart from the rows so the highest id ever assigned survives even
/// if old workloads are one day pruned.
const RAISE_MAX_ID: &str = "
    INSERT INTO meta (key, value) VALUES ('max_workload_id', ?1)
    ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)";

/// The same on PostgreSQL, whose meta values are text.
const RAISE_MAX_ID_PG: &str = "
    INSERT INTO meta (key, value) VALUES ('max_workload_id', ?1)
    ON CONFLICT (key) DO UPDATE
    SET value = CAST(GREATEST(CAST(meta.value AS BIGINT), CAST(excluded.value AS BIGINT)) AS TEXT)";

impl Journal {
    /// Makes `records` durable in one transaction: all or none.
    ///
    /// Workload and attempt records replace the current row with the same
    /// id (last write wins); events, health observations and audit records
    /// are appended in the order given. The batch as a whole is kept under
    /// a new sequence number, which is returned once the transaction is
    /// committed (and, on the engine's connection, fsync'd). An empty batch
    /// writes nothing and returns 0.
    pub fn append(&mut self, records: &[Record]) -> Result<u64, JournalError> {
        self.append_at(records, None)
    }

    /// [`append`](Self::append), stamping the batch row with `at` (the
    /// time of its newest record when `None`).
    pub fn append_at(&mut self, records: &[Record], at: Option<i64>) -> Result<u64, JournalError> {
        if records.is_empty() {
            return Ok(0);
        }
        let batch_json = serde_json::to_string(records).map_err(|e| JournalError::Invalid {
            what: "a batch of records".into(),
            detail: e.to_string(),
        })?;
        let at = at.unwrap_or_else(|| records.iter().map(record_time).max().unwrap_or(0));
        let store = self.store.as_str();
        let err = failed(store, "append records");
        // An error inside rolls the batch back.
        self.conn.write(|tx| write_batch(tx, store, records, &batch_json, at)).map_err(|e| match e {
            Failed::Db(e) => err(e),
            Failed::Journal(e) => e,
        })
    }

    /// Runs `change` and appends `records` in one transaction: for changes
    /// outside the records (tokens) that must commit with their audit.
    /// Returns the batch's sequence number and what `change` returned.
    pub(super) fn append_with<T>(
        &mut self,
        records: &[Record],
        action: &'static str,
        change: impl FnOnce(&Tx<'_>) -> Result<T, DbError>,
    ) -> Result<(u64, T), JournalError> {
        let batch_json = serde_json::to_string(records).map_err(|e| JournalError::Invalid {
            what: "a batch of records".into(),
            detail: e.to_string(),
        })?;
        let at = records.iter().map(record_time).max().unwrap_or(0);
        let store = self.store.as_str();
        let err = failed(store, action);
        self.conn
            .write(|tx| {
                let out = change(tx)?;
                let seq =
                    if records.is_empty() { 0 } else { write_batch(tx, store, records, &batch_json, at)? };
                Ok((seq, out))
            })
            .map_err(|e| match e {
                Failed::Db(e) => err(e),
                Failed::Journal(e) => e,
            })
    }
}

/// Why a write transaction failed: the store, or the records themselves.
pub(super) enum Failed {
    Db(DbError),
    Journal(JournalError),
}

impl From<DbError> for Failed {
    fn from(e: DbError) -> Failed {
        Failed::Db(e)
    }
}

impl From<JournalError> for Failed {
    fn from(e: JournalError) -> Failed {
        Failed::Journal(e)
    }
}

/// Writes one batch inside `tx` (the caller commits) and returns its
/// sequence number.
///
/// The rows of each table are gathered first and written together (see
/// [`Tx::execute_rows`]): on PostgreSQL one statement per table, whatever
/// the batch's size. A workload or attempt that appears more than once
/// is written once, as its last record (the same row the records written
/// one by one would leave).
pub(super) fn write_batch(
    tx: &Tx<'_>,
    store: &str,
    records: &[Record],
    batch_json: &str,
    at: i64,
) -> Result<u64, Failed> {
    let err = failed(store, "append records");
    let mut rows = Rows::default();
    for record in records {
        match record {
            Record::Workload(w) => rows.workload(w)?,
            Record::Attempt(a) => rows.attempt(a)?,
            Record::Event(e) => rows.events.push(event_row(e)?),
            Record::Health(h) => rows.health.push(health_row(h)?),
            Record::NodeIntent { node, intent: None } => {
                tx.execute("DELETE FROM node_intents WHERE node = ?1", &[node]).map_err(&err)?;
            }
            Record::NodeIntent { node, intent: Some(i) } => {
                tx.execute(
                    "INSERT INTO node_intents (node, state, by, reason, at, until) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (node) DO UPDATE SET state = excluded.state, by = excluded.by, \
                     reason = excluded.reason, at = excluded.at, until = excluded.until",
                    params![node, i.state.as_str(), i.by, i.reason, i.at.0, i.until.map(|u| u.0)],
                )
                .map_err(&err)?;
            }
            Record::Delivery(d) => {
                tx.execute(
                    "INSERT INTO deliveries (id, workload, event, url, body, created_at, state, tries, next_at, last) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                     ON CONFLICT (id) DO UPDATE SET state = excluded.state, tries = excluded.tries, \
                     next_at = excluded.next_at, last = excluded.last",
                    params![
                        i64::try_from(d.id).unwrap_or(i64::MAX),
                        i64::try_from(d.workload.0).unwrap_or(i64::MAX),
                        d.event,
                        d.url,
                        d.body,
                        d.created_at.0,
                        d.state.as_str(),
                        d.tries,
                        d.next_at.map(|t| t.0),
                        d.last
                    ],
                )
                .map_err(&err)?;
            }
            Record::Audit(a) => {
                rows.audit.push(row![a.at.0, a.principal, a.origin, a.action, a.target, a.outcome, a.reason])
            }
        }
    }
    let max_id = rows.max_id;
    rows.write(tx).map_err(&err)?;
    if let Some(id) = max_id {
        let raise = match tx.dialect() {
            Dialect::Sqlite => RAISE_MAX_ID,
            Dialect::Postgres => RAISE_MAX_ID_PG,
        };
        tx.execute(raise, &[&id]).map_err(&err)?;
    }
    let seq: i64 = tx.query_one(INSERT_BATCH, params![at, batch_json], |r| r.get(0)).map_err(&err)?;
    let seq = u64::try_from(seq).unwrap_or(0);
    if seq.is_multiple_of(PRUNE_EVERY) {
        let keep_from = seq.saturating_sub(super::BATCHES_KEPT) as i64;
        tx.execute("DELETE FROM batches WHERE seq < ?1", &[&keep_from]).map_err(&err)?;
    }
    Ok(seq)
}

/// A batch's rows, by table, in the records' order.
#[derive(Default)]
struct Rows {
    workloads: Vec<Vec<Value>>,
    /// Where each workload's row is in `workloads`.
    workload_at: HashMap<i64, usize>,
    attempts: Vec<Vec<Value>>,
    attempt_at: HashMap<(i64, u32), usize>,
    events: Vec<Vec<Value>>,
    health: Vec<Vec<Value>>,
    audit: Vec<Vec<Value>>,
    max_id: Option<i64>,
}

impl Rows {
    fn workload(&mut self, w: &WorkloadRecord) -> Result<(), Failed> {
        let (id, row) = workload_row(w)?;
        self.max_id = self.max_id.max(Some(id));
        match self.workload_at.get(&id) {
            Some(&i) => self.workloads[i] = row,
            None => {
                self.workload_at.insert(id, self.workloads.len());
                self.workloads.push(row);
            }
        }
        Ok(())
    }

    fn attempt(&mut self, a: &AttemptRecord) -> Result<(), Failed> {
        let key = (id_to_sql(a.id.workload)?, a.id.n);
        let row = attempt_row(a)?;
        match self.attempt_at.get(&key) {
            Some(&i) => self.attempts[i] = row,
            None => {
                self.attempt_at.insert(key, self.attempts.len());
                self.attempts.push(row);
            }
        }
        Ok(())
    }

    /// One statement per table that has rows (PostgreSQL), or one per row
    /// (SQLite).
    fn write(self, tx: &Tx<'_>) -> Result<(), DbError> {
        let tables = [
            (UPSERT_WORKLOAD, &*UPSERT_WORKLOADS_PG, self.workloads),
            (UPSERT_ATTEMPT, &*UPSERT_ATTEMPTS_PG, self.attempts),
            (INSERT_EVENT, &*INSERT_EVENTS_PG, self.events),
            (INSERT_HEALTH, &*INSERT_HEALTH_PG, self.health),
            (INSERT_AUDIT, &*INSERT_AUDIT_PG, self.audit),
        ];
        for (one, many, rows) in tables {
            if !rows.is_empty() {
                tx.execute_rows(one, many, rows)?;
            }
        }
        Ok(())
    }
}

/// `one` (a single-row `INSERT … VALUES (?1, …) [ON CONFLICT …]`) as a
/// PostgreSQL statement inserting many rows: each parameter an array of
/// the column's PostgreSQL type (`types`, in the order of the columns),
/// unnested in order (`WITH ORDINALITY`, so identity columns number the
/// rows as the one-by-one inserts would).
pub(super) fn unnest_of(one: &str, types: &[&str]) -> String {
    let (head, rest) = one.split_once("VALUES").unwrap_or((one, ""));
    let tail = rest.find("ON CONFLICT").map_or("", |i| &rest[i..]);
    let names: Vec<String> = (1..=types.len()).map(|i| format!("c{i}")).collect();
    let arrays: Vec<String> = types.iter().enumerate().map(|(i, t)| format!("${}::{t}[]", i + 1)).collect();
    format!(
        "{} SELECT {} FROM unnest({}) WITH ORDINALITY AS u({}, o) ORDER BY o {}",
        head.trim_end(),
        names.join(", "),
        arrays.join(", "),
        names.join(", "),
        tail.trim()
    )
}

const B: &str = "BIGINT";
const T: &str = "TEXT";
const F: &str = "DOUBLE PRECISION";

static UPSERT_WORKLOADS_PG: LazyLock<String> = LazyLock::new(|| {
    unnest_of(UPSERT_WORKLOAD, &[B, T, T, B, B, B, B, B, B, B, F, F, T, T, T, T, T, T, T, T, T])
});
static UPSERT_ATTEMPTS_PG: LazyLock<String> = LazyLock::new(|| {
    unnest_of(UPSERT_ATTEMPT, &[B, B, T, T, T, T, T, F, F, B, F, F, T, B, B, B, B, T, T, T, F, T, T, T, T, T])
});
static INSERT_EVENTS_PG: LazyLock<String> = LazyLock::new(|| unnest_of(INSERT_EVENT, &[B, B, B, T, T]));
static INSERT_HEALTH_PG: LazyLock<String> =
    LazyLock::new(|| unnest_of(INSERT_HEALTH, &[B, T, T, T, T, F, B, B]));
static INSERT_AUDIT_PG: LazyLock<String> = LazyLock::new(|| unnest_of(INSERT_AUDIT, &[B, T, T, T, T, T, T]));

/// When a record happened, for the batch's row.
fn record_time(r: &Record) -> i64 {
    match r {
        Record::Workload(w) => w.updated_at.0,
        Record::Attempt(a) => a.ended_at.or(a.started_at).unwrap_or(a.placed_at).0,
        Record::Event(e) => e.at.0,
        Record::Health(h) => h.at.0,
        Record::Audit(a) => a.at.0,
        Record::NodeIntent { intent, .. } => intent.as_ref().map_or(0, |i| i.at.0),
        Record::Delivery(d) => d.created_at.0,
    }
}

fn workload_row(w: &WorkloadRecord) -> Result<(i64, Vec<Value>), Failed> {
    let id = id_to_sql(w.id)?;
    let spec = serde_json::to_string(&w.spec).map_err(|e| JournalError::Invalid {
        what: format!("the spec of {}", w.id),
        detail: e.to_string(),
    })?;
    let acknowledged = w.acknowledged.as_ref().map(serde_json::to_string).transpose().map_err(|e| {
        JournalError::Invalid { what: format!("the acknowledgement of {}", w.id), detail: e.to_string() }
    })?;
    let exclusions = w.exclusions.as_ref().map(serde_json::to_string).transpose().map_err(|e| {
        JournalError::Invalid { what: format!("the exclusions of {}", w.id), detail: e.to_string() }
    })?;
    let row = row![
        id,
        w.name,
        w.state.as_str(),
        !w.state.is_final(),
        w.priority,
        w.submitted_at.0,
        w.updated_at.0,
        w.attempts,
        w.app_failures,
        w.not_before.map(|t| t.0),
        w.cost_usd,
        w.est_cost_usd,
        w.reason,
        w.class.map(|c| c.as_str()),
        w.idempotency_key,
        w.spec_hash,
        spec,
        w.submitted_by,
        acknowledged,
        exclusions,
        w.tenant,
    ];
    Ok((id, row))
}

fn attempt_row(a: &AttemptRecord) -> Result<Vec<Value>, Failed> {
    let workload = id_to_sql(a.id.workload)?;
    let stop = a.stop.as_ref().map(serde_json::to_string).transpose().map_err(|e| JournalError::Invalid {
        what: format!("the stop reason of {}", a.id),
        detail: e.to_string(),
    })?;
    let json_err = |what: &str, e: serde_json::Error| JournalError::Invalid {
        what: format!("the {what} of {}", a.id),
        detail: e.to_string(),
    };
    let nodes = (!a.nodes.is_empty())
        .then(|| serde_json::to_string(&a.nodes))
        .transpose()
        .map_err(|e| json_err("gang nodes", e))?;
    let checkpoint = a
        .checkpoint
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| json_err("checkpoint", e))?;
    Ok(row![
        workload,
        a.id.n,
        a.provider,
        a.pool,
        a.node,
        a.region,
        a.state.as_str(),
        a.price_per_hour,
        a.est_cost_usd,
        a.gpus,
        a.gpu_memory_gb,
        a.score,
        a.score_breakdown,
        a.placed_at.0,
        a.started_at.map(|t| t.0),
        a.ended_at.map(|t| t.0),
        a.exit_code,
        a.class.map(|c| c.as_str()),
        a.rule,
        a.evidence,
        a.cost_usd,
        a.provider_ref,
        a.nonce,
        stop,
        nodes,
        checkpoint,
    ])
}

fn event_row(e: &EventRecord) -> Result<Vec<Value>, Failed> {
    // The table keeps the attempt's number only; its workload is the event's.
    let attempt = match e.attempt {
        Some(a) if a.workload != e.workload => {
            return Err(JournalError::Invalid {
                what: format!("a {} event of {}", e.kind.as_str(), e.workload),
                detail: format!("it names attempt {a}, of another workload"),
            }
            .into());
        }
        a => a.map(|a| a.n),
    };
    let workload = id_to_sql(e.workload)?;
    Ok(row![e.at.0, workload, attempt, e.kind.as_str(), e.message])
}

fn health_row(h: &HealthObservation) -> Result<Vec<Value>, Failed> {
    Ok(row![h.at.0, h.provider, h.pool, h.node, h.class.map(|c| c.as_str()), h.ran_s, h.lift, h.free])
}
