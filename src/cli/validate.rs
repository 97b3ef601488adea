//! `canopy validate SPEC…`: every problem in every spec, with where and how
//! to fix it. Exit 1 when any spec has an error; warnings alone pass.

use canopy::spec::{Diagnostic, Severity, load};
use color_eyre::eyre::Result;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Serialize)]
struct Report {
    file: String,
    ok: bool,
    diagnostics: Vec<Diagnostic>,
}

pub fn run(specs: &[PathBuf], json: bool) -> Result<ExitCode> {
    let mut reports = Vec::new();
    for path in specs {
        let file = path.display().to_string();
        // Read once, safely (a FIFO or /dev/zero is refused), and shown
        // against what was read.
        let (source, loaded) = load::load_file_and_text(path);
        let (ok, diagnostics) = match loaded {
            Ok(l) => (true, l.warnings),
            Err(e) => (false, e.diagnostics),
        };
        if !json {
            for d in &diagnostics {
                errln!("{}\n", d.render(&source));
            }
            let errors = diagnostics.iter().filter(|d| d.severity == Severity::Error).count();
            let warnings = diagnostics.len() - errors;
            if ok {
                outln!("{file}: ok ({warnings} warning{})", plural(warnings));
            } else {
                outln!("{file}: {errors} error{}, {warnings} warning{}", plural(errors), plural(warnings));
            }
        }
        reports.push(Report { file, ok, diagnostics });
    }
    if json {
        outln!("{}", canopy::text::json_with_times(&reports)?);
    }
    Ok(if reports.iter().all(|r| r.ok) { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_ERROR) })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
