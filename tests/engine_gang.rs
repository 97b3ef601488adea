//! Gangs in the engine core, on virtual time: all nodes reserved at once,
//! the first waiting gang holding the nodes it will start on, backfill of
//! work that ends before they free up, and one relaunch per gang failure.

mod common;

use canopy::engine::model::{EventKind, Record, WorkloadState};
use canopy::failure::{FailureClass, ProviderEnd};
use common::{World, cloud_fleet, gpu_pool, toml_spec};

/// Two 8-GPU nodes in one pool.
fn world() -> World {
    World::new(cloud_fleet(vec![(gpu_pool("h100", "H100-SXM5", 8, 80.0, 30.0), vec!["n1", "n2"])]))
}

fn spec(name: &str, nodes: u32, gpus: u32, extra: &str) -> canopy::spec::Spec {
    toml_spec(
        &format!(
            "name = {name:?}\n{extra}\n[runtime]\ncommand = [\"train\"]\n\
             [resources]\nnodes = {nodes}\ngpus = {gpus}\ncpu_cores = 4\nmemory_gb = 16\n"
        ),
        "gang.toml",
    )
}

fn submit(w: &mut World, s: &canopy::spec::Spec) -> canopy::engine::model::WorkloadId {
    match w.submit_spec(s, None) {
        canopy::engine::core::Reply::Submitted { id, .. } => id,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_gang_takes_every_node_at_once_and_gives_them_back_together() {
    let mut w = world();
    let g = submit(&mut w, &spec("gang", 2, 8, ""));
    let (a, _) = w.last_launch(g);
    let att = w.attempt(a);
    assert_eq!(att.nodes, ["n1", "n2"].map(String::from).to_vec(), "{att:?}");
    // Nothing else fits while the gang holds both nodes.
    let x = submit(&mut w, &spec("x", 1, 1, ""));
    assert_eq!(w.launched(x), None);
    w.ack(a);
    w.run(a);
    w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    assert_eq!(w.state(g), WorkloadState::Succeeded);
    assert!(w.launched(x).is_some(), "the gang's nodes are free again");
}

/// A long job runs on n1 with a known end; a gang of two waits and holds
/// both nodes. Work that ends before n1 frees up may use n2 meanwhile;
/// work without a time limit may not; when n1 frees, the gang starts.
#[test]
fn a_waiting_gang_holds_its_nodes_and_only_short_work_backfills() {
    let mut w = world();
    let long = submit(&mut w, &spec("long", 1, 4, "[constraints]\nmax_runtime = \"2h\"\n"));
    let (la, long_node) = w.last_launch(long);
    w.ack(la);
    w.run(la);
    let g = submit(&mut w, &spec("gang", 2, 8, ""));
    assert_eq!(w.launched(g), None);
    let held = w.events(g, EventKind::Unschedulable).join("\n");
    assert!(held.contains("holding n1,n2") && held.contains("expected free in 2h"), "{held}");
    // No time limit: it would keep the gang waiting, so it waits instead.
    let open = submit(&mut w, &spec("open-ended", 1, 1, ""));
    assert_eq!(w.launched(open), None, "held nodes are not given to open-ended work");
    // Ends within the hour: it backfills the idle node.
    let short = submit(&mut w, &spec("short", 1, 8, "[constraints]\nmax_runtime = \"1h\"\n"));
    let (sa, short_node) = w.last_launch(short);
    assert_ne!(short_node, long_node);
    w.ack(sa);
    w.run(sa);
    w.advance(1800.0);
    w.end(sa, ProviderEnd::Exited { code: 0 }, &[]);
    assert_eq!(w.launched(g), None, "n1 is still busy");
    assert_eq!(w.launched(open), None, "and the hold still stands");
    w.end(la, ProviderEnd::Exited { code: 0 }, &[]);
    let (ga, _) = w.last_launch(g);
    assert_eq!(w.attempt(ga).nodes.len(), 2, "the gang starts on both nodes");
    // Its hold is gone; the open-ended job waits only for room now.
    w.ack(ga);
    w.run(ga);
    w.end(ga, ProviderEnd::Exited { code: 0 }, &[]);
    assert!(w.launched(open).is_some());
}

/// Work of higher priority than the waiting gang is not held back.
#[test]
fn work_of_higher_priority_is_not_held_back_by_a_gang() {
    let mut w = world();
    let long = submit(&mut w, &spec("long", 1, 4, ""));
    let (la, _) = w.last_launch(long);
    w.ack(la);
    w.run(la);
    let g = submit(&mut w, &spec("gang", 2, 8, ""));
    assert_eq!(w.launched(g), None);
    let urgent = submit(&mut w, &spec("urgent", 1, 8, "priority = 90\n"));
    assert!(w.launched(urgent).is_some());
}

/// A 2-node gang on three H100 nodes, launched and acknowledged: the
/// world, the workload, its first attempt and that attempt's nodes.
fn a_launched_gang_of_two()
-> (World, canopy::engine::model::WorkloadId, canopy::engine::model::AttemptId, Vec<String>) {
    let mut w =
        World::new(cloud_fleet(vec![(gpu_pool("h100", "H100-SXM5", 8, 80.0, 30.0), vec!["n1", "n2", "n3"])]));
    let g = submit(&mut w, &spec("gang", 2, 8, "[retry]\nbackoff = \"1s\"\n"));
    let (a, _) = w.last_launch(g);
    let first = w.attempt(a).nodes.clone();
    w.ack(a);
    (w, g, a, first)
}

/// One rank's comm failure costs the gang one relaunch, not one per node,
/// and is charged to that rank's node only.
#[test]
fn a_ranks_failure_relaunches_the_gang_once() {
    let (mut w, g, a, first) = a_launched_gang_of_two();
    w.run(a);
    let end =
        ProviderEnd::Rank { rank: 1, node: first[1].clone(), end: Box::new(ProviderEnd::Exited { code: 1 }) };
    w.end(a, end, &["NCCL error: unhandled system error, NCCL version 2.18.1"]);
    let att = w.attempt(a);
    assert_eq!(att.class, Some(canopy::failure::FailureClass::Comm));
    assert!(
        att.evidence.as_deref().unwrap_or("").starts_with(&format!("rank 1 on {}: ", first[1])),
        "{att:?}"
    );
    w.advance(2.0);
    let (b, _) = w.last_launch(g);
    assert_eq!(b.n, 2, "one relaunch");
    let second = w.attempt(b).nodes;
    assert!(!second.contains(&first[1]), "the failing node is avoided: {second:?}");
    assert!(second.contains(&first[0]), "rank 0's node is not excluded: {second:?}");
    assert_eq!(w.workload(g).attempts, 2);
}

/// A launch where only rank 0 started: rank 1 could not start on its
/// node, so the provider stopped rank 0 and reports rank 1's failed
/// launch (as the local supervisor does). The gang is rolled back as one
/// failed attempt: charged to rank 1's node alone, relaunched once away
/// from that node only, and both nodes are given back together.
#[test]
fn a_launch_where_only_one_rank_starts_is_rolled_back_as_one_attempt() {
    let (mut w, g, a, first) = a_launched_gang_of_two();
    let why = format!(
        "rank 1 of the gang (node {}) could not start \"train\": No such file or directory (os error 2); \
         the 1 rank(s) that had started were stopped",
        first[1]
    );
    let end = ProviderEnd::Rank {
        rank: 1,
        node: first[1].clone(),
        end: Box::new(ProviderEnd::BootFailed { message: why.clone() }),
    };
    w.end(a, end, &[&format!("canopy: {why}")]);
    let att = w.attempt(a);
    assert_eq!(att.class, Some(FailureClass::Node), "{att:?}");
    let evidence = att.evidence.clone().unwrap_or_default();
    assert!(evidence.starts_with(&format!("rank 1 on {}: ", first[1])), "{evidence}");
    let charged: Vec<_> = w
        .records()
        .filter_map(|r| if let Record::Health(h) = r { Some((h.node.clone(), h.class)) } else { None })
        .collect();
    assert_eq!(charged, [(first[1].clone(), Some(FailureClass::Node))], "only rank 1's node is charged");
    w.advance(2.0);
    assert_eq!(w.launches(g), 2, "the gang is relaunched once, not once per rank");
    assert_eq!(w.events(g, EventKind::Retry).len(), 1);
    let (b, _) = w.last_launch(g);
    assert_eq!(b.n, 2);
    let second = w.attempt(b).nodes;
    assert!(!second.contains(&first[1]), "the node that could not start rank 1 is avoided: {second:?}");
    assert!(second.contains(&first[0]), "rank 0's node is not excluded: {second:?}");
    assert_eq!(w.workload(g).attempts, 2);
    // Rank 1's node was given back with rank 0's: a whole-node job runs
    // there while the relaunched gang holds the other two.
    let x = submit(&mut w, &spec("x", 1, 8, ""));
    assert_eq!(w.launched(x), Some(first[1].as_str()));
}
