//! Usage report speed (issue 26): the ledger and a grouped report over
//! 1,000,000 attempts (500,000 workloads of 8 tenants on 40 pools; a mix
//! of successes, failures of every kind, checkpoint resumes, reclaims and
//! live attempts), goal ≤ 1 s on the 2-core machine. Reading the journal
//! is not counted: `benches/journal.rs` measures that.
//!
//! Also, over a store of 20,000 ended workloads: the `/metrics` counters'
//! first scrape (each later scrape reads only the events since) and what
//! `GET /v1/usage` does per request (read every workload and attempt,
//! build the ledger, report).
//!
//! `cargo bench --bench usage -- --warm-up-time 1 --measurement-time 5`

use canopy::engine::model::*;
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::usage::ledger::{self, Context, PoolInfo, Work};
use canopy::usage::report::{self, By};
use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::HashMap;
use std::hint::black_box;

const ATTEMPTS: u64 = 1_000_000;
const T0: i64 = 1_800_000_000_000;

fn journal() -> (Context, Vec<Work>, Vec<AttemptRecord>) {
    let pools: HashMap<String, PoolInfo> = (0..40)
        .map(|i| {
            let info = PoolInfo {
                accelerator: Some(["H100", "A100", "L40S", "MI300X"][i % 4].to_string()),
                owner: (i % 5 == 0).then(|| format!("team-{}", i % 8)),
            };
            (format!("prov-{}/pool-{i}", i % 6), info)
        })
        .collect();
    let labels: Vec<String> = {
        let mut l: Vec<String> = pools.keys().cloned().collect();
        l.sort();
        l
    };
    let ctx = Context::from_pools(pools, HashMap::from([("team-0".to_string(), 600_000)]));
    let work: Vec<Work> = (1..=ATTEMPTS / 2)
        .map(|i| Work {
            id: WorkloadId(i),
            tenant: Some(format!("team-{}", i % 8)),
            user: Some(format!("user-{}", i % 200)),
            cpu_milli: 8000,
        })
        .collect();
    let mut attempts = Vec::with_capacity(ATTEMPTS as usize);
    for i in 0..ATTEMPTS {
        let w = i / 2 + 1;
        let n = (i % 2) as u32 + 1;
        let pool = &labels[(i % labels.len() as u64) as usize];
        let placed = T0 + (i as i64) * 2_000;
        let started = placed + 60_000;
        let ended = started + 3_600_000 + (i as i64 % 7) * 60_000;
        let class = FailureClass::ALL[(i % FailureClass::ALL.len() as u64) as usize];
        let (state, class) = match (n, i % 10) {
            (2, 9) => (AttemptState::Running, None),
            (2, _) => (AttemptState::Succeeded, None),
            _ => (AttemptState::Failed, Some(class)),
        };
        let live = state == AttemptState::Running;
        let mut a = AttemptRecord {
            id: AttemptId { workload: WorkloadId(w), n },
            provider: pool.split('/').next().unwrap_or_default().to_string(),
            pool: pool.clone(),
            node: format!("node-{}", i % 5000),
            region: "eu".into(),
            state,
            price_per_hour: 2.5,
            est_cost_usd: 0.0,
            gpus: 8,
            gpu_memory_gb: 80.0,
            score: 0.0,
            score_breakdown: String::new(),
            placed_at: Millis(placed),
            started_at: Some(Millis(started)),
            ended_at: (!live).then_some(Millis(ended)),
            exit_code: None,
            class,
            rule: None,
            evidence: None,
            cost_usd: 0.0,
            provider_ref: None,
            nonce: String::new(),
            stop: None,
            nodes: Vec::new(),
            checkpoint: None,
        };
        if n == 2 && i % 3 == 0 {
            let saved =
                SavedCheckpoint { name: "step".into(), at: Millis(placed - 1_000_000), bytes: 1, attempt: 1 };
            a.checkpoint = Some(CheckpointNote { resumed: Some(saved), saved: None });
        }
        if class == Some(FailureClass::Reclaimed) {
            a.stop = Some(ProviderEnd::OwnerReclaim {
                owner: "team-0".into(),
                for_workload: 1,
                message: String::new(),
                grace_s: 30,
                kill_at_ms: Some(ended - 10_000),
            });
        }
        attempts.push(a);
    }
    (ctx, work, attempts)
}

fn bench(c: &mut Criterion) {
    let (ctx, work, attempts) = journal();
    let now = Millis(T0 + ATTEMPTS as i64 * 2_000 + 7_200_000);
    let mut g = c.benchmark_group("usage");
    g.sample_size(10);
    g.bench_function("ledger+report by tenant, 1M attempts", |b| {
        b.iter(|| {
            let rows = ledger::rows(&ctx, &work, &attempts, now);
            black_box(report::report(&rows, &ctx, By::Tenant, None, now))
        })
    });
    let rows = ledger::rows(&ctx, &work, &attempts, now);
    g.bench_function("report by user over built rows, 1M attempts, one week", |b| {
        b.iter(|| black_box(report::report(&rows, &ctx, By::User, Some(Millis(now.0 - 7 * 86_400_000)), now)))
    });
    g.finish();
}

/// A file store of `n` ended workloads, each with one attempt and its
/// events (placed, ended, succeeded).
fn store(dir: &std::path::Path, n: u64) -> std::path::PathBuf {
    let path = dir.join("usage.db");
    let mut j = canopy::journal::Journal::open(&path).expect("open");
    let spec: canopy::spec::Spec = serde_json::from_value(serde_json::json!({
        "name": "train",
        "runtime": { "command": ["python", "train.py"] },
        "resources": { "gpus": 8, "cpu_cores": 64, "memory_gb": 512 },
    }))
    .expect("the bench spec is valid");
    for chunk in (1..=n).collect::<Vec<_>>().chunks(1000) {
        let mut records = Vec::new();
        for &id in chunk {
            let w = WorkloadId(id);
            let a = AttemptId { workload: w, n: 1 };
            records.push(Record::Workload(Box::new(WorkloadRecord {
                id: w,
                name: "train".into(),
                spec: spec.clone().into(),
                spec_hash: format!("{id:064x}"),
                idempotency_key: None,
                priority: 50,
                state: WorkloadState::Succeeded,
                submitted_at: Millis(T0),
                updated_at: Millis(T0),
                attempts: 1,
                app_failures: 0,
                not_before: None,
                cost_usd: 1.0,
                est_cost_usd: 1.0,
                reason: None,
                class: None,
                submitted_by: Some(format!("user-{}", id % 50)),
                acknowledged: None,
                exclusions: None,
                retried_as: None,
                tenant: Some(format!("team-{}", id % 8)),
            })));
            records.push(Record::Attempt(Box::new(AttemptRecord {
                id: a,
                provider: "slurm-eu".into(),
                pool: "slurm-eu/h100".into(),
                node: format!("gpu-{}", id % 512),
                region: "eu".into(),
                state: AttemptState::Succeeded,
                price_per_hour: 24.0,
                est_cost_usd: 24.0,
                gpus: 8,
                gpu_memory_gb: 80.0,
                score: 0.0,
                score_breakdown: String::new(),
                placed_at: Millis(T0),
                started_at: Some(Millis(T0 + 60_000)),
                ended_at: Some(Millis(T0 + 3_660_000)),
                exit_code: Some(0),
                class: None,
                rule: None,
                evidence: None,
                cost_usd: 24.0,
                provider_ref: None,
                nonce: String::new(),
                stop: None,
                nodes: Vec::new(),
                checkpoint: None,
            })));
            for kind in [EventKind::Placed, EventKind::Ended, EventKind::Succeeded] {
                let attempt = (kind != EventKind::Succeeded).then_some(a);
                records.push(Record::Event(EventRecord {
                    at: Millis(T0),
                    workload: w,
                    attempt,
                    kind,
                    message: String::new(),
                }));
            }
        }
        j.append(&records).expect("append");
    }
    path
}

fn scrape(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let j = canopy::journal::Journal::open(&store(dir.path(), 20_000)).expect("open");
    let mut g = c.benchmark_group("usage/metrics");
    g.sample_size(10);
    g.bench_function("first scrape, 20,000 ended workloads", |b| {
        b.iter(|| {
            let mut counters = canopy::usage::counters::Counters::default();
            counters.catch_up(&j, None).expect("catch up");
            black_box(counters.workloads)
        })
    });
    g.bench_function("GET /v1/usage's read, ledger and report, 20,000 workloads", |b| {
        b.iter(|| {
            let src = canopy::usage::read(&j, Vec::new(), None).expect("read");
            let ctx = Context::default();
            let rows = ledger::rows(&ctx, &src.work, &src.attempts, Millis(T0 + 7_200_000));
            black_box(report::report(&rows, &ctx, By::Tenant, None, Millis(T0 + 7_200_000)).total.gpu_ms)
        })
    });
    let mut caught_up = canopy::usage::counters::Counters::default();
    caught_up.catch_up(&j, None).expect("catch up");
    g.bench_function("next scrape, nothing new", |b| {
        b.iter(|| {
            caught_up.catch_up(&j, None).expect("catch up");
            black_box(caught_up.workloads)
        })
    });
    g.finish();
}

criterion_group!(benches, bench, scrape);
criterion_main!(benches);
