//! A new leader taking over a shared journal (issue 33), in the core under
//! its test clock: attempts a lost leader ran on its own host (providers
//! named in `CoreConfig::host_bound`) are never launched again under
//! their token, and a provider here that does not know them counts as
//! their loss only once the old host's lease has lapsed and their stop
//! grace passed; then they are retried as new attempts.

mod common;

use canopy::engine::core::{Action, Core, CoreConfig, Event, HostBound, Reply, Restore};
use canopy::engine::model::*;
use canopy::fleet::Fleet;
use canopy::providers::AttemptStatus;
use common::{World, cloud_fleet, gpu_pool, toml_spec};

fn fleet() -> Fleet {
    cloud_fleet(vec![(gpu_pool("small", "GPU-24", 1, 24.0, 1.0), vec!["s1", "s2", "s3"])])
}

/// What the journal holds after `w` ran: every workload and attempt as
/// last recorded.
fn journal(w: &World) -> Restore {
    let mut workloads = std::collections::BTreeMap::new();
    let mut attempts = std::collections::BTreeMap::new();
    for r in w.records() {
        match r {
            Record::Workload(r) => {
                workloads.insert(r.id, (**r).clone());
            }
            Record::Attempt(r) => {
                attempts.insert(r.id, (**r).clone());
            }
            _ => {}
        }
    }
    Restore {
        workloads: workloads.into_values().collect(),
        attempts: attempts.into_values().collect(),
        health: vec![],
        max_id: 10,
        id_floor: 0,
        intents: vec![],
    }
}

fn launches(out: &[Action]) -> Vec<AttemptId> {
    out.iter()
        .filter_map(|a| if let Action::Launch { attempt, .. } = a { Some(*attempt) } else { None })
        .collect()
}

/// One attempt running and one whose launch was journalled but never
/// confirmed, on the old leader's host; a new leader takes over.
fn taken_over(host_bound: bool) -> (Core, Vec<Action>, AttemptId, AttemptId, Millis) {
    let mut w = World::new(fleet());
    let spec = toml_spec(
        "name = \"job\"\n[runtime]\ncommand = [\"train\"]\nstop_grace = \"20s\"\n[resources]\ngpus = 1\n",
        "job.toml",
    );
    let submit = |w: &mut World| match w.submit_spec(&spec, None) {
        Reply::Submitted { id, .. } => id,
        other => panic!("{other:?}"),
    };
    let running = submit(&mut w);
    let (a_run, _) = w.last_launch(running);
    w.run(a_run);
    let placing = submit(&mut w);
    let (a_placing, _) = w.last_launch(placing);
    let mut config = CoreConfig::default();
    if host_bound {
        config.host_bound = Some(HostBound { providers: ["cloud".to_string()].into(), hold_s: 30.0 });
    }
    let mut core = Core::new("st0001", fleet(), config);
    let now = Millis(w.now + 1000);
    let out = core.restore(journal(&w), now);
    (core, out, a_run, a_placing, now)
}

#[test]
fn a_lost_leaders_host_bound_attempts_are_held_then_retried_never_relaunched() {
    // Without the setting (providers outside the host, as Slurm's): the
    // unconfirmed launch is sent again with its token, as after a restart.
    let (_, out, _, a_placing, _) = taken_over(false);
    assert_eq!(launches(&out), [a_placing]);

    let (mut core, out, a_run, a_placing, now) = taken_over(true);
    assert_eq!(launches(&out), [], "nothing of the old host's is launched again");
    // The provider here does not know them: held for the old host's lease
    // (30 s) and their stop grace (20 s).
    for a in [a_run, a_placing] {
        let out = core
            .handle(Event::Status { attempt: a, status: AttemptStatus::NotFound }, Millis(now.0 + 49_000));
        assert_eq!(launches(&out), []);
        assert!(!core.attempts(a.workload).last().unwrap().state.is_final(), "{a} is held");
    }
    // Then each is a lost node, and its workload is retried as a new attempt.
    let later = Millis(now.0 + 50_000);
    for a in [a_run, a_placing] {
        core.handle(Event::Status { attempt: a, status: AttemptStatus::NotFound }, later);
        let closed = core.attempts(a.workload).iter().find(|x| x.id == a).unwrap().clone();
        assert!(closed.state.is_final(), "{a}: {closed:?}");
        assert_eq!(closed.rule.as_deref(), Some("provider.node-lost"), "{a}: {closed:?}");
        let evidence = closed.evidence.clone().unwrap_or_default();
        assert!(evidence.contains("lost the journal's lease"), "{a}: {evidence}");
    }
    let out = core.handle(Event::Tick, Millis(later.0 + 600_000));
    let again = launches(&out);
    assert_eq!(again.len(), 2, "{out:?}");
    for a in again {
        assert_eq!(a.n, 2, "a new attempt, with a new token: {a}");
    }
}

/// A held attempt this server's provider does know (its own host, a
/// restart of the same home) is not held: it runs on as reported.
#[test]
fn a_held_attempt_the_provider_knows_runs_on() {
    let (mut core, _, a_run, _, now) = taken_over(true);
    core.handle(Event::Status { attempt: a_run, status: AttemptStatus::Running }, now);
    core.handle(Event::Status { attempt: a_run, status: AttemptStatus::NotFound }, Millis(now.0 + 1000));
    let closed = core.attempts(a_run.workload).last().unwrap().clone();
    assert!(closed.state.is_final(), "no longer held: vanished is a loss at once: {closed:?}");
}
