//! What the SkyPilot and dstack import tests share: the example files of
//! one format, converting them as if they lived in a user's project, the
//! checks every example's conversion must pass, and malformed cases with
//! the position, message and help their error must carry.
#![allow(dead_code)]

use canopy::import::{self, Context, Imported, Source};
use canopy::spec::{Diagnostic, Format, Severity, load};
use std::path::Path;

/// One import format's fixtures.
pub struct Fixtures {
    pub source: Source,
    /// `skypilot` or `dstack`: the folder under tests/import, and the prefix
    /// of file names in diagnostics and of snapshot names.
    pub kind: &'static str,
    /// How an example's file name ends (`.yaml`, `.dstack.yml`).
    pub ext: &'static str,
    /// The directory the user runs `canopy import` from.
    pub cwd: &'static str,
    /// The file name malformed snippets are reported under.
    pub snippet_name: &'static str,
}

impl Fixtures {
    pub fn dir(&self) -> String {
        format!("{}/tests/import/{}", env!("CARGO_MANIFEST_DIR"), self.kind)
    }

    /// As if the file lived in /home/ada/project, for a user whose home is
    /// /home/ada.
    pub fn ctx(&self, file: &str) -> Context {
        Context {
            file: format!("{}/{file}", self.kind),
            cwd: self.cwd.into(),
            config_dir: "/home/ada/project".into(),
            home: Some("/home/ada".into()),
        }
    }

    pub fn text(&self, name: &str) -> String {
        std::fs::read_to_string(Path::new(&self.dir()).join(name)).unwrap()
    }

    pub fn convert(&self, name: &str) -> Imported {
        match import::convert(self.source, &self.text(name), &self.ctx(name)) {
            Ok(i) => i,
            Err(e) => panic!("{name} did not convert:\n{e}"),
        }
    }

    pub fn convert_str(&self, yaml: &str) -> Result<Imported, Vec<Diagnostic>> {
        import::convert(self.source, yaml, &self.ctx(self.snippet_name)).map_err(|e| e.diagnostics)
    }

    /// The example files, sorted.
    pub fn examples(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(self.ext))
            .collect();
        names.sort();
        names
    }

    /// Converts every example, checks that the printed spec loads as the
    /// converted one with no warnings of its own and that every warning is
    /// one positioned line; returns `(snapshot name, snapshot)` for each.
    pub fn converted_examples(&self, at_least: usize) -> Vec<(String, String)> {
        let names = self.examples();
        assert!(names.len() >= at_least, "at least {at_least} {} examples, found {}", self.kind, names.len());
        names
            .into_iter()
            .map(|name| {
                let i = self.convert(&name);
                let loaded = load::parse(&i.toml, &name, Format::Toml)
                    .unwrap_or_else(|e| panic!("{name}: the output does not load:\n{e}\n{}", i.toml));
                assert_eq!(loaded.spec, i.spec, "{name}: the text and the spec differ");
                assert!(loaded.warnings.is_empty(), "{name}: {:?}", loaded.warnings);
                for w in &i.warnings {
                    assert_eq!(w.severity, Severity::Warning);
                    assert!(w.line > 0 && w.col > 0, "{name}: a warning without a position: {w}");
                    assert!(!w.to_string().contains('\n'), "{name}: warnings are one line: {w}");
                }
                let snapshot = format!("{}\n--- warnings ---\n{}\n", i.toml, warnings(&i));
                (format!("{}_{}", self.kind, name.trim_end_matches(self.ext)), snapshot)
            })
            .collect()
    }

    /// Every case is refused with an error at its position, with its
    /// message and help, shown as `FILE:LINE:COL: error: …`.
    pub fn check_malformed(&self, cases: &[Bad]) {
        for case in cases {
            let diagnostics = match self.convert_str(case.yaml) {
                Ok(i) => panic!("{:?} converted:\n{}", case.yaml, i.toml),
                Err(d) => d,
            };
            let e = diagnostics.iter().find(|d| d.is_error()).expect("an error");
            assert!(e.message.contains(case.message), "{:?}: message {:?}", case.yaml, e.message);
            assert_eq!((e.line, e.col), case.at, "{:?}: {e}", case.yaml);
            let help = e.help.as_deref().unwrap_or("");
            assert!(help.contains(case.help) && !help.is_empty(), "{:?}: help {help:?}", case.yaml);
            let prefix = format!("{}/{}:{}:{}: error: ", self.kind, self.snippet_name, case.at.0, case.at.1);
            assert!(e.to_string().starts_with(&prefix), "{e}");
        }
    }

    /// Converting any prefix of any example (cut at a newline, colon,
    /// bracket or dot) returns, whatever it returns.
    pub fn convert_every_prefix(&self) {
        for name in self.examples() {
            let src = self.text(&name);
            for (i, _) in src.char_indices().filter(|(_, c)| matches!(c, '\n' | ':' | '[' | '.')) {
                let _ = import::convert(self.source, &src[..i], &self.ctx(&name));
            }
        }
    }
}

/// A malformed file and where and how its error must read.
pub struct Bad {
    pub yaml: &'static str,
    pub at: (usize, usize),
    pub message: &'static str,
    pub help: &'static str,
}

/// The warnings, one per line.
pub fn warnings(i: &Imported) -> String {
    i.warnings.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}
