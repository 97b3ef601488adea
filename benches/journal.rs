//! Journal speed targets, on a file-backed store (WAL, synchronous=NORMAL):
//!
//! - append: ≥ 50,000 records/s when batched (100 or 1,000 records per
//!   transaction), for a mix of workload upserts, attempt upserts and events;
//! - recovery: `load_live` of a store holding 100,000 workloads (half final,
//!   half live, each with an attempt and two events) in ≤ 1 s.
//!
//! - append on PostgreSQL (`journal/append_postgres`, run when
//!   `CANOPY_TEST_POSTGRES` and `CANOPY_TEST_POSTGRES_PASSWORD` are set, as
//!   `scripts/engines/postgres.sh env` prints them): the same batches in a
//!   schema of their own, dropped afterwards; ≥ 0.5× SQLite's records/s.
//!
//! `cargo bench --bench journal -- --warm-up-time 1 --measurement-time 3`

use canopy::engine::model::*;
use canopy::journal::{HealthWindow, Journal};
use canopy::spec::Spec;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn spec(name: &str) -> Spec {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "kind": "fine-tuning",
        "priority": 60,
        "expected_runtime": "2h",
        "labels": { "team": "nlp", "project": "assistant" },
        "runtime": {
            "image": "ghcr.io/acme/trainer:1.4.2",
            "command": ["torchrun", "--nproc-per-node", "8", "train.py", "--config", "configs/llama-8b.yaml"],
            "env": { "EPOCHS": "3", "WANDB_PROJECT": "assistant" },
            "secrets": ["HF_TOKEN", "WANDB_API_KEY"],
        },
        "resources": { "gpus": 8, "gpu_memory_gb": { "min": 80 }, "cpu_cores": 64, "memory_gb": 512 },
        "constraints": { "max_cost_usd": 400, "regions": ["eu-*"], "compliance": ["gdpr"] },
        "retry": { "max_attempts": 4, "app_errors": 1 },
        "inputs": [{ "name": "data", "source": "s3://acme-data/sft/v3/", "region": "eu-west-1", "size_gb": 120 }],
        "outputs": [{ "name": "ckpt", "path": "/out/ckpt", "required": true }],
    }))
    .expect("the bench spec is valid")
}

fn workload(id: u64, state: WorkloadState, spec: &Spec) -> Record {
    Record::Workload(Box::new(WorkloadRecord {
        id: WorkloadId(id),
        name: spec.name.clone(),
        spec: spec.clone().into(),
        spec_hash: format!("{id:064x}"),
        submitted_by: None,
        acknowledged: None,
        exclusions: None,
        retried_as: None,
        tenant: None,
        idempotency_key: Some(format!("key-{id}")),
        priority: 60,
        state,
        submitted_at: Millis(1_000_000 + id as i64),
        updated_at: Millis(2_000_000 + id as i64),
        attempts: 1,
        app_failures: 0,
        not_before: None,
        cost_usd: 3.5,
        est_cost_usd: 96.0,
        reason: Some("running on eu-west/h100-8x".into()),
        class: None,
    }))
}

fn attempt(id: u64, state: AttemptState) -> Record {
    Record::Attempt(Box::new(AttemptRecord {
        id: AttemptId { workload: WorkloadId(id), n: 1 },
        provider: "slurm-eu".into(),
        pool: "slurm-eu/h100-8x".into(),
        node: format!("gpu-{:03}", id % 512),
        region: "eu-west-1".into(),
        state,
        price_per_hour: 24.0,
        est_cost_usd: 48.0,
        gpus: 8,
        gpu_memory_gb: 80.0,
        score: 87.5,
        score_breakdown: "cost=31.0 speed=22.5 health=20.0 locality=14.0".into(),
        placed_at: Millis(3_000_000),
        started_at: Some(Millis(3_060_000)),
        ended_at: None,
        exit_code: None,
        class: None,
        rule: None,
        evidence: None,
        cost_usd: 3.5,
        provider_ref: Some(format!("slurm job {}", 900_000 + id)),
        nonce: String::new(),
        stop: None,
        nodes: Vec::new(),
        checkpoint: None,
    }))
}

fn event(id: u64, kind: EventKind) -> Record {
    Record::Event(EventRecord {
        at: Millis(3_000_000 + id as i64),
        workload: WorkloadId(id),
        attempt: Some(AttemptId { workload: WorkloadId(id), n: 1 }),
        kind,
        message: "placed on slurm-eu/h100-8x (score 87.5: cost 31.0, speed 22.5, health 20.0)".into(),
    })
}

/// `size` records, a third each of workload upserts, attempt upserts and
/// events, over a working set of 10,000 workloads (so upserts are mostly
/// updates once the store warms up, as in a running engine).
fn batch(next: &mut u64, size: usize, spec: &Spec) -> Vec<Record> {
    (0..size)
        .map(|_| {
            let k = *next;
            *next += 1;
            let id = (k / 3) % 10_000 + 1;
            match k % 3 {
                0 => workload(id, WorkloadState::Running, spec),
                1 => attempt(id, AttemptState::Running),
                _ => event(id, EventKind::Running),
            }
        })
        .collect()
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let spec = spec("sft-llama-8b");
    let mut group = c.benchmark_group("journal/append");
    for size in [1usize, 100, 1_000] {
        let mut journal = Journal::open(&dir.path().join(format!("append-{size}.db"))).expect("open");
        let mut next = 0;
        group.throughput(Throughput::Elements(size as u64));
        group.bench_function(BenchmarkId::new("batch", size), |b| {
            b.iter_batched(
                || batch(&mut next, size, &spec),
                |records| journal.append(&records).expect("append"),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// The same appends on PostgreSQL, when one is configured.
fn append_postgres(c: &mut Criterion) {
    let Ok(url) = std::env::var("CANOPY_TEST_POSTGRES") else {
        eprintln!("skipped: journal/append_postgres: CANOPY_TEST_POSTGRES is not set");
        return;
    };
    let password = std::env::var("CANOPY_TEST_POSTGRES_PASSWORD").unwrap_or_default();
    let schema = format!("bench_{}", std::process::id());
    let mut config: postgres::Config = url.parse().expect("CANOPY_TEST_POSTGRES is a postgres:// URL");
    config.password(&password);
    let mut admin = config.connect(postgres::NoTls).expect("PostgreSQL at CANOPY_TEST_POSTGRES");
    admin.batch_execute(&format!("CREATE SCHEMA {schema}")).expect("create the bench schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    let url = format!("{url}{sep}options=-csearch_path%3D{schema}");
    let spec = spec("sft-llama-8b");
    let mut group = c.benchmark_group("journal/append_postgres");
    let mut journal = Journal::open_postgres(&url, Some(&password)).expect("open");
    for size in [1usize, 100, 1_000] {
        let mut next = 0;
        group.throughput(Throughput::Elements(size as u64));
        group.bench_function(BenchmarkId::new("batch", size), |b| {
            b.iter_batched(
                || batch(&mut next, size, &spec),
                |records| journal.append(&records).expect("append"),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
    drop(journal);
    admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE")).expect("drop the bench schema");
}

fn recover(c: &mut Criterion) {
    const WORKLOADS: u64 = 100_000;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("recover.db");
    let spec = spec("sft-llama-8b");
    let mut journal = Journal::open(&path).expect("open");
    for chunk in (1..=WORKLOADS).collect::<Vec<_>>().chunks(1_000) {
        let mut records = Vec::with_capacity(chunk.len() * 4);
        for &id in chunk {
            let done = id % 2 == 0;
            let (w, a) = if done {
                (WorkloadState::Succeeded, AttemptState::Succeeded)
            } else {
                (WorkloadState::Running, AttemptState::Running)
            };
            records.push(workload(id, w, &spec));
            records.push(attempt(id, a));
            records.push(event(id, EventKind::Placed));
            records.push(event(id, EventKind::Running));
            if id % 10 == 0 {
                let node = format!("gpu-{:03}", id % 512);
                let at = Millis(id as i64);
                records.push(Record::Health(HealthObservation {
                    at,
                    provider: "slurm-eu".into(),
                    pool: "slurm-eu/h100-8x".into(),
                    node,
                    class: None,
                    ran_s: 3600.0,
                    free: false,
                    lift: false,
                }));
            }
        }
        journal.append(&records).expect("append");
    }
    drop(journal);

    let journal = Journal::open(&path).expect("reopen");
    let window = HealthWindow { since: Millis(0), limit: 5_000 };
    let live = journal.load_live(window).expect("load_live");
    assert_eq!(live.workloads.len() as u64, WORKLOADS / 2);
    assert_eq!(live.attempts.len() as u64, WORKLOADS / 2);
    assert_eq!(live.max_workload_id, Some(WorkloadId(WORKLOADS)));

    let mut group = c.benchmark_group("journal/recover");
    group.sample_size(10);
    group.bench_function("load_live_100k", |b| {
        b.iter(|| black_box(journal.load_live(window).expect("load_live")))
    });
    group.finish();
}

criterion_group!(benches, append, append_postgres, recover);
criterion_main!(benches);
