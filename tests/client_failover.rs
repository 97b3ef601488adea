//! `CANOPY_SERVER` listing several servers of one control plane (issue
//! 33): the CLI passes over one that does not answer, and a request made
//! while none answers waits for one to come back (a failover, or a
//! restart) instead of failing, without doing anything twice.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{BIN, Process, Serve};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `canopy ARGS` from a directory that is not the server's store, so only
/// the environment's servers can answer.
fn remote(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("--store").arg(dir.join("elsewhere")).args(args).envs(env.iter().copied()).env("NO_COLOR", "1");
    c
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn spec(dir: &Path) -> String {
    let path = dir.join("hi.toml");
    std::fs::write(
        &path,
        "name = \"hi\"\n\n[runtime]\ncommand = [\"true\"]\n\n[resources]\ncpu_cores = 0.1\nmemory_gb = 0.1\n\n\
         [constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    path.display().to_string()
}

fn token(serve: &Serve) -> String {
    let out = serve.canopy(&["token", "create", "--name", "app", "--role", "submitter"]);
    ok(&out).lines().next().unwrap().trim().to_string()
}

fn workloads(serve: &Serve) -> Vec<serde_json::Value> {
    serde_json::from_str(&ok(&serve.canopy(&["status", "--json"]))).unwrap()
}

/// Port 9 (discard) on loopback refuses: the next server answers, and the
/// submit lands once.
#[test]
fn a_listed_server_that_does_not_answer_is_passed_over() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let serve = Serve::start(&tmp.path().join("store"), &["--listen", "127.0.0.1:0"], Process::default());
    let url = serve.url.clone().expect("a TCP address");
    let token = token(&serve);
    let servers = format!("http://127.0.0.1:9,{url}");
    let env = [("CANOPY_SERVER", servers.as_str()), ("CANOPY_TOKEN", token.as_str())];

    let out = ok(&remote(tmp.path(), &["submit", &spec(tmp.path()), "--json"], &env).output().unwrap());
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"].as_str().unwrap().to_string();
    assert_eq!(id, "w-1");
    let listed = ok(&remote(tmp.path(), &["status", "--json"], &env).output().unwrap());
    assert!(listed.contains("\"w-1\""), "{listed}");
    assert_eq!(workloads(&serve).len(), 1);
}

/// No server of the list answers when the submit is made; the server
/// comes back on its address 2 s later (as a new leader would): the
/// submit is acknowledged by it, once. With the server listed alone, the
/// same submit fails at once, as before.
#[test]
fn a_request_made_while_no_server_answers_waits_for_one_to_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &["--listen", "127.0.0.1:0"], Process::default());
    let url = serve.url.clone().expect("a TCP address");
    let addr = url.trim_start_matches("http://").to_string();
    let token = token(&serve);
    assert_eq!(serve.stop().code(), Some(0));

    let alone = [("CANOPY_SERVER", url.as_str()), ("CANOPY_TOKEN", token.as_str())];
    let refused = remote(tmp.path(), &["submit", &spec(tmp.path())], &alone).output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no Canopy server answers"));

    let servers = format!("http://127.0.0.1:9,{url}");
    let env = [("CANOPY_SERVER", servers.as_str()), ("CANOPY_TOKEN", token.as_str())];
    let waiting = remote(tmp.path(), &["submit", &spec(tmp.path()), "--json"], &env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let serve = Serve::start(&store, &["--listen", &addr], Process::default());
    let out = ok(&waiting.wait_with_output().unwrap());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["id"], "w-1", "{out}");
    assert_eq!(workloads(&serve).len(), 1, "acknowledged once");
}
