//! Headless workload commands against a store: submit, status, events,
//! artifacts, logs, cancel and node commands. They read the store directly
//! and send commands through its inbox to the engine that owns it.

use super::table::{new_table, usd};
use super::{EXIT_CANCELLED, EXIT_ERROR, EXIT_NO_ENGINE, EXIT_WORKLOAD_FAILED, StoreArgs};
use canopy::engine::model::{Millis, WorkloadId, WorkloadRecord, WorkloadState};
use canopy::home::Home;
use canopy::journal::{Command, CommandResult, Journal, WorkloadFilter, is_owned};
use canopy::providers::Artifact;
use canopy::spec::load;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn now() -> Millis {
    use canopy::engine::clock::{Clock, SystemClock};
    SystemClock.now()
}

fn open(home: &Home) -> Result<Journal> {
    Journal::open(&home.store()).wrap_err("opening the store")
}

/// Whether an engine owns the store right now. Asked without taking
/// ownership: an engine starting at this moment must not fail because of us.
fn engine_running(home: &Home) -> bool {
    is_owned(&home.store()).unwrap_or(true)
}

/// Sends a command and waits up to `wait` for the engine's answer.
fn send(home: &Home, cmd: Command, wait: Duration) -> Result<Option<CommandResult>> {
    let mut j = open(home)?;
    let seq = j.push_command(&cmd, now())?;
    if !engine_running(home) {
        eprintln!(
            "No engine owns {}; the command waits in its inbox (#{seq}) until one starts (`canopy engine` or `canopy`).",
            home.store().display()
        );
        return Ok(None);
    }
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Some(r) = j.command_result(seq)? {
            return Ok(Some(r));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(eyre!(
        "the engine did not answer command #{seq} within {}s; is it stuck? see {}",
        wait.as_secs(),
        home.log_file().display()
    ))
}

pub fn submit(
    store: &StoreArgs,
    spec_path: &Path,
    key: Option<String>,
    wait: bool,
    json: bool,
) -> Result<ExitCode> {
    let home = store.home();
    let source = std::fs::read_to_string(spec_path).unwrap_or_default();
    let loaded = match load::load_file(spec_path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{}", e.render(&source));
            return Ok(ExitCode::from(EXIT_ERROR));
        }
    };
    for w in &loaded.warnings {
        eprintln!("{}\n", w.render(&source));
    }
    // Always keyed, so an engine that crashes mid-command and replays it
    // cannot submit twice.
    let key = key.unwrap_or_else(|| {
        format!("cli-{}-{}-{}", std::process::id(), now().0, &loaded.spec.content_hash()[..12])
    });
    let cmd = Command::Submit { spec: Box::new(loaded.spec), idempotency_key: Some(key) };
    let id = match send(&home, cmd, Duration::from_secs(30))? {
        None => return Ok(ExitCode::from(EXIT_NO_ENGINE)),
        Some(CommandResult::Submitted { id, existing }) => {
            if json && !wait {
                println!("{}", serde_json::json!({ "id": id.to_string(), "existing": existing }));
            } else if existing {
                println!("{id} (already submitted with this idempotency key)");
            } else {
                println!("{id}");
            }
            id
        }
        Some(CommandResult::Error { message }) => return Err(eyre!(message)),
        Some(CommandResult::Ok { message }) => return Err(eyre!("unexpected answer: {message}")),
    };
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    let j = open(&home)?;
    let mut last: Option<WorkloadState> = None;
    loop {
        if let Some(w) = j.workload(id)? {
            if last != Some(w.state) {
                eprintln!(
                    "{id}: {}{}",
                    w.state,
                    w.reason.as_ref().map(|r| format!(" — {r}")).unwrap_or_default()
                );
                last = Some(w.state);
            }
            if w.state.is_final() {
                if json {
                    println!("{}", serde_json::to_string_pretty(&w)?);
                }
                return Ok(exit_for(w.state));
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
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

pub fn status(
    store: &StoreArgs,
    id: Option<WorkloadId>,
    states: Vec<WorkloadState>,
    limit: usize,
    json: bool,
) -> Result<ExitCode> {
    let home = store.home();
    let j = open(&home)?;
    if let Some(id) = id {
        let Some(w) = j.workload(id)? else {
            return Err(eyre!("no workload {id} in {}", home.store().display()));
        };
        let attempts = j.attempts(id)?;
        if json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({ "workload": w, "attempts": attempts }))?
            );
            return Ok(ExitCode::SUCCESS);
        }
        println!("{}  {}  {}  priority {}  cost {}", w.id, w.name, w.state, w.priority, usd(w.cost_usd));
        if let Some(r) = &w.reason {
            println!("  {r}");
        }
        let mut t = new_table(&["ATTEMPT", "STATE", "POOL", "NODE", "$/H", "COST", "CLASS", "EVIDENCE"]);
        for a in &attempts {
            t.add_row(vec![
                a.id.to_string(),
                a.state.to_string(),
                a.pool.clone(),
                a.node.clone(),
                usd(a.price_per_hour),
                usd(a.cost_usd),
                a.class.map(|c| c.to_string()).unwrap_or_default(),
                a.evidence.clone().unwrap_or_default().chars().take(80).collect(),
            ]);
        }
        println!("{t}");
        return Ok(ExitCode::SUCCESS);
    }
    let list = j.workloads(&WorkloadFilter { states, limit: Some(limit), ..WorkloadFilter::default() })?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    let now = now();
    let mut t = new_table(&["ID", "NAME", "STATE", "ATTEMPTS", "GPUS", "AGE", "COST", "REASON"]);
    for w in &list {
        t.add_row(vec![
            w.id.to_string(),
            w.name.clone(),
            w.state.to_string(),
            w.attempts.to_string(),
            w.spec.resources.gpus.to_string(),
            age(w, now),
            usd(w.cost_usd),
            w.reason.clone().unwrap_or_default().chars().take(60).collect(),
        ]);
    }
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}

pub fn events(store: &StoreArgs, id: WorkloadId, json: bool) -> Result<ExitCode> {
    let j = open(&store.home())?;
    let events = j.events(id)?;
    if events.is_empty() && j.workload(id)?.is_none() {
        return Err(eyre!("no workload {id}"));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&events)?);
        return Ok(ExitCode::SUCCESS);
    }
    for e in &events {
        let t = chrono_like(e.at);
        let a = e.attempt.map(|a| a.to_string()).unwrap_or_default();
        println!("{t}  {a:<8} {:<18} {}", e.kind.as_str(), e.message);
    }
    Ok(ExitCode::SUCCESS)
}

/// `2026-11-29 18:20:11` in UTC, without a date-time dependency.
fn chrono_like(t: Millis) -> String {
    let secs = t.0.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub fn artifacts(store: &StoreArgs, id: WorkloadId, json: bool) -> Result<ExitCode> {
    let home = store.home();
    let j = open(&home)?;
    let attempts = j.attempts(id)?;
    let mut all: Vec<(String, Artifact)> = Vec::new();
    for a in &attempts {
        let manifest = home.artifacts().join(id.to_string()).join(a.id.n.to_string()).join("manifest.json");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let arts: Vec<Artifact> =
                serde_json::from_str(&text).wrap_err_with(|| format!("reading {}", manifest.display()))?;
            all.extend(arts.into_iter().map(|x| (a.id.to_string(), x)));
        }
    }
    if json {
        let v: Vec<_> = all.iter().map(|(a, x)| serde_json::json!({ "attempt": a, "artifact": x })).collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    if all.is_empty() {
        println!("{id} has no collected outputs.");
        return Ok(ExitCode::SUCCESS);
    }
    let mut t = new_table(&["ATTEMPT", "OUTPUT", "BYTES", "SHA256", "PATH"]);
    for (a, x) in &all {
        t.add_row(vec![
            a.clone(),
            x.name.clone(),
            x.bytes.to_string(),
            x.sha256[..16].to_string(),
            x.path.display().to_string(),
        ]);
    }
    println!("{t}");
    Ok(ExitCode::SUCCESS)
}

pub fn logs(
    store: &StoreArgs,
    id: WorkloadId,
    attempt: Option<u32>,
    follow: bool,
    stream: &str,
) -> Result<ExitCode> {
    use std::io::{Read, Seek, Write};
    let home = store.home();
    let j = open(&home)?;
    let Some(w) = j.workload(id)? else { return Err(eyre!("no workload {id}")) };
    let n = match attempt {
        Some(n) => n,
        None if w.attempts == 0 => {
            println!("{id} has not started an attempt yet ({}).", w.state);
            return Ok(ExitCode::SUCCESS);
        }
        None => w.attempts,
    };
    let dir = home.logs().join(id.to_string()).join(n.to_string());
    let files: Vec<_> = match stream {
        "stdout" => vec!["stdout.log"],
        "stderr" => vec!["stderr.log"],
        _ => vec!["stdout.log", "stderr.log"],
    };
    let mut offsets = vec![0u64; files.len()];
    let mut out = std::io::stdout().lock();
    loop {
        let mut grew = false;
        for (i, f) in files.iter().enumerate() {
            let Ok(mut file) = std::fs::File::open(dir.join(f)) else { continue };
            file.seek(std::io::SeekFrom::Start(offsets[i]))?;
            let mut buf = Vec::new();
            file.read_to_end(&mut buf)?;
            if !buf.is_empty() {
                grew = true;
                offsets[i] += buf.len() as u64;
                out.write_all(&buf)?;
            }
        }
        out.flush()?;
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        let done = j.attempts(id)?.iter().find(|a| a.id.n == n).is_some_and(|a| a.state.is_final());
        if done && !grew {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

pub fn command(store: &StoreArgs, cmd: Command) -> Result<ExitCode> {
    let home = store.home();
    match send(&home, cmd, Duration::from_secs(30))? {
        None => Ok(ExitCode::from(EXIT_NO_ENGINE)),
        Some(CommandResult::Ok { message }) => {
            println!("{message}");
            Ok(ExitCode::SUCCESS)
        }
        Some(CommandResult::Submitted { id, .. }) => {
            println!("{id}");
            Ok(ExitCode::SUCCESS)
        }
        Some(CommandResult::Error { message }) => {
            eprintln!("error: {message}");
            Ok(ExitCode::from(EXIT_ERROR))
        }
    }
}
