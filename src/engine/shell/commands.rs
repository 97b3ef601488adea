//! Commands from the handle (the API, a console): each resolved to core
//! events, with what needs the journal (keyed submits, retries) looked up
//! first, and its audit record kept for the batch that answers it.

use super::*;

impl Shell {
    /// Turns commands into core events. Two need the journal first: a
    /// submit whose key belongs to a workload that already ended (the core
    /// only knows live ones), and a retry of an ended workload. Whatever
    /// arrived together is looked up in one read.
    pub(super) async fn resolve_commands(&mut self, events: &mut Vec<Event>) -> Result<(), ShellError> {
        let pending = std::mem::take(&mut self.pending_commands);
        if pending.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = pending
            .iter()
            .filter_map(|(_, c)| match c {
                Command::Submit { idempotency_key: Some(k), .. } => Some(k.clone()),
                _ => None,
            })
            .collect();
        let retries: Vec<WorkloadId> = pending
            .iter()
            .filter_map(|(_, c)| if let Command::Retry { id } = c { Some(*id) } else { None })
            .collect();
        // An acknowledgement needs the ended workload's row (the core only
        // holds live ones).
        let acks: Vec<WorkloadId> = pending
            .iter()
            .filter_map(|(_, c)| if let Command::Acknowledge { id } = c { Some(*id) } else { None })
            .collect();
        let looked_up: Vec<WorkloadId> = retries.iter().chain(&acks).copied().collect();
        // A retry is keyed by what it retries: a second one finds the first.
        let keys: Vec<String> = keys.into_iter().chain(retries.iter().map(|id| retry_key(*id))).collect();
        let (by_key, by_id) = if keys.is_empty() && looked_up.is_empty() {
            (HashMap::new(), HashMap::new())
        } else {
            self.with_journal(move |j| {
                let mut by_key: HashMap<String, WorkloadRecord> = HashMap::new();
                for w in j.workloads_by_keys(&keys)? {
                    if let Some(k) = w.idempotency_key.clone() {
                        by_key.insert(k, w);
                    }
                }
                let mut by_id: HashMap<WorkloadId, WorkloadRecord> = HashMap::new();
                for id in looked_up {
                    if let Some(w) = j.workload(id)? {
                        by_id.insert(id, w);
                    }
                }
                Ok((by_key, by_id))
            })
            .await?
        };
        for (request, cmd) in pending {
            let by = self.replies.get(&request).map(|p| p.caller.principal.clone());
            // Without tenants nobody has one; with them, the caller's, else
            // the default tenant (the socket owner's, the console's).
            let tenancy = self.core.tenancy();
            let tenant = if tenancy.is_empty() {
                None
            } else {
                self.replies
                    .get(&request)
                    .and_then(|p| p.caller.tenant.clone())
                    .or_else(|| tenancy.default_tenant.clone())
            };
            match cmd {
                Command::Submit { spec, idempotency_key: Some(key) } => {
                    let hash = spec.content_hash();
                    match by_key.get(&key) {
                        Some(w) if w.state.is_final() && w.spec_hash == hash => {
                            self.early_replies.push((request, Reply::Submitted { id: w.id, existing: true }))
                        }
                        Some(w) if w.state.is_final() => {
                            let message = format!(
                                "idempotency key {:?} was already used for {} with a different spec; \
                                 use a new key to submit a different workload",
                                shown_key(&key),
                                w.id
                            );
                            self.early_replies
                                .push((request, Reply::Error { code: Refusal::Conflict, message }))
                        }
                        _ => events.push(Event::Submit {
                            request,
                            spec,
                            spec_hash: hash,
                            idempotency_key: Some(key),
                            by,
                            tenant,
                        }),
                    }
                }
                Command::Retry { id } => match by_id.get(&id) {
                    Some(w) if w.state.is_final() => {
                        let mut spec = Spec::clone(&w.spec);
                        spec.labels.insert(RETRY_OF.into(), id.to_string());
                        let spec_hash = spec.content_hash();
                        let key = retry_key(id);
                        match by_key.get(&key) {
                            // Retried before, and that retry has ended too:
                            // the same answer, not a second copy.
                            Some(done) => self
                                .early_replies
                                .push((request, Reply::Submitted { id: done.id, existing: true })),
                            // A live retry the core finds by its key.
                            None => events.push(Event::Submit {
                                request,
                                spec: Box::new(spec),
                                spec_hash,
                                idempotency_key: Some(key),
                                by,
                                tenant: w.tenant.clone(),
                            }),
                        }
                    }
                    Some(w) => {
                        let message =
                            format!("{id} is still {}; cancel it first or wait for it to end", w.state);
                        self.early_replies.push((request, Reply::Error { code: Refusal::Conflict, message }))
                    }
                    None => {
                        let message = format!("no workload {id} in this store");
                        self.early_replies.push((request, Reply::Error { code: Refusal::NotFound, message }))
                    }
                },
                Command::Acknowledge { id } => match by_id.get(&id) {
                    Some(w) if w.state == WorkloadState::Failed => {
                        let reason = self.replies.get(&request).and_then(|p| p.caller.reason.clone());
                        let by = by.unwrap_or_else(|| "unknown".into());
                        events.push(Event::Acknowledge { request, rec: Box::new(w.clone()), by, reason })
                    }
                    Some(w) => {
                        let message = format!(
                            "{id} is {}; only failed workloads are acknowledged (nothing to resolve)",
                            w.state
                        );
                        self.early_replies.push((request, Reply::Error { code: Refusal::Conflict, message }))
                    }
                    None => {
                        let message = format!("no workload {id} in this store");
                        self.early_replies.push((request, Reply::Error { code: Refusal::NotFound, message }))
                    }
                },
                other => {
                    self.fleet_commanded |= matches!(
                        other,
                        Command::Cordon { .. }
                            | Command::Uncordon { .. }
                            | Command::Drain { .. }
                            | Command::Unquarantine { .. }
                    );
                    let reason = self.replies.get(&request).and_then(|p| p.caller.reason.clone());
                    events.extend(command_event(request, other, by, reason, tenant))
                }
            }
        }
        Ok(())
    }
}

/// The idempotency key of the retry of `id`: one retry per workload, so a
/// second `retry` (a double key press, a CLI run twice) answers with the
/// first.
fn retry_key(id: WorkloadId) -> String {
    format!("{RETRY_OF}:{id}")
}

/// Commands that need no journal look-up; `None` for those that do
/// (keyed submits and retries, which `resolve_commands` handles itself).
fn command_event(
    request: u64,
    cmd: Command,
    by: Option<String>,
    reason: Option<String>,
    tenant: Option<String>,
) -> Option<Event> {
    let note = |until| NodeNote {
        by: by.clone().unwrap_or_default(),
        reason: reason.clone(),
        until,
        ..NodeNote::default()
    };
    Some(match cmd {
        Command::Submit { idempotency_key: Some(_), .. } => return None,
        Command::Submit { spec, idempotency_key } => {
            let spec_hash = spec.content_hash();
            Event::Submit { request, spec, spec_hash, idempotency_key, by, tenant }
        }
        Command::Cancel { id } => Event::Cancel { request, id },
        Command::Cordon { node, until } => {
            Event::SetNodeState { request, node, state: NodeState::Cordoned, note: Some(note(until)) }
        }
        Command::Uncordon { node } => {
            Event::SetNodeState { request, node, state: NodeState::Ready, note: Some(note(None)) }
        }
        Command::Drain { node, evict, grace_s } => {
            let note = NodeNote { evict, grace_s, ..note(None) };
            Event::SetNodeState { request, node, state: NodeState::Draining, note: Some(note) }
        }
        Command::Unquarantine { node } => Event::Unquarantine { request, node },
        Command::Unexclude { id, target } => {
            Event::Unexclude { request, id, target, by: by.unwrap_or_default(), reason }
        }
        Command::Retry { .. } | Command::Acknowledge { .. } => return None,
    })
}
