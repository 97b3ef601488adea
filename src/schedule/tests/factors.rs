//! Scoring factors, ranking and tie-breaks.

use super::*;

fn raw(c: &Candidate, f: Factor) -> Option<f64> {
    c.breakdown.iter().find(|b| b.factor == f).map(|b| b.raw)
}

fn all(fleet: &Fleet, health: &HealthView, req: &Requirements, policy: Policy) -> Vec<Candidate> {
    placed(fleet, health, req, &Policy { top_k: 100, ..policy }).candidates
}

fn by_pool<'a>(cs: &'a [Candidate], label: &str) -> &'a Candidate {
    cs.iter().find(|c| c.pool == label).unwrap()
}

/// Two CPU pools that differ only where `tweak` says.
fn twins(tweak: impl Fn(&mut PoolDef, bool)) -> Fleet {
    let mut b = FleetBuilder::new();
    for (prov, first) in [("p1", true), ("p2", false)] {
        b.provider(prov, ProviderKind::Local, None).unwrap();
        let mut p = pool("x", "r1", cpus(8.0, 32.0, 100.0), 1.0);
        tweak(&mut p, first);
        b.pool(p, vec![node(&format!("{prov}-n"))]).unwrap();
    }
    b.build()
}

#[test]
fn cost_cheapest_feasible_scores_one() {
    let per_hour = Policy { per_work: false, ..Policy::default() };
    let cs = all(&demo(), &HealthView::default(), &gpu_req(1), per_hour);
    let min = cs.iter().map(|c| c.hourly_usd).fold(f64::INFINITY, f64::min);
    assert_eq!(min, 0.5, "a quarter of rack-a's $2 node");
    for c in &cs {
        // Smoothed by a tenth of the cheapest price, whatever the scale.
        let want = (min * 1.1) / (c.hourly_usd + min * 0.1);
        assert!((raw(c, Factor::Cost).unwrap() - want).abs() < 1e-12, "{}", c.pool);
    }
    assert_eq!(raw(by_pool(&cs, "onprem/rack-a"), Factor::Cost), Some(1.0));
}

/// One L4 node at $0.80/h and one L40S node at $1.20/h: the L40S costs
/// 1.5× as much per hour and trains 3.3× as fast (`fleet::throughput`).
fn l4_and_l40s(l40s_throughput: Option<f64>) -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let p = pool("l4", "r1", gpus(l4(), 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 0.8);
    b.pool(p, vec![node("l4-1")]).unwrap();
    let card = Accelerator { throughput: l40s_throughput, ..l40s() };
    let p = pool("l40s", "r1", gpus(card, 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 1.2);
    b.pool(p, vec![node("l40s-1")]).unwrap();
    b.build()
}

#[test]
fn gpu_work_is_priced_per_unit_of_work_and_inference_per_hour() {
    let f = l4_and_l40s(None);
    let h = HealthView::default();
    let cost_only = Policy::for_optimize(crate::spec::Optimize::Cost);
    let train = Requirements { kind: crate::spec::WorkloadKind::Training, ..gpu_req(1) };
    let cs = all(&f, &h, &train, cost_only.clone());
    assert_eq!(cs[0].pool, "p/l40s", "$0.60 per V100-hour beats the L4's $1.33");
    assert_eq!(raw(&cs[0], Factor::Cost), Some(1.0));
    assert_eq!((cs[0].hourly_usd, cs[0].relative_speed), (1.2, 2.0), "the quoted price stays the hourly one");
    let l4 = by_pool(&cs, "p/l4");
    assert_eq!(l4.relative_speed, 0.6);
    // $0.60 against $1.33 a V100-hour: 0.45 apart, as at $6 against $13.3
    // (a fixed $0.10 smoothing made it 0.49 here).
    let want = (0.6 * 1.1) / (0.8 / 0.6 + 0.06);
    assert!((raw(l4, Factor::Cost).unwrap() - want).abs() < 1e-12);

    // A service's hours do not shrink on a faster card: per hour.
    let serve = Requirements { kind: crate::spec::WorkloadKind::Inference, ..gpu_req(1) };
    let cs = all(&f, &h, &serve, cost_only.clone());
    assert_eq!((cs[0].pool.as_str(), cs[0].relative_speed), ("p/l4", 1.0));
    // Nor does a policy that prices per hour (cheapest-first's).
    let cs = all(&f, &h, &train, Policy { per_work: false, ..cost_only.clone() });
    assert_eq!(cs[0].pool, "p/l4");

    // A throughput the fleet states wins over the table's.
    let cs = all(&l4_and_l40s(Some(0.5)), &h, &train, cost_only);
    assert_eq!((cs[0].pool.as_str(), by_pool(&cs, "p/l40s").relative_speed), ("p/l4", 0.5));
}

#[test]
fn health_multiplies_provider_pool_and_node() {
    let h = health_with(|h| {
        h.providers.insert("lab".into(), bad(0.8));
        h.pools.insert("lab/gdpr-l40s".into(), bad(0.5));
        h.nodes.insert("g1".into(), bad(0.5));
    });
    let cs = all(&demo(), &h, &gpu_req(1), Policy::default());
    assert!((raw(by_pool(&cs, "lab/gdpr-l40s"), Factor::Health).unwrap() - 0.2).abs() < 1e-12);
    assert_eq!(raw(by_pool(&cs, "cloud-a/us-east-l4"), Factor::Health), Some(1.0));
}

#[test]
fn success_is_smoothed_so_one_lucky_run_loses_to_a_long_record() {
    let f = twins(|_, _| {});
    let h = health_with(|h| {
        h.pools.insert("p1/x".into(), Health::new(1.0, 1.0, 1));
        h.pools.insert("p2/x".into(), Health::new(1.0, 0.97, 500));
    });
    let cs = all(&f, &h, &cpu_req(), Policy::for_optimize(crate::spec::Optimize::Reliability));
    assert_eq!(cs[0].pool, "p2/x");
    let lucky = raw(by_pool(&cs, "p1/x"), Factor::Success).unwrap();
    assert!((lucky - (1.0 + 0.95 * 10.0) / 11.0).abs() < 1e-12);
}

#[test]
fn startup_within_and_without_a_target() {
    let f = twins(|p, first| p.startup = Duration::from_secs(if first { 60 } else { 300 }));
    let req = Requirements { startup_within: Some(Duration::from_secs(60)), ..cpu_req() };
    let cs = all(&f, &HealthView::default(), &req, Policy::default());
    assert_eq!(raw(by_pool(&cs, "p1/x"), Factor::Startup), Some(1.0));
    assert!((raw(by_pool(&cs, "p2/x"), Factor::Startup).unwrap() - 0.2).abs() < 1e-12);
    let cs = all(&f, &HealthView::default(), &cpu_req(), Policy::default());
    assert!((raw(by_pool(&cs, "p1/x"), Factor::Startup).unwrap() - 300.0 / 360.0).abs() < 1e-12);
    assert_eq!(raw(by_pool(&cs, "p2/x"), Factor::Startup), Some(0.5));
}

#[test]
fn locality_follows_the_data_and_only_applies_with_located_inputs() {
    let f = twins(|p, first| p.region = if first { "us-east".into() } else { "eu-west".into() });
    let cs = all(&f, &HealthView::default(), &cpu_req(), Policy::default());
    assert_eq!(raw(&cs[0], Factor::Locality), None);
    let req = Requirements {
        inputs: vec![
            InputSite { region: Some("eu-west".into()), size_gb: Some(300.0) },
            InputSite { region: Some("us-east".into()), size_gb: Some(100.0) },
            InputSite { region: None, size_gb: Some(1000.0) },
        ],
        ..cpu_req()
    };
    let cs = all(&f, &HealthView::default(), &req, Policy::default());
    assert_eq!(cs[0].pool, "p2/x");
    assert_eq!(raw(&cs[0], Factor::Locality), Some(0.75));
    assert_eq!(raw(&cs[1], Factor::Locality), Some(0.25));
    // Without sizes, by count.
    let req = Requirements {
        inputs: vec![
            InputSite { region: Some("eu-west".into()), size_gb: None },
            InputSite { region: Some("us-east".into()), size_gb: Some(100.0) },
        ],
        ..cpu_req()
    };
    let cs = all(&f, &HealthView::default(), &req, Policy::default());
    assert_eq!(raw(&cs[0], Factor::Locality), Some(0.5));
}

#[test]
fn fit_keeps_big_nodes_for_big_work() {
    let cs = all(&demo(), &HealthView::default(), &gpu_req(1), Policy::default());
    assert_eq!(raw(by_pool(&cs, "cloud-a/us-east-l4"), Factor::Fit), Some(1.0));
    // h100-2: 1 of 2 free GPUs, 80 GB where 24 GB would do.
    let h100 = raw(by_pool(&cs, "cloud-a/us-east-h100"), Factor::Fit).unwrap();
    assert!((h100 - 0.5 * 24.0 / 80.0).abs() < 1e-12);
    // CPU work lands on the CPU pool; on a GPU node it would fit as well
    // as the share of the node's GPUs already in use (h100-2: 6 of 8).
    let cs = all(&demo(), &HealthView::default(), &cpu_req(), Policy::default());
    assert_eq!(cs[0].pool, "onprem/cpu");
    assert_eq!(raw(&cs[0], Factor::Fit), Some(1.0));
    let h100 = by_pool(&cs, "cloud-a/us-east-h100");
    assert_eq!((h100.node.as_str(), raw(h100, Factor::Fit)), ("h100-2", Some(0.75)));
}

/// A CPU pool and a GPU pool that outscores it on every factor but fit:
/// cheap spot RTX cards that start fast, against dear, slow, flaky CPU nodes.
fn cpu_against_cheap_gpus(cpu_nodes: Vec<NodeDef>) -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Cloud, None).unwrap();
    let mut p = pool("cpu", "r", cpus(32.0, 64.0, 200.0), 8.0);
    p.startup = Duration::from_secs(600);
    b.pool(p, cpu_nodes).unwrap();
    let rtx = acc(Vendor::Nvidia, "RTX-4090", Family::Ada, (8, 9), 24.0);
    let mut p = pool("rtx", "r", gpus(rtx, 1, Interconnect::Pcie, 16.0, 64.0, 500.0), 0.45);
    p.startup = Duration::from_secs(10);
    b.pool(p, vec![node("rtx-1"), node("rtx-2")]).unwrap();
    b.build()
}

#[test]
fn cpu_work_takes_a_gpu_node_only_as_a_last_resort() {
    let flaky = health_with(|h| {
        h.pools.insert("p/cpu".into(), bad(0.5));
    });
    let f = cpu_against_cheap_gpus(vec![node("c1")]);
    let cs = all(&f, &flaky, &cpu_req(), Policy::default());
    assert_eq!(cs.len(), 2);
    let (cpu, rtx) = (&cs[0], &cs[1]);
    assert_eq!((cpu.pool.as_str(), cpu.gpu_node), ("p/cpu", None));
    // The GPU node scores higher, and still ranks second: it is kept free.
    assert!(rtx.score > cpu.score, "{} vs {}", rtx.score, cpu.score);
    assert_eq!((rtx.pool.as_str(), rtx.gpu_node), ("p/rtx", Some(GpuNode::KeptForGpuWork)));
    assert_eq!(rtx.gpu_node.unwrap().to_string(), "kept free for GPU work: a CPU-only node fits");
    // Under every weighting, price alone included.
    use crate::spec::Optimize;
    for o in [Optimize::Cost, Optimize::Speed, Optimize::Reliability] {
        assert_eq!(all(&f, &flaky, &cpu_req(), Policy::for_optimize(o))[0].pool, "p/cpu", "{o:?}");
    }
    let p = placed(
        &f,
        &flaky,
        &cpu_req(),
        &Policy { weights: Weights::PRICE_ONLY, top_k: 1, ..Policy::default() },
    );
    assert_eq!(p.candidates[0].pool, "p/cpu", "the GPU pool is skipped before it is scored");

    // The CPU node is full: the GPU node is the last resort, and says so.
    let full = NodeDef { used: Free { cpu_cores: 32.0, ..Free::default() }, ..node("c1") };
    let cs = all(&cpu_against_cheap_gpus(vec![full]), &flaky, &cpu_req(), Policy::default());
    assert_eq!(cs.len(), 1);
    assert_eq!(cs[0].gpu_node, Some(GpuNode::LastResort));
    assert_eq!(cs[0].gpu_node.unwrap().to_string(), "GPU node used as a last resort: no CPU-only node fits");
    // So it is when no CPU pool passes the request's own filters.
    let req = Requirements { exclude_pools: vec!["p/cpu".into()], ..cpu_req() };
    let cs = all(&f, &flaky, &req, Policy::default());
    assert_eq!((cs[0].pool.as_str(), cs[0].gpu_node), ("p/rtx", Some(GpuNode::LastResort)));

    // GPU work is ranked by score alone and carries no such note.
    let cs = all(&f, &flaky, &gpu_req(1), Policy::default());
    assert_eq!((cs[0].pool.as_str(), cs[0].gpu_node), ("p/rtx", None));
    let json = serde_json::to_value(&cs[0]).unwrap();
    assert!(json.get("gpu_node").is_none(), "{json}");
    let json = serde_json::to_value(rtx).unwrap();
    assert_eq!(json["gpu_node"], "kept-for-gpu-work");
}

#[test]
fn as_a_last_resort_cpu_work_takes_the_gpu_node_with_the_fewest_gpus_free() {
    // Two GPU pools alike but for their nodes' use; the busy one sorts last by name.
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let shape = || gpus(l40s(), 4, Interconnect::Pcie, 48.0, 256.0, 1000.0);
    b.pool(pool("a-idle", "r", shape(), 4.0), vec![node("idle-1")]).unwrap();
    b.pool(pool("b-half", "r", shape(), 4.0), vec![used("half-1", 2, 0)]).unwrap();
    b.pool(pool("z-busy", "r", shape(), 4.0), vec![used("busy-1", 4, 0)]).unwrap();
    let f = b.build();
    let cs = all(&f, &HealthView::default(), &cpu_req(), Policy::default());
    let order: Vec<(&str, Option<f64>)> = cs.iter().map(|c| (c.node.as_str(), raw(c, Factor::Fit))).collect();
    assert_eq!(order, vec![("busy-1", Some(1.0)), ("half-1", Some(0.5)), ("idle-1", Some(0.0))]);
    assert!(cs.iter().all(|c| c.gpu_node == Some(GpuNode::LastResort)));
    // The score bound that skips pools knows the busy pool can fit best.
    let best = placed(&f, &HealthView::default(), &cpu_req(), &Policy { top_k: 1, ..Policy::default() });
    assert_eq!(best.candidates[0].node, "busy-1");
}

#[test]
fn fit_prefers_the_small_card_at_equal_price() {
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    b.pool(
        pool("big", "r", gpus(l40s(), 8, Interconnect::Nvlink, 64.0, 512.0, 100.0), 8.0),
        vec![node("big-1")],
    )
    .unwrap();
    b.pool(
        pool("small", "r", gpus(l40s(), 1, Interconnect::Pcie, 8.0, 64.0, 100.0), 1.0),
        vec![node("small-1")],
    )
    .unwrap();
    let cs = all(&b.build(), &HealthView::default(), &gpu_req(1), Policy::default());
    assert_eq!(cs[0].pool, "p/small");
    assert_eq!(cs[0].hourly_usd, cs[1].hourly_usd, "same price per GPU");
}

/// Issue 24's held-out trace in miniature: a one-GPU job, an empty
/// two-GPU node whose card is cheaper per unit of work, and a one-GPU
/// node of a dearer card. Best fit alone (no mix known) takes the dearer
/// card, whose node it fills; when the known work is all one GPU wide,
/// the GPU it leaves free on the two-GPU node strands nothing and cost
/// decides; with two-GPU work in the mix that GPU counts again, by its share.
#[test]
fn fit_counts_only_what_wider_known_work_could_use() {
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let card = |model: &str| acc(Vendor::Nvidia, model, Family::Ada, (8, 9), 24.0);
    b.pool(
        pool("pair", "r", gpus(card("RTX-3090"), 2, Interconnect::Pcie, 16.0, 64.0, 500.0), 0.90),
        vec![node("pair-1")],
    )
    .unwrap();
    b.pool(
        pool("solo", "r", gpus(card("RTX-4090"), 1, Interconnect::Pcie, 8.0, 32.0, 500.0), 0.50),
        vec![node("solo-1")],
    )
    .unwrap();
    let fleet = b.build();
    let per_hour = Policy { per_work: false, top_k: 10, ..Policy::default() };
    let decide = |mix: &DemandMix| {
        let mut snap = Snapshot::new(&fleet, &HealthView::default());
        snap.set_demand(mix);
        match place(&gpu_req(1), &snap, &per_hour) {
            Decision::Placed(p) => p.candidates,
            Decision::Unschedulable(e) => panic!("{e}"),
        }
    };
    let fit = |cs: &[Candidate], pool: &str| raw(by_pool(cs, pool), Factor::Fit).unwrap();

    let cs = decide(&DemandMix::default());
    assert_eq!(cs[0].pool, "p/solo", "no mix known: best fit");
    assert_eq!((fit(&cs, "p/pair"), fit(&cs, "p/solo")), (0.5, 1.0));
    assert!(cs[1].hourly_usd < cs[0].hourly_usd, "the pair's GPU is the cheaper: {cs:?}");

    let mut ones = DemandMix::default();
    for _ in 0..9 {
        ones.add(1, 1);
    }
    let cs = decide(&ones);
    assert_eq!(cs[0].pool, "p/pair", "nothing wider known: the cheaper GPU");
    assert_eq!((fit(&cs, "p/pair"), fit(&cs, "p/solo")), (1.0, 1.0));

    // Work wider than a node of two does not count: it could not use it.
    let mut with_eights = ones.clone();
    with_eights.add(8, 1);
    assert_eq!(fit(&decide(&with_eights), "p/pair"), 1.0);

    // One two-GPU job beside nine one-GPU jobs: 2 of 11 GPUs, so the free
    // GPU counts as 2/11 stranded.
    let mut with_pairs = ones.clone();
    with_pairs.add(2, 1);
    let cs = decide(&with_pairs);
    assert!((fit(&cs, "p/pair") - 1.0 / (1.0 + 2.0 / 11.0)).abs() < 1e-12, "{cs:?}");
    // When the rest of the known work is two GPUs wide, the pair is kept whole.
    let mut pairs = DemandMix::default();
    pairs.add(1, 1);
    for _ in 0..5 {
        pairs.add(2, 1);
    }
    assert_eq!(decide(&pairs)[0].pool, "p/solo");

    // A plan reads the engine's mix with the planned request counted in,
    // as the engine does: an idle engine's plan takes the pair; a plan
    // with no engine behind it keeps best fit.
    let top = |demand: Option<&DemandMix>| {
        let req = gpu_req(1);
        match place(&req, &Snapshot::for_plan(&fleet, &HealthView::default(), demand, &req), &per_hour) {
            Decision::Placed(p) => p.candidates[0].pool.clone(),
            Decision::Unschedulable(e) => panic!("{e}"),
        }
    };
    assert_eq!(top(Some(&DemandMix::default())), "p/pair");
    assert_eq!(top(Some(&pairs)), "p/solo");
    assert_eq!(top(None), "p/solo");
}

#[test]
fn preferences_region_capability_and_reserved() {
    let req = Requirements {
        preferred_regions: globs(&["eu-*"]),
        preferred_capabilities: vec!["long-training".into()],
        reserved_first: true,
        interruptible: true,
        ..gpu_req(1)
    };
    let cs = all(&demo(), &HealthView::default(), &req, Policy::default());
    let pref = |l| raw(by_pool(&cs, l), Factor::Preference).unwrap();
    assert_eq!(pref("cloud-a/eu-west-a100-spot"), 1.0 / 3.0);
    assert_eq!(pref("cloud-a/us-east-h100"), 1.0 / 3.0);
    assert_eq!(pref("onprem/rack-a"), 1.0 / 3.0);
    assert_eq!(pref("cloud-a/us-east-l4"), 0.0);
    let cs = all(&demo(), &HealthView::default(), &gpu_req(1), Policy::default());
    assert_eq!(raw(&cs[0], Factor::Preference), None);
}

#[test]
fn optimize_shifts_the_weights() {
    let f = twins(|p, first| {
        p.startup = Duration::from_secs(if first { 600 } else { 10 });
        p.price_per_hour = if first { 1.0 } else { 3.0 };
    });
    let pick = |o| all(&f, &HealthView::default(), &cpu_req(), Policy::for_optimize(o))[0].pool.clone();
    use crate::spec::Optimize;
    assert_eq!(pick(Optimize::Balanced), "p1/x");
    assert_eq!(pick(Optimize::Cost), "p1/x");
    assert_eq!(pick(Optimize::Speed), "p2/x");
}

#[test]
fn ties_break_by_price_then_label_then_node() {
    let f = twins(|_, _| {});
    let cs = all(&f, &HealthView::default(), &cpu_req(), Policy::default());
    assert_eq!(cs[0].score, cs[1].score);
    assert_eq!((cs[0].pool.as_str(), cs[1].pool.as_str()), ("p1/x", "p2/x"));
    // Built the other way round, the same order.
    let mut b = FleetBuilder::new();
    for prov in ["p2", "p1"] {
        b.provider(prov, ProviderKind::Local, None).unwrap();
        b.pool(pool("x", "r1", cpus(8.0, 32.0, 100.0), 1.0), vec![node(&format!("{prov}-n"))]).unwrap();
    }
    let cs2 = all(&b.build(), &HealthView::default(), &cpu_req(), Policy::default());
    let names =
        |cs: &[Candidate]| cs.iter().map(|c| (c.pool.clone(), c.node.clone(), c.score)).collect::<Vec<_>>();
    assert_eq!(names(&cs), names(&cs2));
}

#[test]
fn top_k_one_per_pool_and_scores_add_up() {
    let p = placed(&demo(), &HealthView::default(), &gpu_req(1), &Policy { top_k: 3, ..Policy::default() });
    assert_eq!(p.candidates.len(), 3);
    let mut pools: Vec<_> = p.candidates.iter().map(|c| c.pool.clone()).collect();
    pools.dedup();
    assert_eq!(pools.len(), 3);
    assert!(p.candidates.windows(2).all(|w| w[0].score >= w[1].score));
    for c in &p.candidates {
        let sum: f64 = c.breakdown.iter().map(|b| b.contribution).sum();
        assert!((sum - c.score).abs() < 1e-9, "{sum} vs {}", c.score);
        assert!((0.0..=100.0).contains(&c.score));
    }
    assert_eq!(p.considered.total_nodes, 10);
    assert_eq!(p.considered.total_pools, 6);
    // l4, h100, gdpr-l40s, rack-a fit; the a100 spot pool and the CPU pool do not.
    assert_eq!(p.considered.feasible_pools, 4);
    let snap = Snapshot::new(&demo(), &HealthView::default());
    let why: Vec<_> = p.considered.ruled_out.iter().map(|r| r.describe(&snap, &gpu_req(1))).collect();
    assert_eq!(
        why,
        vec![
            "cloud-a/eu-west-a100-spot: interruptible (spot) not allowed",
            "onprem/cpu: fewer than 1 GPU per node"
        ]
    );
}

#[test]
fn candidate_fields_for_the_console() {
    let req = Requirements {
        capabilities: vec!["long-training".into()],
        expected_runtime: Some(Duration::from_secs(3600)),
        max_runtime: Some(Duration::from_secs(4 * 3600)),
        ..gpu_req(2)
    };
    let p = placed(&demo(), &HealthView::default(), &req, &Policy::default());
    let c = &p.candidates[0];
    assert_eq!(
        (c.provider.as_str(), c.pool.as_str(), c.node.as_str(), c.region.as_str()),
        ("cloud-a", "cloud-a/us-east-h100", "h100-2", "us-east")
    );
    assert_eq!(c.accelerator, "8× H100-SXM 80GB nvlink");
    assert_eq!(c.hourly_usd, 8.0);
    assert_eq!(c.est_cost_usd, CostRange { low: 8.0, high: Some(32.0) });
    assert_eq!(c.est_cost_usd.to_string(), "$8.00–$32.00");
    assert_eq!(c.startup_s, 300);
    let json = serde_json::to_value(Decision::Placed(p.clone())).unwrap();
    assert_eq!(json["decision"], "placed");
    assert_eq!(json["candidates"][0]["breakdown"][0]["factor"], "cost");
}

#[test]
fn same_input_same_output() {
    let f = crate::fleet::synth::synth_fleet(500, 3);
    let h = crate::fleet::synth::synth_health(&f, 3);
    let snap = Snapshot::new(&f, &h);
    for req in mix::requirements_mix(50, 3) {
        let a = serde_json::to_string(&place(&req, &snap, &Policy::default())).unwrap();
        let b =
            serde_json::to_string(&place(&req, &Snapshot::new(&f, &h.clone()), &Policy::default())).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn snapshot_caches_match_the_default_policy() {
    use crate::schedule::snapshot::{CACHED_PRIOR, CACHED_STARTUP_REFERENCE_S};
    let p = Policy::default();
    assert_eq!((p.success_prior, p.success_prior_weight), CACHED_PRIOR);
    assert_eq!(p.startup_reference_s, CACHED_STARTUP_REFERENCE_S);
    // A policy that differs only in its prior computes the same as the cache would.
    let f = crate::fleet::synth::synth_fleet(300, 9);
    let h = crate::fleet::synth::synth_health(&f, 9);
    let req = gpu_req(1);
    let cached = placed(&f, &h, &req, &Policy { top_k: 50, ..Policy::default() });
    let nudged = Policy {
        top_k: 50,
        success_prior: 0.95 + 1e-15,
        startup_reference_s: 300.0 + 1e-12,
        ..Policy::default()
    };
    let uncached = placed(&f, &h, &req, &nudged);
    for (a, b) in cached.candidates.iter().zip(&uncached.candidates) {
        assert_eq!((&a.pool, &a.node), (&b.pool, &b.node));
        assert!((a.score - b.score).abs() < 1e-9, "{} vs {}", a.score, b.score);
    }
}

#[test]
fn top_k_of_everything() {
    let p = placed(
        &demo(),
        &HealthView::default(),
        &gpu_req(1),
        &Policy { top_k: usize::MAX, ..Policy::default() },
    );
    assert_eq!(p.candidates.len(), 4);
    let p = placed(&demo(), &HealthView::default(), &gpu_req(1), &Policy { top_k: 0, ..Policy::default() });
    assert_eq!(p.candidates.len(), 1, "at least the placement itself");
}

#[test]
fn long_work_weighs_a_pools_preemptions_short_work_takes_the_cheap_spot() {
    // p1: spot capacity at a third of the price, preempted 30 times in 600
    // running hours (≈ 0.044 an hour); p2: on-demand.
    let f = twins(|p, first| {
        if first {
            p.interruptible = true;
            p.price_per_hour = 0.5;
        }
    });
    let h = health_with(|h| {
        h.pools.insert("p1/x".into(), Health::UNKNOWN.with_exposure(600.0, 30));
    });
    let req = |hours: u64| Requirements {
        interruptible: true,
        expected_runtime: Some(Duration::from_secs(hours * 3600)),
        ..cpu_req()
    };
    let best = |req: &Requirements, policy: Policy| all(&f, &h, req, policy)[0].pool.clone();
    assert_eq!(best(&req(1), Policy::default()), "p1/x", "an hour's run: the saving wins");
    assert_eq!(best(&req(48), Policy::default()), "p2/x", "two days: likely lost, dearer in expectation");
    let price_blind = Policy { interruption_risk: false, ..Policy::default() };
    assert_eq!(best(&req(48), price_blind), "p1/x", "without the risk only the list price counts");

    // The factors say why: survival in success, expected paid hours in cost.
    let cs = all(&f, &h, &req(48), Policy::default());
    let spot = by_pool(&cs, "p1/x");
    let risk = crate::schedule::Risk::new((30.0 + 1.0) / 700.0, Some(48.0));
    assert!(raw(spot, Factor::Success).unwrap() < 0.13 && risk.survival < 0.13);
    assert_eq!(raw(by_pool(&cs, "p2/x"), Factor::Cost), Some(1.0), "on-demand is cheaper in expectation");
    let blind = all(&f, &h, &req(48), Policy { interruption_risk: false, ..Policy::default() });
    assert_eq!(spot.hourly_usd, by_pool(&blind, "p1/x").hourly_usd, "the quoted price stays the list price");
    assert!(spot.hourly_usd < by_pool(&cs, "p2/x").hourly_usd);
}

#[test]
fn risk_is_neutral_without_an_expected_runtime_or_a_hazard() {
    let r = crate::schedule::Risk::new(0.05, None);
    assert_eq!((r.survival, r.paid_per_useful), (1.0, 1.0));
    let r = crate::schedule::Risk::new(0.0, Some(100.0));
    assert_eq!((r.survival, r.paid_per_useful), (1.0, 1.0));
    // (e^x - 1) / x at x = 1.
    let r = crate::schedule::Risk::new(0.1, Some(10.0));
    assert!((r.paid_per_useful - (1f64.exp() - 1.0)).abs() < 1e-12);
    assert!((r.survival - (-1f64).exp()).abs() < 1e-12);
}

#[test]
fn long_checkpointed_work_weighs_the_chance_of_exhausting_its_budget_not_one_interval() {
    // p1: spot at half the price; p2: on-demand. A 650-hour job that
    // checkpoints every 30 minutes and may take 12 more charged stops.
    let f = twins(|p, first| {
        if first {
            p.interruptible = true;
            p.price_per_hour = 0.5;
        }
    });
    let req = Requirements {
        interruptible: true,
        expected_runtime: Some(Duration::from_secs(650 * 3600)),
        checkpoint_interval: Some(Duration::from_secs(1800)),
        charged_stops_left: Some(12),
        ..cpu_req()
    };
    let on = |preemptions: u32| {
        let h = health_with(|h| {
            h.pools.insert("p1/x".into(), Health::UNKNOWN.with_exposure(10_000.0, preemptions));
        });
        all(&f, &h, &req, Policy::default())
    };
    // About 13 preemptions expected over the run (0.02 an hour): each
    // resumes with progress and spends nothing, unless it strikes within
    // 30 minutes of a start; 13 of those are out of reach. Spot it is.
    let calm = on(200);
    assert_eq!(calm[0].pool, "p1/x", "{calm:#?}");
    assert_eq!(by_pool(&calm, "p1/x").exhaustion, None, "negligible, so not said");
    // One preemption every two hours: about 325 over the run, and one in
    // five strikes within 30 minutes of its start, ~90 charged stops
    // against 12. One interval's risk (e^-0.25 ≈ 0.78) would still pick
    // the cheap spot; the budget says it is all but certain to be lost.
    let stormy = on(5_000);
    let spot = by_pool(&stormy, "p1/x");
    assert_eq!(stormy[0].pool, "p2/x", "{stormy:#?}");
    assert!(spot.exhaustion.is_some_and(|p| p > 0.99), "{spot:?}");
    assert!(raw(spot, Factor::Success).unwrap() < 0.01, "the success factor holds it: {spot:?}");
    // Work that restarts from scratch: every stop is charged, and the job
    // is lost when all left + 1 attempts are: (1 − e^(−hD))^(left+1).
    let e = crate::schedule::Exhaustion { run_h: 10.0, tau_h: 10.0, left: 2 };
    let q = 1.0 - (-0.1f64 * 10.0).exp();
    assert!((e.chance(0.1) - q.powi(3)).abs() < 1e-12);
    // Against the negative binomial summed term by term (n = 3 starts
    // that pass τ, p = e^(−hτ)): P(C > 2) = 1 − Σ_k C(k+2, k) p³ q^k.
    let e = crate::schedule::Exhaustion { run_h: 21.0, tau_h: 1.0, left: 2 };
    let p = (-0.1f64).exp();
    let want = 1.0 - (0..=2).map(|k| [1.0, 3.0, 6.0][k] * p.powi(3) * (1.0 - p).powi(k as i32)).sum::<f64>();
    assert!((e.chance(0.1) - want).abs() < 1e-12, "{} vs {want}", e.chance(0.1));
    assert_eq!(e.chance(0.0), 0.0);
}

/// The chance of exhausting a budget is summed by products where the first
/// term is far from underflow and in logarithms past that; both give the
/// negative binomial's tail, either side of the switch.
#[test]
fn the_chance_of_exhaustion_is_the_same_summed_either_way() {
    for run_h in [0.1, 1.0, 10.0, 650.0, 5_000.0] {
        for tau_h in [0.5, 1.0, run_h] {
            for left in [0, 1, 3, 12, 40] {
                for h in [1e-4, 0.02, 0.2, 1.0, 5.0] {
                    let e = crate::schedule::Exhaustion { run_h, tau_h: tau_h.min(run_h), left };
                    let (n, x) = e.terms(h).expect("a hazard and a budget");
                    let (got, want) = (e.chance(h), e.tail_in_logs(n, x));
                    assert!((got - want).abs() < 1e-9, "{e:?} at {h}/h: {got} vs {want}");
                }
            }
        }
    }
}

#[test]
fn interruptions_weigh_on_the_run_the_job_has_on_that_gpu() {
    // Both pools interruptible at the prior rate. The expected runtime is
    // work on the reference GPU (a V100), as the per-work price is: ten
    // hours of it run five on the L40S (2×) and about 16.7 on the L4
    // (0.6×), and each attempt is exposed that long.
    let mut b = FleetBuilder::new();
    b.provider("p", ProviderKind::Local, None).unwrap();
    let mut p = pool("l4", "r1", gpus(l4(), 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 0.8);
    p.interruptible = true;
    b.pool(p, vec![node("l4-1")]).unwrap();
    let mut p = pool("l40s", "r1", gpus(l40s(), 1, Interconnect::Pcie, 8.0, 32.0, 200.0), 1.2);
    p.interruptible = true;
    b.pool(p, vec![node("l40s-1")]).unwrap();
    let f = b.build();
    let h = HealthView::default();
    let job = |hours: Option<u64>| Requirements {
        kind: crate::spec::WorkloadKind::Training,
        interruptible: true,
        expected_runtime: hours.map(|h| Duration::from_secs(h * 3600)),
        ..gpu_req(1)
    };
    let (timed, untimed) =
        (all(&f, &h, &job(Some(10)), Policy::default()), all(&f, &h, &job(None), Policy::default()));
    let survival = |pool: &str| {
        raw(by_pool(&timed, pool), Factor::Success).unwrap()
            / raw(by_pool(&untimed, pool), Factor::Success).unwrap()
    };
    let rate = crate::schedule::snapshot::INTERRUPTIBLE_PRIOR_PER_H;
    assert!((survival("p/l40s") - (-rate * 10.0 / 2.0).exp()).abs() < 1e-9, "{}", survival("p/l40s"));
    assert!((survival("p/l4") - (-rate * 10.0 / 0.6).exp()).abs() < 1e-9, "{}", survival("p/l4"));
    // The paid hours per hour of work follow the same run, (e^x − 1)/x,
    // and the cost factor compares them.
    let paid = |x: f64| x.exp_m1() / x;
    let (l40s, l4) = (1.2 * paid(rate * 5.0) / 2.0, 0.8 * paid(rate * 10.0 / 0.6) / 0.6);
    assert_eq!(raw(by_pool(&timed, "p/l40s"), Factor::Cost), Some(1.0));
    let want = (l40s * 1.1) / (l4 + l40s * 0.1);
    assert!((raw(by_pool(&timed, "p/l4"), Factor::Cost).unwrap() - want).abs() < 1e-9, "{timed:#?}");
}
