//! Moving a store: every row of a SQLite journal copied into another,
//! empty journal (PostgreSQL, for `canopy migrate`), in one transaction of
//! the destination, with each table's count checked before it commits.

use super::db::{DbError, Dialect, Exec};
use super::write::Failed;
use super::{Journal, JournalError, failed};
use rusqlite::ToSql;
use rusqlite::types::Value;

/// Every table of a store, in the order they are copied. `meta` is not
/// among them: the destination keeps its schema version and takes the
/// source's store id and highest workload id.
pub const TABLES: &[&str] = &[
    "workloads",
    "attempts",
    "events",
    "health_observations",
    "inbox",
    "batches",
    "audit",
    "tokens",
    "node_intents",
    "tenancy",
    "deliveries",
];

/// Tables whose `seq` the store numbers itself (an identity column on
/// PostgreSQL, whose counter must go on above the copied rows).
const NUMBERED: &[&str] = &["events", "health_observations", "inbox", "batches", "audit"];

impl Journal {
    /// Copies every row of this SQLite store into `dest`, which must hold
    /// no workloads and no commits yet. Returns each table and its rows,
    /// counted again in `dest` before the copy commits.
    pub fn copy_into(&self, dest: &mut Journal) -> Result<Vec<(&'static str, u64)>, JournalError> {
        if self.conn.dialect() != Dialect::Sqlite {
            return Err(JournalError::Invalid {
                what: format!("a copy of {}", self.store),
                detail: "only a SQLite store can be copied".into(),
            });
        }
        let err = failed(&self.store, "be read for the copy");
        let mut tables = Vec::with_capacity(TABLES.len());
        for &table in TABLES {
            let columns: Vec<String> = self
                .conn
                .query_map("SELECT name FROM pragma_table_info(?1) ORDER BY cid", &[&table], |r| r.get(0))
                .map_err(&err)?;
            let list = columns.join(", ");
            let rows = self
                .conn
                .query_map(&format!("SELECT {list} FROM {table}"), &[], |r| Ok(r.values().to_vec()))
                .map_err(&err)?;
            tables.push((table, columns, rows));
        }
        let meta: Vec<(String, Value)> = self
            .conn
            .query_map("SELECT key, value FROM meta WHERE key IN ('store_id', 'max_workload_id')", &[], |r| {
                Ok((r.get(0)?, r.values()[1].clone()))
            })
            .map_err(&err)?;

        let to = dest.store.clone();
        let dest_err = failed(&to, "take the copy");
        let copied = dest
            .conn
            .write(|tx| -> Result<Vec<(&'static str, u64)>, Failed> {
                let held: i64 = tx
                    .query_one("SELECT (SELECT count(*) FROM workloads) + (SELECT count(*) FROM batches)", &[], |r| {
                        r.get(0)
                    })
                    .map_err(&dest_err)?;
                if held > 0 {
                    return Err(JournalError::NotEmpty { store: to.clone() }.into());
                }
                let mut counts = Vec::with_capacity(tables.len());
                for (table, columns, rows) in &tables {
                    // Rows a new store starts with (none today) give way.
                    tx.execute(&format!("DELETE FROM {table}"), &[]).map_err(&dest_err)?;
                    let marks: Vec<String> = (1..=columns.len()).map(|i| format!("?{i}")).collect();
                    let insert =
                        format!("INSERT INTO {table} ({}) VALUES ({})", columns.join(", "), marks.join(", "));
                    for row in rows {
                        let params: Vec<&dyn ToSql> = row.iter().map(|v| v as &dyn ToSql).collect();
                        tx.execute(&insert, &params).map_err(&dest_err)?;
                    }
                    if tx.dialect() == Dialect::Postgres && NUMBERED.contains(table) {
                        tx.query_map(
                            &format!(
                                "SELECT setval(pg_get_serial_sequence('{table}', 'seq'), max(seq)) FROM {table} \
                                 HAVING count(*) > 0"
                            ),
                            &[],
                            |_| Ok(()),
                        )
                        .map_err(&dest_err)?;
                    }
                    let n: i64 = tx
                        .query_one(&format!("SELECT count(*) FROM {table}"), &[], |r| r.get(0))
                        .map_err(&dest_err)?;
                    if n != rows.len() as i64 {
                        return Err(Failed::Db(DbError::Sqlite(rusqlite::Error::ToSqlConversionFailure(
                            format!("{table}: {} rows read but {n} written", rows.len()).into(),
                        ))));
                    }
                    counts.push((*table, rows.len() as u64));
                }
                for (key, value) in &meta {
                    tx.execute(
                        "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        &[key as &dyn ToSql, value as &dyn ToSql],
                    )
                    .map_err(&dest_err)?;
                }
                Ok(counts)
            })
            .map_err(|e| match e {
                Failed::Db(e) => dest_err(e),
                Failed::Journal(e) => e,
            })?;
        if let Some((_, Value::Text(id))) = meta.iter().find(|(k, _)| k == "store_id") {
            dest.store_id = id.clone();
        }
        Ok(copied)
    }
}
