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
    let nodes = fleet.nodes.len().max(1);
    for i in 0..n {
        let id = WorkloadId(i as u64 + 1);
        let state = states[i % states.len()];
        let failed = state == WorkloadState::Failed || (state == WorkloadState::Running && i % 3 == 0);
        let class = failed.then(|| classes[i % classes.len()]);
        let node = &fleet.nodes[(i * 7) % nodes];
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
                });
            }
        }
        workloads.push(WorkloadRecord {
            id,
            name,
            spec: spec.clone(),
            spec_hash: String::new(),
            submitted_by: None,
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
