//! `[webhooks]`: how the server calls applications back (README,
//! "Webhooks"). The signing secret is named by environment variable,
//! never written in the file; webhooks are on when that variable is set.

use crate::notify::target::{Cidr, Policy};
use crate::notify::{Rules, Subscription, backoff, send::Sender};
use crate::providers::SecretValue;
use crate::spec::NotifyOn;
use crate::units::HumanDuration;
use serde::Deserialize;
use std::time::Duration;

/// The variable the signing secret is read from unless `secret_env` says
/// otherwise.
pub const SECRET_ENV: &str = "CANOPY_WEBHOOK_SECRET";

/// The `[webhooks]` table.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksEntry {
    /// The environment variable holding the HMAC secret deliveries are
    /// signed with (default `CANOPY_WEBHOOK_SECRET`).
    #[serde(default)]
    pub secret_env: Option<String>,
    /// Plain `http://` receivers (a trusted network only).
    #[serde(default)]
    pub allow_http: bool,
    /// Networks the default refuses (loopback, link-local) that receivers
    /// may be on, as CIDRs: `["127.0.0.1/32"]` for a relay on this host.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Deliveries in flight at once (default 8).
    #[serde(default)]
    pub max_in_flight: Option<usize>,
    /// How long a failing delivery is tried (default `1d`).
    #[serde(default)]
    pub retry_for: Option<HumanDuration>,
    /// The delay after a first failed try, doubling to an hour (default `10s`).
    #[serde(default)]
    pub first_retry: Option<HumanDuration>,
    /// One try's bound: connect within a third of it, answer within it
    /// (default `10s`).
    #[serde(default)]
    pub timeout: Option<HumanDuration>,
    /// `[[webhooks.subscription]]`: server-wide receivers of every
    /// workload's changes.
    #[serde(default)]
    pub subscription: Vec<SubscriptionEntry>,
}

/// One `[[webhooks.subscription]]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionEntry {
    pub url: String,
    #[serde(default = "NotifyOn::ends")]
    pub events: Vec<NotifyOn>,
}

impl WebhooksEntry {
    /// The policy the admin set, or what is wrong with it.
    pub fn policy(&self) -> Result<Policy, String> {
        let allow = self
            .allow
            .iter()
            .map(|c| c.parse::<Cidr>().map_err(|e| format!("[webhooks] allow: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Policy { allow_http: self.allow_http, allow })
    }

    /// Checks what can be checked without the environment.
    pub fn check(&self) -> Result<(), String> {
        let policy = self.policy()?;
        if self.max_in_flight == Some(0) {
            return Err("[webhooks] max_in_flight = 0 would never deliver; give 1 or more".into());
        }
        for s in &self.subscription {
            crate::notify::target::check_url(&s.url, &policy).map_err(|e| {
                format!("[[webhooks.subscription]] {}: {e}", crate::notify::payload::shown(&s.url))
            })?;
            if s.events.is_empty() {
                return Err(
                    "[[webhooks.subscription]]: events is empty; name one or more or leave it out".into()
                );
            }
        }
        Ok(())
    }

    /// What the core and the shell are given: `None` when the secret's
    /// variable is unset or empty (webhooks off), an error when
    /// subscriptions are configured without it.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<Option<(Rules, Sender)>, String> {
        self.check()?;
        let var = self.secret_env.as_deref().unwrap_or(SECRET_ENV);
        let Some(secret) = env(var).filter(|s| !s.is_empty()) else {
            if !self.subscription.is_empty() || self.secret_env.is_some() {
                return Err(format!(
                    "[webhooks] needs its signing secret: set the environment variable {var} (a long random \
                     string receivers share), or remove [webhooks]"
                ));
            }
            return Ok(None);
        };
        let policy = self.policy()?;
        let d = |h: &Option<HumanDuration>, default_ms: i64| {
            h.as_ref().map_or(default_ms, |h| i64::try_from(h.0.as_millis()).unwrap_or(i64::MAX))
        };
        let rules = Rules {
            subscriptions: self
                .subscription
                .iter()
                .map(|s| Subscription { url: s.url.clone(), events: s.events.clone() })
                .collect(),
            policy: policy.clone(),
            max_in_flight: self.max_in_flight.unwrap_or(8),
            first_retry_ms: d(&self.first_retry, backoff::FIRST).max(1),
            retry_for_ms: d(&self.retry_for, backoff::PERIOD),
        };
        let timeout =
            self.timeout.as_ref().map_or(Duration::from_secs(10), |t| t.0).max(Duration::from_millis(100));
        let sender = Sender::new(SecretValue::new(secret), policy, timeout / 3, timeout);
        Ok(Some((rules, sender)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(toml_text: &str) -> WebhooksEntry {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn off_without_a_secret_and_on_with_one() {
        let e = WebhooksEntry::default();
        assert!(e.resolve(|_| None).unwrap().is_none());
        let (rules, _) = e.resolve(|k| (k == SECRET_ENV).then(|| "s3cret".into())).unwrap().unwrap();
        assert_eq!((rules.max_in_flight, rules.retry_for_ms), (8, backoff::PERIOD));
        let sender = e.resolve(|_| Some("s3cret".into())).unwrap().unwrap().1;
        assert!(!format!("{sender:?}").contains("s3cret"), "the secret never reaches a log line");
    }

    #[test]
    fn mistakes_are_named() {
        let e = entry("allow = [\"127.0.0.1/33\"]");
        assert!(e.check().unwrap_err().contains("[webhooks] allow"));
        let e = entry("[[subscription]]\nurl = \"http://hooks.example.com/x\"");
        assert!(e.check().unwrap_err().contains("use https"), "{:?}", e.check());
        let e = entry("secret_env = \"HOOKS_KEY\"");
        assert!(e.resolve(|_| None).unwrap_err().contains("set the environment variable HOOKS_KEY"));
        let e = entry("max_in_flight = 0");
        assert!(e.check().is_err());
        let e = entry(
            "allow_http = true\nallow = [\"127.0.0.1/32\"]\nfirst_retry = \"1s\"\n[[subscription]]\nurl = \"http://127.0.0.1:9/x\"\nevents = [\"running\"]",
        );
        let (rules, _) = e.resolve(|_| Some("k".into())).unwrap().unwrap();
        assert_eq!(rules.first_retry_ms, 1000);
        assert_eq!(rules.subscriptions[0].events, vec![NotifyOn::Running]);
    }
}
