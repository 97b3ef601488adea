//! The scheduler's files import one another downward only: no file of
//! `src/schedule` imports one that imports it back, directly or through
//! others (the layers are written down in `src/schedule/mod.rs`). Issue
//! 24 found `place.rs`, `gang.rs`, `explain.rs` and `decision.rs` in one
//! circle; this catches a return of any circle and names its files.
//!
//! It reads the sources: every path that starts with `super` or
//! `crate::schedule` (or a file's own child module) is resolved to the
//! file it names; names `mod.rs` re-exports resolve to the file that
//! defines them. Comments and inline test modules are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every file module below `schedule` by its path ("score", "gang::sets").
/// `mod.rs` itself is the root (""), and `tests/` (unit tests) is skipped.
fn files(dir: &Path, prefix: &str, out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
        if path.is_dir() {
            if prefix.is_empty() && stem == "tests" {
                continue;
            }
            files(&path, &format!("{prefix}{stem}::"), out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let name = if stem == "mod" {
                prefix.trim_end_matches("::").to_string()
            } else {
                format!("{prefix}{stem}")
            };
            out.insert(name, path);
        }
    }
}

/// The source without comment lines and without an inline test module
/// (by convention the last thing in a file).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths a use-tree at `s` names, as lists of segments (groups in
/// braces expanded), and how far it reads.
fn paths(s: &[char], mut i: usize, base: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut segs = base;
    loop {
        while i < s.len() && s[i].is_whitespace() {
            i += 1;
        }
        if i < s.len() && s[i] == '{' {
            i += 1;
            loop {
                while i < s.len() && (s[i].is_whitespace() || s[i] == ',') {
                    i += 1;
                }
                if i >= s.len() || s[i] == '}' {
                    return i + 1;
                }
                i = paths(s, i, segs.clone(), out);
            }
        }
        let start = i;
        while i < s.len() && (is_ident(s[i]) || s[i] == '*') {
            i += 1;
        }
        if i == start {
            out.push(segs);
            return i;
        }
        segs.push(s[start..i].iter().collect());
        if s.get(i) == Some(&':') && s.get(i + 1) == Some(&':') {
            i += 2;
        } else {
            out.push(segs);
            return i;
        }
    }
}

/// The files `module` (whose code is `src`) refers to.
fn imports(
    module: &str,
    src: &str,
    modules: &BTreeMap<String, PathBuf>,
    reexports: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let here: Vec<String> =
        if module.is_empty() { Vec::new() } else { module.split("::").map(str::to_string).collect() };
    let s: Vec<char> = src.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let starts = is_ident(s[i]) && (i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        let mut raw = Vec::new();
        let end = paths(&s, i, Vec::new(), &mut raw);
        i = end.max(i + 1);
        for path in raw {
            // To a path from the schedule root, if it points into it.
            let abs: Vec<String> = match path.first().map(String::as_str) {
                Some("crate") if path.get(1).is_some_and(|p| p == "schedule") => path[2..].to_vec(),
                Some("super") => {
                    let ups = path.iter().take_while(|p| *p == "super").count();
                    // `pub(super)` names no file; a path above `schedule` none of these.
                    if ups == path.len() || ups > here.len() {
                        continue;
                    }
                    let mut a = here[..here.len() - ups].to_vec();
                    a.extend_from_slice(&path[ups..]);
                    a
                }
                Some(first) if path.len() > 1 && modules.contains_key(&child(&here, first)) => {
                    let mut a = here.clone();
                    a.extend_from_slice(&path);
                    a
                }
                _ => continue,
            };
            found.push(abs);
        }
    }
    let mut out = BTreeSet::new();
    for abs in found {
        // The longest prefix that is a file; at the root, a re-export.
        let target = (1..=abs.len()).rev().map(|k| abs[..k].join("::")).find(|m| modules.contains_key(m));
        let target = target.or_else(|| abs.first().and_then(|name| reexports.get(name).cloned()));
        if let Some(t) = target
            && t != module
            && !t.is_empty()
        {
            out.insert(t);
        }
    }
    out
}

fn child(here: &[String], name: &str) -> String {
    let mut a = here.to_vec();
    a.push(name.to_string());
    a.join("::")
}

/// Names `mod.rs` re-exports (`pub use file::{A, B}`), by the file that defines them.
fn reexports(root: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in root.lines() {
        let Some(rest) = line.trim().strip_prefix("pub use ") else { continue };
        let s: Vec<char> = rest.trim_end_matches(';').chars().collect();
        let mut raw = Vec::new();
        paths(&s, 0, Vec::new(), &mut raw);
        for p in raw {
            if let (Some(file), Some(name)) = (p.first(), p.last()) {
                out.insert(name.clone(), file.clone());
            }
        }
    }
    out
}

/// Who imports whom among the scheduler's files (the root left out: it
/// only declares and re-exports).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/schedule");
    let mut modules = BTreeMap::new();
    files(&dir, "", &mut modules);
    let root = modules.get("").map(|p| code(p)).expect("src/schedule/mod.rs");
    let reexports = reexports(&root);
    modules
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, path)| (m.clone(), imports(m, &code(path), &modules, &reexports)))
        .collect()
}

/// A circle of imports, as the files in it, when there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // Depth-first: 0 unseen, 1 on the current path, 2 done.
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten() {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let at = path.iter().position(|p| p == next).unwrap_or(0);
                    let mut c = path[at..].to_vec();
                    c.push(next.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if state.get(m).copied().unwrap_or(0) == 0 {
            let mut path = Vec::new();
            if let Some(c) = visit(m, graph, &mut state, &mut path) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_scheduler_file_imports_one_that_imports_it_back() {
    let graph = graph();
    if let Some(c) = circle(&graph) {
        let files: Vec<String> = c.iter().map(|m| format!("{}.rs", m.replace("::", "/"))).collect();
        panic!(
            "src/schedule has an import circle: {} (each imports the next); move what they share into a \
             lower layer (see the layers in src/schedule/mod.rs)",
            files.join(" imports ")
        );
    }
}

#[test]
fn the_reading_finds_the_imports_it_guards() {
    // If the source reading broke, the circle test would pass vacuously.
    let graph = graph();
    let has = |from: &str, to: &str| graph.get(from).is_some_and(|t| t.contains(to));
    for (from, to) in [
        ("place", "single"),
        ("place", "gang"),
        ("single", "score"),
        ("gang", "gang::sets"),
        ("gang::sets", "gang::domains"),
        ("gang::domains", "snapshot"),
        ("snapshot::build", "snapshot"),
        ("explain", "domain"),
        ("check", "requirements"),
        ("unfit", "place"),
        ("score", "snapshot"),
    ] {
        assert!(has(from, to), "{from} should import {to}; read: {:?}", graph.get(from));
    }
}
