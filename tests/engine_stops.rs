//! Stops that are not the workload's fault — a preemption, an evicting
//! drain — under the test clock: after progress (a new checkpoint, at
//! least ten minutes' run) they spend no retry, however many there are;
//! without progress, or past `max_runtime` in all, they are charged like
//! any infrastructure failure, so a job cannot be stopped for free forever.

mod common;

use canopy::engine::checkpoint::Found;
use canopy::engine::core::{Event, NodeNote, OutputsResult, Restore};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Fleet, NodeState};
use common::{World, cloud_fleet, gpu_pool};

/// Two pools of two single-GPU nodes each.
fn fleet() -> Fleet {
    cloud_fleet(vec![
        (gpu_pool("small", "GPU-24", 1, 24.0, 1.0), vec!["s1", "s2"]),
        (gpu_pool("big", "GPU-80", 1, 80.0, 4.0), vec!["b1", "b2"]),
    ])
}

const CHECKPOINTED: &str = "[checkpoint]\npath = \"/ckpt\"\ninterval = \"30m\"\n";

/// The workload's next attempt, `n`, once it is placed (backoffs and
/// exclusions may make it wait a while).
fn next_attempt(w: &mut World, id: WorkloadId, n: u32) -> AttemptId {
    for _ in 0..200 {
        if let Some((a, _)) = w.try_last_launch(id).filter(|(a, _)| a.n == n) {
            return a;
        }
        w.advance(60.0);
    }
    panic!("attempt {n} of {id:?} was never placed: {:?}", w.state(id));
}

/// The live attempt `a` runs for `secs`, then the provider ends it with
/// `end`; the shell finds `checkpoint` in its directory (a new one when
/// it wrote one, else the one it was handed) and collects it.
fn runs_then_ends(w: &mut World, a: AttemptId, secs: f64, end: ProviderEnd, checkpoint: Option<&str>) {
    w.run(a);
    w.advance(secs);
    w.send(Event::Status { attempt: a, status: canopy::providers::AttemptStatus::Ended(end.clone()) });
    collect(w, a, end, checkpoint);
}

fn collect(w: &mut World, a: AttemptId, end: ProviderEnd, checkpoint: Option<&str>) {
    let found =
        checkpoint.map(|name| Found { name: name.into(), at_ms: checkpoint_time(w, a, name), bytes: 1 });
    w.send(Event::CheckpointFound { attempt: a, found });
    w.send(Event::Collected { attempt: a, end, log_tail: vec![], outputs: OutputsResult::Skipped });
}

/// When checkpoint `name` was written: the handed one keeps its time, a
/// new one is a minute old.
fn checkpoint_time(w: &World, a: AttemptId, name: &str) -> i64 {
    let handed = w.attempt(a).checkpoint.and_then(|c| c.resumed).filter(|r| r.name == name);
    handed.map_or(w.now - 60_000, |r| r.at.0)
}

/// The retry decisions, each with its rule (other retry events, such as
/// exclusions expiring, left out).
fn retries(w: &World, id: WorkloadId) -> Vec<String> {
    let decision = |e: &String| e.starts_with("retry [") || e.starts_with("final [");
    w.events(id, EventKind::Retry).into_iter().filter(decision).collect()
}

#[test]
fn a_long_checkpointed_job_preempted_twenty_times_with_progress_completes_without_spending_a_retry() {
    let mut w = World::new(fleet());
    // The defaults: 10 infrastructure retries, then 3 attempts.
    let id = w.submit(CHECKPOINTED);
    for n in 1..=20 {
        let a = next_attempt(&mut w, id, n);
        runs_then_ends(&mut w, a, 2.0 * 3600.0, ProviderEnd::Preempted, Some(&format!("step-{n}")));
        assert_eq!(w.state(id), WorkloadState::Queued, "preemption {n} is retried: {:?}", retries(&w, id));
        // The next attempt resumes from what this one left.
        let next = next_attempt(&mut w, id, n + 1);
        let resumed = w.attempt(next).checkpoint.and_then(|c| c.resumed).expect("resumes");
        assert_eq!((resumed.name, resumed.attempt), (format!("step-{n}"), n));
    }
    let last = next_attempt(&mut w, id, 21);
    w.run(last);
    w.advance(3600.0);
    w.end(last, ProviderEnd::Exited { code: 0 }, &["done"]);
    assert_eq!(w.state(id), WorkloadState::Succeeded);
    // Not one retry was charged: every decision says so, by its rule.
    let said = retries(&w, id);
    assert_eq!(said.len(), 20, "{said:#?}");
    for r in &said {
        assert!(r.contains("[retry.resumed-free]") && r.contains("spending no retry"), "{r}");
    }
}

#[test]
fn a_job_preempted_again_and_again_without_progress_spends_its_budget() {
    let mut w = World::new(fleet());
    let id =
        w.submit(&format!("{CHECKPOINTED}[retry]\nmax_attempts = 2\ninfra_retries = 2\nbackoff = \"1s\"\n"));
    // 1: ran two hours and left a checkpoint: free. 2: ran five minutes,
    // less than the minimum (even with a checkpoint saved on SIGTERM).
    // 3: ran two hours and wrote none (the one it was handed stays the
    // newest). 4: ran two hours, no checkpoint at all. Each of 2–4 is
    // charged: two from infra_retries, then the second of two attempts.
    let a = next_attempt(&mut w, id, 1);
    runs_then_ends(&mut w, a, 7200.0, ProviderEnd::Preempted, Some("step-1"));
    let a = next_attempt(&mut w, id, 2);
    runs_then_ends(&mut w, a, 300.0, ProviderEnd::Preempted, Some("step-2"));
    let a = next_attempt(&mut w, id, 3);
    runs_then_ends(&mut w, a, 7200.0, ProviderEnd::Preempted, Some("step-2"));
    let said = retries(&w, id);
    assert!(said[0].contains("[retry.resumed-free]"), "{said:#?}");
    assert!(
        said[1].contains("[retry.infra-free]") && said[1].contains("1 of 2 infrastructure retries"),
        "{said:#?}"
    );
    assert!(said[2].contains("2 of 2 infrastructure retries"), "{said:#?}");
    let a = next_attempt(&mut w, id, 4);
    runs_then_ends(&mut w, a, 7200.0, ProviderEnd::Preempted, None);
    assert_eq!(w.state(id), WorkloadState::Queued);
    assert!(retries(&w, id)[3].contains("spending attempt 2 of 2"), "{:#?}", retries(&w, id));
    let a = next_attempt(&mut w, id, 5);
    runs_then_ends(&mut w, a, 300.0, ProviderEnd::Preempted, None);
    assert_eq!(w.state(id), WorkloadState::Failed, "{:#?}", retries(&w, id));
    assert!(retries(&w, id)[4].contains("[retry.max-attempts]"), "{:#?}", retries(&w, id));
}

#[test]
fn free_stops_end_once_the_attempts_together_have_run_max_runtime() {
    let mut w = World::new(fleet());
    let spec = format!(
        "{CHECKPOINTED}[constraints]\nmax_runtime = \"5h\"\n[retry]\nmax_attempts = 1\ninfra_retries = 0\nbackoff = \"1s\"\n"
    );
    let id = w.submit(&spec);
    // Two hours each, with progress: 2 h and 4 h in all are free; at 6 h
    // the job has run more than one uninterrupted attempt may, and the
    // stop is charged (no budget left: it fails).
    for n in 1..=3 {
        let a = next_attempt(&mut w, id, n);
        runs_then_ends(&mut w, a, 7200.0, ProviderEnd::Preempted, Some(&format!("step-{n}")));
    }
    let said = retries(&w, id);
    assert!(
        said[0].contains("[retry.resumed-free]") && said[1].contains("[retry.resumed-free]"),
        "{said:#?}"
    );
    assert_eq!(w.state(id), WorkloadState::Failed, "{said:#?}");
}

#[test]
fn an_evicting_drain_follows_the_same_rule() {
    let mut w = World::new(fleet());
    let id = w.submit(&format!("{CHECKPOINTED}[retry]\nmax_attempts = 1\ninfra_retries = 1\n"));
    let evict = |w: &mut World, node: &str, request: u64| {
        let note = NodeNote {
            by: "ops-alice".into(),
            reason: Some("firmware".into()),
            evict: true,
            ..NodeNote::default()
        };
        w.send(Event::SetNodeState {
            request,
            node: node.into(),
            state: NodeState::Draining,
            note: Some(note),
        });
    };
    let stop = |w: &mut World, a: AttemptId, checkpoint: Option<&str>| {
        assert!(w.terminated(a), "the drain stops {a:?}");
        w.send(Event::Terminated { attempt: a, result: Ok(()) });
        collect(w, a, ProviderEnd::Signaled { signal: 15 }, checkpoint);
        assert_eq!(w.attempt(a).rule.as_deref(), Some("canopy.evicted"));
    };
    // Ran an hour and left a checkpoint: moved at once, spending nothing.
    let (a1, n1) = w.last_launch(id);
    w.run(a1);
    w.advance(3600.0);
    evict(&mut w, &n1, 901);
    stop(&mut w, a1, Some("step-1"));
    let said = retries(&w, id);
    assert!(
        said[0].contains("[retry.resumed-free]") && said[0].contains("moved off a drained node"),
        "{said:#?}"
    );
    // Drained again a minute into its next run: no progress, so charged —
    // from infra_retries (1 of 1), still moved at once.
    let (a2, n2) = w.last_launch(id);
    assert_eq!(a2.n, 2, "placed again at once");
    w.run(a2);
    w.advance(60.0);
    evict(&mut w, &n2, 902);
    stop(&mut w, a2, Some("step-1"));
    let said = retries(&w, id);
    assert!(
        said[1].contains("[retry.evicted]") && said[1].contains("1 of 1 infrastructure retries"),
        "{said:#?}"
    );
    // And a third time: the budget is spent.
    let (a3, n3) = w.last_launch(id);
    assert_eq!(a3.n, 3, "placed again at once");
    w.run(a3);
    w.advance(60.0);
    evict(&mut w, &n3, 903);
    stop(&mut w, a3, Some("step-1"));
    assert_eq!(w.state(id), WorkloadState::Failed, "{:#?}", retries(&w, id));
    // No node was blamed for any of it.
    assert!(w.records().all(|r| !matches!(r, Record::Health(_))));
}

#[test]
fn free_stops_do_not_rule_out_the_pool_that_gave_the_progress() {
    let mut w = World::new(fleet());
    let id = w.submit(CHECKPOINTED);
    let pool = |w: &World, a: AttemptId| w.attempt(a).pool.rsplit('/').next().unwrap_or_default().to_string();
    // Four preemptions after progress, each in the cheaper pool: it stays
    // the cheaper pool's work (two used to rule it out, and the job went to
    // capacity at four times the price for the rest of its run).
    for n in 1..=4 {
        let a = next_attempt(&mut w, id, n);
        assert_eq!(pool(&w, a), "small", "attempt {n}: {:#?}", retries(&w, id));
        // Eleven minutes and a new checkpoint: progress, and all four
        // within the exclusion TTL of one another.
        runs_then_ends(&mut w, a, 660.0, ProviderEnd::Preempted, Some(&format!("step-{n}")));
    }
    // A restart from a row that predates recorded exclusions recomputes
    // them from the attempts by the same rule: nothing is excluded.
    let attempts: Vec<AttemptRecord> = (1..=4).map(|n| w.attempt(AttemptId { workload: id, n })).collect();
    let mut fresh = World::new(fleet());
    let rec = WorkloadRecord { exclusions: None, ..w.workload(id) };
    fresh.core.restore(
        Restore { workloads: vec![rec], attempts, max_id: id.0, ..Restore::default() },
        Millis(w.now),
    );
    let ex = fresh.core.exclusions(id).expect("live");
    assert!(ex.pools.is_empty() && ex.nodes.is_empty(), "{ex:?}");
    // A stop before progress is charged, and the first charged one there
    // does not rule the pool out either: the free ones are not counted.
    let a = next_attempt(&mut w, id, 5);
    assert_eq!(pool(&w, a), "small");
    runs_then_ends(&mut w, a, 300.0, ProviderEnd::Preempted, Some("step-4"));
    let a = next_attempt(&mut w, id, 6);
    assert_eq!(pool(&w, a), "small", "{:#?}", retries(&w, id));
    // The second charged stop in the pool rules it out, as any
    // infrastructure failure's does.
    runs_then_ends(&mut w, a, 300.0, ProviderEnd::Preempted, Some("step-4"));
    let a = next_attempt(&mut w, id, 7);
    assert_eq!(pool(&w, a), "big", "{:#?}", retries(&w, id));
    let ex = w.core.exclusions(id).expect("live");
    assert!(ex.pools.iter().any(|p| p.ends_with("/small")), "{ex:?}");
}
