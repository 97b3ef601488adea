//! Webhooks: calling an application back when its workload changes state
//! (issue 31). This module is the pure half — what a delivery carries and
//! how it is signed ([`signature`]), which targets may be called
//! ([`target`]), and when a failed delivery is tried again ([`backoff`]).
//! The durable outbox and the deliveries themselves build on it.
//!
//! The conventions are Stripe's and GitHub's: a JSON body, a header
//! `Canopy-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`
//! under a secret the receiver shares, and `Canopy-Delivery: <id>`, the
//! same on every retry of one delivery, so a receiver drops duplicates.

pub mod backoff;
pub mod signature;
pub mod target;

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Canopy-Signature";
/// The header carrying the delivery's idempotency id.
pub const DELIVERY_HEADER: &str = "Canopy-Delivery";
