//! The client profile ($XDG_CONFIG_HOME/canopy/config.toml) selects a
//! server and a token by context, as kubeconfig does: `--context`,
//! `$CANOPY_CONTEXT` or the profile's `current_context`; a server that
//! does not answer is passed over for the next; the token comes from a
//! file or a command, and one written into the profile is refused.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{BIN, Process, Serve};
use std::path::Path;
use std::process::{Command, Output};

/// `canopy ARGS` with the profile under `config` and no server, token,
/// context or store from the environment.
fn canopy(config: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("XDG_CONFIG_HOME", config)
        .env("NO_COLOR", "1")
        .env_remove("CANOPY_SERVER")
        .env_remove("CANOPY_TOKEN")
        .env_remove("CANOPY_CONTEXT")
        .env_remove("CANOPY_HOME")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

fn principal(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}{text}", String::from_utf8_lossy(&out.stderr));
    text.lines().next().unwrap_or_default().trim_start_matches("principal").trim().to_string()
}

#[test]
fn contexts_pick_the_server_and_the_token() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &["--listen", "127.0.0.1:0"], Process::default());
    let url = serve.url.clone().expect("a TCP address");
    let token = |name: &str| {
        let out = serve.canopy(&["token", "create", "--name", name, "--role", "viewer"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().next().unwrap().trim().to_string()
    };
    let (lab, ops) = (token("lab-bot"), token("ops-bot"));
    let secret = tmp.path().join("lab.token");
    std::fs::write(&secret, format!("{lab}\n")).unwrap();
    let ops_file = tmp.path().join("ops.secret");
    std::fs::write(&ops_file, &ops).unwrap();

    let config = tmp.path().join("config");
    std::fs::create_dir_all(config.join("canopy")).unwrap();
    // Port 9 (discard) on loopback refuses: the next server is used.
    let profile = format!(
        "current_context = \"lab\"\n\n[contexts.lab]\nservers = [\"http://127.0.0.1:9\", \"{url}\"]\n\
         token_file = \"{}\"\n\n[contexts.ops]\nservers = [\"{url}\"]\ntoken_command = [\"cat\", \"{}\"]\n",
        secret.display(),
        ops_file.display()
    );
    std::fs::write(config.join("canopy/config.toml"), profile).unwrap();

    // The current context, then one named by flag and by environment.
    assert_eq!(principal(&canopy(&config, &["whoami"], &[])), "lab-bot");
    assert_eq!(principal(&canopy(&config, &["--context", "ops", "whoami"], &[])), "ops-bot");
    assert_eq!(principal(&canopy(&config, &["whoami"], &[("CANOPY_CONTEXT", "ops")])), "ops-bot");
    // --server wins over any context; --store means the local store.
    let own = canopy(&config, &["--server", &url, "whoami"], &[("CANOPY_TOKEN", &ops)]);
    assert_eq!(principal(&own), "ops-bot");
    let local = canopy(&config, &["--store", store.to_str().unwrap(), "whoami"], &[]);
    assert!(principal(&local).starts_with("local:"), "{}", String::from_utf8_lossy(&local.stdout));

    // Unknown contexts and inline tokens are refused, saying what to do.
    let unknown = canopy(&config, &["--context", "prod", "whoami"], &[]);
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(1), "{err}");
    assert!(err.contains("no context \"prod\"") && err.contains("lab, ops"), "{err}");
    std::fs::write(
        config.join("canopy/config.toml"),
        format!("[contexts.lab]\nservers = [\"{url}\"]\ntoken = \"{lab}\"\n"),
    )
    .unwrap();
    let inline = canopy(&config, &["--context", "lab", "whoami"], &[]);
    let err = String::from_utf8_lossy(&inline.stderr);
    assert_eq!(inline.status.code(), Some(1), "{err}");
    assert!(err.contains("a token itself never goes in this file") && !err.contains(&lab), "{err}");
    serve.stop();
}
