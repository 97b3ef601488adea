//! Gangs: N nodes together or not at all.

use super::*;
use crate::accel::Fabric;
use crate::fleet::NodeFabric;
use crate::spec::Topology;

fn ib(mut s: Shape, gbps: f64) -> Shape {
    s.fabric = Some(NodeFabric { kind: Fabric::Infiniband, gbps });
    s
}

fn on(name: &str, switch: &str) -> NodeDef {
    NodeDef { switch: Some(switch.into()), ..NodeDef::idle(name) }
}

fn busy_on(name: &str, switch: &str, gpus: u32) -> NodeDef {
    NodeDef { switch: Some(switch.into()), ..used(name, gpus, 0) }
}

fn h100_shape() -> Shape {
    ib(gpus(h100(), 8, Interconnect::Nvlink, 128.0, 1024.0, 4000.0), 400.0)
}

fn gang(n: u32, gpus: u32, topology: Topology) -> Requirements {
    Requirements { nodes: n, topology, ..gpu_req(gpus) }
}

fn placed(d: &Decision) -> &Placement {
    match d {
        Decision::Placed(p) => p,
        Decision::Unschedulable(e) => panic!("unschedulable: {e}"),
    }
}

#[test]
fn a_gang_of_two_lands_behind_one_switch() {
    let mut b = FleetBuilder::new();
    b.provider("cloud-a", ProviderKind::Cloud, None).unwrap();
    let nodes = vec![on("n1", "leaf-1"), busy_on("n2", "leaf-1", 8), on("n3", "leaf-2"), on("n4", "leaf-2")];
    b.pool(pool("h100", "us-east", h100_shape(), 32.0), nodes).unwrap();
    let snap = Snapshot::new(&b.build(), &HealthView::default());
    let d = place(&gang(2, 8, Topology::SameSwitch), &snap, &Policy::default());
    let c = &placed(&d).candidates[0];
    assert_eq!(c.node_names(), vec!["n3", "n4"]);
    assert_eq!(c.node, "n3");
    assert!(c.gang.iter().all(|g| g.pool == "cloud-a/h100"));
    assert_eq!(c.hourly_usd, 64.0, "the gang's total: two whole nodes");
    // The same pool would do without the switch constraint, and it still
    // takes two free nodes.
    let d = place(&gang(2, 8, Topology::SamePool), &snap, &Policy::default());
    assert_eq!(placed(&d).candidates[0].node_indices().len(), 2);
}

#[test]
fn no_set_of_four_fits_says_why() {
    let mut b = FleetBuilder::new();
    b.provider("cloud-a", ProviderKind::Cloud, None).unwrap();
    let nodes = vec![
        on("a1", "leaf-1"),
        on("a2", "leaf-1"),
        on("a3", "leaf-1"),
        on("a4", "leaf-2"),
        NodeDef { state: NodeState::Cordoned, ..on("a5", "leaf-2") },
        busy_on("a6", "leaf-2", 4),
    ];
    b.pool(pool("h100", "us-east", h100_shape(), 32.0), nodes).unwrap();
    let eth = gpus(h100(), 8, Interconnect::Nvlink, 128.0, 1024.0, 4000.0);
    let eth = Shape { fabric: Some(NodeFabric { kind: Fabric::Ethernet, gbps: 100.0 }), ..eth };
    let slow = vec![on("e1", "s"), on("e2", "s"), on("e3", "s"), on("e4", "s")];
    b.pool(pool("h100-eth", "us-east", eth, 30.0), slow).unwrap();
    let snap = Snapshot::new(&b.build(), &HealthView::default());
    let req = Requirements {
        fabric: Some(Fabric::Infiniband),
        fabric_gbps: Some(400.0),
        ..gang(4, 8, Topology::SameSwitch)
    };
    let Decision::Unschedulable(e) = place(&req, &snap, &Policy::default()) else {
        panic!("four nodes behind one switch do not exist");
    };
    let text = e.to_string();
    assert!(
        text.starts_with(
            "0/10 nodes are available for a gang of 4: only 3 nodes with 8 free GPUs in any same-switch domain (cloud-a/h100 switch leaf-1)"
        ),
        "{text}"
    );
    assert!(text.contains("4 no infiniband ≥ 400 Gbit/s between nodes"), "{text}");
    assert!(text.contains("4 fewer than 4 such nodes behind its switch"), "{text}");
    assert!(text.contains("1 cordoned") && text.contains("1 insufficient free GPUs (need 8)"), "{text}");
    assert_eq!(e.reasons.iter().map(|r| r.nodes).sum::<usize>(), 10);
    let g = e.gang.as_ref().unwrap();
    assert_eq!((g.available, g.largest), (4, 3));
    // Three of one switch are enough for a gang of three.
    let three = Requirements { nodes: 3, ..req };
    assert_eq!(
        placed(&place(&three, &snap, &Policy::default())).candidates[0].node_names(),
        ["a1", "a2", "a3"]
    );
}

#[test]
fn the_accelerator_model_is_matched_as_a_word() {
    let snap = Snapshot::new(&demo(), &HealthView::default());
    let req = Requirements { model: Some("A100".into()), interruptible: true, ..gpu_req(1) };
    let d = place(&req, &snap, &Policy::default());
    let c = &placed(&d).candidates;
    assert!(c.iter().all(|c| c.pool == "cloud-a/eu-west-a100-spot"), "{c:?}");
    let req = Requirements { model: Some("A10".into()), ..gpu_req(1) };
    let Decision::Unschedulable(e) = place(&req, &snap, &Policy::default()) else { panic!("no A10 here") };
    assert!(e.to_string().contains("accelerator model is not A10"), "{e}");
}

#[test]
fn same_region_spans_pools_of_one_shape_but_not_in_slurm() {
    let build = |kind| {
        let mut b = FleetBuilder::new();
        b.provider("p", kind, None).unwrap();
        b.pool(pool("x", "r1", h100_shape(), 32.0), vec![node("x1"), node("x2")]).unwrap();
        b.pool(pool("y", "r1", h100_shape(), 30.0), vec![node("y1"), used("y2", 8, 0)]).unwrap();
        b.build()
    };
    let req = gang(3, 8, Topology::SameRegion);
    let snap = Snapshot::new(&build(ProviderKind::Cloud), &HealthView::default());
    let d = place(&req, &snap, &Policy::default());
    let c = &placed(&d).candidates[0];
    let mut names = c.node_names();
    names.sort();
    assert_eq!(names, ["x1", "x2", "y1"]);
    assert_eq!(c.hourly_usd, 32.0 + 32.0 + 30.0);
    let snap = Snapshot::new(&build(ProviderKind::Slurm), &HealthView::default());
    let Decision::Unschedulable(e) = place(&req, &snap, &Policy::default()) else {
        panic!("a Slurm job cannot span partitions")
    };
    assert!(e.to_string().contains("only 2 nodes with 8 free GPUs in any same-region domain"), "{e}");
}

#[test]
fn lend_limits_count_every_node_of_the_gang() {
    let mut b = FleetBuilder::new();
    b.provider("onprem", ProviderKind::Slurm, None).unwrap();
    let mut p = pool("rack", "r", h100_shape(), 10.0);
    p.lend_limit_gpus = Some(16);
    b.pool(p, vec![node("r1"), node("r2"), node("r3")]).unwrap();
    let snap = Snapshot::new(&b.build(), &HealthView::default());
    assert!(matches!(place(&gang(2, 8, Topology::SamePool), &snap, &Policy::default()), Decision::Placed(_)));
    let Decision::Unschedulable(e) = place(&gang(3, 8, Topology::SamePool), &snap, &Policy::default()) else {
        panic!("24 GPUs exceed the pool's lend limit of 16")
    };
    assert!(e.to_string().contains("pool lend limit reached"), "{e}");
    assert!(e.to_string().contains("its lend limit allowed 24 GPUs"), "{e}");
}

#[test]
fn a_waiting_gang_holds_the_switch_closest_to_free() {
    let mut b = FleetBuilder::new();
    b.provider("cloud-a", ProviderKind::Cloud, None).unwrap();
    let nodes = vec![
        on("a1", "leaf-1"),
        busy_on("a2", "leaf-1", 8),
        busy_on("a3", "leaf-1", 8),
        on("b1", "leaf-2"),
        on("b2", "leaf-2"),
        busy_on("b3", "leaf-2", 2),
        NodeDef { state: NodeState::Down, ..on("b4", "leaf-2") },
    ];
    b.pool(pool("h100", "us-east", h100_shape(), 32.0), nodes).unwrap();
    let fleet = b.build();
    let snap = Snapshot::new(&fleet, &HealthView::default());
    let req = gang(3, 8, Topology::SameSwitch);
    assert!(matches!(place(&req, &snap, &Policy::default()), Decision::Unschedulable(_)));
    let hold = gang_hold(&req, &snap).expect("leaf-2 holds three once b3 is free");
    assert_eq!(hold.domain, "cloud-a/h100 switch leaf-2");
    let names: Vec<&str> = hold.nodes.iter().map(|&n| fleet.node(n).name.as_str()).collect();
    assert_eq!(names, ["b1", "b2", "b3"]);
    assert_eq!(hold.fit_now, 2);
    // Four never fit behind one switch while b4 is down.
    assert_eq!(gang_hold(&Requirements { nodes: 4, ..req }, &snap), None);
}

#[test]
fn one_node_work_ignores_fabric_and_switches() {
    let snap = Snapshot::new(&demo(), &HealthView::default());
    let req = Requirements { fabric: Some(Fabric::Infiniband), ..gpu_req(1) };
    assert!(matches!(place(&req, &snap, &Policy::default()), Decision::Placed(_)));
}
