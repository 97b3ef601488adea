//! `canopy` with no subcommand: the operator console.
//!
//! When an engine already serves the store (its socket answers), or
//! `--server URL` names one, the console attaches to it and reads it
//! through the API; quitting never stops it. Otherwise the console starts
//! the engine in this process, on the tokio runtime beside it, serving
//! the store's socket so other consoles and the CLI can attach. Quitting
//! that console while work is live asks whether to leave the engine
//! running in the background (a detached `canopy serve`, see
//! [`handover`]); losing its terminal (SIGHUP) hands over without asking.
//! Canopy's own logs go to `<home>/canopy.log`, never the terminal.

mod handover;

use super::{ConsoleArgs, StoreArgs};
use canopy::app::{self, AppError, EngineOptions, Running};
use canopy::client::{self, Client, ClientError};
use canopy::console::app::{App, Config};
use canopy::console::model::Model;
use canopy::console::run::{self, Exit};
use canopy::console::theme::{ColorDepth, Theme};
use canopy::engine::handle::EngineHandle;
use canopy::home::Home;
use canopy::journal::JournalError;
use canopy::providers::sim::SimConfig;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long a stopping engine may take to finish its batch.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long to keep trying to attach when another engine holds the store
/// but does not answer yet (it is starting, or taking over from a console).
const ATTACH_WAIT: Duration = Duration::from_secs(10);

/// The theme `--theme` names at the colour depth `--color`, `NO_COLOR`,
/// `COLORTERM` and `TERM` allow.
pub fn theme(args: &ConsoleArgs) -> Result<Theme> {
    let env = |k: &str| std::env::var(k).ok();
    let depth = ColorDepth::detect(
        &args.color,
        std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        env("COLORTERM").as_deref(),
        env("TERM").as_deref(),
    )
    .map_err(|e| eyre!(e))?;
    Theme::named(&args.theme, depth).map_err(|e| eyre!(e))
}

/// Where the console's data comes from.
enum Source {
    /// An engine in another process, through its API.
    Attached { handle: EngineHandle, whoami: WhoAmI, target: String, api: Box<Client> },
    /// The engine this console started.
    Owned(Box<Running>),
}

/// The caller as the server sees it (`GET /v1/whoami`).
struct WhoAmI {
    principal: String,
    role: String,
}

pub fn run(store: &StoreArgs, args: &ConsoleArgs) -> Result<ExitCode> {
    let theme = theme(args)?;
    let home = store.home();
    super::log_to_file(&home)?;
    let rt = tokio::runtime::Runtime::new().wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let source = connect(store, args, &home).await?;
        let (handle, api) = match &source {
            Source::Attached { handle, api, .. } => (handle.clone(), Some((**api).clone())),
            // The engine this console started serves the store's socket.
            Source::Owned(r) => (r.handle.clone(), Client::for_store(home.root()).ok()),
        };
        let viewer = matches!(&source, Source::Attached { whoami, .. } if whoami.role == "viewer");
        let config = Config {
            read_only: args.read_only || viewer,
            theme,
            utc_offset_s: run::local_offset_s(),
            stale_after_s: 10.0,
        };
        let mut app = App::new(config, Model::default(), run::now());
        match &source {
            Source::Attached { whoami, target, .. } => {
                let ro = if viewer { "; read-only (a viewer's token)" } else { "" };
                app.flash(format!("attached to {target} as {} ({}){ro}", whoami.principal, whoami.role));
            }
            Source::Owned(_) => app.owns_engine = true,
        }
        let exit = run::run(&mut app, handle, api, home.root().to_path_buf()).await;
        let running = match source {
            // Attached: the engine is not ours to stop.
            Source::Attached { .. } => {
                exit.wrap_err("the console's terminal failed")?;
                return Ok(ExitCode::SUCCESS);
            }
            Source::Owned(r) => *r,
        };
        let live = app.model.live();
        match &exit {
            Ok(Exit::Detach) => {
                let opts = handover::Serve::new(&home, store, args);
                match handover::handover(running, &opts).await {
                    Ok(pid) => errln!(
                        "canopy: the engine keeps running in the background (`canopy serve`, pid {pid}); \
                         `canopy` attaches to it, `kill {pid}` stops it (workloads keep running). Its log: {}",
                        home.log_file().display()
                    ),
                    Err(e) => {
                        return Err(eyre!(
                            "the engine could not be left running in the background: {e}. Its live workloads keep \
                             running at their providers and are picked up when the engine next starts (`canopy` or \
                             `canopy serve`)"
                        ));
                    }
                }
            }
            Ok(Exit::Hangup(why)) => {
                // Nobody reads the terminal any more: only the log hears of this.
                hung_up(running, &home, store, args, why, live).await;
            }
            Ok(Exit::Quit) | Err(_) => {
                if let Err(e) = running.stop(STOP_WAIT).await {
                    tracing::warn!(error = %e, "the engine stopped with an error");
                }
                if live > 0 && exit.is_ok() {
                    errln!(
                        "canopy: engine stopped. Live workloads ({live}) keep running at their providers and are \
                         picked up when the engine next starts (`canopy` or `canopy serve`)."
                    );
                }
            }
        }
        exit.wrap_err("the console's terminal failed")?;
        Ok(ExitCode::SUCCESS)
    })
}

/// The console's terminal went away while it ran the engine: work still
/// live is handed to a background `canopy serve`, so scheduling goes on
/// (retries, queued work, collecting what ends); with nothing live the
/// engine just stops.
async fn hung_up(
    running: Running,
    home: &Home,
    store: &StoreArgs,
    args: &ConsoleArgs,
    why: &str,
    seen: usize,
) {
    // The journal's count, not only the console's: the view may not have
    // loaded yet.
    let live = running
        .handle
        .recent(0, 0)
        .await
        .map(|r| r.workloads.iter().filter(|w| !w.state.is_final()).count())
        .unwrap_or(seen)
        .max(seen);
    if live == 0 {
        tracing::info!(why, "the console's terminal went away; nothing is live, so the engine stops");
        if let Err(e) = running.stop(STOP_WAIT).await {
            tracing::warn!(error = %e, "the engine stopped with an error");
        }
        return;
    }
    tracing::info!(why, live, "the console's terminal went away; handing the engine over to `canopy serve`");
    let opts = handover::Serve::new(home, store, args);
    match handover::handover(running, &opts).await {
        Ok(pid) => tracing::info!(pid, "the engine runs on in the background as `canopy serve`"),
        Err(e) => tracing::error!(
            error = %e,
            "could not hand the engine over; live workloads keep running at their providers and are picked up at the next start"
        ),
    }
}

/// Attaches to the engine `--server` names, or to the one serving the
/// store; else starts one in this process.
async fn connect(store: &StoreArgs, args: &ConsoleArgs, home: &Home) -> Result<Source> {
    if store.server.is_some() {
        let client = store.client()?;
        return attach(client).await.map_err(|e| match e {
            ClientError::Api { status: 401 | 403, message, .. } => {
                eyre!("the server refused this console: {message}; check --token or $CANOPY_TOKEN")
            }
            e => eyre!(e),
        });
    }
    let client = Client::for_store(home.root()).map_err(|e| eyre!(e))?;
    match attach(client.clone()).await {
        Ok(s) => return Ok(s),
        Err(ClientError::Unreachable { .. }) => {}
        Err(e) => return Err(eyre!(e).wrap_err("the engine serving this store answered with an error")),
    }
    let mut opts = EngineOptions::embedded(home.clone())?;
    opts.fleet = args.fleet.clone();
    opts.config = store.config.clone();
    if args.no_faults {
        opts.sim = SimConfig::no_faults();
    }
    match app::start(opts).await {
        Ok(running) => Ok(Source::Owned(Box::new(running))),
        Err(e @ AppError::Journal(JournalError::Owned { .. })) => {
            // Another engine holds the store but did not answer: it may be
            // starting (another console, or a background `canopy serve`
            // taking over). Give it a moment.
            let deadline = Instant::now() + ATTACH_WAIT;
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(s) = attach(client.clone()).await {
                    return Ok(s);
                }
            }
            Err(eyre!(e).wrap_err(format!(
                "another engine owns the store but its API does not answer at {}",
                client.target()
            )))
        }
        Err(e) => Err(e.into()),
    }
}

/// Asks who this console is to the server, then attaches to it.
async fn attach(client: Client) -> Result<Source, ClientError> {
    let v: serde_json::Value = client.get("/v1/whoami").await?;
    let field = |k: &str| v[k].as_str().unwrap_or("unknown").to_string();
    let whoami = WhoAmI { principal: field("principal"), role: field("role") };
    let target = client.target().to_string();
    let handle = client::attach(client.clone()).await?;
    Ok(Source::Attached { handle, whoami, target, api: Box::new(client) })
}
