//! A workload's exclusions in the engine core, on virtual time: a node
//! that is back ends them before their TTL, an operator clears them, the
//! workload's record shows them, and a restart keeps what ended ended.

mod common;

use canopy::engine::core::{Event, Reply, Restore};
use canopy::engine::model::{AttemptId, EventKind, Millis, WorkloadId};
use canopy::failure::ProviderEnd;
use canopy::fleet::NodeDef;
use common::{World, cloud_fleet, gpu_pool, toml_spec};

fn pool() -> canopy::fleet::PoolDef {
    gpu_pool("h100", "H100-SXM5", 8, 80.0, 30.0)
}

/// A pool of exactly two nodes, as the provider's inventory reports it
/// (its first report after a start proves nothing about recoveries).
fn world() -> World {
    let mut w = World::new(cloud_fleet(vec![(pool(), vec!["n1", "n2"])]));
    inventory(&mut w, &["n1", "n2"]);
    w
}

/// The provider's inventory lists these nodes, ready (Ray lists only
/// the nodes that are alive).
fn inventory(w: &mut World, nodes: &[&str]) {
    let nodes = nodes.iter().map(|n| NodeDef::idle(*n)).collect();
    w.send(Event::Inventory { provider: "cloud".into(), pools: vec![(pool(), nodes)] });
}

/// A gang of two on both nodes, running; rank 1's node (n2) is lost.
fn a_gang_that_lost_n2(w: &mut World) -> (WorkloadId, AttemptId) {
    let spec = toml_spec(
        "name = \"gang\"\n[retry]\nbackoff = \"1s\"\n[runtime]\ncommand = [\"train\"]\n\
         [resources]\nnodes = 2\ngpus = 8\ncpu_cores = 4\nmemory_gb = 16\n",
        "gang.toml",
    );
    let Reply::Submitted { id, .. } = w.submit_spec(&spec, None) else { panic!("not submitted") };
    let (a, _) = w.last_launch(id);
    assert_eq!(w.attempt(a).nodes, ["n1", "n2"]);
    w.run(a);
    let lost = ProviderEnd::NodeLost { message: "node n2 died".into() };
    w.end(a, ProviderEnd::Rank { rank: 1, node: "n2".into(), end: Box::new(lost) }, &[]);
    w.advance(2.0);
    (id, a)
}

fn unexclude(w: &mut World, id: WorkloadId, target: Option<&str>) -> Vec<canopy::engine::core::Action> {
    w.send(Event::Unexclude {
        request: 7,
        id,
        target: target.map(Into::into),
        by: "ops-alice".into(),
        reason: Some("cable replaced".into()),
    })
}

fn reply(out: &[canopy::engine::core::Action]) -> Reply {
    out.iter()
        .find_map(|a| match a {
            canopy::engine::core::Action::Reply { request: 7, reply } => Some(reply.clone()),
            _ => None,
        })
        .expect("a reply")
}

/// The Ray report: a gang of N in a pool of N whose lost node comes back
/// is placed again when the inventory lists the node again, not 30
/// minutes later.
#[test]
fn a_gang_whose_lost_node_is_back_is_placed_again_before_the_ttl() {
    let mut w = world();
    let (g, _) = a_gang_that_lost_n2(&mut w);
    let x = w.workload(g).exclusions.expect("the record carries its exclusions");
    assert_eq!(x.nodes, ["n2"], "{x:?}");
    assert_eq!(x.until, x.since.map(|t| t.plus_secs(1800.0)), "{x:?}");
    // The node is gone from the provider's inventory: the gang waits.
    inventory(&mut w, &["n1"]);
    w.advance(60.0);
    assert_eq!(w.launches(g), 1, "nowhere to go while n2 is gone");
    // It is back, minutes before the exclusion's TTL.
    inventory(&mut w, &["n1", "n2"]);
    assert_eq!(w.launches(g), 2, "placed again as soon as n2 is back");
    let (b, _) = w.last_launch(g);
    assert_eq!(w.attempt(b).nodes.len(), 2);
    let said = w.events(g, EventKind::Retry).join("\n");
    assert!(said.contains("node n2 is back (its provider reports it ready again)"), "{said}");
    assert!(w.workload(g).exclusions.is_some_and(|x| x.is_empty()));
}

/// A core whose first node failure quarantines the node, for 10 minutes.
fn quarantining_world() -> World {
    let health = canopy::health::HealthConfig {
        quarantine_after: 1,
        cooldown_s: 600.0,
        ..canopy::health::HealthConfig::default()
    };
    let config = canopy::engine::core::CoreConfig { health, ..canopy::engine::core::CoreConfig::default() };
    let mut w = World::with(cloud_fleet(vec![(pool(), vec!["n1", "n2"])]), config);
    inventory(&mut w, &["n1", "n2"]);
    w
}

/// A quarantine that ends, or that an operator lifts, ends the
/// workload's exclusion of the node with it.
#[test]
fn a_quarantine_that_ends_or_is_lifted_ends_the_exclusion() {
    let mut w = quarantining_world();
    let (g, _) = a_gang_that_lost_n2(&mut w);
    assert!(w.core.health().node("n2", Millis(w.now)).quarantined);
    w.advance(590.0);
    assert_eq!(w.launches(g), 1, "n2 is quarantined and excluded");
    w.advance(20.0);
    assert_eq!(w.launches(g), 2, "its cool-down ended: placed again, 20 minutes before the exclusion's TTL");
    let said = w.events(g, EventKind::Retry).join("\n");
    assert!(said.contains("node n2 is back (its quarantine ended)"), "{said}");

    let mut w = quarantining_world();
    let (g, _) = a_gang_that_lost_n2(&mut w);
    w.send(Event::Unquarantine { request: 3, node: "n2".into() });
    assert_eq!(w.launches(g), 2, "placed again as soon as the quarantine is lifted");
    let said = w.events(g, EventKind::Retry).join("\n");
    assert!(said.contains("node n2 is back (an operator lifted its quarantine)"), "{said}");
}

/// A node that merely stays listed proves nothing: its exclusion holds
/// until the TTL (and a refresh repeating the same report changes nothing).
#[test]
fn a_node_that_never_left_stays_excluded_until_the_ttl() {
    let mut w = world();
    let (g, _) = a_gang_that_lost_n2(&mut w);
    inventory(&mut w, &["n1", "n2"]);
    w.advance(1700.0);
    assert_eq!(w.launches(g), 1, "still excluded");
    w.advance(120.0);
    assert_eq!(w.launches(g), 2, "placed once the exclusion expired");
}

/// An operator's clear places it at once; the workload's events say who
/// and why; naming what it does not exclude is refused, saying what it
/// does exclude.
#[test]
fn an_operator_clears_an_exclusion_and_it_is_placed_at_once() {
    let mut w = world();
    let (g, _) = a_gang_that_lost_n2(&mut w);
    match reply(&unexclude(&mut w, g, Some("n1"))) {
        Reply::Error { message, .. } => assert!(message.contains("it excludes: n2"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.launches(g), 1);
    match reply(&unexclude(&mut w, g, Some("n2"))) {
        Reply::Done { message } => assert_eq!(message, format!("{g}: no longer excludes n2")),
        other => panic!("{other:?}"),
    }
    assert_eq!(w.launches(g), 2, "placed at once");
    let said = w.events(g, EventKind::Retry).join("\n");
    assert!(said.contains("exclusion of n2 cleared by ops-alice: cable replaced"), "{said}");
    assert!(w.workload(g).exclusions.is_some_and(|x| x.is_empty()));
    match reply(&unexclude(&mut w, g, None)) {
        Reply::Error { message, .. } => assert!(message.contains("excludes no node or pool"), "{message}"),
        other => panic!("{other:?}"),
    }
}

/// A restart restores what the record says, not what the failed attempt
/// alone would imply: a cleared exclusion stays cleared. A row from
/// before records carried exclusions is recomputed from its attempts.
#[test]
fn a_cleared_exclusion_stays_cleared_across_a_restart() {
    let mut w = world();
    let (g, a) = a_gang_that_lost_n2(&mut w);
    unexclude(&mut w, g, None);
    let (b, _) = w.last_launch(g);
    let rec = w.workload(g);
    let attempts = vec![w.attempt(a), w.attempt(b)];
    let restored = |rec: canopy::engine::model::WorkloadRecord| {
        let mut fresh = World::new(cloud_fleet(vec![(pool(), vec!["n1", "n2"])]));
        let r = Restore { workloads: vec![rec], attempts: attempts.clone(), max_id: 1, ..Restore::default() };
        fresh.core.restore(r, Millis(w.now));
        fresh.core.exclusions(g).expect("live").nodes
    };
    assert_eq!(restored(rec.clone()), Vec::<String>::new(), "cleared, and it stays cleared");
    let old = canopy::engine::model::WorkloadRecord { exclusions: None, ..rec };
    assert_eq!(restored(old), ["n2"], "recomputed from the failed attempt");
}
