//! The `canopy` binary: parses the command line and hands off to the
//! library. Errors are reported here, at the edge: as answers (what went
//! wrong and why, one line each) unless `--debug` asks for the full
//! color-eyre report. Panics are bugs and keep their report and, when
//! RUST_BACKTRACE asks, their backtrace.

mod cli;

use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The local provider's supervisor re-executes this binary; it must not
    // go through clap (its argv belongs to the workload).
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("__supervise") {
        let code = canopy::providers::local::supervise_main(&argv[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // The ssh provider's host side: one request on stdin, run by the
    // binary Canopy uploaded to an owner's host.
    if argv.get(1).map(String::as_str) == Some(canopy::providers::ssh::protocol::HOST_SUBCOMMAND) {
        let code = canopy::providers::ssh::remote::host_main(&argv[2..]);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    let args = cli::Cli::parse();
    let debug = args.debug;
    let plain = std::env::var_os("NO_COLOR").is_some() || !std::io::stderr().is_terminal();
    let hook = if plain {
        color_eyre::config::HookBuilder::default().theme(color_eyre::config::Theme::new())
    } else {
        color_eyre::config::HookBuilder::default()
    };
    // Installing twice is the only failure, and this is the only call.
    let _ = hook.display_env_section(false).install();
    match cli::run(args) {
        Ok(code) => code,
        // The full report keeps color-eyre's colours when it has them;
        // plain, it is made safe like every other line the CLI prints.
        Err(e) if debug && !plain => {
            eprintln!("error: {e:?}");
            ExitCode::from(cli::EXIT_ERROR)
        }
        Err(e) if debug => {
            cli::out::stderr(&format!("error: {e:?}\n"));
            ExitCode::from(cli::EXIT_ERROR)
        }
        Err(e) => {
            // An error may quote what a user typed or a server sent:
            // through the CLI's output, safe for a terminal.
            cli::out::stderr(&format!("{}\n", answer(&e)));
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

/// An error as an answer for people: the error, then each cause it wraps
/// that adds something, one line each. No locations, no backtrace: a user
/// error is not a bug (`--debug` prints the full report).
fn answer(e: &color_eyre::eyre::Report) -> String {
    let mut out = format!("error: {e}");
    let mut last = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !last.contains(&text) {
            out.push_str(&format!("\n  caused by: {text}"));
        }
        last = text;
    }
    out
}
