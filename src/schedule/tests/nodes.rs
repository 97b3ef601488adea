//! Node-level filters and the choice of node within a pool.

use super::*;

#[test]
fn node_shape_before_free_capacity() {
    let req = Requirements { cpu_cores: 100.0, ..cpu_req() };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["onprem/cpu"], Err(Filter::CpuShape));
    // CPU work goes where the fewest GPUs are left idle.
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-2".into()));
    let req = Requirements { memory_gb: 300.0, ..cpu_req() };
    assert_eq!(verdict(&demo(), &req, "onprem/cpu"), Err(Filter::MemoryShape));
    let req = Requirements { disk_gb: 1500.0, ..cpu_req() };
    assert_eq!(verdict(&demo(), &req, "onprem/cpu"), Err(Filter::DiskShape));
}

#[test]
fn free_cpu_memory_and_disk_on_the_node() {
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let busy = |name: &str, cpu, mem, disk| NodeDef {
        used: Free { gpus: 0, cpu_cores: cpu, memory_gb: mem, disk_gb: disk },
        ..NodeDef::idle(name)
    };
    b.pool(pool("cpu", "r", cpus(16.0, 64.0, 100.0), 1.0), vec![busy("n1", 14.0, 0.0, 0.0)]).unwrap();
    b.pool(pool("mem", "r", cpus(16.0, 64.0, 100.0), 1.0), vec![busy("n2", 0.0, 60.0, 0.0)]).unwrap();
    b.pool(pool("disk", "r", cpus(16.0, 64.0, 100.0), 1.0), vec![busy("n3", 0.0, 0.0, 90.0)]).unwrap();
    let f = b.build();
    let req = Requirements { cpu_cores: 4.0, memory_gb: 8.0, disk_gb: 20.0, ..cpu_req() };
    let e = unschedulable(&f, &HealthView::default(), &req);
    let got: Vec<_> = e.reasons.iter().map(|r| (r.filter, r.nodes)).collect();
    assert_eq!(got, vec![(Filter::FreeCpu, 1), (Filter::FreeMemory, 1), (Filter::FreeDisk, 1)]);
    assert_eq!(e.exhausted.len(), 3);
}

#[test]
fn only_ready_nodes_are_used() {
    // l4-2 is cordoned, r2 is down.
    let req = Requirements { providers: globs(&["cloud-a"]), ..gpu_req(1) };
    assert_eq!(verdict(&demo(), &req, "cloud-a/us-east-l4"), Ok("l4-1".into()));
    // With l4-1 excluded the pool has no usable node; the fast path names
    // the reason of its best ready node.
    let req = Requirements { exclude_nodes: vec!["l4-1".into()], ..req };
    assert_eq!(verdict(&demo(), &req, "cloud-a/us-east-l4"), Err(Filter::NodeExcluded));

    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let shape = cpus(4.0, 4.0, 4.0);
    b.pool(
        pool("x", "r", shape, 1.0),
        vec![
            in_state("a", NodeState::Cordoned),
            in_state("b", NodeState::Draining),
            in_state("c", NodeState::Down),
            in_state("d", NodeState::Down),
        ],
    )
    .unwrap();
    let e = unschedulable(&b.build(), &HealthView::default(), &cpu_req());
    assert_eq!(e.to_string().lines().next().unwrap(), "0/4 nodes fit: 2 down, 1 cordoned, 1 draining");
}

#[test]
fn best_fit_node_within_a_pool() {
    // h100-2 has 2 free GPUs, h100-1 all 8: two GPUs go to h100-2, three to h100-1.
    let only_h100 = |n| Requirements { capabilities: vec!["long-training".into()], ..gpu_req(n) };
    assert_eq!(verdict(&demo(), &only_h100(2), "cloud-a/us-east-h100"), Ok("h100-2".into()));
    assert_eq!(verdict(&demo(), &only_h100(3), "cloud-a/us-east-h100"), Ok("h100-1".into()));
    // Health comes before fit.
    let h = health_with(|h| {
        h.nodes.insert("h100-2".into(), bad(0.5));
    });
    let v = verdicts(&demo(), &h, &only_h100(2));
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-1".into()));
}

#[test]
fn picks_skip_nodes_with_nothing_free_but_stay_exact() {
    // n1 has a free GPU but no free CPU or memory; n2 is the next best.
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let full_cpu = NodeDef {
        used: Free { gpus: 3, cpu_cores: 16.0, memory_gb: 64.0, disk_gb: 0.0 },
        ..NodeDef::idle("n1")
    };
    let half = NodeDef {
        used: Free { gpus: 2, cpu_cores: 8.0, memory_gb: 32.0, disk_gb: 0.0 },
        ..NodeDef::idle("n2")
    };
    b.pool(pool("x", "r", gpus(l4(), 4, Interconnect::Pcie, 16.0, 64.0, 100.0), 4.0), vec![full_cpu, half])
        .unwrap();
    let f = b.build();
    assert_eq!(verdict(&f, &gpu_req(1), "p/x"), Ok("n2".into()));
    // Work that asks for no CPU and no memory can still use n1 (the tighter fit).
    let nothing = Requirements { gpus: 1, ..Requirements::default() };
    assert_eq!(verdict(&f, &nothing, "p/x"), Ok("n1".into()));
    // When nothing fits, the pool is ruled out by its best-ranked node's shortfall.
    let big = Requirements { cpu_cores: 12.0, ..gpu_req(1) };
    let v = verdicts(&f, &HealthView::default(), &Requirements { providers: globs(&["p"]), ..big });
    assert_eq!(v["p/x"], Err(Filter::FreeCpu));
}

/// A node that failed twice in its first seven running hours (a lemon)
/// stays behind a sound node whose one fault came after four hundred
/// clean hours, although the lemon's moving-average score has recovered
/// over its last few short runs and is now the higher: the order follows
/// each node's faults per running hour, not its latest outcomes.
#[test]
fn a_node_that_fails_often_for_its_hours_is_used_last() {
    use crate::engine::model::{HealthObservation, Millis};
    use crate::failure::FailureClass;
    use crate::health::HealthTracker;

    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let shape = gpus(l40s(), 4, Interconnect::Pcie, 32.0, 128.0, 500.0);
    b.pool(pool("gpu", "r", shape, 2.0), vec![node("lemon"), node("sound")]).unwrap();
    let fleet = b.build();

    let mut t = HealthTracker::default();
    let mut at = 0;
    let mut run = |t: &mut HealthTracker, node: &str, hours: f64, class: Option<FailureClass>| {
        at += (hours * 3_600_000.0) as i64;
        t.observe(&HealthObservation {
            at: Millis(at),
            provider: "p".into(),
            pool: "p/gpu".into(),
            node: node.into(),
            class,
            ran_s: hours * 3600.0,
            free: false,
            lift: false,
        });
    };
    for _ in 0..50 {
        run(&mut t, "sound", 8.0, None);
    }
    run(&mut t, "sound", 1.0, Some(FailureClass::Node));
    run(&mut t, "sound", 1.0, None);
    for (hours, class) in
        [(2.0, None), (1.0, Some(FailureClass::Node)), (1.0, None), (1.0, Some(FailureClass::Node))]
    {
        run(&mut t, "lemon", hours, class);
    }
    for _ in 0..4 {
        run(&mut t, "lemon", 0.5, None);
    }
    let view = t.view(Millis(at));
    let (lemon, sound) = (view.node("lemon"), view.node("sound"));
    assert!(lemon.score > sound.score, "the lemon's recent runs went well: {lemon:?} vs {sound:?}");
    assert!(!lemon.quarantined && !sound.quarantined);

    let v = verdicts(&fleet, &view, &gpu_req(1));
    assert_eq!(v["p/gpu"], Ok("sound".into()));
    let p = placed(&fleet, &view, &gpu_req(1), &Policy::default());
    assert_eq!(p.candidates[0].node, "sound");

    // When the sound node is taken, the lemon is still used: it is ranked
    // last, not excluded.
    let req = Requirements { exclude_nodes: vec!["sound".into()], ..gpu_req(1) };
    assert_eq!(verdicts(&fleet, &view, &req)["p/gpu"], Ok("lemon".into()));
}
