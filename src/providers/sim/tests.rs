//! The market's decisions over the demo fleet, driven synchronously with
//! explicit times (the provider's async glue is covered by
//! `tests/sim_provider.rs`).

use super::attempt::{AfterStart, Poll};
use super::market::LaunchOutcome;
use super::{ChurnConfig, FaultRates, SimConfig, SimMarket};
use crate::engine::model::{AttemptId, Millis, WorkloadId};
use crate::failure::ProviderEnd;
use crate::fleet::NodeState;
use crate::providers::{AttemptStatus, LaunchError, LaunchRequest};
use crate::spec::Spec;
use std::sync::Arc;
use std::time::Duration;

const T0: Millis = Millis(1_714_678_800_000);

fn spec(gpus: u32) -> Arc<Spec> {
    let text = format!("name = \"t\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = {gpus}\n");
    Arc::new(crate::spec::load::parse(&text, "t.toml", crate::spec::Format::Toml).expect("spec").spec)
}

fn req(w: u64, pool: &str, node: &str, gpus: u32) -> LaunchRequest {
    let attempt = AttemptId { workload: WorkloadId(w), n: 1 };
    LaunchRequest {
        attempt,
        token: attempt.token("store1", ""),
        spec: spec(gpus),
        pool: pool.into(),
        node: node.into(),
        secrets: Vec::new(),
        artifact_dir: "/tmp/none".into(),
        nodes: vec![node.into()],
        checkpoint_dir: None,
    }
}

fn market(config: SimConfig) -> SimMarket {
    SimMarket::new(&crate::fleet::load::demo().expect("demo fleet"), config).expect("market")
}

fn accepted(o: LaunchOutcome) -> String {
    match o {
        LaunchOutcome::Accepted { provider_ref } => provider_ref,
        other => panic!("expected acceptance, got {other:?}"),
    }
}

#[test]
fn inventory_names_the_demo_fleets_nodes_and_leaves_canopys_share_out() {
    let m = market(SimConfig::no_faults());
    assert_eq!(m.provider_names(), ["onprem-fra", "ray-iad", "cloud-a", "k8s-b", "market", "dc-bj"]);
    let fleet = crate::fleet::load::demo().expect("demo");
    for provider in m.provider_names() {
        for pool in m.inventory(&provider, T0) {
            for n in &pool.nodes {
                assert!(fleet.node_by_name(&n.name).is_some(), "{} is a demo node", n.name);
            }
        }
    }
    let fra = m.inventory("onprem-fra", T0);
    let nodes = &fra[0].nodes;
    assert_eq!(nodes[0].name, "fra-h100-01");
    assert_eq!(nodes[0].used_by_others.gpus, 0, "its 8 used GPUs are Canopy's own");
    assert_eq!(nodes[1].used_by_others.gpus, 4);
    assert_eq!(nodes[3].state, NodeState::Cordoned);
    assert_eq!(nodes[5].state, NodeState::Down);
}

#[test]
fn a_token_launches_once_and_is_adopted_after() {
    let m = market(SimConfig::no_faults());
    let r = req(1, "h100x8-ondemand", "cloud-a-h100x8-ondemand-00", 8);
    let first = accepted(m.launch("cloud-a", &r, T0));
    assert!(first.starts_with("i-0"), "{first}");
    assert_eq!(m.launch("cloud-a", &r, T0), LaunchOutcome::Adopted { provider_ref: first });
}

#[test]
fn launches_that_do_not_fit_are_refused_with_reasons() {
    let m = market(SimConfig::no_faults());
    let refused = |o: LaunchOutcome| match o {
        LaunchOutcome::Refused(e) => e,
        other => panic!("expected a refusal, got {other:?}"),
    };
    let e = refused(m.launch("onprem-fra", &req(1, "h100-nvl", "fra-h100-06", 8), T0));
    assert!(matches!(&e, LaunchError::Capacity(m) if m.contains("fra-h100-06 is down")), "{e}");
    let e = refused(m.launch("k8s-b", &req(2, "mi300x", "k8s-b-mi300x-01", 1), T0));
    assert!(matches!(&e, LaunchError::Capacity(m) if m.contains("0 of 8 GPUs free")), "{e}");
    let e = refused(m.launch("k8s-b", &req(3, "nope", "k8s-b-mi300x-01", 1), T0));
    assert!(matches!(e, LaunchError::Rejected(_)));
    // The market counts its own attempts: a second 8-GPU launch on the node is refused.
    accepted(m.launch("onprem-fra", &req(4, "h100-nvl", "fra-h100-03", 8), T0));
    let e = refused(m.launch("onprem-fra", &req(5, "h100-nvl", "fra-h100-03", 8), T0));
    assert!(matches!(e, LaunchError::Capacity(_)));
}

/// A gang starts whole or not at all: one node that cannot take its rank
/// refuses the launch, and no rank holds capacity afterwards.
#[test]
fn a_gang_whose_one_node_is_down_starts_no_rank() {
    let m = market(SimConfig::no_faults());
    let gang = |w: u64, nodes: &[&str]| {
        let mut r = req(w, "h100-nvl", nodes[0], 8);
        r.nodes = nodes.iter().map(|n| n.to_string()).collect();
        r
    };
    match m.launch("onprem-fra", &gang(1, &["fra-h100-03", "fra-h100-06"]), T0) {
        LaunchOutcome::Refused(LaunchError::Capacity(why)) => {
            assert!(why.contains("rank 1") && why.contains("is down") && why.contains("no rank"), "{why}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Both nodes' GPUs are still free for a gang that fits.
    accepted(m.launch("onprem-fra", &gang(2, &["fra-h100-03", "fra-h100-05"]), T0));
    // ... and now held by it, on every rank's node.
    let e = m.launch("onprem-fra", &req(3, "h100-nvl", "fra-h100-05", 8), T0);
    assert!(matches!(e, LaunchOutcome::Refused(LaunchError::Capacity(_))), "{e:?}");
}

/// A node of a running gang going down ends the gang as that rank's end.
#[test]
fn a_gang_node_going_down_is_that_ranks_end() {
    let m = market(SimConfig::no_faults());
    let mut r = req(1, "h100-nvl", "fra-h100-03", 8);
    r.nodes = vec!["fra-h100-03".into(), "fra-h100-05".into()];
    accepted(m.launch("onprem-fra", &r, T0));
    {
        let mut st = m.lock();
        let a = st.attempts.get_mut(&r.token).expect("attempt");
        a.forced = Some((T0, super::faults::RunFault::NodeLost));
        a.forced_node = Some("fra-h100-05".into());
    }
    match m.poll("onprem-fra", &r.token, T0) {
        Poll::Answer(AttemptStatus::Ended(ProviderEnd::Rank { rank: 1, node, .. })) => {
            assert_eq!(node, "fra-h100-05")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pending_until_the_startup_moment_then_started_exactly_once() {
    let m = market(SimConfig::no_faults());
    let r = req(1, "h100-nvl", "fra-h100-03", 8);
    assert!(accepted(m.launch("onprem-fra", &r, T0)).starts_with("job 4"));
    assert!(matches!(m.poll("onprem-fra", &r.token, T0), Poll::Answer(AttemptStatus::Pending)));
    assert!(matches!(m.poll("ray-iad", &r.token, T0), Poll::Answer(AttemptStatus::NotFound)));
    let later = T0.plus_secs(45.0 * 6.0);
    assert!(matches!(m.poll("onprem-fra", &r.token, later), Poll::Start(_)));
    // A second poll while the executor's launch is in flight does not start it again.
    assert!(matches!(m.poll("onprem-fra", &r.token, later), Poll::Answer(AttemptStatus::Pending)));
    assert_eq!(m.started(&r.token, later, Ok(())), AfterStart::Answer(AttemptStatus::Running));
    assert!(matches!(m.poll("onprem-fra", &r.token, later), Poll::Delegate { strike: None, .. }));
}

#[test]
fn terminate_while_pending_cancels_before_it_starts() {
    let m = market(SimConfig::no_faults());
    let r = req(1, "a100x8-spot", "cloud-a-a100x8-spot-00", 8);
    accepted(m.launch("cloud-a", &r, T0));
    assert!(!m.terminate("cloud-a", &r.token), "nothing to stop at the executor");
    let much_later = T0.plus_secs(3600.0);
    match m.poll("cloud-a", &r.token, much_later) {
        Poll::Answer(AttemptStatus::Ended(ProviderEnd::Cancelled)) => {}
        other => panic!("{other:?}"),
    }
    assert!(m.owned("cloud-a", "store1").is_empty());
}

#[test]
fn a_due_fault_strikes_with_its_signature() {
    let config =
        SimConfig { faults: FaultRates { nccl_timeout: 1.0, ..FaultRates::NONE }, ..SimConfig::no_faults() };
    let window = config.fault_window;
    let m = market(config);
    let r = req(1, "h100x8-ondemand", "cloud-a-h100x8-ondemand-01", 8);
    accepted(m.launch("cloud-a", &r, T0));
    let start = T0.plus_secs(3600.0);
    assert!(matches!(m.poll("cloud-a", &r.token, start), Poll::Start(_)));
    m.started(&r.token, start, Ok(()));
    assert!(matches!(m.poll("cloud-a", &r.token, start), Poll::Delegate { strike: None, .. }));
    let after = start.plus_secs(window.as_secs_f64());
    let Poll::Delegate { strike: Some(order), .. } = m.poll("cloud-a", &r.token, after) else {
        panic!("no strike")
    };
    assert_eq!(order.end, ProviderEnd::Exited { code: 1 });
    assert!(order.tail.contains("Watchdog caught collective operation timeout"), "{}", order.tail);
    // While it is being stopped, it still runs; a missed strike (the process
    // ended first) leaves the executor's end standing.
    assert!(matches!(m.poll("cloud-a", &r.token, after), Poll::Answer(AttemptStatus::Running)));
    m.strike_missed(&r.token, true);
    assert!(matches!(
        m.poll("cloud-a", &r.token, after.plus_secs(60.0)),
        Poll::Delegate { strike: None, .. }
    ));
}

#[test]
fn a_node_going_down_loses_the_attempts_on_it() {
    // Every ready node goes down at the first churn step, 15 s in.
    let churn = ChurnConfig {
        down_per_hour: 3600.0 / 15.0,
        mean_downtime: Duration::from_secs(3600),
        ..ChurnConfig::DEMO
    };
    let m = market(SimConfig { churn, time_scale: 0.0, ..SimConfig::no_faults() });
    let running = req(1, "a10g-ondemand", "cloud-a-a10g-ondemand-00", 1);
    let pending = req(2, "a10g-ondemand", "cloud-a-a10g-ondemand-01", 1);
    accepted(m.launch("cloud-a", &running, T0));
    assert!(matches!(m.poll("cloud-a", &running.token, T0), Poll::Start(_)));
    m.started(&running.token, T0, Ok(()));
    accepted(m.launch("cloud-a", &pending, T0));

    let later = T0.plus_secs(20.0);
    let Poll::Delegate { strike: Some(order), .. } = m.poll("cloud-a", &running.token, later) else {
        panic!("no strike")
    };
    assert!(
        matches!(order.end, ProviderEnd::NodeLost { ref message } if message.contains("a10g-ondemand-00"))
    );
    assert!(order.tail.is_empty(), "a VM just vanishes");
    match m.poll("cloud-a", &pending.token, later) {
        Poll::Answer(AttemptStatus::Ended(ProviderEnd::NodeLost { .. })) => {}
        other => panic!("{other:?}"),
    }
    let inv = m.inventory("cloud-a", later);
    assert!(inv.iter().flat_map(|p| &p.nodes).all(|n| n.state == NodeState::Down));
}

#[test]
fn lemons_and_configs() {
    let demo = market(SimConfig::demo());
    assert!(!demo.lemon_nodes().is_empty(), "a demo has lemons");
    assert!(market(SimConfig::no_faults()).lemon_nodes().is_empty());
    let bad = SimConfig { faults: FaultRates { xid79: 1.5, ..FaultRates::NONE }, ..SimConfig::default() };
    let err = SimMarket::new(&crate::fleet::load::demo().expect("demo"), bad).expect_err("invalid");
    assert!(err.to_string().contains("xid79"), "{err}");
}

#[test]
fn a_start_the_executor_did_not_answer_is_tried_again_and_a_cancel_wins() {
    let m = market(SimConfig { time_scale: 0.0, ..SimConfig::no_faults() });
    let r = req(1, "l40s", "iad-l40s-03", 1);
    accepted(m.launch("ray-iad", &r, T0));
    assert!(matches!(m.poll("ray-iad", &r.token, T0), Poll::Start(_)));
    let again = m.started(&r.token, T0, Err(LaunchError::Timeout));
    assert_eq!(again, AfterStart::Answer(AttemptStatus::Pending));
    assert!(matches!(m.poll("ray-iad", &r.token, T0), Poll::Start(_)), "asked again; the executor adopts");
    // A terminate arrives while the executor is starting it.
    assert!(!m.terminate("ray-iad", &r.token));
    assert_eq!(m.started(&r.token, T0, Ok(())), AfterStart::StopExecutor);
    assert!(m.terminate("ray-iad", &r.token), "later terminates reach the executor too");
    match m.poll("ray-iad", &r.token, T0) {
        Poll::Answer(AttemptStatus::Ended(ProviderEnd::Cancelled)) => {}
        other => panic!("{other:?}"),
    }

    let refused = req(2, "l40s", "iad-l40s-02", 1);
    accepted(m.launch("ray-iad", &refused, T0));
    assert!(matches!(m.poll("ray-iad", &refused.token, T0), Poll::Start(_)));
    let e = LaunchError::Rejected("no such program".into());
    let end = ProviderEnd::LaunchRejected { message: "no such program".into(), capacity: false };
    assert_eq!(m.started(&refused.token, T0, Err(e)), AfterStart::Answer(AttemptStatus::Ended(end)));
}

#[test]
fn a_preemption_gives_notice_before_it_strikes_and_only_on_interruptible_capacity() {
    let config =
        SimConfig { faults: FaultRates { preempted: 1.0, ..FaultRates::NONE }, ..SimConfig::no_faults() };
    let (window, notice) = (config.fault_window.as_secs(), config.preempt_notice.as_secs());
    let m = market(config);
    let spot = req(1, "a100x8-spot", "cloud-a-a100x8-spot-00", 8);
    let steady = req(2, "h100x8-ondemand", "cloud-a-h100x8-ondemand-01", 8);
    let start = T0.plus_secs(3600.0);
    for r in [&spot, &steady] {
        accepted(m.launch("cloud-a", r, T0));
        assert!(matches!(m.poll("cloud-a", &r.token, start), Poll::Start(_)));
        m.started(&r.token, start, Ok(()));
    }
    // Poll every second: notices count down to the strike, which ends it
    // as a preemption; the on-demand node never hears of one.
    let mut notices = Vec::new();
    let mut struck = None;
    for s in 0..=window {
        let now = start.plus_secs(s as f64);
        assert!(matches!(
            m.poll("cloud-a", &steady.token, now),
            Poll::Delegate { strike: None, notice: None }
        ));
        match m.poll("cloud-a", &spot.token, now) {
            Poll::Delegate { strike: None, notice: Some(w) } => notices.push((s, w)),
            Poll::Delegate { strike: None, notice: None } => {
                assert!(notices.is_empty(), "notice withdrawn at {s}")
            }
            Poll::Delegate { strike: Some(order), .. } => {
                assert_eq!(order.end, ProviderEnd::Preempted);
                struck = Some(s);
                break;
            }
            other => panic!("at {s}: {other:?}"),
        }
    }
    let struck = struck.expect("a preemption within the fault window");
    assert!(struck > notice, "this seed strikes after a whole notice: {struck}s");
    for (s, w) in &notices {
        assert!(
            *w <= notice && s + w >= struck && s + w <= struck + 1,
            "notice at {s}s: within {w}s, struck at {struck}s"
        );
    }
    assert_eq!(notices.first().map(|n| n.0), Some(struck - notice), "{notices:?}");
}
