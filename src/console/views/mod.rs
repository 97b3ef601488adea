//! Drawing: one module per view, plus the frame around them (tabs, stale
//! banner, input line, confirmation, flash, key hints). Render only: views
//! read [`App`] and never change it, do no I/O and never block.

mod audit;
mod capacity;
mod detail;
mod editor;
mod events;
mod help;
mod logs;
mod nodes;
mod overview;
mod spec;
mod tenants;
mod triage;
mod usage;
mod workloads;

use super::app::{App, InputKind, View, sim_time};
use super::replay::{ReplayStatus, speed_label};
use super::theme::Theme;
use crate::engine::model::{Millis, WorkloadState};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// The tabs; `8 tenants` only where tenants are configured, `9 usage`
/// only while it is shown.
const TABS: [(View, &str); 9] = [
    (View::Overview, "1 overview"),
    (View::Capacity, "2 capacity"),
    (View::Nodes, "3 nodes"),
    (View::Workloads, "4 workloads"),
    (View::Triage, "5 triage"),
    (View::Editor, "6 editor"),
    (View::Audit, "7 audit"),
    (View::Tenants, "8 tenants"),
    (View::Usage, "9 usage"),
];

/// Draws the whole console.
pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    if area.width < 20 || area.height < 5 {
        f.render_widget(Paragraph::new("canopy: window too small"), area);
        return;
    }
    let [top, body, bottom] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1), Constraint::Length(1)]).areas(area);
    header(f, app, top);
    match app.view {
        View::Overview => overview::draw(f, app, body),
        View::Capacity => capacity::draw(f, app, body),
        View::Nodes => nodes::draw(f, app, body),
        View::Workloads => workloads::draw(f, app, body),
        View::Triage => triage::draw(f, app, body),
        View::Detail => detail::draw(f, app, body),
        View::Logs => logs::draw(f, app, body),
        View::Editor => editor::draw(f, app, body),
        View::Audit => audit::draw(f, app, body),
        View::Spec => spec::draw(f, app, body),
        View::Events => events::draw(f, app, body),
        View::Tenants => tenants::draw(f, app, body),
        View::Usage => usage::draw(f, app, body),
        View::Help => help::draw(f, app, body),
    }
    footer(f, app, bottom);
}

fn header(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    // Narrow screens (and a lost engine's, below 140 columns: its marker
    // takes the room) show only the current tab's name, the others'
    // numbers one space apart. A replay keeps the tabs' names while its
    // marker and virtual time still fit beside them (at 120 columns).
    let full = tabs(app, false, t);
    let full_width: usize = full.iter().map(Span::width).sum();
    let replay_cramped = app.replay.as_ref().is_some_and(|r| {
        let least = replay_tag(r, t).0.chars().count() + 1 + sim_time(app.now, false).chars().count();
        full_width + 1 + least > usize::from(area.width)
    });
    let narrow = area.width < 100 || replay_cramped || (app.link_down.is_some() && area.width < 140);
    let mut spans = if narrow { tabs(app, true, t) } else { full };
    if let Some(r) = &app.replay {
        let used: usize = spans.iter().map(Span::width).sum();
        let room = usize::from(area.width).saturating_sub(used + 1);
        spans.push(Span::raw(" "));
        spans.extend(replay_spans(r, app.now, room, t));
    } else if app.config.read_only {
        spans.push(Span::styled(" READ-ONLY", t.warn));
    }
    if let Some(place) = app.model.place.as_ref().filter(|_| app.link_down.is_none()) {
        let used: usize = spans.iter().map(Span::width).sum();
        let room = usize::from(area.width).saturating_sub(used + 1);
        if let Some((text, style)) = ha_place(place, app.config.utc_offset_s, room, t) {
            spans.push(Span::raw(" "));
            spans.push(Span::styled(text, style));
        }
    }
    if let Some(since) = app.link_down {
        // In words, so it reads without colour; shortened to fit.
        let used: usize = spans.iter().map(Span::width).sum();
        let room = usize::from(area.width).saturating_sub(used + 1);
        let at = super::logs::clock(since, app.config.utc_offset_s);
        let text =
            [format!("disconnected — reconnecting (since {at})"), format!("disconnected (since {at})")]
                .into_iter()
                .find(|s| s.chars().count() <= room)
                .unwrap_or_else(|| "disconnected".to_string());
        spans.push(Span::raw(" "));
        spans.push(Span::styled(text, t.bad.patch(t.selected)));
    } else if app.stale() {
        let age = app.model.status_age(app.now).map_or("no data yet".to_string(), |a| format!("{a:.0}s old"));
        spans.push(Span::styled(format!(" STALE ({age})"), t.bad));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// Where the server read stands in its HA set, in words that fit `room`:
/// `leader` or `standby of <holder>`, and the last failover's time when
/// there is room.
fn ha_place(
    p: &crate::console::model::HaPlace,
    utc_offset_s: i64,
    room: usize,
    t: &Theme,
) -> Option<(String, ratatui::style::Style)> {
    use crate::console::model::HaRole;
    let (role, short, style) = match &p.role {
        HaRole::Leader => ("leader".to_string(), "leader".to_string(), t.ok),
        HaRole::Standby { of: Some(l) } => (format!("standby of {l}"), "standby".to_string(), t.warn),
        HaRole::Standby { of: None } => ("standby, no leader".to_string(), "standby".to_string(), t.bad),
    };
    let failover = p.last_failover.as_ref().map(|f| super::logs::clock(f.at, utc_offset_s));
    let mut choices = Vec::new();
    if let Some(at) = &failover {
        choices.push(format!("{role} · last failover {at}"));
    }
    choices.push(role);
    choices.push(short);
    choices.into_iter().find(|c| c.chars().count() <= room).map(|c| (c, style))
}

/// `canopy` and the view tabs, the current one in reverse video; `narrow`:
/// only the current tab's name, the others' numbers.
fn tabs(app: &App, narrow: bool, t: &Theme) -> Vec<Span<'static>> {
    let mut spans = vec![Span::styled(if narrow { "canopy" } else { "canopy " }, t.header)];
    let tenants = app.tenants.configured() || app.view == View::Tenants;
    let shown = |v: View| match v {
        View::Tenants => tenants,
        View::Usage => app.view == View::Usage,
        _ => true,
    };
    for (v, label) in TABS.into_iter().filter(|(v, _)| shown(*v)) {
        let current = v == app.view
            || (v == View::Workloads
                && matches!(app.view, View::Detail | View::Logs | View::Spec | View::Events));
        if current {
            if narrow {
                spans.push(Span::raw(" "));
            }
            spans.push(Span::styled(format!("[{label}]"), t.selected));
        } else if narrow {
            spans.push(Span::styled(format!(" {}", &label[..1]), t.dim));
        } else {
            spans.push(Span::styled(format!(" {label} "), t.dim));
        }
    }
    spans
}

/// The replay marker, `REPLAY ×1440` (`paused`, `done`), and its style.
fn replay_tag(r: &ReplayStatus, t: &Theme) -> (String, ratatui::style::Style) {
    if r.ended.is_some() {
        ("REPLAY done".to_string(), t.ok)
    } else if r.paused {
        (format!("REPLAY {} paused", speed_label(r.speed)), t.warn)
    } else {
        (format!("REPLAY {}", speed_label(r.speed)), t.warn)
    }
}

/// `REPLAY ×1440  sim 2023-11-15 04:12  policy canopy`, shortened to fit
/// `room` columns: the marker, then the virtual time, then the policy.
fn replay_spans(r: &ReplayStatus, now: Millis, room: usize, t: &Theme) -> Vec<Span<'static>> {
    let (tag, style) = replay_tag(r, t);
    let p = &r.policy;
    let variants = [
        ("  ", format!("sim {}", sim_time(now, true)), format!("policy {p}")),
        (" ", format!("sim {}", sim_time(now, false)), format!("policy {p}")),
        (" ", format!("sim {}", sim_time(now, false)), p.clone()),
        (" ", sim_time(now, false), p.clone()),
        (" ", sim_time(now, false), String::new()),
    ];
    for (sep, time, policy) in variants {
        let width = |s: &str| if s.is_empty() { 0 } else { sep.len() + s.chars().count() };
        if tag.chars().count() + width(&time) + width(&policy) <= room {
            let mut out = vec![Span::styled(tag, style), Span::styled(format!("{sep}{time}"), t.accent)];
            if !policy.is_empty() {
                out.push(Span::styled(format!("{sep}{policy}"), t.text));
            }
            return out;
        }
    }
    vec![Span::styled(tag, style)]
}

fn footer(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let line = if let Some(live) = app.leave_running {
        let work = if live == 1 { "1 live workload".to_string() } else { format!("{live} live workloads") };
        let prompt = format!(" {work}: keep the engine running in the background? y/n (esc: stay) ");
        Line::from(vec![Span::styled(prompt, t.warn.patch(t.selected))])
    } else if let Some(c) = &app.confirm {
        Line::from(vec![Span::styled(format!(" {} ", c.prompt()), t.warn.patch(t.selected))])
    } else if let Some(i) = &app.input {
        let p = match i.kind {
            InputKind::Command => ":",
            InputKind::Filter => "/",
            InputKind::Search => "search /",
        };
        let mut spans = vec![Span::styled(p, t.accent), Span::raw(i.text.clone()), Span::styled("█", t.dim)];
        if !i.candidates.is_empty() {
            let used = crate::console::fit::width(p) + crate::console::fit::width(&i.text) + 1;
            let room = usize::from(area.width).saturating_sub(used);
            spans.push(Span::styled(candidates(&i.candidates, room), t.dim));
        }
        Line::from(spans)
    } else if let Some((msg, err)) = &app.flash {
        Line::from(Span::styled(msg.clone(), if *err { t.bad } else { t.ok }))
    } else {
        Line::from(Span::styled(hints(app.view, app.replay.is_some()), t.dim))
    };
    f.render_widget(Paragraph::new(line), area);
}

/// Tab's choices after the input line, as many as fit in `room` columns:
/// `  cancel  capacity  cordon`, or `  cancel  capacity  +1 more`.
fn candidates(all: &[String], room: usize) -> String {
    use crate::console::fit::width;
    let mut out = String::new();
    for (k, c) in all.iter().enumerate() {
        let left = all.len() - k - 1;
        let more = if left > 0 { format!("  +{left} more") } else { String::new() };
        if width(&out) + 2 + width(c) + width(&more) > room {
            out.push_str(&format!("  +{} more", all.len() - k));
            break;
        }
        out.push_str("  ");
        out.push_str(c);
    }
    out
}

fn hints(v: View, replay: bool) -> &'static str {
    match v {
        View::Overview | View::Capacity if replay => {
            "1-7 views  space pause  +/- speed  / filter  ? help  q quit"
        }
        View::Overview => "j/k select  enter open  1-7 views  : command  / filter  ? help  q quit",
        View::Workloads => {
            "enter detail  l logs  / filter  F faults  s sort  r retry  ^k cancel  : cmd  ? help"
        }
        View::Triage => "enter detail  l logs@evidence  / filter  a/A ack one/all  r retry  ? help",
        View::Nodes => "enter workloads  c cordon  u uncordon  d drain  D evict  U unquarantine  ? help",
        View::Logs => "[/] attempt  / search  n/N match  e evidence  f follow  w wrap  z time  esc back",
        View::Editor => "esc then 1-7 views  F8 next problem  ^z/^r undo/redo  ^s submit  ^t template",
        View::Detail => "j/k g/G scroll  l logs  v spec  E events  r retry  ^k cancel  y copy  esc back",
        View::Spec => "j/k pgup/pgdn g/G scroll  e edit a copy and submit  y copy id  esc back",
        View::Events => "j/k select  enter its workload  / filter (kind=retry w-17 text)  esc back",
        View::Audit => "enter open target  / filter (outcome=denied)  y copy  ? help  esc back",
        View::Tenants => "j/k select  enter its workloads  ? help  esc back",
        View::Usage => "j/k select a group (its days, its waste)  b group by next  ? help  esc back",
        View::Help => "j/k pgup/pgdn scroll  g/G top/bottom  esc close",
        _ => "1-7 views  : command  / filter  ? help  q quit",
    }
}

/// Length constraints for the table columns [`fit::widths`] kept.
///
/// [`fit::widths`]: crate::console::fit::widths
pub(crate) fn constraints(widths: &[usize]) -> Vec<Constraint> {
    widths
        .iter()
        .filter(|w| **w > 0)
        .map(|&w| Constraint::Length(u16::try_from(w).unwrap_or(u16::MAX)))
        .collect()
}

/// A bordered block with a title.
pub(crate) fn block<'a>(title: String, t: &Theme) -> Block<'a> {
    Block::default().borders(Borders::ALL).border_style(t.border).title(Span::styled(title, t.header))
}

/// A state word with a symbol, so it reads without colour.
pub(crate) fn state_span(s: WorkloadState, t: &Theme) -> Span<'static> {
    t.state_span(s)
}

/// `0..1` values as a one-line sparkline.
pub(crate) fn spark<I: IntoIterator<Item = f64>>(values: I, width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let v: Vec<f64> = values.into_iter().collect();
    let v = &v[v.len().saturating_sub(width)..];
    v.iter().map(|x| BARS[((x.clamp(0.0, 1.0) * 7.0).round()) as usize]).collect()
}

pub(crate) use crate::text::age;

/// First visible row so that `sel` is on screen in `height` rows.
pub(crate) fn window(sel: usize, height: usize) -> usize {
    if height == 0 || sel < height { 0 } else { sel + 1 - height }
}

pub(crate) fn marker(selected: bool) -> &'static str {
    if selected { ">" } else { " " }
}
