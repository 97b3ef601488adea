//! The logs view's state: the lines of one attempt (arriving in batches
//! from the run loop's tailer), follow, wrap, timestamps, search and the
//! evidence line. Pure; the tailer that reads `<home>/logs` lives in
//! [`super::run`].

use super::component::{self, Component, Ctx, Outcome};
use super::keymap::Intent;
use super::msg::Effect;
pub use super::msg::LogLine;
use crate::engine::handle::LogBytes;
use crate::engine::model::{AttemptId, Millis};
use regex::Regex;

/// Lines kept per attempt; older ones are dropped.
pub const MAX_LINES: usize = 200_000;

/// Off, local time, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    Off,
    Local,
    Utc,
}

#[derive(Debug, Clone)]
pub struct Logs {
    pub attempt: AttemptId,
    pub lines: Vec<LogLine>,
    /// Index of the line at the top of the view.
    pub top: usize,
    /// The line the cursor is on (search hits, evidence).
    pub cursor: usize,
    pub follow: bool,
    pub wrap: bool,
    pub stamps: Stamps,
    pub search: Option<String>,
    pub evidence: Option<String>,
    /// Lines dropped at the front to stay under [`MAX_LINES`].
    pub dropped: usize,
    /// Why there are no lines to show, when that is known (a replay).
    pub note: Option<String>,
}

impl Logs {
    pub fn new(attempt: AttemptId, evidence: Option<String>) -> Self {
        Self {
            attempt,
            lines: Vec::new(),
            top: 0,
            cursor: 0,
            follow: evidence.is_none(),
            wrap: false,
            stamps: Stamps::Off,
            search: None,
            evidence,
            dropped: 0,
            note: None,
        }
    }

    /// Adds a batch; keeps the bottom in view while following.
    pub fn push(&mut self, batch: Vec<LogLine>, height: usize) {
        let had = self.lines.is_empty();
        self.lines.extend(batch);
        if self.lines.len() > MAX_LINES {
            let cut = self.lines.len() - MAX_LINES;
            self.lines.drain(..cut);
            self.dropped += cut;
            self.top = self.top.saturating_sub(cut);
            self.cursor = self.cursor.saturating_sub(cut);
        }
        if self.follow {
            self.bottom(height);
        } else if had && self.evidence.is_some() {
            self.jump_evidence(height);
        }
    }

    pub fn bottom(&mut self, height: usize) {
        self.cursor = self.lines.len().saturating_sub(1);
        self.top = self.lines.len().saturating_sub(height.max(1));
    }

    pub fn scroll(&mut self, by: isize, height: usize) {
        self.follow = false;
        let max = self.lines.len().saturating_sub(1);
        self.cursor = (self.cursor as isize + by).clamp(0, max as isize) as usize;
        self.show(self.cursor, height);
    }

    fn show(&mut self, line: usize, height: usize) {
        let h = height.max(1);
        if line < self.top {
            self.top = line;
        } else if line >= self.top + h {
            self.top = line + 1 - h;
        }
    }

    fn matcher(&self) -> Option<Regex> {
        let s = self.search.as_deref().filter(|s| !s.is_empty())?;
        Regex::new(&format!("(?i){s}")).or_else(|_| Regex::new(&format!("(?i){}", regex::escape(s)))).ok()
    }

    pub fn is_match(&self, i: usize) -> bool {
        self.matcher().is_some_and(|re| self.lines.get(i).is_some_and(|l| re.is_match(&l.text)))
    }

    /// Moves to the next (or previous) match; false when there is none.
    pub fn find(&mut self, forward: bool, height: usize) -> bool {
        let Some(re) = self.matcher() else { return false };
        let n = self.lines.len();
        if n == 0 {
            return false;
        }
        self.follow = false;
        for step in 1..=n {
            let i = if forward { (self.cursor + step) % n } else { (self.cursor + n * 2 - step) % n };
            if re.is_match(&self.lines[i].text) {
                self.cursor = i;
                self.show(i, height);
                return true;
            }
        }
        false
    }

    /// Moves to the (last) line that decided the failure class.
    pub fn jump_evidence(&mut self, height: usize) -> bool {
        let Some(ev) = self.evidence.as_deref().map(str::trim).filter(|e| !e.is_empty()) else {
            return false;
        };
        match self.lines.iter().rposition(|l| l.text.contains(ev)) {
            Some(i) => {
                self.follow = false;
                self.cursor = i;
                self.top = i.saturating_sub(height / 2);
                true
            }
            None => false,
        }
    }
}

impl Logs {
    /// The logs of `attempt` of a workload `model` holds, at its evidence
    /// line when it has one; in a replay, a note that there are none.
    pub fn of(attempt: &crate::engine::model::AttemptRecord, replay: bool) -> Self {
        let evidence = attempt.evidence.clone();
        let mut logs = Logs::new(attempt.id, evidence.clone());
        if replay {
            // The simulator runs nothing, so there is nothing to tail.
            logs.note = Some(match evidence.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
                Some(e) => format!("no logs in a replay: the simulator writes none. Its evidence line: {e}"),
                None => "no logs in a replay: the simulator writes none.".into(),
            });
        }
        logs
    }

    /// Switches to the workload's attempt `by` before (negative) or after
    /// this one; what to say when there is none.
    fn switch(&mut self, by: i64, ctx: &Ctx<'_>) -> Outcome {
        let id = self.attempt.workload;
        let Some(w) = ctx.model.workloads.get(&id) else {
            return Outcome::Say(format!("{id} is not held: its attempts are unknown"), true);
        };
        let at = w.attempts.iter().position(|a| a.id == self.attempt);
        let want = at.and_then(|i| i.checked_add_signed(by as isize));
        let Some(a) = want.and_then(|i| w.attempts.get(i)) else {
            let which = if by < 0 { "first" } else { "last" };
            return Outcome::Say(
                format!("{} is {id}'s {which} attempt (of {})", self.attempt, w.attempts.len()),
                false,
            );
        };
        *self = Logs::of(a, ctx.replay);
        if ctx.replay {
            return Outcome::Done;
        }
        Outcome::Effects(vec![Effect::TailLogs(Some(a.id))])
    }
}

impl Component for Logs {
    /// Scrolling, follow, wrap, timestamps, search hits, the evidence
    /// line, and `[` / `]` for the workload's previous / next attempt.
    fn on_intent(&mut self, intent: Intent, ctx: &Ctx<'_>) -> Outcome {
        let page = ctx.page;
        if let Some(by) = component::step(intent, page) {
            self.scroll(by.clamp(-(1 << 30), 1 << 30), page);
            return Outcome::Done;
        }
        match intent {
            Intent::Follow => {
                self.follow = !self.follow;
                if self.follow {
                    self.bottom(page);
                }
            }
            Intent::Wrap => self.wrap = !self.wrap,
            Intent::Timestamps => {
                self.stamps = match self.stamps {
                    Stamps::Off => Stamps::Local,
                    Stamps::Local => Stamps::Utc,
                    Stamps::Utc => Stamps::Off,
                }
            }
            Intent::NextMatch | Intent::PrevMatch => {
                if !self.find(intent == Intent::NextMatch, page) {
                    return Outcome::Say("no match".into(), true);
                }
            }
            Intent::Evidence => {
                if !self.jump_evidence(page) {
                    return Outcome::Say("no evidence line in these logs".into(), true);
                }
            }
            Intent::PrevAttempt => return self.switch(-1, ctx),
            Intent::NextAttempt => return self.switch(1, ctx),
            _ => return Outcome::Ignored,
        }
        Outcome::Done
    }
}

/// One stream of a followed log: where the next read starts, the bytes
/// of a line not finished yet, and the times of the chunks those lie in.
#[derive(Debug, Clone, Default)]
pub struct StreamTail {
    /// Where the next read starts.
    pub offset: u64,
    /// Bytes read after the last newline, starting at `partial_at`.
    partial: Vec<u8>,
    partial_at: u64,
    /// (offset, when written) of the chunks from the one holding
    /// `partial_at` on.
    times: Vec<(u64, Millis)>,
}

impl StreamTail {
    /// Takes a read from [`Self::offset`] and gives its whole lines, each
    /// with the time its first byte was written (`now`, when the log has
    /// no times for it).
    pub fn take(&mut self, got: LogBytes, stderr: bool, now: Millis) -> Vec<LogLine> {
        if self.partial.is_empty() {
            self.partial_at = self.offset;
        }
        for t in got.times {
            match self.times.last_mut() {
                Some(last) if last.0 >= t.0 => {
                    if last.0 == t.0 {
                        *last = t;
                    }
                }
                _ => self.times.push(t),
            }
        }
        self.offset = got.next_offset.max(self.offset);
        self.partial.extend_from_slice(&got.data);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else { return Vec::new() };
        let rest = self.partial.split_off(end + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        let mut lines = Vec::new();
        let mut start = 0usize;
        for (i, b) in done.iter().enumerate() {
            if *b != b'\n' {
                continue;
            }
            let mut line = &done[start..i];
            if let [head @ .., b'\r'] = line {
                line = head;
            }
            let at = crate::engine::log_times::time_at(&self.times, self.partial_at + start as u64);
            lines.push(LogLine {
                at: at.unwrap_or(now),
                stderr,
                text: String::from_utf8_lossy(line).into_owned(),
            });
            start = i + 1;
        }
        self.partial_at += done.len() as u64;
        // Only the chunk holding the unfinished line's start and later
        // ones are needed from now on.
        let keep = self.times.partition_point(|(o, _)| *o <= self.partial_at).saturating_sub(1);
        self.times.drain(..keep);
        lines
    }
}

/// `HH:MM:SS` of `at` shifted by `offset_s` seconds.
pub fn clock(at: Millis, offset_s: i64) -> String {
    let s = (at.0 / 1000 + offset_s).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::model::WorkloadId;

    fn lines(n: usize) -> Vec<LogLine> {
        (0..n).map(|i| LogLine { at: Millis(0), stderr: false, text: format!("line {i}") }).collect()
    }

    #[test]
    fn search_wraps_and_evidence_jumps() {
        let a = AttemptId { workload: WorkloadId(1), n: 1 };
        let mut l = Logs::new(a, Some("line 7".into()));
        l.push(lines(20), 5);
        assert_eq!(l.cursor, 7, "opens at the evidence line");
        l.search = Some("line 1[0-9]".into());
        assert!(l.find(true, 5));
        assert_eq!(l.cursor, 10);
        assert!(l.find(false, 5));
        assert_eq!(l.cursor, 19, "wraps backwards");
        assert_eq!(clock(Millis(3_723_000), 0), "01:02:03");
    }

    #[test]
    fn each_line_takes_the_time_its_first_byte_was_written() {
        let mut t = StreamTail::default();
        let read = |data: &str, from: u64, times: &[(u64, i64)]| LogBytes {
            data: data.as_bytes().to_vec(),
            next_offset: from + data.len() as u64,
            times: times.iter().map(|(o, m)| (*o, Millis(*m))).collect(),
        };
        // Two lines first read at 1 s, and the start of a third.
        let got = t.take(read("one\ntwo\r\nthr", 0, &[(0, 1_000)]), false, Millis(99_000));
        let seen: Vec<(&str, i64)> = got.iter().map(|l| (l.text.as_str(), l.at.0)).collect();
        assert_eq!(seen, [("one", 1_000), ("two", 1_000)]);
        // The third's end at 2 s: it began at 1 s. A fourth at 2 s.
        let got = t.take(read("ee\nfour\n", 12, &[(0, 1_000), (14, 2_000)]), false, Millis(99_000));
        let seen: Vec<(&str, i64)> = got.iter().map(|l| (l.text.as_str(), l.at.0)).collect();
        assert_eq!(seen, [("three", 1_000), ("four", 2_000)]);
        assert_eq!(t.offset, 20);
        // A log with no times: when the console read it.
        let mut t = StreamTail::default();
        let got = t.take(read("old\n", 0, &[]), true, Millis(99_000));
        assert_eq!((got[0].at, got[0].stderr), (Millis(99_000), true));
    }

    #[test]
    fn following_keeps_the_bottom_in_view_and_caps_memory() {
        let a = AttemptId { workload: WorkloadId(1), n: 1 };
        let mut l = Logs::new(a, None);
        l.push(lines(100), 10);
        assert_eq!(l.top, 90);
        l.push(lines(MAX_LINES), 10);
        assert_eq!(l.lines.len(), MAX_LINES);
        assert_eq!(l.dropped, 100);
    }
}
