//! Capacity-aware unblocking in the engine core: a released node wakes the
//! blocked work that fits it, oldest first, without letting small requests
//! overtake a large one on capacity it can use, and without forgetting
//! work of another shape that fits.

mod common;

use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Fleet, FleetBuilder, NodeDef, ProviderKind};
use common::{World, cloud_fleet, gpu_pool};

/// One pool of two 4-GPU nodes, n1 and n2, on roomy hosts.
fn fleet() -> Fleet {
    let mut def = gpu_pool("p", "A100", 4, 80.0, 4.0);
    def.shape.memory_gb = 512.0;
    def.shape.disk_gb = 1000.0;
    cloud_fleet(vec![(def, vec!["n1", "n2"])])
}

impl World {
    /// Runs the workload's last launch for a minute (no tick) and ends it
    /// cleanly, which releases its node.
    fn succeed(&mut self, id: WorkloadId) {
        let (a, _) = self.last_launch(id);
        self.run(a);
        self.now += 60_000;
        self.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    }
}

#[test]
fn a_released_node_goes_to_the_oldest_fitting_work_first_and_no_one_starves() {
    let mut w = World::new(fleet());
    let j1 = w.submit_gpus(4);
    let j2 = w.submit_gpus(4);
    assert_eq!((w.launched(j1), w.launched(j2)), (Some("n1"), Some("n2")));
    // Everything else waits: a large request first, then small ones.
    let big = w.submit_gpus(4);
    let small: Vec<WorkloadId> = (0..4).map(|_| w.submit_gpus(1)).collect();
    assert_eq!(w.core.blocked_count(), 5);

    // n1 frees up: the large request, older, gets it; the small ones wait.
    w.succeed(j1);
    assert_eq!(w.launched(big), Some("n1"));
    assert!(small.iter().all(|s| w.launched(*s).is_none() && w.core.is_blocked(*s)));

    // n2 frees up: all four small ones fit there and run.
    w.succeed(j2);
    assert!(small.iter().all(|s| w.launched(*s) == Some("n2")), "{:?}", w.launch_log().collect::<Vec<_>>());
    assert_eq!(w.core.blocked_count(), 0);
}

#[test]
fn work_of_another_shape_behind_an_unfittable_request_is_still_woken() {
    let mut w = World::new(fleet());
    let j1 = w.submit_gpus(4);
    let j2 = w.submit_gpus(4);
    // Never fits anywhere (5 GPUs on 4-GPU nodes) but waits for capacity,
    // then a fitting one.
    let huge = w.submit_job(5, "[constraints]\nwait_for_capacity = true");
    let one = w.submit_gpus(1);
    assert!(w.core.is_blocked(huge) && w.core.is_blocked(one));
    w.succeed(j1);
    assert_eq!(w.launched(one), Some("n1"));
    assert!(w.core.is_blocked(huge));
    w.succeed(j2);
    assert!(w.core.is_blocked(huge), "still waiting, not lost");
}

/// One provider lending at most 4 GPUs: pool "a" of two 1-GPU nodes and
/// pool "b" of one 8-GPU node (dearer per GPU).
fn lend_limited() -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("cloud", ProviderKind::Cloud, Some(4)).unwrap();
    for (def, nodes) in [
        (gpu_pool("a", "A100", 1, 80.0, 1.0), vec!["a1", "a2"]),
        (gpu_pool("b", "A100", 8, 80.0, 16.0), vec!["b1"]),
    ] {
        b.pool(def, nodes.into_iter().map(NodeDef::idle).collect()).unwrap();
    }
    b.build()
}

/// GPUs released under a lend limit wake the work the limit now admits,
/// wherever it could run, and nothing else: a request still too large for
/// the limit is not asked again on every release (it was, and on a large
/// fleet under a limit that made placement work grow with the queue).
#[test]
fn a_release_under_a_lend_limit_asks_only_the_work_the_limit_now_admits() {
    let mut w = World::new(lend_limited());
    let three = w.submit_gpus(3);
    let one = w.submit_gpus(1);
    assert_eq!((w.launched(three), w.launched(one)), (Some("b1"), Some("a1")));
    // The limit is full (4 of 4): both wait, though b1 has 5 GPUs free.
    let x = w.submit_gpus(3);
    let y = w.submit_gpus(1);
    assert!(w.core.is_blocked(x) && w.core.is_blocked(y));
    let asked = w.core.work_counts().taken;

    // One GPU comes back: the limit admits 1 more, which y takes (on a1,
    // which fits it, or anywhere else the limit now allows). x, 3 GPUs,
    // is not asked.
    w.succeed(one);
    assert!(w.launched(y).is_some(), "y runs");
    assert!(w.core.is_blocked(x), "x still waits");
    assert_eq!(w.core.work_counts().taken - asked, 1, "only y was asked again");

    // Three come back: now the limit admits x, which runs on b1.
    w.succeed(three);
    assert_eq!(w.launched(x), Some("b1"));
    assert_eq!(w.core.blocked_count(), 0);
}
