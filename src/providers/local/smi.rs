//! What every vendor tool's parser produces: one [`Device`] per device,
//! or a [`ParseError`] naming the tool and the line; and the helpers the
//! table parsers share. The parsers are in [`super::discover`] (Ascend,
//! Kunlunxin) and [`super::smi_gpus`] (AMD, Hygon, Iluvatar, Moore
//! Threads, MetaX).

use crate::accel::Family;

/// One device as its tool lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// The index a visible-devices variable names it by.
    pub index: u32,
    /// The product name as printed: `910B4-1`, `Ascend910`, `K200`.
    pub name: String,
    /// Its memory (HBM where the tool reports it), MiB.
    pub memory_mib: f64,
    pub family: Option<Family>,
}

/// A tool printed something the parser does not understand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "cannot read `{tool}` output at line {line}: {what}; run `{tool}` on the host to see it, \
     and report the output if the devices are there"
)]
pub struct ParseError {
    pub tool: &'static str,
    /// 1-based; 0 for the output as a whole.
    pub line: usize,
    pub what: String,
}

/// The `used / total` pairs of a table cell, in order.
pub(crate) fn usage_pairs(cell: &str) -> Vec<(f64, f64)> {
    let t: Vec<&str> = cell.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, tok) in t.iter().enumerate() {
        let pair = if *tok == "/" {
            match (i.checked_sub(1).and_then(|p| t.get(p)), t.get(i + 1)) {
                (Some(a), Some(b)) => Some((*a, *b)),
                _ => None,
            }
        } else {
            tok.split_once('/').filter(|(a, b)| !a.is_empty() && !b.is_empty())
        };
        if let Some((a, b)) = pair
            && let (Ok(a), Ok(b)) = (a.parse::<f64>(), b.parse::<f64>())
        {
            out.push((a, b));
        }
    }
    out
}

/// The cells of a `| a | b | c |` table line, trimmed.
pub(crate) fn cells(line: &str) -> Option<Vec<&str>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split('|').map(str::trim).collect())
}
