//! The two stores behind one journal: SQLite (the embedded default, one
//! file) and PostgreSQL (a shared server), reached through one small,
//! synchronous interface so every query is written once.
//!
//! The shape: [`Db`] is an enum of a `rusqlite::Connection` and a
//! `postgres::Client` (the blocking wrapper of tokio-postgres, which runs
//! its own small runtime inside: like rusqlite, it must be called from a
//! blocking thread, never from an async task). Statements are written in
//! SQLite's spelling with numbered placeholders (`?1`) or bare ones (`?`);
//! for PostgreSQL they are rewritten to `$1…` once and prepared once
//! (cached per connection, as rusqlite's `prepare_cached` does). Where the
//! two dialects differ (a JSON lookup, `instr`, the meta table's untyped
//! value) the caller asks [`Db::dialect`] and writes both.
//!
//! Values cross as `rusqlite::types::Value` both ways: parameters are any
//! `rusqlite::ToSql`, and a row is a list of values that rusqlite's own
//! `FromSql` conversions read, so row decoders serve both stores. On
//! PostgreSQL every integer column is `BIGINT` and every real one `DOUBLE
//! PRECISION` (see `schema`), so a value converts without loss; a value
//! is converted to the column's declared type where SQLite would have
//! coerced it (an integer into a `TEXT` meta value).
//!
//! Transactions are closures: [`Db::write`] runs one in a write
//! transaction (SQLite `IMMEDIATE`; PostgreSQL read committed, with one
//! engine writing), [`Db::snapshot`] in a consistent read (PostgreSQL
//! `REPEATABLE READ READ ONLY`). The closure's error rolls it back. On a
//! fenced PostgreSQL connection (the owning engine's, see
//! [`Pg::fence`]) every write transaction first checks, inside itself,
//! that the lease row still holds this owner's epoch, and is refused with
//! [`DbError::LeaseLost`] when another engine took the journal over:
//! every write of the journal passes through [`Db::write`].

use bytes::BytesMut;
use postgres::types::{IsNull, ToSql as PgToSql, Type};
use rusqlite::types::{FromSql, FromSqlError, ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql, TransactionBehavior};
use std::cell::RefCell;
use std::collections::HashMap;

/// Which SQL spelling a statement must use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

/// An error from either store.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("{}", pg_message(.0))]
    Postgres(#[from] postgres::Error),
    /// The PostgreSQL connection is being closed.
    #[error("the connection to PostgreSQL is closed")]
    Closed,
    /// A PostgreSQL column of a type the journal never creates.
    #[error("column {column} has the type {ty}, which the journal does not use")]
    Type { column: usize, ty: String },
    /// The fence: this owner's lease epoch is no longer the lease row's.
    #[error(
        "the journal's lease is no longer ours (our epoch {epoch}; now held by {holder} at epoch {held})"
    )]
    LeaseLost { epoch: i64, holder: String, held: i64 },
}

/// PostgreSQL's own message when the server sent one (`db error: …` says
/// less), else the client's.
fn pg_message(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({}; {detail})", db.message(), db.code().code()),
            None => format!("{} ({})", db.message(), db.code().code()),
        },
        None => e.to_string(),
    }
}

/// One connection to a store.
pub(super) enum Db {
    Sqlite(Connection),
    /// In a cell because readers take `&self` (as rusqlite allows) while
    /// the client needs `&mut`; the journal is used by one thread at a time.
    Postgres(Box<RefCell<Pg>>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Db::Sqlite(c) => f.debug_tuple("Sqlite").field(c).finish(),
            Db::Postgres(_) => f.write_str("Postgres"),
        }
    }
}

/// A PostgreSQL client and its prepared statements, by their SQLite text.
pub(super) struct Pg {
    /// `None` only while being dropped.
    client: Option<postgres::Client>,
    /// How it connected (password included; never shown): a connection
    /// the server closed is replaced before the next use.
    config: postgres::Config,
    cache: Prepared,
    /// The lease epoch every write transaction must still find in the
    /// lease row; `None` on connections that are not the owner's.
    fence: Option<i64>,
}

/// A connection's prepared statements, by their SQLite text, and how
/// many statements it has run.
#[derive(Default)]
pub(super) struct Prepared {
    statements: HashMap<String, postgres::Statement>,
    /// Statements run (each one round trip to the server), not counting
    /// the `BEGIN` and `COMMIT` of transactions or their preparation.
    run: u64,
}

/// Reads the lease row under a share lock, so an engine taking the lease
/// over (`SELECT … FOR UPDATE` in `lease::acquire`) waits until this
/// transaction ends: a write that passed the fence commits before any
/// takeover, never after.
const FENCE: &str = "SELECT holder, epoch FROM leadership WHERE id = 1 FOR SHARE";

impl Pg {
    pub(super) fn new(client: postgres::Client, config: postgres::Config) -> Pg {
        Pg { client: Some(client), config, cache: Prepared::default(), fence: None }
    }

    /// From now on every write transaction on this connection first checks
    /// that the lease row still holds `epoch`.
    pub(super) fn fence(&mut self, epoch: i64) {
        self.fence = Some(epoch);
    }

    /// The client (connected again first if the server closed the old
    /// connection, as when PostgreSQL restarts) and its statements. Called
    /// off the async loop (inside [`off_runtime`]).
    ///
    /// Connecting again loses nothing: a closed connection had nothing in
    /// flight (a statement or commit that was in flight when it closed
    /// failed to its caller, which cannot know whether it committed and
    /// must not take it as done); the next use starts afresh, the fence
    /// included. Prepared statements belong to the old session and go
    /// with it.
    fn parts(&mut self) -> Result<(&mut postgres::Client, &mut Prepared), DbError> {
        if self.client.as_ref().is_some_and(postgres::Client::is_closed) {
            self.reconnect()?;
        }
        match self.client.as_mut() {
            Some(c) => Ok((c, &mut self.cache)),
            None => Err(DbError::Closed),
        }
    }
}

impl Pg {
    /// Runs `f` in a transaction `begin` starts, then commits it. A BEGIN
    /// that fails because the connection was lost (the server restarted
    /// since its last use) began nothing: connect again and begin once
    /// more. Past BEGIN nothing is sent again: a commit whose answer was
    /// lost may have happened, and only the caller can tell.
    fn in_transaction<T, E: From<DbError>>(
        &mut self,
        begin: for<'c> fn(&'c mut postgres::Client) -> Result<postgres::Transaction<'c>, postgres::Error>,
        f: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut again = true;
        loop {
            let (client, cache) = self.parts()?;
            match begin(client) {
                Ok(tx) => {
                    let tx = Tx::Postgres(RefCell::new(PgTx { tx, cache }));
                    let out = f(&tx)?;
                    if let Tx::Postgres(t) = tx {
                        t.into_inner().tx.commit().map_err(DbError::from)?;
                    }
                    return Ok(out);
                }
                Err(e) if again && connection_lost(&e) => again = false,
                Err(e) => return Err(DbError::from(e).into()),
            }
            self.reconnect()?;
        }
    }

    /// A new connection in place of this one (which the server closed).
    fn reconnect(&mut self) -> Result<(), DbError> {
        let fresh = self.config.connect(postgres::NoTls)?;
        // The old one is closed: dropping it sends nothing.
        self.client = Some(fresh);
        self.cache.statements.clear();
        Ok(())
    }
}

/// Whether `e` says the connection is gone or the server cannot serve
/// it (PostgreSQL restarting or shutting down, the network): the client's
/// own errors count only when the connection closed or the network failed
/// (connecting included), not a value it could not convert; the server's
/// when they are of SQLSTATE class 08 (connection exception) or 57P
/// (operator intervention: shutdown, cannot connect now).
pub(super) fn connection_lost(e: &postgres::Error) -> bool {
    match e.code() {
        None => {
            e.is_closed()
                || std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        }
        Some(c) => c.code().starts_with("08") || c.code().starts_with("57P"),
    }
}

/// Whether a statement only reads (a `SELECT`): sending it again on a new
/// connection after the first was lost cannot do anything twice.
fn reads_only(sql: &str) -> bool {
    sql.trim_start().get(..6).is_some_and(|w| w.eq_ignore_ascii_case("select"))
}

impl Drop for Pg {
    /// Closing the connection blocks on the client's runtime too.
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            off_runtime(|| drop(client));
        }
    }
}

/// Runs `f`, which blocks on the PostgreSQL client's own runtime, where
/// that is allowed: a caller on a worker of a multi-threaded tokio runtime
/// (which should not happen: the journal is for blocking threads) gives
/// its worker up for the call instead of panicking; elsewhere (a blocking
/// thread, no runtime) `f` just runs. A current-thread runtime cannot
/// host the client at all.
pub(super) fn off_runtime<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A transaction on either store; statements run inside it.
pub(super) enum Tx<'a> {
    Sqlite(rusqlite::Transaction<'a>),
    Postgres(RefCell<PgTx<'a>>),
}

pub(super) struct PgTx<'a> {
    tx: postgres::Transaction<'a>,
    cache: &'a mut Prepared,
}

/// One row: its values in column order.
pub(super) struct Row {
    values: Vec<Value>,
}

impl Row {
    /// Column `i` as `T`, with rusqlite's conversions and errors.
    pub(super) fn get<T: FromSql>(&self, i: usize) -> rusqlite::Result<T> {
        let value = self.get_ref(i)?;
        T::column_result(value).map_err(|e| match e {
            FromSqlError::InvalidType => {
                rusqlite::Error::InvalidColumnType(i, format!("column {i}"), value.data_type())
            }
            FromSqlError::OutOfRange(n) => rusqlite::Error::IntegralValueOutOfRange(i, n),
            other => rusqlite::Error::FromSqlConversionFailure(i, value.data_type(), Box::new(other)),
        })
    }

    /// Every column's value, in order.
    pub(super) fn values(&self) -> &[Value] {
        &self.values
    }

    pub(super) fn get_ref(&self, i: usize) -> rusqlite::Result<ValueRef<'_>> {
        self.values.get(i).map(ValueRef::from).ok_or(rusqlite::Error::InvalidColumnIndex(i))
    }

    fn of_sqlite(row: &rusqlite::Row<'_>, columns: usize) -> rusqlite::Result<Row> {
        let values = (0..columns).map(|i| row.get::<_, Value>(i)).collect::<rusqlite::Result<_>>()?;
        Ok(Row { values })
    }

    fn of_postgres(row: &postgres::Row) -> Result<Row, DbError> {
        let mut values = Vec::with_capacity(row.len());
        for (i, column) in row.columns().iter().enumerate() {
            let ty = column.type_();
            let v = match *ty {
                Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Integer),
                Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(|v| Value::Integer(v.into())),
                Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(|v| Value::Integer(v.into())),
                Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(|v| Value::Integer(v.into())),
                Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
                Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(|v| Value::Real(v.into())),
                Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => {
                    row.try_get::<_, Option<String>>(i)?.map(Value::Text)
                }
                Type::BYTEA => row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
                _ => return Err(DbError::Type { column: i, ty: ty.name().to_string() }),
            };
            values.push(v.unwrap_or(Value::Null));
        }
        Ok(Row { values })
    }
}

/// A parameter for PostgreSQL: a SQLite value written as the type the
/// statement's parameter has.
#[derive(Debug)]
struct Param(Value);

impl PgToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let mismatch = || format!("cannot write {:?} as a PostgreSQL {}", self.0, ty.name());
        match (&self.0, ty) {
            (Value::Null, _) => Ok(IsNull::Yes),
            (Value::Integer(v), &Type::INT8) => PgToSql::to_sql(&v, ty, out),
            (Value::Integer(v), &Type::INT4) => PgToSql::to_sql(&i32::try_from(*v)?, ty, out),
            (Value::Integer(v), &Type::INT2) => PgToSql::to_sql(&i16::try_from(*v)?, ty, out),
            (Value::Integer(v), &Type::BOOL) => PgToSql::to_sql(&(*v != 0), ty, out),
            (Value::Integer(v), &Type::FLOAT8) => PgToSql::to_sql(&(*v as f64), ty, out),
            (Value::Integer(v), &Type::TEXT | &Type::VARCHAR) => PgToSql::to_sql(&v.to_string(), ty, out),
            (Value::Real(v), &Type::FLOAT8) => PgToSql::to_sql(&v, ty, out),
            (Value::Real(v), &Type::FLOAT4) => PgToSql::to_sql(&(*v as f32), ty, out),
            (Value::Real(v), &Type::TEXT | &Type::VARCHAR) => PgToSql::to_sql(&v.to_string(), ty, out),
            (Value::Text(s), &Type::INT8) => {
                PgToSql::to_sql(&s.parse::<i64>().map_err(|_| mismatch())?, ty, out)
            }
            (Value::Text(s), _) => PgToSql::to_sql(&s.as_str(), ty, out),
            (Value::Blob(b), &Type::BYTEA) => PgToSql::to_sql(&b.as_slice(), ty, out),
            _ => Err(mismatch().into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// One column of many rows for PostgreSQL, sent as one array parameter
/// (`$1::BIGINT[]`, `$2::TEXT[]`, `$3::DOUBLE PRECISION[]`) that the
/// statement unnests: a batch's rows of one table in one round trip.
#[derive(Debug)]
struct Column(Vec<Value>);

impl PgToSql for Column {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let mismatch = |v: &Value| format!("cannot write {v:?} in a PostgreSQL {}", ty.name());
        match *ty {
            Type::INT8_ARRAY => {
                let values = self
                    .0
                    .iter()
                    .map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Integer(i) => Ok(Some(*i)),
                        other => Err(mismatch(other)),
                    })
                    .collect::<Result<Vec<Option<i64>>, _>>()?;
                values.to_sql(ty, out)
            }
            Type::FLOAT8_ARRAY => {
                let values = self
                    .0
                    .iter()
                    .map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Real(r) => Ok(Some(*r)),
                        Value::Integer(i) => Ok(Some(*i as f64)),
                        other => Err(mismatch(other)),
                    })
                    .collect::<Result<Vec<Option<f64>>, _>>()?;
                values.to_sql(ty, out)
            }
            Type::TEXT_ARRAY => {
                let values = self
                    .0
                    .iter()
                    .map(|v| match v {
                        Value::Null => Ok(None),
                        Value::Text(t) => Ok(Some(t.as_str())),
                        other => Err(mismatch(other)),
                    })
                    .collect::<Result<Vec<Option<&str>>, _>>()?;
                values.to_sql(ty, out)
            }
            _ => Err(format!("a column of many rows cannot be a PostgreSQL {}", ty.name()).into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A parameter as a value (what rusqlite would bind).
pub(super) fn value_of(p: &dyn ToSql) -> Result<Value, DbError> {
    Ok(match p.to_sql()? {
        ToSqlOutput::Borrowed(v) => owned(v),
        ToSqlOutput::Owned(v) => v,
        other => {
            return Err(DbError::Sqlite(rusqlite::Error::ToSqlConversionFailure(
                format!("unsupported parameter {other:?}").into(),
            )));
        }
    })
}

fn params_for_pg(params: &[&dyn ToSql]) -> Result<Vec<Param>, DbError> {
    params.iter().map(|p| value_of(*p).map(Param)).collect()
}

fn owned(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// `?1`, `?` → `$1`, `$n`, outside quoted strings and identifiers.
pub(super) fn to_postgres(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 0u32;
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                out.push(c);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                } else if let Ok(n) = digits.parse::<u32>() {
                    next = next.max(n);
                }
                out.push('$');
                out.push_str(&digits);
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// Runs statements: a connection outside a transaction, or a transaction.
pub(super) trait Exec {
    fn dialect(&self) -> Dialect;

    /// Runs `f` on each row of the answer.
    fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbError>;

    /// Runs a statement that answers no rows; how many it changed.
    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, DbError>;

    /// Several statements without parameters (a migration).
    fn batch(&self, sql: &str) -> Result<(), DbError>;

    /// The first row's `f`, if there is a row.
    fn query_opt<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Option<T>, DbError> {
        Ok(self.query_map(sql, params, f)?.into_iter().next())
    }

    /// The first row's `f`; an error when there is none.
    fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<T, DbError> {
        self.query_opt(sql, params, f)?.ok_or(DbError::Sqlite(rusqlite::Error::QueryReturnedNoRows))
    }
}

fn sqlite_query<T>(
    conn: &Connection,
    sql: &str,
    params: &[&dyn ToSql],
    mut f: impl FnMut(&Row) -> rusqlite::Result<T>,
) -> Result<Vec<T>, DbError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let columns = stmt.column_count();
    let mut rows = stmt.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(f(&Row::of_sqlite(row, columns)?)?);
    }
    Ok(out)
}

fn sqlite_execute(conn: &Connection, sql: &str, params: &[&dyn ToSql]) -> Result<u64, DbError> {
    let n = conn.prepare_cached(sql)?.execute(params)?;
    Ok(n as u64)
}

fn pg_statement(
    client: &mut impl postgres::GenericClient,
    cache: &mut Prepared,
    sql: &str,
) -> Result<postgres::Statement, DbError> {
    cache.run += 1;
    if let Some(s) = cache.statements.get(sql) {
        return Ok(s.clone());
    }
    let statement = client.prepare(&to_postgres(sql))?;
    cache.statements.insert(sql.to_string(), statement.clone());
    Ok(statement)
}

fn pg_query<T>(
    client: &mut impl postgres::GenericClient,
    cache: &mut Prepared,
    sql: &str,
    params: &[&dyn ToSql],
    mut f: impl FnMut(&Row) -> rusqlite::Result<T>,
) -> Result<Vec<T>, DbError> {
    let statement = pg_statement(client, cache, sql)?;
    let params = params_for_pg(params)?;
    let refs: Vec<&(dyn PgToSql + Sync)> = params.iter().map(|p| p as &(dyn PgToSql + Sync)).collect();
    let rows = client.query(&statement, &refs)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.push(f(&Row::of_postgres(row)?)?);
    }
    Ok(out)
}

fn pg_execute(
    client: &mut impl postgres::GenericClient,
    cache: &mut Prepared,
    sql: &str,
    params: &[&dyn ToSql],
) -> Result<u64, DbError> {
    let statement = pg_statement(client, cache, sql)?;
    let params = params_for_pg(params)?;
    let refs: Vec<&(dyn PgToSql + Sync)> = params.iter().map(|p| p as &(dyn PgToSql + Sync)).collect();
    Ok(client.execute(&statement, &refs)?)
}

impl Exec for Db {
    fn dialect(&self) -> Dialect {
        match self {
            Db::Sqlite(_) => Dialect::Sqlite,
            Db::Postgres(_) => Dialect::Postgres,
        }
    }

    fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbError> {
        match self {
            Db::Sqlite(c) => sqlite_query(c, sql, params, f),
            // A read whose connection PostgreSQL closed (it restarted since
            // the last use) goes again once on a new connection.
            Db::Postgres(pg) => off_runtime(|| {
                let pg = &mut *pg.borrow_mut();
                let (mut f, mut again) = (f, reads_only(sql));
                loop {
                    let (client, cache) = pg.parts()?;
                    match pg_query(client, cache, sql, params, &mut f) {
                        Err(DbError::Postgres(e)) if again && connection_lost(&e) => again = false,
                        r => return r,
                    }
                    pg.reconnect()?;
                }
            }),
        }
    }

    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, DbError> {
        match self {
            Db::Sqlite(c) => sqlite_execute(c, sql, params),
            Db::Postgres(pg) => off_runtime(|| {
                let pg = &mut *pg.borrow_mut();
                let (client, cache) = pg.parts()?;
                pg_execute(client, cache, sql, params)
            }),
        }
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Db::Postgres(pg) => off_runtime(|| Ok(pg.borrow_mut().parts()?.0.batch_execute(sql)?)),
        }
    }
}

impl Exec for Tx<'_> {
    fn dialect(&self) -> Dialect {
        match self {
            Tx::Sqlite(_) => Dialect::Sqlite,
            Tx::Postgres(_) => Dialect::Postgres,
        }
    }

    fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbError> {
        match self {
            Tx::Sqlite(tx) => sqlite_query(tx, sql, params, f),
            Tx::Postgres(t) => {
                let t = &mut *t.borrow_mut();
                pg_query(&mut t.tx, t.cache, sql, params, f)
            }
        }
    }

    fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, DbError> {
        match self {
            Tx::Sqlite(tx) => sqlite_execute(tx, sql, params),
            Tx::Postgres(t) => {
                let t = &mut *t.borrow_mut();
                pg_execute(&mut t.tx, t.cache, sql, params)
            }
        }
    }

    fn batch(&self, sql: &str) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(tx) => Ok(tx.execute_batch(sql)?),
            Tx::Postgres(t) => Ok(t.borrow_mut().tx.batch_execute(sql)?),
        }
    }
}

impl Tx<'_> {
    /// Runs a statement once per row of `rows` (each row's values in
    /// parameter order): on SQLite `one` per row (in-process, nothing to
    /// save), on PostgreSQL `many` once, with each column of the rows as
    /// one array parameter (`unnest`), so a batch costs one round trip per
    /// table instead of one per record. Rows keep their order. Returns the
    /// rows changed.
    pub(super) fn execute_rows(&self, one: &str, many: &str, rows: Vec<Vec<Value>>) -> Result<u64, DbError> {
        match self {
            Tx::Sqlite(tx) => {
                let mut stmt = tx.prepare_cached(one)?;
                let mut n = 0;
                for row in &rows {
                    n += stmt.execute(rusqlite::params_from_iter(row.iter()))? as u64;
                }
                Ok(n)
            }
            Tx::Postgres(t) => {
                let Some(width) = rows.first().map(Vec::len) else { return Ok(0) };
                let mut columns: Vec<Column> =
                    (0..width).map(|_| Column(Vec::with_capacity(rows.len()))).collect();
                for row in rows {
                    if row.len() != width {
                        return Err(DbError::Sqlite(rusqlite::Error::InvalidParameterCount(
                            row.len(),
                            width,
                        )));
                    }
                    for (column, value) in columns.iter_mut().zip(row) {
                        column.0.push(value);
                    }
                }
                let t = &mut *t.borrow_mut();
                let statement = pg_statement(&mut t.tx, t.cache, many)?;
                let refs: Vec<&(dyn PgToSql + Sync)> =
                    columns.iter().map(|c| c as &(dyn PgToSql + Sync)).collect();
                Ok(t.tx.execute(&statement, &refs)?)
            }
        }
    }
}

impl Db {
    /// Runs `f` in a write transaction and commits when it returns `Ok`;
    /// its error (or a panic) rolls everything back.
    pub(super) fn write<T, E: From<DbError>>(
        &mut self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Db::Sqlite(c) => {
                // IMMEDIATE takes the write lock up front, so a busy store
                // makes us wait (busy_timeout) instead of failing on the
                // first write.
                let tx =
                    c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(DbError::from)?;
                let tx = Tx::Sqlite(tx);
                let out = f(&tx)?;
                if let Tx::Sqlite(tx) = tx {
                    tx.commit().map_err(DbError::from)?;
                }
                Ok(out)
            }
            Db::Postgres(pg) => off_runtime(|| {
                let pg = pg.get_mut();
                let fence = pg.fence;
                pg.in_transaction(
                    |c| c.transaction(),
                    |tx| {
                        if let Some(epoch) = fence {
                            check_fence(tx, epoch)?;
                        }
                        f(tx)
                    },
                )
            }),
        }
    }

    /// Runs a query once per value of `values` and gathers the rows: on
    /// SQLite `one` (its `?1` the value) per value, on PostgreSQL `many`
    /// once, its `$1` an array of all the values (`= ANY($1::TEXT[])`), so
    /// a lookup of many keys is one round trip.
    pub(super) fn query_each<T>(
        &self,
        one: &str,
        many: &str,
        values: Vec<Value>,
        mut f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, DbError> {
        match self {
            Db::Sqlite(c) => {
                let mut out = Vec::new();
                for v in &values {
                    out.extend(sqlite_query(c, one, &[v], &mut f)?);
                }
                Ok(out)
            }
            Db::Postgres(pg) => off_runtime(|| {
                if values.is_empty() {
                    return Ok(Vec::new());
                }
                let pg = &mut *pg.borrow_mut();
                let column = Column(values);
                // A lookup: sent again once on a new connection when the
                // old one was lost (as `query_map` does).
                let mut again = true;
                let rows = loop {
                    let (client, cache) = pg.parts()?;
                    let rows = pg_statement(client, cache, many).and_then(|statement| {
                        Ok(client.query(&statement, &[&column as &(dyn PgToSql + Sync)])?)
                    });
                    match rows {
                        Err(DbError::Postgres(e)) if again && connection_lost(&e) => again = false,
                        r => break r?,
                    }
                    pg.reconnect()?;
                };
                let mut out = Vec::with_capacity(rows.len());
                for row in &rows {
                    out.push(f(&Row::of_postgres(row)?)?);
                }
                Ok(out)
            }),
        }
    }

    /// How many statements this connection has run on PostgreSQL (each a
    /// round trip to the server; transactions' `BEGIN` and `COMMIT` not
    /// counted); 0 on SQLite, where a statement is a function call.
    pub(super) fn statements_run(&self) -> u64 {
        match self {
            Db::Sqlite(_) => 0,
            Db::Postgres(pg) => pg.borrow().cache.run,
        }
    }

    /// Fences this connection's writes with the lease `epoch` (PostgreSQL;
    /// SQLite's owner lock is a file lock, so nothing changes there).
    pub(super) fn fence(&mut self, epoch: i64) {
        if let Db::Postgres(pg) = self {
            pg.get_mut().fence(epoch);
        }
    }

    /// Runs `f` over one consistent snapshot of the store.
    pub(super) fn snapshot<T, E: From<DbError>>(
        &self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        match self {
            Db::Sqlite(c) => {
                let tx = Tx::Sqlite(c.unchecked_transaction().map_err(DbError::from)?);
                // A read transaction: dropping it ends it (nothing to keep).
                f(&tx)
            }
            Db::Postgres(pg) => off_runtime(|| {
                let pg = &mut *pg.borrow_mut();
                pg.in_transaction(
                    |c| {
                        c.build_transaction()
                            .isolation_level(postgres::IsolationLevel::RepeatableRead)
                            .read_only(true)
                            .start()
                    },
                    f,
                )
            }),
        }
    }
}

/// The fence, first in a write transaction: the lease row must still hold
/// `epoch` (a row missing means nobody took it over since it was made, so
/// it cannot be missing once an owner holds it: refused all the same).
fn check_fence(tx: &Tx<'_>, epoch: i64) -> Result<(), DbError> {
    let row = tx.query_opt(FENCE, &[], |r| Ok((r.get::<String>(0)?, r.get::<i64>(1)?)))?;
    match row {
        Some((_, held)) if held == epoch => Ok(()),
        Some((holder, held)) => Err(DbError::LeaseLost { epoch, holder, held }),
        None => Err(DbError::LeaseLost { epoch, holder: "nobody".into(), held: 0 }),
    }
}

#[cfg(test)]
mod tests {
    use super::to_postgres;

    #[test]
    fn placeholders_become_numbered_outside_quotes() {
        assert_eq!(
            to_postgres("SELECT a FROM t WHERE a = ?1 AND b = ?2"),
            "SELECT a FROM t WHERE a = $1 AND b = $2"
        );
        assert_eq!(to_postgres("x IN (?, ?) LIMIT ?"), "x IN ($1, $2) LIMIT $3");
        assert_eq!(to_postgres("a = '?' AND \"q?\" = ?1 OR b = ?1"), "a = '?' AND \"q?\" = $1 OR b = $1");
        assert_eq!(to_postgres("a = ?12"), "a = $12");
    }
}
