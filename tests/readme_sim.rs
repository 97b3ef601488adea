//! The README's `canopy sim` table is what the binary prints: the command
//! named in the README's `<!-- readme-sim: ARGS -->` marker runs, and the
//! block up to `<!-- /readme-sim -->` must be the start of its output,
//! line for line (the simulator is deterministic, byte for byte).

use std::process::Command;

const START: &str = "<!-- readme-sim: ";
const END: &str = "<!-- /readme-sim -->";

#[test]
fn the_readmes_sim_table_is_what_canopy_sim_prints() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let at = readme.find(START).expect("README.md has a readme-sim marker");
    let rest = &readme[at + START.len()..];
    let (args, rest) = rest.split_once(" -->\n").expect("the marker ends with -->");
    let block = &rest[..rest.find(END).expect("the readme-sim block is closed")];

    let out = Command::new(env!("CARGO_BIN_EXE_canopy"))
        .current_dir(root)
        .args(["--color=none"])
        .args(args.split_whitespace())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "canopy {args} failed: {}", String::from_utf8_lossy(&out.stderr));
    let want: Vec<&str> = block.lines().collect();
    let got: Vec<&str> = stdout.lines().take(want.len()).collect();
    for (n, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(
            w,
            g,
            "README.md's sim block, line {} of {}, differs from `canopy {args}` (paste the output between the markers)",
            n + 1,
            want.len()
        );
    }
    assert_eq!(want.len(), got.len(), "`canopy {args}` printed fewer lines than the README shows:\n{stdout}");
}
