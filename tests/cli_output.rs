//! The CLI's output as a user reads it, from the real binary against a
//! real `canopy serve`: options every command takes under their own help
//! heading, examples in the help of the main commands, `canopy whoami`
//! over the socket and over TCP with a tenant's token, "no workloads" on
//! an empty list, `status --wide`, Ctrl-C detaching `submit --wait`,
//! times with their zone, and tables with no trailing spaces and an ellipsis
//! where a cell is cut.

mod reap_support;
mod serve_support;

use reap_support::Reaper;
use serve_support::{BIN, DEADLINE, Process, Serve};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn text(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn help_keeps_global_options_apart_and_shows_examples() {
    for cmd in ["submit", "status", "logs"] {
        let help = text(&Command::new(BIN).args([cmd, "--help"]).output().unwrap());
        let global = help.find("Global options:").unwrap_or_else(|| panic!("{cmd}: no heading\n{help}"));
        let (own, rest) = help.split_at(global);
        // An option's own line, so `status --servers` (its own) is not `--server`.
        let lists = |text: &str, o: &str| {
            text.lines()
                .any(|l| l.trim_start().strip_prefix(o).is_some_and(|r| r.is_empty() || r.starts_with(' ')))
        };
        for o in ["--store", "--server", "--token", "--config", "--debug"] {
            assert!(!lists(own, o) && lists(rest, o), "{cmd}: {o} is not under Global options\n{help}");
        }
        let examples = help.find("Examples:").unwrap_or_else(|| panic!("{cmd}: no examples\n{help}"));
        assert!(help[examples..].contains(&format!("canopy {cmd} ")), "{help}");
    }
    let top = text(&Command::new(BIN).arg("--help").output().unwrap());
    let console = top.find("Console options:").unwrap_or_else(|| panic!("{top}"));
    assert!(top[console..].contains("--read-only"), "{top}");
}

#[test]
fn whoami_status_and_tables_read_as_a_user_expects() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &["--listen", "127.0.0.1:0"], Process::default());
    let url = serve.url.clone().expect("a TCP address");

    // An empty list says so, in words, with or without filters.
    assert_eq!(text(&serve.canopy(&["status"])), "no workloads (`canopy submit SPEC` runs one)\n");
    assert_eq!(text(&serve.canopy(&["status", "--state", "failed"])), "no workloads match\n");

    // The store's owner, on the socket.
    let me = text(&serve.canopy(&["whoami"]));
    assert!(me.starts_with("principal  local:"), "{me}");
    assert!(me.contains("\nrole       admin\n") && me.contains("\ntenant     -\n"), "{me}");

    // Work that waits: the second cannot fit beside the first on this
    // host, and its reason is longer than the column.
    let fleet: serde_json::Value =
        serde_json::from_str(&text(&serve.canopy(&["fleet", "--nodes", "--json"]))).unwrap();
    let cores = fleet
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "local")
        .and_then(|p| p["nodes"][0]["cpu_free"].as_f64())
        .unwrap_or_else(|| panic!("the local node's cores: {fleet}"));
    let spec = tmp.path().join("big.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"big\"\n[runtime]\ncommand = [\"sleep\", \"60\"]\n[resources]\ngpus = 0\n\
             cpu_cores = {}\nmemory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n",
            cores * 0.75
        ),
    )
    .unwrap();
    let first = text(&serve.canopy(&["submit", spec.to_str().unwrap()]));
    let second = text(&serve.canopy(&["submit", spec.to_str().unwrap(), "--idempotency-key", "two"]));
    let (first, second) = (first.trim(), second.trim());
    wait_for("the second to wait with a reason", || {
        let t = text(&serve.canopy(&["status"]));
        t.lines().any(|l| l.starts_with(&format!("{second} ")) && l.contains("queued") && l.contains("fit"))
    });
    let table = text(&serve.canopy(&["status"]));
    for line in table.lines() {
        assert_eq!(line, line.trim_end(), "a trailing space in\n{table:?}");
    }
    let waiting = table.lines().find(|l| l.starts_with(&format!("{second} "))).unwrap();
    let reason = &waiting[table.lines().next().unwrap().find("REASON").unwrap()..];
    assert!(reason.ends_with('…') && reason.chars().count() == 60, "{reason:?} in\n{table}");
    // --wide: who, how urgent, where, since when; the reason whole.
    let wide = text(&serve.canopy(&["status", "--wide"]));
    let head: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        [
            "ID",
            "NAME",
            "TENANT",
            "STATE",
            "ATTEMPTS",
            "GPUS",
            "PRIORITY",
            "POOL",
            "NODE",
            "SUBMITTED",
            "AGE",
            "COST",
            "REASON"
        ],
        "{wide}"
    );
    let running = wide.lines().find(|l| l.starts_with(&format!("{first} "))).unwrap();
    assert!(running.contains(" local/"), "the running one's pool: {wide}");
    let waiting = wide.lines().find(|l| l.starts_with(&format!("{second} "))).unwrap();
    let reason = &waiting[wide.lines().next().unwrap().find("REASON").unwrap()..];
    assert!(!reason.ends_with('…') && reason.chars().count() > 60, "{reason:?} in\n{wide}");
    for line in wide.lines() {
        assert_eq!(line, line.trim_end(), "a trailing space in\n{wide:?}");
    }
    for id in [first, second] {
        text(&serve.canopy(&["cancel", id]));
    }
    wait_for("both to end", || text(&serve.canopy(&["status", "--state", "cancelled"])).lines().count() == 3);

    // A tenant's token over TCP: the server says whose it is.
    let tables = tmp.path().join("tenants.toml");
    std::fs::write(
        &tables,
        "default_tenant = \"team-a\"\n[[flavor]]\nname = \"any\"\n\
         [[tenant]]\nname = \"team-a\"\n[tenant.quota.any]\ngpus = 8\n\
         [[tenant]]\nname = \"team-b\"\n[tenant.quota.any]\ngpus = 4\n",
    )
    .unwrap();
    text(&serve.canopy(&["tenants", "apply", tables.to_str().unwrap()]));
    let token = text(
        &serve.canopy(&["token", "create", "--name", "ci-bot", "--role", "operator", "--tenant", "team-b"]),
    );
    let token = token.lines().next().unwrap().trim();
    let me = text(&serve.canopy_with(&["--server", &url, "whoami"], &[("CANOPY_TOKEN", token)]));
    assert!(me.starts_with("principal  ci-bot\nrole       operator\ntenant     team-b\n"), "{me}");
    assert!(me.contains(&format!("\nserver     {url}")), "{me}");
    let json: serde_json::Value = serde_json::from_str(&text(
        &serve.canopy_with(&["--server", &url, "whoami", "--json"], &[("CANOPY_TOKEN", token)]),
    ))
    .unwrap();
    assert_eq!(
        (json["principal"].as_str(), json["tenant"].as_str()),
        (Some("ci-bot"), Some("team-b")),
        "{json}"
    );
    serve.stop();
}

/// Ctrl-C during `submit --wait` stops the waiting, not the work: it says
/// so and how to look again, and exits 130; the workload still runs.
#[test]
fn ctrl_c_detaches_submit_wait_with_a_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &[], Process::default());
    let spec = tmp.path().join("long.toml");
    std::fs::write(
        &spec,
        "name = \"long\"\n[runtime]\ncommand = [\"sleep\", \"60\"]\n[resources]\ngpus = 0\ncpu_cores = 0.1\n\
         memory_gb = 0.1\n[constraints]\nproviders = [\"local\"]\n",
    )
    .unwrap();
    let err = tmp.path().join("wait.err");
    let mut wait = serve_support::command(&store, &serve.config)
        .args(["submit", spec.to_str().unwrap(), "--wait"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    wait_for("the workload to run", || {
        std::fs::read_to_string(&err).unwrap_or_default().contains("w-1: running")
    });
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(wait.id() as i32, libc::SIGINT) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = wait.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < DEADLINE, "submit --wait did not stop on Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    let said = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(
        said.contains("detached from w-1: it keeps running") && said.contains("canopy logs w-1 --follow"),
        "{said}"
    );
    assert!(text(&serve.canopy(&["status", "w-1"])).contains("running"));
    text(&serve.canopy(&["cancel", "w-1"]));
    wait_for("w-1 to end", || text(&serve.canopy(&["status", "w-1"])).contains("cancelled"));

    // Times carry their zone: the one TZ names, else the system's.
    for (tz, zone) in [("Asia/Kolkata", "IST"), ("UTC", "UTC")] {
        let events = text(&serve.canopy_with(&["events", "w-1"], &[("TZ", tz)]));
        let first = events.lines().next().unwrap_or_default();
        let stamp: Vec<&str> = first.split_whitespace().take(3).collect();
        assert_eq!(stamp.len(), 3, "{events}");
        assert!(stamp[0].len() == 10 && stamp[1].len() == 8 && stamp[2] == zone, "TZ={tz}: {first}");
    }
    serve.stop();
}

/// `submit --wait --logs` prints the workload's output as it comes and
/// ends with its exit code; the CLI exits 5 for a failure.
#[test]
fn submit_wait_logs_prints_the_output_and_the_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    let _reaper = Reaper::new(tmp.path());
    let store = tmp.path().join("store");
    let serve = Serve::start(&store, &[], Process::default());
    let spec = tmp.path().join("talks.toml");
    std::fs::write(
        &spec,
        "name = \"talks\"\n[runtime]\ncommand = [\"sh\", \"-c\", \"echo first-line; echo to-stderr >&2; \
         echo last-line; exit 3\"]\n[resources]\ngpus = 0\ncpu_cores = 0.1\nmemory_gb = 0.1\n\
         [constraints]\nproviders = [\"local\"]\n[retry]\nmax_attempts = 1\n",
    )
    .unwrap();
    let out = serve.canopy(&["submit", spec.to_str().unwrap(), "--wait", "--logs"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"w-1"), "{stdout}");
    for l in ["first-line", "to-stderr", "last-line"] {
        assert!(lines.contains(&l), "{l} missing from\n{stdout}");
    }
    assert!(stderr.contains("w-1: failed (attempt 1, exit code 3)"), "{stderr}");
    // --logs without --wait is a usage error.
    let bad = serve.canopy(&["submit", spec.to_str().unwrap(), "--logs"]);
    assert_eq!(bad.status.code(), Some(2));
    serve.stop();
}
