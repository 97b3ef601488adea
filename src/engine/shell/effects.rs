//! The shell's effects: provider calls the core asked for (launch,
//! terminate, collect with its logs and outputs), and the periodic ones
//! (status polls, checkpoint syncs, reconciles, inventories), each a
//! spawned task that reports back as an event.

use super::*;

impl Shell {
    /// One try of a webhook delivery, reported back as `Delivered`.
    pub(super) fn spawn_deliver(&mut self, d: crate::engine::model::DeliveryRecord) {
        let tx = self.tx.clone();
        let now_s = self.clock.now().0.div_euclid(1000);
        let sender = self.config.webhooks.clone();
        tokio::spawn(async move {
            let outcome = match sender {
                Some(s) => s.send(&d, now_s).await,
                None => crate::engine::core::DeliveryOutcome::Refused("this server sends no webhooks".into()),
            };
            Self::send(&tx, Event::Delivered { id: d.id, outcome });
        });
    }

    pub(super) fn provider(&self, name: &str) -> Option<Arc<dyn Provider>> {
        self.providers.get(name).cloned()
    }

    pub(super) fn send(tx: &mpsc::UnboundedSender<Msg>, e: Event) {
        let _ = tx.send(Msg::Event(e));
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn_launch(
        &mut self,
        attempt: AttemptId,
        provider: String,
        token: String,
        pool: String,
        nodes: Vec<String>,
        spec: Arc<Spec>,
    ) {
        let tx = self.tx.clone();
        let artifact_dir =
            self.config.artifacts.join(attempt.workload.to_string()).join(attempt.n.to_string());
        let checkpoint_dir =
            spec.checkpoint.as_ref().map(|_| self.config.checkpoints.join(attempt.workload.to_string()));
        let timeout = self.config.call_timeout;
        let Some(p) = self.provider(&provider) else {
            let err = LaunchError::Rejected(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
        };
        let lock = checkpoint_dir.as_ref().map(|_| self.checkpoints.lock(attempt.workload));
        tokio::spawn(async move {
            // The directory stays as prepared until the launch has taken
            // what it needs (a provider that copies reads it).
            let _held = match &lock {
                Some(l) => Some(l.lock().await),
                None => None,
            };
            let secrets = match secrets::resolve_secrets(&spec.runtime.secrets, |k| std::env::var(k).ok()) {
                Ok(s) => s,
                Err(e) => {
                    let err = LaunchError::Invalid(e.to_string());
                    return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
                }
            };
            // Only the newest complete checkpoint is handed on.
            if let Some(dir) = &checkpoint_dir {
                let prepared = {
                    let dir = dir.clone();
                    tokio::task::spawn_blocking(move || crate::engine::checkpoint::prepare(&dir)).await
                };
                match prepared.map_err(|e| e.to_string()).and_then(|r| r.map_err(|e| e.to_string())) {
                    Err(e) => {
                        let err = LaunchError::Rejected(format!(
                            "cannot prepare the checkpoint directory {}: {e}",
                            dir.display()
                        ));
                        return Self::send(&tx, Event::LaunchResult { attempt, result: Err(err) });
                    }
                    // Handed in place, any size; copied, within the cap.
                    Ok(Some(f)) if p.copies_checkpoints() => {
                        if let Some(ck) = &spec.checkpoint
                            && crate::engine::checkpoint::over_cap(ck, f.bytes)
                        {
                            let message = format!(
                                "checkpoint {} ({}) is over the checkpoint cap ({}, checkpoint.max_gb) for \
                                 copying to {provider}; attempt {} starts without it",
                                f.name,
                                crate::units::human_bytes(f.bytes),
                                cap_text(ck),
                                attempt.n
                            );
                            Self::send(&tx, Event::CheckpointNotCopied { attempt, message });
                        }
                    }
                    Ok(_) => {}
                }
            }
            let node = nodes.first().cloned().unwrap_or_default();
            let req = LaunchRequest {
                attempt,
                token,
                spec,
                pool,
                node,
                secrets,
                artifact_dir,
                nodes,
                checkpoint_dir,
            };
            let result = match tokio::time::timeout(timeout, p.launch(&req)).await {
                Ok(r) => r,
                Err(_) => Err(LaunchError::Timeout),
            };
            Self::send(&tx, Event::LaunchResult { attempt, result });
        });
    }

    pub(super) fn spawn_terminate(&self, attempt: AttemptId, provider: String, token: String) {
        let tx = self.tx.clone();
        // A stop may wait the workload's grace before it SIGKILLs.
        let grace = self
            .with_spec(attempt.workload, |s| s.runtime.stop_grace())
            .unwrap_or(crate::spec::Runtime::DEFAULT_STOP_GRACE);
        // An evicting drain may set its own; a preemption notice leaves at
        // most its own time; an owner's reclaim, what is left of its grace
        // (a stop carried out again after a restart does not start it
        // over). Each is given to the provider as a bound.
        let bounded = match self.core.stop_reason(attempt) {
            Some(ProviderEnd::Evicted { grace_s: Some(g), .. }) => Some(Duration::from_secs(*g)),
            Some(ProviderEnd::Reclaimed { grace_s, .. }) => Some(grace.min(Duration::from_secs(*grace_s))),
            Some(ProviderEnd::OwnerReclaim { grace_s, kill_at_ms, .. }) => {
                let left = kill_at_ms.map_or(Duration::MAX, |at| {
                    Duration::from_millis(u64::try_from(at - self.clock.now().0).unwrap_or(0))
                });
                Some(grace.min(Duration::from_secs(*grace_s)).min(left))
            }
            _ => None,
        };
        let grace = bounded.unwrap_or(grace);
        let timeout = self.config.call_timeout + grace;
        let Some(p) = self.provider(&provider) else {
            let result = Err(format!("no adapter is configured for provider {provider:?}"));
            return Self::send(&tx, Event::Terminated { attempt, result });
        };
        tokio::spawn(async move {
            let stop = async {
                match bounded {
                    Some(g) => p.terminate_within(&token, g).await,
                    None => p.terminate(&token).await,
                }
            };
            let result = match tokio::time::timeout(timeout, stop).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err("terminate timed out".to_string()),
            };
            Self::send(&tx, Event::Terminated { attempt, result });
        });
    }

    /// `f` of a live workload's spec: the one this shell launched, else the
    /// core's (restored after a restart).
    pub(super) fn with_spec<T>(&self, w: WorkloadId, f: impl Fn(&Spec) -> T) -> Option<T> {
        match self.specs.get(&w) {
            Some(s) => Some(f(s)),
            None => self.core.workload(w).map(|r| f(&r.spec)),
        }
    }

    /// The values of a workload's secrets, to mask them in shipped logs
    /// should the workload print one. Read from the engine's environment,
    /// as at launch; never stored.
    pub(super) fn secret_values(&self, w: WorkloadId) -> Arc<Vec<SecretValue>> {
        let names = self.with_spec(w, |s| s.runtime.secrets.clone()).unwrap_or_default();
        let values = names.iter().filter_map(|n| std::env::var(n).ok()).map(SecretValue::new).collect();
        Arc::new(values)
    }

    pub(super) fn spawn_polls(&mut self) {
        let live = self.core.live_attempts();
        self.spawn_checkpoint_syncs(&live);
        for (attempt, provider, token) in live {
            if !self.polling.insert(attempt) {
                continue;
            }
            let tx = self.tx.clone();
            let timeout = self.config.call_timeout;
            let Some(p) = self.provider(&provider) else {
                self.polling.remove(&attempt);
                continue;
            };
            let logs = log_dir(&self.config.logs, attempt);
            let mask = self.secret_values(attempt.workload);
            let clock = self.clock.clone();
            self.polled.insert(attempt, provider.clone());
            tokio::spawn(async move {
                ship_logs(&*p, &token, &logs, &mask, &*clock).await;
                let e = match tokio::time::timeout(timeout, p.status(&token)).await {
                    Ok(Ok(status)) => Event::Status { attempt, status },
                    Ok(Err(e)) => Event::StatusFailed { attempt, error: e.to_string() },
                    Err(_) => Event::StatusFailed { attempt, error: "status call timed out".into() },
                };
                let _ = tx.send(Msg::Polled { token, event: e });
            });
        }
    }

    /// Copies each running attempt's newest complete checkpoint into the
    /// store where its provider copies checkpoints: at most every
    /// `checkpoint_sync_every`, one copy at a time per workload, so a host
    /// that dies mid-run has left its last checkpoint with Canopy.
    pub(super) fn spawn_checkpoint_syncs(&mut self, live: &[(AttemptId, String, String)]) {
        let ids: HashSet<AttemptId> = live.iter().map(|(a, _, _)| *a).collect();
        let workloads: HashSet<WorkloadId> = ids.iter().map(|a| a.workload).collect();
        let c = &mut self.checkpoints;
        c.running.retain(|a| ids.contains(a));
        c.last.retain(|a, _| ids.contains(a));
        c.locks.retain(|w, _| workloads.contains(w));
        c.said.lock().unwrap_or_else(|e| e.into_inner()).retain(|a, _| ids.contains(a));
        let now = std::time::Instant::now();
        for (attempt, provider, token) in live {
            let attempt = *attempt;
            if !self.checkpoints.running.contains(&attempt)
                || self
                    .checkpoints
                    .last
                    .get(&attempt)
                    .is_some_and(|t| now - *t < self.config.checkpoint_sync_every)
            {
                continue;
            }
            let Some(p) = self.provider(provider).filter(|p| p.copies_checkpoints()) else { continue };
            let Some(Some(ck)) = self.with_spec(attempt.workload, |s| s.checkpoint.clone()) else { continue };
            if !self.checkpoints.busy.lock().unwrap_or_else(|e| e.into_inner()).insert(attempt) {
                continue;
            }
            self.checkpoints.last.insert(attempt, now);
            let lock = self.checkpoints.lock(attempt.workload);
            let busy = self.checkpoints.busy.clone();
            let said = self.checkpoints.said.clone();
            let dir = self.config.checkpoints.join(attempt.workload.to_string());
            let tx = self.tx.clone();
            let (provider, token) = (provider.clone(), token.clone());
            tokio::spawn(async move {
                let r = {
                    let _held = lock.lock().await;
                    p.sync_checkpoint(&token, &dir, crate::engine::checkpoint::cap_bytes(&ck)).await
                };
                report_sync(&tx, &said, attempt, &provider, &ck, r);
                busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&attempt);
            });
        }
    }

    /// Lists what `provider` holds of this store's attempts for the core;
    /// `with_ended` (the first listing after a start) also what no longer
    /// runs, so that the releases a stop cut short are done: an ended
    /// attempt is released after its close is journalled, and a server
    /// stopped in between leaves it there. Later listings leave it out,
    /// as only a stop makes such a leftover.
    pub(super) fn spawn_reconcile(&self, provider: String, with_ended: bool) {
        let Some(p) = self.provider(&provider) else { return };
        let tx = self.tx.clone();
        let store = self.core.store_id().to_string();
        tokio::spawn(async move {
            match p.list_owned(&store).await {
                Ok(owned) => {
                    let (running, ended): (Vec<_>, Vec<_>) = owned.into_iter().partition(|o| o.running);
                    let tokens = running.into_iter().map(|o| o.token).collect();
                    let ended =
                        if with_ended { ended.into_iter().map(|o| o.token).collect() } else { Vec::new() };
                    Self::send(&tx, Event::Owned { provider, tokens, ended });
                }
                Err(e) => tracing::warn!(%provider, error = %e, "could not list owned resources"),
            }
        });
    }

    /// Takes a provider's inventory again and hands it to the core, which
    /// replaces that provider's pools and nodes (keeping Canopy's own use).
    pub(super) fn spawn_inventory(&self, provider: String) {
        let Some(p) = self.provider(&provider) else { return };
        let tx = self.tx.clone();
        let timeout = self.config.call_timeout;
        tokio::spawn(async move {
            match tokio::time::timeout(timeout, p.inventory()).await {
                Ok(Ok(inv)) => {
                    Self::send(&tx, Event::Inventory { provider, pools: inv.into_pool_defs() });
                }
                Ok(Err(e)) => tracing::warn!(%provider, error = %e, "could not refresh the inventory"),
                Err(_) => tracing::warn!(%provider, "inventory refresh timed out"),
            }
        });
    }

    pub(super) fn spawn_collect(
        &mut self,
        attempt: AttemptId,
        provider: String,
        token: String,
        end: ProviderEnd,
        outputs: bool,
    ) {
        let tx = self.tx.clone();
        let tail_lines = self.config.tail_lines;
        let spec = self
            .specs
            .get(&attempt.workload)
            .cloned()
            .or_else(|| self.core.workload(attempt.workload).map(|w| w.spec.clone()));
        let dest = self.config.artifacts.join(attempt.workload.to_string()).join(attempt.n.to_string());
        let Some(p) = self.provider(&provider) else {
            return Self::send(
                &tx,
                Event::Collected { attempt, end, log_tail: Vec::new(), outputs: OutputsResult::Skipped },
            );
        };
        let logs = log_dir(&self.config.logs, attempt);
        let mask = self.secret_values(attempt.workload);
        let clock = self.clock.clone();
        let checkpoints = spec
            .as_ref()
            .and_then(|s| s.checkpoint.clone())
            .map(|ck| (self.config.checkpoints.join(attempt.workload.to_string()), ck));
        let lock = self.checkpoints.lock(attempt.workload);
        let said = self.checkpoints.said.clone();
        tokio::spawn(async move {
            if let Some((dir, ck)) = checkpoints {
                let _held = lock.lock().await;
                // Copied through the store: what the attempt wrote last
                // comes in before the store is read (an attempt that never
                // launched wrote nothing; a lost node has nothing to give:
                // what it had was copied while it ran).
                let reachable = !matches!(
                    end,
                    ProviderEnd::LaunchRejected { .. }
                        | ProviderEnd::LaunchTimeout
                        | ProviderEnd::BootFailed { .. }
                        | ProviderEnd::NodeLost { .. }
                );
                if reachable && p.copies_checkpoints() {
                    let r = p.sync_checkpoint(&token, &dir, crate::engine::checkpoint::cap_bytes(&ck)).await;
                    report_sync(&tx, &said, attempt, &provider, &ck, r);
                }
                let found =
                    tokio::task::spawn_blocking(move || crate::engine::checkpoint::newest_complete(&dir))
                        .await
                        .ok()
                        .and_then(|r| {
                            r.map_err(|e| tracing::warn!(%attempt, "cannot read its checkpoints: {e}")).ok()
                        })
                        .flatten();
                Self::send(&tx, Event::CheckpointFound { attempt, found });
            }
            ship_logs(&*p, &token, &logs, &mask, &*clock).await;
            let mut log_tail = tail_lines_of(&logs.join("stdout.log"), tail_lines).await;
            log_tail.extend(tail_lines_of(&logs.join("stderr.log"), tail_lines).await);
            let outputs = match (outputs, spec) {
                (true, Some(spec)) => match p.outputs(&token, &spec, &dest).await {
                    Ok(c) => {
                        // What was left behind, and why, is in the manifest
                        // for the user (`skipped`), and in the engine's log.
                        for s in &c.skipped {
                            tracing::warn!(%attempt, output = %s.name, path = %s.path, "output not collected: {}", s.reason);
                        }
                        let manifest = serde_json::to_vec_pretty(&c).unwrap_or_default();
                        let at = dest.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            crate::private::dir_all(&at)?;
                            crate::private::write_replacing(&at.join("manifest.json"), &manifest)
                        })
                        .await;
                        OutputsResult::Collected { count: c.artifacts.len() }
                    }
                    Err(e) => OutputsResult::Failed { message: e.to_string() },
                },
                _ => OutputsResult::Skipped,
            };
            // What the attempt left at its provider goes once its end is
            // journalled (`Action::Release`), not here.
            Self::send(&tx, Event::Collected { attempt, end, log_tail, outputs });
        });
    }

    /// Logs and outputs are Canopy's and the attempt's end is journalled:
    /// what it left at its provider may go (only providers on others'
    /// machines remove anything).
    pub(super) fn spawn_release(&self, attempt: AttemptId, provider: String, token: String) {
        let Some(p) = self.provider(&provider) else { return };
        tokio::spawn(async move {
            if let Err(e) = p.release(&token).await {
                tracing::warn!(%attempt, "could not remove what the attempt left at its provider: {e}");
            }
        });
    }
}

/// The spec's checkpoint cap, as the operator wrote it and in bytes.
fn cap_text(ck: &crate::spec::Checkpoint) -> String {
    let gb = ck.max_gb.unwrap_or(crate::spec::Checkpoint::DEFAULT_MAX_GB);
    format!("{gb} GB, {}", crate::units::human_bytes(crate::engine::checkpoint::cap_bytes(ck)))
}

/// Says what a checkpoint sync found that matters, once: a checkpoint
/// over the cap in the workload's events, a failure in the engine's log.
fn report_sync(
    tx: &mpsc::UnboundedSender<Msg>,
    said: &std::sync::Mutex<HashMap<AttemptId, String>>,
    attempt: AttemptId,
    provider: &str,
    ck: &crate::spec::Checkpoint,
    r: Result<crate::providers::CheckpointCopy, crate::providers::ProviderError>,
) {
    use crate::providers::CheckpointCopy;
    let note = match &r {
        Ok(CheckpointCopy::UpToDate | CheckpointCopy::Copied(_)) => return,
        Ok(CheckpointCopy::OverCap(f)) => format!("over:{}:{}", f.name, f.at_ms),
        Err(e) => format!("error:{e}"),
    };
    let mut said = said.lock().unwrap_or_else(|e| e.into_inner());
    if said.get(&attempt) == Some(&note) {
        return;
    }
    said.insert(attempt, note);
    match r {
        Ok(CheckpointCopy::OverCap(f)) => {
            let message = format!(
                "checkpoint {} ({}) written on {provider} is over the checkpoint cap ({}, checkpoint.max_gb): \
                 it is not copied into Canopy's store, so a later attempt cannot resume from it",
                f.name,
                crate::units::human_bytes(f.bytes),
                cap_text(ck)
            );
            let _ = tx.send(Msg::Event(Event::CheckpointNotCopied { attempt, message }));
        }
        Err(e) => tracing::warn!(%attempt, "could not copy its newest checkpoint into the store: {e}"),
        Ok(_) => {}
    }
}
