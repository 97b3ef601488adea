//! Reconciling with a provider: what it runs under this store's tokens
//! that no live attempt accounts for.

use super::{Action, Core};
use crate::engine::model::*;

impl Core {
    /// Terminates provider resources carrying this store's tokens that no
    /// live attempt accounts for (leaks from crashes or lost responses).
    /// Tokens this store's journal cannot know — a workload id beyond the
    /// journal's history, or a live attempt's id with another nonce (a
    /// journal restored from an older copy) — are someone's work the
    /// journal lost: they are listed ([`Core::unknown_attempts`]), never
    /// adopted and never stopped by Canopy.
    pub(super) fn on_owned(&mut self, provider: &str, tokens: &[String], ended: &[String], now: Millis) {
        // Ended attempts the journal has closed whose release a stop of
        // the server cut short (it comes only after the close is
        // journalled): what they left there goes. One still live is left
        // alone: its end is collected first.
        for t in ended {
            let Some((a, _)) = AttemptId::parse_token(t, &self.store_id) else { continue };
            let known = a.workload.0 <= self.journal_max_id || a.workload.0 >= self.first_new_id;
            if known && self.live_mut(a).is_none() {
                self.out.push(Action::Release {
                    attempt: a,
                    provider: provider.to_string(),
                    token: t.clone(),
                });
            }
        }
        for t in tokens {
            let Some((a, nonce)) = AttemptId::parse_token(t, &self.store_id) else { continue };
            let live = self.live_mut(a).map(|(e, idx)| e.attempts[idx].nonce.clone());
            let unknown = match &live {
                Some(n) => n != nonce,
                // Ids the journal never held and this engine never gave out.
                None => a.workload.0 > self.journal_max_id && a.workload.0 < self.first_new_id,
            };
            if unknown {
                self.unknown.insert(t.clone(), provider.to_string());
            } else if live.is_none() {
                let msg = format!("terminating {t} at {provider}: no live attempt wants it");
                self.event(now, a.workload, Some(a), EventKind::Reconciled, msg);
                self.out.push(Action::Terminate {
                    attempt: a,
                    provider: provider.to_string(),
                    token: t.clone(),
                });
                // An ended attempt whose release a stop of the server
                // interrupted: what it left there goes too (a provider
                // keeps what still runs until it has stopped).
                self.out.push(Action::Release {
                    attempt: a,
                    provider: provider.to_string(),
                    token: t.clone(),
                });
            }
        }
    }
}
