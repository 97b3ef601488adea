//! `canopy completions SHELL` and `canopy man`: shell completions and
//! manual pages, generated from the same argument definitions the parser
//! uses ([`super::Cli`]), so they cannot drift from the commands.

use super::Cli;
use clap::CommandFactory;
use color_eyre::eyre::{Result, WrapErr};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write one page per command into DIR (canopy.1, canopy-submit.1,
    /// canopy-token-create.1, …) instead of printing canopy(1).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Prints the completion script for `args.shell`.
pub fn completions(args: &CompletionsArgs) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "canopy", &mut script);
    super::out::stdout(&String::from_utf8_lossy(&script));
    Ok(ExitCode::SUCCESS)
}

/// Prints canopy(1), or writes every command's page into `--out`.
pub fn man(args: &ManArgs) -> Result<ExitCode> {
    let cmd = Cli::command();
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).wrap_err_with(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .wrap_err_with(|| format!("writing the manual pages into {}", dir.display()))?;
            let pages = std::fs::read_dir(dir)
                .wrap_err_with(|| format!("reading {}", dir.display()))?
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "1"))
                .count();
            errln!(
                "canopy: {pages} manual pages in {} (read one with `man -l {}/canopy.1`)",
                dir.display(),
                dir.display()
            );
        }
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page).wrap_err("rendering the manual page")?;
            super::out::stdout(&String::from_utf8_lossy(&page));
        }
    }
    Ok(ExitCode::SUCCESS)
}
