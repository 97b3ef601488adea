//! `canopy migrate --to postgres://…`: the store's SQLite journal copied
//! into an empty PostgreSQL database, every table counted on both sides.
//! The engine must be stopped (it owns the file), and the copy holds the
//! database's lease, so no `canopy serve` starts on it meanwhile.

use super::StoreArgs;
use canopy::engine::model::Millis;
use canopy::journal::{Journal, Location, is_owned};
use color_eyre::eyre::{Result, bail, eyre};
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// The PostgreSQL database to copy into: postgres://USER@HOST:PORT/DATABASE
    /// (empty; the tables are made). No password in it.
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// The environment variable holding the database's password.
    #[arg(long, value_name = "VAR", default_value = canopy::config::JOURNAL_PASSWORD_ENV)]
    pub password_env: String,
}

pub fn run(store: &StoreArgs, args: MigrateArgs) -> Result<ExitCode> {
    let entry = canopy::config::JournalEntry {
        url: Some(args.to.clone()),
        password_env: Some(args.password_env),
        lease_term: None,
    };
    entry.check().map_err(|e| eyre!("{}", e.replace("[journal] url", "--to")))?;
    let home = store.home();
    let file = home.store();
    if !file.is_file() {
        bail!("there is no journal at {} to copy; use --store to pick the store", file.display());
    }
    if is_owned(&file)? {
        bail!("an engine owns {}; stop `canopy serve` (or the console) first, then migrate", file.display());
    }
    let to = entry.location(&file, |k| std::env::var(k).ok());
    let now = Millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
    );
    let lease = to.acquire_owner(now)?;
    let from = Journal::open(&file)?;
    let mut dest = to.open()?;
    // The copy commits only while the lease is still ours.
    if let canopy::journal::Ownership::Lease(l) = &lease {
        dest.fence(l);
    }
    let counts = from.copy_into(&mut dest)?;
    let shown = match &to {
        Location::Postgres { .. } => to.shown(),
        Location::File(p) => p.display().to_string(),
    };
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    writeln!(out, "copied {} (store id {}) into {shown}:", file.display(), from.store_id())?;
    for (table, n) in counts {
        writeln!(out, "  {table:<20} {n:>10} rows (counted again in the database)")?;
    }
    writeln!(
        out,
        "next: put [journal] url = \"{shown}\" in canopy.toml, the password in ${}, and start canopy serve",
        entry.password_env.as_deref().unwrap_or(canopy::config::JOURNAL_PASSWORD_ENV)
    )?;
    Ok(ExitCode::SUCCESS)
}
