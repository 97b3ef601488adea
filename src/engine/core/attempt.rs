//! Placement and the life of one attempt: launch, status, termination,
//! collection and classification. Its deadlines are in `deadline.rs`, the
//! retry decision after a failure in `retrying.rs`.

use super::retrying::spent;
use super::{Action, Core, Entry, Live, OutputsResult};
use crate::engine::classify::classify;
use crate::engine::model::*;
use crate::engine::rules::REFUSED_RULE;
use crate::failure::{FailureClass, ProviderEnd};
use crate::fleet::{Free, NodeIdx};
use crate::providers::{AttemptStatus, LaunchAck, LaunchError};
use crate::schedule::{Candidate, Decision, Requirements, place};
use std::fmt::Write as _;

impl Core {
    /// Places ready workloads, highest priority first, until none is left.
    ///
    /// Workloads blocked because nothing fitted them are not placed again
    /// while the answer that blocked them provably still holds (see
    /// `queue.rs`): that would give the same answer and change nothing.
    pub(super) fn schedule_pass(&mut self, now: Millis) {
        loop {
            self.forget_emptied_groups();
            let (unfit, snapshot) = (&mut self.unfit, &self.snapshot);
            let (quota, tenancy) = (&self.quota, &self.tenancy);
            let checks = &mut self.counts.group_checks;
            let holds = |g: u64| {
                *checks += 1;
                snapshot.as_ref().is_some_and(|s| {
                    unfit.request(g).is_some_and(|r| super::tenancy::quota_unchanged(quota, tenancy, r))
                        && unfit.revalidate(g, s)
                })
            };
            let Some(id) = self.queue.pop_ready_checking(holds) else { break };
            self.counts.taken += 1;
            let Some(e) = self.entries.get(&id) else { continue };
            if e.live.is_some() || e.cancel_requested {
                continue;
            }
            let placement = self.config.placement;
            let mut req = self.placement_request(e);
            let quota_why = self.gate_quota(e, &mut req);
            self.apply_hold(id, e.rec.priority, &mut req, now);
            self.apply_rooms(id, &mut req);
            let e_optimize = e.rec.spec.preferences.optimize;
            let policy = placement.scheduler_policy(e_optimize);
            let (priority, queued_at) = (e.rec.priority, self.queue_priority(id));
            let next_attempt = e.rec.attempts + 1;
            self.snapshot(now);
            // Room kept for this workload after a fair-share preemption is
            // where it goes when it fits there (`room.rs`).
            if let Some(c) = self.place_in_room(id, &req, &policy) {
                self.counts.decisions += 1;
                if self.budget_admits(id, &c, now) {
                    self.start_attempt(id, c, now);
                }
                continue;
            }
            let Some(snap) = self.snapshot.as_ref() else { continue };
            // Nothing fitted this request before, and nothing it depends on
            // changed since: the answer is the one remembered (exactly).
            let known = self.unfit.find(&req, snap).and_then(|g| self.unfit.get(g).map(|(_, t)| (g, t)));
            match known {
                Some(_) => self.counts.remembered += 1,
                None => self.counts.decisions += 1,
            }
            let outcome = match known {
                Some((group, text)) => {
                    if self.self_check {
                        let fresh = match place(&req, snap, &policy) {
                            Decision::Placed(_) => "placed".to_string(),
                            Decision::Unschedulable(ex) => ex.to_string(),
                        };
                        if fresh != text && self.check_failure.is_none() {
                            self.check_failure = Some(format!(
                                "remembered unfit answer for {id} is stale: {text:?} != {fresh:?}"
                            ));
                        }
                    }
                    Err((group, text.to_string()))
                }
                None => match place(&req, snap, &placement.deciding_policy(e_optimize)) {
                    Decision::Placed(p) => {
                        self.counts.candidates += p.candidates.len() as u64;
                        Ok(p)
                    }
                    Decision::Unschedulable(ex) => {
                        let text = ex.to_string();
                        Err((self.unfit.insert(&req, snap, ex), text))
                    }
                },
            };
            match outcome {
                Ok(p) => match placement.choose(p.candidates, id.0, next_attempt) {
                    Some(c) if !self.budget_admits(id, &c, now) => {}
                    Some(c) if self.waits(id, &req, &c, now) => {}
                    Some(c) => self.start_attempt(id, c, now),
                    None => self.queue.push_blocked(queued_at, id),
                },
                Err((group, text)) => {
                    self.maybe_hold(id, priority, &req, now);
                    self.maybe_reclaim(id, &req, now);
                    // The binding quota limits, in numbers, after the
                    // explanation's first line.
                    let text = if quota_why.is_empty() {
                        text
                    } else {
                        let (head, rest) = text.split_once('\n').unwrap_or((text.as_str(), ""));
                        let sep = if rest.is_empty() { "" } else { "\n" };
                        format!("{head}; {}{sep}{rest}", quota_why.join("; "))
                    };
                    let e = self.entries.get_mut(&id).map(|e| {
                        let changed = e.last_explanation.as_deref() != Some(text.as_str());
                        e.last_explanation = Some(text.clone());
                        e.rec.state = WorkloadState::Queued;
                        let note = Self::refusal_note(e).unwrap_or_default();
                        e.rec.reason = Some(first_line(&text) + &note);
                        changed
                    });
                    self.queue.push_unfit(queued_at, id, group);
                    if e == Some(true) {
                        self.save_workload(id, now);
                        self.event(now, id, None, EventKind::Unschedulable, text);
                    }
                }
            }
        }
    }

    /// What the scheduler is asked for this workload's next attempt.
    pub(super) fn placement_request(&self, e: &Entry) -> Requirements {
        requirements(e, self.config.placement.keeps_exclusions())
    }

    fn start_attempt(&mut self, id: WorkloadId, c: Candidate, now: Millis) {
        self.touched.push(id);
        self.release_hold(id);
        self.release_room(id);
        let nodes = c.node_indices();
        let node_names = c.node_names();
        let gpu_memory_gb = self.fleet.pool(c.pool_idx).gpu_memory_gb();
        let pool_name = self.fleet.pool(c.pool_idx).name.clone();
        let nonce = self.next_nonce();
        let Some(e) = self.entries.get_mut(&id) else { return };
        let r = &e.rec.spec.resources;
        let alloc = Free { gpus: r.gpus, cpu_cores: r.cpu_cores, memory_gb: r.memory_gb, disk_gb: r.disk_gb };
        // A launch refused for capacity gives its row to this placement
        // (`refused.rs`): refusals do not pile up attempts.
        if e.attempts
            .last()
            .is_some_and(|t| t.rule.as_deref() == Some(REFUSED_RULE) && t.id.n == e.rec.attempts)
        {
            e.attempts.pop();
        } else {
            e.rec.attempts += 1;
        }
        e.waiting_since = None;
        let attempt = AttemptId { workload: id, n: e.rec.attempts };
        let est = c.est_cost_usd.high.unwrap_or(c.est_cost_usd.low);
        // The factors ("cost=0.93 health=1.00 …"), written into one string.
        let mut breakdown = String::with_capacity(16 * c.breakdown.len());
        for (i, f) in c.breakdown.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let _ = write!(breakdown, "{sep}{}={:.2}", f.factor, f.raw);
        }
        // Work without GPUs on a GPU node: why, after the factors; and the
        // chance its retry budget runs out here, which the success factor holds.
        let mut note = c.gpu_node.map(|g| format!("; {g}")).unwrap_or_default();
        if let Some(p) = c.exhaustion {
            note +=
                &format!("; success holds a {:.1}% chance of exhausting the retry budget here", p * 100.0);
        }
        breakdown.push_str(&note);
        e.attempts.push(AttemptRecord {
            id: attempt,
            provider: c.provider.clone(),
            pool: c.pool.clone(),
            node: c.node.clone(),
            region: c.region.clone(),
            state: AttemptState::Placing,
            price_per_hour: c.hourly_usd,
            est_cost_usd: est,
            gpus: alloc.gpus,
            gpu_memory_gb,
            score: c.score,
            score_breakdown: breakdown,
            placed_at: now,
            started_at: None,
            ended_at: None,
            exit_code: None,
            class: None,
            rule: None,
            evidence: None,
            cost_usd: 0.0,
            provider_ref: None,
            nonce,
            stop: None,
            nodes: if node_names.len() > 1 { node_names.clone() } else { Vec::new() },
            checkpoint: None,
        });
        let due = e.rec.spec.expected_runtime.map(|d| now.plus_secs(d.0.as_secs_f64()));
        self.live_ids.insert(id, Some(c.pool_idx), due);
        e.live = Some(Live {
            idx: e.attempts.len() - 1,
            nodes: nodes.clone(),
            alloc,
            launch_sent_at: now,
            launch_resends: 0,
            acked: false,
            unreachable_since: None,
            outage_at: None,
            terminating: None,
            terminate_sent_at: None,
            collecting: false,
            charged: None,
        });
        // The newest checkpoint an earlier attempt left is handed to this
        // one (the shell prepares the directory before the launch).
        let resumed = if e.rec.spec.checkpoint.is_some() {
            e.attempts.iter().rev().skip(1).find_map(|t| {
                let saved = t.checkpoint.as_ref()?.saved.clone()?;
                Some((saved, t.ended_at))
            })
        } else {
            None
        };
        if let Some((saved, _)) = &resumed
            && let Some(att) = e.attempts.last_mut()
        {
            att.checkpoint = Some(CheckpointNote { resumed: Some(saved.clone()), saved: None });
        }
        e.rec.state = WorkloadState::Placing;
        e.rec.est_cost_usd = est;
        e.rec.reason = None;
        e.last_explanation = None;
        let spec = e.rec.spec.clone();
        let idx = e.attempts.len() - 1;
        let token = e.attempts[idx].token(&self.store_id);
        for n in &nodes {
            self.allocate(*n, alloc, 1);
        }
        self.charge_quota(id);
        self.save_attempt(id, idx);
        self.save_workload(id, now);
        let msg = if node_names.len() > 1 {
            format!(
                "placed a gang of {} on {} ({} each, nodes {}) at ${:.2}/h, score {:.1}{note}",
                node_names.len(),
                c.pool,
                c.accelerator,
                node_names.join(","),
                c.hourly_usd,
                c.score
            )
        } else {
            format!(
                "placed on {} ({}, node {}) at ${:.2}/h, score {:.1}{note}",
                c.pool, c.accelerator, c.node, c.hourly_usd, c.score
            )
        };
        self.event(now, id, Some(attempt), EventKind::Placed, msg);
        if let Some((saved, ended)) = resumed {
            let before = ended.map_or(String::new(), |end| {
                format!(
                    " (saved {} before it ended)",
                    crate::units::human_secs(end.secs_since(saved.at).max(0.0))
                )
            });
            let msg = format!("resumes from checkpoint {} of attempt {}{before}", saved.name, saved.attempt);
            self.event(now, id, Some(attempt), EventKind::Checkpoint, msg);
        }
        self.out.push(Action::Launch {
            attempt,
            provider: c.provider,
            token,
            pool: pool_name,
            nodes: node_names,
            spec,
        });
    }

    /// Takes (`sign = 1`) or gives back (`sign = -1`) an attempt's share of a node.
    pub(super) fn allocate(&mut self, node: NodeIdx, a: Free, sign: i32) {
        let Some(n) = self.fleet.nodes.get_mut(node.0 as usize) else { return };
        let s = sign as f64;
        n.free.gpus = n.free.gpus.saturating_add_signed(-sign * a.gpus as i32);
        n.free.cpu_cores -= s * a.cpu_cores;
        n.free.memory_gb -= s * a.memory_gb;
        n.free.disk_gb -= s * a.disk_gb;
        n.canopy_gpus = n.canopy_gpus.saturating_add_signed(sign * a.gpus as i32);
        if let Some(snap) = self.snapshot.as_mut() {
            snap.set_node_capacity(node, n.free, n.canopy_gpus);
        }
    }

    pub(super) fn live_mut(&mut self, a: AttemptId) -> Option<(&mut Entry, usize)> {
        self.touched.push(a.workload);
        let e = self.entries.get_mut(&a.workload)?;
        let idx = e.live.as_ref()?.idx;
        (e.attempts[idx].id == a).then_some((e, idx))
    }

    pub(super) fn on_launch_result(
        &mut self,
        a: AttemptId,
        result: Result<LaunchAck, LaunchError>,
        now: Millis,
    ) {
        let max_resends = self.config.launch_resends;
        let store_id = self.store_id.clone();
        let Some((e, idx)) = self.live_mut(a) else { return };
        match result {
            Ok(ack) => {
                let Some(live) = e.live.as_mut() else { return };
                live.acked = true;
                let nodes = live.nodes.clone();
                let att = &mut e.attempts[idx];
                att.provider_ref = Some(ack.provider_ref.clone());
                if att.state == AttemptState::Placing {
                    att.state = AttemptState::Launching;
                    e.rec.state = WorkloadState::Launching;
                }
                let cancel = e.cancel_requested;
                let (kind, what) = if ack.adopted {
                    (EventKind::Adopted, "adopted the attempt the provider already had")
                } else {
                    (EventKind::Launched, "launched")
                };
                self.save_attempt(a.workload, idx);
                self.save_workload(a.workload, now);
                self.event(now, a.workload, Some(a), kind, format!("{what} ({})", ack.provider_ref));
                self.launch_accepted_on(&nodes);
                // An owner's reclaim is over once its work is launched, not
                // when it is placed: a launch refused for capacity leaves
                // the owner's pools closed to others until it runs.
                self.reclaim_done(a.workload);
                if cancel {
                    self.terminate_live(a.workload, ProviderEnd::Cancelled, now);
                }
            }
            // No answer: the launch may or may not have happened. Send it
            // again with the same token; the provider adopts if it has it.
            Err(LaunchError::Timeout) => {
                let Some(live) = e.live.as_mut() else { return };
                if live.launch_resends < max_resends {
                    live.launch_resends += 1;
                    live.launch_sent_at = now;
                    let (provider, nodes, spec) =
                        (e.attempts[idx].provider.clone(), e.attempts[idx].all_nodes(), e.rec.spec.clone());
                    let pool =
                        e.attempts[idx].pool.split_once('/').map_or(String::new(), |(_, p)| p.to_string());
                    let token = e.attempts[idx].token(&store_id);
                    self.out.push(Action::Launch { attempt: a, provider, token, pool, nodes, spec });
                } else {
                    let end = ProviderEnd::LaunchTimeout;
                    self.terminate_live(a.workload, end, now);
                }
            }
            // No capacity where it was placed: the node counts as full and
            // the workload is placed again, without a new attempt.
            Err(LaunchError::Capacity(m)) if self.on_refused(a, &m, now) => {}
            // A definite refusal: nothing runs, the attempt closes now.
            Err(err) => {
                let end = err.to_end();
                self.close_attempt(a, end, &[], OutputsResult::Skipped, now);
            }
        }
    }

    pub(super) fn on_status(&mut self, a: AttemptId, status: AttemptStatus, now: Millis) {
        if let AttemptStatus::Reclaiming { within_s, message } = status {
            // It runs until Canopy stops it.
            self.on_status(a, AttemptStatus::Running, now);
            return self.on_reclaim_notice(a, within_s, message, now);
        }
        let Some((e, _)) = self.live_mut(a) else { return };
        if e.live.as_mut().and_then(|l| l.unreachable_since.take()).is_some() {
            self.event(now, a.workload, Some(a), EventKind::Running, "provider reachable again".into());
        }
        // A lost leader's host-bound attempt its provider here does not
        // know: nothing until the old host's lease has lapsed, then a
        // lost node (retried as a new attempt, never re-launched).
        if let Some(&until) = self.held.get(&a) {
            if !matches!(status, AttemptStatus::NotFound) {
                self.held.remove(&a);
            } else if now < until {
                return;
            } else {
                self.held.remove(&a);
                let end = ProviderEnd::NodeLost {
                    message: "the attempt ran on the host of a server that lost the journal's lease; \
                              its lease there has lapsed"
                        .into(),
                };
                self.event(
                    now,
                    a.workload,
                    Some(a),
                    EventKind::Lost,
                    "attempt lost with its server's host".into(),
                );
                return self.close_attempt(a, end, &[], OutputsResult::Skipped, now);
            }
        }
        let Some((e, idx)) = self.live_mut(a) else { return };
        let att = &mut e.attempts[idx];
        match status {
            AttemptStatus::Pending => {
                if att.state == AttemptState::Placing {
                    att.state = AttemptState::Launching;
                    e.rec.state = WorkloadState::Launching;
                    if let Some(l) = e.live.as_mut() {
                        l.acked = true;
                    }
                    self.save_attempt(a.workload, idx);
                    self.save_workload(a.workload, now);
                }
            }
            AttemptStatus::Running => {
                if matches!(att.state, AttemptState::Placing | AttemptState::Launching) {
                    att.state = AttemptState::Running;
                    att.started_at = Some(now);
                    e.rec.state = WorkloadState::Running;
                    if let Some(l) = e.live.as_mut() {
                        l.acked = true;
                    }
                    let due = e.rec.spec.expected_runtime.map(|d| now.plus_secs(d.0.as_secs_f64()));
                    let msg = format!("running on {}", att.node);
                    if let Some(due) = due {
                        self.live_ids.set_due(a.workload, due);
                    }
                    self.save_attempt(a.workload, idx);
                    self.save_workload(a.workload, now);
                    self.event(now, a.workload, Some(a), EventKind::Running, msg);
                    self.notify(a.workload, crate::spec::NotifyOn::Running, now);
                }
            }
            AttemptStatus::Ended(end) => self.request_collect(a, end),
            // Handled above.
            AttemptStatus::Reclaiming { .. } => {}
            AttemptStatus::NotFound => {
                let live = e.live.as_ref();
                let terminating = live.and_then(|l| l.terminating.clone());
                let acked = live.is_some_and(|l| l.acked);
                match (terminating, acked) {
                    // Confirmed gone after we asked it to stop.
                    (Some(reason), _) => self.close_attempt(a, reason, &[], OutputsResult::Skipped, now),
                    // The launch has not reached the provider (yet); the
                    // launch timeout re-sends it.
                    (None, false) => {}
                    // It vanished across an outage of its provider's control
                    // plane (a restarted Ray head forgets its jobs): the
                    // provider's loss; no node is to blame.
                    (None, true) if live.and_then(|l| l.outage_at).is_some() => {
                        let since = live.and_then(|l| l.outage_at).unwrap_or(now);
                        let end = ProviderEnd::ApiError {
                            message: format!(
                                "the attempt vanished from its provider, which was unreachable {:.0}s before",
                                now.secs_since(since).max(0.0)
                            ),
                        };
                        self.event(
                            now,
                            a.workload,
                            Some(a),
                            EventKind::Lost,
                            "attempt lost by its provider during an outage".into(),
                        );
                        self.close_attempt(a, end, &[], OutputsResult::Skipped, now);
                    }
                    (None, true) => {
                        let end = ProviderEnd::NodeLost {
                            message: "the attempt vanished from its provider without an exit status".into(),
                        };
                        self.event(
                            now,
                            a.workload,
                            Some(a),
                            EventKind::Lost,
                            "attempt lost at the provider".into(),
                        );
                        self.close_attempt(a, end, &[], OutputsResult::Skipped, now);
                    }
                }
            }
        }
    }

    pub(super) fn on_status_failed(&mut self, a: AttemptId, error: &str, now: Millis) {
        let Some((e, _)) = self.live_mut(a) else { return };
        let Some(live) = e.live.as_mut() else { return };
        if live.unreachable_since.is_none() {
            live.unreachable_since = Some(now);
            live.outage_at = Some(now);
            let msg = format!("status poll failed: {error} (not an end: waiting)");
            self.event(now, a.workload, Some(a), EventKind::StatusUnreachable, msg);
        }
    }

    /// The provider reclaims the attempt's capacity within `within_s`:
    /// stop it now, SIGTERM first with the time the notice leaves, so a
    /// workload that checkpoints on SIGTERM loses nothing. A stop already
    /// under way (cancel, drain, limits) keeps its own reason.
    fn on_reclaim_notice(&mut self, a: AttemptId, within_s: u64, message: String, now: Millis) {
        let Some((e, _)) = self.live_mut(a) else { return };
        if e.live.as_ref().is_some_and(|l| l.terminating.is_some() || l.collecting) {
            return;
        }
        self.terminate_live(a.workload, ProviderEnd::Reclaimed { message, grace_s: within_s }, now);
    }

    fn request_collect(&mut self, a: AttemptId, end: ProviderEnd) {
        let store_id = self.store_id.clone();
        let Some((e, idx)) = self.live_mut(a) else { return };
        let Some(live) = e.live.as_mut() else { return };
        if live.collecting {
            return;
        }
        live.collecting = true;
        let outputs = live.terminating.is_none() && end == ProviderEnd::Exited { code: 0 };
        let provider = e.attempts[idx].provider.clone();
        let token = e.attempts[idx].token(&store_id);
        self.out.push(Action::Collect { attempt: a, provider, token, end, outputs });
    }

    /// Notes the newest complete checkpoint the live attempt left: written
    /// by it, or the one it was handed when it wrote none.
    pub(super) fn on_checkpoint(
        &mut self,
        a: AttemptId,
        found: Option<crate::engine::checkpoint::Found>,
        now: Millis,
    ) {
        let Some((e, idx)) = self.live_mut(a) else { return };
        let att = &mut e.attempts[idx];
        let note = att.checkpoint.get_or_insert_with(CheckpointNote::default);
        let Some(f) = found else { return };
        let handed = note.resumed.as_ref().filter(|r| r.name == f.name && r.at.0 == f.at_ms);
        let writer = handed.map_or(a.n, |r| r.attempt);
        let saved = SavedCheckpoint { name: f.name, at: Millis(f.at_ms), bytes: f.bytes, attempt: writer };
        let new = writer == a.n;
        let msg = if new {
            let age = now.secs_since(saved.at).max(0.0);
            format!(
                "left checkpoint {} ({} bytes, saved {} before it ended)",
                saved.name,
                saved.bytes,
                crate::units::human_secs(age)
            )
        } else {
            format!("wrote no new checkpoint; {} of attempt {} stays the newest", saved.name, writer)
        };
        note.saved = Some(saved);
        self.save_attempt(a.workload, idx);
        self.event(now, a.workload, Some(a), EventKind::Checkpoint, msg);
    }

    /// A checkpoint did not travel with the live attempt: it starts
    /// without it, so its record no longer says it resumed from it, and
    /// its events say why.
    pub(super) fn on_checkpoint_not_copied(&mut self, a: AttemptId, message: String, now: Millis) {
        let Some((e, idx)) = self.live_mut(a) else { return };
        if let Some(note) = e.attempts[idx].checkpoint.as_mut()
            && note.resumed.take().is_some()
        {
            self.save_attempt(a.workload, idx);
        }
        self.event(now, a.workload, Some(a), EventKind::Checkpoint, message);
    }

    pub(super) fn on_terminated(&mut self, a: AttemptId, result: Result<(), String>, now: Millis) {
        let Some((e, _)) = self.live_mut(a) else { return };
        let Some(live) = e.live.as_ref() else { return };
        let Some(reason) = live.terminating.clone() else { return };
        match result {
            Ok(()) => self.request_collect(a, reason),
            Err(msg) => {
                let m = format!("terminate failed: {msg}; will retry");
                self.event(now, a.workload, Some(a), EventKind::TerminateRequested, m);
            }
        }
    }

    pub(super) fn on_collected(
        &mut self,
        a: AttemptId,
        end: ProviderEnd,
        log_tail: &[String],
        outputs: OutputsResult,
        now: Millis,
    ) {
        let reason = self.live_mut(a).and_then(|(e, _)| e.live.as_ref().and_then(|l| l.terminating.clone()));
        let store_id = self.store_id.clone();
        let release = self
            .live_mut(a)
            .map(|(e, idx)| (e.attempts[idx].provider.clone(), e.attempts[idx].token(&store_id)));
        // When Canopy stopped it, Canopy's reason decides the class.
        let end = reason.unwrap_or(end);
        self.close_attempt(a, end, log_tail, outputs, now);
        // After the close's records: the shell journals them first.
        if let Some((provider, token)) = release {
            self.out.push(Action::Release { attempt: a, provider, token });
        }
    }

    /// Asks the provider to stop the live attempt; it closes once confirmed.
    pub(super) fn terminate_live(&mut self, id: WorkloadId, reason: ProviderEnd, now: Millis) {
        self.touched.push(id);
        let Some(e) = self.entries.get_mut(&id) else { return };
        let Some(live) = e.live.as_mut() else { return };
        if live.terminating.is_some() && live.terminate_sent_at.is_some() {
            return;
        }
        live.terminating = Some(reason.clone());
        live.terminate_sent_at = Some(now);
        let idx = live.idx;
        let att = &mut e.attempts[idx];
        let a = att.id;
        if !att.state.is_final() {
            att.state = AttemptState::Terminating;
        }
        // Durable from here: a restart carries the stop out with this reason.
        att.stop = Some(reason.clone());
        let provider = att.provider.clone();
        let token = att.token(&self.store_id);
        self.save_attempt(id, idx);
        self.event(
            now,
            id,
            Some(a),
            EventKind::TerminateRequested,
            format!("terminating: {}", describe_end(&reason)),
        );
        self.out.push(Action::Terminate { attempt: a, provider, token });
    }

    /// Closes the live attempt with how it ended: classify, observe health,
    /// release capacity, then retry or finish the workload.
    pub(super) fn close_attempt(
        &mut self,
        a: AttemptId,
        end: ProviderEnd,
        log_tail: &[String],
        outputs: OutputsResult,
        now: Millis,
    ) {
        let fleet_max_mem = self.max_gpu_memory;
        if self.live_mut(a).is_none() {
            return;
        }
        // `a` is the live attempt (just checked): it stops being live here.
        self.live_ids.remove(a.workload);
        let Some((e, idx)) = self.live_mut(a) else { return };
        let Some(live) = e.live.take() else { return };
        let att = &mut e.attempts[idx];
        att.ended_at = Some(now);
        let ran_h = att.started_at.map_or(0.0, |s| now.secs_since(s).max(0.0) / 3600.0);
        att.cost_usd = att.price_per_hour * ran_h;
        e.rec.cost_usd += att.cost_usd;
        att.exit_code = match *end.inner() {
            ProviderEnd::Exited { code } => Some(code),
            ProviderEnd::Signaled { signal } => Some(128 + signal),
            _ => None,
        };
        let clean = end == ProviderEnd::Exited { code: 0 };
        let (class, rule, evidence) = match (&outputs, clean) {
            (OutputsResult::Failed { message }, true) => {
                let (class, rule, evidence) = crate::engine::classify::collection_failure(message);
                (Some(class), rule.to_string(), evidence)
            }
            (_, true) => (None, "exit.clean".to_string(), "exit code 0".to_string()),
            (_, false) => {
                let lines: Vec<&str> = log_tail.iter().map(String::as_str).collect();
                let c = classify(&end, &lines);
                (Some(c.class), c.rule.to_string(), c.evidence.line)
            }
        };
        att.class = class;
        att.rule = Some(rule.clone());
        att.evidence = Some(evidence.clone());
        att.state = match class {
            None => AttemptState::Succeeded,
            Some(FailureClass::Cancelled) => AttemptState::Cancelled,
            Some(_) => AttemptState::Failed,
        };
        // A gang's failure is charged to the node of the rank that ended
        // first, when the provider says which; else to rank 0's, where the
        // gang was launched from. Never to all of them.
        let culprit = end.rank().map_or_else(|| att.node.clone(), |(_, n)| n.to_string());
        let (provider, pool, node) = (att.provider.clone(), att.pool.clone(), culprit);
        let started = att.started_at;
        let gpu_mem = att.gpu_memory_gb;
        let cancelled = e.cancel_requested;
        let launched = att.started_at.is_some() || live.acked;
        for n in &live.nodes {
            self.allocate(*n, live.alloc, -1);
        }
        self.uncharge_quota(live.charged.clone());
        self.save_attempt(a.workload, idx);
        let msg = match class {
            None => format!("succeeded on {node}"),
            Some(c) => format!("{c} [{rule}]: {evidence}"),
        };
        self.event(now, a.workload, Some(a), EventKind::Ended, msg);
        self.budget_closed(a.workload, idx, now);
        // A cancel or an eviction says nothing about the node.
        let judged = class != Some(FailureClass::Cancelled)
            && !matches!(end.inner(), ProviderEnd::Evicted { .. } | ProviderEnd::OwnerReclaim { .. });
        if judged && (launched || class == Some(FailureClass::Capacity)) {
            let ran_s = started.map_or(0.0, |t| now.secs_since(t).max(0.0));
            // A stop that was free for the workload (`retry::stop_is_free`)
            // is not held against the pool either (`HealthObservation::free`).
            let free = self
                .entries
                .get(&a.workload)
                .is_some_and(|e| super::retrying::free_stops(e).get(idx).copied().unwrap_or(false));
            let obs = HealthObservation {
                free,
                at: now,
                provider,
                pool: pool.clone(),
                node: node.clone(),
                class,
                ran_s,
                lift: false,
            };
            self.record(Record::Health(obs.clone()));
            if let Some(q) = self.health.observe(&obs) {
                let until = q.until;
                let m = format!("node {} quarantined until {} ms: {}", q.node, until.0, q.reason);
                self.event(now, a.workload, Some(a), EventKind::Quarantined, m);
            }
            self.observed(&obs, now);
        }
        // What this attempt held is free again: wake the blocked work that
        // fits where it was. When it actually ran, earlier "no capacity"
        // answers may no longer hold either.
        for n in &live.nodes {
            self.node_released(*n);
        }
        if let Some(pool) = self.pool_of(&live) {
            self.lend_released(pool, u64::from(live.alloc.gpus) * live.nodes.len() as u64);
        }
        if launched && class != Some(FailureClass::Capacity) {
            self.forget_capacity_misses();
        }
        let Some(class) = class else {
            return self.finish_workload(
                a.workload,
                WorkloadState::Succeeded,
                None,
                format!("succeeded on {node}"),
                now,
            );
        };
        if cancelled {
            return self.finish_workload(
                a.workload,
                WorkloadState::Cancelled,
                Some(FailureClass::Cancelled),
                "cancelled by an operator".into(),
                now,
            );
        }
        self.retry_or_fail(a, class, &pool, &node, gpu_mem, fleet_max_mem, now);
    }
}

/// The scheduler's requirements for this workload's next attempt: the spec
/// plus what its history rules out.
/// Without `history` (policies that keep no per-workload memory), only
/// this moment's capacity misses are excluded.
fn requirements(e: &Entry, history: bool) -> Requirements {
    let mut req = Requirements::from_spec(&e.rec.spec);
    if history {
        req.exclude_nodes = e.exclude_nodes.iter().cloned().collect();
        req.exclude_pools = e.exclude_pools.union(&e.capacity_misses).cloned().collect();
    } else {
        req.exclude_pools = e.capacity_misses.iter().cloned().collect();
    }
    req.min_gpu_memory_exclusive = e.min_gpu_memory_exclusive;
    // What is left of the retry budget, for the placement's exhaustion risk.
    let (s, r) = (spent(e), &e.rec.spec.retry);
    let attempts_left = r.max_attempts.saturating_sub(1).saturating_sub(s.counted);
    req.charged_stops_left = Some(r.infra_retries.saturating_sub(s.infra).saturating_add(attempts_left));
    if let Some(cap) = req.max_cost_usd {
        req.max_cost_usd = Some((cap - e.rec.cost_usd).max(0.0));
    }
    req
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or_default().to_string()
}

fn describe_end(end: &ProviderEnd) -> String {
    match end {
        ProviderEnd::Cancelled => "cancelled by an operator".into(),
        ProviderEnd::MaxRuntimeReached => "max_runtime reached".into(),
        ProviderEnd::CostCapReached => "max_cost_usd reached".into(),
        ProviderEnd::BudgetSpent { budget, message } => format!("budget {budget} is spent: {message}"),
        ProviderEnd::LaunchTimeout => "the launch was never confirmed".into(),
        ProviderEnd::ApiError { message } => message.clone(),
        ProviderEnd::LaunchRejected { message, .. } => message.clone(),
        ProviderEnd::NodeLost { message } | ProviderEnd::Evicted { message, .. } => message.clone(),
        ProviderEnd::OwnerReclaim { owner, message, grace_s, .. } => {
            format!("reclaimed for {owner}: {message}; SIGTERM, then SIGKILL after up to {grace_s}s")
        }
        ProviderEnd::Reclaimed { message, grace_s } => {
            format!("preemption notice: {message}; SIGTERM, then SIGKILL after up to {grace_s}s")
        }
        other => format!("{other:?}"),
    }
}
