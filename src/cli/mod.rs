//! Command-line interface: argument definitions and dispatch.
//!
//! Each subcommand lives in its own file and prints for people (tables) or
//! for scripts (`--json`). Exit codes are part of the interface:
//! 0 success, 1 bad input or failure, 2 usage error (clap), 3 nothing fits
//! (`plan`).

mod fleet;
mod plan;
mod table;
mod validate;

use clap::{Parser, Subcommand};
use color_eyre::eyre::{Result, WrapErr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const EXIT_ERROR: u8 = 1;
pub const EXIT_UNSCHEDULABLE: u8 = 3;

#[derive(Debug, Parser)]
#[command(
    name = "canopy",
    version,
    about = "Run AI/GPU workloads where they fit: capability-based placement, failure-aware retries, one console."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
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
    /// Show the fleet: providers, pools, capacity and prices.
    Fleet {
        #[command(flatten)]
        fleet: FleetArg,
        /// List every node too.
        #[arg(long)]
        nodes: bool,
        /// Show capability tags as well.
        #[arg(long, short)]
        wide: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        None => fleet::run(&load_fleet(None)?, false, false, false),
        Some(Command::Fleet { fleet, nodes, wide, json }) => {
            fleet::run(&load_fleet(fleet.fleet.as_deref())?, nodes, wide, json)
        }
        Some(Command::Plan { spec, fleet, json }) => {
            plan::run(&spec, &load_fleet(fleet.fleet.as_deref())?, json)
        }
        Some(Command::Validate { specs, json }) => validate::run(&specs, json),
        Some(Command::Schema) => {
            let schema = canopy::spec::load::schema();
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load_fleet(path: Option<&Path>) -> Result<canopy::fleet::Fleet> {
    match path {
        Some(p) => canopy::fleet::load::load_file(p).wrap_err("loading the fleet"),
        None => canopy::fleet::load::demo().wrap_err("loading the embedded demo fleet"),
    }
}
