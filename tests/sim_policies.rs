//! Each placement policy behaves as named, on small fleets driven by hand
//! through the engine core (as the simulator drives it): Canopy's avoids a
//! node after it failed, cheapest-first keeps choosing it, the blocklist
//! forgets it for the next workload, random is seeded.

use canopy::accel::{ComputeCapability, Family, Interconnect, Vendor};
use canopy::engine::core::{Action, Core, CoreConfig, Event, OutputsResult, PlacementPolicy, Reply};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Accelerator, Fleet, FleetBuilder, Lifecycle, NodeDef, PoolDef, ProviderKind, Shape};
use canopy::providers::{AttemptStatus, LaunchAck};
use canopy::spec::{Format, load};
use std::time::Duration;

fn pool(name: &str, gpus: u32, price: f64) -> PoolDef {
    PoolDef {
        name: name.into(),
        region: "eu-west".into(),
        shape: Shape {
            accelerator: Some(Accelerator {
                vendor: Vendor::Nvidia,
                model: "A100".into(),
                family: Family::Ampere,
                compute_capability: ComputeCapability::new(8, 0),
                memory_gb: 80.0,
            }),
            gpus_per_node: gpus,
            interconnect: Interconnect::Pcie,
            cpu_cores: 16.0 * f64::from(gpus),
            memory_gb: 64.0 * f64::from(gpus),
            disk_gb: 500.0,
        },
        price_per_hour: price,
        startup: Duration::from_secs(30),
        capabilities: vec![],
        compliance: vec![],
        reserved: false,
        interruptible: false,
        lifecycle: Lifecycle::Vm,
        lend_limit_gpus: None,
    }
}

/// A cheap pool of three single-GPU nodes (c1 first by name) and a dear one.
fn fleet() -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("cloud", ProviderKind::Cloud, None).unwrap();
    b.pool(pool("cheap", 1, 1.0), vec![NodeDef::idle("c1"), NodeDef::idle("c2"), NodeDef::idle("c3")])
        .unwrap();
    b.pool(pool("dear", 1, 1.1), vec![NodeDef::idle("d1"), NodeDef::idle("d2")]).unwrap();
    b.build()
}

const XID79: &[&str] = &[
    "RuntimeError: CUDA error: unknown error",
    "[123.4] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.",
];

struct World {
    core: Core,
    now: i64,
    actions: Vec<Action>,
}

impl World {
    fn new(fleet: Fleet, placement: PlacementPolicy) -> Self {
        let config = CoreConfig { placement, ..CoreConfig::default() };
        Self { core: Core::new("st0001", fleet, config), now: 1_700_000_000_000, actions: vec![] }
    }

    fn send(&mut self, e: Event) -> Vec<Action> {
        let out = self.core.handle(e, Millis(self.now));
        self.actions.extend(out.clone());
        out
    }

    fn advance(&mut self, secs: f64) {
        self.now += (secs * 1000.0) as i64;
        self.send(Event::Tick);
    }

    fn submit(&mut self, gpus: u32) -> WorkloadId {
        let text = format!(
            "name = \"job\"\n[runtime]\ncommand = [\"train\"]\n[resources]\ngpus = {gpus}\ncpu_cores = 4\nmemory_gb = 16\n"
        );
        let spec = load::parse(&text, "job.toml", Format::Toml).expect("valid spec").spec;
        let hash = spec.content_hash();
        let out = self.send(Event::Submit {
            request: 1,
            spec: Box::new(spec),
            spec_hash: hash,
            idempotency_key: None,
        });
        out.iter()
            .find_map(|a| match a {
                Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(*id),
                _ => None,
            })
            .expect("submitted")
    }

    fn last_launch(&self, id: WorkloadId) -> Option<(AttemptId, String)> {
        self.actions.iter().rev().find_map(|a| match a {
            Action::Launch { attempt, node, .. } if attempt.workload == id => Some((*attempt, node.clone())),
            _ => None,
        })
    }

    fn run(&mut self, a: AttemptId) {
        let result = Ok(LaunchAck { provider_ref: "i-1".into(), adopted: false });
        self.send(Event::LaunchResult { attempt: a, result });
        self.send(Event::Status { attempt: a, status: AttemptStatus::Running });
    }

    fn end(&mut self, a: AttemptId, end: ProviderEnd, tail: &[&str]) {
        self.send(Event::Status { attempt: a, status: AttemptStatus::Ended(end.clone()) });
        let outputs = if end == (ProviderEnd::Exited { code: 0 }) {
            OutputsResult::Collected { count: 0 }
        } else {
            OutputsResult::Skipped
        };
        let log_tail = tail.iter().map(|s| s.to_string()).collect();
        self.send(Event::Collected { attempt: a, end, log_tail, outputs });
    }

    /// Places one job, runs it for an hour and fails it with Xid 79.
    /// Returns the node it failed on.
    fn fail_once(&mut self, id: WorkloadId) -> String {
        let (a, node) = self.last_launch(id).expect("launched");
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
    let mut w = World::new(fleet(), PlacementPolicy::CheapestFirst);
    let id = w.submit(1);
    assert_eq!(w.fail_once(id), "c1");
    w.wait_backoff();
    let (a, node) = w.last_launch(id).unwrap();
    assert_eq!((a.n, node.as_str()), (2, "c1"), "price only, no memory: back to the cheapest offer");
    // And the next workload lands there too.
    assert_eq!(w.fail_once(id), "c1");
    let other = w.submit(1);
    assert_eq!(w.last_launch(other).unwrap().1, "c1");
}

#[test]
fn blocklist_moves_the_workload_but_forgets_for_the_next_one() {
    let mut w = World::new(fleet(), PlacementPolicy::Blocklist);
    let id = w.submit(1);
    assert_eq!(w.fail_once(id), "c1");
    w.wait_backoff();
    assert_eq!(w.last_launch(id).unwrap().1, "c2", "the failed node is excluded for this workload");
    let other = w.submit(1);
    assert_eq!(w.last_launch(other).unwrap().1, "c1", "no fleet-wide memory");
}

#[test]
fn canopy_avoids_a_node_after_it_fails_and_quarantines_a_lemon() {
    let mut w = World::new(fleet(), PlacementPolicy::HealthAware);
    let id = w.submit(1);
    assert_eq!(w.fail_once(id), "c1");
    w.wait_backoff();
    let (a, retry_node) = w.last_launch(id).unwrap();
    assert_ne!(retry_node, "c1", "the retry goes elsewhere");
    w.run(a);
    // A new workload prefers a node with a clean record, even a dearer one.
    let b = w.submit(1);
    let (ab, node) = w.last_launch(b).unwrap();
    assert_ne!(node, "c1");
    w.run(ab);
    // Fill the other nodes; the next one only has c1 left, and may use it.
    for _ in 0..2 {
        let x = w.submit(1);
        let (ax, _) = w.last_launch(x).unwrap();
        w.run(ax);
    }
    let e = w.submit(1);
    assert_eq!(w.fail_once(e), "c1");
    // Two failures in a row: c1 is quarantined. New work waits rather than use it.
    w.wait_backoff();
    let f = w.submit(1);
    assert!(w.last_launch(f).is_none(), "nothing placed on the quarantined node");
    assert!(w.core.is_blocked(f));
    assert!(w.core.health().view(Millis(w.now)).node("c1").quarantined);
}

#[test]
fn random_is_seeded_and_spreads_over_feasible_pools() {
    let pick = |seed: u64| {
        let mut w = World::new(fleet(), PlacementPolicy::Random { seed });
        let ids: Vec<WorkloadId> = (0..5).map(|_| w.submit(1)).collect();
        ids.into_iter().map(|id| w.last_launch(id).map(|(_, n)| n)).collect::<Vec<_>>()
    };
    assert_eq!(pick(7), pick(7));
    let all: Vec<Option<String>> = (0..8).flat_map(pick).collect();
    assert!(all.iter().flatten().any(|n| n.starts_with('d')), "random reaches the dear pool: {all:?}");
    assert!(all.iter().flatten().any(|n| n.starts_with('c')));
}
