//! Tenants in the engine core, under the test clock: quota admission with
//! the binding limit in numbers, and an owner reclaiming its capacity from
//! borrowed work — the least costly victim, SIGTERM with the grace the
//! promise leaves, class `reclaimed`, no node charged, no attempt spent.

mod common;

use canopy::engine::core::{Event, Reply};
use canopy::engine::model::*;
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::tenant::{Tenancy, TenancyDoc};
use common::*;

fn tenancy(b_borrowing: u32) -> Tenancy {
    let text = format!(
        r#"
[[flavor]]
name = "lab"
providers = ["cloud"]
[[tenant]]
name = "team-a"
cohort = "research"
owns = ["cloud/lab"]
max_reclaim_delay = "10m"
[tenant.quota.lab]
gpus = 8
[[tenant]]
name = "team-b"
cohort = "research"
[tenant.quota.lab]
gpus = {{ nominal = 0, borrowing_limit = {b_borrowing} }}
"#
    );
    TenancyDoc::parse(&text, false).expect("a valid tenancy").1
}

/// Two nodes of 4 GPUs in pool `lab`, owned by team-a.
fn world(b_borrowing: u32) -> World {
    let mut w = World::new(cloud_fleet(vec![(gpu_pool("lab", "A100-40", 4, 40.0, 1.0), vec!["n1", "n2"])]));
    w.send(Event::SetTenancy { tenancy: Box::new(tenancy(b_borrowing)) });
    w
}

fn submit_for(w: &mut World, tenant: &str, gpus: u32) -> WorkloadId {
    let mut spec = job_spec(gpus, "");
    spec.runtime.stop_grace = Some(canopy::units::HumanDuration::from_secs(120));
    w.submit_for(&spec, tenant, None)
}

/// Starts `id`'s placed attempt running; its attempt and node.
fn start_running(w: &mut World, id: WorkloadId) -> (AttemptId, String) {
    let (a, node) = w.last_launch(id);
    w.ack(a);
    w.run(a);
    (a, node)
}

#[test]
fn a_tenant_at_its_limit_waits_with_the_numbers_and_runs_when_its_usage_falls() {
    let mut w = world(4);
    let first = submit_for(&mut w, "team-b", 4);
    let (a1, _) = start_running(&mut w, first);
    let second = submit_for(&mut w, "team-b", 4);
    assert!(w.launched(second).is_none(), "team-b may borrow 4 GPUs, and holds 4");
    let reason = w.workload(second).reason.unwrap_or_default();
    assert!(
        reason.contains("team-b: 4/4 lab GPUs in use, 4 more asked (nominal 0, may borrow 4)"),
        "{reason}"
    );
    // team-a's own work is not held back by team-b's limit.
    let own = submit_for(&mut w, "team-a", 4);
    assert!(w.launched(own).is_some());
    // team-b's first ends: its usage falls and the second runs at once.
    w.end(a1, ProviderEnd::Exited { code: 0 }, &[]);
    assert!(w.launched(second).is_some(), "{:?}", w.workload(second).reason);
}

#[test]
fn an_owner_reclaims_the_least_costly_borrowed_work_without_blame() {
    let mut w = world(8);
    // team-b borrows both of team-a's nodes; the first has run an hour longer.
    let long = submit_for(&mut w, "team-b", 4);
    let (a_long, n_long) = start_running(&mut w, long);
    w.advance(3600.0);
    let short = submit_for(&mut w, "team-b", 4);
    let (a_short, n_short) = start_running(&mut w, short);
    w.advance(600.0);
    assert_ne!(n_long, n_short);

    // team-a's work arrives: within its nominal quota, its nodes are busy.
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.launched(owner).is_none());
    assert!(w.terminated(a_short), "the work that loses least is stopped");
    assert!(!w.terminated(a_long), "never more than needed");
    let stop = w.attempt(a_short).stop.expect("a durable stop");
    let ProviderEnd::OwnerReclaim { owner: who, grace_s, message, .. } = &stop else { panic!("{stop:?}") };
    assert_eq!((who.as_str(), *grace_s), ("team-a", 120), "the workload's stop_grace, within the promise");
    assert!(message.contains("the only victim among 2 borrowed workloads"), "{message}");
    let said = w.events(owner, EventKind::Reclaim);
    assert!(said.iter().any(|m| m.contains(&format!("from {short}"))), "{said:?}");

    // Nobody else takes the owner's node while the victim stops.
    let other = submit_for(&mut w, "team-b", 4);
    assert!(w.launched(other).is_none());

    // It stops: the owner runs there; the victim waits to be placed again,
    // charged no attempt and no node.
    w.confirm_terminated(a_short, ProviderEnd::Signaled { signal: 15 });
    let rec = w.attempt(a_short);
    assert_eq!((rec.class, rec.rule.as_deref()), (Some(FailureClass::Reclaimed), Some("canopy.reclaimed")));
    let (_, n_owner) = w.last_launch(owner);
    assert_eq!(n_owner, n_short);
    assert_eq!(w.state(short), WorkloadState::Queued);
    assert!(w.records().all(|r| !matches!(r, Record::Health(_))), "a reclaim charges no node");
    assert_eq!(w.core.health().node(&n_short, canopy::engine::model::Millis(w.now)).score, 1.0);

    // The owner's work ends: the reclaimed work runs again.
    let (a_owner, _) = start_running(&mut w, owner);
    w.end(a_owner, ProviderEnd::Exited { code: 0 }, &[]);
    let (again, _) = w.last_launch(short);
    assert_ne!(again, a_short, "placed again once the owner's work ended");
}

/// The capacity a reclaim freed is lost before the owner gets it (the
/// victim's node is cordoned while it stops): once its victims have
/// stopped and the owner's work still fits nowhere, the owner takes
/// capacity back again, from the other borrowed node, rather than waiting
/// for that work to end on its own.
#[test]
fn a_reclaim_whose_freed_capacity_is_lost_takes_it_back_elsewhere() {
    let mut w = world(8);
    let long = submit_for(&mut w, "team-b", 4);
    let (a_long, n_long) = start_running(&mut w, long);
    w.advance(3600.0);
    let short = submit_for(&mut w, "team-b", 4);
    let (a_short, n_short) = start_running(&mut w, short);
    w.advance(600.0);
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.terminated(a_short) && !w.terminated(a_long));
    w.send(Event::SetNodeState {
        request: 0,
        node: n_short.clone(),
        state: canopy::fleet::NodeState::Cordoned,
        note: None,
    });
    w.confirm_terminated(a_short, ProviderEnd::Signaled { signal: 15 });
    assert!(w.launched(owner).is_none(), "the owner's node was cordoned");
    assert!(w.terminated(a_long), "the owner takes its other node back");
    let said = w.events(owner, EventKind::Reclaim);
    assert_eq!(said.len(), 2, "{said:?}");
    w.confirm_terminated(a_long, ProviderEnd::Signaled { signal: 15 });
    let (_, n_owner) = w.last_launch(owner);
    assert_eq!(n_owner, n_long);
}

/// An owner's gang needs its nodes in one pool: the victims free nodes in
/// one pool, not one free node in each of two pools (which frees nothing
/// the gang can use).
#[test]
fn an_owners_gang_takes_back_nodes_in_one_pool() {
    use canopy::fleet::NodeState;
    let pools = vec![
        (gpu_pool("lab", "A100-40", 4, 40.0, 1.0), vec!["n1", "n2"]),
        (gpu_pool("lab2", "A100-40", 4, 40.0, 1.0), vec!["m1", "m2"]),
    ];
    let mut w = World::new(cloud_fleet(pools));
    let text = r#"
[[flavor]]
name = "lab"
providers = ["cloud"]
[[tenant]]
name = "team-a"
cohort = "research"
owns = ["cloud"]
[tenant.quota.lab]
gpus = 16
[[tenant]]
name = "team-b"
cohort = "research"
"#;
    w.send(Event::SetTenancy { tenancy: Box::new(TenancyDoc::parse(text, false).expect("tenancy").1) });
    let state = |w: &mut World, node: &str, state: NodeState| {
        w.send(Event::SetNodeState { request: 0, node: node.into(), state, note: None });
    };
    // team-b borrows n2 and m2: one node in each pool.
    state(&mut w, "n1", NodeState::Cordoned);
    state(&mut w, "m1", NodeState::Cordoned);
    let b1 = submit_for(&mut w, "team-b", 4);
    let (a1, _) = start_running(&mut w, b1);
    let b2 = submit_for(&mut w, "team-b", 4);
    let (a2, _) = start_running(&mut w, b2);
    state(&mut w, "n1", NodeState::Ready);
    state(&mut w, "m1", NodeState::Ready);

    // team-a's gang of two 4-GPU nodes fits neither pool.
    let mut spec = job_spec(4, "");
    spec.resources.nodes = 2;
    let out = w.send(Event::Submit {
        request: 9,
        spec_hash: spec.content_hash(),
        spec: Box::new(spec),
        idempotency_key: None,
        by: None,
        tenant: Some("team-a".into()),
    });
    let gang = out
        .into_iter()
        .find_map(|a| match a {
            canopy::engine::core::Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(id),
            _ => None,
        })
        .expect("submitted");
    assert!(w.launched(gang).is_none());
    let stopped: Vec<AttemptId> = [a1, a2].into_iter().filter(|a| w.terminated(*a)).collect();
    assert_eq!(stopped.len(), 1, "one victim frees a whole pool: {:?}", w.events(gang, EventKind::Reclaim));
    w.confirm_terminated(stopped[0], ProviderEnd::Signaled { signal: 15 });
    assert!(w.launched(gang).is_some(), "{:?}", w.workload(gang).reason);
}

/// A restart keeps the tenancy's effect and a reclaim in flight: the
/// victim's durable stop is carried out, usage is charged again from the
/// live attempts, other tenants stay off the owner's pool, and the owner's
/// work takes the freed node.
#[test]
fn a_reclaim_in_flight_survives_a_restart() {
    use canopy::engine::core::{Action, Core, CoreConfig, Restore};
    use std::collections::BTreeMap;
    let mut w = world(8);
    let long = submit_for(&mut w, "team-b", 4);
    let (a_long, _) = start_running(&mut w, long);
    w.advance(3600.0);
    let short = submit_for(&mut w, "team-b", 4);
    let (a_short, n_short) = start_running(&mut w, short);
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.terminated(a_short));

    // What the journal holds, handed to a new core (as a restart does).
    let mut workloads = BTreeMap::new();
    let mut attempts = BTreeMap::new();
    for r in w.records() {
        match r {
            Record::Workload(r) if !r.state.is_final() => {
                workloads.insert(r.id, (**r).clone());
            }
            Record::Attempt(a) => {
                attempts.insert(a.id, (**a).clone());
            }
            _ => {}
        }
    }
    let fleet = cloud_fleet(vec![(gpu_pool("lab", "A100-40", 4, 40.0, 1.0), vec!["n1", "n2"])]);
    let mut core = Core::new("st0001", fleet, CoreConfig::default());
    let now = Millis(w.now + 1000);
    core.handle(Event::SetTenancy { tenancy: Box::new(tenancy(8)) }, now);
    let restore = Restore {
        workloads: workloads.into_values().collect(),
        attempts: attempts.into_values().collect(),
        health: vec![],
        max_id: 3,
        id_floor: 0,
        intents: vec![],
    };
    let out = core.restore(restore, now);
    assert!(
        out.iter().any(|a| matches!(a, Action::Terminate { attempt, .. } if *attempt == a_short)),
        "the victim's stop is carried out after the restart"
    );
    assert!(
        !out.iter().any(|a| matches!(a, Action::Terminate { attempt, .. } if *attempt == a_long)),
        "the reclaim in flight is known again: nothing more is stopped"
    );
    assert!(
        !out.iter().any(|a| matches!(a, Action::Launch { .. })),
        "nothing placed on the owner's busy pool"
    );
    let usage = core.tenant_usage();
    assert_eq!(
        usage.iter().map(|(t, f, a)| (t.as_str(), f.as_str(), a.gpus)).collect::<Vec<_>>(),
        [("team-b", "lab", 8)]
    );

    let mut w2 = World { core, now: now.0, actions: out };
    let other = submit_for(&mut w2, "team-b", 4);
    w2.confirm_terminated(a_short, ProviderEnd::Signaled { signal: 15 });
    let (_, n_owner) = w2.last_launch(owner);
    assert_eq!(n_owner, n_short, "the owner's work takes the node its reclaim freed");
    assert!(w2.launched(other).is_none());
}

/// The owner's pool ranks below nodes of a cheaper pool it cannot use
/// now (cordoned): the owner still finds its own pool and takes its
/// capacity back. (Reclaim asks the scheduler for as many candidates as
/// the fleet has pools; this holds because candidates are one per pool,
/// not one per node: four cheaper nodes must not hide the owner's pool.)
#[test]
fn an_owner_finds_its_pool_behind_cheaper_nodes_it_cannot_use() {
    let spare = gpu_pool("spare", "A100-40", 4, 40.0, 0.5);
    let lab = gpu_pool("lab", "A100-40", 4, 40.0, 1.0);
    let mut w = World::new(cloud_fleet(vec![(spare, vec!["s1", "s2", "s3", "s4"]), (lab, vec!["n1", "n2"])]));
    w.send(Event::SetTenancy { tenancy: Box::new(tenancy(8)) });
    for s in ["s1", "s2", "s3", "s4"] {
        w.send(Event::SetNodeState {
            request: 0,
            node: s.into(),
            state: canopy::fleet::NodeState::Cordoned,
            note: None,
        });
    }
    let borrowed = submit_for(&mut w, "team-b", 4);
    let (a_borrowed, n_borrowed) = start_running(&mut w, borrowed);
    let other = submit_for(&mut w, "team-b", 4);
    start_running(&mut w, other);
    assert!(n_borrowed.starts_with('n'), "team-b borrows team-a's nodes: {n_borrowed}");
    w.advance(600.0);

    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.launched(owner).is_none());
    let said = w.events(owner, EventKind::Reclaim);
    assert_eq!(said.len(), 1, "the owner takes one node back: {said:?}");
    let stopped = [a_borrowed, w.last_launch(other).0].iter().filter(|a| w.terminated(**a)).count();
    assert_eq!(stopped, 1, "never more than needed");
}

/// The owner's launch on its own node is refused for capacity, so the
/// node counts as full for a while. When that belief ends, the node is
/// the owner's: its waiting work is asked first, ahead of older borrowed
/// work that waits for the same room. (A borrower took it first, and the
/// owner was not asked again until something else changed: 12 minutes
/// against a 10-minute promise in the 6× Gavel replay.)
#[test]
fn when_a_refused_node_counts_as_free_again_the_owner_is_asked_first() {
    let mut w = world(8);
    let own = submit_for(&mut w, "team-a", 4);
    start_running(&mut w, own);
    let borrowed = submit_for(&mut w, "team-b", 4);
    let (a_borrowed, n_borrowed) = start_running(&mut w, borrowed);
    w.advance(600.0);
    // team-b's next work waits for room; it is older than the owner's.
    let waiting = submit_for(&mut w, "team-b", 4);
    assert!(w.launched(waiting).is_none());
    w.advance(60.0);
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.terminated(a_borrowed), "the owner takes its node back");
    w.confirm_terminated(a_borrowed, ProviderEnd::Signaled { signal: 15 });
    let (a_owner, n_owner) = w.last_launch(owner);
    assert_eq!(n_owner, n_borrowed);
    // The provider refuses it: the node counts as full for a while.
    w.send(Event::LaunchResult {
        attempt: a_owner,
        result: Err(canopy::providers::LaunchError::Capacity("no capacity".into())),
    });
    assert_eq!(w.launches(owner), 1, "not launched there again at once");
    w.advance(10.0);
    assert_eq!(w.launches(owner), 1);
    // The belief ends: the owner's work is asked first.
    w.advance(60.0);
    assert_eq!(w.launches(owner), 2, "{:?}", w.workload(owner).reason);
    assert_eq!(w.last_launch(owner).1, n_borrowed);
    assert!(w.launched(waiting).is_none(), "the borrower still waits");
}

/// As above, but the borrowed work waiting for the same room asks for a
/// different shape, so both are woken when the belief ends and the older
/// borrowed work comes up first in the pass. The owner's reclaim is not
/// over until its launch is accepted: while it is refused, the owner's
/// pools stay closed to other tenants, and the node is the owner's when
/// it counts as free again. (The 6× Gavel replay, seed 3: team-iad's
/// work took the owner's node at the belief's end; team-fra waited 12
/// minutes against a 10-minute promise.)
#[test]
fn an_owners_refused_launch_keeps_its_pools_closed_to_borrowers() {
    let mut w = world(8);
    let own = submit_for(&mut w, "team-a", 4);
    start_running(&mut w, own);
    let borrowed = submit_for(&mut w, "team-b", 4);
    let (a_borrowed, n_borrowed) = start_running(&mut w, borrowed);
    w.advance(600.0);
    let mut spec = job_spec(4, "");
    spec.resources.cpu_cores = 8.0;
    let waiting = match w
        .send(Event::Submit {
            request: 9,
            spec: Box::new(spec.clone()),
            spec_hash: spec.content_hash(),
            idempotency_key: None,
            by: None,
            tenant: Some("team-b".into()),
        })
        .into_iter()
        .find_map(|a| match a {
            canopy::engine::core::Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(id),
            _ => None,
        }) {
        Some(id) => id,
        None => panic!("submitted"),
    };
    assert!(w.launched(waiting).is_none());
    w.advance(60.0);
    let owner = submit_for(&mut w, "team-a", 4);
    assert!(w.terminated(a_borrowed));
    w.confirm_terminated(a_borrowed, ProviderEnd::Signaled { signal: 15 });
    let (a_owner, _) = w.last_launch(owner);
    w.send(Event::LaunchResult {
        attempt: a_owner,
        result: Err(canopy::providers::LaunchError::Capacity("no capacity".into())),
    });
    w.advance(70.0);
    assert!(w.launched(waiting).is_none(), "the borrower took the owner's node");
    assert_eq!(w.launches(owner), 2, "{:?}", w.workload(owner).reason);
    assert_eq!(w.last_launch(owner).1, n_borrowed);
    // Once the owner's launch is accepted, its reclaim is over.
    let (a2, _) = w.last_launch(owner);
    w.ack(a2);
}
