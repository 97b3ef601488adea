//! The journal: Canopy's durable memory, one SQLite file per store (the
//! embedded default) or one PostgreSQL database (or schema) shared by the
//! servers that point at it.
//!
//! It owns the store file and its schema: the current row of every workload
//! and attempt, the append-only event log, health observations, every
//! commit as a numbered batch (what the API's event stream resumes from),
//! the audit trail, and API tokens (salted hashes).
//!
//! It stores and reads; it must not decide: no state changes, retries or
//! placement happen here, and times arrive as [`Millis`] from the caller
//! (the clock is read only as entropy for a new store's id). The engine shell writes the core's [`Record`]s here *before*
//! acting on them or showing them (durable before visible). It writes only
//! what it is given and never reads the environment: a spec names its
//! secrets, it never holds their values.
//!
//! One engine owns a store at a time ([`acquire_owner`]); any number of
//! readers open it alongside. The API is blocking on both stores (rusqlite;
//! the `postgres` crate, which blocks on a runtime of its own): call it from
//! `spawn_blocking` or a dedicated thread, never from an async loop.
//!
//! Two stores, one journal: a [`Journal`] holds either connection (`db`:
//! an enum of a `rusqlite::Connection` and a `postgres::Client`), and every
//! query, migration and transaction goes through that one seam, written
//! once in SQLite's spelling and translated for PostgreSQL, so the same
//! tests run on both (`tests/journal.rs`). One transaction per appended
//! batch on both; a commit returns only once durable (SQLite's fsync'd WAL,
//! PostgreSQL's `synchronous_commit`). Every write passes through
//! `Db::write`, which on the owner's fenced PostgreSQL connection first
//! checks the lease epoch ([`Journal::fence`]).
//!
//! Layout: `db` (the two stores behind one interface), `schema` (pragmas,
//! migrations), `write` ([`Journal::append`]),
//! `read` (recovery and readers), `stream` (batches and the audit trail),
//! `tokens` (API tokens), `tenancy` (the tenant tables in force), `lock` (exclusive ownership), `codec` (column
//! encodings).
//!
//! [`Record`]: crate::engine::model::Record

mod codec;
mod copy;
mod db;
mod deliveries;
mod lease;
mod lock;
mod read;
mod schema;
mod stream;
mod tenancy;
mod tokens;
mod write;

pub use copy::TABLES;
pub use db::DbError;
pub use lease::{LEASE_TERM, Leadership, Lease, MIN_LEASE_TERM, NotTaken, ServerRow, this_server};
pub use lock::{OwnerLock, acquire_owner, is_owned, lock_path};
pub use read::{HealthWindow, Recovered, TenantFilter, WorkloadFilter};
pub use schema::SCHEMA_VERSION;
pub use stream::{AuditFilter, BATCHES_KEPT};
pub use tenancy::TenancyRow;
pub use tokens::TokenRow;

#[cfg(doc)]
use crate::engine::model::Millis;
use db::Db;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a statement waits for another process's write lock before it
/// fails. Writes are short (one transaction per batch), so this is ample;
/// in WAL mode readers never wait for the writer at all.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A handle on one store: one SQLite or PostgreSQL connection. Writers
/// take `&mut self`.
#[derive(Debug)]
pub struct Journal {
    conn: Db,
    /// The store's path as shown in errors (`:memory:` for tests), or its
    /// PostgreSQL URL without any password.
    store: String,
    store_id: String,
}

impl Journal {
    /// Opens the store at `path`, creating the file and its directories when
    /// missing, and migrates it to this Canopy's schema. Readers and the
    /// owning engine both use this; ownership is [`acquire_owner`]'s job.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        Self::open_with_id(path, None)
    }

    /// Opens the journal at `path`; when it creates the store, the store
    /// takes `new_id` (6 hex digits) instead of a random id.
    pub fn open_with_id(path: &Path, new_id: Option<&str>) -> Result<Journal, JournalError> {
        let store = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::private::dir_all(dir)
                .map_err(|source| JournalError::CreateDir { path: dir.to_path_buf(), source })?;
        }
        // Created 0600 before SQLite opens it (an empty file is a new
        // database), so the journal is never, even briefly, readable by
        // others; SQLite gives its -wal and -shm files the same mode.
        match crate::private::new_file(path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(JournalError::CreateFile { path: path.to_path_buf(), source }),
        }
        let conn = Connection::open(path).map_err(|source| JournalError::open(&store, source.into()))?;
        Self::start(conn, store, new_id)
    }

    /// Connects to the PostgreSQL database at `url`
    /// (`postgres://user@host:port/db`; `?options=-csearch_path%3DNAME`
    /// puts the journal in schema NAME) with `password`, and migrates it to
    /// this Canopy's schema, creating the tables in a database that has
    /// none. The password is never shown: errors name the URL without it.
    pub fn open_postgres(url: &str, password: Option<&str>) -> Result<Journal, JournalError> {
        Self::open_postgres_with_id(url, password, None)
    }

    /// [`open_postgres`](Self::open_postgres); a store created now takes
    /// `new_id` instead of a random id.
    pub fn open_postgres_with_id(
        url: &str,
        password: Option<&str>,
        new_id: Option<&str>,
    ) -> Result<Journal, JournalError> {
        let store = shown_url(url);
        let mut config: postgres::Config =
            url.parse().map_err(|source| JournalError::Url { store: store.clone(), source })?;
        if let Some(password) = password {
            config.password(password);
        }
        if config.get_application_name().is_none() {
            config.application_name("canopy");
        }
        config.connect_timeout(BUSY_TIMEOUT);
        let client = db::off_runtime(|| config.connect(postgres::NoTls))
            .map_err(|source| JournalError::open(&store, DbError::Postgres(source)))?;
        let mut conn = Db::Postgres(Box::new(std::cell::RefCell::new(db::Pg::new(client, config))));
        let store_id = schema::migrate(&mut conn, &store, new_id)?;
        Ok(Journal { conn, store, store_id })
    }

    /// A private store that lives as long as the handle; for tests.
    pub fn open_in_memory() -> Result<Journal, JournalError> {
        let store = ":memory:".to_string();
        let conn =
            Connection::open_in_memory().map_err(|source| JournalError::open(&store, source.into()))?;
        Self::start(conn, store, None)
    }

    fn start(conn: Connection, store: String, new_id: Option<&str>) -> Result<Journal, JournalError> {
        schema::configure(&conn, &store)?;
        let mut conn = Db::Sqlite(conn);
        let store_id = schema::migrate(&mut conn, &store, new_id)?;
        Ok(Journal { conn, store, store_id })
    }

    /// Fences every later write on this handle with `lease`: each write
    /// transaction first checks that the lease row still holds this
    /// owner's epoch and is refused ([`JournalError::LeaseLost`], nothing
    /// written) once another engine took the journal over. The owning
    /// engine fences its journal right after taking the lease. A SQLite
    /// store's owner lock is a file lock: nothing changes there.
    pub fn fence(&mut self, lease: &Lease) {
        self.conn.fence(lease.epoch());
    }

    /// Whether this journal is on PostgreSQL (else a SQLite file).
    pub fn is_postgres(&self) -> bool {
        matches!(self.conn, Db::Postgres(_))
    }

    /// How many statements this connection has sent to PostgreSQL, each a
    /// round trip (transactions' `BEGIN` and `COMMIT` not counted); 0 on
    /// SQLite. What an append costs on a server, for tests and diagnosis.
    pub fn statements_run(&self) -> u64 {
        self.conn.statements_run()
    }

    /// The store's random 6-hex id, made once when the store was created.
    /// It scopes attempt tokens to this store (see `AttemptId::token`).
    pub fn store_id(&self) -> &str {
        &self.store_id
    }

    /// The store's path as given to [`Journal::open`], or its URL without
    /// a password.
    pub fn store(&self) -> &str {
        &self.store
    }
}

/// Where a journal lives: a SQLite file (the embedded default) or a
/// PostgreSQL database (`[journal] url` in canopy.toml).
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    File(PathBuf),
    /// `password`: the value of the variable `[journal] password_env`
    /// names; never shown (`Debug` hides it).
    Postgres {
        url: String,
        password: Option<String>,
    },
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => f.debug_tuple("File").field(p).finish(),
            Location::Postgres { url, password } => f
                .debug_struct("Postgres")
                .field("url", &shown_url(url))
                .field("password", &password.as_ref().map(|_| "<hidden>"))
                .finish(),
        }
    }
}

impl Location {
    /// Opens (and migrates) the journal here.
    pub fn open(&self) -> Result<Journal, JournalError> {
        self.open_with_id(None)
    }

    /// [`open`](Self::open); a store created now takes `new_id`.
    pub fn open_with_id(&self, new_id: Option<&str>) -> Result<Journal, JournalError> {
        match self {
            Location::File(path) => Journal::open_with_id(path, new_id),
            Location::Postgres { url, password } => {
                Journal::open_postgres_with_id(url, password.as_deref(), new_id)
            }
        }
    }

    /// The journal as shown to people: its path, or its URL without a
    /// password.
    pub fn shown(&self) -> String {
        match self {
            Location::File(p) => p.display().to_string(),
            Location::Postgres { url, .. } => shown_url(url),
        }
    }

    /// Takes ownership for this engine: the lock file next to a SQLite
    /// store, the lease row of a PostgreSQL one.
    pub fn acquire_owner(&self, now: crate::engine::model::Millis) -> Result<Ownership, JournalError> {
        match self {
            Location::File(path) => acquire_owner(path, now).map(Ownership::File),
            Location::Postgres { .. } => lease::acquire(self, LEASE_TERM, "").map(Ownership::Lease),
        }
    }

    /// Takes the lease of a PostgreSQL journal for `term`, advertising
    /// `address` (the API URL standbys forward to; empty for none); on a
    /// SQLite file, its owner lock as [`acquire_owner`](Self::acquire_owner).
    pub fn take(
        &self,
        now: crate::engine::model::Millis,
        term: Duration,
        address: &str,
    ) -> Result<Ownership, JournalError> {
        match self {
            Location::File(path) => acquire_owner(path, now).map(Ownership::File),
            Location::Postgres { .. } => lease::acquire(self, term, address).map(Ownership::Lease),
        }
    }
}

impl Location {
    /// [`take`](Self::take) on a PostgreSQL journal, on the connection
    /// `j` opened on it: the lease when taken; otherwise the error, with
    /// the connection when it is still good for another try (the lease
    /// was held by another server).
    pub fn take_on(&self, j: Journal, term: Duration, address: &str) -> Result<Lease, Box<NotTaken>> {
        match self {
            Location::Postgres { .. } => lease::acquire_on(self, j, term, address),
            Location::File(_) => Err(Box::new(NotTaken {
                error: JournalError::Invalid {
                    what: "the journal's lease".into(),
                    detail: "a journal file has no lease: its owner holds a lock".into(),
                },
                conn: Some(j),
            })),
        }
    }
}

/// An engine's hold on its journal; dropping it gives the journal up.
#[derive(Debug)]
pub enum Ownership {
    File(OwnerLock),
    Lease(Lease),
}

/// What went wrong with a store, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(
        "cannot create the directory {path} for the store: {source}; check its permissions or use --store to pick another store"
    )]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot create the store file {path}: {source}; check its directory's permissions or use --store to pick another store"
    )]
    CreateFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the store {store}: {source}; {hint}")]
    Open {
        store: String,
        hint: &'static str,
        #[source]
        source: DbError,
    },
    #[error(
        "the journal URL {store} is not a PostgreSQL URL: {source}; write it as postgres://USER@HOST:PORT/DATABASE in [journal] url"
    )]
    Url {
        store: String,
        #[source]
        source: postgres::Error,
    },
    #[error(
        "{store} is not a Canopy store (it holds tables Canopy did not create); use --store to pick another file"
    )]
    NotAStore { store: String },
    #[error(
        "the store {store} was written by a newer Canopy (schema version {found}; this Canopy knows up to {supported}); upgrade Canopy or use --store to pick another store"
    )]
    NewerSchema { store: String, found: i64, supported: i64 },
    #[error("the store {store} could not {action}: {source}; {hint}")]
    Store {
        store: String,
        action: &'static str,
        hint: &'static str,
        #[source]
        source: DbError,
    },
    #[error("cannot record {what}: {detail}; this is a bug in Canopy, please report it")]
    Invalid { what: String, detail: String },
    #[error(
        "the store {store} is owned by another engine ({owner}); stop it or use --store to pick another store"
    )]
    Owned { store: PathBuf, owner: String },
    #[error(
        "the journal {store} already holds workloads or commits; copy a store only into an empty database (or a new schema)"
    )]
    NotEmpty { store: String },
    #[error(
        "the journal {store} is owned by another engine ({owner}, its lease runs until {until}); stop it, or wait for its lease to run out if it died"
    )]
    Leased { store: String, owner: String, until: String },
    #[error(
        "this server no longer holds the journal's lease on {store} (epoch {epoch}; now held by {now_held_by} at epoch {now_epoch}): it stopped writing; restart it or let it stand by"
    )]
    LeaseLost { store: String, epoch: i64, now_held_by: String, now_epoch: i64 },
    #[error("cannot lock {path}: {source}; check the permissions of the store's directory")]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl JournalError {
    fn open(store: &str, source: DbError) -> JournalError {
        JournalError::Open { store: store.to_string(), hint: hint(&source), source }
    }

    /// Whether this is PostgreSQL being out of reach rather than anything
    /// about the journal itself: the connection lost or refused, or the
    /// server shutting down or starting (SQLSTATE classes 08 and 57P). A
    /// write that failed so may or may not have been committed; the
    /// journal is fine, and trying again once the server is back (on a
    /// new connection, after reading the journal again) is the cure.
    pub fn unreachable(&self) -> bool {
        let (JournalError::Open { source: DbError::Postgres(e), .. }
        | JournalError::Store { source: DbError::Postgres(e), .. }) = self
        else {
            return false;
        };
        db::connection_lost(e)
    }
}

/// Wraps a store's error with the store and the action that failed.
fn failed<'a>(store: &'a str, action: &'static str) -> impl Fn(DbError) -> JournalError + 'a {
    move |source| match source {
        // The fence refused the write: said as itself, not as a store error.
        DbError::LeaseLost { epoch, holder, held } => {
            JournalError::LeaseLost { store: store.to_string(), epoch, now_held_by: holder, now_epoch: held }
        }
        source => JournalError::Store { store: store.to_string(), action, hint: hint(&source), source },
    }
}

/// `url` as shown to people: any password in it removed.
pub fn shown_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(u, _)| u);
            format!("{scheme}://{user}@{host}{tail}")
        }
        None => url.to_string(),
    }
}

/// What an operator can do about a store's error.
fn hint(e: &DbError) -> &'static str {
    match e {
        DbError::Sqlite(e) => sqlite_hint(e),
        DbError::Postgres(e) => postgres_hint(e),
        DbError::Closed => "the journal was being closed; this is a bug in Canopy, please report it",
        DbError::LeaseLost { .. } => {
            "another server took the journal's lease over; restart this one or let it stand by"
        }
        DbError::Type { .. } => {
            "the store holds data this Canopy cannot read: it may be damaged or written by an incompatible version"
        }
    }
}

/// What an operator can do about a PostgreSQL error.
fn postgres_hint(e: &postgres::Error) -> &'static str {
    use postgres::error::SqlState as S;
    let Some(code) = e.code() else {
        return if e.is_closed() {
            "the connection to PostgreSQL was lost; check that the server runs and is reachable, then try again"
        } else {
            "check that PostgreSQL runs at that address and accepts connections from this host"
        };
    };
    match code {
        c if *c == S::INVALID_PASSWORD || *c == S::INVALID_AUTHORIZATION_SPECIFICATION => {
            "check the user in the URL and the password in the variable [journal] password_env names"
        }
        c if *c == S::INVALID_CATALOG_NAME => "create the database (createdb) or fix the URL's database name",
        c if *c == S::INSUFFICIENT_PRIVILEGE => {
            "grant the URL's role the right to create and write tables in its schema"
        }
        c if *c == S::T_R_SERIALIZATION_FAILURE || *c == S::T_R_DEADLOCK_DETECTED => {
            "another server wrote at the same moment; try again"
        }
        c if *c == S::DISK_FULL => "free some disk space on the database server and try again",
        c if *c == S::TOO_MANY_CONNECTIONS => {
            "the database server has no free connection; raise max_connections or try again"
        }
        c if *c == S::ADMIN_SHUTDOWN || *c == S::CRASH_SHUTDOWN || *c == S::CANNOT_CONNECT_NOW => {
            "the database server is restarting; try again once it is up"
        }
        c if c.code().starts_with("23") || c.code().starts_with("42") => {
            "this is a bug in Canopy, please report it"
        }
        _ => "check the database server's log, and report a bug if it persists",
    }
}

/// What an operator can do about a SQLite error.
fn sqlite_hint(e: &rusqlite::Error) -> &'static str {
    use rusqlite::ErrorCode as C;
    match e {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::IntegralValueOutOfRange(..) => {
            "the store holds data this Canopy cannot read: it may be damaged or written by an incompatible version"
        }
        _ => match e.sqlite_error_code() {
            Some(C::DatabaseBusy | C::DatabaseLocked) => {
                "another process kept the store busy for over 5 s; try again"
            }
            Some(C::DiskFull) => "free some disk space and try again",
            Some(C::ReadOnly | C::PermissionDenied | C::CannotOpen) => {
                "check the permissions of the store file and its directory"
            }
            Some(C::NotADatabase) => "the file is not a Canopy store; use --store to pick another",
            Some(C::DatabaseCorrupt) => {
                "the store file is damaged; move it aside and start a new store (--store)"
            }
            Some(C::ConstraintViolation) => "this is a bug in Canopy, please report it",
            _ => "check the disk and the store file, and report a bug if it persists",
        },
    }
}
