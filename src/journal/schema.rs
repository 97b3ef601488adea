//! The store's schema: connection settings and ordered migrations.
//!
//! `meta.schema_version` counts the migrations applied. A migration is
//! never edited once released; a change is a new entry at the end of
//! [`MIGRATIONS`]. A store whose version is above ours was written by a
//! newer Canopy and is refused rather than guessed at.

use super::db::{Db, Dialect, Exec};
use super::write::Failed;
use super::{BUSY_TIMEOUT, JournalError, failed};
use rusqlite::{Connection, params};
use sha2::{Digest, Sha256};

/// The schema version this Canopy writes and understands.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Applied in order; entry `i` takes a store from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    "
    -- The current row of each workload. Small columns first and the spec
    -- last, so scans that skip the spec do not read it.
    CREATE TABLE workloads (
        id              INTEGER PRIMARY KEY,
        name            TEXT    NOT NULL,
        state           TEXT    NOT NULL,
        live            INTEGER NOT NULL,   -- 1 while the state is not final
        priority        INTEGER NOT NULL,
        submitted_at    INTEGER NOT NULL,   -- ms since the Unix epoch
        updated_at      INTEGER NOT NULL,
        attempts        INTEGER NOT NULL,
        app_failures    INTEGER NOT NULL,
        not_before      INTEGER,
        cost_usd        REAL    NOT NULL,
        est_cost_usd    REAL    NOT NULL,
        reason          TEXT,
        class           TEXT,
        idempotency_key TEXT    UNIQUE,
        spec_hash       TEXT    NOT NULL,
        spec            TEXT    NOT NULL    -- JSON of the Spec (secret names only)
    );
    CREATE INDEX workloads_live ON workloads (id) WHERE live = 1;
    CREATE INDEX workloads_state ON workloads (state, id);
    CREATE INDEX workloads_updated ON workloads (updated_at);

    -- The current row of each attempt.
    CREATE TABLE attempts (
        workload        INTEGER NOT NULL,
        n               INTEGER NOT NULL,
        provider        TEXT    NOT NULL,
        pool            TEXT    NOT NULL,
        node            TEXT    NOT NULL,
        region          TEXT    NOT NULL,
        state           TEXT    NOT NULL,
        price_per_hour  REAL    NOT NULL,
        est_cost_usd    REAL    NOT NULL,
        gpus            INTEGER NOT NULL,
        gpu_memory_gb   REAL    NOT NULL,
        score           REAL    NOT NULL,
        score_breakdown TEXT    NOT NULL,
        placed_at       INTEGER NOT NULL,
        started_at      INTEGER,
        ended_at        INTEGER,
        exit_code       INTEGER,
        class           TEXT,
        rule            TEXT,
        evidence        TEXT,
        cost_usd        REAL    NOT NULL,
        provider_ref    TEXT,
        PRIMARY KEY (workload, n)
    );

    -- Append-only. Rows are never deleted, so seq only grows and a reader
    -- can tail the log from the last seq it saw.
    CREATE TABLE events (
        seq      INTEGER PRIMARY KEY,
        at       INTEGER NOT NULL,
        workload INTEGER NOT NULL,
        attempt  INTEGER,                  -- the attempt's n, of this workload
        kind     TEXT    NOT NULL,
        message  TEXT    NOT NULL
    );
    CREATE INDEX events_by_workload ON events (workload, seq);

    -- Append-only.
    CREATE TABLE health_observations (
        seq      INTEGER PRIMARY KEY,
        at       INTEGER NOT NULL,
        provider TEXT    NOT NULL,
        pool     TEXT    NOT NULL,
        node     TEXT    NOT NULL,
        class    TEXT                      -- NULL: the attempt succeeded
    );
    CREATE INDEX health_by_time ON health_observations (at);

    -- Commands from other processes to the owning engine.
    CREATE TABLE inbox (
        seq       INTEGER PRIMARY KEY,
        command   TEXT    NOT NULL,        -- JSON of a Command
        pushed_at INTEGER NOT NULL,
        taken_at  INTEGER,
        done_at   INTEGER,
        result    TEXT                     -- JSON of a CommandResult
    );
    CREATE INDEX inbox_untaken ON inbox (seq) WHERE taken_at IS NULL;
    ",
    // 2: how long the attempt behind a health observation ran, so the
    // scheduler can learn interruptions per running hour.
    "ALTER TABLE health_observations ADD COLUMN ran_s REAL NOT NULL DEFAULT 0;",
    // 3: Canopy as a service. Who submitted each workload; every commit as
    // a numbered batch, so clients of the event stream resume by number;
    // the audit trail; API tokens (salted hashes only, never the secret).
    // The inbox table stays for old stores but is no longer read.
    "
    ALTER TABLE workloads ADD COLUMN submitted_by TEXT;

    -- One row per journal commit, its records as JSON. seq only grows; old
    -- rows are pruned (a client asking for one gets a resync).
    CREATE TABLE batches (
        seq     INTEGER PRIMARY KEY,
        at      INTEGER NOT NULL,
        records TEXT    NOT NULL
    );

    -- Append-only: every state-changing request, who, from where, outcome.
    CREATE TABLE audit (
        seq       INTEGER PRIMARY KEY,
        at        INTEGER NOT NULL,
        principal TEXT    NOT NULL,
        origin    TEXT    NOT NULL,
        action    TEXT    NOT NULL,
        target    TEXT,
        outcome   TEXT    NOT NULL,
        reason    TEXT
    );
    CREATE INDEX audit_by_time ON audit (at);

    -- Bearer tokens. The secret is shown once at creation; only
    -- sha256(salt || secret) is kept.
    CREATE TABLE tokens (
        id         TEXT    PRIMARY KEY,    -- public part of the token
        name       TEXT    NOT NULL,
        role       TEXT    NOT NULL,
        scopes     TEXT    NOT NULL,       -- JSON list of scopes
        salt       TEXT    NOT NULL,
        hash       TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        created_by TEXT    NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
    );
    CREATE UNIQUE INDEX tokens_live_name ON tokens (name) WHERE revoked_at IS NULL;
    ",
    // 4: an operator's lift of a quarantine, kept with the outcomes that
    // caused it so a restart replays both.
    "ALTER TABLE health_observations ADD COLUMN lift INTEGER NOT NULL DEFAULT 0;",
    // 5: operators' standing cordons and drains, one row per node while
    // it holds.
    "
    CREATE TABLE node_intents (
        node   TEXT    PRIMARY KEY,
        state  TEXT    NOT NULL,           -- cordoned | draining
        by     TEXT    NOT NULL,
        reason TEXT,
        at     INTEGER NOT NULL,
        until  INTEGER
    ) WITHOUT ROWID;
    ",
    // 6: each attempt's token nonce (unique tokens across the store's
    // life), and why Canopy is stopping it (JSON of the provider end the
    // stop will be recorded as), so a stop survives a restart.
    "
    ALTER TABLE attempts ADD COLUMN nonce TEXT NOT NULL DEFAULT '';
    ALTER TABLE attempts ADD COLUMN stop TEXT;
    ",
    // 7: an operator's acknowledgement of a failure (JSON: by, at,
    // reason); failures without one are what triage shows.
    "
    ALTER TABLE workloads ADD COLUMN acknowledged TEXT;
    CREATE INDEX workloads_unresolved ON workloads (id) WHERE state = 'failed' AND acknowledged IS NULL;
    ",
    // 8: a gang's nodes in rank order (JSON list; NULL for one node), and
    // the checkpoint an attempt resumed from and the one it left (JSON).
    "
    ALTER TABLE attempts ADD COLUMN nodes TEXT;
    ALTER TABLE attempts ADD COLUMN checkpoint TEXT;
    ",
    // 9: what a workload's failures exclude (JSON: nodes, pools, since,
    // until), so an exclusion an operator cleared or a recovered node
    // ended stays ended across a restart.
    "ALTER TABLE workloads ADD COLUMN exclusions TEXT;",
    // 10: the tenant a workload is for (NULL without tenants).
    "
    ALTER TABLE workloads ADD COLUMN tenant TEXT;
    CREATE INDEX workloads_by_tenant ON workloads (tenant, id);
    ",
    // 11: the tenant a token belongs to (NULL: made before tenants), and
    // the tenancy in force (one row: the document as JSON, who set it,
    // when, and the canopy.toml tables it was last seeded from).
    "
    ALTER TABLE tokens ADD COLUMN tenant TEXT;
    CREATE TABLE tenancy (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        document TEXT NOT NULL,
        seeded_from TEXT NOT NULL,
        set_by TEXT NOT NULL,
        set_at INTEGER NOT NULL
    );
    ",
    // 12: webhook deliveries, the outbox: each written in the commit of
    // the change it tells of, then after each try.
    "
    CREATE TABLE deliveries (
        id         INTEGER PRIMARY KEY,
        workload   INTEGER NOT NULL,
        event      TEXT    NOT NULL,
        url        TEXT    NOT NULL,
        body       TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        state      TEXT    NOT NULL,   -- pending, delivered, given-up
        tries      INTEGER NOT NULL,
        next_at    INTEGER,
        last       TEXT
    );
    CREATE INDEX deliveries_pending ON deliveries (state, id);
    CREATE INDEX deliveries_by_workload ON deliveries (workload, id);
    ",
    // 13: whether the stop behind a health observation was free for the
    // workload (it resumed with progress), which is not held against the
    // pool.
    "ALTER TABLE health_observations ADD COLUMN free INTEGER NOT NULL DEFAULT 0;",
];

/// Per-connection settings.
///
/// Durability: WAL with `synchronous=FULL` syncs the WAL at every commit,
/// so a committed transaction survives kill -9, an OS crash and power
/// loss. That is what an API acknowledgement promises. The engine shell
/// commits everything that arrived together in one transaction (group
/// commit), so the fsync is paid once per batch, not once per request.
pub(super) fn configure(conn: &Connection, store: &str) -> Result<(), JournalError> {
    let open = |source: rusqlite::Error| JournalError::open(store, source.into());
    conn.busy_timeout(BUSY_TIMEOUT).map_err(open)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)).map_err(open)?;
    if mode != "wal" && mode != "memory" {
        tracing::warn!(
            store,
            mode,
            "the store's file system does not support WAL; readers may wait on the engine"
        );
    }
    conn.pragma_update(None, "synchronous", "FULL").map_err(open)?;
    // More statements than rusqlite's default 16 are prepared; keep them all.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Brings the store to [`SCHEMA_VERSION`] and returns its store id.
/// Safe against two processes opening a new store at once: the check is
/// repeated under the write lock (SQLite's, or on PostgreSQL a lock held
/// until the migration's transaction ends).
/// `new_id`: the id a store created now takes (a journal started over
/// next to an old one's attempts keeps their id); a random one when `None`.
pub(super) fn migrate(db: &mut Db, store: &str, new_id: Option<&str>) -> Result<String, JournalError> {
    // Fast path, no write lock: readers open an up-to-date store often.
    if let (Some(version), Some(id)) = read_meta(db, store)?
        && version == SCHEMA_VERSION
    {
        return Ok(id);
    }
    let id = db
        .write(|tx| -> Result<Option<String>, Failed> {
            if tx.dialect() == Dialect::Postgres {
                // Two servers starting on a new database at once: the
                // second waits here, then finds the schema made.
                tx.execute("SELECT pg_advisory_xact_lock(?1)", &[&MIGRATION_LOCK])
                    .map_err(failed(store, "lock its schema for migration"))?;
            }
            if !has_meta(tx, store)? {
                let foreign: i64 = tx
                    .query_one(foreign_tables_sql(tx.dialect()), &[], |r| r.get(0))
                    .map_err(|source| JournalError::open(store, source))?;
                if foreign > 0 {
                    return Err(JournalError::NotAStore { store: store.to_string() }.into());
                }
                let create = match tx.dialect() {
                    Dialect::Sqlite => "CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID",
                    Dialect::Postgres => "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)",
                };
                tx.batch(create).map_err(failed(store, "create its meta table"))?;
            }
            let version = read_meta(tx, store)?.0.unwrap_or(0);
            if version > SCHEMA_VERSION {
                return Err(JournalError::NewerSchema {
                    store: store.to_string(),
                    found: version,
                    supported: SCHEMA_VERSION,
                }
                .into());
            }
            // `version` is in 0..=SCHEMA_VERSION here, so the slice is in bounds.
            for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
                let sql = match tx.dialect() {
                    Dialect::Sqlite => std::borrow::Cow::Borrowed(*sql),
                    Dialect::Postgres => std::borrow::Cow::Owned(for_postgres(sql)),
                };
                tx.batch(&sql).map_err(failed(store, "migrate its schema"))?;
                tracing::info!(store, version = i + 1, "migrated the store");
            }
            let set = "INSERT INTO meta (key, value) VALUES (?1, ?2) \
                       ON CONFLICT (key) DO UPDATE SET value = excluded.value";
            tx.execute(set, params!["schema_version", SCHEMA_VERSION])
                .map_err(failed(store, "migrate its schema"))?;
            tx.execute(
                "INSERT INTO meta (key, value) VALUES ('store_id', ?1) ON CONFLICT (key) DO NOTHING",
                &[&new_id.map_or_else(|| new_store_id(store), str::to_string)],
            )
            .map_err(failed(store, "record its id"))?;
            Ok(read_meta(tx, store)?.1)
        })
        .map_err(|e| match e {
            Failed::Db(source) => failed(store, "commit its migration")(source),
            Failed::Journal(e) => e,
        })?;
    id.ok_or_else(|| JournalError::Invalid { what: "the store id".into(), detail: "it was not saved".into() })
}

/// Any key for `pg_advisory_xact_lock`, the same in every Canopy: "canopy" in ASCII.
const MIGRATION_LOCK: i64 = 0x6361_6e6f_7079;

/// How many tables not made by SQLite itself the store has (in the
/// connection's schema, on PostgreSQL).
fn foreign_tables_sql(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Sqlite => {
            "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        }
        Dialect::Postgres => {
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
        }
    }
}

/// A migration in PostgreSQL's types: every integer a `BIGINT` (SQLite's
/// integers are 64-bit), every real a `DOUBLE PRECISION`, a row-numbered
/// `seq` an identity column, and no `WITHOUT ROWID`. The columns, indexes
/// and constraints are the same, so one list of migrations serves both.
pub(super) fn for_postgres(sql: &str) -> String {
    static SEQ: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\bseq(\s+)INTEGER PRIMARY KEY").ok());
    static INTEGER: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\bINTEGER\b").ok());
    static REAL: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\bREAL\b").ok());
    let mut out = sql.replace("WITHOUT ROWID", "");
    if let Some(re) = SEQ.as_ref() {
        out = re.replace_all(&out, "seq${1}BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY").into_owned();
    }
    if let Some(re) = INTEGER.as_ref() {
        out = re.replace_all(&out, "BIGINT").into_owned();
    }
    if let Some(re) = REAL.as_ref() {
        out = re.replace_all(&out, "DOUBLE PRECISION").into_owned();
    }
    out
}

fn has_meta(conn: &impl Exec, store: &str) -> Result<bool, JournalError> {
    let sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'meta'",
        Dialect::Postgres => {
            "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'meta'"
        }
    };
    conn.query_opt(sql, &[], |_| Ok(()))
        .map(|found| found.is_some())
        .map_err(|source| JournalError::open(store, source))
}

/// `(schema_version, store_id)`; both `None` in a new, empty store.
fn read_meta(conn: &impl Exec, store: &str) -> Result<(Option<i64>, Option<String>), JournalError> {
    if !has_meta(conn, store)? {
        return Ok((None, None));
    }
    let version_sql = match conn.dialect() {
        Dialect::Sqlite => "SELECT value FROM meta WHERE key = ?1",
        Dialect::Postgres => "SELECT CAST(value AS BIGINT) FROM meta WHERE key = ?1",
    };
    let version = conn
        .query_opt(version_sql, &[&"schema_version"], |r| r.get(0))
        .map_err(failed(store, "read its schema version"))?;
    let id = conn
        .query_opt("SELECT value FROM meta WHERE key = ?1", &[&"store_id"], |r| r.get(0))
        .map_err(failed(store, "read its id"))?;
    Ok((version, id))
}

/// Six hex digits from a hash of things that differ between stores: the
/// time, the process, the path, and the per-process random hasher keys.
fn new_store_id(store: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut random = std::collections::hash_map::RandomState::new().build_hasher();
    random.write_u128(nanos);
    let mut h = Sha256::new();
    h.update(nanos.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(store.as_bytes());
    h.update(random.finish().to_le_bytes());
    hex::encode(&h.finalize()[..3])
}
