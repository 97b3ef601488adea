//! The OpenAPI document as the tools users reach for take it, against a
//! real `canopy serve` (demo fleet, temp store, an admin token over TCP):
//! `openapi-spec-validator` accepts the served document, and schemathesis
//! (bounded: a few examples per operation and a time budget) finds no 5xx,
//! no answer outside its documented schema, no undocumented status code
//! and no method a path does not take answered but 405.
//!
//! Both are python tools from PyPI (`.ci/run` installs them). Without them
//! the tests say SKIPPED and pass, except under `CANOPY_ENGINES=require`
//! (CI), where a missing tool fails.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{Process, Serve};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Whether a python tool runs (`TOOL --version`); when it does not, a
/// visible skip, or a failure where CI requires the tools.
fn have(tool: &str, install: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("CANOPY_ENGINES").as_deref() != Ok("require"),
            "{tool} is not installed and CANOPY_ENGINES=require: {install}"
        );
        eprintln!("SKIPPED: {tool} is not installed ({install}); the OpenAPI document was not checked by it");
    }
    ok
}

/// `canopy serve` on TCP with an admin token: the server, its URL, the token.
fn serve(dir: &Path) -> (Serve, String, String) {
    let serve = Serve::start(&dir.join("store"), &["--listen", "127.0.0.1:0"], Process::default());
    let url = serve.url.clone().expect("a TCP address on the ready line");
    let made = serve.canopy(&["token", "create", "--name", "tools", "--role", "admin"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let token = String::from_utf8(made.stdout).unwrap().trim().to_string();
    (serve, url, token)
}

/// One request over plain HTTP/1.1: the status line and the body.
fn http(url: &str, method: &str, path: &str, token: Option<&str>, toml: Option<&str>) -> (String, String) {
    let addr = url.trim_start_matches("http://");
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let body = toml.unwrap_or_default();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: canopy\r\n{auth}Content-Type: application/toml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap_or_default().to_string(), body.to_string())
}

/// `GET /v1/openapi.json` as served.
fn served_document(url: &str) -> String {
    let (status, body) = http(url, "GET", "/v1/openapi.json", None, None);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert_eq!(body, canopy::server::openapi::document(), "the served document is the generated one");
    body
}

/// Each answer against the document's schema `#/components/schemas/NAME`,
/// with python `jsonschema` (draft 2020-12, as OpenAPI 3.1 says): the
/// errors, one line each; `None` when the module is missing.
fn schema_errors(doc: &str, checks: &[(&str, &str)]) -> Option<Vec<String>> {
    if !Command::new("python3").args(["-c", "import jsonschema"]).output().is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("CANOPY_ENGINES").as_deref() != Ok("require"),
            "python jsonschema is not installed and CANOPY_ENGINES=require"
        );
        eprintln!("SKIPPED: python's jsonschema module is not installed (pip install jsonschema)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let doc_path = dir.path().join("openapi.json");
    std::fs::write(&doc_path, doc).unwrap();
    let mut errors = Vec::new();
    for (name, answer) in checks {
        let answer_path = dir.path().join("answer.json");
        std::fs::write(&answer_path, answer).unwrap();
        let script = r##"
import json, sys, jsonschema
doc = json.load(open(sys.argv[1]))
doc["$ref"] = "#/components/schemas/" + sys.argv[3]
v = jsonschema.Draft202012Validator(doc)
for e in v.iter_errors(json.load(open(sys.argv[2]))):
    print("/".join(str(p) for p in e.absolute_path), e.message[:300])
"##;
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(&doc_path)
            .arg(&answer_path)
            .arg(name)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        errors.extend(String::from_utf8_lossy(&out.stdout).lines().map(|l| format!("{name}: {l}")));
    }
    Some(errors)
}

/// Answers write a spec's unset fields as `null` (`gpu_memory_gb = { min
/// = 24 }` as `{"min": 24, "max": null}`, an accelerator without a vendor
/// as `"vendor": null` beside an NVLink interconnect): the document's
/// answer schemas take them, where its spec rules once said "set" for
/// "present" and refused them (schemathesis found it).
#[test]
fn answers_with_unset_spec_fields_match_the_documented_schemas() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (serve, url, token) = serve(tmp.path());
    let spec = "name = \"nulls\"\n[runtime]\ncommand = [\"true\"]\n\
                [resources]\ngpus = 1\ngpu_memory_gb = { min = 24 }\ninterconnect = \"nvlink\"\n\
                [resources.accelerator]\nfamily = [\"hopper\"]\n\
                [constraints]\nwait_for_capacity = true\n";
    let (status, submitted) = http(&url, "POST", "/v1/workloads", Some(&token), Some(spec));
    assert!(status.starts_with("HTTP/1.1 201"), "{status}: {submitted}");
    let (status, page) = http(&url, "GET", "/v1/workloads", Some(&token), None);
    assert!(status.starts_with("HTTP/1.1 200"), "{status}: {page}");
    assert!(submitted.contains(r#""max":null"#) && submitted.contains(r#""vendor":null"#), "{submitted}");
    let doc = served_document(&url);
    if let Some(errors) = schema_errors(&doc, &[("WorkloadView", &submitted), ("Page", &page)]) {
        assert!(errors.is_empty(), "answers outside their documented schemas:\n{}", errors.join("\n"));
    }
    serve.stop();
}

#[test]
fn openapi_spec_validator_accepts_the_served_document() {
    if !have("openapi-spec-validator", "pip install openapi-spec-validator") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (serve, url, _) = serve(tmp.path());
    let path = tmp.path().join("openapi.json");
    std::fs::write(&path, served_document(&url)).unwrap();
    let out = Command::new("openapi-spec-validator").arg(&path).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openapi-spec-validator rejects the document:\n{said}");
    assert!(said.contains("OK"), "{said}");
    serve.stop();
}

#[test]
fn schemathesis_finds_no_server_error_schema_violation_or_undocumented_status() {
    if !have("schemathesis", "pip install schemathesis") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let (serve, url, token) = serve(tmp.path());
    let report = tmp.path().join("schemathesis");
    // A followed log streams until its attempt ends (a simulated one runs
    // for its expected runtime): the run reads logs without follow.
    let config = tmp.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        "[[operations]]\ninclude-path = \"/v1/workloads/{id}/logs\"\nparameters = { \"query.follow\" = \"false\" }\n",
    )
    .unwrap();
    let out = Command::new("schemathesis")
        .arg("--config-file")
        .arg(&config)
        .arg("run")
        .arg(format!("{url}/v1/openapi.json"))
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,response_schema_conformance,content_type_conformance,unsupported_method",
        ])
        // Not the coverage phase: schemathesis 4.32.5 itself fails in it,
        // now and then, with a KeyError in its coverage module (GET
        // /v1/audit), which is its defect, not the API's.
        .args(["--phases", "examples,fuzzing"])
        .args(["--max-examples", "8", "--max-time", "75", "--workers", "2", "--seed", "1"])
        // The event stream never ends by design; revoking a token would
        // revoke, sooner or later, the one the run uses (the revocation
        // has its own tests in api_service).
        .args(["--exclude-path", "/v1/stream", "--exclude-operation-id", "delete_v1_tokens__name_"])
        .args(["--request-timeout", "10", "--suppress-health-check", "all"])
        .arg("--report-dir")
        .arg(&report)
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{said}\n--- server:\n{}",
        serve.stderr_text()
    );
    serve.stop();
}
