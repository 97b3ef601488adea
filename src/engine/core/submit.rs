//! Submitting a workload to the core: the idempotency key, work that no
//! pool could ever run refused at once, the record, the queue.

use super::*;

impl Core {
    pub(super) fn submit(
        &mut self,
        request: u64,
        spec: Spec,
        spec_hash: String,
        key: Option<String>,
        (by, tenant): (Option<String>, Option<String>),
        now: Millis,
    ) {
        if let Some(k) = &key {
            let known = self
                .keys
                .get(k)
                .and_then(|id| self.entries.get(id).map(|e| (*id, e.rec.spec_hash.clone())))
                .or_else(|| self.finished_keys.get(k).cloned());
            if let Some((id, hash)) = known {
                let reply = if hash == spec_hash {
                    Reply::Submitted { id, existing: true }
                } else {
                    Reply::Error {
                        code: Refusal::Conflict,
                        message: format!(
                            "idempotency key {:?} was already used for {id} with a different spec; \
                             use a new key to submit a different workload",
                            crate::engine::command::shown_key(k)
                        ),
                    }
                };
                return self.reply(request, reply);
            }
        }
        if let Some(why) = self.never_fits(&spec) {
            return self.reply(
                request,
                Reply::Error {
                    code: Refusal::Unschedulable,
                    message: format!(
                        "no pool in the configured fleet could ever run {:?}: {why}. Change what it asks for, \
                         or set constraints.wait_for_capacity = true to wait for capacity expected to appear",
                        spec.name
                    ),
                },
            );
        }
        let id = WorkloadId(self.next_id);
        self.next_id += 1;
        let rec = WorkloadRecord {
            id,
            name: spec.name.clone(),
            spec_hash,
            idempotency_key: key.clone(),
            priority: spec.priority,
            state: WorkloadState::Queued,
            submitted_at: now,
            updated_at: now,
            attempts: 0,
            app_failures: 0,
            not_before: None,
            cost_usd: 0.0,
            est_cost_usd: 0.0,
            reason: None,
            class: None,
            submitted_by: by,
            acknowledged: None,
            exclusions: None,
            retried_as: None,
            tenant,
            spec: spec.clone(),
        };
        if let Some(k) = key {
            self.keys.insert(k, id);
        }
        self.entries.insert(id, Entry::new(rec, Arc::new(spec), Vec::new()));
        self.queue.push_ready(self.queue_priority(id), id);
        self.save_workload(id, now);
        let retried =
            self.entries.get(&id).and_then(|e| e.rec.spec.labels.get(RETRY_OF)).and_then(|o| o.parse().ok());
        match retried {
            Some(old) => {
                // Both ways: the new one says what it retries, the old one
                // what retried it.
                self.event(now, id, None, EventKind::Submitted, format!("submitted as a retry of {old}"));
                self.event(now, old, None, EventKind::Retry, format!("retried as {id}"));
            }
            None => self.event(now, id, None, EventKind::Submitted, "submitted".into()),
        }
        self.reply(request, Reply::Submitted { id, existing: false });
    }
}
