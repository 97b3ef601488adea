//! Webhook deliveries: the outbox (README, "Webhooks").
//!
//! A delivery is made in the same batch — so the same journal commit — as
//! the change it tells of: running, a retry decided, or the workload's
//! end. Nothing is sent before its record is durable, and a delivery not
//! yet delivered comes back after a restart ([`Core::restore_deliveries`]),
//! so a crash never loses one (at least once; the receiver drops repeats
//! by the delivery's id). Per workload, deliveries go strictly in order:
//! the next waits until the one before it is delivered or given up. At
//! most [`crate::notify::Rules::max_in_flight`] are in flight at once, across all
//! receivers, and the shell bounds each try's time, so a slow or hostile
//! receiver holds back only deliveries — never placement. A failed try is
//! tried again with backoff ([`crate::notify::backoff`]) until the retry
//! period since the change has passed; every try is told in the
//! workload's events.

use super::*;
use crate::notify::{backoff, payload};
use crate::spec::NotifyOn;
use std::collections::VecDeque;

/// How a delivery's try ended, as the shell saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The receiver answered with this HTTP status (2xx: delivered).
    Answered(u16),
    /// No answer: refused, reset, timed out, TLS failed.
    NoAnswer(String),
    /// The target may not be called: its host now resolves to a refused
    /// address. Given up at once (trying again asks the same question).
    Refused(String),
}

/// The deliveries not yet delivered or given up, and which may go.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    next_id: u64,
    pending: BTreeMap<u64, DeliveryRecord>,
    /// Each workload's pending deliveries in order; only the first may go.
    order: BTreeMap<WorkloadId, VecDeque<u64>>,
    /// Firsts of their workload, not in flight, by when they are due.
    due: BTreeSet<(Millis, u64)>,
    in_flight: BTreeSet<u64>,
}

impl Outbox {
    fn add(&mut self, d: DeliveryRecord) {
        let q = self.order.entry(d.workload).or_default();
        q.push_back(d.id);
        if q.len() == 1 {
            self.due.insert((d.next_at.unwrap_or(d.created_at), d.id));
        }
        self.pending.insert(d.id, d);
    }

    /// Closes `id` (delivered or given up) and lets its workload's next go.
    fn close(&mut self, id: u64, now: Millis) {
        let Some(d) = self.pending.remove(&id) else { return };
        self.in_flight.remove(&id);
        let Some(q) = self.order.get_mut(&d.workload) else { return };
        q.retain(|x| *x != id);
        match q.front().and_then(|n| self.pending.get(n)) {
            Some(next) => {
                self.due.insert((next.next_at.unwrap_or(now).max(now), next.id));
            }
            None => {
                self.order.remove(&d.workload);
            }
        }
    }

    /// When the next delivery is due, if one waits and may go.
    pub(super) fn next_due(&self, max_in_flight: usize) -> Option<Millis> {
        (self.in_flight.len() < max_in_flight).then(|| self.due.first().map(|(t, _)| *t)).flatten()
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    pub(super) fn pending(&self) -> usize {
        self.pending.len()
    }
}

impl Core {
    /// Deliveries still pending in the journal, and the highest id it
    /// used (ids are never reused, so receivers' duplicate checks hold).
    pub fn restore_deliveries(&mut self, pending: Vec<DeliveryRecord>, last_id: u64) {
        self.outbox.next_id = self.outbox.next_id.max(last_id + 1);
        for d in pending {
            self.outbox.next_id = self.outbox.next_id.max(d.id + 1);
            self.outbox.add(d);
        }
    }

    /// Deliveries pending and in flight now.
    pub fn deliveries(&self) -> (usize, usize) {
        (self.outbox.pending(), self.outbox.in_flight())
    }

    /// Why this spec's `[notify]` may not be accepted by this server, if
    /// it may not.
    pub(super) fn notify_refusal(&self, spec: &Spec) -> Option<String> {
        let n = spec.notify.as_ref()?;
        let Some(rules) = &self.config.webhooks else {
            return Some(
                "this server does not send webhooks: it was given no signing secret. Its admin sets the \
                 environment variable [webhooks] secret_env names (CANOPY_WEBHOOK_SECRET by default) and \
                 restarts it; or leave [notify] out and follow the workload's events"
                    .into(),
            );
        };
        crate::notify::target::check_url(&n.webhook, &rules.policy).err().map(|e| e.to_string())
    }

    /// Tells `id`'s receivers of `on`: one delivery for the spec's webhook
    /// and one per server-wide subscription that asked for it, journalled
    /// with the change.
    pub(super) fn notify(&mut self, id: WorkloadId, on: NotifyOn, now: Millis) {
        let Some(rules) = &self.config.webhooks else { return };
        let Some(e) = self.entries.get(&id) else { return };
        let mut urls: Vec<String> = Vec::new();
        if let Some(n) = &e.rec.spec.notify
            && n.events.contains(&on)
        {
            urls.push(n.webhook.clone());
        }
        for s in &rules.subscriptions {
            if s.events.contains(&on) && !urls.contains(&s.url) {
                urls.push(s.url.clone());
            }
        }
        if urls.is_empty() {
            return;
        }
        let rec = e.rec.clone();
        for url in urls {
            let did = self.outbox.next_id.max(1);
            self.outbox.next_id = did + 1;
            let d = DeliveryRecord {
                id: did,
                workload: id,
                event: on.as_str().to_string(),
                body: payload::body(did, on, &rec, now),
                url,
                created_at: now,
                state: DeliveryState::Pending,
                tries: 0,
                next_at: Some(now),
                last: None,
            };
            self.record(Record::Delivery(Box::new(d.clone())));
            self.outbox.add(d);
        }
    }

    /// Sends what is due, within the bound on deliveries in flight.
    pub(super) fn dispatch_deliveries(&mut self, now: Millis) {
        let Some(max) = self.config.webhooks.as_ref().map(|r| r.max_in_flight.max(1)) else { return };
        while self.outbox.in_flight.len() < max {
            let Some(&(t, id)) = self.outbox.due.first() else { break };
            if t > now {
                break;
            }
            self.outbox.due.remove(&(t, id));
            let Some(d) = self.outbox.pending.get(&id) else { continue };
            self.outbox.in_flight.insert(id);
            self.out.push(Action::Deliver(Box::new(d.clone())));
        }
    }

    /// A try ended: delivered, tried again later, or given up; told in the
    /// workload's events either way.
    pub(super) fn on_delivered(&mut self, id: u64, outcome: DeliveryOutcome, now: Millis) {
        if !self.outbox.in_flight.remove(&id) {
            return;
        }
        let Some(rules) = self.config.webhooks.clone() else { return };
        let Some(d) = self.outbox.pending.get_mut(&id) else { return };
        d.tries += 1;
        let (ok, last, given_up_now) = match &outcome {
            DeliveryOutcome::Answered(s) => ((200..300).contains(s), format!("HTTP {s}"), false),
            DeliveryOutcome::NoAnswer(why) => (false, crate::text::sanitize(why).into_owned(), false),
            DeliveryOutcome::Refused(why) => (false, crate::text::sanitize(why).into_owned(), true),
        };
        d.last = Some(last.clone());
        let next = if ok || given_up_now {
            None
        } else {
            backoff::next_try(d.id, d.tries, d.created_at, now, rules.first_retry_ms, rules.retry_for_ms)
        };
        d.state = match (ok, next) {
            (true, _) => DeliveryState::Delivered,
            (false, Some(_)) => DeliveryState::Pending,
            (false, None) => DeliveryState::GivenUp,
        };
        d.next_at = next;
        let to = payload::shown(&d.url);
        let what = format!("webhook {} ({}) to {to}, try {}", d.id, d.event, d.tries);
        let msg = match (ok, next) {
            (true, _) => format!("{what}: delivered ({last})"),
            (false, Some(t)) => {
                format!("{what}: {last}; next try in {}", crate::units::human_secs(t.secs_since(now)))
            }
            (false, None) if given_up_now => format!("{what}: {last}; given up"),
            (false, None) => format!(
                "{what}: {last}; given up after trying for {}",
                crate::units::human_secs(now.secs_since(d.created_at))
            ),
        };
        let (workload, rec) = (d.workload, d.clone());
        self.record(Record::Delivery(Box::new(rec)));
        self.event(now, workload, None, EventKind::Webhook, msg);
        match next {
            Some(t) if !ok => {
                self.outbox.due.insert((t, id));
            }
            _ => self.outbox.close(id, now),
        }
    }
}
