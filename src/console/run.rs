//! The console's edge: terminal set-up and tear-down, the panic hook, the
//! event loop and the effects (engine commands, log tailing, files,
//! clipboard, `$EDITOR`).
//!
//! One `tokio::select!` over terminal input, the engine's record batches,
//! fleet status and link (a remote engine can go away and come back),
//! effect results, SIGHUP/SIGTERM and a coarse one-second timer (a quarter
//! second in a replay, whose clock is the replay's virtual time). The
//! screen is redrawn only when something changed, at most 20 times a
//! second; nothing here waits on the engine or on files inside the loop
//! (those run as tasks that report back as [`Msg`]s). Everything the
//! console reads comes through the [`EngineHandle`] (logs too), so it works
//! the same on an engine in this process and on one it attached to; the
//! tenants and usage views alone read the engine's API (`GET /v1/tenants`,
//! `GET /v1/usage`, over the store's socket or the server it attached to),
//! whose tallies they show.

use super::app::{App, Effect, Msg};
use super::backend::DepthBackend;
use super::replay::Replay;
use super::theme::ColorDepth;
use super::views;
use crate::client::Client;
use crate::console::logs::StreamTail;
use crate::engine::handle::{EngineHandle, Link, Stream};
use crate::engine::model::{AttemptId, Millis};
use crate::server::tenants::TenantsView;
use futures::StreamExt;
use ratatui::crossterm::event::{Event, EventStream};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// The shortest time between two frames (20 fps).
const FRAME: Duration = Duration::from_millis(50);
/// How often the clock moves in a replay, whose virtual time runs fast.
const REPLAY_TICK: Duration = Duration::from_millis(250);
/// How often a followed log is read (from an engine in this process).
const LOG_EVERY: Duration = Duration::from_millis(100);
/// How often a followed log is read from a remote engine (two requests).
const LOG_EVERY_REMOTE: Duration = Duration::from_millis(250);
/// The most a log read hands the UI at once.
const LOG_BATCH_BYTES: usize = 512 * 1024;

/// The wall clock, read only here.
pub fn now() -> Millis {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Millis(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Local time's offset from UTC in seconds, now (`TZ`, else
/// `/etc/localtime`).
pub fn local_offset_s() -> i64 {
    i64::from(jiff::Zoned::now().offset().seconds())
}

/// The console's terminal: stdout, with colours at the theme's depth.
pub type Term = ratatui::Terminal<DepthBackend<std::io::Stdout>>;

/// Takes the terminal: raw mode, the alternate screen, and a backend that
/// writes colours at `depth` (what `ratatui::try_init` does, less its
/// panic hook: [`install_panic_hook`] is the console's).
fn init(depth: ColorDepth) -> std::io::Result<Term> {
    use ratatui::crossterm::{execute, terminal};
    terminal::enable_raw_mode()?;
    execute!(std::io::stdout(), terminal::EnterAlternateScreen)?;
    ratatui::Terminal::new(DepthBackend::new(std::io::stdout(), depth))
}

/// Restores the terminal, prints the report and exits on any panic, on any
/// thread: a panic in an engine task must not leave a half-working UI.
fn install_panic_hook() {
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        // Not `ratatui::restore`: it reports a failure with `eprintln!`,
        // which panics (inside this hook) when the terminal hung up.
        let _ = ratatui::try_restore();
        prev(info);
        std::process::exit(101);
    }));
}

/// How a console ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// The operator quit (or SIGTERM asked it to).
    Quit,
    /// The operator quit and asked to leave the engine this console
    /// started running in the background ([`Effect::Detach`]).
    Detach,
    /// The terminal went away (SIGHUP: the SSH session or tmux pane is
    /// gone; or it can no longer be read or written), with what said so.
    /// Nobody sees the screen any more, nor stderr.
    Hangup(String),
}

/// The signals a console answers: SIGHUP (its terminal is gone) and
/// SIGTERM (stop as if quit). Installed before the terminal is taken, so
/// neither kills the process outright from then on.
struct Signals {
    hangup: Signal,
    term: Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        Ok(Signals { hangup: signal(SignalKind::hangup())?, term: signal(SignalKind::terminate())? })
    }
}

/// Runs the console until the operator quits or the terminal goes away,
/// reading `engine` (in this process, or a remote one it attached to).
/// `api` is the engine's API (its socket or server), which the tenants
/// and usage views read (`GET /v1/tenants`, `GET /v1/usage`): the
/// tenants' usage and the ledger are the server's. `scratch` holds the spec file `$EDITOR` edits.
pub async fn run(
    app: &mut App,
    engine: EngineHandle,
    api: Option<Client>,
    scratch: PathBuf,
) -> std::io::Result<Exit> {
    let mut signals = Signals::install()?;
    let mut terminal = init(app.config.theme.depth)?;
    install_panic_hook();
    let src = Source { engine, api };
    let r = event_loop(&mut terminal, app, src, scratch, None, Some(&mut signals)).await;
    if matches!(r, Ok(Exit::Hangup(_))) {
        // Writing to a terminal that hung up fails, and `eprintln!` (which
        // ratatui uses when it cannot restore, and which a panic report
        // uses) panics on that: from here on, output goes nowhere.
        silence_terminal();
    }
    restore();
    drop(terminal);
    r
}

/// Points stdout and stderr at /dev/null (best effort).
fn silence_terminal() {
    let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else { return };
    use std::os::fd::AsRawFd;
    for fd in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 only replaces descriptor `fd` (stdout or stderr)
        // with a copy of `null`, which is open for the whole call.
        unsafe {
            libc::dup2(null.as_raw_fd(), fd);
        }
    }
}

/// Gives the terminal back. Errors are only logged: the terminal may be
/// gone (a hang-up), and then stderr is too.
fn restore() {
    if let Err(e) = ratatui::try_restore() {
        tracing::info!(error = %e, "could not restore the terminal");
    }
}

/// Runs the console over a replay (`canopy sim --watch`) until the operator
/// quits: `engine` is the replay's handle, and the clock is the replay's
/// virtual time. Starts the replay once the console listens.
pub async fn run_replay(
    app: &mut App,
    engine: EngineHandle,
    replay: Replay,
    scratch: PathBuf,
) -> std::io::Result<()> {
    let mut terminal = init(app.config.theme.depth)?;
    install_panic_hook();
    let src = Source { engine, api: None };
    let r = event_loop(&mut terminal, app, src, scratch, Some(&replay), None).await;
    restore();
    match r? {
        // No report to print on a terminal that is gone.
        Exit::Hangup(why) => Err(std::io::Error::other(why)),
        Exit::Quit | Exit::Detach => Ok(()),
    }
}

/// Where the console reads from: the engine's handle, and its API where
/// there is one (not in a replay).
struct Source {
    engine: EngineHandle,
    api: Option<Client>,
}

async fn event_loop(
    terminal: &mut Term,
    app: &mut App,
    src: Source,
    scratch: PathBuf,
    replay: Option<&Replay>,
    signals: Option<&mut Signals>,
) -> std::io::Result<Exit> {
    let (mut hangup, mut term) = match signals {
        Some(s) => (Some(&mut s.hangup), Some(&mut s.term)),
        None => (None, None),
    };
    let Source { engine, api } = src;
    let api = api.as_ref();
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    let mut input = EventStream::new();
    let mut updates = engine.subscribe();
    let mut status = engine.status();
    let mut status_open = true;
    let mut updates_open = true;
    let mut link = engine.link();
    // A replay has no link to watch; an in-process engine's never changes
    // (its sender is gone, so `changed` ends at once).
    let mut link_open = replay.is_none();
    // The reload count the model was last loaded for.
    let mut loaded: Option<u64> = None;
    let clock = || replay.map_or_else(now, Replay::now);
    if let Some(r) = replay {
        // Subscribed: nothing the replay sends from here on is lost.
        r.start();
        app.update(Msg::Replay(r.status()));
        app.update(Msg::Tick(clock()));
    }
    let mut tick = tokio::time::interval(if replay.is_some() { REPLAY_TICK } else { Duration::from_secs(1) });
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut tailer: Option<JoinHandle<()>> = None;
    let mut last_draw = tokio::time::Instant::now() - FRAME;
    let size = terminal.size()?;
    app.update(Msg::Resize(size.width, size.height));
    if replay.is_none() {
        let now = link.borrow_and_update().clone();
        for fx in on_link(app, now, &mut loaded, &engine, &tx) {
            perform(fx, (&engine, api), &tx, &mut tailer);
        }
    }
    loop {
        if app.dirty {
            let due = last_draw + FRAME;
            if tokio::time::Instant::now() >= due {
                if let Err(e) = terminal.draw(|f| views::draw(f, app)) {
                    return Ok(Exit::Hangup(format!("cannot draw on the terminal: {e}")));
                }
                app.dirty = false;
                last_draw = tokio::time::Instant::now();
            }
        }
        let redraw_at = app.dirty.then_some(last_draw + FRAME);
        let msg = tokio::select! {
            ev = input.next() => match ev {
                Some(Ok(Event::Key(k))) => Some(Msg::Key(k)),
                Some(Ok(Event::Paste(s))) => Some(Msg::Paste(s)),
                Some(Ok(Event::Resize(w, h))) => Some(Msg::Resize(w, h)),
                Some(Ok(_)) => None,
                Some(Err(e)) => return Ok(Exit::Hangup(format!("cannot read the terminal: {e}"))),
                None => return Ok(Exit::Hangup("the terminal closed".into())),
            },
            Some(()) = recv(hangup.as_deref_mut()) => {
                return Ok(Exit::Hangup("SIGHUP: the terminal went away".into()));
            }
            Some(()) = recv(term.as_deref_mut()) => return Ok(Exit::Quit),
            r = link.changed(), if link_open => {
                match r {
                    Ok(()) => {
                        let now = link.borrow_and_update().clone();
                        for fx in on_link(app, now, &mut loaded, &engine, &tx) {
                            perform(fx, (&engine, api), &tx, &mut tailer);
                        }
                    }
                    Err(_) => link_open = false,
                }
                None
            }
            r = updates.recv(), if updates_open => match r {
                Ok(batch) => Some(Msg::Records(batch)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    if replay.is_some() {
                        // No journal to catch up from.
                        app.flash_error(format!("the console fell behind the replay: {n} updates lost"));
                    } else {
                        fetch_recent(&engine, &tx);
                        for fx in app.reload_audit() {
                            perform(fx, (&engine, api), &tx, &mut tailer);
                        }
                    }
                    None
                }
                Err(broadcast::error::RecvError::Closed) => {
                    updates_open = false;
                    app.flash_error("the engine stopped; data is frozen (see canopy.log)".into());
                    None
                }
            },
            r = status.changed(), if status_open => match r {
                Ok(()) => status.borrow_and_update().clone().map(Msg::Status),
                Err(_) => {
                    status_open = false;
                    None
                }
            },
            Some(m) = rx.recv() => Some(m),
            _ = tick.tick() => {
                // What a tick asks for (a shown tenants or usage view's refresh) is
                // carried out like any message's effects below.
                if let Some(r) = replay.map(Replay::status).filter(|r| app.replay.as_ref() != Some(r)) {
                    app.update(Msg::Replay(r));
                }
                Some(Msg::Tick(clock()))
            }
            _ = sleep_until(redraw_at) => None,
        };
        let Some(msg) = msg else { continue };
        for fx in app.update(msg) {
            match fx {
                Effect::Quit | Effect::Detach => {
                    if let Some(t) = tailer.take() {
                        t.abort();
                    }
                    return Ok(if matches!(fx, Effect::Detach) { Exit::Detach } else { Exit::Quit });
                }
                Effect::ExternalEditor(text) => {
                    let r = external_editor(terminal, &text, &scratch);
                    app.update(Msg::Edited(r));
                }
                Effect::Replay(ctl) => {
                    if let Some(r) = replay {
                        r.apply(ctl);
                        app.update(Msg::Replay(r.status()));
                        app.update(Msg::Tick(clock()));
                    }
                }
                other => perform(other, (&engine, api), &tx, &mut tailer),
            }
        }
        if app.logs.is_none()
            && let Some(t) = tailer.take()
        {
            t.abort();
        }
    }
}

/// The next delivery of a signal; never, without one.
async fn recv(s: Option<&mut Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

/// Shows the link's state, and (re)loads the model when the handle says
/// to: once at the start for an engine in this process; for a remote one,
/// on every `reloads` it counts (the first connection, and every
/// reconnection or resync), so nothing that happened while it was away is
/// missed. A remote handle's count is 0 until it first connects. Returns
/// the app's effects (it reloads the audit trail it showed).
fn on_link(
    app: &mut App,
    link: Link,
    loaded: &mut Option<u64>,
    engine: &EngineHandle,
    tx: &mpsc::UnboundedSender<Msg>,
) -> Vec<Effect> {
    if let Link::Up { reloads } = link
        && (reloads > 0 || !engine.is_remote())
        && *loaded != Some(reloads)
    {
        *loaded = Some(reloads);
        fetch_recent(engine, tx);
    }
    app.update(Msg::Link(link))
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

fn fetch_recent(engine: &EngineHandle, tx: &mpsc::UnboundedSender<Msg>) {
    let (engine, tx) = (engine.clone(), tx.clone());
    tokio::spawn(async move {
        match engine.recent(super::app::PAGE, 2_000).await {
            Ok(r) => {
                let _ = tx.send(Msg::Recent(r));
            }
            Err(e) => tracing::warn!(error = %e, "console could not read recent workloads"),
        }
    });
}

fn perform(
    fx: Effect,
    (engine, api): (&EngineHandle, Option<&Client>),
    tx: &mpsc::UnboundedSender<Msg>,
    tailer: &mut Option<JoinHandle<()>>,
) {
    let (engine, tx2) = (engine.clone(), tx.clone());
    match fx {
        Effect::Command { what, cmd, reason } => {
            tokio::spawn(async move {
                use crate::engine::command::Caller;
                let caller = Caller { reason, ..Caller::local("console") };
                let result = engine.command_as(cmd, caller).await;
                let _ = tx2.send(Msg::Done { what, result });
            });
        }
        Effect::LoadOlder(before) => {
            tokio::spawn(async move {
                let r = engine.older(before, super::app::PAGE).await;
                if let Err(e) = &r {
                    tracing::warn!(error = %e, "console could not page older workloads");
                }
                let _ = tx2.send(Msg::Older(r));
            });
        }
        Effect::FetchWorkload(id) => {
            tokio::spawn(async move {
                let _ = tx2.send(Msg::Workload(id, Box::new(engine.workload(id).await)));
            });
        }
        Effect::FetchEvents(id) => {
            tokio::spawn(async move {
                if let Ok(ev) = engine.events(id).await {
                    let _ = tx2.send(Msg::Events(id, ev));
                }
            });
        }
        Effect::TailLogs(a) => {
            if let Some(t) = tailer.take() {
                t.abort();
            }
            if let Some(a) = a {
                *tailer = Some(tokio::spawn(tail(engine, a, tx2)));
            }
        }
        Effect::LoadAudit(filter) => {
            tokio::spawn(async move {
                let _ = tx2.send(Msg::Audit(engine.audit(filter).await));
            });
        }
        Effect::LoadTenants => {
            let Some(api) = api.cloned() else {
                let why = "this console reads no engine API, which the tenants come from".to_string();
                let _ = tx2.send(Msg::Tenants(Box::new(Err(why))));
                return;
            };
            tokio::spawn(async move {
                let got = api.get::<TenantsView>("/v1/tenants").await.map_err(|e| e.to_string());
                let _ = tx2.send(Msg::Tenants(Box::new(got)));
            });
        }
        Effect::LoadServers => {
            let Some(api) = api.cloned() else {
                let why = "this console reads no engine API, which the servers come from".to_string();
                let _ = tx2.send(Msg::Servers(Box::new(Err(why))));
                return;
            };
            tokio::spawn(async move {
                let got = api
                    .get::<crate::server::servers::ServersView>("/v1/servers")
                    .await
                    .map_err(|e| e.to_string());
                let _ = tx2.send(Msg::Servers(Box::new(got)));
            });
        }
        Effect::LoadUsage(path) => {
            let Some(api) = api.cloned() else {
                let why = "this console reads no engine API, which the usage report comes from".to_string();
                let _ = tx2.send(Msg::Usage(Box::new(Err(why))));
                return;
            };
            tokio::spawn(async move {
                let got = api.get::<crate::usage::Report>(&path).await.map_err(|e| e.to_string());
                let _ = tx2.send(Msg::Usage(Box::new(got)));
            });
        }
        Effect::Copy(text) => copy_osc52(&text),
        Effect::Load(path) => {
            tokio::spawn(async move {
                let result = tokio::fs::read_to_string(&path).await.map_err(|e| e.to_string());
                let _ = tx2.send(Msg::Loaded { path: path.display().to_string(), result });
            });
        }
        Effect::Save(path, text) => {
            tokio::spawn(async move {
                let result = tokio::fs::write(&path, text + "\n").await.map_err(|e| e.to_string());
                let _ = tx2.send(Msg::Saved { path: path.display().to_string(), result });
            });
        }
        Effect::ExternalEditor(_) | Effect::Replay(_) | Effect::Quit | Effect::Detach => {}
    }
}

/// Follows an attempt's shipped logs through the engine: reads what is new
/// in both streams every [`LOG_EVERY`] ([`LOG_EVERY_REMOTE`] from a remote
/// engine), at most [`LOG_BATCH_BYTES`] per stream per read, and sends
/// whole lines as one batch. A read that fails (a remote engine away) is
/// tried again next time from the same offset.
async fn tail(engine: EngineHandle, attempt: AttemptId, tx: mpsc::UnboundedSender<Msg>) {
    let every = if engine.is_remote() { LOG_EVERY_REMOTE } else { LOG_EVERY };
    let mut streams = [StreamTail::default(), StreamTail::default()];
    loop {
        let mut batch = Vec::new();
        let mut more = false;
        for (i, stream) in [Stream::Stdout, Stream::Stderr].into_iter().enumerate() {
            let got = match engine.logs(attempt, stream, streams[i].offset, LOG_BATCH_BYTES).await {
                Ok(got) => got,
                Err(e) => {
                    tracing::debug!(%attempt, ?stream, error = %e, "console could not read a log");
                    continue;
                }
            };
            // A read cut short to carry its times has more behind it too.
            more |= got.data.len() >= LOG_BATCH_BYTES
                || got.times.len() >= crate::engine::log_times::MAX_PER_READ;
            batch.extend(streams[i].take(got, i == 1, now()));
        }
        // Two streams interleave by when their lines were written.
        batch.sort_by_key(|l| l.at);
        if !batch.is_empty() && tx.send(Msg::Log(attempt, batch)).is_err() {
            return;
        }
        if !more {
            tokio::time::sleep(every).await;
        }
    }
}

/// Copies to the operator's clipboard over SSH with OSC52 (wrapped for
/// tmux), up to 64 KiB.
fn copy_osc52(text: &str) {
    let data = base64(&text.as_bytes()[..text.len().min(64 * 1024)]);
    let seq = if std::env::var_os("TMUX").is_some() {
        format!("\x1bPtmux;\x1b\x1b]52;c;{data}\x07\x1b\\")
    } else {
        format!("\x1b]52;c;{data}\x07")
    };
    let mut out = std::io::stdout();
    let _ = out.write_all(seq.as_bytes());
    let _ = out.flush();
}

pub fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].iter().enumerate() {
            s.push(if i <= c.len() { A[(n >> shift) as usize & 63] as char } else { '=' });
        }
    }
    s
}

/// Suspends the console, edits `text` in `$EDITOR` (or `vi`), resumes.
fn external_editor(terminal: &mut Term, text: &str, scratch: &std::path::Path) -> Result<String, String> {
    let path = scratch.join("console-spec.toml");
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let editor = std::env::var("VISUAL").or_else(|_| std::env::var("EDITOR")).unwrap_or_else(|_| "vi".into());
    ratatui::restore();
    let mut parts = editor.split_whitespace();
    let status = match parts.next() {
        Some(cmd) => std::process::Command::new(cmd)
            .args(parts)
            .arg(&path)
            .status()
            .map_err(|e| format!("{editor}: {e}")),
        None => Err("$EDITOR is empty".into()),
    };
    *terminal = init(terminal.backend().depth()).map_err(|e| e.to_string())?;
    let _ = terminal.clear();
    match status? {
        s if s.success() => std::fs::read_to_string(&path).map_err(|e| e.to_string()),
        s => Err(format!("{editor} exited with {s}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_the_rfc() {
        assert_eq!(super::base64(b"w-17"), "dy0xNw==");
        assert_eq!(super::base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(super::base64(b"fo"), "Zm8=");
    }
}
