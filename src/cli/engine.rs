//! `canopy serve` (alias `canopy engine`): the engine as a service, until
//! Ctrl-C or SIGTERM. The API is served on the store's socket and, with
//! `--listen`, on TCP. Running attempts keep running when it stops and
//! are re-adopted next start.

use super::StoreArgs;
use canopy::app::{self, EngineOptions};
use canopy::providers::sim::SimConfig;
use canopy::server::ServerOptions;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub fleet: super::FleetArg,
    /// Seed of the simulated providers' faults and churn.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated providers never fail (for demos and tests).
    #[arg(long)]
    pub no_faults: bool,
    /// Also serve the API on TCP here (e.g. 127.0.0.1:7878); every request
    /// there needs a bearer token (`canopy token create`).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// TLS certificate (PEM) for --listen.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) for --listen.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Allow --listen on a non-loopback address without TLS.
    #[arg(long)]
    pub insecure_listen: bool,
    /// With the journal on PostgreSQL: the URL standbys forward the API to
    /// while this server leads (e.g. https://canopy-a.example:7878), when
    /// the --listen address is not reachable as it is [default: from
    /// --listen].
    #[arg(long, value_name = "URL")]
    pub advertise: Option<String>,
    /// Start a new journal although the store holds attempts, logs or
    /// artifacts of a lost one (the engine refuses otherwise). What this
    /// host still runs is adopted; attempts elsewhere are listed by
    /// `canopy fleet`; new workload ids start above the old ones.
    #[arg(long)]
    pub new_journal: bool,
    /// Batches an event-stream client may fall behind before it is told
    /// to reload.
    #[arg(long, default_value_t = 1024, hide = true)]
    pub stream_buffer: usize,
    /// How long a connection may take to send a request's headers, from
    /// when it opens or its previous response ended; also how long an idle
    /// keep-alive connection stays open [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub header_read_timeout: Option<Duration>,
    /// How long a request body may stop arriving, or a response wait for
    /// the client to read it, before the connection is closed [default: 60s].
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    pub idle_timeout: Option<Duration>,
    /// TCP connections open at once; lowered to leave file descriptors
    /// for the store and its socket when the open-file limit is low.
    #[arg(long, value_name = "N", default_value_t = ServerOptions::DEFAULT_MAX_CONNECTIONS,
          value_parser = parse_count)]
    pub max_connections: usize,
    /// TCP connections that have not yet sent a request with a valid
    /// token; a new one beyond it takes the place of the oldest idle one.
    #[arg(long, value_name = "N", default_value_t = ServerOptions::DEFAULT_MAX_UNAUTHENTICATED,
          value_parser = parse_count)]
    pub max_unauthenticated: usize,
    /// A browser origin (`https://host:port`) allowed to call the MCP
    /// endpoint /mcp; any other Origin is refused. Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    pub mcp_allow_origin: Vec<String>,
    /// An MCP `submit` whose plan estimates more than this many US dollars
    /// takes a confirmation (a second call); 0 asks for every submit.
    #[arg(long, value_name = "USD", default_value_t = canopy::mcp::McpOptions::DEFAULT_CONFIRM_ABOVE_USD,
          value_parser = super::mcp::parse_usd)]
    pub mcp_confirm_above_usd: f64,
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    let d = canopy::units::parse_duration(s)?;
    if d.is_zero() {
        return Err("a timeout must be longer than 0s".into());
    }
    Ok(d)
}

fn parse_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{s:?} is not a count of at least 1")),
    }
}

pub fn run(store: &StoreArgs, args: ServeArgs) -> Result<ExitCode> {
    let home = store.home();
    super::log_to_file(&home)?;
    let rt = tokio::runtime::Runtime::new().wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let mut opts = EngineOptions::embedded(home.clone())?;
        opts.fleet = args.fleet.fleet;
        opts.config = store.config.clone();
        if args.no_faults {
            opts.sim = SimConfig::no_faults();
        }
        if let Some(s) = args.seed {
            opts.sim.seed = s;
        }
        opts.new_journal = args.new_journal;
        let tls = args.tls_cert.is_some();
        opts.server = ServerOptions {
            listen: args.listen,
            tls: args.tls_cert.zip(args.tls_key),
            insecure_listen: args.insecure_listen,
            stream_buffer: args.stream_buffer,
            header_read_timeout: args
                .header_read_timeout
                .unwrap_or(ServerOptions::DEFAULT_HEADER_READ_TIMEOUT),
            idle_timeout: args.idle_timeout.unwrap_or(ServerOptions::DEFAULT_IDLE_TIMEOUT),
            max_connections: args.max_connections,
            max_unauthenticated: args.max_unauthenticated,
            mcp: canopy::mcp::McpOptions {
                confirm_above_usd: Some(args.mcp_confirm_above_usd),
                allowed_origins: args.mcp_allow_origin,
            },
            lease_term: canopy::journal::LEASE_TERM,
            bound: None,
        };
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut signals = Signals { term: &mut term };
        // On PostgreSQL: lead while holding the lease, stand by otherwise.
        let (config, journal_home) = app::configured(&opts)?;
        let lease = match journal_home.journal() {
            loc @ canopy::journal::Location::Postgres { .. } => Some((loc, config.journal.lease_term())),
            canopy::journal::Location::File(_) => None,
        };
        // On PostgreSQL the listeners are bound once and kept while the
        // server goes from leading to standing by and back: its addresses
        // never change and a client is never refused in between.
        let bound = match lease {
            Some(_) => Some(canopy::server::listen::Bound::bind(home.root(), &opts.server).await?),
            None => None,
        };
        if let Some(b) = &bound {
            opts.server.listen = b.tcp_addr.or(opts.server.listen);
            opts.server.bound = Some(b.clone());
        }
        let served = serve_in_turn(&mut opts, args.advertise.as_deref(), lease, tls, &mut signals).await;
        if let Some(b) = &bound {
            b.remove_socket();
        }
        served
    })
}

/// Leads (or, on PostgreSQL, stands by while another server holds the
/// lease) until told to stop.
async fn serve_in_turn(
    opts: &mut EngineOptions,
    advertise: Option<&str>,
    lease: Option<(canopy::journal::Location, Duration)>,
    tls: bool,
    signals: &mut Signals<'_>,
) -> Result<ExitCode> {
    let mut owned = None;
    // Once it has led: a journal out of reach is waited out standing
    // by, not a reason to exit (at the first start it is one: the URL
    // may be wrong).
    let mut has_led = false;
    loop {
        opts.advertise = canopy::ha::advertised(advertise, opts.server.listen, tls);
        if let Some((at, term)) = &lease
            && owned.is_none()
        {
            let now = canopy::engine::clock::Clock::now(&canopy::engine::clock::SystemClock);
            let tried = {
                let (at, advertise) = (at.clone(), opts.advertise.clone());
                let term = *term;
                tokio::task::spawn_blocking(move || at.take(now, term, &advertise)).await?
            };
            match tried {
                Ok(o) => owned = Some(o),
                Err(e)
                    if matches!(e, canopy::journal::JournalError::Leased { .. })
                        || (has_led && e.unreachable()) =>
                {
                    let situation = match &e {
                        canopy::journal::JournalError::Leased { owner, .. } => {
                            format!("is led by {owner}")
                        }
                        e => format!("cannot be reached ({e})"),
                    };
                    match stand_by(opts, at, *term, &situation, (advertise, tls), signals).await? {
                        Some(o) => owned = Some(o),
                        None => return Ok(ExitCode::SUCCESS),
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        has_led = true;
        match lead(opts, owned.take(), tls, signals).await? {
            Led::Stopped => return Ok(ExitCode::SUCCESS),
            // Refused its writes, or its lease taken: stand by again.
            Led::SteppedDown(why) if lease.is_some() => {
                let _ = writeln!(
                    std::io::stderr(),
                    "canopy serve: stepping down: {}",
                    canopy::text::sanitize(&why)
                );
                tracing::warn!("stepping down: {why}");
            }
            Led::SteppedDown(why) => return Err(eyre!(why)),
        }
    }
}

use std::io::Write;

struct Signals<'a> {
    term: &'a mut tokio::signal::unix::Signal,
}

impl Signals<'_> {
    async fn stop(&mut self) {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// Stands by (forwarding the API to the leader) until this server takes
/// the lease, or until told to stop (`None`).
async fn stand_by(
    opts: &mut EngineOptions,
    at: &canopy::journal::Location,
    term: Duration,
    situation: &str,
    (explicit, tls): (Option<&str>, bool),
    signals: &mut Signals<'_>,
) -> Result<Option<canopy::journal::Ownership>> {
    let (tx, view) = tokio::sync::watch::channel(None);
    let home = opts.home.clone().with_journal(at.clone());
    // A leader that stepped down because the journal's database went out
    // of reach (a restart) stands by once it is back: until then there is
    // nothing to read and no lease to take.
    // Meanwhile the kept listeners answer 503 (see `server::unavailable`).
    let mut said = false;
    let mut unavailable = None;
    let listening = loop {
        match canopy::server::standby::listen(&home, &opts.server, view.clone()).await {
            Ok(s) => break Some(s),
            Err(canopy::server::ServeError::Journal(e)) if e.unreachable() => {
                if unavailable.is_none()
                    && let Some(b) = &opts.server.bound
                {
                    unavailable = Some(canopy::server::unavailable::answer(b, &opts.server)?);
                }
                if !said {
                    let _ = writeln!(
                        std::io::stderr(),
                        "canopy serve: waiting for the journal {}: {}",
                        at.shown(),
                        canopy::text::sanitize(&e.to_string())
                    );
                    said = true;
                }
                tokio::select! {
                    _ = tokio::time::sleep(term / 3) => {}
                    _ = signals.stop() => break None,
                }
            }
            Err(e) => return Err(e.into()),
        }
    };
    if let Some(u) = unavailable {
        u.stop().await;
    }
    let Some(standby) = listening else { return Ok(None) };
    // The same addresses once it leads (port 0 picked one).
    if standby.tcp.is_some() {
        opts.server.listen = standby.tcp;
    }
    let tcp =
        standby.tcp.map(|a| format!(", {}://{a}", if tls { "https" } else { "http" })).unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "canopy serve: standing by: the journal {} {}; forwarding the API to its leader on {}{tcp}; taking over when its lease runs out",
        at.shown(),
        canopy::text::sanitize(situation),
        standby.socket.display(),
    );
    let _ = canopy::systemd::notify(&format!("READY=1\nSTATUS=standing by: the journal {situation}"));
    opts.advertise = canopy::ha::advertised(explicit, opts.server.listen, tls);
    let waited = tokio::select! {
        lease = canopy::ha::wait_for_lease(at.clone(), term, opts.advertise.clone(), tx) => Some(lease),
        _ = signals.stop() => None,
    };
    standby.stop().await;
    Ok(waited.map(canopy::journal::Ownership::Lease))
}

/// How leading ended.
enum Led {
    /// Ctrl-C or SIGTERM.
    Stopped,
    /// The lease went to another server: why.
    SteppedDown(String),
}

/// Starts the engine (with `owned` when the lease was taken already) and
/// serves until stopped, or until it loses the lease.
async fn lead(
    opts: &mut EngineOptions,
    owned: Option<canopy::journal::Ownership>,
    tls: bool,
    signals: &mut Signals<'_>,
) -> Result<Led> {
    let mut running = match app::start_owning(opts.clone(), owned).await {
        Ok(r) => r,
        // The journal went out of reach while starting: stand by until it
        // is back (the lease, if taken, is given up or lapses).
        Err(app::AppError::Journal(e)) if e.unreachable() => {
            return Ok(Led::SteppedDown(format!("the journal cannot be reached: {e}")));
        }
        Err(e) => return Err(e.into()),
    };
    if running.serving.tcp.is_some() {
        opts.server.listen = running.serving.tcp;
    }
    let tcp = running
        .serving
        .tcp
        .map(|a| format!(", {}://{a}", if tls { "https" } else { "http" }))
        .unwrap_or_default();
    // Not through `out`: a closed stderr must not stop (or panic) the
    // engine that is starting.
    let _ = writeln!(
        std::io::stderr(),
        "canopy serve: store {} (id {}), {} providers, {} nodes; API on {}{tcp}. Ctrl-C stops the engine; workloads keep running.",
        running.journal,
        running.store_id,
        running.fleet.providers.len(),
        running.fleet.nodes.len(),
        running.serving.socket.display(),
    );
    for n in &running.notices {
        let _ = writeln!(std::io::stderr(), "canopy serve: warning: {}", canopy::text::sanitize(n));
    }
    // Under a `Type=notify` unit: the API answers from here on.
    let ready = format!(
        "READY=1\nSTATUS=serving store {} on {}{tcp}",
        running.store_id,
        running.serving.socket.display()
    );
    if let Err(e) = canopy::systemd::notify(&ready) {
        let _ = writeln!(std::io::stderr(), "canopy serve: warning: cannot tell systemd it is ready: {e}");
    }
    let mut lost = running.lease_lost.clone();
    let lease_lost = async {
        match &mut lost {
            // Only a renewer that found the lease taken: one that ended
            // because the engine stopped (and dropped the lease) says
            // nothing, and the engine's own outcome is what counts.
            Some(l) => {
                if l.wait_for(|l| *l).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending().await,
        }
    };
    enum Ended {
        Signal,
        Task(Result<Result<(), canopy::engine::shell::ShellError>, tokio::task::JoinError>),
        LeaseTaken,
    }
    let ended = tokio::select! {
        _ = signals.stop() => Ended::Signal,
        r = &mut running.task => Ended::Task(r),
        _ = lease_lost => Ended::LeaseTaken,
    };
    let _ = canopy::systemd::notify("STOPPING=1");
    let result = match ended {
        Ended::Task(r) => {
            running.serving.stop().await;
            r.map_err(|e| eyre!("the engine task failed: {e}"))?
        }
        Ended::Signal => {
            running.stop(std::time::Duration::from_secs(10)).await.map_err(|e| eyre!(e))?;
            return Ok(Led::Stopped);
        }
        Ended::LeaseTaken => {
            // The engine's next write would be refused anyway: stop it now.
            let _ = running.stop(std::time::Duration::from_secs(10)).await;
            return Ok(Led::SteppedDown(
                "another server took the journal's lease (this one could not renew it in time)".into(),
            ));
        }
    };
    match result {
        Err(canopy::engine::shell::ShellError::Journal(
            e @ canopy::journal::JournalError::LeaseLost { .. },
        )) => Ok(Led::SteppedDown(e.to_string())),
        // PostgreSQL out of reach (restarting, the network): a write whose
        // outcome is unknown was answered to nobody (the engine stopped
        // before replying or launching anything of it). Stand by; the next
        // leader, this server or another, reads the journal again once it
        // is back, and a keyed submit sent again finds its workload.
        Err(canopy::engine::shell::ShellError::Journal(e)) if e.unreachable() => {
            Ok(Led::SteppedDown(format!("the journal cannot be reached: {e}")))
        }
        Err(e) => Err(eyre!(e)),
        // The engine ended by itself: as before, the server stops.
        Ok(()) => Ok(Led::Stopped),
    }
}
