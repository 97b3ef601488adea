//! Workload and node commands through the API: submit, status, events,
//! artifacts, cancel, retry, cordon, uncordon, drain (logs are in
//! [`super::logs`]). They talk to whatever engine owns the store (its
//! socket) or to `--server URL`; with none answering they say so and exit
//! 4. A request whose answer was lost on the way is exit 7: a submit then
//! prints the idempotency key that sends it again without a duplicate.

mod servers;

use super::table::{cut, new_table, usd};
use super::{
    EXIT_CANCELLED, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_NO_ENGINE, EXIT_UNKNOWN, EXIT_WORKLOAD_FAILED,
    StoreArgs,
};
use canopy::client::{Client, ClientError, new_key};
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::handle::FleetStatus;
use canopy::engine::model::{
    AttemptId, AttemptRecord, EventRecord, Millis, WorkloadId, WorkloadRecord, WorkloadState,
};
use canopy::server::api::{ArtifactView, Page};
use canopy::spec::load::{self, Format};
use canopy::text::{json_with_times as json_pretty, sanitize};
use color_eyre::eyre::{Result, WrapErr};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// The wall clock, read at the edge.
pub fn now() -> Millis {
    use canopy::engine::clock::{Clock, SystemClock};
    SystemClock.now()
}

/// Runs one API conversation on a small runtime. A server that does not
/// answer is exit 4 with what to do; an API error is printed, exit 1.
pub fn with_api<T>(
    store: &StoreArgs,
    f: impl AsyncFnOnce(Client) -> Result<T, ClientError>,
) -> Result<Result<T, ExitCode>> {
    Ok(api(store, f)?.map_err(|e| report(store, &e)))
}

/// Runs one API conversation on a small runtime; the caller reports.
fn api<T>(
    store: &StoreArgs,
    f: impl AsyncFnOnce(Client) -> Result<T, ClientError>,
) -> Result<Result<T, ClientError>> {
    let client = store.client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    Ok(rt.block_on(async move { f(client).await }))
}

/// Prints a client error for people; returns the exit code it means.
pub fn report(store: &StoreArgs, e: &ClientError) -> ExitCode {
    match e {
        ClientError::Unreachable { target, detail } => {
            if store.server.is_some() {
                errln!(
                    "error: no Canopy server answers at {target} ({detail}); check --server and that it runs"
                );
            } else if !store.home().store().exists() {
                // A mistyped --store or CANOPY_HOME: say so rather than
                // suggest starting an engine (which would create it).
                errln!(
                    "error: there is no Canopy store at {}; check --store (or CANOPY_HOME), or start a new store \
                     there with `canopy --store {0} serve`",
                    store.home().root().display()
                );
            } else {
                errln!(
                    "error: no engine owns the store {} (nothing answers on {target}: {detail}); start one with `canopy serve` or `canopy`",
                    store.home().root().display()
                );
            }
            ExitCode::from(EXIT_NO_ENGINE)
        }
        ClientError::Interrupted { .. } => {
            errln!("error: {e}; check whether it took effect before doing it again");
            ExitCode::from(EXIT_UNKNOWN)
        }
        ClientError::Api { message, body, .. } if body["error"]["code"] == "unschedulable" => {
            // As Slurm's "Requested node configuration is not available".
            errln!("error: {message}");
            ExitCode::from(super::EXIT_UNSCHEDULABLE)
        }
        ClientError::Api { message, body, .. } => {
            errln!("error: {message}");
            if let Some(problems) = body["error"]["problems"].as_array() {
                for p in problems.iter().skip(1) {
                    errln!(
                        "  {}:{}:{}: {}",
                        p["file"].as_str().unwrap_or(""),
                        p["line"],
                        p["col"],
                        p["message"].as_str().unwrap_or("")
                    );
                }
            }
            ExitCode::from(EXIT_ERROR)
        }
        ClientError::Decode(m) => {
            errln!("error: {m}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Runs `f` and turns its outcome into the command's exit code.
fn run<T>(
    store: &StoreArgs,
    f: impl AsyncFnOnce(Client) -> Result<T, ClientError>,
    done: impl FnOnce(T) -> Result<ExitCode>,
) -> Result<ExitCode> {
    match with_api(store, f)? {
        Ok(v) => done(v),
        Err(code) => Ok(code),
    }
}

/// How `canopy submit` sends and follows.
pub struct SubmitOptions {
    pub key: Option<String>,
    pub wait: bool,
    /// With `wait`: print the workload's output as it comes.
    pub logs: bool,
    pub tenant: Option<String>,
    pub json: bool,
}

pub fn submit(
    store: &StoreArgs,
    spec_path: &Path,
    from: Option<canopy::import::Source>,
    o: SubmitOptions,
) -> Result<ExitCode> {
    let SubmitOptions { key, wait, logs, tenant, json } = o;
    let wait = match (wait, logs) {
        (false, _) => Wait::No,
        (true, false) => Wait::State,
        (true, true) => Wait::Logs,
    };
    // A SkyPilot or dstack file is converted first (its warnings shown),
    // and the converted spec is what is checked and sent.
    if let Some(format) = from {
        let Some(imported) = super::import::converted(spec_path, format) else {
            return Ok(ExitCode::from(EXIT_ERROR));
        };
        let again = format!("--from {} {}", format.as_str(), shell_word(&spec_path.to_string_lossy()));
        return send(store, &imported.toml, false, (key, tenant.as_deref()), wait, json, &again);
    }
    // Read once, safely (a FIFO or /dev/zero is refused), validated here
    // first so problems are shown against the user's file, and the same
    // text is sent.
    let (source, loaded) = load::load_file_and_text(spec_path);
    let loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            errln!("{}", e.render(&source));
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    for w in &loaded.warnings {
        errln!("{}\n", w.render(&source));
    }
    let again = shell_word(&spec_path.to_string_lossy());
    send(
        store,
        &source,
        Format::from_path(spec_path) == Format::Json,
        (key, tenant.as_deref()),
        wait,
        json,
        &again,
    )
}

/// `s` as one word of a shell command line.
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+,:=@".contains(&b)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// How `submit` follows what it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    No,
    /// To its end, saying each state.
    State,
    /// To its end, with each attempt's output as it comes and the exit code.
    Logs,
}

/// Sends checked spec text; with `wait`, follows the workload to its end.
/// `again` is what follows `canopy submit` to send the same spec again.
fn send(
    store: &StoreArgs,
    source: &str,
    is_json: bool,
    (key, tenant): (Option<String>, Option<&str>),
    wait: Wait,
    json: bool,
    again: &str,
) -> Result<ExitCode> {
    // Always keyed, so a request retried after a lost answer never submits
    // twice.
    let key = key.unwrap_or_else(new_key);
    let submitted = api(store, async |c| c.submit(source, is_json, &key, tenant).await)?;
    let v = match submitted {
        Ok(v) => v,
        Err(ClientError::Interrupted { target, detail }) => {
            // The request went out: the engine may have committed it. Only
            // the same key finds out without submitting twice.
            errln!(
                "error: the connection to {target} broke before the server answered ({detail}): whether the \
                 workload was submitted is unknown.\n  Submit again with the same idempotency key: it returns \
                 the workload if it was committed, and submits it once if it was not:\n  \
                 canopy submit --idempotency-key {} {again}",
                shell_word(&key)
            );
            if json {
                outln!("{}", serde_json::json!({ "outcome": "unknown", "idempotency_key": key }));
            }
            return Ok(ExitCode::from(EXIT_UNKNOWN));
        }
        Err(e) => return Ok(report(store, &e)),
    };
    let id = v.workload.id;
    if json && wait == Wait::No {
        outln!("{}", serde_json::json!({ "id": id.to_string(), "existing": v.existing }));
    } else if v.existing {
        outln!("{id} (already submitted with this idempotency key)");
    } else {
        outln!("{id}");
    }
    if wait == Wait::No {
        return Ok(ExitCode::SUCCESS);
    }
    use std::io::IsTerminal;
    let raw = canopy::text::logs_raw(false, std::io::stdout().is_terminal());
    let followed = with_api(store, async |c| {
        let mut last: Option<WorkloadState> = None;
        // Ctrl-C stops the waiting, not the workload: say so, and how to
        // look again. Listening from before the first state is printed.
        let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok();
        let interrupted = async |s: &mut Option<tokio::signal::unix::Signal>| match s {
            Some(s) => s.recv().await,
            None => std::future::pending().await,
        };
        let mut output: Option<super::logs::Follow> = None;
        loop {
            let v = c.workload(id).await?;
            let w = v.workload;
            if wait == Wait::Logs && w.attempts > 0 {
                // A new attempt: the last one's rest, then this one's.
                if output.as_ref().is_none_or(|f| f.attempt.n != w.attempts) {
                    if let Some(mut f) = output.take() {
                        f.print_new(&c).await?;
                        f.finish();
                    }
                    output = Some(super::logs::Follow::both(AttemptId { workload: id, n: w.attempts }, raw));
                }
                if let Some(f) = output.as_mut() {
                    f.print_new(&c).await?;
                }
            }
            if last != Some(w.state) {
                errln!(
                    "{id}: {}{}",
                    w.state,
                    w.reason.as_deref().map(|r| format!(" — {}", sanitize(r))).unwrap_or_default()
                );
                last = Some(w.state);
            }
            if w.state.is_final() {
                if let Some(mut f) = output.take() {
                    f.print_new(&c).await?;
                    f.finish();
                    let code = v.attempts.last().and_then(|a| a.exit_code);
                    let code =
                        code.map_or_else(|| "none (it did not exit by itself)".into(), |c| c.to_string());
                    errln!("{id}: {} (attempt {}, exit code {code})", w.state, w.attempts);
                }
                return Ok(Some(w));
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = interrupted(&mut interrupt) => return Ok(None),
            }
        }
    })?;
    match followed {
        Ok(None) => {
            errln!(
                "detached from {id}: it keeps running. `canopy status {id}` shows it, `canopy logs {id} --follow` \
                 follows its output, `canopy cancel {id}` stops it"
            );
            Ok(ExitCode::from(EXIT_INTERRUPTED))
        }
        Ok(Some(w)) => {
            if json {
                outln!("{}", json_pretty(&w)?);
            }
            Ok(exit_for(w.state))
        }
        Err(code) => {
            if code == ExitCode::from(EXIT_NO_ENGINE) {
                errln!(
                    "stopped waiting for {id}: the engine went away. {id} is kept in the store; \
                     `canopy status {id}` once an engine runs again"
                );
            }
            Ok(code)
        }
    }
}

/// The workloads table; `wide` adds the tenant, priority, the latest
/// attempt's pool and node and the submit time, and keeps reasons whole.
fn list_table(
    list: &[(WorkloadRecord, Option<AttemptRecord>)],
    wide: bool,
    now: Millis,
) -> super::table::Table {
    // With tenants (any listed workload has one), a TENANT column.
    let tenants = wide || list.iter().any(|(w, _)| w.tenant.is_some());
    let mut head = vec!["ID", "NAME", "STATE", "ATTEMPTS", "GPUS", "AGE", "COST", "REASON"];
    if wide {
        head.splice(5..5, ["PRIORITY", "POOL", "NODE", "SUBMITTED"]);
    }
    if tenants {
        head.insert(2, "TENANT");
    }
    let mut t = new_table(&head);
    for (w, last) in list {
        let reason = w.reason.as_deref().unwrap_or_default();
        let mut row = vec![
            w.id.to_string(),
            w.name.clone(),
            w.state.to_string(),
            w.attempts.to_string(),
            w.spec.resources.gpus.to_string(),
            age(w, now),
            usd(w.cost_usd),
            if wide { reason.to_string() } else { cut(reason, 60) },
        ];
        if wide {
            let (pool, node) = match last {
                Some(a) => (format!("{}/{}", a.provider, a.pool), a.nodes_label()),
                None => ("-".into(), "-".into()),
            };
            row.splice(5..5, [w.priority.to_string(), pool, node, local_time(w.submitted_at)]);
        }
        if tenants {
            row.insert(2, w.tenant.clone().unwrap_or_else(|| "-".into()));
        }
        t.add_row(row);
    }
    t
}

fn exit_for(state: WorkloadState) -> ExitCode {
    match state {
        WorkloadState::Succeeded => ExitCode::SUCCESS,
        WorkloadState::Cancelled => ExitCode::from(EXIT_CANCELLED),
        _ => ExitCode::from(EXIT_WORKLOAD_FAILED),
    }
}

fn age(w: &WorkloadRecord, now: Millis) -> String {
    let s = now.secs_since(w.submitted_at).max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// `canopy status [ID]`: what to list, or which one to show.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    pub id: Option<WorkloadId>,
    /// Only these states (repeatable): queued, running, failed…
    #[arg(long = "state", value_parser = super::parse_state)]
    pub states: Vec<WorkloadState>,
    /// Only failures nobody has acknowledged or retried (what
    /// triage shows), whatever their age.
    #[arg(long)]
    pub unresolved: bool,
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// Only this tenant's workloads.
    #[arg(long)]
    pub tenant: Option<String>,
    /// More columns: tenant, priority, the latest attempt's pool and node,
    /// when it was submitted (with the zone); reasons in full.
    #[arg(long, short)]
    pub wide: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The servers on the journal instead: the leader, the standbys with
    /// when each was last seen, the lease's epoch and expiry, the last
    /// failover.
    #[arg(long, conflicts_with_all = ["id", "states", "unresolved", "tenant"])]
    pub servers: bool,
}

pub fn status(store: &StoreArgs, args: StatusArgs) -> Result<ExitCode> {
    let StatusArgs { id, states, unresolved, limit, tenant, wide, json, servers } = args;
    if servers {
        return self::servers::servers(store, json);
    }
    if let Some(id) = id {
        return run(
            store,
            async |c| {
                let v = c.workload(id).await?;
                // Which providers are not answering, to say so rather than
                // show their attempts as running.
                let fleet: Option<FleetStatus> = c.get("/v1/fleet").await.ok();
                Ok((v, fleet))
            },
            |(v, fleet)| {
                if json {
                    outln!(
                        "{}",
                        json_pretty(&serde_json::json!({ "workload": v.workload, "attempts": v.attempts }))?
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                let w = &v.workload;
                let unreachable = |provider: &str| -> Option<String> {
                    let f = fleet.as_ref()?;
                    f.unreachable.get(provider)?;
                    Some(match f.unreachable_since.get(provider) {
                        Some(t) => {
                            format!("unknown (provider {provider} unreachable since {})", local_time(*t))
                        }
                        None => format!("unknown (provider {provider} unreachable)"),
                    })
                };
                let live = v.attempts.iter().rev().find(|a| !a.state.is_final());
                let state = live
                    .filter(|_| !w.state.is_final())
                    .and_then(|a| unreachable(&a.provider))
                    .unwrap_or_else(|| w.state.to_string());
                outln!(
                    "{}  {}  {}  priority {}  cost {}",
                    w.id,
                    sanitize(&w.name),
                    state,
                    w.priority,
                    usd(w.cost_usd)
                );
                if let Some(by) = &w.submitted_by {
                    outln!("  submitted by {}", sanitize(by));
                }
                if let Some(r) = &w.reason {
                    outln!("  {}", sanitize(r));
                }
                if let Some(q) = &v.queue_position {
                    outln!(
                        "  queue position {} of {} in {}'s queue (priority, then age)",
                        q.position,
                        q.of,
                        sanitize(&q.tenant)
                    );
                    if let Some(f) = &q.fair_share {
                        outln!("  fair share: {}", sanitize(f));
                    }
                }
                if let Some(old) = w.retry_of() {
                    outln!("  retry of {old}");
                }
                if let Some(new) = w.retried_as {
                    outln!("  retried as {new} (`canopy status {new}`)");
                }
                if let Some(ack) = &w.acknowledged {
                    let why = ack.reason.as_deref().map(|r| format!(": {}", sanitize(r))).unwrap_or_default();
                    outln!("  acknowledged by {}{why}", sanitize(&ack.by));
                }
                if let Some(x) = w.exclusions.as_ref().filter(|x| !x.is_empty() && !w.state.is_final()) {
                    let what: Vec<String> =
                        x.nodes.iter().chain(&x.pools).map(|n| sanitize(n).into_owned()).collect();
                    let until = x.until.map(|u| format!(" until {}", local_time(u))).unwrap_or_default();
                    outln!(
                        "  excludes {}{until} (earlier failures; `canopy unexclude {} [NODE] --reason …` clears)",
                        what.join(", "),
                        w.id
                    );
                }
                let mut t =
                    new_table(&["ATTEMPT", "STATE", "POOL", "NODE", "$/H", "COST", "CLASS", "EVIDENCE"]);
                for a in &v.attempts {
                    let state = if a.state.is_final() { None } else { unreachable(&a.provider) };
                    t.add_row(vec![
                        a.id.to_string(),
                        state.unwrap_or_else(|| a.state.to_string()),
                        a.pool.clone(),
                        a.nodes_label(),
                        usd(a.price_per_hour),
                        usd(a.cost_usd),
                        a.class.map(|c| c.to_string()).unwrap_or_default(),
                        cut(a.evidence.as_deref().unwrap_or_default(), 80),
                    ]);
                }
                outln!("{t}");
                Ok(ExitCode::SUCCESS)
            },
        );
    }
    let state_q: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
    let fetched = with_api(store, async |c| {
        let mut out: Vec<(WorkloadRecord, Option<AttemptRecord>)> = Vec::new();
        let mut cursor: Option<String> = None;
        let mut more = false;
        let mut total = 0;
        while out.len() < limit {
            let page_size = (limit - out.len()).min(1000);
            let mut q = format!("limit={page_size}");
            if !state_q.is_empty() {
                q.push_str(&format!("&state={}", state_q.join(",")));
            }
            if unresolved {
                q.push_str("&unresolved=true");
            }
            if let Some(t) = &tenant {
                q.push_str(&format!("&tenant={}", canopy::client::encode(t)));
            }
            if let Some(c) = &cursor {
                q.push_str(&format!("&cursor={c}"));
            }
            let page: Page = c.workloads(&q).await?;
            out.extend(page.workloads.into_iter().map(|v| (v.workload, v.attempts.into_iter().last())));
            more = page.next_cursor.is_some();
            total = page.total;
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        Ok((out, more, total))
    })?;
    let (list, more, total) = match fetched {
        Ok(x) => x,
        Err(code) => return Ok(code),
    };
    if json {
        let records: Vec<&WorkloadRecord> = list.iter().map(|(w, _)| w).collect();
        outln!("{}", json_pretty(&records)?);
        if more {
            errln!("(only the newest {limit} of {total}; use --limit to see more)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        let filtered = !states.is_empty() || unresolved || tenant.is_some();
        if filtered {
            outln!("no workloads match");
        } else {
            outln!("no workloads (`canopy submit SPEC` runs one)");
        }
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}", list_table(&list, wide, now()));
    if more {
        outln!("(the newest {limit} of {total} shown; --limit N shows more)");
    }
    Ok(ExitCode::SUCCESS)
}

pub fn events(store: &StoreArgs, id: WorkloadId, json: bool) -> Result<ExitCode> {
    run(
        store,
        async |c| c.get::<Vec<EventRecord>>(&format!("/v1/workloads/{id}/events")).await,
        |events| {
            if json {
                outln!("{}", json_pretty(&events)?);
                return Ok(ExitCode::SUCCESS);
            }
            for e in &events {
                let t = local_time(e.at);
                let a = e.attempt.map(|a| a.to_string()).unwrap_or_default();
                outln!("{t}  {a:<8} {:<18} {}", e.kind.as_str(), sanitize(&e.message));
            }
            Ok(ExitCode::SUCCESS)
        },
    )
}

/// `2026-11-29 19:20:11 CET`: the wall-clock time in the zone `TZ` names
/// (the system's otherwise; UTC where it has none), with the zone, so a
/// time read on one machine means the same on another.
pub fn local_time(t: Millis) -> String {
    match jiff::Timestamp::from_millisecond(t.0) {
        Ok(ts) => ts.to_zoned(jiff::tz::TimeZone::system()).strftime("%Y-%m-%d %H:%M:%S %Z").to_string(),
        // Outside jiff's range (years -9999..=9999): only a corrupt record.
        Err(_) => format!("{} ms since the epoch", t.0),
    }
}

pub fn artifacts(store: &StoreArgs, id: WorkloadId, json: bool) -> Result<ExitCode> {
    run(
        store,
        async |c| c.get::<Vec<ArtifactView>>(&format!("/v1/workloads/{id}/artifacts")).await,
        |all| {
            if json {
                outln!("{}", json_pretty(&all)?);
                return Ok(ExitCode::SUCCESS);
            }
            if all.is_empty() {
                outln!("{id} has no collected outputs.");
                return Ok(ExitCode::SUCCESS);
            }
            let mut t = new_table(&["ATTEMPT", "OUTPUT", "BYTES", "SHA256", "DOWNLOAD"]);
            for x in &all {
                t.add_row(vec![
                    format!("{id}.{}", x.attempt),
                    x.name.clone(),
                    x.bytes.to_string(),
                    x.sha256.chars().take(16).collect(),
                    x.download.clone().unwrap_or_else(|| "(directory)".into()),
                ]);
            }
            outln!("{t}");
            Ok(ExitCode::SUCCESS)
        },
    )
}

/// A command on a workload or node, with the operator's reason.
pub fn command(store: &StoreArgs, cmd: Command, reason: Option<String>) -> Result<ExitCode> {
    run(
        store,
        async |c| c.run(&cmd, reason).await,
        |r| match r {
            CommandResult::Ok { message } => {
                outln!("{message}");
                Ok(ExitCode::SUCCESS)
            }
            CommandResult::Submitted { id, .. } => {
                outln!("{id}");
                Ok(ExitCode::SUCCESS)
            }
            CommandResult::Error { message, .. } => {
                errln!("error: {message}");
                Ok(ExitCode::from(EXIT_ERROR))
            }
        },
    )
}
