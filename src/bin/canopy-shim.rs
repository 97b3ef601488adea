//! The local provider's supervisor as a program of its own, for tests and
//! for hosts where re-executing `canopy __supervise` is not wanted.
//! Usage: `canopy-shim --attempt <dir> [--lease <file>] -- <argv...>`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(canopy::providers::local::supervise_main(&args));
}
