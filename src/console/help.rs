//! The `?` help: every key of every view, the filter's syntax and every
//! `:` command, generated from the keymap ([`BINDINGS`](keymap::BINDINGS),
//! [`OTHER_KEYS`](keymap::OTHER_KEYS), [`COMMANDS`](keymap::COMMANDS)) and
//! wrapped to the screen's width, so that it scrolls by screen rows. Pure.

use super::editor::TEMPLATES;
use super::fit::{end, width};
use super::keymap::{self, COMMANDS, OTHER_KEYS, Scope};
use super::msg::COLUMNS;

/// Columns the keys take, with their indent.
pub const KEYS_W: usize = 16;

/// One screen row of the help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Heading(String),
    /// Keys (empty on a wrapped entry's further rows) and what they do.
    Entry(String, String),
}

/// Columns and rows inside the help's border on a screen of `size`.
pub fn area(size: (u16, u16)) -> (usize, usize) {
    (usize::from(size.0.saturating_sub(2)), usize::from(size.1.saturating_sub(4)).max(1))
}

/// The help as (section, keys, what they do), sections in order.
fn document(replay: bool) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = Vec::new();
    for (scope, keys, help) in keymap::help_lines() {
        if scope == Scope::Replay && !replay {
            continue;
        }
        out.push((scope.title().to_string(), keys, help.to_string()));
    }
    for (section, keys, help) in OTHER_KEYS {
        out.push((section.to_string(), keys.to_string(), help.to_string()));
    }
    for (typed, does) in super::filter::HELP {
        out.push(("/ filter".to_string(), typed.to_string(), does.to_string()));
    }
    for (c, help) in COMMANDS {
        let more = match *c {
            "sort" => format!(" ({})", COLUMNS.iter().map(|c| c.name()).collect::<Vec<_>>().join(" ")),
            "new" => format!(" ({})", TEMPLATES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" ")),
            _ => String::new(),
        };
        out.push((": commands (tab completes)".to_string(), format!(":{c}"), format!("{help}{more}")));
    }
    // Sections in the order they first appear (the editor's typing joins
    // the editor's keys).
    let mut order: Vec<String> = Vec::new();
    for (s, ..) in &out {
        if !order.contains(s) {
            order.push(s.clone());
        }
    }
    order.iter().flat_map(|s| out.iter().filter(move |(x, ..)| x == s).cloned()).collect()
}

/// The help as screen rows `width` columns wide.
pub fn rows(replay: bool, width: usize) -> Vec<Row> {
    let room = width.saturating_sub(KEYS_W).max(8);
    let mut out = Vec::new();
    let mut section = None;
    for (s, keys, help) in document(replay) {
        if section.as_ref() != Some(&s) {
            out.push(Row::Heading(end(&s, width).into_owned()));
            section = Some(s);
        }
        for (i, line) in wrap(&help, room).into_iter().enumerate() {
            out.push(Row::Entry(if i == 0 { keys.clone() } else { String::new() }, line));
        }
    }
    out
}

/// `text` in lines of at most `room` columns, broken between words (a word
/// longer than a line is broken where it must).
fn wrap(text: &str, room: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let gap = usize::from(!line.is_empty());
        if width(&line) + gap + width(word) <= room {
            if gap == 1 {
                line.push(' ');
            }
            line.push_str(word);
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        for c in word.chars() {
            if width(&line) + width(c.encode_utf8(&mut [0; 4])) > room {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::keymap::BINDINGS;

    fn all_text(rows: &[Row]) -> String {
        rows.iter()
            .map(|r| match r {
                Row::Heading(h) => h.clone(),
                Row::Entry(k, t) => format!("{k} {t}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn every_binding_command_and_other_key_is_listed() {
        let text = all_text(&rows(true, 2000));
        for b in BINDINGS {
            assert!(text.contains(b.help), "{}", b.help);
        }
        for (c, _) in COMMANDS {
            assert!(text.contains(&format!(":{c} ")), ":{c}");
        }
        for (_, keys, help) in OTHER_KEYS {
            assert!(text.contains(keys) && text.contains(help), "{keys}");
        }
        assert!(text.contains("sort workloads: :sort COLUMN (id name state attempt pool gpus age cost)"));
    }

    #[test]
    fn replay_keys_only_in_a_replay() {
        assert!(all_text(&rows(true, 80)).contains("pause / resume"));
        assert!(!all_text(&rows(false, 80)).contains("pause / resume"));
    }

    #[test]
    fn wrapping_keeps_every_word_within_the_width() {
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(wrap("", 3), [""]);
        for r in rows(false, 40) {
            if let Row::Entry(_, t) = r {
                assert!(width(&t) <= 40 - KEYS_W, "{t}");
            }
        }
        let narrow = rows(false, 40).len();
        assert!(narrow > rows(false, 200).len(), "narrow screens wrap into more rows");
    }
}
