//! Fair share between tenants in the engine core, under the test clock:
//! tenants competing for the same capacity are served by their usage
//! decayed with a half-life, divided by their weights. What an owner of
//! the fleet would notice: a tenant that submits in bursts no longer
//! starves one that submits steadily, and weights 2:1 give 2:1.

mod common;

use canopy::engine::core::{Event, Reply};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::tenant::{Tenancy, TenancyDoc};
use common::*;
use std::collections::{BTreeMap, HashMap};

/// Two tenants sharing one cohort's 8 GPUs (nominal 4 each, borrowing
/// what the other leaves idle); `fair` adds `[fair_share]` with a one-hour
/// half-life.
fn tenancy(weights: (f64, f64), fair: bool) -> Tenancy {
    tenancy_with(weights, if fair { "[fair_share]\nhalf_life = \"1h\"\n" } else { "" })
}

fn tenancy_with(weights: (f64, f64), fair: &str) -> Tenancy {
    let text = format!(
        r#"{fair}
[[flavor]]
name = "lab"
[[tenant]]
name = "burst"
weight = {}
cohort = "c"
[tenant.quota.lab]
gpus = 4
[[tenant]]
name = "steady"
weight = {}
cohort = "c"
[tenant.quota.lab]
gpus = 4
"#,
        weights.0, weights.1
    );
    TenancyDoc::parse(&text, false).expect("a valid tenancy").1
}

/// The core over two nodes of 4 GPUs, its tenants, what each workload
/// runs for, and GPU-minutes used per tenant per hour.
struct Sim {
    w: World,
    /// Minutes each workload runs for.
    runs_for: HashMap<WorkloadId, i64>,
    tenant_of: HashMap<WorkloadId, &'static str>,
    /// Running attempts and when they end (clock ms).
    running: Vec<(AttemptId, i64)>,
    seen_launches: usize,
    /// (hour, tenant) → GPU-minutes.
    used: BTreeMap<(i64, &'static str), i64>,
}

impl Sim {
    fn new(tenancy: Tenancy) -> Self {
        let mut w =
            World::new(cloud_fleet(vec![(gpu_pool("lab", "A100-40", 4, 40.0, 1.0), vec!["n1", "n2"])]));
        w.send(Event::SetTenancy { tenancy: Box::new(tenancy) });
        Self {
            w,
            runs_for: HashMap::new(),
            tenant_of: HashMap::new(),
            running: Vec::new(),
            seen_launches: 0,
            used: BTreeMap::new(),
        }
    }

    fn submit(&mut self, tenant: &'static str, minutes: i64) -> WorkloadId {
        let spec = job_spec(1, "");
        let out = self.w.send(Event::Submit {
            request: 1,
            spec: Box::new(spec.clone()),
            spec_hash: spec.content_hash(),
            idempotency_key: None,
            by: None,
            tenant: Some(tenant.into()),
        });
        let id = out
            .into_iter()
            .find_map(|a| match a {
                canopy::engine::core::Action::Reply { reply: Reply::Submitted { id, .. }, .. } => Some(id),
                _ => None,
            })
            .expect("submitted");
        self.runs_for.insert(id, minutes);
        self.tenant_of.insert(id, tenant);
        self.start_launched();
        id
    }

    /// Every new launch is accepted and runs.
    fn start_launched(&mut self) {
        loop {
            let new: Vec<AttemptId> = self.w.launch_log().skip(self.seen_launches).map(|(a, _)| a).collect();
            if new.is_empty() {
                return;
            }
            self.seen_launches += new.len();
            for a in new {
                self.w.run(a);
                let end = self.w.now + self.runs_for[&a.workload] * 60_000;
                self.running.push((a, end));
            }
        }
    }

    /// One simulated minute: what runs counts, what is due ends.
    fn minute(&mut self) {
        let hour = (self.w.now - T0) / 3_600_000;
        for (a, _) in &self.running {
            *self.used.entry((hour, self.tenant_of[&a.workload])).or_default() += 1;
        }
        self.w.advance(60.0);
        let now = self.w.now;
        let (due, left): (Vec<_>, Vec<_>) = self.running.drain(..).partition(|(_, end)| *end <= now);
        self.running = left;
        for (a, _) in due {
            self.w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
            self.start_launched();
        }
    }

    /// `tenant`'s share of the GPU-minutes used in hours `from..to`.
    fn share(&self, tenant: &str, from: i64, to: i64) -> f64 {
        let in_range = |(h, _): &&(i64, &str), _: &&i64| (from..to).contains(h);
        let total: i64 = self.used.iter().filter(|(k, v)| in_range(k, v)).map(|(_, v)| v).sum();
        let mine: i64 =
            self.used.iter().filter(|(k, v)| in_range(k, v) && k.1 == tenant).map(|(_, v)| v).sum();
        mine as f64 / total.max(1) as f64
    }
}

/// Minutes a job runs: 30 to 90, spread so ends do not fall together.
fn minutes(i: i64) -> i64 {
    30 + (i * 37) % 61
}

/// `burst` submits 80 jobs at once; `steady` one every 12 minutes (about
/// what 4 GPUs run). Hours 2 to 8 are measured (two half-lives after the
/// burst arrived).
fn burst_and_steady(fair: bool) -> Sim {
    let mut s = Sim::new(tenancy((1.0, 1.0), fair));
    for i in 0..80 {
        s.submit("burst", minutes(i));
    }
    for m in 0..8 * 60 {
        if m % 12 == 0 {
            s.submit("steady", minutes(m / 12 + 1000));
        }
        s.minute();
    }
    s
}

#[test]
fn a_steady_tenant_is_not_starved_by_a_burst_and_converges_to_an_equal_share() {
    let first_come = burst_and_steady(false);
    let fair = burst_and_steady(true);
    let before = first_come.share("steady", 2, 8);
    let after = fair.share("steady", 2, 8);
    let hours: Vec<String> = (0..8).map(|h| format!("{:.2}", fair.share("steady", h, h + 1))).collect();
    eprintln!("steady's share, hours 2-8: first-come {before:.3}, fair share {after:.3}; per hour {hours:?}");
    // First-come: the burst's backlog goes first, so steady gets little.
    assert!(before < 0.25, "first-come gave steady {before:.2}");
    // Fair share: within two half-lives steady is served as often as it
    // asks, up to half.
    assert!((0.42..=0.58).contains(&after), "fair share gave steady {after:.2} (first-come {before:.2})");
    for h in 2..8 {
        let x = fair.share("steady", h, h + 1);
        assert!(x >= 0.3, "hour {h}: steady had {x:.2}");
    }
}

#[test]
fn weights_two_to_one_give_two_to_one() {
    let mut s = Sim::new(tenancy((2.0, 1.0), true));
    // Both keep a backlog throughout.
    for i in 0..120 {
        s.submit("burst", minutes(i));
        s.submit("steady", minutes(i + 500));
    }
    for _ in 0..10 * 60 {
        s.minute();
    }
    let a = s.share("burst", 3, 10);
    eprintln!("weight 2 of 3: {a:.3} of GPU-minutes in hours 3-10");
    assert!((a - 2.0 / 3.0).abs() < 0.06, "weight 2 of 3 got {a:.3}");
}

#[test]
fn without_fair_share_the_queue_is_first_come_within_priority_as_before() {
    let mut s = Sim::new(tenancy((1.0, 1.0), false));
    for i in 0..16 {
        s.submit("burst", minutes(i));
    }
    s.submit("steady", 30);
    // The burst's first 8 run; the rest, then steady's, wait in that order.
    s.minute();
    assert_eq!(s.running.len(), 8);
    assert!(s.running.iter().all(|(a, _)| s.tenant_of[&a.workload] == "burst"));
    assert_eq!(s.w.core.work_counts().fair_refiled, 0, "nothing re-filed without fair share");
}

/// With `preempt_after`, a tenant below its fair share whose work fits
/// nowhere takes capacity from borrowed work of a tenant above its share,
/// but only work that has run at least that long, and only what its next
/// workload needs: one victim for one GPU, one tenant a pass.
#[test]
fn preemption_for_fair_share_waits_for_the_minimum_runtime_and_takes_no_more_than_needed() {
    let fair = "[fair_share]\nhalf_life = \"1h\"\npreempt_after = \"30m\"\n";
    let mut s = Sim::new(tenancy_with((1.0, 1.0), fair));
    // burst holds all 8 GPUs (4 of them borrowed) for 10 hours.
    for _ in 0..8 {
        s.submit("burst", 600);
    }
    for _ in 0..5 {
        s.minute();
    }
    s.submit("steady", 120);
    s.submit("steady", 120);
    let stops = stops_until(&mut s, 65);
    for (_, a) in &stops {
        assert_eq!(s.tenant_of[&a.workload], "burst", "only the tenant above its share loses work");
    }
    let when: Vec<i64> = stops.iter().map(|(m, _)| *m).collect();
    eprintln!("victims stopped at minutes {when:?}");
    assert_eq!(stops.len(), 2, "one victim for each of steady's two one-GPU jobs: {when:?}");
    assert!(when.iter().all(|m| *m >= 30), "no victim before it ran 30 minutes: {when:?}");
    let steady_running = s.running.iter().filter(|(a, _)| s.tenant_of[&a.workload] == "steady").count();
    assert_eq!(steady_running, 2, "steady runs both");
    let stopped = s.w.attempt(stops[0].1);
    assert_eq!(stopped.class, Some(canopy::failure::FailureClass::Reclaimed));
    let said = format!("{:?}", stopped.stop);
    assert!(said.contains("preempted for fair share") && said.contains("steady is at"), "{said}");
}

/// Three tenants of weight 1 in one cohort of 8 GPUs: `big` (nominal 2),
/// `mid` (2) and `small` (4).
fn three_tenants(fair: &str) -> Tenancy {
    let mut text = format!("{fair}\n[[flavor]]\nname = \"lab\"\n");
    for (name, gpus) in [("big", 2), ("mid", 2), ("small", 4)] {
        text.push_str(&format!(
            "[[tenant]]\nname = \"{name}\"\ncohort = \"c\"\n[tenant.quota.lab]\ngpus = {gpus}\n"
        ));
    }
    TenancyDoc::parse(&text, false).expect("a valid tenancy").1
}

/// `big` holds 5 GPUs from minute 0 and `mid` 3 from minute 2, both with
/// more waiting; `small`'s three one-GPU jobs arrive at minute 20. Each
/// one's fair share of the 8 GPUs is 8/3 (all ask more). Runs to minute
/// 100; returns the stops (minute, attempt) and the sim.
fn small_arrives_late(fair: &str) -> (Vec<(i64, AttemptId)>, Sim) {
    let mut s = Sim::new(three_tenants(fair));
    for _ in 0..5 {
        s.submit("big", 600);
    }
    s.minute();
    s.minute();
    for _ in 0..3 {
        s.submit("mid", 600);
    }
    s.submit("big", 600);
    s.submit("mid", 600);
    while (s.w.now - T0) / 60_000 < 20 {
        s.minute();
    }
    for _ in 0..3 {
        s.submit("small", 120);
    }
    let stops = stops_until(&mut s, 100);
    (stops, s)
}

/// Runs `s` to minute `until`, confirming every stop at once; the stops
/// (minute, attempt).
fn stops_until(s: &mut Sim, until: i64) -> Vec<(i64, AttemptId)> {
    let mut stops: Vec<(i64, AttemptId)> = Vec::new();
    let mut seen =
        s.w.actions.iter().filter(|a| matches!(a, canopy::engine::core::Action::Terminate { .. })).count();
    while (s.w.now - T0) / 60_000 < until {
        s.minute();
        let new: Vec<AttemptId> =
            s.w.actions
                .iter()
                .filter_map(|a| match a {
                    canopy::engine::core::Action::Terminate { attempt, .. } => Some(*attempt),
                    _ => None,
                })
                .skip(seen)
                .collect();
        seen += new.len();
        let minute = (s.w.now - T0) / 60_000;
        for a in new {
            stops.push((minute, a));
            s.running.retain(|(x, _)| *x != a);
            s.w.confirm_terminated(a, ProviderEnd::Signaled { signal: 15 });
            s.start_launched();
        }
    }
    stops
}

/// With `preempt_gaps`, a pass takes room from the tenant furthest above
/// its demand-aware share (`big`, 5 of 8/3), never from one that would
/// fall below its share (`mid`, 3 of 8/3, though its work lost less and
/// is borrowed too), never before the minimum runtime, and never more
/// than brings `small` to its share: two of its three jobs.
#[test]
fn gap_preemption_takes_from_the_tenant_furthest_above_its_share_and_no_more_than_its_gap() {
    let fair = "[fair_share]\nhalf_life = \"1h\"\npreempt_after = \"30m\"\npreempt_gaps = true\n";
    let (stops, s) = small_arrives_late(fair);
    let who: Vec<(i64, &str)> = stops.iter().map(|(m, a)| (*m, s.tenant_of[&a.workload])).collect();
    eprintln!("victims (minute, tenant): {who:?}");
    assert!(stops.iter().all(|(m, _)| *m >= 30), "no victim before it ran 30 minutes: {who:?}");
    assert!(
        who.iter().all(|(_, t)| *t == "big"),
        "only the tenant furthest above its share loses work: {who:?}"
    );
    assert_eq!(stops.len(), 2, "two jobs bring small to 2 of its 8/3; a third would take it above: {who:?}");
    let small_running = s.running.iter().filter(|(a, _)| s.tenant_of[&a.workload] == "small").count();
    assert_eq!(small_running, 2, "small runs two");
    let stopped = s.w.attempt(stops[0].1);
    assert_eq!(stopped.class, Some(canopy::failure::FailureClass::Reclaimed));
    let said = format!("{:?}", stopped.stop);
    assert!(
        said.contains(
            "preempted for fair share (small holds 0 GPUs of its fair share 2.7; big holds 5 of its 2.7)"
        ),
        "{said}"
    );
}

/// With `preempt_gaps`, one pass serves every tenant below its share, not
/// one tenant a pass: `big` holds all 8 GPUs, `mid` and `small` each wait
/// for one; at minute 30 (when big's work has run 30 minutes) both get
/// room in the same pass, from big.
#[test]
fn gap_preemption_serves_every_tenant_below_its_share_in_one_pass() {
    let fair = "[fair_share]\nhalf_life = \"1h\"\npreempt_after = \"30m\"\npreempt_gaps = true\n";
    let mut s = Sim::new(three_tenants(fair));
    for _ in 0..8 {
        s.submit("big", 600);
    }
    s.submit("big", 600);
    while (s.w.now - T0) / 60_000 < 20 {
        s.minute();
    }
    s.submit("mid", 120);
    s.submit("small", 120);
    let stops = stops_until(&mut s, 60);
    let who: Vec<(i64, &str)> = stops.iter().map(|(m, a)| (*m, s.tenant_of[&a.workload])).collect();
    eprintln!("victims (minute, tenant): {who:?}");
    assert_eq!(who, vec![(30, "big"), (30, "big")], "both in the pass at minute 30, both of big");
    for t in ["mid", "small"] {
        let n = s.running.iter().filter(|(a, _)| s.tenant_of[&a.workload] == t).count();
        assert_eq!(n, 1, "{t} runs its job");
    }
}

/// The Terminate actions sent so far.
fn terminates(s: &Sim) -> Vec<AttemptId> {
    s.w.actions
        .iter()
        .filter_map(|a| match a {
            canopy::engine::core::Action::Terminate { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

/// Three tenants in 8 GPUs (`three_tenants`): big holds them all, mid
/// has used some (a 15-minute job at minute 0), small none. At minute 20
/// mid's one-GPU job X waits; at minute 30 (big's work has run 30
/// minutes) a fair-share preemption stops one of big's for X. Returns
/// the sim, X and the victim, its stop not yet confirmed.
fn preempted_for_mid(fair: &str) -> (Sim, WorkloadId, AttemptId) {
    let mut s = Sim::new(three_tenants(fair));
    for _ in 0..7 {
        s.submit("big", 600);
    }
    s.submit("mid", 15);
    s.minute();
    // Takes mid's GPU when its job ends, and one more waits.
    s.submit("big", 600);
    s.submit("big", 600);
    while (s.w.now - T0) / 60_000 < 20 {
        s.minute();
    }
    let x = s.submit("mid", 120);
    let before = terminates(&s).len();
    while terminates(&s).len() == before {
        assert!((s.w.now - T0) / 60_000 < 40, "no preemption for mid's job by minute 40");
        s.minute();
    }
    let stops = terminates(&s);
    assert_eq!(stops.len(), before + 1, "one victim for one GPU");
    let victim = stops[before];
    assert_eq!(s.tenant_of[&victim.workload], "big");
    s.running.retain(|(a, _)| *a != victim);
    (s, x, victim)
}

/// The victim's stop is confirmed; new launches start.
fn confirm(s: &mut Sim, victim: AttemptId) {
    s.w.confirm_terminated(victim, ProviderEnd::Signaled { signal: 15 });
    s.start_launched();
}

fn runs(s: &Sim, id: WorkloadId) -> bool {
    s.running.iter().any(|(a, _)| a.workload == id)
}

const ONE_A_PASS: &str = "[fair_share]\nhalf_life = \"1h\"\npreempt_after = \"30m\"\n";
const GAPS: &str = "[fair_share]\nhalf_life = \"1h\"\npreempt_after = \"30m\"\npreempt_gaps = true\n";

/// The room a fair-share preemption frees goes to the workload it was
/// freed for (X, of mid), on the victim's node, not to work of a tenant
/// the serving order puts first (small, which has used nothing) that
/// arrived while the victim was stopping. Both preemption passes.
#[test]
fn room_freed_by_a_fair_share_preemption_goes_to_the_workload_it_was_freed_for() {
    for (mode, fair) in [("one workload a pass", ONE_A_PASS), ("gap pass", GAPS)] {
        let (mut s, x, victim) = preempted_for_mid(fair);
        let victim_node =
            s.w.launch_log()
                .find(|(a, _)| *a == victim)
                .map(|(_, n)| n.to_string())
                .expect("victim's launch");
        let c = s.submit("small", 120);
        assert!(!runs(&s, c), "{mode}: no room yet for small's job");
        confirm(&mut s, victim);
        assert!(runs(&s, x), "{mode}: X runs in the room freed for it");
        assert_eq!(s.w.launched(x), Some(victim_node.as_str()), "{mode}: on the victim's node");
        assert!(!runs(&s, c), "{mode}: small's job, first in the serving order, did not take X's room");
        let kept = s.w.events(x, EventKind::Unschedulable);
        assert!(
            kept.iter().any(|e| e.starts_with(&format!("keeping {victim_node} for this workload"))),
            "{kept:?}"
        );
    }
}

/// X cancelled while its victim stops: the room ends with it, and the
/// freed GPU goes by the serving order (small's job).
#[test]
fn the_room_ends_when_its_workload_is_cancelled() {
    let (mut s, x, victim) = preempted_for_mid(ONE_A_PASS);
    let c = s.submit("small", 120);
    s.w.send(Event::Cancel { request: 99, id: x });
    confirm(&mut s, victim);
    assert!(runs(&s, c), "the room of a cancelled workload is open to others");
}

/// A victim that takes longer to stop than its grace (30 s) and the
/// margin (60 s) no longer keeps its node from others: at minute 32 the
/// room is over, X is told, and small's job arriving then takes the GPU
/// when the stop is finally confirmed.
#[test]
fn the_room_ends_after_its_bound() {
    let (mut s, x, victim) = preempted_for_mid(ONE_A_PASS);
    s.minute();
    s.minute();
    let said = s.w.events(x, EventKind::Unschedulable);
    assert!(said.iter().any(|e| e.contains("open to others again")), "{said:?}");
    let c = s.submit("small", 120);
    confirm(&mut s, victim);
    assert!(runs(&s, c), "after the bound the freed GPU goes by the serving order");
    assert!(!runs(&s, x));
}

/// Placed, X's room is over: nothing else is kept out of the victim's
/// node. Another of big's jobs there ends (before the room's bound,
/// minute 31.5): small's job, arriving now, takes its GPU.
#[test]
fn the_room_ends_when_its_workload_is_placed() {
    let (mut s, x, victim) = preempted_for_mid(ONE_A_PASS);
    let node = s.w.launch_log().find(|(a, _)| *a == victim).map(|(_, n)| n.to_string()).expect("launched");
    confirm(&mut s, victim);
    assert!(runs(&s, x));
    let c = s.submit("small", 120);
    assert!(!runs(&s, c));
    let launched_on = |s: &Sim, a: AttemptId| s.w.launch_log().any(|(b, n)| b == a && n == node);
    let other = s
        .running
        .iter()
        .map(|(a, _)| *a)
        .find(|a| a.workload != x && launched_on(&s, *a))
        .expect("another job on the victim's node");
    s.running.retain(|(a, _)| *a != other);
    s.w.end(other, ProviderEnd::Exited { code: 0 }, &[]);
    s.start_launched();
    assert!(runs(&s, c), "nothing is kept for a workload once placed");
    assert_eq!(s.w.launched(c), Some(node.as_str()));
}

/// `[fair_share]` removed while a room is kept: the room still ends at
/// its bound, and the core does not ask to be woken in the past.
#[test]
fn a_room_ends_at_its_bound_after_fair_share_is_turned_off() {
    let (mut s, x, _victim) = preempted_for_mid(ONE_A_PASS);
    s.w.send(Event::SetTenancy { tenancy: Box::new(three_tenants("")) });
    s.minute();
    s.minute();
    let said = s.w.events(x, EventKind::Unschedulable);
    assert!(said.iter().any(|e| e.contains("open to others again")), "{said:?}");
    let wake = s.w.core.next_wake();
    assert!(wake.is_none_or(|t| t.0 > s.w.now), "a wake in the past: {wake:?} at {}", s.w.now);
}
