//! Plain tables for the terminal: no borders, aligned columns, like
//! `kubectl get` and `squeue`, so they read well over SSH and in logs.

use comfy_table::{ContentArrangement, Table, presets};

pub fn new_table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    t
}

pub fn usd(v: f64) -> String {
    if v >= 100.0 { format!("${v:.0}") } else { format!("${v:.2}") }
}
