//! The inbox: commands from other processes (the CLI, a second console) to
//! the engine that owns the store, and the engine's answers.
//!
//! A sender pushes a command and polls [`Journal::command_result`] with the
//! sequence number it got. The owning engine takes commands in order, acts,
//! and completes each with a result. The journal only carries them.

use super::{Journal, JournalError, failed};
use crate::engine::model::{Millis, WorkloadId};
use crate::spec::Spec;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

/// What another process asks the owning engine to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "kebab-case")]
pub enum Command {
    Submit { spec: Box<Spec>, idempotency_key: Option<String> },
    Cancel { id: WorkloadId },
    Cordon { node: String },
    Uncordon { node: String },
    Drain { node: String },
    Retry { id: WorkloadId },
}

/// The engine's answer to a [`Command`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum CommandResult {
    /// `existing`: the idempotency key matched an earlier submission, whose
    /// id this is; nothing new was submitted.
    Submitted {
        id: WorkloadId,
        existing: bool,
    },
    Ok {
        message: String,
    },
    Error {
        message: String,
    },
}

impl Journal {
    /// Queues a command for the owning engine; returns its sequence number.
    pub fn push_command(&mut self, cmd: &Command, now: Millis) -> Result<i64, JournalError> {
        let json = serde_json::to_string(cmd)
            .map_err(|e| JournalError::Invalid { what: "a command".into(), detail: e.to_string() })?;
        let err = failed(&self.store, "queue a command");
        self.conn
            .prepare_cached("INSERT INTO inbox (command, pushed_at) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![json, now.0]))
            .map_err(&err)?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Up to `limit` commands not yet taken, oldest first, marked taken.
    ///
    /// A command this Canopy cannot read (sent by a newer CLI, say) is not
    /// returned: it is completed at once with an error saying so, so that
    /// neither the inbox nor its sender waits on it forever.
    pub fn take_commands(&mut self, limit: usize, now: Millis) -> Result<Vec<(i64, Command)>, JournalError> {
        let err = failed(&self.store, "take commands");
        let tx = self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&err)?;
        let rows: Vec<(i64, String)> = {
            let mut stmt = tx
                .prepare_cached("SELECT seq, command FROM inbox WHERE taken_at IS NULL ORDER BY seq LIMIT ?1")
                .map_err(&err)?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            stmt.query_map([limit], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(&err)?
        };
        let mut taken = Vec::with_capacity(rows.len());
        for (seq, json) in rows {
            tx.prepare_cached("UPDATE inbox SET taken_at = ?2 WHERE seq = ?1")
                .and_then(|mut s| s.execute(params![seq, now.0]))
                .map_err(&err)?;
            match serde_json::from_str::<Command>(&json) {
                Ok(cmd) => taken.push((seq, cmd)),
                Err(e) => {
                    tracing::warn!(seq, error = %e, "completing an unreadable inbox command with an error");
                    let result = CommandResult::Error {
                        message: format!(
                            "the engine cannot read this command ({e}); run the same Canopy version for the CLI and the engine"
                        ),
                    };
                    complete(&tx, seq, &result, now).map_err(&err)?;
                }
            }
        }
        tx.commit().map_err(&err)?;
        Ok(taken)
    }

    /// Records the engine's answer to command `seq`.
    pub fn complete_command(
        &mut self,
        seq: i64,
        result: &CommandResult,
        now: Millis,
    ) -> Result<(), JournalError> {
        let changed =
            complete(&self.conn, seq, result, now).map_err(failed(&self.store, "complete a command"))?;
        if changed == 0 {
            return Err(JournalError::NoSuchCommand { store: self.store.clone(), seq });
        }
        Ok(())
    }

    /// The answer to command `seq`; `None` until the engine has answered.
    pub fn command_result(&self, seq: i64) -> Result<Option<CommandResult>, JournalError> {
        let err = failed(&self.store, "read a command's result");
        let row: Option<Option<String>> = self
            .conn
            .prepare_cached("SELECT result FROM inbox WHERE seq = ?1")
            .and_then(|mut s| s.query_row([seq], |r| r.get(0)).optional())
            .map_err(&err)?;
        match row {
            None => Err(JournalError::NoSuchCommand { store: self.store.clone(), seq }),
            Some(None) => Ok(None),
            Some(Some(json)) => serde_json::from_str(&json).map(Some).map_err(|e| {
                err(rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into()))
            }),
        }
    }

    /// Makes commands taken but never completed takeable again; returns how
    /// many. The owning engine calls this once at start-up, after
    /// [`acquire_owner`](super::acquire_owner): a command taken by an engine
    /// that then died would otherwise never be answered. Whether replaying
    /// one is safe is the engine's call (a submit with an idempotency key is).
    pub fn requeue_unfinished(&mut self) -> Result<usize, JournalError> {
        self.conn
            .execute("UPDATE inbox SET taken_at = NULL WHERE taken_at IS NOT NULL AND done_at IS NULL", [])
            .map_err(failed(&self.store, "requeue unfinished commands"))
    }
}

fn complete(
    conn: &rusqlite::Connection,
    seq: i64,
    result: &CommandResult,
    now: Millis,
) -> rusqlite::Result<usize> {
    let json =
        serde_json::to_string(result).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))?;
    conn.prepare_cached("UPDATE inbox SET done_at = ?2, result = ?3 WHERE seq = ?1")?
        .execute(params![seq, now.0, json])
}
