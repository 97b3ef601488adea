//! One try of one delivery, over HTTP: the shell's half of webhooks.
//!
//! The URL is checked against the admin's policy, its host resolved and
//! every address checked ([`super::target`]), and the request connects
//! only to the addresses checked (no second lookup, no proxy from the
//! environment, no redirects): a name that resolves elsewhere the second
//! time, or a receiver that redirects to a metadata service, reaches
//! nothing. Each try is bounded in time (connect, and the whole exchange);
//! the answer's status is all that is read, never its body.

use super::target::{Policy, check_addresses, check_url};
use super::{DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, signature};
use crate::engine::core::DeliveryOutcome;
use crate::engine::model::DeliveryRecord;
use crate::providers::SecretValue;
use std::net::SocketAddr;
use std::time::Duration;

/// What the shell needs to deliver: the signing secret, the target
/// policy and the time bounds of a try.
#[derive(Debug, Clone)]
pub struct Sender {
    secret: SecretValue,
    policy: Policy,
    connect_timeout: Duration,
    timeout: Duration,
}

impl Sender {
    pub fn new(secret: SecretValue, policy: Policy, connect_timeout: Duration, timeout: Duration) -> Self {
        Sender { secret, policy, connect_timeout, timeout }
    }

    /// Tries `d` once, signed at `now_s` (Unix seconds).
    pub async fn send(&self, d: &DeliveryRecord, now_s: i64) -> DeliveryOutcome {
        let url = match check_url(&d.url, &self.policy) {
            Ok(u) => u,
            Err(e) => return DeliveryOutcome::Refused(e.to_string()),
        };
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return DeliveryOutcome::Refused("the webhook URL names no host".into());
        };
        let bare = host.trim_start_matches('[').trim_end_matches(']').to_string();
        let lookup =
            tokio::time::timeout(self.connect_timeout, tokio::net::lookup_host((bare.as_str(), port)));
        let addrs: Vec<SocketAddr> = match lookup.await {
            Ok(Ok(a)) => a.collect(),
            Ok(Err(e)) => return DeliveryOutcome::NoAnswer(format!("cannot resolve {bare}: {e}")),
            Err(_) => {
                return DeliveryOutcome::NoAnswer(format!(
                    "resolving {bare} took longer than {} s",
                    self.connect_timeout.as_secs()
                ));
            }
        };
        let ips: Vec<_> = addrs.iter().map(SocketAddr::ip).collect();
        if let Err(e) = check_addresses(&bare, &ips, &self.policy) {
            return DeliveryOutcome::Refused(e.to_string());
        }
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .connect_timeout(self.connect_timeout)
            .timeout(self.timeout)
            .resolve_to_addrs(&bare, &addrs)
            .user_agent(concat!("canopy/", env!("CARGO_PKG_VERSION")))
            .build();
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                return DeliveryOutcome::NoAnswer(format!("cannot make an HTTP client: {}", e.without_url()));
            }
        };
        let sig = signature::sign(self.secret.expose().as_bytes(), now_s, d.body.as_bytes());
        let sent = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, sig)
            .header(DELIVERY_HEADER, d.id.to_string())
            .header(EVENT_HEADER, d.event.as_str())
            .body(d.body.clone())
            .send()
            .await;
        match sent {
            // The status is the answer; the body is never read.
            Ok(r) => DeliveryOutcome::Answered(r.status().as_u16()),
            Err(e) if e.is_timeout() => {
                DeliveryOutcome::NoAnswer(format!("no answer within {} s", self.timeout.as_secs()))
            }
            Err(e) => DeliveryOutcome::NoAnswer(describe(&e)),
        }
    }
}

/// A transport error in one line, without the URL (its path may carry a
/// secret).
fn describe(e: &reqwest::Error) -> String {
    let mut s = if e.is_connect() { "cannot connect".to_string() } else { "request failed".to_string() };
    let mut src = std::error::Error::source(e);
    let mut last = String::new();
    while let Some(inner) = src {
        last = inner.to_string();
        src = inner.source();
    }
    if !last.is_empty() {
        s.push_str(": ");
        s.push_str(&last);
    }
    s
}
