//! The keymap: one table from keys to intents, per scope. Dispatch and the
//! `?` help are both generated from [`BINDINGS`], so they cannot disagree.
//!
//! Owns key → intent only. What an intent does is the app's business; which
//! intents are destructive or refused in read-only mode is the action
//! layer's ([`super::action`]).

use super::msg::View;
use super::replay::ReplayCtl;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What the operator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Quit,
    Help,
    CommandLine,
    Filter,
    Back,
    Open,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Go(View),
    SortNext,
    SortReverse,
    Faults,
    Logs,
    Retry,
    Acknowledge,
    /// To the selected workload's (or fault's) node in the nodes view.
    GoNode,
    Cancel,
    Cordon,
    Uncordon,
    Drain,
    Copy,
    Follow,
    Wrap,
    Timestamps,
    NextMatch,
    PrevMatch,
    Evidence,
    Submit,
    NextTemplate,
    ExternalEditor,
    /// Editor: undo / redo an edit.
    Undo,
    Redo,
    /// Editor: the cursor to the next problem.
    NextProblem,
    /// Pace a replay (`canopy sim --watch`).
    Replay(ReplayCtl),
    /// Logs: the workload's previous / next attempt.
    PrevAttempt,
    NextAttempt,
    /// The workload's spec as submitted (TOML).
    Spec,
    /// The workload's events (the engine's).
    Events,
    /// Spec view: a copy of the spec into the editor, to edit and submit
    /// as a new workload.
    EditSpec,
    /// Acknowledge every unresolved failure the view's filter shows (one
    /// question, one reason).
    AcknowledgeAll,
    /// Nodes: end the node's quarantine before its cool-down does.
    Unquarantine,
    /// Nodes: drain and evict the work on it (placed again elsewhere).
    DrainEvict,
    /// Usage: group by the next dimension (tenant, owner, provider, pool,
    /// accelerator, user).
    NextGrouping,
}

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere except while typing in the editor.
    Global,
    /// Every list view.
    List,
    Workloads,
    Nodes,
    Triage,
    Detail,
    Logs,
    Editor,
    Spec,
    Events,
    Usage,
    /// Everywhere but the editor and help, in a replay (`canopy sim --watch`).
    Replay,
    /// The `?` help itself (only these keys work there).
    Help,
}

impl Scope {
    fn applies(self, view: View) -> bool {
        use View::*;
        match self {
            Scope::Global | Scope::Replay | Scope::List => !matches!(view, Editor | Help),
            Scope::Help => view == Help,
            Scope::Workloads => matches!(view, Workloads | Triage | Detail | Overview),
            Scope::Nodes => matches!(view, Nodes),
            Scope::Triage => matches!(view, Triage),
            Scope::Detail => matches!(view, Detail),
            Scope::Logs => matches!(view, Logs),
            Scope::Editor => matches!(view, Editor),
            Scope::Spec => matches!(view, Spec),
            Scope::Events => matches!(view, Events),
            Scope::Usage => matches!(view, Usage),
        }
    }
    pub fn title(self) -> &'static str {
        match self {
            Scope::Global => "everywhere",
            Scope::List => "lists, logs and detail",
            Scope::Workloads => "workloads, triage, detail",
            Scope::Nodes => "nodes",
            Scope::Triage => "triage",
            Scope::Detail => "detail",
            Scope::Logs => "logs",
            Scope::Editor => "editor",
            Scope::Spec => "spec",
            Scope::Events => "events",
            Scope::Usage => "usage",
            Scope::Replay => "replay (canopy sim --watch)",
            Scope::Help => "this help",
        }
    }
}

/// A key as the table spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Enter,
    Esc,
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Tab,
    /// A function key, F1 to F12.
    F(u8),
}

impl Key {
    fn matches(self, k: &KeyEvent) -> bool {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match (self, k.code) {
            (Key::Char(c), KeyCode::Char(x)) => !ctrl && c == x,
            (Key::Ctrl(c), KeyCode::Char(x)) => ctrl && c == x.to_ascii_lowercase(),
            (Key::Enter, KeyCode::Enter) => true,
            (Key::Esc, KeyCode::Esc) => true,
            (Key::Up, KeyCode::Up) => true,
            (Key::Down, KeyCode::Down) => true,
            (Key::PageUp, KeyCode::PageUp) => true,
            (Key::PageDown, KeyCode::PageDown) => true,
            (Key::Home, KeyCode::Home) => true,
            (Key::End, KeyCode::End) => true,
            (Key::Tab, KeyCode::Tab) => true,
            (Key::F(n), KeyCode::F(x)) => n == x,
            _ => false,
        }
    }
    pub fn label(self) -> String {
        match self {
            Key::Char(' ') => "space".into(),
            Key::Char(c) => c.to_string(),
            Key::Ctrl(c) => format!("ctrl-{c}"),
            Key::Enter => "enter".into(),
            Key::Esc => "esc".into(),
            Key::Up => "↑".into(),
            Key::Down => "↓".into(),
            Key::PageUp => "pgup".into(),
            Key::PageDown => "pgdn".into(),
            Key::Home => "home".into(),
            Key::End => "end".into(),
            Key::Tab => "tab".into(),
            Key::F(n) => format!("F{n}"),
        }
    }
}

pub struct Binding {
    pub keys: &'static [Key],
    pub intent: Intent,
    pub scope: Scope,
    pub help: &'static str,
}

use Intent as I;
use Key as K;
use Scope as S;

/// Every binding. More specific scopes come first: the first match wins.
pub const BINDINGS: &[Binding] = &[
    Binding { keys: &[K::Esc, K::Char('q'), K::Char('?')], intent: I::Back, scope: S::Help, help: "close" },
    Binding { keys: &[K::Char('k'), K::Up], intent: I::Up, scope: S::Help, help: "scroll up" },
    Binding { keys: &[K::Char('j'), K::Down], intent: I::Down, scope: S::Help, help: "scroll down" },
    Binding { keys: &[K::Ctrl('u'), K::PageUp], intent: I::PageUp, scope: S::Help, help: "page up" },
    Binding { keys: &[K::Ctrl('d'), K::PageDown], intent: I::PageDown, scope: S::Help, help: "page down" },
    Binding { keys: &[K::Char('g'), K::Home], intent: I::Top, scope: S::Help, help: "top" },
    Binding { keys: &[K::Char('G'), K::End], intent: I::Bottom, scope: S::Help, help: "bottom" },
    Binding {
        keys: &[K::Ctrl('s')],
        intent: I::Submit,
        scope: S::Editor,
        help: "submit the spec (idempotent)",
    },
    Binding { keys: &[K::Ctrl('t')], intent: I::NextTemplate, scope: S::Editor, help: "next template" },
    Binding { keys: &[K::Ctrl('o')], intent: I::ExternalEditor, scope: S::Editor, help: "edit in $EDITOR" },
    Binding {
        keys: &[K::F(8), K::Ctrl('g')],
        intent: I::NextProblem,
        scope: S::Editor,
        help: "cursor to the next problem (wraps around)",
    },
    Binding { keys: &[K::Ctrl('z'), K::Ctrl('u')], intent: I::Undo, scope: S::Editor, help: "undo" },
    Binding { keys: &[K::Ctrl('r')], intent: I::Redo, scope: S::Editor, help: "redo" },
    Binding {
        keys: &[K::Esc],
        intent: I::Back,
        scope: S::Editor,
        help: "leave the editor (text is kept); then 1-9 switch views",
    },
    Binding { keys: &[K::Char('f')], intent: I::Follow, scope: S::Logs, help: "follow on/off" },
    Binding { keys: &[K::Char('w')], intent: I::Wrap, scope: S::Logs, help: "wrap on/off" },
    Binding {
        keys: &[K::Char('z')],
        intent: I::Timestamps,
        scope: S::Logs,
        help: "timestamps: off, local, UTC",
    },
    Binding { keys: &[K::Char('n')], intent: I::NextMatch, scope: S::Logs, help: "next match" },
    Binding { keys: &[K::Char('N')], intent: I::PrevMatch, scope: S::Logs, help: "previous match" },
    Binding { keys: &[K::Char('e')], intent: I::Evidence, scope: S::Logs, help: "jump to the evidence line" },
    Binding {
        keys: &[K::Char('[')],
        intent: I::PrevAttempt,
        scope: S::Logs,
        help: "the previous attempt's logs",
    },
    Binding {
        keys: &[K::Char(']')],
        intent: I::NextAttempt,
        scope: S::Logs,
        help: "the next attempt's logs",
    },
    Binding {
        keys: &[K::Char('e')],
        intent: I::EditSpec,
        scope: S::Spec,
        help: "edit a copy in the editor and submit it as a new workload",
    },
    Binding {
        keys: &[K::Char('U')],
        intent: I::Unquarantine,
        scope: S::Nodes,
        help: "end the node's quarantine (asks)",
    },
    Binding {
        keys: &[K::Char('D')],
        intent: I::DrainEvict,
        scope: S::Nodes,
        help: "drain the node and evict its work, placed again elsewhere (asks)",
    },
    Binding { keys: &[K::Char('c')], intent: I::Cordon, scope: S::Nodes, help: "cordon the node (asks)" },
    Binding { keys: &[K::Char('u')], intent: I::Uncordon, scope: S::Nodes, help: "uncordon the node" },
    Binding { keys: &[K::Char('d')], intent: I::Drain, scope: S::Nodes, help: "drain the node (asks)" },
    Binding {
        keys: &[K::Char('c')],
        intent: I::Cordon,
        scope: S::Triage,
        help: "cordon the workload's node (asks)",
    },
    Binding {
        keys: &[K::Char('d')],
        intent: I::Drain,
        scope: S::Triage,
        help: "drain the workload's node (asks)",
    },
    Binding {
        keys: &[K::Char('l')],
        intent: I::Logs,
        scope: S::Workloads,
        help: "logs (at the evidence line)",
    },
    Binding {
        keys: &[K::Char('r')],
        intent: I::Retry,
        scope: S::Workloads,
        help: "retry a finished workload",
    },
    Binding {
        keys: &[K::Char('n')],
        intent: I::GoNode,
        scope: S::Workloads,
        help: "its node, in the nodes view (esc comes back)",
    },
    Binding {
        keys: &[K::Char('a')],
        intent: I::Acknowledge,
        scope: S::Workloads,
        help: "acknowledge a failure, with a reason (it leaves triage)",
    },
    Binding {
        keys: &[K::Char('A')],
        intent: I::AcknowledgeAll,
        scope: S::Workloads,
        help: "acknowledge every unresolved failure the filter shows (asks once, with the count)",
    },
    Binding {
        keys: &[K::Char('v')],
        intent: I::Spec,
        scope: S::Workloads,
        help: "its spec as submitted (TOML)",
    },
    Binding { keys: &[K::Char('E')], intent: I::Events, scope: S::Workloads, help: "its events" },
    Binding {
        keys: &[K::Ctrl('k')],
        intent: I::Cancel,
        scope: S::Workloads,
        help: "cancel the workload (asks)",
    },
    Binding {
        keys: &[K::Char('F')],
        intent: I::Faults,
        scope: S::Workloads,
        help: "faults only on/off (keeps the filter)",
    },
    Binding {
        keys: &[K::Char('s')],
        intent: I::SortNext,
        scope: S::Workloads,
        help: "sort by the next column",
    },
    Binding { keys: &[K::Char('S')], intent: I::SortReverse, scope: S::Workloads, help: "reverse the sort" },
    Binding {
        keys: &[K::Char(' ')],
        intent: I::Replay(ReplayCtl::Pause),
        scope: S::Replay,
        help: "pause / resume",
    },
    Binding {
        keys: &[K::Char('+'), K::Char('=')],
        intent: I::Replay(ReplayCtl::Faster),
        scope: S::Replay,
        help: "twice as fast",
    },
    Binding {
        keys: &[K::Char('-')],
        intent: I::Replay(ReplayCtl::Slower),
        scope: S::Replay,
        help: "half as fast",
    },
    Binding { keys: &[K::Char('q')], intent: I::Quit, scope: S::Global, help: "quit" },
    Binding { keys: &[K::Ctrl('c')], intent: I::Quit, scope: S::Global, help: "quit" },
    Binding { keys: &[K::Char('?')], intent: I::Help, scope: S::Global, help: "this help" },
    Binding {
        keys: &[K::Char(':')],
        intent: I::CommandLine,
        scope: S::Global,
        help: "command line (tab completes, ↑ history)",
    },
    Binding {
        keys: &[K::Char('/')],
        intent: I::Filter,
        scope: S::Global,
        help: "filter / search: text, regex, state=failed, provider=…",
    },
    Binding { keys: &[K::Esc], intent: I::Back, scope: S::Global, help: "back / clear" },
    Binding { keys: &[K::Char('1')], intent: I::Go(View::Overview), scope: S::Global, help: "overview" },
    Binding { keys: &[K::Char('2')], intent: I::Go(View::Capacity), scope: S::Global, help: "capacity" },
    Binding { keys: &[K::Char('3')], intent: I::Go(View::Nodes), scope: S::Global, help: "nodes" },
    Binding { keys: &[K::Char('4')], intent: I::Go(View::Workloads), scope: S::Global, help: "workloads" },
    Binding { keys: &[K::Char('5')], intent: I::Go(View::Triage), scope: S::Global, help: "triage" },
    Binding { keys: &[K::Char('6')], intent: I::Go(View::Editor), scope: S::Global, help: "spec editor" },
    Binding {
        keys: &[K::Char('7')],
        intent: I::Go(View::Audit),
        scope: S::Global,
        help: "audit trail: who changed what",
    },
    Binding {
        keys: &[K::Char('8')],
        intent: I::Go(View::Tenants),
        scope: S::Global,
        help: "tenants: quota, in use, borrowed, lent, waiting, reclaims",
    },
    Binding {
        keys: &[K::Char('9')],
        intent: I::Go(View::Usage),
        scope: S::Global,
        help: "usage: GPU-hours per day and group, waste by whose fault",
    },
    Binding {
        keys: &[K::Char('b')],
        intent: I::NextGrouping,
        scope: S::Usage,
        help: "group by the next of tenant, owner, provider, pool, accelerator, user (canopy usage --by)",
    },
    Binding { keys: &[K::Char('y')], intent: I::Copy, scope: S::Global, help: "copy id / line (OSC52)" },
    Binding {
        keys: &[K::Enter],
        intent: I::Open,
        scope: S::List,
        help: "open: a workload's detail, a pool's nodes, a node's workloads, an audit record's target",
    },
    Binding { keys: &[K::Char('k'), K::Up], intent: I::Up, scope: S::List, help: "up" },
    Binding { keys: &[K::Char('j'), K::Down], intent: I::Down, scope: S::List, help: "down" },
    Binding { keys: &[K::Ctrl('u'), K::PageUp], intent: I::PageUp, scope: S::List, help: "page up" },
    Binding { keys: &[K::Ctrl('d'), K::PageDown], intent: I::PageDown, scope: S::List, help: "page down" },
    Binding { keys: &[K::Char('g'), K::Home], intent: I::Top, scope: S::List, help: "top" },
    Binding { keys: &[K::Char('G'), K::End], intent: I::Bottom, scope: S::List, help: "bottom" },
];

/// The intent for a key in a view, if any.
pub fn dispatch(view: View, key: &KeyEvent) -> Option<Intent> {
    // In the editor, digits type; esc then a digit switches views. Sent
    // together (a fast typist, a laggy link) the two read as alt-digit,
    // which is also how terminals send alt-digit: it switches too.
    if view == View::Editor
        && key.modifiers.contains(KeyModifiers::ALT)
        && let KeyCode::Char(d @ '1'..='9') = key.code
    {
        return dispatch(View::Overview, &KeyEvent::new(KeyCode::Char(d), KeyModifiers::NONE));
    }
    BINDINGS.iter().find(|b| b.scope.applies(view) && b.keys.iter().any(|k| k.matches(key))).map(|b| b.intent)
}

/// Help lines, grouped by scope, generated from the table.
pub fn help_lines() -> Vec<(Scope, String, &'static str)> {
    let order = [
        S::Global,
        S::Replay,
        S::List,
        S::Workloads,
        S::Nodes,
        S::Triage,
        S::Logs,
        S::Spec,
        S::Events,
        S::Usage,
        S::Editor,
        S::Help,
    ];
    let mut out = Vec::new();
    for scope in order {
        for b in BINDINGS.iter().filter(|b| b.scope == scope) {
            let keys: Vec<String> = b.keys.iter().map(|k| k.label()).collect();
            out.push((scope, keys.join(" "), b.help));
        }
    }
    out
}

/// Keys that work outside [`BINDINGS`] (section, keys, what they do): the
/// input line under `:` and `/`, the y/n questions, typing in the editor.
/// For the help only; the app handles them where they apply.
pub const OTHER_KEYS: &[(&str, &str, &str)] = &[
    (
        "editor",
        "other keys",
        "edit the text: digits, q, : and / type into it; esc leaves the editor, and then 1-9 switch views",
    ),
    ("editor", "alt-1…9", "leave the editor for that view, as esc then 1-9 does"),
    ("input line (: command, / filter or search)", "enter", "run the command, keep the filter, search"),
    ("input line (: command, / filter or search)", "esc", "close it (a filter is cleared)"),
    (
        "input line (: command, / filter or search)",
        "tab",
        "complete a command, node, workload, template or column; shows the choices",
    ),
    ("input line (: command, / filter or search)", "↑ ↓", "command history"),
    ("input line (: command, / filter or search)", "ctrl-u", "clear the line"),
    ("input line (: command, / filter or search)", "backspace", "delete the last character"),
    ("questions (cancel? quit?)", "y", "yes (quitting: keep the engine running in the background)"),
    ("questions (cancel? quit?)", "n esc", "no (quitting: n stops the engine, esc stays)"),
];

/// `:` commands, for completion and help.
pub const COMMANDS: &[(&str, &str)] = &[
    ("overview", "the overview"),
    ("capacity", "capacity per pool"),
    ("nodes", "nodes with health"),
    ("workloads", "workloads"),
    ("triage", "failures grouped by class and node"),
    ("editor", "the spec editor"),
    ("audit", "the audit trail: who changed what, from where, the outcome"),
    ("tenants", "tenants: quota, in use, borrowed, lent, waiting and reclaims per flavor"),
    ("usage", "usage: GPU-hours per day and per tenant, owner, pool…, useful and wasted by whose fault"),
    ("new", "a new spec: :new for a blank one, :new TEMPLATE for an example"),
    ("open", "load a spec file into the editor: :open PATH"),
    ("save", "save the editor's spec: :save PATH"),
    ("logs", "logs of a workload's last attempt, or of one: :logs w-17, :logs w-17.1"),
    ("describe", "workload detail: :describe w-17"),
    ("spec", "a workload's spec as submitted (e edits a copy): :spec w-17"),
    ("events", "the engine's events: :events for all recent, :events w-17 for one workload"),
    ("cordon", "cordon a node: :cordon NODE"),
    ("uncordon", "uncordon a node: :uncordon NODE"),
    ("drain", "drain a node: :drain NODE, or evict its work: :drain NODE --evict"),
    ("unquarantine", "end a node's quarantine: :unquarantine NODE"),
    ("cancel", "cancel a workload: :cancel w-17"),
    ("retry", "retry a finished workload: :retry w-17"),
    ("ack", "acknowledge a failure, with a reason: :ack w-17"),
    ("ack-all", "acknowledge every unresolved failure the view's filter shows, with one reason"),
    ("faults", "faults only on/off"),
    ("sort", "sort workloads: :sort COLUMN"),
    ("quit", "quit"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
    }

    #[test]
    fn vim_keys_and_arrows_move() {
        assert_eq!(dispatch(View::Workloads, &key('j')), Some(Intent::Down));
        assert_eq!(
            dispatch(View::Workloads, &KeyEvent::new(KeyCode::Down, KeyModifiers::NONE)),
            Some(Intent::Down)
        );
        assert_eq!(dispatch(View::Nodes, &key('c')), Some(Intent::Cordon));
        assert_eq!(dispatch(View::Workloads, &key('c')), None);
        assert_eq!(dispatch(View::Editor, &key('q')), None, "typing q in the editor must not quit");
    }

    #[test]
    fn digits_type_in_the_editor_and_switch_views_elsewhere() {
        for d in '1'..='9' {
            assert_eq!(dispatch(View::Editor, &key(d)), None, "{d} types into the spec");
            assert!(matches!(dispatch(View::Overview, &key(d)), Some(Intent::Go(_))));
        }
        let alt = KeyEvent::new(KeyCode::Char('4'), KeyModifiers::ALT);
        assert_eq!(dispatch(View::Editor, &alt), Some(Intent::Go(View::Workloads)), "esc+4 read as one key");
        let f8 = KeyEvent::new(KeyCode::F(8), KeyModifiers::NONE);
        assert_eq!(dispatch(View::Editor, &f8), Some(Intent::NextProblem));
        let ctrl = |c| KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL);
        assert_eq!(dispatch(View::Editor, &ctrl('z')), Some(Intent::Undo));
        assert_eq!(dispatch(View::Editor, &ctrl('r')), Some(Intent::Redo));
    }

    #[test]
    fn help_covers_every_binding() {
        assert_eq!(help_lines().len(), BINDINGS.len());
    }
}
