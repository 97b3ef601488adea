//! The engine against the simulated market with faults, in process
//! (`app::start`), with a fixed seed and fault rates well above the
//! calibrated ones. GPU workloads are placed on the demo fleet's simulated
//! providers and their commands really run (the simulator's executor is the
//! local provider). What an operator would check afterwards: every workload
//! ended, none went missing, every failed attempt says what it was and why
//! (class, rule, evidence), infrastructure failures were retried away from
//! the node that failed, and the workload's own errors were not retried.

use canopy::app::{self, EngineOptions};
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::core::CoreConfig;
use canopy::engine::model::{AttemptRecord, Millis, WorkloadRecord, WorkloadState};
use canopy::failure::FailureClass;
use canopy::home::Home;
use canopy::journal::{Journal, WorkloadFilter};
use canopy::providers::local::ShimCommand;
use canopy::providers::sim::{FaultRates, SimConfig};
use canopy::spec::{Format, load};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const GOOD: usize = 16;
const BAD: usize = 4;
/// Boots of minutes take about a second.
const TIME_SCALE: f64 = 0.005;

fn spec(name: &str, script: &str, interruptible: bool) -> Box<canopy::spec::Spec> {
    let text = format!(
        "name = {name:?}\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\n\n\
         [resources]\ngpus = 1\ncpu_cores = 1\nmemory_gb = 4\n\n\
         [constraints]\ninterruptible = {interruptible}\n\n\
         [retry]\nmax_attempts = 6\nbackoff = \"200ms\"\nbackoff_max = \"1s\"\n"
    );
    Box::new(load::parse(&text, &format!("{name}.toml"), Format::Toml).unwrap().spec)
}

fn faulty() -> SimConfig {
    SimConfig {
        time_scale: TIME_SCALE,
        faults: FaultRates {
            capacity: 0.1,
            api_error: 0.05,
            launch_timeout: 0.05,
            node_lost: 0.15,
            preempted: 0.2,
            nccl_timeout: 0.1,
            cuda_oom: 0.05,
            xid79: 0.15,
            no_space: 0.1,
        },
        fault_window: Duration::from_millis(1500),
        ..SimConfig::default().with_seed(42)
    }
}

/// The engine in process over the simulated market `sim`, polling every
/// 100 ms, its store below `dir`.
async fn start(dir: &std::path::Path, sim: SimConfig) -> (Home, app::Running) {
    let home = Home::new(dir.join("home"));
    let mut opts = EngineOptions::embedded(home.clone()).unwrap();
    // The test binary is not `canopy`: point the supervisor at the real one.
    opts.shim =
        ShimCommand { program: env!("CARGO_BIN_EXE_canopy").into(), args: vec!["__supervise".into()] };
    // The core's own waits run at the simulated market's pace too: a
    // refused node counts as full for 30 s doubling to 15 min, a failed
    // node is excluded for 30 min. At the defaults, a workload whose
    // GPU-memory escalation and node faults left it only excluded or
    // refused nodes waited longer than the test (seen in CI): the demo
    // fleet has two nodes with more than 141 GB per GPU, one of them full.
    let scale = sim.time_scale;
    opts.core.capacity_refusal_s *= scale;
    opts.core.capacity_refusal_max_s *= scale;
    opts.core.exclusion_ttl_s *= scale;
    opts.sim = sim;
    opts.poll_every = Some(Duration::from_millis(100));
    (home, app::start(opts).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_classified_infra_is_retried_elsewhere_and_app_errors_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, running) = start(tmp.path(), faulty()).await;

    let mut submitted = Vec::new();
    for i in 0..GOOD + BAD {
        let s = if i < GOOD {
            spec(&format!("train-{i:02}"), "echo step 1; sleep 2; echo done", i % 2 == 0)
        } else {
            spec(&format!("bad-{i:02}"), "sleep 0.2; echo 'ValueError: bad config' >&2; exit 3", false)
        };
        match running.handle.command(Command::Submit { spec: s, idempotency_key: None }).await {
            CommandResult::Submitted { id, existing: false } => submitted.push(id),
            other => panic!("submit: {other:?}"),
        }
    }

    let journal = Journal::open(&home.store()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(150);
    let workloads: Vec<WorkloadRecord> = loop {
        let list = journal.workloads(&WorkloadFilter::default()).unwrap();
        if list.len() == submitted.len() && list.iter().all(|w| w.state.is_final()) {
            break list;
        }
        if Instant::now() >= deadline {
            // What an operator would look at: each live workload's reason,
            // its attempts and its events.
            let live: Vec<_> = list
                .iter()
                .filter(|w| !w.state.is_final())
                .map(|w| {
                    let attempts: Vec<_> = journal
                        .attempts(w.id)
                        .unwrap()
                        .iter()
                        .map(|a| (a.id.n, a.node.clone(), a.state, a.class))
                        .collect();
                    let events: Vec<_> =
                        journal.events(w.id).unwrap().iter().map(|e| format!("{e:?}")).collect();
                    format!(
                        "{} {} {:?}\n  attempts {attempts:?}\n  events {events:#?}",
                        w.id, w.state, w.reason
                    )
                })
                .collect();
            panic!("not final in time:\n{}", live.join("\n"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    running.handle.shutdown();
    running.task.await.unwrap().unwrap();

    // None lost: every submitted workload is in the store, and nothing else.
    let ids: BTreeSet<_> = workloads.iter().map(|w| w.id).collect();
    assert_eq!(ids, submitted.iter().copied().collect());

    // The exclusion TTL at the simulated market's pace (see [`start`]).
    let exclusion_ttl_s = CoreConfig::default().exclusion_ttl_s * TIME_SCALE;
    let mut infra_failures = 0;
    let mut retried_elsewhere = 0;
    for w in &workloads {
        let attempts: Vec<AttemptRecord> = journal.attempts(w.id).unwrap();
        let story: Vec<_> = attempts.iter().map(|a| (a.id.n, a.node.as_str(), a.state, a.class)).collect();
        assert!(!attempts.is_empty(), "{} never ran", w.id);
        assert!(attempts.iter().all(|a| a.state.is_final()), "{}: {story:?}", w.id);
        // On the simulated GPU providers, never on this host directly.
        assert!(attempts.iter().all(|a| a.provider != "local" && a.gpus == 1), "{story:?}");
        // Every failed attempt is classified, by a rule, with evidence.
        for a in attempts.iter().filter(|a| a.class.is_some()) {
            assert!(a.rule.as_deref().is_some_and(|r| !r.is_empty()), "{}: no rule", a.id);
            assert!(a.evidence.as_deref().is_some_and(|e| !e.is_empty()), "{}: no evidence", a.id);
        }
        // A node that failed the workload is not where it ran next, while
        // its exclusion holds (it lapses `exclusion_ttl_s` after the last
        // one was added).
        let mut failed_nodes = BTreeSet::new();
        let mut excluded_at = None;
        for pair in attempts.windows(2) {
            let (a, next) = (&pair[0], &pair[1]);
            let class = a.class.expect("only a failed attempt is followed by another");
            assert_ne!(class, FailureClass::App, "{}: an app error was retried: {story:?}", w.id);
            if class.is_infrastructure() {
                infra_failures += 1;
            }
            if matches!(class, FailureClass::Node | FailureClass::Comm | FailureClass::Io) {
                // Exclusions lapse together: those older than the TTL are gone.
                let ended = a.ended_at.unwrap_or(a.placed_at);
                if excluded_at.is_some_and(|t: Millis| ended.secs_since(t) >= exclusion_ttl_s) {
                    failed_nodes.clear();
                }
                failed_nodes.insert(a.node.clone());
                excluded_at = Some(ended);
                retried_elsewhere += 1;
            }
            let lapsed = excluded_at.is_some_and(|t| next.placed_at.secs_since(t) >= exclusion_ttl_s);
            assert!(
                lapsed || !failed_nodes.contains(&next.node),
                "{}: retried on a node that failed it: {story:?}",
                w.id
            );
        }
        let last = attempts.last().unwrap();
        match w.state {
            WorkloadState::Succeeded => {
                assert_eq!(last.class, None, "{story:?}");
                assert!(w.name.starts_with("train-"), "{}: {story:?}", w.name);
            }
            WorkloadState::Failed => {
                assert!(last.class.is_some() && w.class == last.class, "{w:?} {story:?}");
                assert!(w.reason.is_some(), "{w:?}");
            }
            WorkloadState::Cancelled => panic!("nobody cancelled {}", w.id),
            other => panic!("{} not final: {other}", w.id),
        }
        if w.name.starts_with("bad-") {
            // The workload's own error: failed once, for good (any earlier
            // attempts were the infrastructure's).
            assert_eq!(w.state, WorkloadState::Failed, "{story:?}");
            assert_eq!(w.class, Some(FailureClass::App), "{story:?}");
            let n_app = attempts.iter().filter(|a| a.class == Some(FailureClass::App)).count();
            assert_eq!(n_app, 1, "{story:?}");
        }
    }
    // The faults really happened and were really retried.
    assert!(infra_failures > 0, "no infrastructure failure at these rates");
    assert!(retried_elsewhere > 0, "no node-attributable failure at these rates");
    let succeeded = workloads.iter().filter(|w| w.state == WorkloadState::Succeeded).count();
    assert!(succeeded > 0);
    eprintln!(
        "{} workloads: {succeeded} succeeded, {infra_failures} infrastructure failures retried \
         ({retried_elsewhere} away from a failed node)",
        workloads.len()
    );
}

/// Spot capacity that gives notice before it is reclaimed: Canopy stops
/// the attempt itself, SIGTERM first, so a workload that checkpoints on
/// SIGTERM saves its step; the next attempt resumes from it. The
/// workload's command really runs (the simulator's executor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preemption_notice_gives_the_workload_sigterm_to_checkpoint_and_the_retry_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let sim = SimConfig {
        time_scale: 0.005,
        // Every attempt on interruptible capacity is reclaimed within 4 s
        // of starting, with 2 s of notice.
        faults: FaultRates { preempted: 1.0, ..FaultRates::NONE },
        fault_window: Duration::from_secs(4),
        preempt_notice: Duration::from_secs(2),
        ..SimConfig::no_faults().with_seed(7)
    };
    let (home, running) = start(tmp.path(), sim).await;

    // Resumes from the newest complete checkpoint, or counts steps until
    // SIGTERM, saves the step it reached and exits.
    let script = r#"d="$CANOPY_CHECKPOINT_DIR"
last=$(ls "$d" | sort -t- -k2 -n | tail -1)
if [ -n "$last" ]; then echo "resumed at $last"; exit 0; fi
step=0
trap 'mkdir "$d/step-$step" && touch "$d/step-$step/COMPLETE"; echo "saved step-$step on SIGTERM"; exit 143' TERM
while true; do step=$((step+1)); echo "step $step"; sleep 0.1; done"#;
    let text = format!(
        "name = \"spot-train\"\n[runtime]\ncommand = [\"sh\", \"-c\", {script:?}]\nstop_grace = \"30s\"\n\n\
         [resources]\ngpus = 1\ncpu_cores = 1\nmemory_gb = 4\n\n\
         [constraints]\ninterruptible = true\nproviders = [\"market\"]\n\n\
         [checkpoint]\npath = \"/ckpt\"\n\n\
         [retry]\nmax_attempts = 3\nbackoff = \"200ms\"\nbackoff_max = \"1s\"\n"
    );
    let spec = Box::new(load::parse(&text, "spot-train.toml", Format::Toml).unwrap().spec);
    let id = match running.handle.command(Command::Submit { spec, idempotency_key: None }).await {
        CommandResult::Submitted { id, .. } => id,
        other => panic!("submit: {other:?}"),
    };
    let journal = Journal::open(&home.store()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let w = loop {
        let w = journal.workload(id).unwrap().expect("submitted");
        if w.state.is_final() {
            break w;
        }
        assert!(Instant::now() < deadline, "not final in time: {w:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    running.handle.shutdown();
    running.task.await.unwrap().unwrap();

    let attempts = journal.attempts(id).unwrap();
    let story: Vec<_> = attempts.iter().map(|a| (a.id.n, a.node.as_str(), a.class, a.rule.clone())).collect();
    assert_eq!(w.state, WorkloadState::Succeeded, "{story:?}");
    let first = &attempts[0];
    assert_eq!(
        (first.class, first.rule.as_deref()),
        (Some(FailureClass::Preempted), Some("canopy.preemption-notice")),
        "{story:?}"
    );
    let stdout = |n: u32| {
        std::fs::read_to_string(home.logs().join(id.to_string()).join(n.to_string()).join("stdout.log"))
            .unwrap_or_default()
    };
    let out = stdout(1);
    let saved =
        out.lines().find_map(|l| l.strip_suffix(" on SIGTERM")?.strip_prefix("saved ")).map(str::to_string);
    let saved = saved.unwrap_or_else(|| panic!("attempt 1 never heard SIGTERM: {out}"));
    let last = attempts.last().unwrap();
    assert!(stdout(last.id.n).contains(&format!("resumed at {saved}")), "{}", stdout(last.id.n));
    let events: Vec<String> = journal.events(id).unwrap().into_iter().map(|e| e.message).collect();
    assert!(events.iter().any(|e| e.contains("preemption notice: market reclaims")), "{events:#?}");
    assert!(
        events.iter().any(|e| e.contains(&format!("resumes from checkpoint {saved} of attempt 1"))),
        "{events:#?}"
    );
}
