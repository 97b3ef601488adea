//! Matching one log line against the log rules of [`RULES`], fast.
//!
//! Every log line of every end is asked of every log rule in table order,
//! and most lines match none: searching each rule's substrings and regex
//! in turn was a twentieth of a large simulation. One [`RegexSet`] of all
//! the rules' patterns says in one pass over the line which rules can
//! match; only those are searched, in table order, for the offset. The
//! answer is the same rule at the same offset (a rule the set rules out
//! has no match on the line), which `rules_tests.rs` checks against the
//! rule-by-rule search.

use super::rules::{LogMatch, Matcher, Pattern, RULES, Rule, Status, Strength};
use regex::RegexSet;
use std::sync::LazyLock;

impl Pattern {
    /// The byte offset of the first match on `line`, searched on its own.
    pub(super) fn find(&self, line: &str) -> Option<usize> {
        match self {
            Pattern::Any(needles) => needles.iter().find_map(|n| line.find(n)),
            Pattern::Regex(re) => re.find(line).map(|m| m.start()),
            Pattern::Fn(f) => f(line),
        }
    }

    /// What a [`RegexSet`] can hold of the pattern: a regex that matches
    /// a line exactly when the pattern does, or `None` for a hand-written
    /// one.
    fn as_regex(&self) -> Option<String> {
        match self {
            Pattern::Any(needles) => {
                Some(needles.iter().map(|n| regex::escape(n)).collect::<Vec<_>>().join("|"))
            }
            Pattern::Regex(re) => Some(re.as_str().to_string()),
            Pattern::Fn(_) => None,
        }
    }
}

/// Per rule of [`RULES`], in its order, a searcher for each substring of
/// a [`Pattern::Any`] (none for other rules), built once: `str::find`
/// sets one up on every call. Finds what `str::find` finds, at the same
/// offset.
static FINDERS: LazyLock<Vec<Vec<memchr::memmem::Finder<'static>>>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| match &rule.matcher {
            Matcher::Log(LogMatch { pattern: Pattern::Any(needles), .. }) => {
                needles.iter().map(|n| memchr::memmem::Finder::new(n.as_bytes())).collect()
            }
            _ => Vec::new(),
        })
        .collect()
});

/// Every log rule's pattern in one set, and per rule of [`RULES`] its
/// place in the set (`None`: not a log rule, or a hand-written pattern
/// that is always searched).
static PREFILTER: LazyLock<(RegexSet, Vec<Option<usize>>)> = LazyLock::new(|| {
    let mut patterns = Vec::new();
    let slots = RULES
        .iter()
        .map(|rule| match &rule.matcher {
            Matcher::Log(lm) => lm.pattern.as_regex().map(|p| {
                patterns.push(p);
                patterns.len() - 1
            }),
            _ => None,
        })
        .collect();
    // Invariant: every pattern is a literal of the rule table (escaped, or
    // a regex that `every_pattern_compiles` compiles on its own), so the
    // set compiles; the classifier tests build it before any run.
    let set = RegexSet::new(&patterns).expect("the log rules' patterns compile as one set");
    (set, slots)
});

/// The first log rule in table order that matches `line` (trimmed), with
/// its strength and the byte offset of the match.
pub(crate) fn match_line(line: &str, status: Status) -> Option<(&'static Rule, Strength, usize)> {
    let (set, slots) = &*PREFILTER;
    let hits = set.matches(line);
    RULES.iter().zip(FINDERS.iter()).zip(slots).find_map(|((rule, finders), slot)| {
        let Matcher::Log(lm) = &rule.matcher else {
            return None;
        };
        if slot.is_some_and(|i| !hits.matched(i)) {
            return None;
        }
        search(rule, lm, finders, line, status)
    })
}

/// [`match_line`] without the set, rule by rule: what it must agree with.
#[cfg(test)]
pub(crate) fn match_line_unfiltered(line: &str, status: Status) -> Option<(&'static Rule, Strength, usize)> {
    RULES.iter().zip(FINDERS.iter()).find_map(|(rule, finders)| {
        let Matcher::Log(lm) = &rule.matcher else {
            return None;
        };
        search(rule, lm, finders, line, status)
    })
}

fn search(
    rule: &'static Rule,
    lm: &'static LogMatch,
    finders: &[memchr::memmem::Finder<'static>],
    line: &str,
    status: Status,
) -> Option<(&'static Rule, Strength, usize)> {
    if lm.only_on_signal.is_some_and(|s| status != Status::Signal(s)) {
        return None;
    }
    let at = match &lm.pattern {
        Pattern::Any(_) => finders.iter().find_map(|f| f.find(line.as_bytes())),
        other => other.find(line),
    };
    at.map(|at| (rule, lm.strength, at))
}
