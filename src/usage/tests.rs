//! The ledger over a hand-built journal: every figure below is worked out
//! by hand in the comments, in GPU-seconds (the ledger keeps GPU-ms).

use super::ledger::{self, Context, Kind, PoolInfo, Work};
use super::report::{self, By};
use crate::engine::model::{
    AttemptId, AttemptRecord, AttemptState, CheckpointNote, Millis, SavedCheckpoint, WorkloadId,
};
use crate::failure::{FailureClass, ProviderEnd};
use std::collections::HashMap;

const T0: i64 = 1_800_000_000_000;

fn at(s: i64) -> Millis {
    Millis(T0 + s * 1000)
}

fn work(id: u64, tenant: &str, user: &str) -> Work {
    Work { id: WorkloadId(id), tenant: Some(tenant.into()), user: Some(user.into()), cpu_milli: 4000 }
}

/// An attempt on `pool` with `gpus`, launched at `placed`, running from
/// `started`, ended at `ended` (seconds after T0).
#[allow(clippy::too_many_arguments)]
fn attempt(
    w: u64,
    n: u32,
    pool: &str,
    gpus: u32,
    price: f64,
    times: (i64, Option<i64>, Option<i64>),
    state: AttemptState,
    class: Option<FailureClass>,
) -> AttemptRecord {
    let (placed, started, ended) = times;
    AttemptRecord {
        id: AttemptId { workload: WorkloadId(w), n },
        provider: pool.split('/').next().unwrap().into(),
        pool: pool.into(),
        node: format!("{pool}-n1"),
        region: "r".into(),
        state,
        price_per_hour: price,
        est_cost_usd: 0.0,
        gpus,
        gpu_memory_gb: 80.0,
        score: 0.0,
        score_breakdown: String::new(),
        placed_at: at(placed),
        started_at: started.map(at),
        ended_at: ended.map(at),
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
    }
}

fn ctx() -> Context {
    let pools = HashMap::from([
        ("lab/h100".to_string(), PoolInfo { accelerator: Some("H100".into()), owner: Some("a".into()) }),
        ("cloud/a10".to_string(), PoolInfo { accelerator: Some("A10G".into()), owner: None }),
    ]);
    Context::from_pools(pools, HashMap::from([("a".to_string(), 600_000)]))
}

fn journal() -> (Vec<Work>, Vec<AttemptRecord>) {
    use AttemptState::*;
    use FailureClass as C;
    let work = vec![
        work(1, "a", "alice"),
        work(2, "a", "alice"),
        work(3, "b", "bob"),
        work(4, "b", "bob"),
        work(5, "b", "bob"),
        work(6, "a", "carol"),
        work(7, "a", "carol"),
    ];
    let mut a = vec![
        // w-1 succeeded: idle 2×60 = 120; useful 2×3600 = 7200; $4/h × 1 h = $4.
        attempt(1, 1, "cloud/a10", 2, 4.0, (0, Some(60), Some(3660)), Succeeded, None),
        // w-2, its own bug: wasted_own 1×600 = 600; $2/h × 600 s = $0.333333.
        attempt(2, 1, "cloud/a10", 1, 2.0, (0, Some(0), Some(600)), Failed, Some(C::App)),
        // w-3, a node fault: idle 4×100 = 400; wasted_infra 4×800 = 3200.
        attempt(3, 1, "cloud/a10", 4, 0.0, (100, Some(200), Some(1000)), Failed, Some(C::Node)),
        // w-4.1 preempted after a checkpoint at 1800 that w-4.2 resumed:
        // useful 8×1800 = 14400; wasted_infra 8×(2400−1800) = 4800.
        attempt(4, 1, "cloud/a10", 8, 0.0, (0, Some(0), Some(2400)), Failed, Some(C::Preempted)),
        // w-4.2 resumed and succeeded: idle 8×100 = 800; useful 8×1800 = 14400.
        attempt(4, 2, "cloud/a10", 8, 0.0, (2500, Some(2600), Some(4400)), Succeeded, None),
        // w-5, b's work on a's pool, reclaimed 20 s after the reclaim began
        // (at 3000, grace 30 s): wasted_infra 2×2020 = 4040, all lent by a.
        attempt(5, 1, "lab/h100", 2, 0.0, (1000, Some(1000), Some(3020)), Failed, Some(C::Reclaimed)),
        // w-6 live at now = 5000: idle 1×100 = 100; live 1×900 = 900.
        attempt(6, 1, "lab/h100", 1, 0.0, (4000, Some(4100), None), Running, None),
        // w-7 cancelled: decision 1×300 = 300.
        attempt(7, 1, "cloud/a10", 1, 0.0, (0, Some(0), Some(300)), Cancelled, Some(C::Cancelled)),
    ];
    let ckpt = SavedCheckpoint { name: "step-300".into(), at: at(1800), bytes: 1, attempt: 1 };
    a[3].checkpoint = Some(CheckpointNote { resumed: None, saved: Some(ckpt.clone()) });
    a[4].checkpoint = Some(CheckpointNote { resumed: Some(ckpt), saved: None });
    a[5].stop = Some(ProviderEnd::OwnerReclaim {
        owner: "a".into(),
        for_workload: 6,
        message: "a needs it".into(),
        grace_s: 30,
        kill_at_ms: Some(at(3030).0),
    });
    (work, a)
}

const S: u64 = 1000;

#[test]
fn gpu_time_per_column_matches_the_hand_computed_figures() {
    let (work, attempts) = journal();
    let ctx = ctx();
    let rows = ledger::rows(&ctx, &work, &attempts, at(5000));
    let r = report::report(&rows, &ctx, By::Tenant, None, at(5000));
    let t = &r.total;
    assert_eq!(t.useful_gpu_ms, (7200 + 14400 + 14400) * S);
    assert_eq!(t.wasted_own_gpu_ms, 600 * S);
    assert_eq!(t.wasted_infra_gpu_ms, (3200 + 4800 + 4040) * S);
    assert_eq!(t.decision_gpu_ms, 300 * S);
    assert_eq!(t.idle_gpu_ms, (120 + 400 + 800 + 100) * S);
    assert_eq!(t.live_gpu_ms, 900 * S);
    assert_eq!(t.gpu_ms, (36000 + 600 + 12040 + 300 + 1420 + 900) * S);
    assert_eq!(t.attempts, 8);
    let class = |c: &str| t.lost_by_class_gpu_ms.get(c).copied().unwrap_or(0);
    assert_eq!(
        (class("node"), class("preempted"), class("reclaimed"), class("app"), class("cancelled")),
        (3200 * S, 4800 * S, 4040 * S, 600 * S, 300 * S)
    );
    // $4 + $0.333333 (the rest ran at $0).
    assert_eq!(t.cost_micro_usd, 4_000_000 + 333_333);
    // Tenant a: w-1, w-2, w-6, w-7; b: w-3, w-4, w-5.
    let a = r.groups.iter().find(|g| g.key == "a").unwrap();
    assert_eq!(a.useful_gpu_ms, 7200 * S);
    assert_eq!(a.gpu_ms, (7320 + 600 + 1000 + 300) * S);
    // The owner a: b's 4040 GPU-s were on its pool, its own w-6 1000; one
    // reclaim, 20 s against a 600 s promise.
    let o = &r.owners[0];
    assert_eq!((o.owner.as_str(), o.lent_gpu_ms, o.own_gpu_ms), ("a", 4040 * S, 1000 * S));
    assert_eq!(
        (o.reclaims, o.worst_reclaim_ms, o.p99_reclaim_ms, o.late_reclaims),
        (1, Some(20_000), Some(20_000), 0)
    );
}

#[test]
fn every_grouping_sums_to_the_total_and_a_rebuild_is_identical() {
    let (work, attempts) = journal();
    let ctx = ctx();
    let rows = ledger::rows(&ctx, &work, &attempts, at(5000));
    assert_eq!(rows, ledger::rows(&ctx, &work, &attempts, at(5000)));
    for window in [(None, at(5000)), (Some(at(500)), at(2000)), (Some(at(4100)), at(4200))] {
        let base = report::report(&rows, &ctx, By::Tenant, window.0, window.1).total;
        for by in By::ALL {
            let r = report::report(&rows, &ctx, by, window.0, window.1);
            assert_eq!(r.total, base, "{by:?}");
            for k in Kind::ALL {
                assert_eq!(r.groups.iter().map(|g| g.get(k)).sum::<u64>(), r.total.get(k), "{by:?} {k:?}");
            }
            assert_eq!(r.groups.iter().map(|g| g.cost_micro_usd).sum::<u64>(), r.total.cost_micro_usd);
            assert_eq!(r.groups.iter().map(|g| g.attempts).sum::<u64>(), r.total.attempts);
        }
    }
}

#[test]
fn a_window_clips_each_span() {
    let (work, attempts) = journal();
    let ctx = ctx();
    let rows = ledger::rows(&ctx, &work, &attempts, at(5000));
    // [500, 1000): w-1 useful 2×500; w-2 own 1×100 (it ends at 600); w-3's
    // idle [100, 200) is before it, its infra 4×500; w-4.1 useful 8×500;
    // w-7 ended at 300, w-5 starts at 1000: outside.
    let r = report::report(&rows, &ctx, By::Tenant, Some(at(500)), at(1000));
    assert_eq!(r.total.useful_gpu_ms, (1000 + 4000) * S);
    assert_eq!(r.total.wasted_own_gpu_ms, 100 * S);
    assert_eq!(r.total.wasted_infra_gpu_ms, 2000 * S);
    assert_eq!(r.total.idle_gpu_ms, 0);
    // w-1 ($4/h × 500 s) and w-2 ($2/h × 100 s).
    assert_eq!(r.total.cost_micro_usd, 555_556 + 55_556);
    assert_eq!(r.total.attempts, 4, "w-1, w-2, w-3, w-4.1");
}

#[test]
fn every_failure_class_has_its_column() {
    use FailureClass as C;
    let expected = |c: C| match c {
        C::Capacity | C::Provider | C::Node | C::Comm | C::Io | C::Preempted | C::Reclaimed => {
            Kind::WastedInfra
        }
        C::GpuOom | C::CpuOom | C::Config | C::Image | C::Timeout | C::App => Kind::WastedOwn,
        C::CostCap | C::Cancelled => Kind::Decision,
    };
    for c in FailureClass::ALL {
        assert_eq!(ledger::column(c, None), expected(c), "{c}");
    }
    assert_eq!(ledger::column(C::Preempted, Some(crate::engine::EVICTED_RULE)), Kind::Decision);
    // ALL lists each class once: every class is in the test above.
    let mut all = FailureClass::ALL.to_vec();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), FailureClass::ALL.len());
}

#[test]
fn csv_figures_are_the_reports_integers_exactly() {
    let (work, attempts) = journal();
    let ctx = ctx();
    let rows = ledger::rows(&ctx, &work, &attempts, at(5000));
    let r = report::report(&rows, &ctx, By::Pool, None, at(5000));
    let csv = report::csv(&r);
    let total = csv.lines().find(|l| l.starts_with("total,")).unwrap();
    let f: Vec<&str> = total.split(',').collect();
    assert_eq!(f[3], report::fmt_ms(r.total.gpu_ms));
    assert_eq!(f[11], "4.333333");
    assert_eq!(report::fmt_ms(1_234), "1.234");
    assert_eq!(report::fmt_micro(7), "0.000007");
}

#[test]
fn the_ledger_read_back_from_a_journal_file_is_the_one_built_from_its_records() {
    let (work, attempts) = journal();
    let spec: crate::spec::Spec = serde_json::from_value(serde_json::json!({
        "name": "train",
        "runtime": { "command": ["python", "train.py"] },
        "resources": { "gpus": 1, "cpu_cores": 4 },
    }))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("canopy.db");
    let mut records = Vec::new();
    for w in &work {
        records.push(crate::engine::model::Record::Workload(Box::new(
            crate::engine::model::WorkloadRecord {
                id: w.id,
                name: "train".into(),
                spec: spec.clone().into(),
                spec_hash: format!("{:064x}", w.id.0),
                idempotency_key: None,
                priority: 50,
                state: crate::engine::model::WorkloadState::Failed,
                submitted_at: at(0),
                updated_at: at(0),
                attempts: 1,
                app_failures: 0,
                not_before: None,
                cost_usd: 0.0,
                est_cost_usd: 0.0,
                reason: None,
                class: None,
                submitted_by: w.user.clone(),
                acknowledged: None,
                exclusions: None,
                retried_as: None,
                tenant: w.tenant.clone(),
            },
        )));
    }
    records.extend(attempts.iter().map(|a| crate::engine::model::Record::Attempt(Box::new(a.clone()))));
    crate::journal::Journal::open(&path).unwrap().append(&records).unwrap();
    // Read back by a fresh reader, as after a restart.
    let j = crate::journal::Journal::open(&path).unwrap();
    let src = super::read(&j, Vec::new(), None).unwrap();
    assert_eq!((src.work, src.attempts.clone()), (work.clone(), attempts.clone()));
    let ctx = ctx();
    let now = at(5000);
    let from_store = super::read(&j, Vec::new(), None).unwrap();
    assert_eq!(
        ledger::rows(&ctx, &from_store.work, &from_store.attempts, now),
        ledger::rows(&ctx, &work, &attempts, now)
    );
}

#[test]
fn per_day_figures_split_at_utc_midnight_and_sum_to_the_window() {
    let (mut work, mut attempts) = journal();
    // T0 is 08:00 UTC: midnight is 57 600 s later. w-8 runs 2 GPUs from
    // 57 000 s to 58 200 s: 2×600 useful on each side of it.
    work.push(work_of(8));
    attempts.push(attempt(
        8,
        1,
        "cloud/a10",
        2,
        3.6,
        (57_000, Some(57_000), Some(58_200)),
        AttemptState::Succeeded,
        None,
    ));
    let ctx = ctx();
    let rows = ledger::rows(&ctx, &work, &attempts, at(90_000));
    let (since, until) = (Some(at(0)), at(90_000));
    let r = report::report(&rows, &ctx, By::Tenant, since, until);
    let days = report::days(&rows, By::Tenant, since, until);
    assert_eq!(days.len(), 2);
    assert_eq!(days[1].start.0 - days[0].start.0, report::DAY_MS);
    assert_eq!(days[1].start, at(57_600), "midnight UTC");
    let w8 = |d: &report::Day| d.groups.iter().find(|g| g.key == "c").map_or(0, |g| g.useful_gpu_ms);
    assert_eq!((w8(&days[0]), w8(&days[1])), (1200 * S, 1200 * S));
    for k in Kind::ALL {
        assert_eq!(days.iter().map(|d| d.total.get(k)).sum::<u64>(), r.total.get(k), "{k:?}");
    }
    let cost: u64 = days.iter().map(|d| d.total.cost_micro_usd).sum();
    assert!(cost.abs_diff(r.total.cost_micro_usd) <= 1, "{cost} vs {}", r.total.cost_micro_usd);
    // $3.60/h × 600 s = $0.60 on each side.
    assert_eq!(days[1].total.cost_micro_usd, 600_000);
}

fn work_of(id: u64) -> Work {
    work(id, "c", "carol")
}
