//! Capacity-aware unblocking in the engine core: a released node wakes the
//! blocked work that fits it, oldest first, without letting small requests
//! overtake a large one on capacity it can use, and without forgetting
//! work of another shape that fits.

use canopy::accel::{ComputeCapability, Family, Interconnect, Vendor};
use canopy::engine::core::{Action, Core, CoreConfig, Event, OutputsResult, Reply};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Accelerator, FleetBuilder, Lifecycle, NodeDef, PoolDef, ProviderKind, Shape};
use canopy::providers::{AttemptStatus, LaunchAck};
use canopy::spec::{Format, load};
use std::time::Duration;

fn core() -> Core {
    let def = PoolDef {
        name: "p".into(),
        region: "eu-west".into(),
        shape: Shape {
            accelerator: Some(Accelerator {
                vendor: Vendor::Nvidia,
                model: "A100".into(),
                family: Family::Ampere,
                compute_capability: ComputeCapability::new(8, 0),
                memory_gb: 80.0,
            }),
            gpus_per_node: 4,
            interconnect: Interconnect::Pcie,
            cpu_cores: 64.0,
            memory_gb: 512.0,
            disk_gb: 1000.0,
        },
        price_per_hour: 4.0,
        startup: Duration::from_secs(30),
        capabilities: vec![],
        compliance: vec![],
        reserved: false,
        interruptible: false,
        lifecycle: Lifecycle::Vm,
        lend_limit_gpus: None,
    };
    let mut b = FleetBuilder::new();
    b.provider("cloud", ProviderKind::Cloud, None).unwrap();
    b.pool(def, vec![NodeDef::idle("n1"), NodeDef::idle("n2")]).unwrap();
    Core::new("st0001", b.build(), CoreConfig::default())
}

struct W {
    core: Core,
    now: i64,
    launches: Vec<(AttemptId, String)>,
}

impl W {
    fn send(&mut self, e: Event) -> Vec<Action> {
        let out = self.core.handle(e, Millis(self.now));
        for a in &out {
            if let Action::Launch { attempt, node, .. } = a {
                self.launches.push((*attempt, node.clone()));
            }
        }
        out
    }

    fn submit(&mut self, gpus: u32) -> WorkloadId {
        let text = format!(
            "name = \"j\"\n[runtime]\ncommand = [\"x\"]\n[resources]\ngpus = {gpus}\ncpu_cores = 2\nmemory_gb = 8\n"
        );
        let spec = load::parse(&text, "j.toml", Format::Toml).expect("valid").spec;
        let out = self.send(Event::Submit {
            request: 1,
            spec_hash: spec.content_hash(),
            spec: Box::new(spec),
            idempotency_key: None,
        });
        out.iter()
            .find_map(|a| match a {
                Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(*id),
                _ => None,
            })
            .expect("submitted")
    }

    fn launched(&self, id: WorkloadId) -> Option<&str> {
        self.launches.iter().rev().find(|(a, _)| a.workload == id).map(|(_, n)| n.as_str())
    }

    fn succeed(&mut self, id: WorkloadId) {
        let a = self.launches.iter().rev().find(|(a, _)| a.workload == id).expect("launched").0;
        let ok = Ok(LaunchAck { provider_ref: "r".into(), adopted: false });
        self.send(Event::LaunchResult { attempt: a, result: ok });
        self.send(Event::Status { attempt: a, status: AttemptStatus::Running });
        self.now += 60_000;
        let end = ProviderEnd::Exited { code: 0 };
        self.send(Event::Status { attempt: a, status: AttemptStatus::Ended(end.clone()) });
        let outputs = OutputsResult::Collected { count: 0 };
        self.send(Event::Collected { attempt: a, end, log_tail: vec![], outputs });
    }
}

#[test]
fn a_released_node_goes_to_the_oldest_fitting_work_first_and_no_one_starves() {
    let mut w = W { core: core(), now: 1_700_000_000_000, launches: vec![] };
    let j1 = w.submit(4);
    let j2 = w.submit(4);
    assert_eq!((w.launched(j1), w.launched(j2)), (Some("n1"), Some("n2")));
    // Everything else waits: a large request first, then small ones.
    let big = w.submit(4);
    let small: Vec<WorkloadId> = (0..4).map(|_| w.submit(1)).collect();
    assert_eq!(w.core.blocked_count(), 5);

    // n1 frees up: the large request, older, gets it; the small ones wait.
    w.succeed(j1);
    assert_eq!(w.launched(big), Some("n1"));
    assert!(small.iter().all(|s| w.launched(*s).is_none() && w.core.is_blocked(*s)));

    // n2 frees up: all four small ones fit there and run.
    w.succeed(j2);
    assert!(small.iter().all(|s| w.launched(*s) == Some("n2")), "{:?}", w.launches);
    assert_eq!(w.core.blocked_count(), 0);
}

#[test]
fn work_of_another_shape_behind_an_unfittable_request_is_still_woken() {
    let mut w = W { core: core(), now: 1_700_000_000_000, launches: vec![] };
    let j1 = w.submit(4);
    let j2 = w.submit(4);
    // Never fits anywhere (5 GPUs on 4-GPU nodes), then a fitting one.
    let huge = w.submit(5);
    let one = w.submit(1);
    assert!(w.core.is_blocked(huge) && w.core.is_blocked(one));
    w.succeed(j1);
    assert_eq!(w.launched(one), Some("n1"));
    assert!(w.core.is_blocked(huge));
    w.succeed(j2);
    assert!(w.core.is_blocked(huge), "still waiting, not lost");
}
