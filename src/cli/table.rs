//! Plain tables for the terminal: no borders, aligned columns, like
//! `kubectl get` and `squeue`, so they read well over SSH and in logs.
//! Every cell is someone's text (a name, a reason, a workload's stderr),
//! so each is made one safe line ([`canopy::text::sanitize`]) as it goes
//! in: nothing in a cell acts on the terminal or breaks the row.

use canopy::text::sanitize;
use comfy_table::{ContentArrangement, presets};
use std::fmt;

pub struct Table(comfy_table::Table);

pub fn new_table(header: &[&str]) -> Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    Table(t)
}

impl Table {
    /// A row of cells, each sanitized to one line.
    pub fn add_row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) -> &mut Self {
        self.0.add_row(cells.into_iter().map(|c| sanitize(c.as_ref()).into_owned()).collect::<Vec<_>>());
        self
    }
}

impl fmt::Display for Table {
    /// The aligned rows, with no spaces after each row's last cell (the
    /// column padding would leave them: noise in a diff, a copy, a log).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = self.0.to_string();
        for (n, line) in text.lines().enumerate() {
            if n > 0 {
                f.write_str("\n")?;
            }
            f.write_str(line.trim_end())?;
        }
        Ok(())
    }
}

/// At most `max` characters of `s`: cut ones end in `…` (within `max`),
/// so a reader sees there is more (`--json` or the detail view has it).
pub fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

pub fn usd(v: f64) -> String {
    if v >= 100.0 { format!("${v:.0}") } else { format!("${v:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_end_at_their_last_character_and_cut_cells_say_so() {
        let mut t = new_table(&["ID", "REASON"]);
        t.add_row(["w-1", "short"]).add_row(["w-22", &cut(&"x".repeat(70), 60)]);
        let text = t.to_string();
        assert!(text.lines().all(|l| l == l.trim_end()), "{text:?}");
        let long = text.lines().find(|l| l.starts_with("w-22")).unwrap();
        assert!(long.ends_with(&format!("{}…", "x".repeat(59))), "{long}");
        assert_eq!(cut("exactly", 7), "exactly");
        assert_eq!(cut("héllo wörld", 5), "héll…");
    }
}
