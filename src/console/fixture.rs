//! Fixed data for tests and benchmarks: a read model over a given fleet
//! with `n` workloads in every state, some failed with classes and
//! evidence, spread over the fleet's nodes. Deterministic; no I/O.

use super::model::Model;
use crate::engine::model::{
    AttemptId, AttemptRecord, AttemptState, AuditRecord, Millis, WorkloadId, WorkloadRecord, WorkloadState,
};
use crate::failure::FailureClass;
use crate::fleet::Fleet;
use crate::health::{Health, HealthView};
use crate::spec::load::{Format, parse};

/// The fixture's "now".
pub const NOW: Millis = Millis(1_800_000_000_000);

/// `n` workloads over `fleet`, deterministic.
pub fn model(fleet: Fleet, n: usize) -> Model {
    let spec = match parse(super::editor::TEMPLATES[0].1, "hello.toml", Format::Toml) {
        Ok(l) => l.spec,
        // The built-in template is valid: `every_template_is_valid…` tests it.
        Err(_) => return Model::default(),
    };
    let states = [
        WorkloadState::Running,
        WorkloadState::Succeeded,
        WorkloadState::Queued,
        WorkloadState::Failed,
        WorkloadState::Running,
        WorkloadState::Succeeded,
        WorkloadState::Cancelled,
    ];
    let classes = [FailureClass::GpuOom, FailureClass::Node, FailureClass::App];
    let mut workloads = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    // Nodes of pools for domestic-hardware work are left out: the
    // fixture's workloads never ask for it, and its history stays the
    // same when such capacity joins a fleet.
    let hosts: Vec<&crate::fleet::Node> = fleet
        .nodes
        .iter()
        .filter(|n| !fleet.pool(n.pool).compliance.iter().any(|c| c == crate::accel::DOMESTIC_HARDWARE))
        .collect();
    let nodes = hosts.len().max(1);
    for i in 0..n {
        let id = WorkloadId(i as u64 + 1);
        let state = states[i % states.len()];
        let failed = state == WorkloadState::Failed || (state == WorkloadState::Running && i % 3 == 0);
        let class = failed.then(|| classes[i % classes.len()]);
        let Some(node) = hosts.get((i * 7) % nodes) else { break };
        let pool = fleet.pool_label(node.pool);
        let tries = if failed { 2 } else { 1 };
        let mut name = format!("job-{}", i % 97);
        if i % 5 == 0 {
            name = format!("train-{}", i % 13);
        }
        if state != WorkloadState::Queued {
            for t in 1..=tries {
                let last = t == tries;
                let (st, cl) = match (last, state) {
                    (false, _) => (AttemptState::Failed, class),
                    (true, WorkloadState::Failed) => (AttemptState::Failed, class),
                    (true, WorkloadState::Succeeded) => (AttemptState::Succeeded, None),
                    (true, WorkloadState::Cancelled) => {
                        (AttemptState::Cancelled, Some(FailureClass::Cancelled))
                    }
                    _ => (AttemptState::Running, None),
                };
                attempts.push(AttemptRecord {
                    id: AttemptId { workload: id, n: t },
                    provider: fleet.provider_of(node.pool).name.clone(),
                    pool: pool.clone(),
                    node: node.name.clone(),
                    region: fleet.pool(node.pool).region.clone(),
                    state: st,
                    price_per_hour: 2.5,
                    est_cost_usd: 1.0,
                    gpus: 1,
                    gpu_memory_gb: 80.0,
                    score: 87.5,
                    score_breakdown: "cost=0.80 health=1.00 startup=0.60".into(),
                    placed_at: Millis(NOW.0 - 600_000),
                    started_at: Some(Millis(NOW.0 - 590_000)),
                    ended_at: None,
                    exit_code: cl.map(|_| 1),
                    class: cl,
                    rule: cl.map(|c| format!("{c}-rule")),
                    evidence: cl.map(|c| match c {
                        FailureClass::GpuOom => "torch.OutOfMemoryError: CUDA out of memory".to_string(),
                        FailureClass::Node => "Xid 79: GPU has fallen off the bus".to_string(),
                        _ => format!("error: step {i} failed"),
                    }),
                    cost_usd: 0.25,
                    provider_ref: None,
                    nonce: String::new(),
                    stop: None,
                    nodes: Vec::new(),
                    checkpoint: None,
                });
            }
        }
        workloads.push(WorkloadRecord {
            id,
            name,
            spec: spec.clone().into(),
            spec_hash: String::new(),
            submitted_by: None,
            acknowledged: None,
            exclusions: None,
            retried_as: None,
            tenant: None,
            idempotency_key: None,
            priority: 0,
            state,
            submitted_at: Millis(NOW.0 - 60_000 * (i as i64 % 240)),
            updated_at: NOW,
            attempts: if state == WorkloadState::Queued { 0 } else { tries },
            app_failures: 0,
            not_before: None,
            cost_usd: 0.25 * f64::from(tries) + (i % 10) as f64,
            est_cost_usd: 1.0,
            reason: (state == WorkloadState::Queued)
                .then(|| "0/71 nodes are available: 60 too few free GPUs".into()),
            class: if state == WorkloadState::Failed { class } else { None },
        });
    }
    let mut health = HealthView::default();
    if let Some(n) = fleet.nodes.get(3) {
        health.nodes.insert(n.name.clone(), Health::new(0.2, 0.3, 9).quarantined());
    }
    Model::from_parts(fleet, health, workloads, attempts, NOW)
}

/// An audit trail as `EngineHandle::audit` answers it (newest first): done,
/// refused and denied requests from the socket and over TCP, one from the
/// day before, and one whose principal, target and reason try to act on
/// the terminal (an escape sequence, a bidi override, a line break).
pub fn audit() -> Vec<AuditRecord> {
    let rec = |ago_s: i64,
               who: &str,
               from: &str,
               action: &str,
               target: Option<&str>,
               outcome: &str,
               reason: Option<&str>| {
        AuditRecord {
            at: Millis(NOW.0 - ago_s * 1000),
            principal: who.into(),
            origin: from.into(),
            action: action.into(),
            target: target.map(Into::into),
            outcome: outcome.into(),
            reason: reason.map(Into::into),
        }
    };
    let socket = "socket (uid 1000)";
    vec![
        rec(
            30,
            "evil\x1b[2J\x1b]0;pwned\x07",
            "10.0.0.9:40112",
            "cancel",
            Some("w-1\u{202E}exe.txt"),
            "denied: token evil (viewer) may not cancel",
            Some("line one\nline two"),
        ),
        rec(
            90,
            "ops-oncall",
            "10.0.0.7:41000",
            "retry",
            Some("w-7"),
            "refused: w-7 is not final (running)",
            None,
        ),
        rec(
            180,
            "local:alice",
            socket,
            "cordon",
            Some("fra-h100-04"),
            "ok",
            Some("Xid 79 twice; RMA ticket 4411"),
        ),
        rec(
            240,
            "ci",
            "127.0.0.1:53122",
            "cancel",
            Some("w-4"),
            "denied: token ci (submitter) may not cancel",
            Some("cleanup"),
        ),
        rec(300, "ci", "127.0.0.1:53122", "submit", Some("w-40"), "existing", None),
        rec(360, "local:alice", socket, "submit", Some("w-40"), "ok", None),
        rec(86_400 + 600, "local:alice", socket, "token-create", Some("ci"), "ok", Some("nightly pipeline")),
    ]
}

/// A fleet whose node and pool names are long and differ only at their
/// end (`cloud-a-a10g-ondemand-use1-0003`, `-0004`) or in their middle
/// (`h100x8`, `h200x8`), with a 41-character pool in a 14-character
/// region and prices that differ in their last digit: what the tables
/// must fit into 80 and 120 columns without making two names look alike.
pub const LONG_NAMES_FLEET: &str = r#"
[[providers]]
name = "cloud-a"
kind = "cloud"

[[providers.pools]]
name = "a10g-ondemand-use1"
region = "us-east-1"
accelerator = { vendor = "nvidia", model = "A10G", family = "ampere", compute_capability = "8.6", memory_gb = 24 }
gpus_per_node = 1
cpu_cores = 8
memory_gb = 32
price_per_hour = 1.21
startup = "2m"
nodes = [
  { name = "cloud-a-a10g-ondemand-use1-0003" },
  { name = "cloud-a-a10g-ondemand-use1-0004" },
  { name = "cloud-a-a10g-ondemand-use1-0011" },
]

[[providers.pools]]
name = "h100x8-ondemand-usw2"
region = "us-west-2"
accelerator = { vendor = "nvidia", model = "H100-SXM5-80GB", family = "hopper", compute_capability = "9.0", memory_gb = 80 }
gpus_per_node = 8
cpu_cores = 208
memory_gb = 1800
price_per_hour = 31.5
startup = "4m"
nodes = [{ name = "cloud-a-h100x8-ondemand-usw2-0001" }]

[[providers.pools]]
name = "h200x8-ondemand-usw2"
region = "us-west-2"
accelerator = { vendor = "nvidia", model = "H200-SXM-141GB", family = "hopper", compute_capability = "9.0", memory_gb = 141 }
gpus_per_node = 8
cpu_cores = 224
memory_gb = 2048
price_per_hour = 42.0
startup = "5m"
nodes = [{ name = "cloud-a-h200x8-ondemand-usw2-0001" }]

[[providers]]
name = "ray-iad"
kind = "ray"

[[providers.pools]]
name = "l4"
region = "us-east-1"
accelerator = { vendor = "nvidia", model = "L4", family = "ada", compute_capability = "8.9", memory_gb = 24 }
gpus_per_node = 2
cpu_cores = 24
memory_gb = 96
price_per_hour = 1.6
startup = "10s"
reserved = true
nodes = [{ name = "ray-iad-l4-0" }, { name = "ray-iad-l4-1" }]

[[providers]]
name = "marketplace-community"
kind = "cloud"
lifecycle = "container"

[[providers.pools]]
name = "rtx4090-24gb-spot-1"
region = "ap-northeast-1"
accelerator = { vendor = "nvidia", model = "RTX-4090", family = "ada", compute_capability = "8.9", memory_gb = 24 }
gpus_per_node = 1
cpu_cores = 16
memory_gb = 64
price_per_hour = 0.45
startup = "75s"
interruptible = true
nodes = [
  { name = "marketplace-community-rtx4090-24gb-spot-1-00" },
  { name = "marketplace-community-rtx4090-24gb-spot-1-01" },
]

[[providers.pools]]
name = "rtx4090-24gb-spot-2"
region = "ap-northeast-1"
accelerator = { vendor = "nvidia", model = "RTX-4090", family = "ada", compute_capability = "8.9", memory_gb = 24 }
gpus_per_node = 1
cpu_cores = 16
memory_gb = 64
price_per_hour = 0.55
startup = "75s"
interruptible = true
nodes = [{ name = "marketplace-community-rtx4090-24gb-spot-2-00" }]
"#;

/// `n` workloads over [`LONG_NAMES_FLEET`], every third named
/// `llama-70b-finetune-lr3e-5-seed-N` (names that differ at their end).
pub fn long_names(n: usize) -> Model {
    let Ok(fleet) = crate::fleet::load::parse(LONG_NAMES_FLEET, "long-names.toml") else {
        return Model::default();
    };
    let mut m = model(fleet, n);
    for (i, w) in m.workloads.values_mut().enumerate() {
        if i % 3 == 0 {
            w.rec.name = format!("llama-70b-finetune-lr3e-5-seed-{i}");
        }
    }
    m.generation += 1;
    m
}

/// [`model`] with 40 workloads over `fleet` (the demo fleet's names) and
/// more trouble: provider `ray-iad` has not answered for 3 minutes; nodes
/// at several health scores; w-19 and w-22 wait to retry after a failed
/// attempt, while w-1 (evicted by a drain) and w-40 (a launch refused for
/// want of room) wait to be placed again, which is routine; and recent
/// events, among them w-2's success (its attempt's `ended` and its own
/// `succeeded`, one moment) and w-4's failure.
pub fn troubled(fleet: Fleet) -> Model {
    use crate::engine::model::{EventKind, EventRecord, Record};
    let mut m = model(fleet, 40);
    let Some(status) = m.status.clone() else { return m };
    let mut s = (*status).clone();
    s.unreachable.insert("ray-iad".into(), "connection refused".into());
    s.unreachable_since.insert("ray-iad".into(), Millis(NOW.0 - 180_000));
    for (node, score) in
        [("fra-a100-02", 0.45), ("cloud-a-a10g-ondemand-04", 0.7), ("market-rtx4090-06", 0.92)]
    {
        s.health.nodes.insert(node.into(), Health::new(score, score, 6));
    }
    m.set_status(std::sync::Arc::new(s));
    let requeue = |m: &mut Model, id: u64, class: FailureClass, rule: &str| {
        if let Some(w) = m.workloads.get_mut(&WorkloadId(id)) {
            w.rec.state = WorkloadState::Queued;
            w.attempts.retain(|a| a.state.is_final());
            if let Some(a) = w.attempts.last_mut() {
                a.class = Some(class);
                a.rule = Some(rule.into());
            }
        }
    };
    requeue(&mut m, 19, FailureClass::GpuOom, "gpu-oom.torch");
    requeue(&mut m, 22, FailureClass::Node, "node.xid79");
    requeue(&mut m, 1, FailureClass::Preempted, crate::engine::EVICTED_RULE);
    requeue(&mut m, 40, FailureClass::Capacity, "capacity.no-room");
    let ev = |ago_s: i64, id: u64, n: Option<u32>, kind: EventKind, message: &str| {
        Record::Event(EventRecord {
            at: Millis(NOW.0 - ago_s * 1000),
            workload: WorkloadId(id),
            attempt: n.map(|n| AttemptId { workload: WorkloadId(id), n }),
            kind,
            message: message.into(),
        })
    };
    m.apply(&[
        ev(300, 6, None, EventKind::Submitted, "submitted by local:alice"),
        ev(240, 6, Some(1), EventKind::Placed, "placed on fra-h100-02 (score 87.5)"),
        ev(120, 4, Some(2), EventKind::Ended, "gpu-oom [gpu-oom.torch]: torch.OutOfMemoryError"),
        ev(120, 4, Some(2), EventKind::Retry, "final [attempts]: 2 of 2 attempts used"),
        ev(120, 4, None, EventKind::Failed, "gpu-oom: 2 of 2 attempts used"),
        ev(60, 2, Some(1), EventKind::Ended, "succeeded on fra-h100-08"),
        ev(60, 2, None, EventKind::Succeeded, "succeeded on fra-h100-08"),
    ]);
    m
}
