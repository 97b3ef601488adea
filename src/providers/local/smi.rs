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

/// A three-column `| … | … | … |` table whose devices take two rows each,
/// as mx-smi, cnmon and efsmi print them: a row naming the device, then
/// one with its memory. What each tool's parser tells apart.
pub(crate) struct TwoRowTable {
    pub tool: &'static str,
    /// Whether a row is the table's header (nothing before it is read).
    pub header: fn(&[&str]) -> bool,
    /// The header's shape, for the error when there is none.
    pub header_shape: &'static str,
    /// Rows within the table that are neither (units, separators).
    pub skip: fn(&[&str]) -> bool,
    /// A row where the device table ends (the process table).
    pub end: fn(&[&str]) -> bool,
}

/// A row: its 1-based line number and its cells.
pub(crate) type Row<'a> = (usize, Vec<&'a str>);

/// One device's two rows.
pub(crate) type RowPair<'a> = (Row<'a>, Row<'a>);

impl TwoRowTable {
    /// The device rows in pairs, and a naming row left without its
    /// memory row (the output was cut). Rows of other widths are passed
    /// over (banners, separators); the end is looked for in rows of any
    /// width.
    pub(crate) fn pairs<'a>(&self, text: &'a str) -> Result<(Vec<RowPair<'a>>, Option<Row<'a>>), ParseError> {
        let mut header = false;
        let mut naming: Option<Row> = None;
        let mut pairs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let Some(c) = cells(line) else { continue };
            if !header {
                header = c.len() == 3 && (self.header)(&c);
                continue;
            }
            if (self.end)(&c) {
                break;
            }
            if c.len() != 3 || (self.skip)(&c) {
                continue;
            }
            match naming.take() {
                None => naming = Some((i + 1, c)),
                Some(first) => pairs.push((first, (i + 1, c))),
            }
        }
        if !header {
            return Err(ParseError {
                tool: self.tool,
                line: 0,
                what: format!("no device table (no `{}` header row)", self.header_shape),
            });
        }
        Ok((pairs, naming))
    }
}

/// `<index> <name…>`: a two-row table's first cell; the error names the
/// `kind` of device and what was found.
pub(crate) fn index_and_name(
    tool: &'static str,
    line: usize,
    kind: &str,
    cell: &str,
) -> Result<(u32, String), ParseError> {
    let err = |what: String| ParseError { tool, line, what };
    let mut words = cell.split_whitespace();
    let index = words
        .next()
        .and_then(|w| w.parse::<u32>().ok())
        .ok_or_else(|| err(format!("expected `<{kind}> <name>`, found {cell:?}")))?;
    let name = words.collect::<Vec<_>>().join(" ");
    if name.is_empty() {
        return Err(err(format!("{kind} {index} has no name in {cell:?}")));
    }
    Ok((index, name))
}
