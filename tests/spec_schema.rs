//! The published JSON Schema of the spec: the file editors point a
//! `#:schema` line at is what the code generates, and it is as strict as
//! `canopy validate` wherever JSON Schema can say a rule. A real validator
//! (python `jsonschema`, as editors and CI tools use) checks a corpus of
//! bad specs (tests/fixtures/bad_specs) and the shipped good ones.
//!
//! `CANOPY_BLESS=1 cargo test --test spec_schema` rewrites the published
//! file (as does `canopy schema > schema/canopy-spec.schema.json`).

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const PUBLISHED: &str = "schema/canopy-spec.schema.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn canopy() -> Command {
    Command::new(env!("CARGO_BIN_EXE_canopy"))
}

/// Bad specs whose rule JSON Schema cannot say, with why. The schema
/// must accept them (so this list stays true); `canopy validate` must
/// refuse them like every other entry.
const VALIDATE_ONLY: &[(&str, &str)] = &[
    (
        "min-above-max-memory.toml",
        "compares two fields (min <= max): JSON Schema has no way to refer to another value",
    ),
    ("backoff-above-max.toml", "compares two durations (backoff <= backoff_max), and by value, not spelling"),
    (
        "zero-max-runtime.toml",
        "a zero duration has many spellings (0s, 0h 0m, 0.0h): the pattern checks the spelling, not the value",
    ),
    ("stop-grace-too-long.toml", "a duration's value (at most 1h), not its spelling"),
    ("duplicate-input-name.toml", "uniqueness by one key of each item: uniqueItems compares whole items"),
    (
        "webhook-with-password.toml",
        "a URL's user information: the pattern checks the scheme, not the URL's parts",
    ),
    ("inline-token.toml", "credential detection is a heuristic over token shapes and variable names"),
    (
        "nvlink-on-amd-families.toml",
        "the accelerator's vendor inferred from its families (all of one vendor): JSON Schema can compare with a named vendor only",
    ),
];

#[test]
fn the_published_schema_is_what_canopy_schema_prints() {
    let out = canopy().arg("schema").output().unwrap();
    assert!(out.status.success(), "canopy schema failed: {}", String::from_utf8_lossy(&out.stderr));
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = root().join(PUBLISHED);
    if std::env::var_os("CANOPY_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &generated).unwrap();
    }
    let published = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        published == generated,
        "{PUBLISHED} is out of date; regenerate it with `cargo run -q -- schema > {PUBLISHED}` \
         (or `CANOPY_BLESS=1 cargo test --test spec_schema`) and commit it"
    );
    let schema: Value = serde_json::from_str(&published).unwrap();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    // Optional fields are plain: no `anyOf` with a null branch anywhere.
    assert!(!published.contains("\"null\""), "the schema still mentions null");
}

/// A spec file of the corpus: its text as JSON and the path of the field
/// its header says is wrong (`# expect: resources.nodes`), and where the
/// schema says so when that differs (`# schema: PATH`: of two fields in
/// conflict, the schema may name the other).
struct Case {
    file: String,
    path: PathBuf,
    json: Value,
    expect: String,
    schema_expect: String,
}

fn corpus() -> Vec<Case> {
    let dir = root().join("tests/fixtures/bad_specs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let expect = text
                .lines()
                .find_map(|l| l.strip_prefix("# expect: "))
                .unwrap_or_else(|| panic!("{file} has no `# expect: PATH` line"))
                .to_string();
            let schema_expect =
                text.lines().find_map(|l| l.strip_prefix("# schema: ")).unwrap_or(&expect).to_string();
            Case { file, json: toml_to_json(&text), path, expect, schema_expect }
        })
        .collect()
}

fn toml_to_json(text: &str) -> Value {
    let table: toml::Table = toml::from_str(text).unwrap();
    serde_json::to_value(table).unwrap()
}

/// The good specs shipped in the repository.
fn good_specs() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("assets/specs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files.push(root().join("examples/api_bench.toml"));
    files
}

/// Validates each document against the schema with python `jsonschema`
/// (the draft the schema names); per document, the dotted paths of the
/// errors with their messages. `None` (said on stderr) when python3 or
/// its `jsonschema` module is not installed.
fn python_jsonschema(
    schema: &Value,
    docs: &BTreeMap<String, Value>,
) -> Option<BTreeMap<String, Vec<(String, String)>>> {
    const SCRIPT: &str = r#"
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
cls = jsonschema.validators.validator_for(schema)
cls.check_schema(schema)
v = cls(schema)
out = {}
for name, doc in json.load(open(sys.argv[2])).items():
    errs = []
    for e in v.iter_errors(doc):
        path = ""
        for p in e.absolute_path:
            if isinstance(p, int):
                path += "[%d]" % p
            else:
                path += ("." if path else "") + p
        errs.append([path, e.message])
    out[name] = errs
print(json.dumps(out))
"#;
    match Command::new("python3").args(["-c", "import jsonschema"]).output() {
        Err(e) => {
            eprintln!(
                "SKIPPED: python3 is not available ({e}); the schema was not checked by a real validator"
            );
            return None;
        }
        Ok(o) if !o.status.success() => {
            eprintln!(
                "SKIPPED: python's jsonschema module is not installed (pip install jsonschema): {}",
                String::from_utf8_lossy(&o.stderr).trim().lines().last().unwrap_or("")
            );
            return None;
        }
        Ok(_) => {}
    }
    let dir = tempfile::tempdir().unwrap();
    let schema_path = dir.path().join("schema.json");
    let docs_path = dir.path().join("docs.json");
    std::fs::write(&schema_path, serde_json::to_string(schema).unwrap()).unwrap();
    std::fs::write(&docs_path, serde_json::to_string(docs).unwrap()).unwrap();
    let out =
        Command::new("python3").arg("-c").arg(SCRIPT).arg(&schema_path).arg(&docs_path).output().unwrap();
    assert!(out.status.success(), "python jsonschema failed: {}", String::from_utf8_lossy(&out.stderr));
    let raw: BTreeMap<String, Vec<(String, String)>> = serde_json::from_slice(&out.stdout).unwrap();
    Some(raw)
}

/// `canopy validate --json` over `files`: per file, whether it passed and
/// the paths of its errors. The exit status says whether all passed.
fn canopy_validate(files: &[PathBuf]) -> BTreeMap<String, (bool, Vec<String>)> {
    let out = canopy().arg("validate").arg("--json").args(files).output().unwrap();
    let all_ok = out.status.success();
    let reports: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("canopy validate --json printed no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr))
    });
    let by_file: BTreeMap<String, (bool, Vec<String>)> = reports
        .into_iter()
        .map(|r| {
            let file =
                Path::new(r["file"].as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned();
            let errors = r["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["severity"] == "error")
                .map(|d| d["path"].as_str().unwrap().to_string())
                .collect();
            (file, (r["ok"] == json!(true), errors))
        })
        .collect();
    assert_eq!(
        all_ok,
        by_file.values().all(|(ok, _)| *ok),
        "canopy validate's exit status disagrees with its reports"
    );
    by_file
}

/// Whether the schema's error at `at` concerns the field at `expect`: the
/// same field or a table or list that holds it (`propertyNames`,
/// `uniqueItems` and `anyOf` report at the container).
fn concerns(at: &str, expect: &str) -> bool {
    at == expect || expect.starts_with(&format!("{at}.")) || expect.starts_with(&format!("{at}["))
}

#[test]
fn the_schema_refuses_the_bad_specs_it_can_express_and_validate_refuses_them_all() {
    let cases = corpus();
    assert!(cases.len() >= 36, "the corpus shrank to {}", cases.len());
    for (file, _) in VALIDATE_ONLY {
        assert!(
            cases.iter().any(|c| c.file == *file),
            "VALIDATE_ONLY names {file}, which is not in the corpus"
        );
    }

    // Every one fails `canopy validate`, at the field its header names.
    let files: Vec<PathBuf> = cases.iter().map(|c| c.path.clone()).collect();
    let validated = canopy_validate(&files);
    let mut problems = Vec::new();
    for c in &cases {
        let (ok, errors) = &validated[&c.file];
        if *ok || !errors.contains(&c.expect) {
            problems.push(format!(
                "{}: canopy validate should refuse it at {} (ok = {ok}, errors at {errors:?})",
                c.file, c.expect
            ));
        }
    }

    let schema = canopy::spec::load::schema();
    let docs: BTreeMap<String, Value> = cases.iter().map(|c| (c.file.clone(), c.json.clone())).collect();
    if let Some(results) = python_jsonschema(&schema, &docs) {
        for c in &cases {
            let errors = &results[&c.file];
            match VALIDATE_ONLY.iter().find(|(f, _)| *f == c.file) {
                Some((_, why)) => {
                    if !errors.is_empty() {
                        problems.push(format!(
                            "{}: listed as beyond JSON Schema ({why}), but the schema refuses it now: {errors:?}; \
                             take it off VALIDATE_ONLY",
                            c.file
                        ));
                    }
                }
                None => {
                    if !errors.iter().any(|(at, _)| concerns(at, &c.schema_expect)) {
                        problems.push(format!(
                            "{}: the JSON Schema should refuse it at {} but reports {errors:?}",
                            c.file, c.schema_expect
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{} of {} bad specs:\n{}", problems.len(), cases.len(), problems.join("\n"));
}

#[test]
fn the_shipped_specs_pass_the_schema_and_validate() {
    let files = good_specs();
    let validated = canopy_validate(&files);
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let (ok, errors) = &validated[&name];
        assert!(*ok, "{name}: canopy validate refuses a shipped spec: {errors:?}");
    }
    let docs: BTreeMap<String, Value> = files
        .iter()
        .map(|f| {
            (
                f.file_name().unwrap().to_string_lossy().into_owned(),
                toml_to_json(&std::fs::read_to_string(f).unwrap()),
            )
        })
        .collect();
    if let Some(results) = python_jsonschema(&canopy::spec::load::schema(), &docs) {
        for (name, errors) in results {
            assert!(errors.is_empty(), "{name}: the JSON Schema refuses a shipped spec: {errors:?}");
        }
    }
}
