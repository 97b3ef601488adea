//! The console's state and its `update(msg) -> effects` function.
//!
//! Owns navigation, selection, filters, sorting, the command line, flash
//! messages and the per-view states. Pure: no I/O, no clock (time arrives
//! as [`Msg::Tick`]), no terminal. Whole-app tests feed it messages and
//! draw it into a `TestBackend`; the run loop performs its [`Effect`]s.

use super::action::{self, Asker, Confirm, Op};
use super::component::{Component, Ctx, Outcome};
use super::editor::Editor;
use super::events::EventsView;
use super::keymap::{self, Intent};
use super::logs::Logs;
use super::model::Model;
use super::replay::ReplayStatus;
use super::spec_view::SpecView;
use super::theme::Theme;
use crate::engine::model::{AuditRecord, Millis, WorkloadId};
use crate::text::sanitize;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use std::collections::HashMap;

pub use super::audit::{AUDIT_PAGE, Audit};
use super::derive::Choice;
pub use super::derive::{ClassGroup, Derived, NameWidths, NodeGroup};
pub use super::detail::Detail;
pub use super::msg::{COLUMNS, Column, Effect, Msg, View};
pub use super::poll::Load;
pub use super::tenants::Tenants;
pub use super::usage::UsageView;

mod command;
mod editing;
mod lists;
mod ops;
mod update;
use lists::{LISTS, Pick};

/// What the input line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Command,
    Filter,
    Search,
}

#[derive(Debug, Clone)]
pub struct Input {
    pub kind: InputKind,
    pub text: String,
    /// Position in history while browsing it with ↑/↓.
    pub hist: Option<usize>,
    /// What tab could complete to, when it is more than one thing (shown
    /// until the next key).
    pub candidates: Vec<String>,
}

/// How many workloads one load or page from the engine brings.
pub const PAGE: usize = 1_000;

/// How often the console asks which server leads (`GET /v1/servers`).
pub const SERVERS_EVERY_MS: i64 = 10_000;

/// Settings fixed at start.
#[derive(Debug, Clone)]
pub struct Config {
    pub read_only: bool,
    pub theme: Theme,
    /// Local time's offset from UTC, for log timestamps.
    pub utc_offset_s: i64,
    /// Fleet status older than this is shown as stale.
    pub stale_after_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { read_only: false, theme: Theme::monochrome(), utc_offset_s: 0, stale_after_s: 10.0 }
    }
}

/// From this many workloads on, data changes are folded into at most one
/// recompute of the derived rows per tick (a second); below it, every
/// change shows at once (deriving costs well under 10 ms).
pub const THROTTLE_FROM_WORKLOADS: usize = 2_000;

/// What the derived rows were computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeriveKey {
    generation: u64,
    /// What the operator chose: filters per view, faults only, the sort.
    choice: Choice,
}

pub struct App {
    pub config: Config,
    pub model: Model,
    pub view: View,
    back: Vec<View>,
    pub now: Millis,
    pub size: (u16, u16),
    /// Selection per view (row index), moved to follow its item whenever
    /// the rows are derived again.
    pub selected: HashMap<View, usize>,
    /// The item each list's cursor is on.
    picked: HashMap<View, Pick>,
    /// The first help line shown (`?` scrolls).
    pub help_scroll: usize,
    pub filter_text: HashMap<View, String>,
    pub faults_only: bool,
    pub sort: Column,
    pub sort_desc: bool,
    pub derived: Derived,
    derived_key: Option<DeriveKey>,
    /// When the rows were last derived, and whether a data change since is
    /// waiting for the next tick (see [`THROTTLE_FROM_WORKLOADS`]).
    derived_at: Millis,
    derive_pending: bool,
    /// The detail view: its workload, events and scroll.
    pub detail: Detail,
    pub logs: Option<Logs>,
    /// The spec view: whose spec, and its scroll.
    pub spec: SpecView,
    /// The events view: whose events, and its cursor.
    pub events: EventsView,
    pub editor: Editor,
    pub input: Option<Input>,
    pub history: Vec<String>,
    pub confirm: Option<Confirm>,
    /// An older page of workloads is on its way.
    pub paging: bool,
    pub flash: Option<(String, bool)>,
    /// Set when watching a replay (`canopy sim --watch`): `now` is then
    /// the simulation's virtual time.
    pub replay: Option<ReplayStatus>,
    /// This console started the engine it shows (in its own process):
    /// quitting while work is live asks whether to leave it running in the
    /// background. An attached console never stops its engine.
    pub owns_engine: bool,
    /// Asked on quit while this many workloads are live: leave the engine
    /// running in the background (y), stop it (n), or stay (esc)?
    pub leave_running: Option<usize>,
    /// Since when the engine cannot be reached (a remote engine that went
    /// away; the handle keeps reconnecting).
    pub link_down: Option<Millis>,
    /// The link's reload count last seen: a change (a reconnection or a
    /// resync) reloads the audit trail if the audit view loaded it.
    link_reloads: Option<u64>,
    /// The audit view's loads from the engine.
    pub audit: Audit,
    /// The tenants view's loads and rows.
    pub tenants: Tenants,
    /// The usage view: its grouping, report and selected group.
    pub usage: UsageView,
    /// `GET /v1/servers`, asked at once and then every
    /// [`SERVERS_EVERY_MS`] (never in a replay): the header's role.
    pub servers: crate::console::poll::Poll,
    /// `:logs` of a workload the console did not hold (and which
    /// attempt; `None`: its last): opened when it arrives.
    logs_wanted: Option<(WorkloadId, Option<u32>)>,
    pub dirty: bool,
    pub quit: bool,
}

impl App {
    pub fn new(config: Config, model: Model, now: Millis) -> Self {
        let mut app = Self {
            config,
            model,
            view: View::Overview,
            back: Vec::new(),
            now,
            size: (80, 24),
            selected: HashMap::new(),
            picked: HashMap::new(),
            help_scroll: 0,
            filter_text: HashMap::new(),
            faults_only: false,
            sort: Column::Id,
            sort_desc: true,
            derived: Derived::default(),
            derived_key: None,
            derived_at: Millis(i64::MIN),
            derive_pending: false,
            detail: Detail::default(),
            logs: None,
            spec: SpecView::default(),
            events: EventsView::default(),
            editor: Editor::new(now.0.to_string()),
            input: None,
            history: Vec::new(),
            confirm: None,
            paging: false,
            flash: None,
            replay: None,
            owns_engine: false,
            leave_running: None,
            link_down: None,
            link_reloads: None,
            audit: Audit::default(),
            tenants: Tenants::default(),
            usage: UsageView::default(),
            servers: Default::default(),
            logs_wanted: None,
            dirty: true,
            quit: false,
        };
        app.refresh();
        app
    }

    pub fn flash(&mut self, s: String) {
        self.flash = Some((s, false));
    }
    pub fn flash_error(&mut self, s: String) {
        self.flash = Some((s, true));
    }

    /// Body height available to lists (screen minus header, footer, borders).
    pub fn page(&self) -> usize {
        usize::from(self.size.1.saturating_sub(6)).max(1)
    }

    pub fn sel(&self, v: View) -> usize {
        self.selected.get(&v).copied().unwrap_or(0)
    }

    /// Whether the fleet status is missing or old.
    pub fn stale(&self) -> bool {
        self.model.status_age(self.now).is_none_or(|a| a > self.config.stale_after_s)
    }

    /// The filter typed in a view (empty: none).
    pub fn filter(&self, v: View) -> &str {
        self.filter_text.get(&v).map_or("", String::as_str)
    }

    /// Recomputes derived rows when their inputs changed, and keeps each
    /// list's cursor on its item.
    pub fn refresh(&mut self) {
        let filters: HashMap<View, String> = [View::Workloads, View::Nodes, View::Triage, View::Audit]
            .into_iter()
            .map(|v| (v, self.filter(v).to_string()))
            .filter(|(_, f)| !f.is_empty())
            .collect();
        let choice =
            Choice { filters, faults_only: self.faults_only, sort: self.sort, sort_desc: self.sort_desc };
        let key = DeriveKey { generation: self.model.generation, choice };
        if self.derived_key.as_ref() == Some(&key) {
            return;
        }
        // A big store under a busy engine changes many times a second, and
        // deriving 10,000 rows costs tens of milliseconds: data-only changes
        // then wait for the next tick. What the operator does (filter, sort)
        // always applies at once.
        let data_only = self.derived_key.as_ref().is_some_and(|old| old.choice == key.choice);
        if data_only && self.model.workloads.len() >= THROTTLE_FROM_WORKLOADS && self.now == self.derived_at {
            self.derive_pending = true;
            return;
        }
        self.derived.update(&self.model, &key.choice);
        self.derived_key = Some(key);
        self.derived_at = self.now;
        self.derive_pending = false;
        for v in LISTS {
            self.follow_pick(v);
        }
    }

    fn go(&mut self, v: View) {
        if self.view != v {
            if self.view == View::Logs {
                self.logs = None;
            }
            self.back.push(self.view);
            if self.back.len() > 32 {
                self.back.remove(0);
            }
            self.view = v;
        }
    }

    fn on_key(&mut self, k: KeyEvent) -> Vec<Effect> {
        if k.kind == ratatui::crossterm::event::KeyEventKind::Release {
            return Vec::new();
        }
        if self.leave_running.is_some() {
            return match k.code {
                KeyCode::Char('y' | 'Y') => {
                    self.leave_running = None;
                    self.quit = true;
                    vec![Effect::Detach]
                }
                KeyCode::Char('n' | 'N') => {
                    self.leave_running = None;
                    self.quit = true;
                    vec![Effect::Quit]
                }
                KeyCode::Esc => {
                    self.leave_running = None;
                    self.flash("not quitting".into());
                    Vec::new()
                }
                _ => Vec::new(),
            };
        }
        if let Some(c) = &mut self.confirm {
            if let Some(reason) = &mut c.reason {
                return match k.code {
                    KeyCode::Enter => action::answer(self, true),
                    KeyCode::Esc => action::answer(self, false),
                    KeyCode::Backspace => {
                        reason.pop();
                        Vec::new()
                    }
                    KeyCode::Char(ch) if !ch.is_control() && reason.chars().count() < 200 => {
                        reason.push(ch);
                        Vec::new()
                    }
                    _ => Vec::new(),
                };
            }
            return match k.code {
                KeyCode::Char('y' | 'Y') => action::answer(self, true),
                KeyCode::Char('n' | 'N') | KeyCode::Esc => action::answer(self, false),
                _ => Vec::new(),
            };
        }
        if self.input.is_some() {
            return self.on_input_key(k);
        }
        let Some(intent) = keymap::dispatch(self.view, &k) else {
            if self.view == View::Editor {
                self.editor.input(k);
                self.refresh_editor();
            }
            return Vec::new();
        };
        self.flash = None;
        self.on_intent(intent)
    }

    fn back(&mut self) {
        let from = self.view;
        if from == View::Logs {
            self.logs = None;
        }
        self.view = self.back.pop().unwrap_or(View::Overview);
        // Back from a workload's detail or logs: the list's cursor is on
        // that workload, wherever its row is now.
        if matches!(from, View::Detail | View::Logs)
            && let Some(id) = self.detail.id
            && let Some(i) = self.position(self.view, &Pick::Workload(id))
        {
            self.select(self.view, i);
        }
    }

    /// The view's component first (its own keys), then the app's.
    fn on_intent(&mut self, intent: Intent) -> Vec<Effect> {
        match self.component_intent(intent) {
            Outcome::Ignored => {}
            Outcome::Done => return Vec::new(),
            Outcome::Say(text, error) => {
                self.flash = Some((text, error));
                return Vec::new();
            }
            Outcome::Effects(fx) => return fx,
            Outcome::Edit { text, note } => {
                self.edit_copy(&text, note);
                return Vec::new();
            }
            Outcome::Describe(id) => return self.describe(id),
        }
        if self.view == View::Editor
            && let Some(fx) = self.editor_intent(intent)
        {
            return fx;
        }
        let page = if self.view == View::Help { super::help::area(self.size).1 } else { self.page() };
        match intent {
            Intent::Quit => {
                let live = self.model.live();
                if self.owns_engine && live > 0 {
                    self.leave_running = Some(live);
                    return Vec::new();
                }
                self.quit = true;
                return vec![Effect::Quit];
            }
            Intent::Help => {
                self.help_scroll = 0;
                self.go(View::Help);
            }
            Intent::CommandLine => self.open_input(InputKind::Command),
            Intent::Filter => {
                let kind = if self.view == View::Logs { InputKind::Search } else { InputKind::Filter };
                self.open_input(kind);
            }
            Intent::Back => {
                let stop_logs = self.view == View::Logs;
                if self.filter_text.get(&self.view).is_some_and(|f| !f.is_empty()) {
                    self.filter_text.remove(&self.view);
                } else {
                    self.back();
                }
                if stop_logs && self.view != View::Logs {
                    return vec![Effect::TailLogs(None)];
                }
            }
            Intent::Up => self.move_by(-1),
            Intent::Down => return self.move_down(1),
            Intent::PageUp => self.move_by(-(page as isize)),
            Intent::PageDown => return self.move_down(page as isize),
            Intent::Top => self.move_by(isize::MIN / 2),
            Intent::Bottom => return self.move_down(isize::MAX / 2),
            Intent::Go(v) => {
                self.go(v);
                if v == View::Editor {
                    self.refresh_editor();
                }
                if v == View::Audit {
                    return self.enter_audit();
                }
                if v == View::Tenants {
                    return self.enter_tenants();
                }
                if v == View::Usage {
                    return self.enter_usage();
                }
            }
            Intent::Open => return self.open(),
            Intent::SortNext => {
                let i = COLUMNS.iter().position(|c| *c == self.sort).unwrap_or(0);
                self.sort = COLUMNS[(i + 1) % COLUMNS.len()];
                self.flash(format!("sorted by {}", self.sort.name()));
            }
            Intent::SortReverse => self.sort_desc = !self.sort_desc,
            Intent::Faults => {
                self.faults_only = !self.faults_only;
                self.flash(format!("faults only {}", if self.faults_only { "on" } else { "off" }));
            }
            Intent::Logs => return self.open_logs(self.current_workload(), None),
            Intent::Retry => return self.op_on_workload(Op::Retry),
            Intent::Acknowledge => return self.op_on_workload(Op::Acknowledge),
            Intent::GoNode => self.go_to_node(),
            Intent::Cancel => return self.op_on_workload(Op::Cancel),
            Intent::Cordon => return self.op_on_node(Op::Cordon),
            Intent::Uncordon => return self.op_on_node(Op::Uncordon),
            Intent::Drain => return self.op_on_node(Op::Drain),
            Intent::Copy => return self.copy(),
            Intent::Spec => return self.open_spec(self.current_workload()),
            Intent::Events => return self.open_events(self.current_workload()),
            Intent::AcknowledgeAll => return self.acknowledge_all(),
            Intent::Unquarantine => return self.op_on_node(Op::Unquarantine),
            Intent::DrainEvict => return self.op_on_node(Op::DrainEvict),
            // The views' own: reached only where their view is not shown.
            Intent::Follow
            | Intent::Wrap
            | Intent::Timestamps
            | Intent::NextMatch
            | Intent::PrevMatch
            | Intent::Evidence
            | Intent::PrevAttempt
            | Intent::NextAttempt
            | Intent::EditSpec
            | Intent::Submit
            | Intent::NextTemplate
            | Intent::ExternalEditor
            | Intent::Undo
            | Intent::Redo
            | Intent::NextProblem
            | Intent::NextGrouping => {}
            Intent::Replay(ctl) => {
                if self.replay.is_none() {
                    self.flash_error("not a replay: space, + and - pace `canopy sim --watch`".into());
                    return Vec::new();
                }
                return vec![Effect::Replay(ctl)];
            }
        }
        Vec::new()
    }

    /// Hands the intent to the current view's component, with what it
    /// may read.
    fn component_intent(&mut self, intent: Intent) -> Outcome {
        let filter = self.filter_text.get(&self.view).map_or("", String::as_str);
        let ctx = Ctx {
            model: &self.model,
            theme: &self.config.theme,
            now: self.now,
            body: (
                usize::from(self.size.0.saturating_sub(2)),
                usize::from(self.size.1.saturating_sub(4)).max(1),
            ),
            page: usize::from(self.size.1.saturating_sub(6)).max(1),
            filter,
            replay: self.replay.is_some(),
        };
        let component: &mut dyn Component = match self.view {
            View::Detail => &mut self.detail,
            View::Spec => &mut self.spec,
            View::Events => &mut self.events,
            View::Usage => &mut self.usage,
            View::Logs => match &mut self.logs {
                Some(l) => l,
                None => return Outcome::Ignored,
            },
            _ => return Outcome::Ignored,
        };
        component.on_intent(intent, &ctx)
    }

    /// Down the list; at the end of the workloads (or the audit records)
    /// the journal holds more of, the next older page is asked for.
    fn move_down(&mut self, by: isize) -> Vec<Effect> {
        self.move_by(by);
        let at_end = self.sel(self.view) + 1 >= self.list_len(self.view);
        if !at_end {
            return Vec::new();
        }
        if self.view == View::Audit && self.replay.is_none() {
            return self.audit.at_end();
        }
        if self.view != View::Workloads || self.paging {
            return Vec::new();
        }
        let Some(from) = self.model.next_page else { return Vec::new() };
        self.paging = true;
        self.flash(format!("loading workloads older than {from}…"));
        vec![Effect::LoadOlder(from)]
    }

    /// The detail text's width and height on this screen (inside the
    /// header, the footer and the pane's border).
    pub fn detail_size(&self) -> (usize, usize) {
        (usize::from(self.size.0.saturating_sub(2)), usize::from(self.size.1.saturating_sub(4)).max(1))
    }

    fn move_by(&mut self, by: isize) {
        if self.view == View::Help {
            let (w, h) = super::help::area(self.size);
            let last = super::help::rows(self.replay.is_some(), w).len().saturating_sub(h);
            self.help_scroll =
                (self.help_scroll.min(last) as isize).saturating_add(by).clamp(0, last as isize) as usize;
            return;
        }
        let len = self.list_len(self.view);
        let i = (self.sel(self.view) as isize).saturating_add(by).clamp(0, len.saturating_sub(1) as isize);
        self.select(self.view, i as usize);
    }

    fn open(&mut self) -> Vec<Effect> {
        match self.view {
            View::Overview => {
                self.open_broken();
                Vec::new()
            }
            View::Workloads | View::Triage => match self.current_workload() {
                Some(id) => self.describe(id),
                None => Vec::new(),
            },
            View::Capacity => {
                if let Some(f) = self.model.fleet() {
                    let label = f.pool_label(crate::fleet::PoolIdx(self.sel(View::Capacity) as u32));
                    self.filter_text.insert(View::Nodes, format!("pool={label}"));
                    self.go(View::Nodes);
                }
                Vec::new()
            }
            View::Nodes => {
                if let Some(n) = self.current_node() {
                    self.filter_text.insert(View::Workloads, format!("node={n}"));
                    self.go(View::Workloads);
                }
                Vec::new()
            }
            View::Tenants => {
                // The tenant's workloads.
                let row = self.tenants.rows.get(self.sel(View::Tenants));
                if let Some(name) = row.map(|r| r.usage.tenant.clone()) {
                    self.filter_text.insert(View::Workloads, format!("tenant={name}"));
                    self.go(View::Workloads);
                }
                Vec::new()
            }
            View::Audit => {
                // The target, when the console knows it: a workload's
                // detail, or a node in the nodes view.
                let Some(target) = self.current_audit().and_then(|a| a.target.clone()) else {
                    return Vec::new();
                };
                if let Ok(id) = target.parse::<WorkloadId>() {
                    return self.describe(id);
                }
                if self.model.fleet().is_some_and(|f| f.nodes.iter().any(|n| n.name == target)) {
                    self.filter_text.insert(View::Nodes, format!("node={target}"));
                    self.go(View::Nodes);
                } else {
                    self.flash_error(format!(
                        "{}: not a workload or node this console shows",
                        sanitize(&target)
                    ));
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// The audit record under the cursor.
    pub fn current_audit(&self) -> Option<&AuditRecord> {
        self.derived.audit.get(self.sel(View::Audit))
    }

    /// Opens the overview's selected "broken first" line: a provider's
    /// pools in the capacity view; down or quarantined nodes in the nodes
    /// view (filtered to them, the cursor on the first); failed and
    /// retrying workloads in triage; blocked ones among the queued.
    fn open_broken(&mut self) {
        use super::derive::Broken;
        let items = &self.derived.overview.broken;
        let Some(item) = items.get(self.sel(View::Overview).min(items.len().saturating_sub(1))).cloned()
        else {
            return;
        };
        let (view, filter, node) = match item {
            Broken::Unreachable { provider, .. } => {
                let first = self.model.fleet().and_then(|f| f.providers.iter().find(|p| p.name == provider));
                if let Some(p) = first {
                    self.selected.insert(View::Capacity, p.pools.start as usize);
                }
                (View::Capacity, None, None)
            }
            Broken::Down(nodes) => {
                let f = if nodes.len() == 1 { format!("node={}", nodes[0]) } else { "state=down".into() };
                (View::Nodes, Some(f), nodes.first().cloned())
            }
            Broken::Quarantined(nodes) => {
                let f =
                    if nodes.len() == 1 { format!("node={}", nodes[0]) } else { "health=quarantined".into() };
                (View::Nodes, Some(f), nodes.first().cloned())
            }
            Broken::Blocked(_) => (View::Workloads, Some("state=queued".to_string()), None),
            Broken::Failed(_) => (View::Triage, Some("state=failed".to_string()), None),
            Broken::Retrying(_) => (View::Triage, Some("retry=waiting".to_string()), None),
        };
        if let Some(f) = filter {
            self.filter_text.insert(view, f);
        }
        self.go(view);
        self.refresh();
        let row = match node {
            Some(n) => self.position(view, &Pick::Node(n)).unwrap_or(0),
            None if view == View::Capacity => self.sel(view),
            None => 0,
        };
        self.select(view, row);
    }

    fn copy(&mut self) -> Vec<Effect> {
        let text = match self.view {
            View::Logs => self.logs.as_ref().and_then(|l| l.lines.get(l.cursor)).map(|l| l.text.clone()),
            View::Nodes => self.current_node(),
            View::Audit => self
                .current_audit()
                .map(|a| sanitize(a.target.as_deref().unwrap_or(&a.principal)).into_owned()),
            _ => self.current_workload().map(|w| w.to_string()),
        };
        match text {
            Some(t) => {
                self.flash(format!("copied {}", truncate(&t, 40)));
                vec![Effect::Copy(t)]
            }
            None => Vec::new(),
        }
    }
}

/// A virtual time as the replay header shows it (UTC): `2023-11-15 04:12`,
/// or `11-15 04:12` when `long` is false.
pub fn sim_time(t: Millis, long: bool) -> String {
    let iso = crate::providers::sim::signature::iso_utc(t);
    let s = iso[..16].replace('T', " ");
    if long { s } else { s[5..].to_string() }
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(max - 1).collect::<String>())
    }
}

impl Asker for App {
    fn in_replay(&self) -> bool {
        self.replay.is_some()
    }
    fn read_only(&self) -> bool {
        self.config.read_only
    }
    fn confirm(&mut self) -> &mut Option<Confirm> {
        &mut self.confirm
    }
    fn say(&mut self, text: String, error: bool) {
        self.flash = Some((text, error));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_and_sim_time() {
        assert_eq!(truncate("abcdef", 4), "abc…");
        assert_eq!(sim_time(crate::sim::EPOCH, true), "2023-11-14 22:13");
        assert_eq!(sim_time(crate::sim::EPOCH, false), "11-14 22:13");
    }
}
