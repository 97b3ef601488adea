//! Reading the store back: recovery for the engine, queries for the CLI
//! and a second console. Readers never take the write lock.

use super::codec::{id_from_sql, id_to_sql, json, millis, name, opt_json, opt_millis, opt_name};
use super::db::{DbError, Dialect, Exec, Row};
use super::{Journal, JournalError, failed};
use crate::engine::model::{
    AttemptId, AttemptRecord, EventRecord, HealthObservation, Millis, NodeIntent, RETRY_OF, WorkloadId,
    WorkloadRecord, WorkloadState,
};
use rusqlite::ToSql;
use rusqlite::types::Value;

/// Everything the engine needs to resume after a restart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Recovered {
    /// Every workload whose state is not final, by id.
    pub workloads: Vec<WorkloadRecord>,
    /// Every attempt of those workloads, by workload then attempt number.
    pub attempts: Vec<AttemptRecord>,
    /// The highest workload id ever assigned in this store (final ones
    /// included); the next id is one more. `None` in a new store.
    pub max_workload_id: Option<WorkloadId>,
    /// Recent health observations, oldest first (see [`HealthWindow`]).
    pub health: Vec<HealthObservation>,
    /// Operators' standing cordons and drains, by node.
    pub intents: Vec<NodeIntent>,
}

/// Which health observations recovery brings back: those at or after
/// `since`, at most the `limit` newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthWindow {
    pub since: Millis,
    pub limit: usize,
}

/// Which workloads [`Journal::workloads`] lists. The default lists all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadFilter {
    /// Any of these states; empty means any state.
    pub states: Vec<WorkloadState>,
    /// Names containing this, ignoring ASCII case.
    pub name_contains: Option<String>,
    /// Updated at or after this.
    pub updated_since: Option<Millis>,
    /// At most this many, newest (highest id) first.
    pub limit: Option<usize>,
    /// Only ids below this one: the cursor of the next page.
    pub before: Option<WorkloadId>,
    /// Carrying this label with this value.
    pub label: Option<(String, String)>,
    /// With an attempt at this provider.
    pub provider: Option<String>,
    /// Submitted by this principal.
    pub submitted_by: Option<String>,
    /// Only failures nobody has resolved: failed, not acknowledged and not
    /// retried (`canopy retry`). What triage must show whatever its age.
    pub unresolved: bool,
    /// Each of these must hold: the listing a principal may see, the
    /// tenant asked for.
    pub tenants: Vec<TenantFilter>,
}

/// Workloads of one tenant (a workload from before tenants counts as
/// `default_tenant`'s), or with an attempt at one of these providers or
/// `provider/pool`s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantFilter {
    pub tenant: Option<String>,
    /// Rows with no tenant count too (`tenant` is the default tenant).
    pub untenanted: bool,
    pub providers: Vec<String>,
    pub pools: Vec<String>,
}

impl TenantFilter {
    /// `tenant`'s workloads, when `default` is the default tenant.
    pub fn of(tenant: Option<&str>, default: Option<&str>) -> TenantFilter {
        TenantFilter {
            tenant: tenant.map(str::to_string),
            untenanted: tenant.is_some() && tenant == default,
            ..TenantFilter::default()
        }
    }
}

const WORKLOAD_COLUMNS: &str = "id, name, state, priority, submitted_at, updated_at, attempts, app_failures, \
     not_before, cost_usd, est_cost_usd, reason, class, idempotency_key, spec_hash, spec, submitted_by, \
     acknowledged, exclusions, \
     (SELECT r.id FROM workloads r WHERE r.idempotency_key = 'canopy.retry-of:w-' || workloads.id) AS retried_as, tenant";

const ATTEMPT_COLUMNS: &str = "workload, n, provider, pool, node, region, state, price_per_hour, est_cost_usd, \
     gpus, gpu_memory_gb, score, score_breakdown, placed_at, started_at, ended_at, exit_code, class, rule, \
     evidence, cost_usd, provider_ref, nonce, stop, nodes, checkpoint";

const EVENT_COLUMNS: &str = "seq, at, workload, attempt, kind, message";

const HEALTH_COLUMNS: &str = "at, provider, pool, node, class, ran_s, lift, free";

impl Journal {
    /// Loads what the engine needs to resume, from one consistent snapshot.
    /// A store of 100,000 workloads, half of them live, loads in about
    /// 0.4 s on one core, most of it decoding specs (`benches/journal.rs`).
    pub fn load_live(&self, health: HealthWindow) -> Result<Recovered, JournalError> {
        let err = failed(&self.store, "load the live workloads");
        // A read transaction: every query below sees the same snapshot even
        // while another process writes.
        self.conn.snapshot(|tx| self.load_live_in(tx, health)).map_err(err)
    }

    fn load_live_in(&self, tx: &impl Exec, health: HealthWindow) -> Result<Recovered, DbError> {
        let workloads = tx.query_map(
            &format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE live = 1 ORDER BY id"),
            &[],
            workload_row,
        )?;
        let attempts = tx.query_map(
            &format!(
                "SELECT {ATTEMPT_COLUMNS} FROM attempts \
                 WHERE workload IN (SELECT id FROM workloads WHERE live = 1) ORDER BY workload, n"
            ),
            &[],
            attempt_row,
        )?;
        let max_sql = match tx.dialect() {
            Dialect::Sqlite => {
                "SELECT max(coalesce((SELECT value FROM meta WHERE key = 'max_workload_id'), 0), \
                        coalesce((SELECT max(id) FROM workloads), 0))"
            }
            Dialect::Postgres => {
                "SELECT GREATEST(coalesce((SELECT CAST(value AS BIGINT) FROM meta WHERE key = 'max_workload_id'), 0), \
                        coalesce((SELECT max(id) FROM workloads), 0))"
            }
        };
        let max: i64 = tx.query_one(max_sql, &[], |r| r.get(0))?;
        let max_workload_id = u64::try_from(max).ok().filter(|&id| id > 0).map(WorkloadId);
        let limit = i64::try_from(health.limit).unwrap_or(i64::MAX);
        let health = tx.query_map(
            &format!(
                "SELECT {HEALTH_COLUMNS} FROM (SELECT seq, {HEALTH_COLUMNS} FROM health_observations \
                 WHERE at >= ?1 ORDER BY at DESC, seq DESC LIMIT ?2) AS recent ORDER BY at, seq"
            ),
            &[&health.since.0, &limit],
            health_row,
        )?;
        let intents = tx.query_map(
            "SELECT node, state, by, reason, at, until FROM node_intents ORDER BY node",
            &[],
            |r| {
                Ok(NodeIntent {
                    node: r.get(0)?,
                    state: name(r, 1)?,
                    by: r.get(2)?,
                    reason: r.get(3)?,
                    at: millis(r, 4)?,
                    until: opt_millis(r, 5)?,
                })
            },
        )?;
        Ok(Recovered { workloads, attempts, max_workload_id, health, intents })
    }

    /// The current row of one workload.
    pub fn workload(&self, id: WorkloadId) -> Result<Option<WorkloadRecord>, JournalError> {
        let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE id = ?1");
        let id = id_to_sql(id)?;
        self.conn.query_opt(&sql, &[&id], workload_row).map_err(failed(&self.store, "read a workload"))
    }

    /// Where queued workload `w` stands in its tenant's queue: how many of
    /// the tenant's queued workloads come before it (higher priority, or
    /// the same and older: the scheduler's order) and how many are queued
    /// in all. `None` for a workload without a tenant or not queued.
    pub fn tenant_queue_position(&self, w: &WorkloadRecord) -> Result<Option<(u64, u64)>, JournalError> {
        let Some(tenant) = w.tenant.as_deref().filter(|_| w.state == WorkloadState::Queued) else {
            return Ok(None);
        };
        let sql = "SELECT COUNT(*) FILTER (WHERE priority > ?2 OR (priority = ?2 AND id < ?3)), COUNT(*) \
                   FROM workloads WHERE tenant = ?1 AND state = 'queued'";
        let id = id_to_sql(w.id)?;
        self.conn
            .query_one(sql, rusqlite::params![tenant, w.priority, id], |r| {
                Ok((r.get::<i64>(0)?.max(0) as u64, r.get::<i64>(1)?.max(0) as u64))
            })
            .map(Some)
            .map_err(failed(&self.store, "read a tenant's queue"))
    }

    /// The workload submitted with this idempotency key, if any.
    pub fn workload_by_key(&self, key: &str) -> Result<Option<WorkloadRecord>, JournalError> {
        let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE idempotency_key = ?1");
        self.conn
            .query_opt(&sql, &[&key], workload_row)
            .map_err(failed(&self.store, "look up an idempotency key"))
    }

    /// The workloads submitted with any of `keys`, in no particular order:
    /// one round trip on PostgreSQL however many keys (a group commit's
    /// keyed submits are looked up together).
    pub fn workloads_by_keys(&self, keys: &[String]) -> Result<Vec<WorkloadRecord>, JournalError> {
        let one = format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE idempotency_key = ?1");
        let many =
            format!("SELECT {WORKLOAD_COLUMNS} FROM workloads WHERE idempotency_key = ANY(?1::TEXT[])");
        let keys = keys.iter().map(|k| Value::Text(k.clone())).collect();
        self.conn
            .query_each(&one, &many, keys, workload_row)
            .map_err(failed(&self.store, "look up idempotency keys"))
    }

    /// Workloads matching `filter`, newest first.
    pub fn workloads(&self, filter: &WorkloadFilter) -> Result<Vec<WorkloadRecord>, JournalError> {
        let (filter_sql, mut args) = where_clause(filter, self.conn.dialect())?;
        let limit = filter.limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        args.push(Value::Integer(limit));
        let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM workloads {filter_sql} ORDER BY id DESC LIMIT ?");
        self.conn.query_map(&sql, &refs(&args), workload_row).map_err(failed(&self.store, "list workloads"))
    }

    /// How many workloads match `filter`, ignoring its limit and cursor:
    /// the M of a list's "N of M".
    pub fn count_workloads(&self, filter: &WorkloadFilter) -> Result<u64, JournalError> {
        let filter = WorkloadFilter { limit: None, before: None, ..filter.clone() };
        let (filter_sql, args) = where_clause(&filter, self.conn.dialect())?;
        let sql = format!("SELECT count(*) FROM workloads {filter_sql}");
        self.conn
            .query_one(&sql, &refs(&args), |r| r.get::<i64>(0))
            .map(|n| n.max(0) as u64)
            .map_err(failed(&self.store, "count workloads"))
    }

    /// The attempts of one workload, first to last.
    pub fn attempts(&self, id: WorkloadId) -> Result<Vec<AttemptRecord>, JournalError> {
        self.attempts_between(id, id)
    }

    /// The attempts of the workloads with ids in `lo..=hi`, by workload
    /// then attempt: one query for a page of workloads.
    ///
    /// A range, even for one workload: with `workload = ?1 ORDER BY n`
    /// this SQLite build (STAT4) marks the plan as depending on the bound
    /// value, and every reuse of the cached statement (rusqlite clears its
    /// bindings) parses it again, a third of a submit's cost on the API's
    /// hot path.
    pub fn attempts_between(
        &self,
        lo: WorkloadId,
        hi: WorkloadId,
    ) -> Result<Vec<AttemptRecord>, JournalError> {
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE workload BETWEEN ?1 AND ?2 ORDER BY workload, n"
        );
        self.conn
            .query_map(&sql, &[&id_to_sql(lo)?, &id_to_sql(hi)?], attempt_row)
            .map_err(failed(&self.store, "read attempts"))
    }

    /// GPUs held by attempts that held any at or after `since` (live ones
    /// included), with their workload's tenant: what fair share's decayed
    /// usage is rebuilt from at start. Oldest placement first.
    pub fn gpu_use_since(&self, since: Millis) -> Result<Vec<crate::tenant::fair::Use>, JournalError> {
        self.conn.query_map(
            "SELECT w.tenant, a.pool, a.gpus, a.nodes, a.placed_at, a.ended_at FROM attempts a \
             JOIN workloads w ON w.id = a.workload \
             WHERE a.gpus > 0 AND (a.ended_at IS NULL OR a.ended_at >= ?1) ORDER BY a.placed_at, a.workload, a.n",
            &[&since.0],
            |r| {
                let nodes: Option<String> = r.get(3)?;
                let n = nodes.and_then(|j| serde_json::from_str::<Vec<String>>(&j).ok()).map_or(1, |v| v.len().max(1));
                let gpus: i64 = r.get(2)?;
                Ok(crate::tenant::fair::Use {
                    tenant: r.get(0)?,
                    pool: r.get(1)?,
                    gpus: gpus.max(0) as f64 * n as f64,
                    from: millis(r, 4)?,
                    to: opt_millis(r, 5)?,
                })
            },
        )
        .map_err(failed(&self.store, "read GPU use for fair share"))
    }

    /// Attempts that ended at or after `since`, with their workload's
    /// tenant and submitter, oldest end first: what budgets rebuild the
    /// spend of ended work from at start (`engine::core::budget`).
    pub fn closed_attempts_since(
        &self,
        since: Millis,
    ) -> Result<Vec<crate::engine::core::Closed>, JournalError> {
        let cols: Vec<String> = ATTEMPT_COLUMNS.split(',').map(|c| format!("a.{}", c.trim())).collect();
        let sql = format!(
            "SELECT {}, w.tenant, w.submitted_by FROM attempts a JOIN workloads w ON w.id = a.workload \
             WHERE a.ended_at IS NOT NULL AND a.ended_at >= ?1 ORDER BY a.ended_at, a.workload, a.n",
            cols.join(", ")
        );
        self.conn
            .query_map(&sql, &[&since.0], |r| {
                // The two workload columns follow the attempt's.
                let n = ATTEMPT_COLUMNS.split(',').count();
                Ok(crate::engine::core::Closed {
                    attempt: attempt_row(r)?,
                    tenant: r.get(n)?,
                    user: r.get(n + 1)?,
                })
            })
            .map_err(failed(&self.store, "read ended attempts for budgets"))
    }

    /// The attempts of these workloads, by workload then attempt: one
    /// query when their ids are close (a page of neighbours), one per
    /// workload when they are scattered (unresolved failures across a long
    /// history).
    pub fn attempts_of(&self, ids: &[WorkloadId]) -> Result<Vec<AttemptRecord>, JournalError> {
        let (Some(lo), Some(hi)) = (ids.iter().min(), ids.iter().max()) else { return Ok(Vec::new()) };
        if hi.0 - lo.0 < 4 * ids.len() as u64 + 16 {
            let wanted: std::collections::HashSet<WorkloadId> = ids.iter().copied().collect();
            let mut all = self.attempts_between(*lo, *hi)?;
            all.retain(|a| wanted.contains(&a.id.workload));
            return Ok(all);
        }
        let mut sorted = ids.to_vec();
        sorted.sort();
        let mut all = Vec::new();
        for id in sorted {
            all.extend(self.attempts(id)?);
        }
        Ok(all)
    }

    /// The events of one workload in the order they were appended.
    pub fn events(&self, id: WorkloadId) -> Result<Vec<EventRecord>, JournalError> {
        // A range for one value: see `attempts_between`.
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE workload BETWEEN ?1 AND ?1 ORDER BY workload, seq"
        );
        let rows = self
            .conn
            .query_map(&sql, &[&id_to_sql(id)?], event_row)
            .map_err(failed(&self.store, "read events"))?;
        Ok(rows.into_iter().map(|(_, e)| e).collect())
    }

    /// Up to `limit` events appended after sequence number `seq`, oldest
    /// first, with their sequence numbers: tail the log by passing the last
    /// one seen. Start from [`Journal::last_event_seq`] to see only new ones,
    /// or from 0 for everything.
    pub fn events_since(&self, seq: i64, limit: usize) -> Result<Vec<(i64, EventRecord)>, JournalError> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2");
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.conn.query_map(&sql, &[&seq, &limit], event_row).map_err(failed(&self.store, "read events"))
    }

    /// The sequence number of the newest event; 0 when there is none.
    pub fn last_event_seq(&self) -> Result<i64, JournalError> {
        self.conn
            .query_one("SELECT coalesce(max(seq), 0) FROM events", &[], |r| r.get(0))
            .map_err(failed(&self.store, "read events"))
    }

    /// Health observations at or after `since`, oldest first.
    pub fn health_observations(&self, since: Millis) -> Result<Vec<HealthObservation>, JournalError> {
        let sql = format!("SELECT {HEALTH_COLUMNS} FROM health_observations WHERE at >= ?1 ORDER BY at, seq");
        self.conn
            .query_map(&sql, &[&since.0], health_row)
            .map_err(failed(&self.store, "read health observations"))
    }
}

/// The `WHERE` clause of a workload listing and its arguments.
fn where_clause(filter: &WorkloadFilter, dialect: Dialect) -> Result<(String, Vec<Value>), JournalError> {
    let mut clauses: Vec<String> = Vec::new();
    let mut args: Vec<Value> = Vec::new();
    let live =
        [WorkloadState::Queued, WorkloadState::Placing, WorkloadState::Launching, WorkloadState::Running];
    let mut asked = filter.states.clone();
    asked.sort_by_key(|s| s.as_str());
    asked.dedup();
    let mut live_sorted = live.to_vec();
    live_sorted.sort_by_key(|s| s.as_str());
    if asked == live_sorted {
        // Exactly the live states: the partial index keeps id order.
        clauses.push("live = 1".into());
    } else if !filter.states.is_empty() {
        let marks = vec!["?"; filter.states.len()].join(", ");
        clauses.push(format!("state IN ({marks})"));
        args.extend(filter.states.iter().map(|s| Value::Text(s.as_str().into())));
    }
    if let Some(needle) = &filter.name_contains {
        clauses.push(match dialect {
            Dialect::Sqlite => "instr(lower(name), lower(?)) > 0".into(),
            Dialect::Postgres => "strpos(lower(name), lower(?)) > 0".into(),
        });
        args.push(Value::Text(needle.clone()));
    }
    if let Some(since) = filter.updated_since {
        clauses.push("updated_at >= ?".into());
        args.push(Value::Integer(since.0));
    }
    if let Some(before) = filter.before {
        clauses.push("id < ?".into());
        args.push(Value::Integer(id_to_sql(before)?));
    }
    if let Some((key, value)) = &filter.label {
        match dialect {
            Dialect::Sqlite => {
                // A JSON path with the key quoted, so dots in it stay literal.
                clauses.push("json_extract(spec, ?) = ?".into());
                args.push(Value::Text(format!("$.labels.\"{}\"", key.replace('"', ""))));
            }
            Dialect::Postgres => {
                clauses.push("(CAST(spec AS jsonb) -> 'labels' ->> CAST(? AS TEXT)) = ?".into());
                args.push(Value::Text(key.replace('"', "")));
            }
        }
        args.push(Value::Text(value.clone()));
    }
    if let Some(provider) = &filter.provider {
        clauses.push("id IN (SELECT workload FROM attempts WHERE provider = ?)".into());
        args.push(Value::Text(provider.clone()));
    }
    if let Some(by) = &filter.submitted_by {
        clauses.push("submitted_by = ?".into());
        args.push(Value::Text(by.clone()));
    }
    for t in &filter.tenants {
        let mut any: Vec<String> = Vec::new();
        if let Some(name) = &t.tenant {
            // `tenant = ?` uses the (tenant, id) index.
            any.push("tenant = ?".into());
            args.push(Value::Text(name.clone()));
        }
        if t.untenanted {
            any.push("tenant IS NULL".into());
        }
        if !t.providers.is_empty() || !t.pools.is_empty() {
            let mut on: Vec<String> = Vec::new();
            if !t.providers.is_empty() {
                on.push(format!("provider IN ({})", vec!["?"; t.providers.len()].join(", ")));
                args.extend(t.providers.iter().map(|x| Value::Text(x.clone())));
            }
            if !t.pools.is_empty() {
                on.push(format!("pool IN ({})", vec!["?"; t.pools.len()].join(", ")));
                args.extend(t.pools.iter().map(|x| Value::Text(x.clone())));
            }
            any.push(format!("id IN (SELECT workload FROM attempts WHERE {})", on.join(" OR ")));
        }
        if any.is_empty() {
            any.push("1 = 0".into());
        }
        clauses.push(format!("({})", any.join(" OR ")));
    }
    if filter.unresolved {
        clauses.push(format!(
            "state = 'failed' AND acknowledged IS NULL AND NOT EXISTS \
             (SELECT 1 FROM workloads r WHERE r.idempotency_key = '{RETRY_OF}:w-' || workloads.id)"
        ));
    }
    let filter_sql =
        if clauses.is_empty() { String::new() } else { format!("WHERE {}", clauses.join(" AND ")) };
    Ok((filter_sql, args))
}

/// `args` as statement parameters.
fn refs(args: &[Value]) -> Vec<&dyn ToSql> {
    args.iter().map(|v| v as &dyn ToSql).collect()
}

fn workload_row(r: &Row) -> rusqlite::Result<WorkloadRecord> {
    Ok(WorkloadRecord {
        id: id_from_sql(r, 0)?,
        name: r.get(1)?,
        state: name(r, 2)?,
        priority: r.get(3)?,
        submitted_at: millis(r, 4)?,
        updated_at: millis(r, 5)?,
        attempts: r.get(6)?,
        app_failures: r.get(7)?,
        not_before: opt_millis(r, 8)?,
        cost_usd: r.get(9)?,
        est_cost_usd: r.get(10)?,
        reason: r.get(11)?,
        class: opt_name(r, 12)?,
        idempotency_key: r.get(13)?,
        spec_hash: r.get(14)?,
        spec: json(r, 15)?,
        submitted_by: r.get(16)?,
        acknowledged: opt_json(r, 17)?,
        exclusions: opt_json(r, 18)?,
        retried_as: r.get::<Option<i64>>(19)?.and_then(|n| u64::try_from(n).ok()).map(WorkloadId),
        tenant: r.get(20)?,
    })
}

fn attempt_row(r: &Row) -> rusqlite::Result<AttemptRecord> {
    Ok(AttemptRecord {
        id: AttemptId { workload: id_from_sql(r, 0)?, n: r.get(1)? },
        provider: r.get(2)?,
        pool: r.get(3)?,
        node: r.get(4)?,
        region: r.get(5)?,
        state: name(r, 6)?,
        price_per_hour: r.get(7)?,
        est_cost_usd: r.get(8)?,
        gpus: r.get(9)?,
        gpu_memory_gb: r.get(10)?,
        score: r.get(11)?,
        score_breakdown: r.get(12)?,
        placed_at: millis(r, 13)?,
        started_at: opt_millis(r, 14)?,
        ended_at: opt_millis(r, 15)?,
        exit_code: r.get(16)?,
        class: opt_name(r, 17)?,
        rule: r.get(18)?,
        evidence: r.get(19)?,
        cost_usd: r.get(20)?,
        provider_ref: r.get(21)?,
        nonce: r.get(22)?,
        stop: opt_json(r, 23)?,
        nodes: opt_json(r, 24)?.unwrap_or_default(),
        checkpoint: opt_json(r, 25)?,
    })
}

fn event_row(r: &Row) -> rusqlite::Result<(i64, EventRecord)> {
    let workload = id_from_sql(r, 2)?;
    let attempt: Option<u32> = r.get(3)?;
    let event = EventRecord {
        at: millis(r, 1)?,
        workload,
        attempt: attempt.map(|n| AttemptId { workload, n }),
        kind: name(r, 4)?,
        message: r.get(5)?,
    };
    Ok((r.get(0)?, event))
}

fn health_row(r: &Row) -> rusqlite::Result<HealthObservation> {
    Ok(HealthObservation {
        at: millis(r, 0)?,
        provider: r.get(1)?,
        pool: r.get(2)?,
        node: r.get(3)?,
        class: opt_name(r, 4)?,
        ran_s: r.get(5)?,
        lift: r.get(6)?,
        free: r.get(7)?,
    })
}
