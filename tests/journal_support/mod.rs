//! A store for each test, on SQLite or on PostgreSQL, reaped when dropped.
//!
//! PostgreSQL: `CANOPY_TEST_POSTGRES` (a URL without password, e.g.
//! `postgres://canopy@127.0.0.1:55432/canopy`) and
//! `CANOPY_TEST_POSTGRES_PASSWORD`, as `scripts/engines/postgres.sh env`
//! prints them. Each test gets a schema of its own (so tests run in
//! parallel and never see one another's rows), dropped at the end. Without
//! the variables the PostgreSQL cases say "skipped: …" and pass, unless
//! `CANOPY_ENGINES=require` (what `.ci/run` sets), where they fail.

#![allow(dead_code)]

use canopy::journal::{Journal, JournalError};
use std::path::PathBuf;

pub enum Store {
    Sqlite { _dir: tempfile::TempDir, path: PathBuf },
    Postgres { url: String, password: String, schema: String, admin: Box<postgres::Client> },
}

/// `CANOPY_TEST_POSTGRES` and its password, when set.
pub fn postgres_env() -> Option<(String, String)> {
    let url = std::env::var("CANOPY_TEST_POSTGRES").ok().filter(|u| !u.is_empty());
    let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require");
    match url {
        Some(url) => Some((url, std::env::var("CANOPY_TEST_POSTGRES_PASSWORD").unwrap_or_default())),
        None if require => panic!(
            "CANOPY_ENGINES=require but CANOPY_TEST_POSTGRES is not set: run eval \"$(scripts/engines/postgres.sh start)\""
        ),
        None => None,
    }
}

/// A client on the test database, as the test role.
pub fn admin(url: &str, password: &str) -> postgres::Client {
    let mut config: postgres::Config = url.parse().expect("CANOPY_TEST_POSTGRES is a postgres:// URL");
    config.password(password);
    config.connect(postgres::NoTls).unwrap_or_else(|e| {
        panic!("CANOPY_TEST_POSTGRES={url} is set but PostgreSQL cannot be reached: {e}; run scripts/engines/postgres.sh start")
    })
}

/// A fresh schema name for `test`.
fn schema_name(test: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    let short: String = test.chars().take(30).collect();
    format!("t_{short}_{}_{nanos}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

impl Store {
    pub fn sqlite() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("canopy.db");
        Store::Sqlite { _dir: dir, path }
    }

    /// A store in a new schema, or `None` (said on stderr) when no
    /// PostgreSQL is configured.
    pub fn postgres(test: &str) -> Option<Store> {
        let Some((url, password)) = postgres_env() else {
            eprintln!(
                "skipped: {test} on PostgreSQL: CANOPY_TEST_POSTGRES is not set (scripts/engines/postgres.sh start)"
            );
            return None;
        };
        let mut admin = admin(&url, &password);
        let schema = schema_name(test);
        admin.batch_execute(&format!("CREATE SCHEMA \"{schema}\"")).unwrap();
        Some(Store::Postgres { url, password, schema, admin: Box::new(admin) })
    }

    /// Another, empty store of the same kind.
    pub fn another(&self) -> Store {
        match self {
            Store::Sqlite { .. } => Store::sqlite(),
            Store::Postgres { .. } => Store::postgres("another").unwrap(),
        }
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Store::Postgres { .. })
    }

    /// The URL the journal opens: the database with this test's schema.
    pub fn url(&self) -> String {
        match self {
            Store::Sqlite { path, .. } => path.display().to_string(),
            Store::Postgres { url, schema, .. } => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}options=-csearch_path%3D{schema}")
            }
        }
    }

    pub fn try_open(&self) -> Result<Journal, JournalError> {
        match self {
            Store::Sqlite { path, .. } => Journal::open(path),
            Store::Postgres { password, .. } => Journal::open_postgres(&self.url(), Some(password)),
        }
    }

    /// A new connection to the store (as another process would open it).
    pub fn open(&self) -> Journal {
        self.try_open().unwrap()
    }

    /// Runs SQL on the store behind the journal's back.
    pub fn raw(&mut self, sql: &str) {
        match self {
            Store::Sqlite { path, .. } => {
                rusqlite::Connection::open(&*path).unwrap().execute_batch(sql).unwrap()
            }
            Store::Postgres { schema, admin, .. } => {
                admin.batch_execute(&format!("SET search_path TO \"{schema}\"; {sql}")).unwrap()
            }
        }
    }

    /// The first column of the first row of `sql`, an integer.
    pub fn raw_i64(&mut self, sql: &str) -> i64 {
        match self {
            Store::Sqlite { path, .. } => {
                rusqlite::Connection::open(&*path).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Store::Postgres { schema, admin, .. } => {
                admin.batch_execute(&format!("SET search_path TO \"{schema}\"")).unwrap();
                admin.query_one(sql, &[]).unwrap().get(0)
            }
        }
    }

    /// How many tables the store holds.
    pub fn tables(&mut self) -> i64 {
        let sql = match self {
            Store::Sqlite { .. } => "SELECT count(*) FROM sqlite_schema WHERE type = 'table'",
            Store::Postgres { .. } => {
                "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
            }
        };
        self.raw_i64(sql)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Store::Postgres { schema, admin, .. } = self {
            let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
}

/// Each test body, `fn NAME(s: &mut Store)`, once per store:
/// `sqlite::NAME` and `postgres::NAME`.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(&mut super::journal_support::Store::sqlite()); } )*
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    if let Some(mut s) = super::journal_support::Store::postgres(stringify!($name)) {
                        super::$name(&mut s);
                    }
                }
            )*
        }
    };
}
