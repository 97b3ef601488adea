//! Webhooks: calling an application back when its workload changes state
//! (issue 31). What a delivery carries ([`payload`]) and how it is signed
//! ([`signature`]), which targets may be called ([`target`]), when a
//! failed delivery is tried again ([`backoff`]), and one try over HTTP
//! ([`send`], the only I/O here). The durable outbox lives in the engine's
//! core (`engine/core/outbox.rs`); the shell runs the tries.
//!
//! The conventions are Stripe's and GitHub's: a JSON body, a header
//! `Canopy-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
//! under a secret the receiver shares, and `Canopy-Delivery: <id>`, the
//! same on every retry of one delivery, so a receiver drops duplicates.

pub mod backoff;
pub mod payload;
pub mod send;
pub mod signature;
pub mod target;

use crate::spec::NotifyOn;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Canopy-Signature";
/// The header carrying the delivery's idempotency id.
pub const DELIVERY_HEADER: &str = "Canopy-Delivery";
/// The header naming the change (`succeeded`, ...), for routing before
/// the body is parsed.
pub const EVENT_HEADER: &str = "Canopy-Event";

/// What the engine's core follows for webhooks: the server-wide
/// subscriptions, the target policy, how many deliveries may be in flight
/// at once and how long a failing one is retried. Webhooks are off (a
/// spec with `[notify]` is refused) where the core has none: the server
/// was given no signing secret.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub subscriptions: Vec<Subscription>,
    pub policy: target::Policy,
    /// Deliveries in flight at once, across all receivers.
    pub max_in_flight: usize,
    /// The delay after a first failed try (doubling, to an hour at most).
    pub first_retry_ms: i64,
    /// How long after its change a delivery is still tried.
    pub retry_for_ms: i64,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            subscriptions: Vec::new(),
            policy: target::Policy::default(),
            max_in_flight: 8,
            first_retry_ms: backoff::FIRST,
            retry_for_ms: backoff::PERIOD,
        }
    }
}

/// A server-wide subscription: every workload's changes of these kinds
/// go to `url`.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub url: String,
    pub events: Vec<NotifyOn>,
}
