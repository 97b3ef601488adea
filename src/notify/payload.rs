//! What a delivery carries: one JSON object, built once when the change
//! happens and sent byte for byte on every try (the signature covers
//! these bytes, so a receiver can check them and drop a duplicate by its
//! `id`).

use crate::engine::model::{Millis, WorkloadRecord};
use crate::spec::NotifyOn;
use serde::Serialize;

/// The body of a delivery.
#[derive(Debug, Serialize)]
pub struct Payload<'a> {
    /// The delivery's id, as in the `Canopy-Delivery` header: the same on
    /// every try.
    pub id: String,
    /// What happened: `running`, `succeeded`, `failed`, `cancelled`,
    /// `retrying`.
    pub event: &'static str,
    /// When it happened, epoch milliseconds and RFC 3339.
    pub at: i64,
    pub at_rfc3339: String,
    pub workload: WorkloadSummary<'a>,
}

/// The workload as it stood when the change happened.
#[derive(Debug, Serialize)]
pub struct WorkloadSummary<'a> {
    pub id: String,
    pub name: &'a str,
    pub state: &'static str,
    /// The attempt the change is about (the latest one).
    pub attempt: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub cost_usd: f64,
}

/// The body of delivery `id` telling of `event` on `w` at `now`.
pub fn body(id: u64, event: NotifyOn, w: &WorkloadRecord, now: Millis) -> String {
    let p = Payload {
        id: id.to_string(),
        event: event.as_str(),
        at: now.0,
        at_rfc3339: jiff::Timestamp::from_millisecond(now.0).map(|t| t.to_string()).unwrap_or_default(),
        workload: WorkloadSummary {
            id: w.id.to_string(),
            name: &w.name,
            state: w.state.as_str(),
            attempt: w.attempts,
            tenant: w.tenant.as_deref(),
            class: w.class.map(|c| c.as_str()),
            // Reasons may quote a workload's own output: no control
            // characters reach a receiver's logs.
            reason: w.reason.as_deref().map(|r| crate::text::sanitize(r).into_owned()),
            cost_usd: (w.cost_usd * 1e6).round() / 1e6,
        },
    };
    // Strings, numbers and options only: serialising cannot fail.
    serde_json::to_string(&p).unwrap_or_default()
}

/// What a receiver's URL is shown as in events and logs: its scheme, host
/// and port only, since a path or query often carries a secret (a chat
/// service's incoming-webhook URL is one).
pub fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p}", u.scheme()),
            (Some(h), None) => format!("{}://{h}", u.scheme()),
            _ => "(a URL without a host)".into(),
        },
        Err(_) => "(not a URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_and_query_of_a_receiver_are_never_shown() {
        assert_eq!(shown("https://hooks.example.com/services/T0/B0/s3cret?k=v"), "https://hooks.example.com");
        assert_eq!(shown("http://10.0.0.5:8080/x"), "http://10.0.0.5:8080");
        assert_eq!(shown("nonsense"), "(not a URL)");
    }
}
