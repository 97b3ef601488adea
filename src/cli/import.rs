//! `canopy import skypilot|dstack FILE [-o OUT]`: the Canopy spec that
//! means what a SkyPilot task YAML or a dstack task or service configuration means,
//! printed (or written to OUT). Every field without a counterpart is a
//! warning on stderr at its line; a file that cannot be converted is a
//! positioned error and exit 1. `canopy submit --from` uses [`converted`].

use canopy::import::{self, Imported, Source};
use color_eyre::eyre::{Result, WrapErr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The formats `import` and `submit --from` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFrom {
    /// A SkyPilot task YAML (`sky launch task.yaml`).
    Skypilot,
    /// A dstack task or service configuration (`type: task` or `type:
    /// service`, `.dstack.yml`).
    Dstack,
}

impl From<ImportFrom> for Source {
    fn from(f: ImportFrom) -> Source {
        match f {
            ImportFrom::Skypilot => Source::Skypilot,
            ImportFrom::Dstack => Source::Dstack,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// What FILE is: skypilot or dstack.
    #[arg(value_enum)]
    pub from: ImportFrom,
    /// The task file to convert.
    pub file: PathBuf,
    /// Write the spec to OUT instead of standard output.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,
}

pub fn run(args: &ImportArgs) -> Result<ExitCode> {
    let Some(imported) = converted(&args.file, args.from.into()) else {
        return Ok(ExitCode::from(super::EXIT_ERROR));
    };
    match &args.output {
        None => out!("{}", imported.toml),
        Some(out) => {
            if same_file(out, &args.file) {
                errln!("error: {} is the file being imported; give another path to -o", out.display());
                return Ok(ExitCode::from(super::EXIT_ERROR));
            }
            std::fs::write(out, &imported.toml).wrap_err_with(|| format!("writing {}", out.display()))?;
            errln!("wrote {}", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `path` converted, its warnings printed to stderr; `None` (with the
/// errors printed) when it cannot be converted.
pub fn converted(path: &Path, source: Source) -> Option<Imported> {
    let (_, result) = import::convert_file(source, path);
    match result {
        Ok(imported) => {
            for w in &imported.warnings {
                errln!("{w}");
            }
            Some(imported)
        }
        Err(e) => {
            for d in &e.diagnostics {
                errln!("{d}");
            }
            errln!("error: {} could not be imported as a {} task", path.display(), source.title());
            None
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
