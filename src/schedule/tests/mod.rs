//! Unit tests for the scheduler on small hand-built fleets.

mod explain;
mod factors;
mod filters;
mod gang;
mod nodes;
mod prices;

use super::*;
use crate::accel::{ComputeCapability, Family, Interconnect, Vendor};
use crate::fleet::{
    Accelerator, Fleet, FleetBuilder, Free, Lifecycle, NodeDef, NodeState, PoolDef, ProviderKind, Shape,
};
use crate::health::{Health, HealthView};
use crate::units::Glob;
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn acc(vendor: Vendor, model: &str, family: Family, cc: (u8, u8), mem: f64) -> Accelerator {
    Accelerator {
        vendor,
        model: model.into(),
        family,
        compute_capability: ComputeCapability::new(cc.0, cc.1),
        memory_gb: mem,
        throughput: None,
    }
}

pub(super) fn h100() -> Accelerator {
    acc(Vendor::Nvidia, "H100-SXM", Family::Hopper, (9, 0), 80.0)
}
pub(super) fn l4() -> Accelerator {
    acc(Vendor::Nvidia, "L4", Family::Ada, (8, 9), 24.0)
}
pub(super) fn l40s() -> Accelerator {
    acc(Vendor::Nvidia, "L40S", Family::Ada, (8, 9), 48.0)
}
pub(super) fn a100() -> Accelerator {
    acc(Vendor::Nvidia, "A100-SXM4", Family::Ampere, (8, 0), 40.0)
}

pub(super) fn gpus(a: Accelerator, n: u32, ic: Interconnect, cpu: f64, mem: f64, disk: f64) -> Shape {
    Shape {
        accelerator: Some(a),
        gpus_per_node: n,
        interconnect: ic,
        cpu_cores: cpu,
        memory_gb: mem,
        disk_gb: disk,
        fabric: None,
    }
}

pub(super) fn cpus(cpu: f64, mem: f64, disk: f64) -> Shape {
    Shape {
        accelerator: None,
        gpus_per_node: 0,
        interconnect: Interconnect::Pcie,
        cpu_cores: cpu,
        memory_gb: mem,
        disk_gb: disk,
        fabric: None,
    }
}

pub(super) fn pool(name: &str, region: &str, shape: Shape, price: f64) -> PoolDef {
    PoolDef {
        name: name.into(),
        region: region.into(),
        shape,
        price_per_hour: price,
        startup: Duration::from_secs(60),
        capabilities: vec![],
        compliance: vec![],
        reserved: false,
        interruptible: false,
        lifecycle: Lifecycle::Vm,
        lend_limit_gpus: None,
    }
}

pub(super) fn node(name: &str) -> NodeDef {
    NodeDef::idle(name)
}

pub(super) fn used(name: &str, gpus: u32, canopy: u32) -> NodeDef {
    NodeDef { used: Free { gpus, ..Free::default() }, canopy_gpus: canopy, ..NodeDef::idle(name) }
}

pub(super) fn in_state(name: &str, state: NodeState) -> NodeDef {
    NodeDef { state, ..NodeDef::idle(name) }
}

/// Ten nodes in six pools across three providers:
///
/// | pool                        | region     | shape              | $/h  | nodes |
/// |-----------------------------|------------|--------------------|------|-------|
/// | cloud-a/us-east-h100        | us-east    | 8× H100 80 nvlink  | 32   | h100-1 idle, h100-2 6 used |
/// | cloud-a/us-east-l4          | us-east    | 1× L4 24           | 0.8  | l4-1, l4-2 cordoned |
/// | cloud-a/eu-west-a100-spot   | eu-west    | 8× A100 40 nvlink  | 8    | a100-1 (interruptible) |
/// | onprem/rack-a               | onprem-a   | 4× L40S 48 pcie    | 2    | r1 (2 used by Canopy), r2 down (reserved, hipaa) |
/// | onprem/cpu                  | onprem-a   | 64 cores 256 GB    | 1    | c1, c2 |
/// | lab/gdpr-l40s               | eu-central | 1× L40S 48         | 1.2  | g1 (gdpr) |
pub(super) fn demo_builder() -> FleetBuilder {
    let mut b = FleetBuilder::new();
    b.provider("cloud-a", ProviderKind::Cloud, None).unwrap();
    let mut p =
        pool("us-east-h100", "us-east", gpus(h100(), 8, Interconnect::Nvlink, 128.0, 1024.0, 4000.0), 32.0);
    p.capabilities = vec!["long-training".into()];
    p.startup = Duration::from_secs(300);
    b.pool(p, vec![node("h100-1"), used("h100-2", 6, 0)]).unwrap();
    let p = pool("us-east-l4", "us-east", gpus(l4(), 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 0.8);
    b.pool(p, vec![node("l4-1"), in_state("l4-2", NodeState::Cordoned)]).unwrap();
    let mut p =
        pool("eu-west-a100-spot", "eu-west", gpus(a100(), 8, Interconnect::Nvlink, 96.0, 768.0, 2000.0), 8.0);
    p.interruptible = true;
    b.pool(p, vec![node("a100-1")]).unwrap();
    b.provider("onprem", ProviderKind::Slurm, Some(16)).unwrap();
    let mut p = pool("rack-a", "onprem-a", gpus(l40s(), 4, Interconnect::Pcie, 48.0, 256.0, 2000.0), 2.0);
    p.reserved = true;
    p.compliance = vec!["hipaa".into()];
    p.lifecycle = Lifecycle::Job;
    b.pool(p, vec![used("r1", 2, 2), in_state("r2", NodeState::Down)]).unwrap();
    b.pool(pool("cpu", "onprem-a", cpus(64.0, 256.0, 1000.0), 1.0), vec![node("c1"), node("c2")]).unwrap();
    b.provider("lab", ProviderKind::Kubernetes, None).unwrap();
    let mut p = pool("gdpr-l40s", "eu-central", gpus(l40s(), 1, Interconnect::Pcie, 16.0, 64.0, 500.0), 1.2);
    p.compliance = vec!["gdpr".into()];
    b.pool(p, vec![node("g1")]).unwrap();
    b
}

pub(super) fn demo() -> Fleet {
    demo_builder().build()
}

pub(super) fn gpu_req(n: u32) -> Requirements {
    Requirements { gpus: n, cpu_cores: 1.0, memory_gb: 1.0, ..Requirements::default() }
}

pub(super) fn cpu_req() -> Requirements {
    Requirements { cpu_cores: 1.0, memory_gb: 1.0, ..Requirements::default() }
}

pub(super) fn globs(xs: &[&str]) -> Vec<Glob> {
    xs.iter().map(|x| Glob::new(*x)).collect()
}

/// Every pool's verdict: the chosen node, or the filter that ruled it out
/// (from the fast path when something fits, else from the explanation's
/// full scan so unschedulable requests can be tested the same way).
pub(super) fn verdicts(
    fleet: &Fleet,
    health: &HealthView,
    req: &Requirements,
) -> BTreeMap<String, Result<String, Filter>> {
    let snap = Snapshot::new(fleet, health);
    let policy = Policy { top_k: 1000, ..Policy::default() };
    let mut out = BTreeMap::new();
    match place(req, &snap, &policy) {
        Decision::Placed(p) => {
            for c in p.candidates {
                out.insert(c.pool, Ok(c.node));
            }
            for r in p.considered.ruled_out {
                assert!(
                    out.insert(snap.label(r.pool).to_string(), Err(r.filter)).is_none(),
                    "pool judged twice"
                );
            }
        }
        Decision::Unschedulable(_) => {
            let judge = check::PoolJudge::new(req, &snap);
            for i in 0..fleet.pools.len() {
                let p = crate::fleet::PoolIdx(i as u32);
                let mut first = None;
                let _ = judge.checks(p, &mut |f| {
                    first = Some(f);
                    std::ops::ControlFlow::Break(())
                });
                let f = first.unwrap_or_else(|| {
                    let nodes = fleet.pool_nodes(p);
                    let base = fleet.pool(p).nodes.start as usize;
                    nodes
                        .iter()
                        .enumerate()
                        .filter_map(|(j, n)| check::node_failure(req, n, snap.nodes[base + j].quarantined))
                        .next()
                        .unwrap()
                });
                out.insert(snap.label(p).to_string(), Err(f));
            }
        }
    }
    assert_eq!(out.len(), fleet.pools.len());
    out
}

pub(super) fn verdict(fleet: &Fleet, req: &Requirements, label: &str) -> Result<String, Filter> {
    verdicts(fleet, &HealthView::default(), req).remove(label).unwrap()
}

pub(super) fn placed(fleet: &Fleet, health: &HealthView, req: &Requirements, policy: &Policy) -> Placement {
    match place(req, &Snapshot::new(fleet, health), policy) {
        Decision::Placed(p) => p,
        Decision::Unschedulable(e) => panic!("expected a placement, got:\n{e}"),
    }
}

pub(super) fn unschedulable(fleet: &Fleet, health: &HealthView, req: &Requirements) -> Explanation {
    match place(req, &Snapshot::new(fleet, health), &Policy::default()) {
        Decision::Placed(p) => panic!("expected unschedulable, got {:?}", p.candidates[0]),
        Decision::Unschedulable(e) => e,
    }
}

pub(super) fn health_with(f: impl FnOnce(&mut HealthView)) -> HealthView {
    let mut h = HealthView::default();
    f(&mut h);
    h
}

pub(super) fn bad(score: f64) -> Health {
    Health::new(score, 0.5, 20)
}
