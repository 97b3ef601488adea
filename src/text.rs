//! Text that someone else chose, made safe to show on a terminal.
//!
//! Workload names, labels, reasons, a workload's stderr (the classifier's
//! evidence, log lines), events' messages, an error a server sent: any of
//! it may carry bytes that act on the operator's terminal instead of
//! showing (`ESC [2J` clears the screen, OSC 52 writes the clipboard, a
//! bidi override reverses what follows). The console and the CLI make such
//! text safe here, one implementation. One convention everywhere: each control
//! character (C0, DEL, C1, and so every escape sequence's introducer) and
//! each invisible format character becomes `�` (U+FFFD), so it shows
//! instead of acting; the rest of an escape sequence is plain text then.

use std::borrow::Cow;

/// Whether `c` acts on a terminal or hides text instead of showing:
/// control characters (C0, DEL, C1) and the invisible format characters
/// that reorder or hide text (bidi overrides and isolates, zero-width
/// spaces and joiners, the BOM, soft hyphens, interlinear annotations).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

/// One line of someone else's text (a cell, a name, a reason), made safe:
/// line and tab breaks become a space, so it stays one line; every other
/// [hidden](is_hidden) character becomes `�`. Borrowed when there is
/// nothing to replace.
pub fn sanitize(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_hidden) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| match c {
                '\t' | '\n' | '\r' | '\u{2028}' | '\u{2029}' => ' ',
                c if is_hidden(c) => '\u{FFFD}',
                c => c,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_shows_what_would_act_on_the_terminal() {
        assert!(matches!(sanitize("local:alice"), Cow::Borrowed("local:alice")));
        assert_eq!(sanitize("a\x1b[2Jb"), "a\u{FFFD}[2Jb");
        assert_eq!(sanitize("x\u{9b}31m\u{7f}"), "x\u{FFFD}31m\u{FFFD}");
        assert_eq!(sanitize("evil\u{202E}txt.exe"), "evil\u{FFFD}txt.exe");
        assert_eq!(sanitize("a\u{200B}b\u{2066}c\u{FEFF}"), "a\u{FFFD}b\u{FFFD}c\u{FFFD}");
        assert_eq!(sanitize("one\ntwo\tthree\r"), "one two three ");
        assert_eq!(sanitize("ünïcödé ✓ 日本"), "ünïcödé ✓ 日本");
    }
}
