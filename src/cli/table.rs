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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

pub fn usd(v: f64) -> String {
    if v >= 100.0 { format!("${v:.0}") } else { format!("${v:.2}") }
}
