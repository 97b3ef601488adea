//! `canopy` with no subcommand: the operator console, with the engine
//! running in the same process on the tokio runtime beside it. Canopy's
//! own logs go to `<home>/canopy.log`, never the terminal.

use super::{ConsoleArgs, StoreArgs};
use canopy::app::{self, EngineOptions};
use canopy::console::app::{App, Config};
use canopy::console::model::Model;
use canopy::console::run;
use canopy::console::theme::{ColorDepth, Theme};
use canopy::providers::sim::SimConfig;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::process::ExitCode;
use std::time::Duration;

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

pub fn run(store: &StoreArgs, args: &ConsoleArgs) -> Result<ExitCode> {
    let theme = theme(args)?;
    let home = store.home();
    super::log_to_file(&home)?;
    let rt = tokio::runtime::Runtime::new().wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let mut opts = EngineOptions::embedded(home.clone())?;
        opts.fleet = args.fleet.clone();
        if args.no_faults {
            opts.sim = SimConfig::no_faults();
        }
        let running = app::start(opts).await?;
        let config = Config {
            read_only: args.read_only,
            theme,
            utc_offset_s: run::local_offset_s(),
            stale_after_s: 10.0,
        };
        let mut app = App::new(config, Model::default(), run::now());
        let r = run::run(&mut app, running.handle.clone(), home.logs(), home.root().to_path_buf()).await;
        running.handle.shutdown();
        let _ = tokio::time::timeout(Duration::from_secs(5), running.task).await;
        r.wrap_err("the console's terminal failed")?;
        Ok(ExitCode::SUCCESS)
    })
}
