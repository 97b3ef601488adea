//! Budgets in the engine core, under the test clock: what a team lead or a
//! finance person would notice. Work that would take a tenant's (or a
//! token's) budget past its limit waits with the budget and the numbers in
//! its reason, and starts when the period renews; 80 % and 100 % raise an
//! event; a hard budget stops running work (class `cost-cap`, the budget
//! named); and the books rebuilt from ended attempts after a restart are
//! the ones the running core kept, equal to the usage ledger's.

mod common;

use canopy::engine::core::{Closed, Event};
use canopy::engine::model::*;
use canopy::failure::{FailureClass, ProviderEnd};
use canopy::tenant::{Tenancy, TenancyDoc};
use common::*;

/// 2023-11-15T00:00:00Z: the first midnight after [`T0`] (22:13:20 UTC).
const MIDNIGHT: i64 = 1_700_006_400_000;

fn tenancy(budgets: &str) -> Tenancy {
    let text = format!("[[tenant]]\nname = \"team-b\"\n[[tenant]]\nname = \"team-c\"\n{budgets}");
    TenancyDoc::parse(&text, false).expect("a valid tenancy").1
}

/// Three one-GPU nodes at $10 an hour.
fn world(budgets: &str) -> World {
    let mut w =
        World::new(cloud_fleet(vec![(gpu_pool("lab", "A100-40", 1, 40.0, 10.0), vec!["n1", "n2", "n3"])]));
    w.send(Event::SetTenancy { tenancy: Box::new(tenancy(budgets)) });
    w
}

fn submit(w: &mut World, tenant: &str, by: &str, extra: &str) -> WorkloadId {
    w.submit_for(&job_spec(1, extra), tenant, Some(by))
}

fn budget_events(w: &World) -> Vec<String> {
    w.records()
        .filter_map(|r| match r {
            Record::Event(e) if e.kind == EventKind::Budget => Some(e.message.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_tenant_budget_holds_work_at_its_limit_with_the_numbers_and_releases_it_when_the_day_renews() {
    let mut w = world("[[budget]]\ntenant = \"team-b\"\nperiod = \"day\"\nusd = 25\n");
    let hour = "expected_runtime = \"1h\"";
    let a = submit(&mut w, "team-b", "alice", hour);
    let b = submit(&mut w, "team-b", "alice", hour);
    let c = submit(&mut w, "team-b", "alice", hour);
    // Another tenant is not counted.
    let other = submit(&mut w, "team-c", "carol", hour);
    let (a1, _) = w.last_launch(a);
    let (b1, _) = w.last_launch(b);
    assert!(w.launched(other).is_some(), "team-c's work is not held by team-b's budget");
    assert_eq!(w.launches(c), 0, "the third $10 hour would pass $25");
    let reason = w.workload(c).reason.unwrap_or_default();
    assert_eq!(
        reason,
        "held by budget team-b-day (tenant team-b, per day): estimated $10.00 but $5.00 is left \
         ($0.00 spent, $20.00 expected by running work of $25.00); the period renews 2023-11-15 00:00 UTC",
    );
    assert_eq!(w.state(c), WorkloadState::Queued);
    w.run(a1);
    w.run(b1);
    // An hour later both end: $20 spent, 80 %; still too little left.
    w.advance(3600.0);
    w.end(a1, ProviderEnd::Exited { code: 0 }, &[]);
    w.end(b1, ProviderEnd::Exited { code: 0 }, &[]);
    assert_eq!(w.launches(c), 0);
    let reason = w.workload(c).reason.unwrap_or_default();
    assert!(reason.contains("estimated $10.00 but $5.00 is left ($20.00 spent of $25.00)"), "{reason}");
    let events = budget_events(&w);
    assert!(
        events.iter().any(|m| m.contains("passed 80%: $20.00 of $25.00 spent; work still starts")),
        "{events:#?}"
    );
    let standing = &w.core.budget_standings(Millis(w.now))[0];
    assert_eq!((standing.spent.micro_usd, standing.holding), (20_000_000, 1));
    // Midnight UTC: the period renews and the held work starts, once.
    w.now = MIDNIGHT - 1000;
    w.send(Event::Tick);
    assert_eq!(w.launches(c), 0, "not before the period renews");
    w.now = MIDNIGHT;
    w.send(Event::Tick);
    assert_eq!(w.launches(c), 1, "placed once the new day's budget has room");
    let standing = &w.core.budget_standings(Millis(w.now))[0];
    assert_eq!((standing.spent.micro_usd, standing.holding), (0, 0));
    assert_eq!(standing.committed.micro_usd, 10_000_000, "the new attempt's hour is expected");
}

#[test]
fn a_token_budget_in_gpu_hours_holds_that_tokens_work_only() {
    let mut w = world("[[budget]]\ntoken = \"ci-bot\"\nperiod = \"week\"\ngpu_hours = 1\n");
    let half = "expected_runtime = \"40m\"";
    let a = submit(&mut w, "team-b", "ci-bot", half);
    let b = submit(&mut w, "team-b", "ci-bot", half);
    let c = submit(&mut w, "team-b", "alice", half);
    assert!(w.launched(a).is_some());
    assert_eq!(w.launches(b), 0, "two 40-minute GPU jobs would pass one GPU-hour");
    assert!(w.launched(c).is_some(), "another principal's work is not counted");
    let reason = w.workload(b).reason.unwrap_or_default();
    assert!(
        reason.starts_with(
            "held by budget ci-bot-week (token ci-bot, per week): estimated 0.67 GPU-h but 0.33 GPU-h is left"
        ),
        "{reason}"
    );
    // The week renews on Monday 2023-11-20 00:00 UTC.
    assert!(reason.ends_with("the period renews 2023-11-20 00:00 UTC"), "{reason}");
    // Cancelling the held workload ends it; the budget holds nothing.
    w.send(Event::Cancel { request: 9, id: b });
    assert_eq!(w.state(b), WorkloadState::Cancelled);
    assert_eq!(w.core.budget_standings(Millis(w.now))[0].holding, 0);
}

#[test]
fn a_hard_budget_stops_running_work_with_grace_as_cost_cap_naming_the_budget() {
    let mut w = world(
        "[[budget]]\nname = \"b-cap\"\ntenant = \"team-b\"\nperiod = \"month\"\nusd = 5\nhard = true\n",
    );
    // No runtime given: nothing to estimate, so it starts while money is left.
    let a = submit(&mut w, "team-b", "alice", "");
    let (a1, _) = w.last_launch(a);
    w.run(a1);
    let running_since = w.now;
    // The core asks to be woken as running work passes 80 % ($4 at $10/h:
    // 24 minutes), then 100 % (30 minutes): no polling in between.
    let wake = w.core.next_wake().expect("a wake for the budget").0;
    assert!((wake - running_since - 1_440_000).abs() <= 2_000, "woken after {} ms", wake - running_since);
    w.now = wake;
    w.send(Event::Tick);
    let events = budget_events(&w);
    assert!(events.iter().any(|m| m.contains("passed 80%")), "{events:#?}");
    assert!(!w.terminated(a1), "not stopped before the budget is spent");
    let wake = w.core.next_wake().expect("a wake for the budget").0;
    assert!((wake - running_since - 1_800_000).abs() <= 2_000, "woken after {} ms", wake - running_since);
    w.now = wake;
    w.send(Event::Tick);
    assert!(w.terminated(a1), "stopped once the hard budget is spent");
    let stop = w.attempt(a1).stop.expect("a durable stop reason");
    assert!(matches!(&stop, ProviderEnd::BudgetSpent { budget, .. } if budget == "b-cap"), "{stop:?}");
    w.confirm_terminated(a1, stop);
    let att = w.attempt(a1);
    assert_eq!(att.class, Some(FailureClass::CostCap));
    assert_eq!(att.rule.as_deref(), Some("canopy.budget"));
    let evidence = att.evidence.unwrap_or_default();
    assert!(evidence.contains("budget b-cap spent: $5.00 of $5.00 spent this month"), "{evidence}");
    assert_eq!(w.state(a), WorkloadState::Failed, "cost-cap is final");
    let events = budget_events(&w);
    assert!(
        events.iter().any(|m| m.contains("passed 100%") && m.contains("running work it counts is stopped")),
        "{events:#?}"
    );
    // New work for the tenant waits: nothing is left this month.
    let b = submit(&mut w, "team-b", "alice", "");
    assert_eq!(w.launches(b), 0);
    assert!(w.workload(b).reason.unwrap_or_default().contains("$0.00 is left"));
}

#[test]
fn a_soft_budget_never_stops_running_work() {
    let mut w = world("[[budget]]\ntenant = \"team-b\"\nperiod = \"month\"\nusd = 5\n");
    let a = submit(&mut w, "team-b", "alice", "");
    let (a1, _) = w.last_launch(a);
    w.run(a1);
    for _ in 0..6 {
        w.advance(1800.0);
    }
    assert!(!w.terminated(a1), "spent $30 of $5 and still running");
    let f = w.core.budget_standings(Millis(w.now))[0].fraction();
    assert!((f - 6.0).abs() < 0.01, "{f}");
}

#[test]
fn the_books_rebuilt_from_ended_attempts_equal_the_running_cores_and_the_ledgers() {
    let budgets = "[[budget]]\ntenant = \"team-b\"\nperiod = \"day\"\nusd = 1000\ngpu_hours = 100\n\
                   [[budget]]\ntoken = \"ci-bot\"\nperiod = \"month\"\nusd = 1000\n";
    let mut w = world(budgets);
    // Ended work: a success, a node fault, an own error; and one still running.
    let mut ended = Vec::new();
    for (by, end) in [
        ("ci-bot", ProviderEnd::Exited { code: 0 }),
        ("alice", ProviderEnd::NodeLost { message: "gone".into() }),
        ("ci-bot", ProviderEnd::Exited { code: 1 }),
    ] {
        let id = submit(&mut w, "team-b", by, "[retry]\nmax_attempts = 1\ninfra_retries = 0\n");
        let (a1, _) = w.last_launch(id);
        w.run(a1);
        w.advance(600.0);
        w.end(a1, end, &[]);
        ended.push(a1);
    }
    let live = submit(&mut w, "team-b", "alice", "");
    let (l1, _) = w.last_launch(live);
    w.run(l1);
    w.advance(900.0);
    let now = Millis(w.now);
    let before = w.core.budget_standings(now);
    // A restart: a new core with the same tenancy and live work, the
    // ended attempts read back from the journal (here: its records).
    let closed: Vec<Closed> = ended
        .iter()
        .map(|a| {
            let wl = w.workload(a.workload);
            Closed { tenant: wl.tenant.clone(), user: wl.submitted_by.clone(), attempt: w.attempt(*a) }
        })
        .collect();
    let mut again = world(budgets);
    again.now = w.now;
    let live_rec = w.workload(live);
    again.core.restore(
        canopy::engine::core::Restore {
            workloads: vec![live_rec],
            attempts: vec![w.attempt(l1)],
            health: vec![],
            max_id: live.0,
            id_floor: 0,
            intents: Default::default(),
        },
        now,
    );
    again.core.restore_budgets(closed, now);
    let after = again.core.budget_standings(now);
    assert_eq!(before, after, "rebuilt books equal the running core's");
    // And both equal `canopy usage`'s report over the same attempts,
    // grouped by tenant and by user, within the budgets' periods.
    let mut attempts: Vec<AttemptRecord> = ended.iter().map(|a| w.attempt(*a)).collect();
    attempts.push(w.attempt(l1));
    attempts.sort_by_key(|a| a.id);
    let mut ids: Vec<WorkloadId> = attempts.iter().map(|a| a.id.workload).collect();
    ids.dedup();
    let work: Vec<canopy::usage::Work> =
        ids.iter().map(|id| canopy::usage::Work::of(&w.workload(*id), None)).collect();
    let ctx = canopy::usage::Context::from_pools(Default::default(), Default::default());
    let rows = canopy::usage::ledger::rows(&ctx, &work, &attempts, now);
    let line = |by: canopy::usage::By, key: &str, i: usize| {
        let r = canopy::usage::report::report(&rows, &ctx, by, Some(before[i].start), before[i].end.min(now));
        r.groups.into_iter().find(|l| l.key == key).expect("a line")
    };
    let tenant = line(canopy::usage::By::Tenant, "team-b", 0);
    assert_eq!((before[0].spent.micro_usd, before[0].spent.gpu_ms), (tenant.cost_micro_usd, tenant.gpu_ms));
    let bot = line(canopy::usage::By::User, "ci-bot", 1);
    assert_eq!(before[1].spent.micro_usd, bot.cost_micro_usd);
    let cost = tenant.cost_micro_usd;
    // 10 + 10 + 10 + 15 minutes running at $10/h, each attempt rounded
    // to a millionth of a dollar as the ledger rounds it.
    assert_eq!(cost, 7_500_001);
    // ci-bot's budget counts only its two attempts.
    assert_eq!(before[1].spent.micro_usd, 3_333_334);
}

/// Work a budget holds is not placed again on every capacity change (it
/// would only be held again): 20 held workloads, 30 other jobs that come
/// and go, and the queue is asked about each of those 30 alone.
#[test]
fn held_work_is_not_placed_again_when_capacity_changes() {
    let mut w = world("[[budget]]\ntenant = \"team-b\"\nperiod = \"month\"\nusd = 0\n");
    let held: Vec<WorkloadId> = (0..20).map(|_| submit(&mut w, "team-b", "alice", "")).collect();
    assert!(held.iter().all(|id| w.launches(*id) == 0));
    let taken = w.core.work_counts().taken;
    for _ in 0..30 {
        let id = submit(&mut w, "team-c", "carol", "");
        let (a, _) = w.last_launch(id);
        w.run(a);
        w.advance(60.0);
        w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    }
    let per_job = (w.core.work_counts().taken - taken) as f64 / 30.0;
    assert!(per_job <= 1.0, "{per_job} placements per other job: held work is asked again");
    assert_eq!(w.core.budget_standings(Millis(w.now))[0].holding, 20);
}
