//! Scenario tests of the core's inventory refresh (`Event::Inventory`):
//! a provider's fresh inventory replaces its pools and nodes, Canopy's own
//! allocations are kept, node states follow the provider, and capacity
//! that grew unblocks waiting work. Driven by hand, no I/O.

use canopy::accel::{ComputeCapability, Family, Interconnect, Vendor};
use canopy::engine::core::{Action, Core, CoreConfig, Event, Reply};
use canopy::engine::model::*;
use canopy::fleet::{
    Accelerator, Fleet, FleetBuilder, Free, Lifecycle, NodeDef, NodeState, PoolDef, ProviderKind, Shape,
};
use canopy::spec::{Format, load};
use std::time::Duration;

fn pool() -> PoolDef {
    PoolDef {
        name: "debug".into(),
        region: "onprem".into(),
        shape: Shape {
            accelerator: Some(Accelerator {
                vendor: Vendor::Nvidia,
                model: "H100".into(),
                family: Family::Hopper,
                compute_capability: ComputeCapability::new(9, 0),
                memory_gb: 80.0,
                throughput: None,
            }),
            gpus_per_node: 4,
            interconnect: Interconnect::Pcie,
            cpu_cores: 16.0,
            memory_gb: 64.0,
            disk_gb: 100.0,
            fabric: None,
        },
        price_per_hour: 0.0,
        startup: Duration::from_secs(5),
        capabilities: vec!["slurm".into()],
        compliance: vec![],
        reserved: false,
        interruptible: false,
        lifecycle: Lifecycle::Vm,
        lend_limit_gpus: None,
    }
}

fn node(name: &str, state: NodeState, others_gpus: u32) -> NodeDef {
    NodeDef {
        name: name.into(),
        state,
        used: Free { gpus: others_gpus, ..Free::default() },
        canopy_gpus: 0,
        switch: None,
    }
}

fn fleet(nodes: Vec<NodeDef>) -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("slurm", ProviderKind::Slurm, None).unwrap();
    b.pool(pool(), nodes).unwrap();
    b.build()
}

const T0: i64 = 1_700_000_000_000;

fn submit(core: &mut Core, gpus: u32) -> (WorkloadId, Vec<Action>) {
    let text = format!(
        "name = \"job\"\n[runtime]\ncommand = [\"train\"]\n[resources]\ngpus = {gpus}\ncpu_cores = 1\nmemory_gb = 1\n"
    );
    let spec = load::parse(&text, "job.toml", Format::Toml).expect("valid spec").spec;
    let spec_hash = spec.content_hash();
    let out = core.handle(
        Event::Submit {
            request: 1,
            spec: Box::new(spec),
            spec_hash,
            idempotency_key: None,
            by: None,
            tenant: None,
        },
        Millis(T0),
    );
    let id = out
        .iter()
        .find_map(|a| match a {
            Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(*id),
            _ => None,
        })
        .expect("submitted");
    (id, out)
}

fn launched(out: &[Action]) -> Option<String> {
    out.iter().find_map(|a| if let Action::Launch { nodes, .. } = a { nodes.first().cloned() } else { None })
}

fn refresh(core: &mut Core, nodes: Vec<NodeDef>) -> Vec<Action> {
    core.handle(
        Event::Inventory { provider: "slurm".into(), pools: vec![(pool(), nodes)] },
        Millis(T0 + 1000),
    )
}

fn free_gpus(core: &Core, name: &str) -> u32 {
    let i = core.fleet().node_by_name(name).expect("node listed");
    core.fleet().node(i).free.gpus
}

fn state(core: &Core, name: &str) -> NodeState {
    core.fleet().node(core.fleet().node_by_name(name).expect("node listed")).state
}

#[test]
fn capacity_freed_at_the_provider_unblocks_waiting_work() {
    // Both nodes busy with others' jobs at start: a 2-GPU job waits.
    let mut core = Core::new(
        "st1",
        fleet(vec![node("n1", NodeState::Ready, 4), node("n2", NodeState::Ready, 4)]),
        CoreConfig::default(),
    );
    let (id, out) = submit(&mut core, 2);
    assert_eq!(launched(&out), None);
    assert!(core.is_blocked(id));
    // The others' jobs ended: the refresh places the waiting job.
    let out = refresh(&mut core, vec![node("n1", NodeState::Ready, 0), node("n2", NodeState::Ready, 4)]);
    assert_eq!(launched(&out).as_deref(), Some("n1"));
    assert!(!core.is_blocked(id));
}

#[test]
fn canopys_own_allocations_survive_a_refresh() {
    let mut core = Core::new("st1", fleet(vec![node("n1", NodeState::Ready, 0)]), CoreConfig::default());
    let (_, out) = submit(&mut core, 3);
    assert_eq!(launched(&out).as_deref(), Some("n1"));
    assert_eq!(free_gpus(&core, "n1"), 1);
    // The provider reports nobody else on n1: Canopy's 3 GPUs stay taken.
    refresh(&mut core, vec![node("n1", NodeState::Ready, 0)]);
    assert_eq!(free_gpus(&core, "n1"), 1);
    assert_eq!(core.fleet().node(core.fleet().node_by_name("n1").unwrap()).canopy_gpus, 3);
    // A 2-GPU job does not fit beside it; never overcommitted.
    let (id, out) = submit(&mut core, 2);
    assert_eq!(launched(&out), None);
    assert!(core.is_blocked(id));
}

#[test]
fn node_states_follow_the_provider_and_new_nodes_appear() {
    let mut core = Core::new(
        "st1",
        fleet(vec![node("n1", NodeState::Ready, 0), node("n2", NodeState::Ready, 0)]),
        CoreConfig::default(),
    );
    refresh(
        &mut core,
        vec![
            node("n1", NodeState::Down, 0),
            node("n2", NodeState::Cordoned, 0),
            node("n3", NodeState::Ready, 0),
        ],
    );
    assert_eq!(state(&core, "n1"), NodeState::Down);
    assert_eq!(state(&core, "n2"), NodeState::Cordoned);
    assert_eq!(state(&core, "n3"), NodeState::Ready);
    // A 1-GPU job can only go to the new node.
    let (_, out) = submit(&mut core, 1);
    assert_eq!(launched(&out).as_deref(), Some("n3"));
    // The drain ends at the provider: the node is ready again.
    refresh(
        &mut core,
        vec![
            node("n1", NodeState::Down, 0),
            node("n2", NodeState::Ready, 0),
            node("n3", NodeState::Ready, 0),
        ],
    );
    assert_eq!(state(&core, "n2"), NodeState::Ready);
}

#[test]
fn an_operators_cordon_is_kept_while_the_provider_says_ready() {
    let mut core = Core::new("st1", fleet(vec![node("n1", NodeState::Ready, 0)]), CoreConfig::default());
    core.handle(
        Event::SetNodeState { request: 9, node: "n1".into(), state: NodeState::Cordoned, note: None },
        Millis(T0),
    );
    refresh(&mut core, vec![node("n1", NodeState::Ready, 0)]);
    assert_eq!(state(&core, "n1"), NodeState::Cordoned);
    refresh(&mut core, vec![node("n1", NodeState::Down, 0)]);
    assert_eq!(state(&core, "n1"), NodeState::Down, "the provider's down wins");
}

#[test]
fn an_unknown_provider_changes_nothing() {
    let mut core = Core::new("st1", fleet(vec![node("n1", NodeState::Ready, 0)]), CoreConfig::default());
    let before = core.fleet().clone();
    core.handle(Event::Inventory { provider: "nope".into(), pools: vec![(pool(), vec![])] }, Millis(T0));
    assert_eq!(core.fleet(), &before);
}

#[test]
fn an_operators_cordon_is_journalled_kept_through_a_restart_and_a_refresh_and_lapses_when_due() {
    use canopy::engine::core::{NodeNote, Restore};
    let mut core = Core::new("st1", fleet(vec![node("n1", NodeState::Ready, 0)]), CoreConfig::default());
    let note = NodeNote {
        by: "ops-alice".into(),
        reason: Some("fan noise".into()),
        until: Some(Millis(T0 + 3_600_000)),
        ..NodeNote::default()
    };
    let out = core.handle(
        Event::SetNodeState { request: 1, node: "n1".into(), state: NodeState::Cordoned, note: Some(note) },
        Millis(T0),
    );
    let intent = out
        .iter()
        .find_map(|a| match a {
            Action::Record(Record::NodeIntent { intent: Some(i), .. }) => Some((**i).clone()),
            _ => None,
        })
        .expect("the cordon is journalled");
    assert_eq!((intent.by.as_str(), intent.reason.as_deref()), ("ops-alice", Some("fan noise")));

    // A restart: a new core from the journal's intents.
    let mut core = Core::new("st1", fleet(vec![node("n1", NodeState::Ready, 0)]), CoreConfig::default());
    core.restore(
        Restore {
            workloads: vec![],
            attempts: vec![],
            health: vec![],
            max_id: 0,
            id_floor: 0,
            intents: vec![intent],
        },
        Millis(T0 + 1000),
    );
    assert_eq!(state(&core, "n1"), NodeState::Cordoned, "the cordon survives the restart");
    assert_eq!(core.intents()["n1"].reason.as_deref(), Some("fan noise"));
    // The provider says ready; the operator's cordon holds.
    refresh(&mut core, vec![node("n1", NodeState::Ready, 0)]);
    refresh(&mut core, vec![node("n1", NodeState::Ready, 0)]);
    assert_eq!(state(&core, "n1"), NodeState::Cordoned);
    // The engine wakes when it lapses, and it lapses in the journal too.
    assert!(core.next_wake().is_some_and(|t| t <= Millis(T0 + 3_600_000)));
    let out = core.handle(Event::Tick, Millis(T0 + 3_600_001));
    assert_eq!(state(&core, "n1"), NodeState::Ready);
    assert!(out.iter().any(|a| matches!(a, Action::Record(Record::NodeIntent { intent: None, .. }))));
    assert!(core.intents().is_empty());
}
