//! Audit: the engine's audit trail, newest first: when (local time), who
//! asked, from where, what of what, the outcome and the operator's reason.
//! Denied (`✗`) and refused (`!`) requests carry a symbol as well as a
//! colour. Every string in a record is someone else's choice (a token's
//! name, a target, a reason), so each is drawn sanitized. Columns shrink
//! to fit (names in the middle, prose at its end), FROM only shows from
//! 100 columns on, and the pane below shows the selected record whole.
//! Draws only the visible window. The title says when older records are
//! left to page in (the end of the list loads them).

use super::{block, marker, window};
use crate::console::app::{App, Load, View};
use crate::console::fit::{self, Col, width_upto};
use crate::console::logs::clock;
use crate::console::theme::Theme;
use crate::engine::model::{AuditRecord, Millis};
use crate::text::sanitize;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Row, Table, Wrap};
use std::borrow::Cow;

/// From this many columns inside the border on, FROM has a column.
const FROM_FROM: usize = 98;
/// The pane with the selected record needs this much height.
const DETAIL_FROM_HEIGHT: u16 = 14;

pub fn draw(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.config.theme;
    let rows = &app.derived.audit;
    let mut title = format!("audit {}/{} newest first", rows.len(), app.model.audit.len());
    let flt = app.filter_text.get(&View::Audit).filter(|s| !s.is_empty());
    if let Some(flt) = flt {
        title.push_str(&format!(" /{flt}"));
    }
    if app.audit.paging() {
        title.push_str(" loading older…");
    } else if app.audit.load == Load::Loading {
        title.push_str(" loading…");
    } else if app.audit.next_page.is_some() {
        title.push_str(" (older: G)");
    }
    if let Load::Failed(e) = &app.audit.load {
        let mut lines =
            vec![Line::from(Span::styled(format!("✗ cannot load the audit trail: {}", sanitize(e)), t.bad))];
        if app.replay.is_none() {
            lines.push(Line::from(Span::styled("7 (or :audit) tries again", t.dim)));
        }
        let p = Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("audit".into(), t));
        f.render_widget(p, area);
        return;
    }
    if rows.is_empty() {
        let why = match (flt, &app.audit.load) {
            (Some(_), _) => "no audit record matches the filter (esc clears it)",
            (None, Load::Loading) => "loading the audit trail…",
            (None, _) => "no audit records yet: submit, cancel, retry, cordon, drain and tokens leave one",
        };
        let p = Paragraph::new(Line::from(Span::styled(why, t.dim)))
            .wrap(Wrap { trim: false })
            .block(block(title, t));
        f.render_widget(p, area);
        return;
    }
    let (list, detail) = if area.height >= DETAIL_FROM_HEIGHT {
        let [l, d] = Layout::vertical([Constraint::Min(5), Constraint::Length(5)]).areas(area);
        (l, Some(d))
    } else {
        (area, None)
    };
    let sel = app.sel(View::Audit).min(rows.len() - 1);
    f.render_widget(table(app, rows, sel, list, title), list);
    if let Some(d) = detail {
        f.render_widget(selected(app, &rows[sel]), d);
    }
}

/// Denied by authorization, refused by the engine, or done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Done,
    Refused,
    Denied,
}

impl Outcome {
    fn of(outcome: &str) -> Self {
        match outcome {
            "ok" | "existing" => Outcome::Done,
            o if o.starts_with("denied") => Outcome::Denied,
            _ => Outcome::Refused,
        }
    }
    fn symbol(self) -> &'static str {
        match self {
            Outcome::Done => " ",
            Outcome::Refused => "!",
            Outcome::Denied => "✗",
        }
    }
    fn style(self, t: &Theme) -> Style {
        match self {
            Outcome::Done => t.text,
            Outcome::Refused => t.warn,
            Outcome::Denied => t.bad,
        }
    }
}

/// One record's cells, sanitized, before they are fitted.
struct Cells<'a> {
    time: String,
    outcome: Outcome,
    text: [Cow<'a, str>; 6],
}

/// WHO, FROM, ACTION, TARGET, OUTCOME, REASON.
const HEADERS: [&str; 6] = ["WHO", "FROM", "ACTION", "TARGET", "OUTCOME", "REASON"];
/// The widest each column wants to be (REASON takes what is left).
const CAPS: [usize; 6] = [20, 24, 12, 20, 32, 400];
/// What each column shrinks to first, the widest over it first.
const COMFORT: [usize; 6] = [10, 12, 12, 12, 18, 8];
/// The narrowest each column is made before the screen clips.
const MINS: [usize; 6] = [4, 6, 6, 6, 7, 6];
/// At most this many characters of a record's string are drawn (whoever
/// calls the API chooses how long a reason is).
const KEEP: usize = 1024;

fn cells<'a>(a: &'a AuditRecord, now: Millis, offset_s: i64) -> Cells<'a> {
    Cells {
        time: when(a.at, now, offset_s),
        outcome: Outcome::of(&a.outcome),
        text: [
            sanitize(head(&a.principal)),
            sanitize(head(&a.origin)),
            sanitize(head(&a.action)),
            sanitize(head(a.target.as_deref().unwrap_or("-"))),
            sanitize(head(&a.outcome)),
            sanitize(head(a.reason.as_deref().unwrap_or(""))),
        ],
    }
}

fn table<'a>(app: &'a App, rows: &'a [AuditRecord], sel: usize, area: Rect, title: String) -> Table<'a> {
    let t = &app.config.theme;
    let all: Vec<Cells> = rows.iter().map(|a| cells(a, app.now, app.config.utc_offset_s)).collect();
    let inner = usize::from(area.width.saturating_sub(2));
    let shown: Vec<usize> = (0..6).filter(|&i| i != 1 || inner >= FROM_FROM).collect();
    let time_w = all.iter().map(|c| c.time.len()).max().unwrap_or(0).max(4);
    // The marker cell (selection and outcome), TIME, then the text
    // columns, one space apart; REASON takes the room to spare.
    let mut cols = vec![Col::fixed(2), Col::fixed(time_w)];
    cols.extend(shown.iter().map(|&i| {
        let widest = all.iter().map(|c| width_upto(&c.text[i], CAPS[i])).max().unwrap_or(0);
        let col = Col::shrink(widest.min(CAPS[i]).max(HEADERS[i].len()), COMFORT[i], MINS[i]);
        if i == 5 { col.slack() } else { col }
    }));
    let want = fit::widths(&cols, inner, 1)[2..].to_vec();

    let height = usize::from(area.height.saturating_sub(3));
    let start = window(sel, height);
    // Names on screen stay told apart from each other.
    let among: Vec<Vec<&str>> =
        (0..6).map(|i| all.iter().skip(start).take(height).map(|c| c.text[i].as_ref()).collect()).collect();
    let body = all.iter().enumerate().skip(start).take(height).map(|(n, c)| {
        let mut cols = vec![
            Cell::from(Span::styled(
                format!("{}{}", marker(n == sel), c.outcome.symbol()),
                c.outcome.style(t),
            )),
            Cell::from(Span::styled(c.time.clone(), t.dim)),
        ];
        for (k, &i) in shown.iter().enumerate() {
            // Who, from where and the target are names: they differ at
            // their end as often as at their start.
            let text = match i {
                0 | 1 | 3 => fit::distinct(&c.text[i], &among[i], want[k]).into_owned(),
                _ => fit::end(&c.text[i], want[k]).into_owned(),
            };
            cols.push(if i == 4 {
                Cell::from(Span::styled(text, c.outcome.style(t)))
            } else {
                Cell::from(text)
            });
        }
        let r = Row::new(cols);
        if n == sel { r.style(t.selected) } else { r }
    });
    let mut header = vec!["", "TIME"];
    header.extend(shown.iter().map(|&i| HEADERS[i]));
    let mut widths = vec![Constraint::Length(2), Constraint::Length(time_w as u16)];
    widths.extend(want.iter().map(|&w| Constraint::Length(u16::try_from(w).unwrap_or(u16::MAX))));
    Table::new(body, widths).header(Row::new(header).style(t.header)).column_spacing(1).block(block(title, t))
}

/// The selected record whole (wrapped): when, who, from where, what of
/// what, the outcome and the reason.
fn selected<'a>(app: &App, a: &'a AuditRecord) -> Paragraph<'a> {
    let t = &app.config.theme;
    let c = cells(a, app.now, app.config.utc_offset_s);
    let [who, from, action, target, outcome, reason] = c.text;
    let lines = vec![
        Line::from(vec![
            Span::styled(format!("{} ", full_time(a.at, app.config.utc_offset_s)), t.dim),
            Span::styled(who.into_owned(), t.accent),
            Span::styled(" from ", t.dim),
            Span::raw(from.into_owned()),
        ]),
        Line::from(vec![
            Span::styled(format!("{} ", c.outcome.symbol()), c.outcome.style(t)),
            Span::raw(format!("{action} {target} → ")),
            Span::styled(outcome.into_owned(), c.outcome.style(t)),
        ]),
        Line::from(if reason.is_empty() {
            Span::styled("no reason given", t.dim)
        } else {
            Span::raw(format!("reason: {reason}"))
        }),
    ];
    Paragraph::new(lines).wrap(Wrap { trim: false }).block(block("selected".into(), t))
}

/// The first [`KEEP`] characters of `s`.
fn head(s: &str) -> &str {
    s.char_indices().nth(KEEP).map_or(s, |(i, _)| &s[..i])
}

/// Local time: `HH:MM:SS` today, `MM-DD HH:MM` before.
fn when(at: Millis, now: Millis, offset_s: i64) -> String {
    let day = |m: Millis| (m.0.div_euclid(1000) + offset_s).div_euclid(86_400);
    if day(at) == day(now) { clock(at, offset_s) } else { full_time(at, offset_s)[5..16].to_string() }
}

/// `YYYY-MM-DD HH:MM:SS`, local.
fn full_time(at: Millis, offset_s: i64) -> String {
    let shifted = Millis(at.0.saturating_add(offset_s.saturating_mul(1000)));
    crate::providers::sim::signature::iso_utc(shifted).replacen('T', " ", 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_head_of_long_strings() {
        assert_eq!(head(&"x".repeat(5000)).len(), KEEP);
        assert_eq!(head("short"), "short");
    }

    #[test]
    fn today_is_a_clock_earlier_days_a_date() {
        let now = Millis(1_800_000_000_000); // 2027-01-15 08:00:00 UTC
        assert_eq!(when(Millis(now.0 - 61_000), now, 0), "07:58:59");
        assert_eq!(when(Millis(now.0 - 86_400_000), now, 0), "01-14 08:00");
        assert_eq!(when(now, now, 3600), "09:00:00");
        assert_eq!(full_time(now, 0), "2027-01-15 08:00:00");
    }

    #[test]
    fn outcomes() {
        assert_eq!(Outcome::of("ok"), Outcome::Done);
        assert_eq!(Outcome::of("existing"), Outcome::Done);
        assert_eq!(Outcome::of("refused: w-3 is final"), Outcome::Refused);
        assert_eq!(Outcome::of("denied: viewer may not cancel"), Outcome::Denied);
    }
}
