//! The central action layer: every operation that changes anything goes
//! through [`request`], which refuses it in read-only mode (and in a
//! replay, `canopy sim --watch`, which is always read-only) and asks for
//! confirmation when it is destructive. Views and keys never build engine
//! commands themselves, so no view can bypass either rule.

use super::msg::Effect;
use crate::engine::command::Command;
use crate::engine::model::WorkloadId;
use crate::spec::Spec;

/// Something the operator wants done to the engine.
#[derive(Debug, Clone)]
pub enum Op {
    Submit {
        spec: Box<Spec>,
        key: String,
    },
    Retry(WorkloadId),
    Cancel(WorkloadId),
    Cordon(String),
    Uncordon(String),
    Drain(String),
    /// Drain and evict the node's work (stopped, placed again elsewhere).
    DrainEvict(String),
    Unquarantine(String),
    Acknowledge(WorkloadId),
    /// Acknowledge each of these unresolved failures with one reason: one
    /// question for all, one audited command each. `matching` says which
    /// filter chose them, for the question.
    AcknowledgeAll {
        ids: Vec<WorkloadId>,
        matching: String,
    },
}

impl Op {
    /// Operations that change running work or start new work ask first.
    pub fn destructive(&self) -> bool {
        !matches!(self, Op::Submit { .. } | Op::Uncordon(_))
    }

    /// Operator intent that outlives the moment asks why: the reason is
    /// journalled with it (and, for an acknowledgement, required).
    pub fn asks_reason(&self) -> bool {
        matches!(
            self,
            Op::Cordon(_)
                | Op::Drain(_)
                | Op::DrainEvict(_)
                | Op::Unquarantine(_)
                | Op::Acknowledge(_)
                | Op::AcknowledgeAll { .. }
        )
    }

    /// Acknowledgements need a reason; the other reasons are optional.
    pub fn reason_required(&self) -> bool {
        matches!(self, Op::Acknowledge(_) | Op::AcknowledgeAll { .. })
    }

    pub fn describe(&self) -> String {
        match self {
            Op::Submit { spec, .. } => format!("submit {}", spec.name),
            Op::Retry(id) => format!("retry {id}"),
            Op::Cancel(id) => format!("cancel {id}"),
            Op::Cordon(n) => format!("cordon {n}"),
            Op::Uncordon(n) => format!("uncordon {n}"),
            Op::Drain(n) => format!("drain {n}"),
            Op::DrainEvict(n) => format!("drain {n} and evict its work"),
            Op::Unquarantine(n) => format!("unquarantine {n}"),
            Op::Acknowledge(id) => format!("acknowledge {id}"),
            Op::AcknowledgeAll { ids, matching } => {
                let s = if ids.len() == 1 { "" } else { "s" };
                format!("acknowledge {} unresolved failure{s} matching {matching}", ids.len())
            }
        }
    }

    /// The engine commands it is, each with what the flash line calls it:
    /// one, but for a bulk acknowledgement (one each).
    fn commands(self) -> Vec<(String, Command)> {
        let what = self.describe();
        let one = match self {
            Op::AcknowledgeAll { ids, .. } => {
                return ids
                    .into_iter()
                    .map(|id| (Op::Acknowledge(id).describe(), Command::Acknowledge { id }))
                    .collect();
            }
            Op::Submit { spec, key } => Command::Submit { spec, idempotency_key: Some(key) },
            Op::Retry(id) => Command::Retry { id },
            Op::Cancel(id) => Command::Cancel { id },
            Op::Cordon(node) => Command::Cordon { node, until: None },
            Op::Uncordon(node) => Command::Uncordon { node },
            Op::Drain(node) => Command::Drain { node, evict: false, grace_s: None },
            Op::DrainEvict(node) => Command::Drain { node, evict: true, grace_s: None },
            Op::Unquarantine(node) => Command::Unquarantine { node },
            Op::Acknowledge(id) => Command::Acknowledge { id },
        };
        vec![(what, one)]
    }
}

/// A destructive operation waiting for y/n, or (when it asks why) for
/// its reason and Enter.
#[derive(Debug, Clone)]
pub struct Confirm {
    pub op: Op,
    /// What the operator has typed so far, for an op that asks why.
    pub reason: Option<String>,
}

impl Confirm {
    pub fn new(op: Op) -> Self {
        let reason = op.asks_reason().then(String::new);
        Confirm { op, reason }
    }

    pub fn prompt(&self) -> String {
        match &self.reason {
            None => format!("{}? y/n", self.op.describe()),
            Some(r) => {
                let required = if self.op.reason_required() { " (required)" } else { "" };
                format!(
                    "{} — why?{required} {r}█  (enter: {}, esc: not now)",
                    self.op.describe(),
                    self.verb()
                )
            }
        }
    }

    fn verb(&self) -> &'static str {
        match self.op {
            Op::Cordon(_) => "cordon",
            Op::Drain(_) | Op::DrainEvict(_) => "drain",
            Op::Unquarantine(_) => "unquarantine",
            Op::Acknowledge(_) | Op::AcknowledgeAll { .. } => "acknowledge",
            _ => "yes",
        }
    }
}

/// What the action layer needs of the console that asks: its modes, the
/// pending confirmation and the flash line. The app implements it, so this
/// file does not depend on the app's.
pub trait Asker {
    /// Watching a replay (`canopy sim --watch`): read-only.
    fn in_replay(&self) -> bool;
    /// Started with `--read-only`.
    fn read_only(&self) -> bool;
    fn confirm(&mut self) -> &mut Option<Confirm>;
    fn say(&mut self, text: String, error: bool);
}

/// Asks for `op`: refused in read-only mode, held for confirmation when
/// destructive, sent otherwise.
pub fn request(app: &mut impl Asker, op: Op) -> Vec<Effect> {
    if app.in_replay() {
        app.say(format!("replay: {} is disabled (a replay is read-only)", op.describe()), true);
        return Vec::new();
    }
    if app.read_only() {
        app.say(format!("read-only: {} is disabled (started with --read-only)", op.describe()), true);
        return Vec::new();
    }
    if op.destructive() {
        *app.confirm() = Some(Confirm::new(op));
        return Vec::new();
    }
    send(app, op, None)
}

/// Answers the pending confirmation.
pub fn answer(app: &mut impl Asker, yes: bool) -> Vec<Effect> {
    match app.confirm().take() {
        Some(Confirm { op, reason: Some(r) }) if yes && op.reason_required() && r.trim().is_empty() => {
            *app.confirm() = Some(Confirm { op, reason: Some(r) });
            app.say("an acknowledgement needs a reason: type it, then enter".into(), true);
            Vec::new()
        }
        Some(c) if yes && !app.read_only() => {
            let reason = c.reason.map(|r| r.trim().to_string()).filter(|r| !r.is_empty());
            send(app, c.op, reason)
        }
        Some(c) => {
            app.say(format!("{}: not done", c.op.describe()), false);
            Vec::new()
        }
        None => Vec::new(),
    }
}

fn send(app: &mut impl Asker, op: Op, reason: Option<String>) -> Vec<Effect> {
    app.say(format!("{}…", op.describe()), false);
    op.commands()
        .into_iter()
        .map(|(what, cmd)| Effect::Command { what, cmd, reason: reason.clone() })
        .collect()
}
