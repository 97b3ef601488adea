//! `canopy engine`: run the engine without the console, until Ctrl-C or
//! SIGTERM. Running attempts keep running and are re-adopted next start.

use super::StoreArgs;
use canopy::app::{self, EngineOptions};
use canopy::providers::sim::SimConfig;
use color_eyre::eyre::{Result, WrapErr, eyre};
use std::path::PathBuf;
use std::process::ExitCode;

pub fn run(
    store: &StoreArgs,
    fleet: Option<PathBuf>,
    seed: Option<u64>,
    no_faults: bool,
) -> Result<ExitCode> {
    let home = store.home();
    super::log_to_file(&home)?;
    let rt = tokio::runtime::Runtime::new().wrap_err("starting the async runtime")?;
    rt.block_on(async move {
        let mut opts = EngineOptions::embedded(home.clone())?;
        opts.fleet = fleet;
        opts.config = store.config.clone();
        if no_faults {
            opts.sim = SimConfig::no_faults();
        }
        if let Some(s) = seed {
            opts.sim.seed = s;
        }
        let running = app::start(opts).await?;
        eprintln!(
            "canopy engine: store {} (id {}), {} providers, {} nodes. Ctrl-C stops the engine; workloads keep running.",
            home.store().display(),
            running.store_id,
            running.fleet.providers.len(),
            running.fleet.nodes.len()
        );
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let task = running.task;
        tokio::pin!(task);
        tokio::select! {
            _ = tokio::signal::ctrl_c() => running.handle.shutdown(),
            _ = term.recv() => running.handle.shutdown(),
            r = &mut task => {
                return match r {
                    Ok(Ok(())) => Ok(ExitCode::SUCCESS),
                    Ok(Err(e)) => Err(eyre!(e)),
                    Err(e) => Err(eyre!("the engine task failed: {e}")),
                };
            }
        }
        match task.await {
            Ok(Ok(())) => Ok(ExitCode::SUCCESS),
            Ok(Err(e)) => Err(eyre!(e)),
            Err(e) => Err(eyre!("the engine task failed: {e}")),
        }
    })
}
