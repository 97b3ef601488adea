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
        if let Some(why) = self.notify_refusal(&spec) {
            return self.reply(
                request,
                Reply::Error { code: Refusal::Invalid, message: format!("notify.webhook: {why}") },
            );
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
        // One spec, shared by the record and every copy saved of it.
        let spec = Arc::new(spec);
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
        self.demand_changed(&rec.spec, true);
        self.entries.insert(id, Entry::new(rec, Vec::new()));
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

    /// Why no pool of the fleet could ever run `spec` — judged against the
    /// pools' shapes with every node ready and empty, ignoring node states,
    /// cordons, quarantines and current use — or `None` when one could
    /// (or the spec opts into waiting).
    fn never_fits(&mut self, spec: &Spec) -> Option<String> {
        if spec.constraints.wait_for_capacity || !self.config.refuse_never_fits {
            return None;
        }
        let ideal = self.ideal();
        let req = crate::schedule::Requirements::from_spec(spec);
        match crate::schedule::place(&req, ideal, &crate::schedule::Policy::default()) {
            crate::schedule::Decision::Placed(_) => None,
            crate::schedule::Decision::Unschedulable(ex) => {
                let hint = image_hint(&ex);
                Some(format!("{ex}{hint}"))
            }
        }
    }
}

/// What a refused image spec is told when no pool of the fleet runs
/// container images (the scheduler's `image` filter).
const NO_IMAGE_POOL: &str = "runtime.image needs a pool that runs container images: the local provider \
     with a working podman or docker (scripts/containers/setup.sh sets one up), ssh hosts whose owners' \
     podman answers, or a kubernetes or cloud provider; Slurm and Ray pools do not run images. Drop runtime.image to run the command as a plain process";

/// What a refused image spec is told when the only pools that run images
/// cannot hold a container to its memory limit.
const NO_IMAGE_MEMORY: &str = "the container engine that would run this image is rootless on cgroup v1, \
     where it cannot hold a container to resources.memory_gb: run the engine as root, or move the host to \
     cgroup v2 with the memory controller delegated to the engine's user (docs/containers.md)";

/// What to do, for a spec no pool could run because none runs its image
/// (or none holds it to its memory limit): one line per such reason the
/// explanation gives, each after a newline; empty when it gives none.
pub(super) fn image_hint(ex: &crate::schedule::Explanation) -> String {
    use crate::schedule::Filter;
    let mut hint = String::new();
    for (f, words) in [(Filter::ImageMemory, NO_IMAGE_MEMORY), (Filter::Image, NO_IMAGE_POOL)] {
        if ex.reasons.iter().any(|r| r.filter == f) {
            hint.push('\n');
            hint.push_str(words);
        }
    }
    hint
}
