//! A PostgreSQL cluster of a test's own (`scripts/engines/postgres.sh`
//! under a temporary `CANOPY_ENGINES_DIR`, on a free port), never the
//! shared one: a test may stop and start it, or count what happened on it.
//! Without PostgreSQL installed (or able to start) [`Cluster::start`]
//! says "skipped: …" and the test passes, unless `CANOPY_ENGINES=require`.

#![allow(dead_code)]

use std::process::{Command, Output, Stdio};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/engines/postgres.sh");

/// A PostgreSQL cluster of a test's own; stopped when dropped (a failed
/// assertion included), its directory removed with it.
pub struct Cluster {
    dir: tempfile::TempDir,
    port: u16,
    pub url: String,
    pub password: String,
}

impl Cluster {
    /// Starts one, or says why it cannot (`None`: skipped).
    pub fn start() -> Option<Cluster> {
        let require = std::env::var("CANOPY_ENGINES").is_ok_and(|v| v == "require");
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut c = Cluster { dir, port, url: String::new(), password: String::new() };
        let out = c.script("start");
        if !out.status.success() {
            let why = format!(
                "a private PostgreSQL cluster did not start: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!require, "CANOPY_ENGINES=require but {why}");
            eprintln!("skipped: {why}");
            return None;
        }
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            if let Some(u) = line.strip_prefix("export CANOPY_TEST_POSTGRES=") {
                c.url = u.to_string();
            } else if let Some(p) = line.strip_prefix("export CANOPY_TEST_POSTGRES_PASSWORD=") {
                c.password = p.to_string();
            }
        }
        assert!(c.url.contains(&format!(":{port}/")), "{out:?}");
        Some(c)
    }

    fn script(&self, what: &str) -> Output {
        Command::new("bash")
            .arg(SCRIPT)
            .arg(what)
            .env("CANOPY_ENGINES_DIR", self.dir.path())
            .env("CANOPY_PG_PORT", self.port.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    pub fn stop(&self) {
        let out = self.script("stop");
        assert!(out.status.success(), "postgres.sh stop: {out:?}");
    }

    pub fn start_again(&self) {
        let out = self.script("start");
        assert!(out.status.success(), "postgres.sh start: {out:?}");
    }

    /// The sessions PostgreSQL has started on the `canopy` database so far
    /// (`pg_stat_database.sessions`), asked by `psql` (whose own session
    /// counts too).
    pub fn sessions(&self) -> u64 {
        let out = Command::new("psql")
            .arg(&self.url)
            .args(["-tAc", "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"])
            .env("PGPASSWORD", &self.password)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "psql: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("psql: {out:?}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.script("stop");
    }
}
