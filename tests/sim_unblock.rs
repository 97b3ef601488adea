//! Capacity-aware unblocking in the engine core: a released node wakes the
//! blocked work that fits it, oldest first, without letting small requests
//! overtake a large one on capacity it can use, and without forgetting
//! work of another shape that fits.

mod common;

use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::Fleet;
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
