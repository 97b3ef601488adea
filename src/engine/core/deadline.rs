//! Time in the core: each live attempt's next deadline (launch and
//! pending timeouts, an unreachable provider, max runtime, the cost cap, a
//! stop to resend) and what a tick does when one is due.

use super::{Action, Core, Entry};
use crate::engine::model::*;
use crate::failure::ProviderEnd;
use crate::providers::LaunchError;

impl Core {
    /// The next moment this workload's live attempt needs attention.
    pub(super) fn attempt_deadline(&self, e: &Entry) -> Option<Millis> {
        let live = e.live.as_ref()?;
        if live.collecting {
            return None;
        }
        let att = &e.attempts[live.idx];
        let mut t: Vec<Millis> = Vec::new();
        if let Some(sent) = live.terminate_sent_at {
            t.push(sent.plus_secs(self.config.terminate_resend_s));
        } else {
            if !live.acked {
                t.push(live.launch_sent_at.plus_secs(self.config.launch_timeout_s));
            }
            if let Some(since) = live.unreachable_since {
                t.push(since.plus_secs(self.config.unreachable_after_s));
            }
            match att.started_at {
                Some(start) => {
                    if let Some(max) = e.rec.spec.constraints.max_runtime {
                        t.push(start.plus_secs(max.0.as_secs_f64()));
                    }
                    if let (Some(cap), true) = (e.rec.spec.constraints.max_cost_usd, att.price_per_hour > 0.0)
                    {
                        let left_h = ((cap - e.rec.cost_usd) / att.price_per_hour).max(0.0);
                        t.push(start.plus_secs(left_h * 3600.0));
                    }
                }
                None if live.acked => t.push(att.placed_at.plus_secs(self.config.pending_timeout_s)),
                None => {}
            }
        }
        t.into_iter().min()
    }

    pub(super) fn on_tick(&mut self, now: Millis) {
        self.expire_exclusions(now);
        self.expire_beliefs(now);
        self.queue.release_backoff(now);
        self.end_waits(now);
        self.budget_tick(now);
        for id in self.due(now) {
            self.on_deadline(id, now);
        }
    }

    pub(super) fn on_deadline(&mut self, id: WorkloadId, now: Millis) {
        self.touched.push(id);
        let cfg = self.config.clone();
        let Some(e) = self.entries.get_mut(&id) else { return };
        let Some(live) = e.live.as_mut() else { return };
        let att = &e.attempts[live.idx];
        let a = att.id;
        if let Some(sent) = live.terminate_sent_at {
            if now.secs_since(sent) >= cfg.terminate_resend_s {
                live.terminate_sent_at = Some(now);
                let provider = att.provider.clone();
                let token = att.token(&self.store_id);
                self.out.push(Action::Terminate { attempt: a, provider, token });
            }
            return;
        }
        if !live.acked && now.secs_since(live.launch_sent_at) >= cfg.launch_timeout_s {
            return self.on_launch_result(a, Err(LaunchError::Timeout), now);
        }
        if let Some(since) = live.unreachable_since
            && now.secs_since(since) >= cfg.unreachable_after_s
        {
            let message = format!("provider unreachable for {:.0}s", now.secs_since(since));
            return self.terminate_live(id, ProviderEnd::ApiError { message }, now);
        }
        match att.started_at {
            Some(start) => {
                if let Some(max) = e.rec.spec.constraints.max_runtime
                    && now.secs_since(start) >= max.0.as_secs_f64()
                {
                    return self.terminate_live(id, ProviderEnd::MaxRuntimeReached, now);
                }
                if let Some(cap) = e.rec.spec.constraints.max_cost_usd {
                    let spent = e.rec.cost_usd + att.price_per_hour * now.secs_since(start) / 3600.0;
                    if att.price_per_hour > 0.0 && spent >= cap - 1e-9 {
                        self.terminate_live(id, ProviderEnd::CostCapReached, now);
                    }
                }
            }
            None if live.acked && now.secs_since(att.placed_at) >= cfg.pending_timeout_s => {
                let message = format!("still pending after {:.0}s", now.secs_since(att.placed_at));
                self.terminate_live(id, ProviderEnd::LaunchRejected { message, capacity: true }, now);
            }
            None => {}
        }
    }
}
