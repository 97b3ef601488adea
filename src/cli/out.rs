//! Where the CLI's output goes: everything a command prints passes
//! through here, so two things hold for all of it.
//!
//! It is safe for a terminal. Text is written through
//! [`canopy::text::sanitize_lines`]: whatever a workload, a user or a
//! server put in it (escape sequences, OSC 52, BEL, bidi overrides) shows
//! as `�` instead of acting. Lines and tabs stay. Only `logs` writes bytes
//! as they are ([`bytes`]), and only to a pipe, a file or with `--raw`.
//!
//! A reader that goes away is not a crash. `canopy status | head -1`
//! closes the pipe early; the next write fails with EPIPE and the command
//! exits at once, quietly, with [`EXIT_BROKEN_PIPE`]. SIGPIPE itself stays
//! ignored (Rust's default), so a socket whose peer hangs up is an error to
//! handle, never a signal that kills the engine or the console.

use std::io::Write;

/// The exit status after EPIPE: what a shell reports for a process that
/// SIGPIPE ended (128 + 13), as `cat` or `grep` would have it.
pub const EXIT_BROKEN_PIPE: i32 = 141;

/// Text to stdout, made safe for a terminal.
pub fn stdout(text: &str) {
    write(&mut std::io::stdout().lock(), canopy::text::sanitize_lines(text).as_bytes());
}

/// Text to stderr, made safe for a terminal.
pub fn stderr(text: &str) {
    write(&mut std::io::stderr().lock(), canopy::text::sanitize_lines(text).as_bytes());
}

/// Bytes to stdout as they are: only for `logs` to a pipe or a file, or
/// with `--raw`.
pub fn bytes(b: &[u8]) {
    write(&mut std::io::stdout().lock(), b);
}

fn write(w: &mut impl Write, b: &[u8]) {
    if let Err(e) = w.write_all(b).and_then(|()| w.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        // A full disk or a failed device: say so once, where it may still
        // be read, and stop (exit 1, as for any failure).
        let _ = writeln!(std::io::stderr(), "error: writing the output failed: {e}");
        std::process::exit(i32::from(super::EXIT_ERROR));
    }
}

/// `println!`, through [`stdout`].
macro_rules! outln {
    () => {
        $crate::cli::out::stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::cli::out::stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!`, through [`stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::out::stdout(&format!($($arg)*))
    };
}

/// `eprintln!`, through [`stderr`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::cli::out::stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}
