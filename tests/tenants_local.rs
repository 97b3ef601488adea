//! Tenants with real processes: the real `canopy` binary runs `canopy
//! engine --no-faults` over a temporary store whose canopy.toml makes this
//! machine's local pool team-a's, with team-a and team-b in one cohort.
//! team-b borrows the idle pool for a workload that checkpoints on SIGTERM;
//! team-a's own work arrives and takes it back. The tests read what a user
//! reads: `canopy status`, `events`, `logs`, `fleet` and `tenants`.
//!
//! Every wait is a bounded poll for a condition. The one time asserted is
//! the owner's promise itself (`max_reclaim_delay`), with seconds of room.

use canopy::engine::model::{WorkloadId, WorkloadState};
use canopy::failure::{FailureClass, ProviderEnd};
mod local_support;
mod reap_support;

use local_support::{Cli, Engine, live_fleet, wait_for};
use reap_support::Reaper;
use std::path::PathBuf;
use std::time::Duration;

struct Setup {
    /// Dropped first: fails the test if anything it started outlives it.
    _reaper: Reaper,
    _tmp: tempfile::TempDir,
    store: PathBuf,
    scratch: PathBuf,
    /// The CPU cores of this machine's one local node.
    cores: f64,
}

impl Setup {
    fn cli(&self) -> Cli {
        Cli::new(&self.store)
    }

    /// Writes a spec pinned to the local provider that runs `script` with
    /// `sh -c` on `cores` of the node's CPU cores.
    fn spec(&self, name: &str, script: &str, cores: f64, extra: &str) -> PathBuf {
        let path = self.scratch.join(format!("{name}.toml"));
        let mark = self.scratch.join(format!("{name}.mark"));
        let text = format!(
            "name = {name:?}\n{extra}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\nstop_grace = \"60s\"\n\
             [runtime.env]\nMARK = {:?}\n\n[resources]\ncpu_cores = {cores}\nmemory_gb = 0.1\n\n\
             [constraints]\nproviders = [\"local\"]\n",
            mark.display().to_string()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    fn mark(&self, name: &str) -> String {
        std::fs::read_to_string(self.scratch.join(format!("{name}.mark"))).unwrap_or_default()
    }
}

/// The owner's promise in these tests.
const PROMISE_S: u64 = 20;

/// The tenant and flavor tables: the local pool is team-a's (promise
/// [`PROMISE_S`]); team-b has no quota of its own and may borrow
/// `b_borrowing` cores of it (`None`: whatever the cohort lends).
fn tables(b_borrowing: Option<u32>) -> String {
    let b = b_borrowing.map_or("0".to_string(), |n| format!("{{ nominal = 0, borrowing_limit = {n} }}"));
    format!(
        r#"[[flavor]]
name = "host"
providers = ["local"]

[[tenant]]
name = "team-a"
cohort = "lab"
owns = ["local"]
max_reclaim_delay = "{PROMISE_S}s"
[tenant.quota.host]
cpu_cores = 1000

[[tenant]]
name = "team-b"
cohort = "lab"
[tenant.quota.host]
cpu_cores = {b}
"#
    )
}

/// A store whose canopy.toml holds [`tables`], and the node's CPU cores.
fn setup() -> Setup {
    setup_with(None)
}

fn setup_with(b_borrowing: Option<u32>) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let (store, scratch) = (tmp.path().join("home"), tmp.path().join("scratch"));
    for d in [&store, &scratch] {
        std::fs::create_dir_all(d).unwrap();
    }
    let toml = format!("include_demo_fleet = false\ndefault_tenant = \"team-a\"\n\n{}", tables(b_borrowing));
    std::fs::write(store.join("canopy.toml"), toml).unwrap();
    let cli = Cli::new(&store);
    let fleet: serde_json::Value = serde_json::from_str(&cli.ok(&["fleet", "--nodes", "--json"])).unwrap();
    let cores = fleet
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "local")
        .and_then(|p| p["nodes"][0]["cpu_free"].as_f64())
        .unwrap_or_else(|| panic!("the local pool's CPU cores: {fleet}"));
    Setup { _reaper: Reaper::new(tmp.path()), _tmp: tmp, store, scratch, cores }
}

/// Counts steps, five a second. On SIGTERM it saves the step it reached
/// as a complete checkpoint (`step-N/` with `COMPLETE` last), notes the
/// time in `$MARK` and exits; resumed from a checkpoint, it counts three
/// steps more and finishes. `$SLOW` set: after saving, it keeps running
/// (ignoring SIGTERM), noting each tenth of a second in `$MARK.alive`
/// (written aside and renamed: a SIGKILL between the shell's truncate and
/// `date`'s write once left it empty, and the test unreadable),
/// until it is killed.
const COUNTER: &str = r#"d="$CANOPY_CHECKPOINT_DIR"; s=0; goal=1000000000
for c in "$d"/step-*/COMPLETE; do [ -e "$c" ] || continue; n=$(cat "$(dirname "$c")/state"); [ "$n" -gt "$s" ] && s=$n; done
[ "$s" -gt 0 ] && goal=$((s+3))
echo "resumed at step $s"
on_term() {
  mkdir -p "$d/step-$s"; echo "$s" > "$d/step-$s/state"; touch "$d/step-$s/COMPLETE"
  echo "saved step $s on SIGTERM"; echo "term $(date +%s.%N)" >> "$MARK"
  if [ -n "$SLOW" ]; then trap '' TERM; while :; do date +%s.%N > "$MARK.alive.new"; mv "$MARK.alive.new" "$MARK.alive"; sleep 0.1; done; fi
  exit 143
}
trap on_term TERM
while [ "$s" -lt "$goal" ]; do s=$((s+1)); echo "step $s"; sleep 0.2 & wait $!; done
echo "finished at step $s""#;

/// The owner's work: runs until the test opens its gate (`$MARK.go`).
const OWNER: &str =
    r#"echo "owner running"; while [ ! -e "$MARK.go" ]; do sleep 0.1; done; echo "owner done""#;

/// How far a log counted.
fn last_step(logs: &str) -> u64 {
    logs.lines().filter_map(|l| l.strip_prefix("step ")?.parse().ok()).max().unwrap_or(0)
}

fn events(cli: &Cli, id: WorkloadId) -> String {
    cli.ok(&["events", &id.to_string()])
}

#[test]
fn an_owner_takes_its_pool_back_and_the_borrowed_work_resumes_from_its_checkpoint() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = s.cli();
    // team-b borrows the whole idle node (nominal 0: every core borrowed).
    let borrower = cli.submit_with(
        &s.spec(
            "borrower",
            COUNTER,
            s.cores,
            "[checkpoint]\npath = \"/ckpt\"\n\n[retry]\nmax_attempts = 1\ninfra_retries = 1\n",
        ),
        &["--tenant", "team-b"],
    );
    cli.wait(borrower, "it to run", |w, _| w.state == WorkloadState::Running);
    wait_for("the borrower to count", || last_step(&cli.logs(borrower, 1)) >= 3);
    let tenants = cli.ok(&["tenants"]);
    let borrowed = format!("{} cores", s.cores);
    assert!(
        tenants.lines().any(|l| l.starts_with("team-b") && l.matches(&borrowed).count() == 2),
        "team-b uses and borrows the node's cores: {tenants}"
    );
    let cells = |l: &str| {
        l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(str::to_string).collect::<Vec<_>>()
    };
    assert!(
        tenants.lines().any(|l| l.starts_with("team-a") && cells(l).iter().any(|c| c.ends_with(&borrowed))),
        "team-a lends them (LENT): {tenants}"
    );

    // team-a's work arrives: within its nominal quota, its node is full.
    let owner = cli.submit_with(&s.spec("owner", OWNER, s.cores, ""), &["--tenant", "team-a"]);
    let (owner_rec, _) = cli.status(owner);

    // The borrower is told why, saves its step and is placed again.
    let (w, attempts) = cli.wait(borrower, "the reclaim", |_, a| a[0].class.is_some());
    let first = &attempts[0];
    assert_eq!(
        (first.class, first.rule.as_deref()),
        (Some(FailureClass::Reclaimed), Some("canopy.reclaimed")),
        "{attempts:?}"
    );
    let Some(ProviderEnd::OwnerReclaim { owner: who, grace_s, message, for_workload, .. }) = &first.stop
    else {
        panic!("{:?}", first.stop)
    };
    assert_eq!(
        (who.as_str(), *grace_s, *for_workload),
        ("team-a", PROMISE_S, owner.0),
        "SIGKILL after the promise, shorter than the workload's 60s stop_grace"
    );
    assert!(message.contains("the only victim among 1 borrowed workloads"), "{message}");
    let saved =
        first.checkpoint.as_ref().and_then(|c| c.saved.as_ref()).expect("a checkpoint saved on SIGTERM");
    let saved_step: u64 = saved.name.trim_start_matches("step-").parse().unwrap();
    let logs1 = cli.logs(borrower, 1);
    assert!(logs1.contains(&format!("saved step {saved_step} on SIGTERM")), "{logs1}");
    let said = events(&cli, borrower);
    assert!(said.contains("reclaimed for team-a") && said.contains("least costly way to free"), "{said}");
    assert!(!said.contains("drained"), "a reclaim is not a drain: {said}");
    // Placed again at once, spending nothing: it left a new checkpoint,
    // and a reclaim needs no minimum run (the rule for stops that are not
    // its fault).
    let retry = said.lines().find(|l| l.contains("retry [")).unwrap_or_default();
    assert!(
        retry.contains("stopped for the owner of its capacity after progress")
            && retry.contains("spending no retry")
            && retry.contains("retry.resumed-free"),
        "{said}"
    );
    assert_ne!(w.state, WorkloadState::Failed, "{w:?}");

    // The owner's work starts within its promise; the borrower waits.
    let (_, owner_attempts) = cli.wait(owner, "the owner to start", |w, _| w.state == WorkloadState::Running);
    let started = owner_attempts[0].started_at.expect("started");
    let waited_s = started.secs_since(owner_rec.submitted_at);
    assert!(waited_s <= PROMISE_S as f64, "the owner waited {waited_s}s, promised {PROMISE_S}s");
    let said = events(&cli, owner);
    assert!(said.contains(&format!("from {borrower} (borrowed); promised within")), "{said}");
    let (w, _) = cli.status(borrower);
    assert_eq!(w.state, WorkloadState::Queued, "{w:?}");

    // The owner's work ends; the borrower runs again from its checkpoint
    // and finishes, its one allowed attempt never spent.
    std::fs::write(s.scratch.join("owner.mark.go"), b"").unwrap();
    let (w, attempts) = cli.wait(borrower, "the borrower to finish", |w, _| w.state.is_final());
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?} {attempts:?}");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    let resumed = attempts[1].checkpoint.as_ref().and_then(|c| c.resumed.as_ref()).expect("resumed");
    assert_eq!((resumed.name.as_str(), resumed.attempt), (saved.name.as_str(), 1));
    let logs2 = cli.logs(borrower, 2);
    assert!(
        logs2.contains(&format!("resumed at step {saved_step}"))
            && logs2.contains(&format!("finished at step {}", saved_step + 3)),
        "{logs2}"
    );
    assert_eq!(cli.status(owner).0.state, WorkloadState::Succeeded);
    // No node was charged: the node's outcomes are successes only.
    let health = &live_fleet(&s.store)["health"]["nodes"][attempts[0].node.as_str()];
    assert_eq!(
        (health["success_rate"].as_f64(), health["score"].as_f64()),
        (Some(1.0), Some(1.0)),
        "{health}"
    );
    engine.stop();
}

/// The engine dies after the victim got SIGTERM, before it is gone (it
/// takes its time after saving): the restarted engine carries the reclaim
/// out once — the victim is killed within the owner's promise counted from
/// the first SIGTERM, not a fresh grace from the restart — and stops
/// nothing else.
#[test]
fn a_reclaim_cut_by_an_engine_restart_completes_once_within_the_promise() {
    let s = setup();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = s.cli();
    let half = s.cores / 2.0;
    let ckpt = "[checkpoint]\npath = \"/ckpt\"\n\n[retry]\nmax_attempts = 1\ninfra_retries = 1\n";
    // Two borrowed workloads on half the node each; the one that started
    // first has more to lose, so the later one is the victim.
    let keeper = cli.submit_with(&s.spec("keeper", COUNTER, half, ckpt), &["--tenant", "team-b"]);
    cli.wait(keeper, "it to run", |w, _| w.state == WorkloadState::Running);
    wait_for("the keeper to count", || last_step(&cli.logs(keeper, 1)) >= 15);
    let victim = cli
        .submit_with(&s.spec("victim", &format!("SLOW=1\n{COUNTER}"), half, ckpt), &["--tenant", "team-b"]);
    cli.wait(victim, "it to run", |w, _| w.state == WorkloadState::Running);
    wait_for("the victim to count", || last_step(&cli.logs(victim, 1)) >= 3);

    let owner = cli.submit_with(&s.spec("owner", OWNER, half, ""), &["--tenant", "team-a"]);
    wait_for("the victim's SIGTERM", || s.mark("victim").contains("term "));
    engine.kill();
    std::thread::sleep(Duration::from_secs(4));
    let engine = Engine::start(&s.store, &s.scratch, &[]);

    let (_, attempts) = cli.wait(victim, "the reclaim to end", |_, a| a[0].class.is_some());
    assert_eq!(attempts[0].rule.as_deref(), Some("canopy.reclaimed"), "{attempts:?}");
    // Killed within the promise of the first SIGTERM, the restart notwithstanding.
    let time = |line: &str| -> f64 { line.trim().trim_start_matches("term ").parse().unwrap() };
    let termed = time(s.mark("victim").lines().next().unwrap());
    let alive = std::fs::read_to_string(s.scratch.join("victim.mark.alive")).unwrap();
    let lasted = time(&alive) - termed;
    assert!(
        lasted <= PROMISE_S as f64 + 1.5,
        "the victim ran {lasted:.1}s after SIGTERM; the owner was promised {PROMISE_S}s"
    );
    let logs1 = cli.logs(victim, 1);
    assert_eq!(logs1.matches("on SIGTERM").count(), 1, "{logs1}");

    // The owner runs; nothing else was stopped; one reclaim was made.
    cli.wait(owner, "the owner to run", |w, _| w.state == WorkloadState::Running);
    let said = events(&cli, owner);
    assert_eq!(said.matches("reclaiming").count(), 1, "{said}");
    let (k, k_attempts) = cli.status(keeper);
    assert_eq!((k.state, k_attempts.len()), (WorkloadState::Running, 1), "{k:?} {k_attempts:?}");
    assert!(k_attempts[0].stop.is_none(), "{k_attempts:?}");
    assert!(!cli.logs(keeper, 1).contains("SIGTERM"));

    // The owner's work ends: the victim resumes from the step it saved.
    std::fs::write(s.scratch.join("owner.mark.go"), b"").unwrap();
    let (w, attempts) = cli.wait(victim, "the victim to finish", |w, _| w.state.is_final());
    assert_eq!(w.state, WorkloadState::Succeeded, "{w:?} {attempts:?}");
    let saved = attempts[0].checkpoint.as_ref().and_then(|c| c.saved.as_ref()).expect("saved");
    let step = saved.name.trim_start_matches("step-");
    assert!(cli.logs(victim, 2).contains(&format!("resumed at step {step}")));
    cli.ok(&["cancel", &keeper.to_string()]);
    cli.wait(keeper, "the keeper to end", |w, _| w.state.is_final());
    engine.stop();
}

/// A tenant at its limit waits with the numbers; an admin's change of the
/// tables is audited and in force at once (the waiting work runs), and a
/// restart keeps it and the running work.
#[test]
fn a_tenant_at_its_limit_waits_until_an_admin_raises_it_and_the_change_survives_a_restart() {
    let s = setup_with(Some(0));
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let cli = s.cli();
    let id = cli.submit_with(&s.spec("owner", OWNER, s.cores / 2.0, ""), &["--tenant", "team-b"]);
    let (w, _) = cli.wait(id, "a reason", |w, _| w.reason.as_deref().is_some_and(|r| r.contains("team-b:")));
    let reason = w.reason.unwrap();
    assert!(
        reason.contains("team-b: 0/0 host CPU cores in use") && reason.contains("(nominal 0, may borrow 0)"),
        "{reason}"
    );
    assert_eq!(w.state, WorkloadState::Queued);

    // An admin lets team-b borrow: it runs at once.
    let doc = s.scratch.join("tables.toml");
    std::fs::write(&doc, tables(None)).unwrap();
    cli.ok(&["tenants", "apply", doc.to_str().unwrap()]);
    cli.wait(id, "it to run", |w, _| w.state == WorkloadState::Running);
    let audit: serde_json::Value = serde_json::from_str(&cli.ok(&["audit", "--json"])).unwrap();
    let by_admin = audit.as_array().unwrap().iter().any(|r| {
        r["action"] == "tenants-set" && r["principal"].as_str().is_some_and(|p| p.starts_with("local:"))
    });
    assert!(by_admin, "the change is audited as the admin's: {audit}");

    // A restart keeps the admin's tables and the work running under them.
    engine.stop();
    let engine = Engine::start(&s.store, &s.scratch, &[]);
    let tenants = cli.ok(&["tenants"]);
    let b = tenants.lines().find(|l| l.starts_with("team-b")).unwrap_or_default();
    assert!(b.contains("any"), "team-b may borrow what the cohort lends, as applied: {tenants}");
    let (w, attempts) = cli.status(id);
    assert_eq!((w.state, attempts.len()), (WorkloadState::Running, 1), "{w:?} {attempts:?}");
    std::fs::write(s.scratch.join("owner.mark.go"), b"").unwrap();
    assert_eq!(cli.wait(id, "it to finish", |w, _| w.state.is_final()).0.state, WorkloadState::Succeeded);
    engine.stop();
}
