//! Writing Prometheus' text format (0.0.4): a family's `HELP` and `TYPE`
//! lines, a histogram's series, escaped label values. Shared by the
//! `/metrics` writers so none of them imports another.

use std::fmt::Write;

/// A histogram as [`crate::engine::metrics::Histogram::snapshot`] gives
/// it: cumulative `(upper bound, count)` pairs ending with `+Inf`, the sum
/// and the count.
pub type Snapshot = (Vec<(f64, u64)>, f64, u64);

/// A family's `HELP` and `TYPE` lines.
pub fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One histogram's `_bucket`, `_sum` and `_count` series; `labels` are
/// written before `le` (`route="/metrics"`, say; empty for none).
pub fn histogram_series(out: &mut String, name: &str, labels: &str, (buckets, sum, count): Snapshot) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (le, n) in buckets {
        let le = if le.is_infinite() { "+Inf".to_string() } else { le.to_string() };
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}");
    }
    let braced = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
    let _ = writeln!(out, "{name}_sum{braced} {sum}\n{name}_count{braced} {count}");
}

/// A label value with `\`, `"` and newlines escaped, as the format wants.
pub fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_series_with_and_without_labels() {
        let snap = || (vec![(0.5, 1), (f64::INFINITY, 3)], 2.5, 3);
        let mut out = String::new();
        histogram_series(&mut out, "h", "", snap());
        histogram_series(&mut out, "h", "route=\"/x\"", snap());
        assert_eq!(
            out,
            "h_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 3\nh_sum 2.5\nh_count 3\n\
             h_bucket{route=\"/x\",le=\"0.5\"} 1\nh_bucket{route=\"/x\",le=\"+Inf\"} 3\n\
             h_sum{route=\"/x\"} 2.5\nh_count{route=\"/x\"} 3\n"
        );
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
