//! Webhook deliveries in the engine core, on its test clock (issue 31):
//! each is journalled in the same batch as the change it tells of and
//! sent only after; a workload's deliveries go strictly in order; no more
//! than the configured number are in flight, so a receiver that never
//! answers holds back deliveries and nothing else; a failed try is tried
//! again with doubling backoff until the retry period is over; and what is
//! pending comes back after a restart under ids never used before.

mod common;

use canopy::engine::command::Refusal;
use canopy::engine::core::{Action, CoreConfig, DeliveryOutcome, Event, Reply};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::notify::Rules;
use common::{World, cloud_fleet, gpu_pool, job_spec};

fn rules(max_in_flight: usize) -> Rules {
    Rules { max_in_flight, retry_for_ms: 300_000, ..Rules::default() }
}

fn world(nodes: usize, max_in_flight: usize) -> World {
    let names: Vec<String> = (0..nodes).map(|i| format!("n{i}")).collect();
    let fleet = cloud_fleet(vec![(
        gpu_pool("a100", "A100", 1, 80.0, 1.0),
        names.iter().map(String::as_str).collect(),
    )]);
    World::with(fleet, CoreConfig { webhooks: Some(rules(max_in_flight)), ..CoreConfig::default() })
}

const EVERY: &str = "[notify]\nwebhook = \"https://hooks.example.com/canopy\"\n\
                     events = [\"running\", \"retrying\", \"succeeded\", \"failed\", \"cancelled\"]";

fn submit(w: &mut World, extra: &str) -> WorkloadId {
    match w.submit_spec(&job_spec(1, extra), None) {
        Reply::Submitted { id, .. } => id,
        other => panic!("not accepted: {other:?}"),
    }
}

/// The deliveries the core asked the shell to try, in order.
fn sent(actions: &[Action]) -> Vec<DeliveryRecord> {
    actions
        .iter()
        .filter_map(|a| if let Action::Deliver(d) = a { Some((**d).clone()) } else { None })
        .collect()
}

fn delivered(w: &mut World, id: u64, outcome: DeliveryOutcome) -> Vec<Action> {
    w.send(Event::Delivered { id, outcome })
}

/// The latest journalled state of every delivery.
fn journalled(w: &World) -> std::collections::BTreeMap<u64, DeliveryRecord> {
    w.records()
        .filter_map(|r| if let Record::Delivery(d) = r { Some((d.id, (**d).clone())) } else { None })
        .collect()
}

#[test]
fn a_delivery_is_journalled_before_it_is_sent_and_a_workloads_deliveries_go_in_order() {
    let mut w = world(2, 8);
    let id = submit(&mut w, EVERY);
    let (a, _) = w.last_launch(id);
    w.ack(a);
    let out = w.send(Event::Status { attempt: a, status: canopy::providers::AttemptStatus::Running });
    // The record of the delivery comes before the request to send it, in
    // the same batch as the attempt's running record: durable first.
    let rec =
        out.iter().position(|x| matches!(x, Action::Record(Record::Delivery(d)) if d.event == "running"));
    let send = out.iter().position(|x| matches!(x, Action::Deliver(d) if d.event == "running"));
    let running = out
        .iter()
        .position(|x| matches!(x, Action::Record(Record::Attempt(t)) if t.state == AttemptState::Running));
    assert!(rec.is_some() && running.is_some() && rec < send, "{out:#?}");
    let first = sent(&out).remove(0);
    let body: serde_json::Value = serde_json::from_str(&first.body).unwrap();
    assert_eq!(body["event"], "running");
    assert_eq!(body["workload"]["id"], id.to_string());
    assert_eq!(body["id"], first.id.to_string());

    // The node is lost: a retry is decided while "running" is still in
    // flight, so "retrying" waits for it.
    w.end(a, ProviderEnd::NodeLost { message: "host down".into() }, &[]);
    let retrying = journalled(&w).into_values().find(|d| d.event == "retrying").expect("a retrying delivery");
    assert!(sent(&w.actions).iter().all(|d| d.event != "retrying"), "not before the one before it");
    // The receiver answers 503: "running" is tried again later, and still
    // nothing after it goes.
    let out = delivered(&mut w, first.id, DeliveryOutcome::Answered(503));
    assert!(sent(&out).is_empty(), "{out:#?}");
    let ev = w.events(id, EventKind::Webhook);
    assert!(
        ev[0].contains("webhook")
            && ev[0].contains("(running) to https://hooks.example.com, try 1: HTTP 503; next try in"),
        "{ev:?}"
    );
    assert!(!ev[0].contains("/canopy"), "the URL's path is never shown: {ev:?}");
    w.advance(13.0);
    let again = sent(&w.actions);
    assert_eq!(again.len(), 2, "running tried again after its backoff");
    let out = delivered(&mut w, first.id, DeliveryOutcome::Answered(200));
    // Delivered: now the next of this workload goes.
    assert_eq!(sent(&out).iter().map(|d| d.id).collect::<Vec<_>>(), vec![retrying.id]);
    assert_eq!(journalled(&w)[&first.id].state, DeliveryState::Delivered);
    assert_eq!(journalled(&w)[&first.id].tries, 2);
    delivered(&mut w, retrying.id, DeliveryOutcome::Answered(204));

    let (a2, _) = w.last_launch(id);
    w.run(a2);
    w.end(a2, ProviderEnd::Exited { code: 0 }, &[]);
    let order: Vec<String> = journalled(&w).into_values().map(|d| d.event).collect();
    assert_eq!(order, vec!["running", "retrying", "running", "succeeded"]);
    let ids: Vec<u64> = journalled(&w).into_keys().collect();
    assert!(ids.windows(2).all(|p| p[0] < p[1]), "ids grow: {ids:?}");
}

#[test]
fn a_receiver_that_never_answers_holds_back_deliveries_and_nothing_else() {
    let mut w = world(12, 3);
    let ids: Vec<WorkloadId> = (0..12).map(|_| submit(&mut w, EVERY)).collect();
    for &id in &ids {
        let (a, _) = w.last_launch(id);
        w.run(a);
    }
    for &id in &ids {
        let (a, _) = w.last_launch(id);
        w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    }
    // Placement went on: every workload ran and succeeded, each launched once.
    for &id in &ids {
        assert_eq!(w.state(id), WorkloadState::Succeeded);
        assert_eq!(w.launches(id), 1);
    }
    // 24 deliveries made, 3 in flight, none answered: no more are sent
    // while they are out.
    assert_eq!(journalled(&w).len(), 24);
    w.advance(60.0);
    let in_flight = sent(&w.actions);
    assert_eq!(in_flight.len(), 3, "at most the configured number in flight");
    assert_eq!(w.core.deliveries(), (24, 3));

    // The shell's bound on a try ends each with no answer: they back off,
    // and the next workloads' deliveries take their places — never more
    // than 3 out at once.
    let mut out_now: std::collections::VecDeque<u64> = in_flight.iter().map(|d| d.id).collect();
    let mut tries: std::collections::BTreeMap<u64, Vec<i64>> = Default::default();
    for _ in 0..2000 {
        let before = w.actions.len();
        match out_now.pop_front() {
            Some(id) => {
                tries.entry(id).or_default().push(w.now);
                delivered(&mut w, id, DeliveryOutcome::NoAnswer("no answer within 10 s".into()));
            }
            None => w.advance(1.0),
        }
        out_now.extend(sent(&w.actions[before..]).iter().map(|d| d.id));
        assert!(out_now.len() <= 3, "in flight: {out_now:?}");
        if journalled(&w).values().all(|d| d.state != DeliveryState::Pending) {
            break;
        }
    }
    assert!(journalled(&w).values().all(|d| d.state == DeliveryState::GivenUp));
    assert!(w.events(ids[0], EventKind::Webhook).last().unwrap().contains("given up after trying for"));
    // The retry period (5 minutes here) passed: all given up, each after
    // tries spaced 10 s, 20 s, 40 s ... (±20 %).
    let first = tries.values().next().unwrap();
    let gaps: Vec<i64> = first.windows(2).map(|p| p[1] - p[0]).collect();
    assert!(gaps.len() >= 3, "{gaps:?}");
    for (i, g) in gaps.iter().take(4).enumerate() {
        let base = 10_000i64 << i;
        assert!(*g >= base * 8 / 10, "try {}: {g} ms after the one before, backoff {base} ms", i + 2);
    }
}

#[test]
fn a_refused_target_is_given_up_at_once_and_the_next_goes() {
    let mut w = world(1, 8);
    let id = submit(&mut w, EVERY);
    let (a, _) = w.last_launch(id);
    w.run(a);
    w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    let first = sent(&w.actions).remove(0);
    let out = delivered(
        &mut w,
        first.id,
        DeliveryOutcome::Refused(
            "webhook host hooks.example.com resolves to 169.254.169.254, a cloud metadata address".into(),
        ),
    );
    assert_eq!(journalled(&w)[&first.id].state, DeliveryState::GivenUp);
    assert_eq!(sent(&out).len(), 1, "the succeeded delivery goes next");
    let ev = w.events(id, EventKind::Webhook);
    assert!(ev[0].ends_with("cloud metadata address; given up"), "{ev:?}");
}

#[test]
fn a_spec_asking_for_a_webhook_is_refused_where_the_server_sends_none_or_may_not_call_it() {
    let fleet = cloud_fleet(vec![(gpu_pool("a100", "A100", 1, 80.0, 1.0), vec!["n0"])]);
    let mut off = World::new(fleet);
    match off.submit_spec(&job_spec(1, EVERY), None) {
        Reply::Error { code: Refusal::Invalid, message } => {
            assert!(
                message.contains("does not send webhooks") && message.contains("CANOPY_WEBHOOK_SECRET"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    let mut on = world(1, 8);
    let plain = "[notify]\nwebhook = \"http://hooks.example.com/x\"";
    match on.submit_spec(&job_spec(1, plain), None) {
        Reply::Error { code: Refusal::Invalid, message } => {
            assert!(message.contains("use https"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let loopback = "[notify]\nwebhook = \"https://127.0.0.1:8443/x\"";
    match on.submit_spec(&job_spec(1, loopback), None) {
        Reply::Error { message, .. } => assert!(message.contains("loopback"), "{message}"),
        other => panic!("{other:?}"),
    }
    // Without [notify] nothing is delivered.
    let id = submit(&mut on, "");
    let (a, _) = on.last_launch(id);
    on.run(a);
    on.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    assert!(journalled(&on).is_empty());
}

#[test]
fn pending_deliveries_come_back_after_a_restart_under_new_ids_after_the_last() {
    let mut w = world(1, 8);
    let pending = DeliveryRecord {
        id: 41,
        workload: WorkloadId(7),
        event: "succeeded".into(),
        url: "https://hooks.example.com/x".into(),
        body: "{}".into(),
        created_at: Millis(w.now - 60_000),
        state: DeliveryState::Pending,
        tries: 2,
        next_at: Some(Millis(w.now + 5_000)),
        last: Some("HTTP 502".into()),
    };
    w.core.restore_deliveries(vec![pending], 44);
    w.advance(1.0);
    assert!(sent(&w.actions).is_empty(), "not before it is due");
    w.advance(5.0);
    assert_eq!(sent(&w.actions).iter().map(|d| (d.id, d.tries)).collect::<Vec<_>>(), vec![(41, 2)]);
    let id = submit(&mut w, EVERY);
    let (a, _) = w.last_launch(id);
    w.run(a);
    let fresh = journalled(&w).into_keys().filter(|i| *i != 41).collect::<Vec<_>>();
    assert_eq!(fresh, vec![45], "ids are never reused");
}
