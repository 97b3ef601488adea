//! The input line: `:` commands (typed, tab completed, from history),
//! the `/` filter as it is typed and the logs' search. Part of the app:
//! what a command does is the same as its key's intent.

use super::{App, Input, InputKind};
use crate::console::action::{self, Op};
use crate::console::keymap::{COMMANDS, Intent};
use crate::console::msg::{COLUMNS, Effect, View};
use crate::engine::model::WorkloadId;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::path::PathBuf;

impl App {
    pub(super) fn open_input(&mut self, kind: InputKind) {
        let text = match kind {
            InputKind::Filter => self.filter_text.get(&self.view).cloned().unwrap_or_default(),
            InputKind::Search => self.logs.as_ref().and_then(|l| l.search.clone()).unwrap_or_default(),
            InputKind::Command => String::new(),
        };
        self.input = Some(Input { kind, text, hist: None, candidates: Vec::new() });
    }

    pub(super) fn on_input_key(&mut self, k: KeyEvent) -> Vec<Effect> {
        let Some(mut input) = self.input.take() else { return Vec::new() };
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        input.candidates.clear();
        match k.code {
            KeyCode::Esc => {
                if input.kind == InputKind::Filter {
                    self.filter_text.remove(&self.view);
                }
                return Vec::new();
            }
            KeyCode::Enter => return self.finish_input(input),
            KeyCode::Backspace => {
                input.text.pop();
            }
            KeyCode::Char('u') if ctrl => input.text.clear(),
            KeyCode::Char('c') if ctrl => return Vec::new(),
            KeyCode::Tab if input.kind == InputKind::Command => {
                (input.text, input.candidates) = complete(&input.text, self);
            }
            KeyCode::Up | KeyCode::Down if input.kind == InputKind::Command && !self.history.is_empty() => {
                let n = self.history.len();
                let i = match (input.hist, k.code) {
                    (None, KeyCode::Up) => n - 1,
                    (Some(i), KeyCode::Up) => i.saturating_sub(1),
                    (Some(i), _) => (i + 1).min(n - 1),
                    (None, _) => n - 1,
                };
                input.hist = Some(i);
                input.text = self.history[i].clone();
            }
            KeyCode::Char(c) if !ctrl => input.text.push(c),
            _ => {}
        }
        if input.kind == InputKind::Filter {
            // Filter as you type.
            self.filter_text.insert(self.view, input.text.clone());
        }
        self.input = Some(input);
        Vec::new()
    }

    fn finish_input(&mut self, input: Input) -> Vec<Effect> {
        match input.kind {
            InputKind::Filter => {
                self.filter_text.insert(self.view, input.text);
                Vec::new()
            }
            InputKind::Search => {
                let page = self.page();
                if let Some(l) = &mut self.logs {
                    l.search = Some(input.text).filter(|s| !s.is_empty());
                    if l.search.is_some() && !l.find(true, page) {
                        self.flash_error("no match".into());
                    }
                }
                Vec::new()
            }
            InputKind::Command => {
                let cmd = input.text.trim().to_string();
                if cmd.is_empty() {
                    return Vec::new();
                }
                if self.history.last() != Some(&cmd) {
                    self.history.push(cmd.clone());
                }
                self.command_line(&cmd)
            }
        }
    }

    /// Runs a `:` command, as if typed.
    pub fn run_command(&mut self, line: &str) -> Vec<Effect> {
        let fx = self.command_line(line);
        self.refresh();
        fx
    }

    fn command_line(&mut self, line: &str) -> Vec<Effect> {
        let mut words = line.split_whitespace();
        let verb = words.next().unwrap_or("");
        let arg = words.collect::<Vec<_>>().join(" ");
        let matches: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).filter(|c| c.starts_with(verb)).collect();
        let verb = match (COMMANDS.iter().find(|(c, _)| *c == verb), matches.as_slice()) {
            (Some((c, _)), _) => *c,
            (None, [one]) => *one,
            (None, []) => {
                self.flash_error(format!("unknown command :{verb}; ? lists them, tab completes"));
                return Vec::new();
            }
            (None, many) => {
                self.flash_error(format!(":{verb} is ambiguous: {}", many.join(", ")));
                return Vec::new();
            }
        };
        let id = || arg.parse::<WorkloadId>();
        let need_arg = |app: &mut App, what: &str| {
            app.flash_error(format!(":{verb} needs {what}"));
            Vec::new()
        };
        match verb {
            "overview" => self.on_intent(Intent::Go(View::Overview)),
            "capacity" => self.on_intent(Intent::Go(View::Capacity)),
            "nodes" => self.on_intent(Intent::Go(View::Nodes)),
            "workloads" => self.on_intent(Intent::Go(View::Workloads)),
            "triage" => self.on_intent(Intent::Go(View::Triage)),
            "editor" => self.on_intent(Intent::Go(View::Editor)),
            "audit" => self.on_intent(Intent::Go(View::Audit)),
            "tenants" => self.on_intent(Intent::Go(View::Tenants)),
            "usage" => self.on_intent(Intent::Go(View::Usage)),
            "quit" => self.on_intent(Intent::Quit),
            "faults" => self.on_intent(Intent::Faults),
            "new" => {
                let name = if arg.is_empty() { crate::console::editor::BLANK } else { arg.as_str() };
                if self.editor.use_template(name) {
                    self.on_intent(Intent::Go(View::Editor))
                } else {
                    let names: Vec<_> = crate::console::editor::TEMPLATES.iter().map(|(n, _)| *n).collect();
                    self.flash_error(format!("no template {name:?}; one of {}", names.join(", ")));
                    Vec::new()
                }
            }
            "open" if arg.is_empty() => need_arg(self, "a path"),
            "open" => vec![Effect::Load(PathBuf::from(arg))],
            "save" => match (arg.is_empty(), self.editor.path.clone()) {
                (false, _) => vec![Effect::Save(PathBuf::from(arg), self.editor.contents())],
                (true, Some(p)) => vec![Effect::Save(PathBuf::from(p), self.editor.contents())],
                (true, None) => need_arg(self, "a path"),
            },
            "sort" => match COLUMNS.iter().find(|c| c.name() == arg) {
                Some(c) => {
                    self.sort = *c;
                    Vec::new()
                }
                None => {
                    let names: Vec<_> = COLUMNS.iter().map(|c| c.name()).collect();
                    self.flash_error(format!("sort by one of {}", names.join(", ")));
                    Vec::new()
                }
            },
            "cordon" | "uncordon" | "drain" | "unquarantine" if arg.is_empty() => {
                need_arg(self, "a node name")
            }
            "cordon" => action::request(self, Op::Cordon(arg)),
            "uncordon" => action::request(self, Op::Uncordon(arg)),
            "unquarantine" => action::request(self, Op::Unquarantine(arg)),
            "drain" => {
                let evict = arg.split_whitespace().any(|w| w == "--evict");
                let node: Vec<&str> = arg.split_whitespace().filter(|w| *w != "--evict").collect();
                match (node.as_slice(), evict) {
                    ([node], false) => action::request(self, Op::Drain(node.to_string())),
                    ([node], true) => action::request(self, Op::DrainEvict(node.to_string())),
                    _ => need_arg(self, "one node name (and --evict to stop its work)"),
                }
            }
            "ack-all" => self.acknowledge_all(),
            "events" if arg.is_empty() => self.open_events(None),
            "logs" => match parse_attempt(&arg) {
                Ok((id, n)) => self.open_logs(Some(id), n),
                Err(e) => {
                    self.flash_error(e);
                    Vec::new()
                }
            },
            "describe" | "cancel" | "retry" | "ack" | "spec" | "events" => match id() {
                Ok(id) => match verb {
                    "describe" => self.describe(id),
                    "spec" => self.open_spec(Some(id)),
                    "events" => self.open_events(Some(id)),
                    "cancel" => action::request(self, Op::Cancel(id)),
                    "ack" => action::request(self, Op::Acknowledge(id)),
                    _ => action::request(self, Op::Retry(id)),
                },
                Err(e) => {
                    self.flash_error(e);
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }
}

/// Completes the command word, or a node / workload id argument, as far
/// as it is one thing; when it could be more, also what they are.
fn complete(text: &str, app: &App) -> (String, Vec<String>) {
    let all = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match text.split_once(' ') {
        None => {
            let m: Vec<&str> = COMMANDS.iter().map(|(c, _)| *c).filter(|c| c.starts_with(text)).collect();
            match m.as_slice() {
                [one] => (format!("{one} "), Vec::new()),
                [] => (text.to_string(), Vec::new()),
                many => (common_prefix(many), all(many)),
            }
        }
        Some((verb, arg)) => {
            let names: Vec<String> = match verb {
                "cordon" | "uncordon" | "drain" | "unquarantine" => app
                    .model
                    .fleet()
                    .map(|f| f.nodes.iter().map(|n| n.name.clone()).collect())
                    .unwrap_or_default(),
                "new" => crate::console::editor::TEMPLATES.iter().map(|(n, _)| n.to_string()).collect(),
                "sort" => COLUMNS.iter().map(|c| c.name().to_string()).collect(),
                _ => app.model.workloads.keys().rev().take(1000).map(|w| w.to_string()).collect(),
            };
            let m: Vec<&str> = names.iter().map(String::as_str).filter(|n| n.starts_with(arg)).collect();
            match m.as_slice() {
                [one] => (format!("{verb} {one}"), Vec::new()),
                [] => (text.to_string(), Vec::new()),
                many => (format!("{verb} {}", common_prefix(many)), all(many)),
            }
        }
    }
}

/// `w-7` (its last attempt) or `w-7.1` (attempt 1).
fn parse_attempt(arg: &str) -> Result<(WorkloadId, Option<u32>), String> {
    match arg.rsplit_once('.') {
        Some((id, n)) => {
            let n = n
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{arg:?}: attempts are numbered from 1, as in w-7.1"))?;
            Ok((id.parse()?, Some(n)))
        }
        None => Ok((arg.parse()?, None)),
    }
}

fn common_prefix(words: &[&str]) -> String {
    let first = words[0];
    let mut n = first.len();
    for w in &words[1..] {
        n = n.min(first.bytes().zip(w.bytes()).take_while(|(a, b)| a == b).count());
    }
    first[..n].to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn attempts_parse() {
        use crate::engine::model::WorkloadId;
        assert_eq!(super::parse_attempt("w-7.1"), Ok((WorkloadId(7), Some(1))));
        assert_eq!(super::parse_attempt("w-7"), Ok((WorkloadId(7), None)));
        assert!(super::parse_attempt("w-7.0").is_err());
        assert!(super::parse_attempt("w-7.x").is_err());
    }

    #[test]
    fn common_prefix() {
        assert_eq!(super::common_prefix(&["cordon", "cost"]), "co");
    }
}
