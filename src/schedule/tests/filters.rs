//! Pool-level hard filters, one test each, on the demo fleet.

use super::*;

#[test]
fn providers_are_an_allow_list_of_globs() {
    let req = Requirements { providers: globs(&["on*"]), ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::Provider));
    assert_eq!(v["lab/gdpr-l40s"], Err(Filter::Provider));
    assert_eq!(v["onprem/rack-a"], Ok("r1".into()));
}

#[test]
fn regions_are_an_allow_list_of_globs() {
    let req = Requirements { regions: globs(&["eu-*"]), interruptible: true, ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::Region));
    assert_eq!(v["onprem/rack-a"], Err(Filter::Region));
    assert!(v["cloud-a/eu-west-a100-spot"].is_ok());
    assert!(v["lab/gdpr-l40s"].is_ok());
}

#[test]
fn every_compliance_tag_is_required() {
    let req = Requirements { compliance: vec!["gdpr".into()], ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["lab/gdpr-l40s"], Ok("g1".into()));
    assert_eq!(v["onprem/rack-a"], Err(Filter::Compliance));
    let req = Requirements { compliance: vec!["gdpr".into(), "hipaa".into()], ..gpu_req(1) };
    let e = unschedulable(&demo(), &HealthView::default(), &req);
    assert_eq!(e.reasons.len(), 1);
    assert_eq!(e.reasons[0].filter, Filter::Compliance);
}

#[test]
fn interruptible_capacity_needs_consent() {
    let req =
        Requirements { gpu_memory_gb: crate::spec::GbRange { min: Some(40.0), max: None }, ..gpu_req(8) };
    assert_eq!(verdict(&demo(), &req, "cloud-a/eu-west-a100-spot"), Err(Filter::Interruptible));
    let req = Requirements { interruptible: true, ..req };
    assert_eq!(verdict(&demo(), &req, "cloud-a/eu-west-a100-spot"), Ok("a100-1".into()));
}

#[test]
fn capability_tags_are_required() {
    let req = Requirements { capabilities: vec!["long-training".into()], ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-2".into()));
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::Capability));
}

/// A workload with `runtime.image` fits only pools that run container
/// images; the others are ruled out by the `image` filter, in its words.
#[test]
fn an_image_needs_a_pool_that_runs_container_images() {
    let mut b = FleetBuilder::new();
    b.provider("k8s", ProviderKind::Kubernetes, None).unwrap();
    let mut p = pool("cpu", "eu-west", cpus(64.0, 256.0, 1000.0), 3.0);
    p.capabilities = vec![crate::fleet::CONTAINER_TAG.into()];
    b.pool(p, vec![node("k1")]).unwrap();
    b.provider("slurm-a", ProviderKind::Slurm, None).unwrap();
    b.pool(pool("cpu", "eu-west", cpus(64.0, 256.0, 1000.0), 1.0), vec![node("s1"), node("s2")]).unwrap();
    let fleet = b.build();
    let image = Requirements { image: true, ..cpu_req() };
    let v = verdicts(&fleet, &HealthView::default(), &image);
    assert_eq!(v["k8s/cpu"], Ok("k1".into()));
    assert_eq!(v["slurm-a/cpu"], Err(Filter::Image));
    assert_eq!(Filter::Image.reason(&image), "does not run container images");
    // Without an image the cheaper Slurm pool is fine.
    assert_eq!(verdict(&fleet, &cpu_req(), "slurm-a/cpu"), Ok("s1".into()));
    // No pool that runs images: every node counted under the filter.
    let mut b = FleetBuilder::new();
    b.provider("slurm-a", ProviderKind::Slurm, None).unwrap();
    b.pool(pool("cpu", "eu-west", cpus(64.0, 256.0, 1000.0), 1.0), vec![node("s1"), node("s2")]).unwrap();
    let e = unschedulable(&b.build(), &HealthView::default(), &image);
    assert_eq!((e.reasons.len(), e.reasons[0].filter, e.reasons[0].nodes), (1, Filter::Image, 2));
    assert!(e.to_string().contains("2 does not run container images"), "{e}");
}

/// A pool whose container engine cannot enforce memory limits (rootless
/// on cgroup v1) is ruled out for image work with a memory limit, and says
/// why; plain work still runs there.
#[test]
fn an_image_needs_an_engine_that_enforces_its_memory_limit() {
    let mut b = FleetBuilder::new();
    b.provider("local", ProviderKind::Local, None).unwrap();
    let mut p = pool("host", "local", cpus(8.0, 32.0, 100.0), 0.0);
    p.capabilities =
        vec![crate::fleet::CONTAINER_TAG.into(), crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG.into()];
    b.pool(p, vec![node("h")]).unwrap();
    let fleet = b.build();
    let image = Requirements { image: true, ..cpu_req() };
    assert_eq!(verdict(&fleet, &image, "local/host"), Err(Filter::ImageMemory));
    assert_eq!(
        Filter::ImageMemory.reason(&image),
        "cannot hold a container to its memory limit (rootless engine on cgroup v1)"
    );
    assert_eq!(verdict(&fleet, &cpu_req(), "local/host"), Ok("h".into()));
}

#[test]
fn all_gpus_must_be_on_one_node() {
    let v = verdicts(&demo(), &HealthView::default(), &gpu_req(4));
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::GpuCount));
    assert_eq!(v["onprem/cpu"], Err(Filter::GpuCount));
    assert_eq!(v["lab/gdpr-l40s"], Err(Filter::GpuCount));
    // r1 has 2 of 4 GPUs in use, r2 is down.
    assert_eq!(v["onprem/rack-a"], Err(Filter::FreeGpus));
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-1".into()));
    let req = Requirements { interruptible: true, ..gpu_req(9) };
    let e = unschedulable(&demo(), &HealthView::default(), &req);
    assert_eq!(e.reasons[0].filter, Filter::GpuCount);
    assert_eq!(e.reasons[0].nodes, 10);
}

#[test]
fn vendor_family_and_compute_capability() {
    let req = Requirements { vendor: Some(Vendor::Amd), interruptible: true, ..gpu_req(1) };
    let e = unschedulable(&demo(), &HealthView::default(), &req);
    assert!(e.reasons.iter().any(|r| r.filter == Filter::Vendor && r.nodes == 8), "{e}");
    // Accelerator requirements do not apply to CPU work.
    let req = Requirements { vendor: Some(Vendor::Amd), ..cpu_req() };
    assert_eq!(verdict(&demo(), &req, "onprem/cpu"), Ok("c1".into()));

    let req = Requirements { families: vec![Family::Ada], interruptible: true, ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["cloud-a/us-east-h100"], Err(Filter::Family));
    assert_eq!(v["cloud-a/eu-west-a100-spot"], Err(Filter::Family));
    assert!(v["cloud-a/us-east-l4"].is_ok());

    let req = Requirements { min_compute_capability: Some(ComputeCapability::new(9, 0)), ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::ComputeCapability));
    assert!(v["cloud-a/us-east-h100"].is_ok());
}

#[test]
fn gpu_memory_range_and_retry_minimum() {
    use crate::spec::GbRange;
    let at_least = |m| Requirements { gpu_memory_gb: GbRange { min: Some(m), max: None }, ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &at_least(48.0));
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::GpuMemory));
    assert!(v["lab/gdpr-l40s"].is_ok(), "the minimum is inclusive");

    let req = Requirements { gpu_memory_gb: GbRange { min: None, max: Some(48.0) }, ..gpu_req(1) };
    assert_eq!(verdict(&demo(), &req, "cloud-a/us-east-h100"), Err(Filter::GpuMemory));

    // A gpu-oom retry from a 48 GB card needs strictly more.
    let req = Requirements { min_gpu_memory_exclusive: Some(48.0), ..gpu_req(1) };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["lab/gdpr-l40s"], Err(Filter::GpuMemory));
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::GpuMemory));
    assert!(v["cloud-a/us-east-h100"].is_ok());
}

#[test]
fn interconnect_applies_to_multi_gpu_work() {
    let nvlink =
        |n| Requirements { interconnect: Some(Interconnect::Nvlink), interruptible: true, ..gpu_req(n) };
    let v = verdicts(&demo(), &HealthView::default(), &nvlink(2));
    assert_eq!(v["onprem/rack-a"], Err(Filter::Interconnect));
    assert!(v["cloud-a/us-east-h100"].is_ok());
    assert!(v["cloud-a/eu-west-a100-spot"].is_ok());
    // One GPU has no link to use; PCIe is met by every node.
    assert!(verdict(&demo(), &nvlink(1), "cloud-a/us-east-l4").is_ok());
    let pcie = Requirements { interconnect: Some(Interconnect::Pcie), ..gpu_req(2) };
    assert!(verdict(&demo(), &pcie, "cloud-a/us-east-h100").is_ok());
}

#[test]
fn quarantine_at_every_level() {
    let req = gpu_req(1);
    let h = health_with(|h| {
        h.providers.insert("lab".into(), Health::UNKNOWN.quarantined());
        h.pools.insert("cloud-a/us-east-l4".into(), Health::UNKNOWN.quarantined());
        h.nodes.insert("h100-2".into(), Health::UNKNOWN.quarantined());
    });
    let v = verdicts(&demo(), &h, &req);
    assert_eq!(v["lab/gdpr-l40s"], Err(Filter::ProviderQuarantined));
    assert_eq!(v["cloud-a/us-east-l4"], Err(Filter::PoolQuarantined));
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-1".into()));
    let h = health_with(|h| {
        h.nodes.insert("r1".into(), Health::UNKNOWN.quarantined());
    });
    let v = verdicts(&demo(), &h, &req);
    // r1 quarantined and r2 down: no ready node; on a tie the earlier filter names it.
    assert_eq!(v["onprem/rack-a"], Err(Filter::Down));
}

#[test]
fn retry_exclusions() {
    let req = Requirements {
        exclude_pools: vec!["lab/gdpr-l40s".into()],
        exclude_nodes: vec!["h100-2".into()],
        ..gpu_req(1)
    };
    let v = verdicts(&demo(), &HealthView::default(), &req);
    assert_eq!(v["lab/gdpr-l40s"], Err(Filter::PoolExcluded));
    assert_eq!(v["cloud-a/us-east-h100"], Ok("h100-1".into()));
    let req = Requirements { exclude_nodes: vec!["g1".into()], ..req };
    let req = Requirements { exclude_pools: vec![], ..req };
    assert_eq!(verdict(&demo(), &req, "lab/gdpr-l40s"), Err(Filter::NodeExcluded));
}

#[test]
fn lend_limits_cap_the_gpus_canopy_holds() {
    // onprem lends 16 GPUs and Canopy holds 2 (on r1).
    let req = Requirements { providers: globs(&["onprem"]), ..gpu_req(2) };
    assert_eq!(verdict(&demo(), &req, "onprem/rack-a"), Ok("r1".into()));

    let mut b = FleetBuilder::new();
    b.provider("onprem", ProviderKind::Slurm, Some(3)).unwrap();
    let mut p = pool("rack-a", "onprem-a", gpus(l40s(), 4, Interconnect::Pcie, 48.0, 256.0, 2000.0), 2.0);
    b.pool(p.clone(), vec![used("r1", 2, 2)]).unwrap();
    p.name = "rack-b".into();
    p.lend_limit_gpus = Some(2);
    b.pool(p, vec![used("s1", 1, 1)]).unwrap();
    b.pool(pool("cpu", "onprem-a", cpus(8.0, 8.0, 8.0), 1.0), vec![node("c1")]).unwrap();
    let f = b.build();
    // 3 held + 1 > 3 for the provider; rack-b's own cap (1 + 1 ≤ 2) is fine.
    let v = verdicts(&f, &HealthView::default(), &gpu_req(1));
    assert_eq!(v["onprem/rack-a"], Err(Filter::ProviderLendLimit));
    assert_eq!(v["onprem/rack-b"], Err(Filter::ProviderLendLimit));
    let v = verdicts(&f, &HealthView::default(), &gpu_req(2));
    assert_eq!(v["onprem/rack-b"], Err(Filter::PoolLendLimit));
    // Work without GPUs does not count against GPU lend limits.
    assert!(verdict(&f, &cpu_req(), "onprem/rack-a").is_ok());
}

#[test]
fn max_hourly_price_uses_the_workloads_share() {
    // h100: 1 of 8 GPUs of a $32 node = $4/h.
    let req = Requirements { max_hourly_usd: Some(3.99), ..gpu_req(1) };
    assert_eq!(verdict(&demo(), &req, "cloud-a/us-east-h100"), Err(Filter::HourlyPrice));
    let req = Requirements { max_hourly_usd: Some(4.0), ..gpu_req(1) };
    assert!(verdict(&demo(), &req, "cloud-a/us-east-h100").is_ok());
}

#[test]
fn estimated_cost_against_the_cap() {
    let hours = |h: u64| Some(Duration::from_secs(h * 3600));
    // l4: $0.80/h.
    let req = Requirements { max_cost_usd: Some(5.0), expected_runtime: hours(10), ..gpu_req(1) };
    assert_eq!(verdict(&demo(), &req, "cloud-a/us-east-l4"), Err(Filter::Cost));
    // The hard runtime limit wins over the expected one.
    let req = Requirements { max_runtime: hours(6), ..req };
    assert!(verdict(&demo(), &req, "cloud-a/us-east-l4").is_ok());
    // Without any runtime the cost cannot be estimated, so it does not exclude.
    let req = Requirements { max_cost_usd: Some(0.01), ..gpu_req(1) };
    assert!(verdict(&demo(), &req, "cloud-a/us-east-l4").is_ok());
}

#[test]
fn from_spec_normalizes() {
    let spec: crate::spec::Spec = serde_json::from_value(serde_json::json!({
        "name": "t",
        "expected_runtime": "2h",
        "runtime": { "command": ["x"] },
        "resources": { "gpus": 2, "gpu_memory_gb": 40, "accelerator": { "vendor": "nvidia", "family": ["hopper"] }, "cpu_cores": 8 },
        "constraints": { "regions": ["eu-*"], "capabilities": ["b", "a", "a"], "max_runtime": "4h" },
        "preferences": { "optimize": "speed", "reserved_first": true },
        "inputs": [{ "name": "d", "source": "s3://x", "region": "eu-west", "size_gb": 10 }]
    }))
    .unwrap();
    let r = Requirements::from_spec(&spec);
    assert_eq!(r.gpus, 2);
    assert_eq!(r.gpu_memory_gb.min, Some(40.0));
    assert_eq!(r.vendor, Some(Vendor::Nvidia));
    assert_eq!(r.families, vec![Family::Hopper]);
    assert_eq!(r.cpu_cores, 8.0);
    assert_eq!(r.memory_gb, 1.0);
    assert_eq!(r.capabilities, vec!["a".to_string(), "b".to_string()]);
    assert_eq!(r.cost_runtime_hours(), Some(4.0));
    assert_eq!(r.expected_runtime, Some(Duration::from_secs(7200)));
    assert_eq!(r.optimize, crate::spec::Optimize::Speed);
    assert!(r.reserved_first && r.exclude_nodes.is_empty() && r.min_gpu_memory_exclusive.is_none());
    assert_eq!(r.inputs, vec![InputSite { region: Some("eu-west".into()), size_gb: Some(10.0) }]);
}
