//! The app's `update`: each message from the terminal, the engine and
//! the run loop, applied to the app's state and its views' components.

use super::{App, sim_time};
use crate::console::msg::{Effect, Msg, View};
use crate::console::replay::ReplayStatus;
use crate::engine::command::CommandResult;
use crate::engine::handle::{Held, Link};
use crate::engine::model::{Batch, Millis, Record, WorkloadId};
use crate::engine::shell::Recent;

impl App {
    /// Handles one message.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        self.dirty = true;
        let mut fx = match msg {
            Msg::Key(k) => self.on_key(k),
            Msg::Workload(id, r) => self.workload(id, *r),
            Msg::Link(link) => self.linked(link),
            Msg::Audit(result) => {
                let filter = self.filter(View::Audit).to_string();
                self.audit.answered(result, &mut self.model, &filter)
            }
            Msg::Tenants(result) => {
                let fx = self.tenants.answered(*result, self.now);
                // The cursor stays on a row.
                let last = self.tenants.rows.len().saturating_sub(1);
                self.selected.insert(View::Tenants, self.sel(View::Tenants).min(last));
                fx
            }
            Msg::Usage(result) => self.usage.answered(*result, self.now),
            Msg::Servers(result) => {
                let got = match *result {
                    Ok(v) => {
                        self.model.place = crate::console::model::HaPlace::of(&v);
                        Ok(())
                    }
                    // What was shown stays until it answers again.
                    Err(e) => Err(e),
                };
                self.servers.answered(got, self.now);
                Vec::new()
            }
            Msg::Records(r) => self.records(&r),
            Msg::Tick(now) => {
                self.tick(now);
                let mut fx = self.shown_view_due(now);
                if self.replay.is_none() && self.servers.due(now, super::SERVERS_EVERY_MS) {
                    fx.push(Effect::LoadServers);
                }
                fx
            }
            other => {
                self.take(other);
                Vec::new()
            }
        };
        if self.replay.is_none() {
            // A filter whose engine part changed asks the engine.
            let filter = self.filter(View::Audit).to_string();
            fx.extend(self.audit.filter_changed(&filter));
        }
        self.refresh();
        fx
    }

    /// The messages that ask nothing of the run loop.
    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Paste(s) => self.paste(&s),
            Msg::Status(s) => {
                let first = self.model.status.is_none();
                self.model.set_status(s);
                if first || self.view == View::Editor {
                    self.refresh_editor();
                }
            }
            Msg::Recent(r) => self.model.load_recent(r),
            Msg::Older(r) => self.older(r),
            Msg::Events(id, ev) => {
                self.events.take(id, &ev);
                self.detail.take_events(id, ev);
            }
            Msg::Log(a, lines) => {
                let page = self.page();
                if let Some(l) = self.logs.as_mut().filter(|l| l.attempt == a) {
                    l.push(lines, page);
                }
            }
            Msg::Done { what, result } => self.done(what, result),
            Msg::Loaded { path, result } => self.loaded(path, result),
            Msg::Saved { path, result: Ok(()) } => {
                self.flash(format!("saved {path}"));
                self.editor.path = Some(path);
            }
            Msg::Saved { path, result: Err(e) } => self.flash_error(format!("cannot save {path}: {e}")),
            Msg::Edited(Ok(text)) => {
                self.editor.set_text(&text);
                self.refresh_editor();
            }
            Msg::Edited(Err(e)) => self.flash_error(format!("$EDITOR: {e}")),
            Msg::Replay(r) => self.replayed(r),
            Msg::Resize(w, h) => self.size = (w, h),
            // `update` handles those that may ask for effects.
            Msg::Key(_)
            | Msg::Workload(..)
            | Msg::Link(_)
            | Msg::Audit(_)
            | Msg::Tenants(_)
            | Msg::Usage(_)
            | Msg::Servers(_)
            | Msg::Records(_)
            | Msg::Tick(_) => {}
        }
    }

    fn paste(&mut self, s: &str) {
        if self.view == View::Editor {
            self.editor.paste(s);
            self.refresh_editor();
        } else if let Some(i) = &mut self.input {
            i.text.push_str(s.lines().next().unwrap_or(""));
        }
    }

    /// A batch of records; when it changed the tenant tables (an admin's
    /// `tenants-set`), the tenants are loaded again.
    fn records(&mut self, r: &Batch) -> Vec<Effect> {
        self.model.apply(&r.records);
        self.events.records(&r.records);
        if let Some(id) = self.detail.id {
            self.detail.events.extend(r.records.iter().filter_map(|x| match x {
                Record::Event(e) if e.workload == id => Some(e.clone()),
                _ => None,
            }));
        }
        let tables = r.records.iter().any(|x| matches!(x, Record::Audit(a) if a.action == "tenants-set"));
        if tables { self.reload_tenants() } else { Vec::new() }
    }

    fn older(&mut self, r: Result<Recent, String>) {
        self.paging = false;
        match r {
            Ok(page) => {
                let n = page.workloads.len();
                self.model.load_older(page);
                let (held, total) = (self.model.workloads.len(), self.model.total);
                self.flash(format!("loaded {n} older workloads: {held} of {total} held"));
            }
            Err(e) => self.flash_error(format!("cannot load older workloads: {e} (G tries again)")),
        }
    }

    /// A workload the console asked for (`:describe`, `:logs`, `:spec`).
    fn workload(&mut self, id: WorkloadId, r: Result<Option<Held>, String>) -> Vec<Effect> {
        self.detail.fetched(id, r, &mut self.model);
        let logs = self.logs_wanted.take_if(|(w, _)| *w == id);
        match logs.filter(|(id, _)| self.model.workloads.contains_key(id)) {
            Some((id, n)) if self.view == View::Detail => self.open_logs(Some(id), n),
            _ => Vec::new(),
        }
    }

    fn done(&mut self, what: String, result: CommandResult) {
        match result {
            CommandResult::Submitted { id, existing: false } => {
                self.editor.submitted();
                self.flash(format!("{what}: submitted as {id}"));
            }
            CommandResult::Submitted { id, existing: true } => {
                self.flash(format!("{what}: already submitted as {id} (same idempotency key)"))
            }
            CommandResult::Ok { message } => self.flash(format!("{what}: {message}")),
            CommandResult::Error { message, .. } => self.flash_error(format!("{what}: {message}")),
        }
    }

    fn loaded(&mut self, path: String, result: Result<String, String>) {
        match result {
            Ok(text) => {
                self.editor.set_text(&text);
                self.editor.path = Some(path.clone());
                self.refresh_editor();
                self.go(View::Editor);
                self.flash(format!("loaded {path}"));
            }
            Err(e) => self.flash_error(format!("cannot load {path}: {e}")),
        }
    }

    fn tick(&mut self, now: Millis) {
        let was_stale = self.stale();
        self.now = now;
        // Ages and staleness change with time; redraw only then.
        self.dirty = was_stale != self.stale()
            || self.derive_pending
            || self.replay.is_some()
            || matches!(self.view, View::Workloads | View::Overview | View::Events);
    }

    fn replayed(&mut self, r: ReplayStatus) {
        if let Some(end) = r.ended.filter(|_| self.replay.as_ref().is_none_or(|o| o.ended.is_none())) {
            self.flash(format!(
                "replay finished at sim {}: the data stays until you quit (q)",
                sim_time(end, true)
            ));
        }
        self.replay = Some(r);
    }

    /// The engine's link went down or came back.
    fn linked(&mut self, link: Link) -> Vec<Effect> {
        match link {
            Link::Down { since, error } => {
                if self.link_down.is_none() {
                    self.link_down = Some(since);
                    self.flash_error(format!("lost the engine: {error}; reconnecting"));
                }
                Vec::new()
            }
            Link::Up { reloads } => {
                if self.link_down.take().is_some() {
                    self.flash("reconnected to the engine".into());
                }
                // A reconnection or a resync: what the audit view
                // loaded may have missed records, so load it again.
                let first = self.link_reloads.is_none();
                let changed = self.link_reloads.replace(reloads).is_some_and(|r| r != reloads);
                let mut fx = if changed { self.reload_audit() } else { Vec::new() };
                // At the start (whether tenants are configured decides the
                // tab), and after a reconnection.
                if first || changed {
                    fx.extend(self.reload_tenants());
                }
                fx
            }
        }
    }
}
