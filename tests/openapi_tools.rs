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

/// `GET /v1/openapi.json` as served, over plain HTTP/1.1.
fn served_document(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(c, "GET /v1/openapi.json HTTP/1.1\r\nHost: canopy\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    c.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, canopy::server::openapi::document(), "the served document is the generated one");
    body.to_string()
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
        .args(["--phases", "examples,coverage,fuzzing"])
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
