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
use canopy::engine::model::{AttemptRecord, WorkloadRecord, WorkloadState};
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
        // Boots of minutes take about a second.
        time_scale: 0.005,
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_classified_infra_is_retried_elsewhere_and_app_errors_are_not() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    let mut opts = EngineOptions::embedded(home.clone()).unwrap();
    // The test binary is not `canopy`: point the supervisor at the real one.
    opts.shim =
        ShimCommand { program: env!("CARGO_BIN_EXE_canopy").into(), args: vec!["__supervise".into()] };
    opts.sim = faulty();
    opts.poll_every = Some(Duration::from_millis(100));
    let running = app::start(opts).await.unwrap();

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
        let live: Vec<_> = list.iter().filter(|w| !w.state.is_final()).map(|w| (w.id, w.state)).collect();
        assert!(Instant::now() < deadline, "not final in time: {live:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    running.handle.shutdown();
    running.task.await.unwrap().unwrap();

    // None lost: every submitted workload is in the store, and nothing else.
    let ids: BTreeSet<_> = workloads.iter().map(|w| w.id).collect();
    assert_eq!(ids, submitted.iter().copied().collect());

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
        // A node that failed the workload is not where it ran next.
        let mut failed_nodes = BTreeSet::new();
        for pair in attempts.windows(2) {
            let (a, next) = (&pair[0], &pair[1]);
            let class = a.class.expect("only a failed attempt is followed by another");
            assert_ne!(class, FailureClass::App, "{}: an app error was retried: {story:?}", w.id);
            if class.is_infrastructure() {
                infra_failures += 1;
            }
            if matches!(class, FailureClass::Node | FailureClass::Comm | FailureClass::Io) {
                failed_nodes.insert(a.node.clone());
                assert!(
                    !failed_nodes.contains(&next.node),
                    "{}: retried on a node that failed it: {story:?}",
                    w.id
                );
                retried_elsewhere += 1;
            }
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
