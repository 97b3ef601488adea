//! Explanation text, exact.

use super::*;

/// cloud-a/us-east-h100: 8× H100, n1 2 free, n2 full, n3 cordoned;
/// cloud-a/us-east-l4: 1× L4 ×2; onprem/rack: 4× L40S in onprem-a.
fn tiny() -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("cloud-a", ProviderKind::Cloud, None).unwrap();
    let shape = gpus(h100(), 8, Interconnect::Nvlink, 128.0, 1024.0, 4000.0);
    b.pool(
        pool("us-east-h100", "us-east", shape, 32.0),
        vec![used("n1", 6, 0), used("n2", 8, 0), in_state("n3", NodeState::Cordoned)],
    )
    .unwrap();
    b.pool(
        pool("us-east-l4", "us-east", gpus(l4(), 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 0.8),
        vec![node("l1"), node("l2")],
    )
    .unwrap();
    b.provider("onprem", ProviderKind::Slurm, None).unwrap();
    b.pool(
        pool("rack", "onprem-a", gpus(l40s(), 4, Interconnect::Pcie, 48.0, 256.0, 2000.0), 6.0),
        vec![node("r1")],
    )
    .unwrap();
    b.build()
}

#[test]
fn explanation_reads_like_a_fit_error() {
    let req = Requirements {
        regions: globs(&["us-*"]),
        gpu_memory_gb: crate::spec::GbRange { min: Some(40.0), max: None },
        ..gpu_req(4)
    };
    let e = unschedulable(&tiny(), &HealthView::default(), &req);
    assert_eq!(
        e.to_string(),
        "0/6 nodes fit: 2 fewer than 4 GPUs per node, 2 insufficient free GPUs (need 4), 1 region not in [us-*], 1 cordoned\n\
         exhausted gpus: 2 nodes of the right shape have < 4 free GPUs\n\
         nearest: onprem/rack would fit if regions allowed onprem-a"
    );
    assert_eq!(e.reasons.iter().map(|r| r.nodes).sum::<usize>(), e.total_nodes);
    let near = e.nearest.unwrap();
    assert_eq!(near.failed, vec![Filter::Region]);
}

#[test]
fn nearest_miss_lists_everything_it_would_need() {
    let req = Requirements { regions: globs(&["eu-*"]), max_hourly_usd: Some(1.0), ..gpu_req(2) };
    let e = unschedulable(&tiny(), &HealthView::default(), &req);
    assert_eq!(
        e.to_string(),
        "0/6 nodes fit: 6 region not in [eu-*]\n\
         nearest: onprem/rack would fit if regions allowed onprem-a and max_hourly_usd were ≥ $3.00"
    );
}

#[test]
fn gpu_memory_wording() {
    use crate::spec::GbRange;
    let text = |min, max, excl| {
        let req = Requirements {
            gpu_memory_gb: GbRange { min, max },
            min_gpu_memory_exclusive: excl,
            ..gpu_req(1)
        };
        Filter::GpuMemory.reason(&req)
    };
    assert_eq!(text(Some(24.0), None, None), "gpu memory < 24 GB");
    assert_eq!(text(None, Some(48.0), None), "gpu memory > 48 GB");
    assert_eq!(text(Some(24.0), Some(48.0), None), "gpu memory not in [24, 48] GB");
    assert_eq!(text(Some(24.0), None, Some(40.0)), "gpu memory ≤ 40 GB");
    assert_eq!(text(None, Some(80.0), Some(40.5)), "gpu memory not in (40.5, 80] GB");
}

#[test]
fn an_empty_fleet_explains_itself() {
    let e = unschedulable(&Fleet::default(), &HealthView::default(), &cpu_req());
    assert_eq!(e.to_string(), "0/0 nodes fit: the fleet has no nodes");
    assert!(e.nearest.is_none());
}

#[test]
fn quarantine_and_exclusion_wording() {
    let h = health_with(|h| {
        h.providers.insert("onprem".into(), Health::UNKNOWN.quarantined());
        h.nodes.insert("l1".into(), Health::UNKNOWN.quarantined());
    });
    let req = Requirements {
        exclude_nodes: vec!["l2".into()],
        exclude_pools: vec!["cloud-a/us-east-h100".into()],
        ..gpu_req(1)
    };
    let e = unschedulable(&tiny(), &h, &req);
    assert_eq!(
        e.to_string(),
        "0/6 nodes fit: 3 pool excluded by retry, 1 provider quarantined, 1 node quarantined, 1 node excluded by retry\n\
         nearest: cloud-a/us-east-l4 would fit if a node left quarantine"
    );
}

#[test]
fn filters_are_listed_in_declaration_order() {
    for (i, f) in Filter::ALL.iter().enumerate() {
        assert_eq!(*f as usize, i, "{f}");
    }
}

#[test]
fn nearest_miss_prefers_the_smaller_hardware_gap() {
    // 16 GPUs: the 8-GPU pool misses by less than the 1-GPU or 4-GPU pools.
    let e = unschedulable(&tiny(), &HealthView::default(), &gpu_req(16));
    assert_eq!(e.nearest.unwrap().to_string(), "nearest: cloud-a/us-east-h100 would fit if gpus were ≤ 8");
}
