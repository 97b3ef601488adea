//! Command-line interface: argument definitions and dispatch.
//!
//! Each subcommand lives in its own file and prints for people (tables) or
//! for scripts (`--json`). Exit codes are part of the interface:
//! 0 success, 1 bad input or failure, 2 usage error (clap), 3 nothing fits
//! (`plan`), 4 no engine owns the store (or `--server` does not answer),
//! 5 the workload failed (`submit --wait`), 6 it was cancelled, 7 the
//! connection broke before the answer (the outcome is unknown; a submit
//! prints the idempotency key to retry with), 130 Ctrl-C stopped
//! `submit --wait` (the workload keeps running), 141 the reader of the
//! output went away ([`out`]). Everything printed goes
//! through [`out`]: safe for a terminal, and quiet on a closed pipe.

#[macro_use]
pub mod out;

mod admin;
mod completions;
mod console;
mod engine;
mod fleet;
mod import;
mod logs;
mod mcp;
mod migrate;
mod plan;
mod profile;
mod sim;
mod table;
mod usage;
mod validate;
mod whoami;
mod workloads;

use canopy::engine::command::Command as JCommand;
use canopy::engine::model::{WorkloadId, WorkloadState};
use canopy::home::Home;
use clap::{Parser, Subcommand};
use color_eyre::eyre::{Result, WrapErr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const EXIT_ERROR: u8 = 1;
pub const EXIT_UNSCHEDULABLE: u8 = 3;
pub const EXIT_NO_ENGINE: u8 = 4;
pub const EXIT_WORKLOAD_FAILED: u8 = 5;
pub const EXIT_CANCELLED: u8 = 6;
/// The connection broke after the request went out: it may have been
/// carried out. A submit says the idempotency key to send it again with.
pub const EXIT_UNKNOWN: u8 = 7;
/// Ctrl-C stopped the waiting (128 + SIGINT, as shells report it); what
/// was waited for goes on.
pub const EXIT_INTERRUPTED: u8 = 130;

/// The help heading of the options every command takes.
const GLOBAL: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "canopy",
    version,
    about = "Run AI/GPU workloads where they fit: capability-based placement, failure-aware retries, one console."
)]
pub struct Cli {
    /// On an error, print the full report (where it came from, and the
    /// backtrace when RUST_BACKTRACE is set), as for a bug report.
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub debug: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub console: ConsoleArgs,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// How the console (`canopy` with no subcommand) looks and what it may do.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Console options")]
pub struct ConsoleArgs {
    /// Watch only: submit, retry, cancel, cordon and drain are refused.
    #[arg(long)]
    pub read_only: bool,
    /// Colour depth: auto (from NO_COLOR, COLORTERM, TERM), truecolor, 256, 16 or none.
    #[arg(long, default_value = "auto", value_name = "WHEN")]
    pub color: String,
    /// Console theme: dark, light, high-contrast or monochrome.
    #[arg(long, env = "CANOPY_THEME", default_value = "dark", value_name = "NAME")]
    pub theme: String,
    /// Fleet file for the simulated providers (the demo fleet by default).
    #[arg(long = "fleet", env = "CANOPY_FLEET", value_name = "FILE")]
    pub fleet: Option<PathBuf>,
    /// Simulated providers never fail (for demos and tests).
    #[arg(long)]
    pub no_faults: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Canopy's state directory (store, logs, artifacts). Defaults to
    /// $CANOPY_HOME, else $XDG_STATE_HOME/canopy, else ~/.local/state/canopy.
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL)]
    pub store: Option<PathBuf>,
    /// Configuration file (real engines: Slurm, Ray). Defaults to
    /// $CANOPY_CONFIG, else <store>/canopy.toml when present.
    #[arg(long, global = true, value_name = "FILE", help_heading = GLOBAL)]
    pub config: Option<PathBuf>,
    /// A remote Canopy server (http://HOST:PORT or https://…) instead of
    /// the store's socket, or several servers of one journal separated by
    /// commas (requests fail over between them); with a token from
    /// $CANOPY_TOKEN.
    #[arg(long, global = true, env = "CANOPY_SERVER", value_name = "URL", help_heading = GLOBAL)]
    pub server: Option<String>,
    /// Bearer token for --server (prefer the environment variable: a
    /// command line is visible to other users).
    #[arg(
        long,
        global = true,
        env = "CANOPY_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        help_heading = GLOBAL
    )]
    pub token: Option<String>,
    /// A context of the client profile ($XDG_CONFIG_HOME/canopy/config.toml):
    /// its servers and where its token comes from. The profile's
    /// current_context applies when neither this, --server nor --store is given.
    #[arg(long, global = true, env = "CANOPY_CONTEXT", value_name = "NAME", help_heading = GLOBAL)]
    pub context: Option<String>,
}

impl StoreArgs {
    pub fn home(&self) -> Home {
        self.store.clone().map(Home::new).unwrap_or_else(Home::from_env)
    }

    /// Where the API is: `--server` when given, else the store's socket.
    pub fn target(&self) -> canopy::client::Target {
        match &self.server {
            Some(url) => canopy::client::Target::Url { base: url.clone(), token: self.token.clone() },
            None => canopy::client::Target::Socket(canopy::server::listen::socket_path(self.home().root())),
        }
    }

    /// A client for [`target`](Self::target).
    pub fn client(&self) -> Result<canopy::client::Client> {
        canopy::client::Client::new(self.target()).map_err(|e| color_eyre::eyre::eyre!(e))
    }
}

/// Sends Canopy's own logs to `<home>/canopy.log`, never the terminal.
/// `--grace 30s`: whole seconds, at most an hour.
fn parse_grace(s: &str) -> Result<u64, String> {
    let d: canopy::units::HumanDuration = s.parse()?;
    if d.0 > canopy::spec::Runtime::MAX_STOP_GRACE {
        return Err(format!("{s} is longer than the 1h a stop may wait"));
    }
    Ok(d.0.as_secs())
}

pub fn log_to_file(home: &Home) -> Result<()> {
    // Private from the start (0700); an engine that starts says when an
    // existing store is more open.
    home.prepare().wrap_err_with(|| format!("creating {}", home.root().display()))?;
    let file = canopy::private::append(&home.log_file())
        .wrap_err_with(|| format!("opening {}", home.log_file().display()))?;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CANOPY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct FleetArg {
    /// Fleet file (TOML). Defaults to the embedded demo fleet.
    #[arg(long, env = "CANOPY_FLEET", value_name = "FILE")]
    pub fleet: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show where a spec would run: ranked candidates with their score
    /// breakdown, or why nothing fits.
    Plan {
        /// Workload spec (TOML, or JSON by extension).
        spec: PathBuf,
        #[command(flatten)]
        fleet: FleetArg,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check specs and report every problem with file:line:col.
    Validate {
        #[arg(required = true)]
        specs: Vec<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print the JSON Schema of the workload spec, for editors.
    Schema,
    /// Print a shell's completion script: `source <(canopy completions
    /// bash)` in ~/.bashrc; for zsh, into a file on $fpath named _canopy.
    Completions(completions::CompletionsArgs),
    /// Print the manual page canopy(1), or with --out DIR write one page
    /// per command.
    Man(completions::ManArgs),
    /// Who the server takes you for: the principal (a token's name, or
    /// local:USER on the store's socket), its role, tenant and scopes.
    Whoami(whoami::WhoamiArgs),
    /// Serve the Model Context Protocol on stdin/stdout, for an agent host
    /// (Claude Desktop, an IDE) to start: its tools (plan, submit, status,
    /// logs, cancel, …) act as your token on the server, with its role.
    Mcp(mcp::McpArgs),
    /// Convert a SkyPilot task YAML or a dstack task or service
    /// configuration into a Canopy spec (a service becomes kind
    /// "inference"); what has no counterpart is a warning at its line.
    Import(import::ImportArgs),
    /// Run the engine as a service until Ctrl-C or SIGTERM: the HTTP API on
    /// <store>/canopy.sock (the store's owner, as admin) and, with
    /// --listen, on TCP for everyone else (bearer tokens). Workloads keep
    /// running when it stops and are re-adopted when it starts again.
    #[command(alias = "engine")]
    Serve(engine::ServeArgs),
    /// Submit a workload spec to the engine that owns the store.
    #[command(after_help = "Examples:
  canopy submit train.toml                     prints the new workload's id (w-N)
  canopy submit train.toml --wait              follows it; exit 0 succeeded, 5 failed, 6 cancelled
  canopy submit train.toml --wait --logs       prints its output as it runs, then its exit code
  canopy submit task.yaml --from skypilot      a SkyPilot task, converted as `canopy import` does
  canopy submit train.toml --idempotency-key nightly-2026-12-06   safe to send again")]
    Submit {
        spec: PathBuf,
        /// SPEC is a SkyPilot task YAML or a dstack task or service configuration:
        /// converted as `canopy import` does, then submitted.
        #[arg(long, value_enum, value_name = "FORMAT")]
        from: Option<import::ImportFrom>,
        /// The same key with the same spec returns the same workload.
        #[arg(long, value_name = "KEY")]
        idempotency_key: Option<String>,
        /// Follow the workload to its end; exit 0 if it succeeded, 5 if it
        /// failed, 6 if cancelled.
        #[arg(long)]
        wait: bool,
        /// With --wait: print the workload's output (stdout and stderr)
        /// as it comes, each attempt's in turn, then its exit code.
        #[arg(long, requires = "wait")]
        logs: bool,
        /// The tenant the work is for (admins; anyone else's is its own).
        #[arg(long)]
        tenant: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List workloads, or show one with its attempts.
    #[command(after_help = "Examples:
  canopy status                                the newest 50 workloads
  canopy status w-12                           one workload with its attempts and why it waits
  canopy status --state failed --state queued  only these states
  canopy status --unresolved                   failures nobody has acknowledged or retried
  canopy status --json | jq '.[].name'         for scripts")]
    Status(workloads::StatusArgs),
    /// A workload's logs (the latest attempt unless --attempt). On a
    /// terminal, control characters show as `�` instead of acting; to a
    /// pipe or a file, the bytes are as the workload wrote them.
    #[command(after_help = "Examples:
  canopy logs w-12                             the latest attempt, stdout and stderr
  canopy logs w-12 --follow                    until the attempt ends, across engine restarts
  canopy logs w-12 --attempt 1 --stream stderr an earlier attempt's stderr
  canopy logs w-12 > out.txt                   the bytes as written (escape sequences only with --raw on a terminal)")]
    Logs {
        id: WorkloadId,
        #[arg(long)]
        attempt: Option<u32>,
        /// Keep printing until the attempt ends. When the engine restarts
        /// meanwhile, reconnect and go on from where it stopped.
        #[arg(long, short)]
        follow: bool,
        /// stdout, stderr or both.
        #[arg(long, default_value = "both", value_parser = ["stdout", "stderr", "both"])]
        stream: String,
        /// The bytes as the workload wrote them, even to a terminal
        /// (escape sequences included: trust the workload first).
        #[arg(long)]
        raw: bool,
        /// With --follow: how long to keep trying to reach a server that
        /// went away before giving up (exit 4).
        #[arg(long, value_parser = canopy::units::parse_duration, default_value = logs::RECONNECT_FOR, value_name = "DURATION")]
        reconnect_for: std::time::Duration,
    },
    /// A workload's events: placements, ends with their class and evidence,
    /// retry decisions with their rule.
    Events {
        id: WorkloadId,
        #[arg(long)]
        json: bool,
    },
    /// A workload's collected outputs, with sizes and checksums.
    Artifacts {
        id: WorkloadId,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a workload: its running attempt is terminated.
    Cancel {
        id: WorkloadId,
        /// Why, for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Submit an ended workload's spec again, as a new workload.
    Retry {
        id: WorkloadId,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Acknowledge a failed workload: nothing more is to be done about it,
    /// so it leaves triage (the console's and `status --unresolved`).
    #[command(alias = "acknowledge")]
    Ack {
        id: WorkloadId,
        /// Why, recorded on the workload and in the audit trail.
        #[arg(long)]
        reason: String,
    },
    /// Let a waiting workload go again where its earlier failures ruled
    /// out: one node or pool, or all of them (`canopy status w-N` lists
    /// them). A node back from an outage or a quarantine ends them by
    /// itself; this is for what Canopy cannot see was fixed.
    Unexclude {
        id: WorkloadId,
        /// The node (or `provider/pool`) to clear; all without it.
        node: Option<String>,
        /// Why (what was fixed), recorded in its events and the audit trail.
        #[arg(long)]
        reason: String,
    },
    /// Stop placing new work on a node. Kept (journalled, with who and
    /// why) until `uncordon` or `--until`, across restarts and inventory
    /// refreshes.
    Cordon {
        node: String,
        #[arg(long)]
        reason: Option<String>,
        /// When the cordon lapses: a duration (2h) or RFC 3339 time.
        #[arg(long, value_parser = parse_until)]
        until: Option<canopy::engine::model::Millis>,
    },
    /// Let a cordoned or drained node take work again.
    Uncordon {
        node: String,
        #[arg(long)]
        reason: Option<String>,
    },
    /// Stop placing work on a node; its running work finishes (what a Slurm
    /// administrator means by drain). With --evict, running work is
    /// stopped and placed again elsewhere: a move, not a failure.
    Drain {
        node: String,
        #[arg(long)]
        reason: Option<String>,
        /// Stop the node's running work (SIGTERM, then SIGKILL after the
        /// grace) and place it again elsewhere, spending no attempt.
        #[arg(long)]
        evict: bool,
        /// With --evict: between SIGTERM and SIGKILL (e.g. 30s); each
        /// workload's own runtime.stop_grace when omitted.
        #[arg(long, requires = "evict", value_parser = parse_grace)]
        grace: Option<u64>,
    },
    /// End a node's quarantine now: it takes work again, on probation.
    Unquarantine {
        node: String,
        /// Why (what was fixed), for the audit trail.
        #[arg(long)]
        reason: Option<String>,
    },
    /// API tokens: create (the secret is shown once), list, revoke.
    #[command(subcommand)]
    Token(admin::TokenCommand),
    /// Tenants' quotas and usage per flavor; `apply FILE` replaces the
    /// tables (admins).
    Tenants(admin::TenantsArgs),
    /// GPU time and cost by tenant, owner, provider, pool, accelerator or
    /// user: useful, lost (infrastructure, the workload's own, decisions),
    /// idle; and owners' lending and reclaims (docs/usage.md).
    Usage(usage::UsageArgs),
    /// The audit trail: who changed what, from where, and the outcome.
    Audit(admin::AuditArgs),
    /// Show the fleet: providers, pools, capacity and prices.
    Fleet {
        #[command(flatten)]
        fleet: FleetArg,
        /// List every node too.
        #[arg(long)]
        nodes: bool,
        /// Show capability tags and GPU throughput (×V100) as well.
        #[arg(long, short)]
        wide: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Simulate a trace over a fleet in virtual time and compare placement
    /// policies (Canopy's, cheapest-first, blocklist, random), or watch one
    /// in the console (--watch).
    Sim(sim::SimArgs),
    /// Copy this store's journal into an empty PostgreSQL database
    /// (`[journal] url`); the engine must be stopped.
    Migrate(migrate::MigrateArgs),
}

pub fn run(mut cli: Cli) -> Result<ExitCode> {
    let local_only = matches!(
        cli.command,
        Some(
            Command::Serve(_)
                | Command::Sim(_)
                | Command::Validate { .. }
                | Command::Schema
                | Command::Import(_)
                | Command::Migrate(_)
                | Command::Completions(_)
                | Command::Man(_)
        )
    );
    if !local_only {
        profile::apply(&mut cli.store)?;
    }
    match cli.command {
        None => console::run(&cli.store, &cli.console),
        Some(Command::Fleet { fleet, nodes, wide, json }) => match fleet.fleet {
            Some(path) => fleet::run(
                &load_fleet(Some(&path))?,
                &Default::default(),
                &Default::default(),
                &Default::default(),
                nodes,
                wide,
                json,
            ),
            None => match live_fleet(&cli.store)? {
                Some(s) => {
                    fleet::run(&s.fleet, &s.intents, &s.health, &s.unknown_attempts, nodes, wide, json)
                }
                None => fleet::run(
                    &configured_fleet(&cli.store)?,
                    &Default::default(),
                    &Default::default(),
                    &Default::default(),
                    nodes,
                    wide,
                    json,
                ),
            },
        },
        Some(Command::Plan { spec, fleet, json }) => match fleet.fleet {
            Some(path) => plan::run(&spec, &load_fleet(Some(&path))?, &Default::default(), None, json),
            // What the engine sees (live health included), else the fleet
            // the configuration would give it.
            None => match live_fleet(&cli.store)? {
                Some(s) => plan::run(&spec, &s.fleet, &s.health, Some(&s.demand), json),
                None => plan::run(&spec, &configured_fleet(&cli.store)?, &Default::default(), None, json),
            },
        },
        Some(Command::Validate { specs, json }) => validate::run(&specs, json),
        Some(Command::Completions(args)) => completions::completions(&args),
        Some(Command::Man(args)) => completions::man(&args),
        Some(Command::Whoami(args)) => whoami::run(&cli.store, &args),
        Some(Command::Mcp(args)) => mcp::run(&cli.store, args),
        Some(Command::Serve(args)) => engine::run(&cli.store, args),
        Some(Command::Migrate(args)) => migrate::run(&cli.store, args),
        Some(Command::Submit { spec, from, idempotency_key, wait, logs, tenant, json }) => workloads::submit(
            &cli.store,
            &spec,
            from.map(Into::into),
            workloads::SubmitOptions { key: idempotency_key, wait, logs, tenant, json },
        ),
        Some(Command::Import(args)) => import::run(&args),
        Some(Command::Status(args)) => workloads::status(&cli.store, args),
        Some(Command::Logs { id, attempt, follow, stream, raw, reconnect_for }) => {
            logs::logs(&cli.store, logs::LogsArgs { id, attempt, follow, stream, raw, reconnect_for })
        }
        Some(Command::Events { id, json }) => workloads::events(&cli.store, id, json),
        Some(Command::Artifacts { id, json }) => workloads::artifacts(&cli.store, id, json),
        Some(Command::Cancel { id, reason }) => {
            workloads::command(&cli.store, JCommand::Cancel { id }, reason)
        }
        Some(Command::Retry { id, reason }) => workloads::command(&cli.store, JCommand::Retry { id }, reason),
        Some(Command::Ack { id, reason }) => {
            workloads::command(&cli.store, JCommand::Acknowledge { id }, Some(reason))
        }
        Some(Command::Unexclude { id, node, reason }) => {
            workloads::command(&cli.store, JCommand::Unexclude { id, target: node }, Some(reason))
        }
        Some(Command::Cordon { node, reason, until }) => {
            workloads::command(&cli.store, JCommand::Cordon { node, until }, reason)
        }
        Some(Command::Uncordon { node, reason }) => {
            workloads::command(&cli.store, JCommand::Uncordon { node }, reason)
        }
        Some(Command::Drain { node, reason, evict, grace }) => {
            workloads::command(&cli.store, JCommand::Drain { node, evict, grace_s: grace }, reason)
        }
        Some(Command::Unquarantine { node, reason }) => {
            workloads::command(&cli.store, JCommand::Unquarantine { node }, reason)
        }
        Some(Command::Token(t)) => admin::token(&cli.store, t),
        Some(Command::Tenants(t)) => admin::tenants(&cli.store, t),
        Some(Command::Usage(u)) => usage::run(&cli.store, u),
        Some(Command::Audit(a)) => admin::audit(&cli.store, a),
        Some(Command::Sim(args)) => sim::run(args, &cli.console).map(|()| ExitCode::SUCCESS),
        Some(Command::Schema) => {
            let schema = canopy::spec::load::schema();
            outln!("{}", canopy::text::json_with_times(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The fleet as the engine that owns the store (or `--server`) has it
/// now; `None` when none answers.
fn live_fleet(store: &StoreArgs) -> Result<Option<canopy::engine::handle::FleetStatus>> {
    let client = store.client()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    match rt.block_on(client.get::<canopy::engine::handle::FleetStatus>("/v1/fleet")) {
        Ok(s) => Ok(Some(s)),
        Err(canopy::client::ClientError::Unreachable { .. }) if store.server.is_none() => Ok(None),
        Err(e) => Err(color_eyre::eyre::eyre!(e)),
    }
}

/// Without an engine: the fleet one would start with over this store.
fn configured_fleet(store: &StoreArgs) -> Result<canopy::fleet::Fleet> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .wrap_err("starting the async runtime")?;
    Ok(rt.block_on(canopy::app::configured_fleet(&store.home(), store.config.as_deref()))?)
}

fn load_fleet(path: Option<&Path>) -> Result<canopy::fleet::Fleet> {
    match path {
        Some(p) => canopy::fleet::load::load_file(p).wrap_err("loading the fleet"),
        None => canopy::fleet::load::demo().wrap_err("loading the embedded demo fleet"),
    }
}

fn parse_until(s: &str) -> std::result::Result<canopy::engine::model::Millis, String> {
    use canopy::engine::clock::{Clock, SystemClock};
    canopy::server::api::parse_until(&serde_json::Value::String(s.to_string()), SystemClock.now())
}

fn parse_state(s: &str) -> std::result::Result<WorkloadState, String> {
    s.parse()
}
