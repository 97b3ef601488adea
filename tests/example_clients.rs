//! The clients an application copies, run as an application runs them
//! against a real server (`canopy::app::start`, TCP with a submitter's
//! token): `examples/client.py` (standard library only) and
//! `examples/ts/client.ts` (Node's fetch and crypto; compiled with the
//! TypeScript and Node types `npm install` puts in examples/ts). Each
//! submits with an idempotency key, follows the workload to its end,
//! prints its log, lists and downloads its artifact (checking its
//! SHA-256), submits again with the same key and gets the same workload,
//! and reports a refused token with exit status 2. Each also checks a
//! webhook signature made by Canopy's own signer
//! (`canopy::notify::signature`), and refuses a forged one.
//!
//! A client whose runtime or compiler is missing skips, saying so (CI has
//! both: `.ci/run` installs them).

mod api_support;

use api_support::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn skip(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED: {why}");
}

/// How to run one client: the program and the arguments before the
/// client's own.
struct Client {
    program: &'static str,
    args: Vec<PathBuf>,
}

fn python() -> Option<Client> {
    let ok =
        std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        skip("python3 is not installed; examples/client.py not run");
        return None;
    }
    Some(Client { program: "python3", args: vec![root().join("examples/client.py")] })
}

/// Compiles examples/ts/client.ts (strict) into `out`.
fn typescript(out: &Path) -> Option<Client> {
    let tsc = root().join("examples/ts/node_modules/.bin/tsc");
    let node = std::process::Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    if !node || !tsc.exists() {
        skip(
            "node or examples/ts/node_modules is missing (run `npm install` in examples/ts); client.ts not run",
        );
        return None;
    }
    let built = std::process::Command::new(&tsc)
        .arg("-p")
        .arg(root().join("examples/ts"))
        .arg("--outDir")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "client.ts does not compile:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    Some(Client { program: "node", args: vec![out.join("client.js")] })
}

impl Client {
    async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut c = tokio::process::Command::new(self.program);
        c.args(&self.args)
            .args(args)
            .env_remove("CANOPY_URL")
            .env_remove("CANOPY_SERVER")
            .env_remove("CANOPY_TOKEN");
        for (k, v) in env {
            c.env(k, v);
        }
        tokio::time::timeout(Duration::from_secs(60), c.output()).await.expect("the client finished").unwrap()
    }
}

/// The whole round trip of one client against a real server.
async fn round_trip(client: Client, tag: &str) {
    let mut api = Api::start().await;
    let token = api.token(&format!("{tag}-app"), "submitter", &[], None).await;
    let dir = api._tmp.path().join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("spec.toml");
    let script =
        format!("echo 'hello from the {tag} client'; printf 42 > \"$CANOPY_OUTPUT_DIR/outputs/answer.txt\"");
    std::fs::write(&spec, local_spec(&format!("from-{tag}"), &script, Some("answer.txt"))).unwrap();
    let server = format!("http://{}", api.tcp);
    let env = [("CANOPY_SERVER", server.as_str()), ("CANOPY_TOKEN", token.as_str())];
    let (spec_s, downloads) = (spec.to_str().unwrap(), dir.join("downloads"));
    let key = format!("{tag}-1");

    let out = client.run(&[spec_s, "--key", &key, "--out", downloads.to_str().unwrap()], &env).await;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the {tag} client failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains(&format!("hello from the {tag} client")), "{stdout}");
    assert!(stdout.contains("submitted w-") && stdout.contains("succeeded"), "{stdout}");
    assert!(stdout.contains("result"), "the artifact is listed: {stdout}");
    assert_eq!(std::fs::read_to_string(downloads.join("result")).unwrap(), "42");
    assert!(!stdout.contains(&token) && !stderr.contains(&token), "the client printed its token");

    // The same key again: the same workload, not a second one.
    let out = client.run(&[spec_s, "--key", &key, "--out", downloads.to_str().unwrap()], &env).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("already submitted"), "{out:?}");
    let page = api.get(Who::Owner, "/v1/workloads").await.expect(200).json();
    assert_eq!(page["workloads"].as_array().unwrap().len(), 1);

    // A bad token: the server's message, exit status 2.
    let bad = [("CANOPY_SERVER", server.as_str()), ("CANOPY_TOKEN", "canopy_nope_nope")];
    let out = client.run(&[spec_s], &bad).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"), "{out:?}");

    // A webhook delivery signed by Canopy verifies; a forged one does not.
    let body = br#"{"workload":"w-1","event":"succeeded"}"#;
    let body_file = dir.join("body.json");
    std::fs::write(&body_file, body).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let header = canopy::notify::signature::sign(b"whsec-shared", now, body);
    let secret = [("CANOPY_WEBHOOK_SECRET", "whsec-shared")];
    let body_s = body_file.to_str().unwrap();
    let out = client.run(&["verify-webhook", &header, body_s], &secret).await;
    assert!(out.status.success(), "a good signature: {out:?}");
    let forged = canopy::notify::signature::sign(b"not-the-secret", now, body);
    let out = client.run(&["verify-webhook", &forged, body_s], &secret).await;
    assert_eq!(out.status.code(), Some(1), "a forged signature: {out:?}");
    let stale = canopy::notify::signature::sign(b"whsec-shared", now - 3_600, body);
    let out = client.run(&["verify-webhook", &stale, body_s], &secret).await;
    assert_eq!(out.status.code(), Some(1), "an hour-old signature: {out:?}");
    api.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_runs_a_workload_end_to_end_and_checks_a_webhook_signature() {
    if let Some(c) = python() {
        round_trip(c, "python").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_client_runs_a_workload_end_to_end_and_checks_a_webhook_signature() {
    let out = tempfile::tempdir().unwrap();
    if let Some(c) = typescript(out.path()) {
        round_trip(c, "typescript").await;
    }
}
