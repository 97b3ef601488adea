//! Each placement policy behaves as named, on small fleets driven by hand
//! through the engine core (as the simulator drives it): Canopy's avoids a
//! node after it failed, cheapest-first keeps choosing it, the blocklist
//! forgets it for the next workload, random is seeded.

mod common;

use canopy::engine::core::{CoreConfig, PlacementPolicy};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::Fleet;
use common::{World, cloud_fleet, gpu_pool};

/// A cheap pool of three single-GPU nodes (c1 first by name) and a dear one.
fn fleet() -> Fleet {
    cloud_fleet(vec![
        (gpu_pool("cheap", "A100", 1, 80.0, 1.0), vec!["c1", "c2", "c3"]),
        (gpu_pool("dear", "A100", 1, 80.0, 1.1), vec!["d1", "d2"]),
    ])
}

const XID79: &[&str] = &[
    "RuntimeError: CUDA error: unknown error",
    "[123.4] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.",
];

/// The default core over [`fleet`], placing with `placement`.
fn world(placement: PlacementPolicy) -> World {
    World::with(fleet(), CoreConfig { placement, ..CoreConfig::default() })
}

/// A world placing with `placement` in which a workload's first attempt
/// went to c1 and failed there, and its retry backoff has passed.
fn failed_on_c1(placement: PlacementPolicy) -> (World, WorkloadId) {
    let mut w = world(placement);
    let id = w.submit_gpus(1);
    assert_eq!(w.fail_once(id), "c1");
    w.wait_backoff();
    (w, id)
}

impl World {
    /// Places one job, runs it for an hour and fails it with Xid 79.
    /// Returns the node it failed on.
    fn fail_once(&mut self, id: WorkloadId) -> String {
        let (a, node) = self.last_launch(id);
        self.run(a);
        self.advance(3600.0);
        self.end(a, ProviderEnd::Exited { code: 1 }, XID79);
        node
    }

    /// Past any retry backoff.
    fn wait_backoff(&mut self) {
        self.advance(60.0);
    }
}

#[test]
fn cheapest_first_retries_on_the_node_that_just_failed() {
    let (mut w, id) = failed_on_c1(PlacementPolicy::CheapestFirst);
    let (a, node) = w.last_launch(id);
    assert_eq!((a.n, node.as_str()), (2, "c1"), "price only, no memory: back to the cheapest offer");
    // And the next workload lands there too.
    assert_eq!(w.fail_once(id), "c1");
    let other = w.submit_gpus(1);
    assert_eq!(w.last_launch(other).1, "c1");
}

#[test]
fn blocklist_moves_the_workload_but_forgets_for_the_next_one() {
    let (mut w, id) = failed_on_c1(PlacementPolicy::Blocklist);
    assert_eq!(w.last_launch(id).1, "c2", "the failed node is excluded for this workload");
    let other = w.submit_gpus(1);
    assert_eq!(w.last_launch(other).1, "c1", "no fleet-wide memory");
}

#[test]
fn canopy_avoids_a_node_after_it_fails_and_quarantines_a_lemon() {
    let (mut w, id) = failed_on_c1(PlacementPolicy::HealthAware);
    let (a, retry_node) = w.last_launch(id);
    assert_ne!(retry_node, "c1", "the retry goes elsewhere");
    w.run(a);
    // A new workload prefers a node with a clean record, even a dearer one.
    let b = w.submit_gpus(1);
    let (ab, node) = w.last_launch(b);
    assert_ne!(node, "c1");
    w.run(ab);
    // Fill the other nodes; the next one only has c1 left, and may use it.
    for _ in 0..2 {
        let x = w.submit_gpus(1);
        let (ax, _) = w.last_launch(x);
        w.run(ax);
    }
    let e = w.submit_gpus(1);
    assert_eq!(w.fail_once(e), "c1");
    // Two failures in a row: c1 is quarantined. New work waits rather than use it.
    w.wait_backoff();
    let f = w.submit_gpus(1);
    assert!(w.try_last_launch(f).is_none(), "nothing placed on the quarantined node");
    assert!(w.core.is_blocked(f));
    assert!(w.core.health().view(Millis(w.now)).node("c1").quarantined);
}

#[test]
fn random_is_seeded_and_spreads_over_feasible_pools() {
    let pick = |seed: u64| {
        let mut w = world(PlacementPolicy::Random { seed });
        let ids: Vec<WorkloadId> = (0..5).map(|_| w.submit_gpus(1)).collect();
        ids.into_iter().map(|id| w.try_last_launch(id).map(|(_, n)| n)).collect::<Vec<_>>()
    };
    assert_eq!(pick(7), pick(7));
    let all: Vec<Option<String>> = (0..8).flat_map(pick).collect();
    assert!(all.iter().flatten().any(|n| n.starts_with('d')), "random reaches the dear pool: {all:?}");
    assert!(all.iter().flatten().any(|n| n.starts_with('c')));
}

/// One reserved node at 10/h and two on-demand nodes at 30/h.
fn cheap_and_dear() -> Fleet {
    cloud_fleet(vec![
        (gpu_pool("reserved", "A100", 1, 80.0, 10.0), vec!["r1"]),
        (gpu_pool("ondemand", "A100", 1, 80.0, 30.0), vec!["o1", "o2"]),
    ])
}

/// A world over [`cheap_and_dear`] placing with `placement` whose reserved
/// node runs work expected to end in `expected` (say "1h"); its attempt.
fn reserved_running(placement: PlacementPolicy, expected: &str) -> (World, AttemptId) {
    let mut w = World::with(cheap_and_dear(), CoreConfig { placement, ..CoreConfig::default() });
    let first = w.submit(&format!("expected_runtime = \"{expected}\""));
    let (a, node) = w.last_launch(first);
    assert_eq!(node, "r1", "the first work takes the reserved node");
    w.run(a);
    (w, a)
}

#[test]
fn canopy_waits_for_cheap_capacity_due_to_free_rather_than_overflow_long_work() {
    // Ten hours of work on the reserved node, expected to end in one hour.
    let (mut w, a) = reserved_running(PlacementPolicy::HealthAware, "1h");
    // Long work arrives: on-demand is free at three times the price, the
    // reserved node is due to free within a quarter of its runtime. It waits.
    let long = w.submit("expected_runtime = \"10h\"");
    assert!(w.try_last_launch(long).is_none(), "long work waits for the reserved node");
    assert!(w.workload(long).reason.unwrap_or_default().contains("waiting for capacity at $10.00/h"));
    // Short work does not wait: it takes on-demand now.
    let short = w.submit("expected_runtime = \"30m\"");
    assert_eq!(w.last_launch(short).1, "o1");
    // The reserved node frees: the long work takes it.
    w.advance(3600.0);
    w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    assert_eq!(w.last_launch(long).1, "r1");
}

#[test]
fn patience_ends_when_its_window_does_and_the_eager_policy_never_waits() {
    // The reserved node is held by work expected to end in 2 hours.
    let (mut w, _) = reserved_running(PlacementPolicy::HealthAware, "2h");
    // Eight hours of work may wait two hours in all; the node does not free.
    let long = w.submit("expected_runtime = \"8h\"");
    assert!(w.try_last_launch(long).is_none());
    w.advance(2.0 * 3600.0 + 1.0);
    assert_eq!(w.last_launch(long).1, "o1", "its patience spent, it takes what fits");

    let (mut e, _) = reserved_running(PlacementPolicy::Eager, "1h");
    let long = e.submit("expected_runtime = \"10h\"");
    assert_eq!(e.last_launch(long).1, "o1");
}

/// Work that asked to start soon or to be fast never waits for a price.
#[test]
fn work_that_asks_to_start_soon_or_run_fast_never_waits_for_a_price() {
    for prefs in ["[preferences]\nstartup_within = \"10m\"", "[preferences]\noptimize = \"speed\""] {
        let (mut w, _) = reserved_running(PlacementPolicy::HealthAware, "1h");
        let long = w.submit(&format!("expected_runtime = \"10h\"\n{prefs}"));
        assert_eq!(w.try_last_launch(long).map(|l| l.1), Some("o1".to_string()), "{prefs}");
    }
}

/// Waiting work counts on running work ending when it is expected to;
/// when that work runs over, the wait is asked again a moment after the
/// capacity was due, and the work takes what fits then, not at the end of
/// its window.
#[test]
fn patience_gives_up_once_the_capacity_it_counted_on_is_late() {
    // The reserved node is held by work expected to end in an hour.
    let (mut w, _) = reserved_running(PlacementPolicy::HealthAware, "1h");
    // Twenty hours of work may wait five hours; it waits for r1.
    let long = w.submit("expected_runtime = \"20h\"");
    assert!(w.try_last_launch(long).is_none());
    // An hour and two seconds later the first has not ended.
    w.advance(3600.0 + 2.0);
    assert_eq!(
        w.try_last_launch(long).map(|l| l.1),
        Some("o1".to_string()),
        "the capacity it waited for is late: it takes on-demand now"
    );
}
