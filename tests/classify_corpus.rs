//! The failure classifier against a corpus of realistic log tails.
//!
//! `tests/corpus/failures/index.toml` lists one case per `[[case]]`: the
//! log file (a tail as a provider would hand it over; omitted for ends that
//! come with no log), how the provider said the attempt ended, and the
//! class, rule and evidence line expected. `line` is the 1-based line of
//! the evidence in the file, required when the evidence is a log line.

use canopy::engine::classify::{EvidenceSource, FailureClass, ProviderEnd, classify, rule_ids};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Index {
    case: Vec<Case>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// A file in the corpus directory; no file means an empty tail.
    file: Option<String>,
    end: ProviderEnd,
    class: FailureClass,
    rule: String,
    evidence: String,
    /// 1-based line of the evidence in the file, for log-line evidence.
    line: Option<usize>,
    /// Why this case is here, for the reader.
    #[allow(dead_code)]
    why: Option<String>,
    /// Where the log's lines were published, for cases quoted from a
    /// public thread.
    #[allow(dead_code)]
    source: Option<String>,
}

impl Case {
    fn name(&self) -> String {
        match &self.file {
            Some(f) => f.clone(),
            None => format!("<no log> {:?}", self.end),
        }
    }
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/failures")
}

fn load_index() -> Vec<Case> {
    let text = std::fs::read_to_string(corpus_dir().join("index.toml")).expect("read index.toml");
    let index: Index = toml::from_str(&text).expect("parse index.toml");
    index.case
}

fn read_log(case: &Case) -> String {
    match &case.file {
        Some(f) => std::fs::read_to_string(corpus_dir().join(f)).unwrap_or_else(|e| panic!("read {f}: {e}")),
        None => String::new(),
    }
}

/// Runs every case and reports all mismatches at once.
#[test]
fn every_case_classifies_as_expected() {
    let cases = load_index();
    let mut failures = Vec::new();
    for case in &cases {
        let text = read_log(case);
        let tail: Vec<&str> = text.lines().collect();
        let got = classify(&case.end, &tail);
        let mut problems = Vec::new();
        if got.class != case.class {
            problems.push(format!("class: got {}, want {}", got.class, case.class));
        }
        if got.rule != case.rule {
            problems.push(format!("rule: got {}, want {}", got.rule, case.rule));
        }
        if got.evidence.line != case.evidence {
            problems.push(format!(
                "evidence: got {:?}\n              want {:?}",
                got.evidence.line, case.evidence
            ));
        }
        let want_line_no = case.line.map(|l| l - 1);
        if got.evidence.line_no != want_line_no {
            problems.push(format!("line_no: got {:?}, want {:?}", got.evidence.line_no, want_line_no));
        }
        if (got.evidence.source == EvidenceSource::LogLine) != got.evidence.line_no.is_some() {
            problems
                .push(format!("source {:?} with line_no {:?}", got.evidence.source, got.evidence.line_no));
        }
        if let Some(n) = got.evidence.line_no
            && !tail.get(n).is_some_and(|l| l.contains(&got.evidence.line))
        {
            problems.push(format!("evidence is not on line {}", n + 1));
        }
        if !problems.is_empty() {
            failures.push(format!("{}:\n    {}", case.name(), problems.join("\n    ")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn every_class_is_produced_by_the_corpus() {
    let produced: BTreeSet<FailureClass> = load_index().iter().map(|c| c.class).collect();
    let missing: Vec<_> = FailureClass::ALL.into_iter().filter(|c| !produced.contains(c)).collect();
    assert!(missing.is_empty(), "no corpus case for {missing:?}");
}

#[test]
fn every_rule_is_exercised_by_the_corpus() {
    let cases = load_index();
    let used: BTreeSet<&str> = cases.iter().map(|c| c.rule.as_str()).collect();
    let known: BTreeSet<&str> = rule_ids().map(|(id, _)| id).collect();
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "index names rules that do not exist: {unknown:?}");
    let unused: Vec<_> = known.difference(&used).collect();
    assert!(unused.is_empty(), "rules with no corpus case: {unused:?}");
    for case in &cases {
        let class = rule_ids().find(|(id, _)| *id == case.rule).map(|(_, c)| c);
        assert_eq!(class, Some(case.class), "{}: rule {} has another class", case.name(), case.rule);
    }
}

#[test]
fn the_corpus_is_realistic_and_fully_indexed() {
    let cases = load_index();
    let indexed: BTreeSet<String> = cases.iter().filter_map(|c| c.file.clone()).collect();
    let on_disk: BTreeSet<String> = std::fs::read_dir(corpus_dir())
        .expect("read corpus dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    assert_eq!(indexed, on_disk, "every .log file is indexed and every indexed file exists");
    let multi_line =
        cases.iter().filter(|c| read_log(c).lines().filter(|l| !l.trim().is_empty()).count() >= 5);
    assert!(multi_line.count() >= 40, "at least 40 realistic multi-line tails");
    let files: Vec<_> = cases.iter().filter_map(|c| c.file.as_deref()).collect();
    let distinct: BTreeSet<_> = files.iter().collect();
    assert_eq!(files.len(), distinct.len(), "a log file is used by one case only");
}
