//! Engine throughput.
//!
//! - `engine_e2e/local_true`: trivial local workloads (`true`) end to end
//!   through the embedded engine in process: submitted through
//!   `EngineHandle::command`, journalled, launched under a real supervisor
//!   process, polled (every 20 ms), collected, finished. Throughput is
//!   workloads per second, sustained. Target: ≥ 200/s on 2 cores.
//! - `engine_core/cycle`: the pure core alone, one workload at a time
//!   through submit → place → launched → running → ended → collected
//!   (5 events), on the demo fleet and on a synthetic 10,000-node fleet.
//!   Throughput is events per second.
//! - `engine_core/snapshot`: a full build of the scheduler snapshot, which
//!   the core now does only when the fleet itself changes (inventory,
//!   restore); allocations and health changes update it in place.
//!
//! Journal appends and recovery are measured in `benches/journal.rs`.
//!
//! Measured 2026-11-29 on 2 shared cores (load average 6–8 from parallel
//! builds): e2e about 180 workloads/s (40/s before the local provider
//! stopped forking the engine for each supervisor; see `launch::start`).
//! The core, shell and journal are under 5% of the CPU; the rest is the
//! supervisor and workload processes and the attempt directory's files.
//! Core cycle, while the core still rebuilt the snapshot after every
//! allocation: ~29k events/s on the demo fleet, ~280 events/s on 10k
//! nodes, nearly all of it the rebuild (~19 ms at 10k nodes). With in-place
//! updates (helper measurement, same machine, lighter load): ~257k events/s
//! on the demo fleet and ~114k events/s on 10k nodes.

use canopy::app::{self, EngineOptions};
use canopy::engine::command::{Command, CommandResult};
use canopy::engine::core::{Action, Core, CoreConfig, Event, OutputsResult};
use canopy::engine::model::{Millis, Record, WorkloadId, WorkloadState};
use canopy::failure::ProviderEnd;
use canopy::fleet::Fleet;
use canopy::health::{HealthConfig, HealthTracker};
use canopy::home::Home;
use canopy::journal::Journal;
use canopy::providers::local::ShimCommand;
use canopy::providers::sim::SimConfig;
use canopy::providers::{AttemptStatus, LaunchAck};
use canopy::schedule::Snapshot;
use canopy::spec::{Format, Spec, load};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::collections::HashSet;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn spec(text: &str) -> Spec {
    load::parse(text, "bench.toml", Format::Toml).unwrap().spec
}

const TRUE_LOCAL: &str = "name = \"t\"\n[runtime]\ncommand = [\"true\"]\n\
    [resources]\ncpu_cores = 0.001\nmemory_gb = 0.001\n[constraints]\nproviders = [\"local\"]\n";

/// Workloads per measured batch.
const BATCH: u64 = 200;

fn e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    let running = rt.block_on(async {
        let mut opts = EngineOptions::embedded(home.clone()).unwrap();
        opts.shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
        opts.sim = SimConfig::no_faults();
        opts.poll_every = Some(Duration::from_millis(20));
        app::start(opts).await.unwrap()
    });
    let spec = spec(TRUE_LOCAL);
    let mut g = c.benchmark_group("engine_e2e");
    g.throughput(Throughput::Elements(BATCH));
    g.sample_size(10).measurement_time(Duration::from_secs(20)).warm_up_time(Duration::from_secs(3));
    g.bench_function("local_true", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                total += rt.block_on(run_batch(&running.handle, &spec, &home));
            }
            total
        })
    });
    g.finish();
    running.handle.shutdown();
    let _ = rt.block_on(running.task);
}

/// Submits `BATCH` workloads at once and waits until all have succeeded.
async fn run_batch(handle: &canopy::engine::shell::EngineHandle, spec: &Spec, home: &Home) -> Duration {
    let mut updates = handle.subscribe();
    let start = Instant::now();
    let submits: Vec<_> = (0..BATCH)
        .map(|_| {
            let (h, s) = (handle.clone(), Box::new(spec.clone()));
            tokio::spawn(async move { h.command(Command::Submit { spec: s, idempotency_key: None }).await })
        })
        .collect();
    let mut waiting = HashSet::new();
    for s in submits {
        match s.await.unwrap() {
            CommandResult::Submitted { id, .. } => waiting.insert(id),
            other => panic!("submit: {other:?}"),
        };
    }
    let mut done: HashSet<WorkloadId> = HashSet::new();
    while !waiting.iter().all(|id| done.contains(id)) {
        match updates.recv().await {
            Ok(batch) => {
                for r in batch.records.iter() {
                    if let Record::Workload(w) = r {
                        assert_ne!(w.state, WorkloadState::Failed, "{w:?}");
                        if w.state == WorkloadState::Succeeded {
                            done.insert(w.id);
                        }
                    }
                }
            }
            // Fell behind the broadcast: ask the journal instead.
            Err(_) => {
                let j = Journal::open(&home.store()).unwrap();
                for id in &waiting {
                    if j.workload(*id).unwrap().is_some_and(|w| w.state == WorkloadState::Succeeded) {
                        done.insert(*id);
                    }
                }
                updates = handle.subscribe();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    start.elapsed()
}

/// Runs one workload through the core: 5 events. Returns the time moved on.
fn cycle(core: &mut Core, spec: &Spec, hash: &str, now: &mut i64) {
    let mut step = |core: &mut Core, e: Event| {
        *now += 1000;
        core.handle(e, Millis(*now))
    };
    let out = step(
        core,
        Event::Submit {
            request: 1,
            spec: Box::new(spec.clone()),
            spec_hash: hash.into(),
            idempotency_key: None,
            by: None,
            tenant: None,
        },
    );
    let attempt = out
        .iter()
        .find_map(|a| if let Action::Launch { attempt, .. } = a { Some(*attempt) } else { None })
        .expect("placed at once");
    let ack = LaunchAck { provider_ref: "bench".into(), adopted: false };
    step(core, Event::LaunchResult { attempt, result: Ok(ack) });
    step(core, Event::Status { attempt, status: AttemptStatus::Running });
    let end = ProviderEnd::Exited { code: 0 };
    let out = step(core, Event::Status { attempt, status: AttemptStatus::Ended(end.clone()) });
    assert!(out.iter().any(|a| matches!(a, Action::Collect { .. })));
    let out = step(
        core,
        Event::Collected {
            attempt,
            end,
            log_tail: Vec::new(),
            outputs: OutputsResult::Collected { count: 0 },
        },
    );
    debug_assert!(
        out.iter()
            .any(|a| matches!(a, Action::Record(Record::Workload(w)) if w.state == WorkloadState::Succeeded))
    );
    black_box(out);
}

fn core(c: &mut Criterion) {
    let gpu = spec(
        "name = \"t\"\n[runtime]\ncommand = [\"true\"]\n[resources]\ngpus = 1\ncpu_cores = 4\nmemory_gb = 16\n",
    );
    let hash = gpu.content_hash();
    let fleets: Vec<(&str, Fleet)> = vec![
        ("demo", canopy::fleet::load::demo().unwrap()),
        ("synth-10k", canopy::fleet::synth::synth_fleet(10_000, 7)),
    ];
    let mut g = c.benchmark_group("engine_core");
    g.sample_size(20).measurement_time(Duration::from_secs(5)).warm_up_time(Duration::from_secs(1));
    for (name, fleet) in &fleets {
        g.throughput(Throughput::Elements(5));
        g.bench_with_input(BenchmarkId::new("cycle", name), fleet, |b, fleet| {
            let mut core = Core::new("bench0", fleet.clone(), CoreConfig::default());
            let mut now = 1_700_000_000_000;
            b.iter(|| cycle(&mut core, &gpu, &hash, &mut now));
        });
        g.throughput(Throughput::Elements(1));
        g.bench_with_input(BenchmarkId::new("snapshot", name), fleet, |b, fleet| {
            let view = HealthTracker::new(HealthConfig::default()).view(Millis(0));
            b.iter(|| black_box(Snapshot::new(fleet, &view)));
        });
    }
    g.finish();
}

criterion_group!(benches, core, e2e);
criterion_main!(benches);
