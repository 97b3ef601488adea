//! Parsers of the GPU vendors' tools whose output Canopy has a public
//! sample of (`tests/fixtures/accel/`): `rocm-smi --json` (AMD, and Hygon
//! DCUs through the rocm-smi of Hygon's DTK), `ixsmi`'s CSV (Iluvatar
//! CoreX), `mthreads-gmi` (Moore Threads) and `mx-smi` (MetaX). Their
//! tests are with the other parsers' in [`super::discover`].

use super::smi::{Device, ParseError, TwoRowTable, index_and_name, usage_pairs};
use crate::accel::{Family, Vendor};

/// Parses `rocm-smi --showproductname --showmeminfo vram --json`: an
/// object keyed `card<N>`, each with `Card Series` (the product name), its
/// VRAM and, on ROCm 6, `GFX Version` (`gfx942`). AMD's rocm-smi prints
/// `VRAM Total Memory (B)`; the rocm-smi of Hygon's DTK prints `vram Total
/// Memory (MiB)` and `Card Vendor` "Chengdu Haiguang …", which makes the
/// card a Hygon DCU. Keys the parser does not use are ignored; text before
/// the object (a warning) is skipped.
pub fn parse_rocm_smi_cards(text: &str) -> Result<Vec<(Vendor, Device)>, ParseError> {
    const TOOL: &str = "rocm-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let Some(start) = text.lines().position(|l| l.trim_start().starts_with('{')) else {
        return Err(err(0, "no JSON object (was `--json` given?)".into()));
    };
    let body: String = text.lines().skip(start).collect::<Vec<_>>().join("\n");
    let value: serde_json::Value =
        serde_json::from_str(&body).map_err(|e| err(start + e.line(), format!("not JSON: {e}")))?;
    let cards = value.as_object().ok_or_else(|| err(start + 1, "expected an object keyed by card".into()))?;
    // The 1-based line of `"<field>"` in card `key`'s object (of the
    // card's key itself without a field), for errors about it.
    let line_of = |key: &str, field: Option<&str>| {
        let card = format!("\"{key}\"");
        let Some(at) = text.lines().position(|l| l.contains(&card)) else { return 0 };
        let Some(field) = field else { return at + 1 };
        let quoted = format!("\"{field}\"");
        text.lines().skip(at).position(|l| l.contains(&quoted)).map_or(at + 1, |i| at + i + 1)
    };
    let mut devices = Vec::new();
    for (key, card) in cards {
        let Some(index) = key.strip_prefix("card").and_then(|n| n.parse::<u32>().ok()) else {
            continue; // "system" and other non-device sections
        };
        let field = |name: &str| card.get(name).and_then(serde_json::Value::as_str);
        let name = field("Card Series")
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                err(line_of(key, None), format!("{key} has no `Card Series` (run with --showproductname)"))
            })?
            .trim()
            .to_string();
        let (vram_key, per_mib) = if field("VRAM Total Memory (B)").is_some() {
            ("VRAM Total Memory (B)", 1024.0 * 1024.0)
        } else {
            ("vram Total Memory (MiB)", 1.0)
        };
        let raw = field(vram_key).ok_or_else(|| {
            err(
                line_of(key, None),
                format!("{key} has no `VRAM Total Memory (B)` (run with --showmeminfo vram)"),
            )
        })?;
        let amount: f64 = raw.trim().parse().map_err(|_| {
            err(line_of(key, Some(vram_key)), format!("{key}: `{vram_key}` {raw:?} is not a number"))
        })?;
        let hygon = field("Card Vendor").is_some_and(|v| v.contains("Haiguang") || v.contains("Hygon"));
        let (vendor, family) = if hygon {
            (Vendor::Hygon, hygon_family(&name))
        } else {
            (Vendor::Amd, amd_family(field("GFX Version"), &name))
        };
        devices.push((vendor, Device { index, name, memory_mib: amount / per_mib, family }));
    }
    devices.sort_by_key(|(_, d)| d.index);
    Ok(devices)
}

/// `rocm-smi`'s AMD cards.
pub fn parse_rocm_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    rocm_smi_of(text, Vendor::Amd)
}

/// `rocm-smi`'s Hygon DCUs (the rocm-smi of Hygon's DTK).
pub fn parse_rocm_smi_hygon(text: &str) -> Result<Vec<Device>, ParseError> {
    rocm_smi_of(text, Vendor::Hygon)
}

fn rocm_smi_of(text: &str, vendor: Vendor) -> Result<Vec<Device>, ParseError> {
    Ok(parse_rocm_smi_cards(text)?.into_iter().filter(|(v, _)| *v == vendor).map(|(_, d)| d).collect())
}

/// The Hygon family of a DCU rocm-smi names `name` (`Z100L`, `K100_AI`).
pub(crate) fn hygon_family(name: &str) -> Option<Family> {
    let up = name.to_ascii_uppercase();
    if up.contains("K100") {
        Some(Family::DcuK100)
    } else if up.contains("Z100") {
        Some(Family::DcuZ100)
    } else {
        None
    }
}

/// The AMD family of a card: from its gfx target where rocm-smi prints it
/// (gfx90a is CDNA 2, gfx94x CDNA 3, gfx11xx RDNA 3), else from the
/// Instinct name.
pub(crate) fn amd_family(gfx: Option<&str>, name: &str) -> Option<Family> {
    match gfx.map(|g| g.trim().to_ascii_lowercase()) {
        Some(g) if g == "gfx90a" => return Some(Family::Cdna2),
        Some(g) if g.starts_with("gfx94") => return Some(Family::Cdna3),
        Some(g) if g.starts_with("gfx11") => return Some(Family::Rdna3),
        _ => {}
    }
    let up = name.to_ascii_uppercase();
    if up.contains("MI300") || up.contains("MI325") {
        Some(Family::Cdna3)
    } else if up.contains("MI250") || up.contains("MI210") {
        Some(Family::Cdna2)
    } else {
        None
    }
}

/// Parses `ixsmi --format=csv,noheader --query-gpu=index,name,memory.total,…`
/// (Iluvatar CoreX's nvidia-smi-like tool): one line per GPU, `<index>,
/// <name>, <total> MiB, …`; columns after the third are not read.
pub fn parse_ixsmi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "ixsmi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let mut devices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let [index, name, memory, ..] = f[..] else {
            return Err(err(
                n,
                format!("expected `<index>, <name>, <memory.total> MiB, …`, found {:?}", line.trim()),
            ));
        };
        let index = index
            .parse::<u32>()
            .map_err(|_| err(n, format!("expected a GPU index first, found {index:?}")))?;
        if name.is_empty() {
            return Err(err(n, format!("GPU {index} has no name")));
        }
        let memory_mib = memory
            .strip_suffix("MiB")
            .and_then(|m| m.trim().parse::<f64>().ok())
            .ok_or_else(|| err(n, format!("expected memory as `<N> MiB`, found {memory:?}")))?;
        let up = name.to_ascii_uppercase();
        let family = if up.contains("MR-V") {
            Some(Family::Zhikai)
        } else if up.contains("BI-V") {
            Some(Family::Tiangai)
        } else {
            None
        };
        devices.push(Device { index, name: name.to_string(), memory_mib, family });
    }
    if devices.is_empty() {
        return Err(err(0, "no GPU lines".into()));
    }
    Ok(devices)
}

/// Parses `mthreads-gmi`'s summary table (Moore Threads): after the
/// header row `ID   Name | PCIe | %GPU  Mem`, each GPU is a row `<id>
/// <name> | <bus id> | <util>  <used>MiB(<total>MiB)` followed by
/// indented continuation rows, which are not read.
pub fn parse_mthreads_gmi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "mthreads-gmi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let mut header = false;
    let mut devices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if !header {
            header = line.starts_with("ID") && line.contains("Name") && line.contains("Mem");
            continue;
        }
        // Continuation rows are indented; separators start with `+`.
        if line.is_empty() || line.starts_with(char::is_whitespace) || line.starts_with(['+', '-']) {
            continue;
        }
        let cols: Vec<&str> = line.split('|').collect();
        let (Some(first), Some(last)) = (cols.first(), cols.last()) else { continue };
        let mut words = first.split_whitespace();
        let index = words
            .next()
            .and_then(|w| w.parse::<u32>().ok())
            .ok_or_else(|| err(n, format!("expected `<ID> <name> | …`, found {:?}", line.trim_end())))?;
        let name = words.collect::<Vec<_>>().join(" ");
        if name.is_empty() || cols.len() < 3 {
            return Err(err(
                n,
                format!("GPU {index}: expected `<ID> <name> | <PCIe> | <Mem>`, found {:?}", line.trim_end()),
            ));
        }
        let total = last
            .split_once('(')
            .and_then(|(_, t)| t.trim_end().strip_suffix("MiB)"))
            .and_then(|t| t.trim().parse::<f64>().ok())
            .ok_or_else(|| {
                err(
                    n,
                    format!(
                        "GPU {index}: expected memory as `<used>MiB(<total>MiB)`, found {:?}",
                        last.trim()
                    ),
                )
            })?;
        let family = name.to_ascii_uppercase().starts_with("MTT S").then_some(Family::MttS);
        devices.push(Device { index, name, memory_mib: total, family });
    }
    if !header {
        return Err(err(0, "no GPU table (no `ID   Name | PCIe | … Mem` header row)".into()));
    }
    Ok(devices)
}

/// Parses `mx-smi`'s summary table (MetaX): after the `GPU  NAME |
/// Bus-id | GPU-Util` header, each GPU is a row `| <gpu> <name> | <bus id>
/// | <util> |` followed by `| <temp> <power> | <used>/<total> MiB | |`.
/// The process table that may follow is not read.
pub fn parse_mx_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "mx-smi";
    let table = TwoRowTable {
        tool: TOOL,
        header: |c| c[0].starts_with("GPU") && c[0].contains("NAME") && c[1].starts_with("Bus-id"),
        header_shape: "GPU NAME | Bus-id",
        skip: |c| c[0].starts_with("Temp") || c[0].starts_with('=') || c[0].starts_with('-'),
        end: |c| c[0].contains("Process") || c[0].starts_with("PID"),
    };
    let (pairs, cut) = table.pairs(text)?;
    let mut devices = Vec::new();
    for ((n, first), (m, c)) in &pairs {
        let (gpu, name) = index_and_name(TOOL, *n, "GPU", first[0])?;
        let total = usage_pairs(c[1]).first().map(|p| p.1).ok_or_else(|| ParseError {
            tool: TOOL,
            line: *m,
            what: format!("GPU {gpu}: expected memory as `<used>/<total> MiB`, found {:?}", c[1]),
        })?;
        let family = name.to_ascii_uppercase().contains("C500").then_some(Family::Xiyun);
        devices.push(Device { index: gpu, name, memory_mib: total, family });
    }
    if let Some((n, c)) = cut {
        let (gpu, _) = index_and_name(TOOL, n, "GPU", c[0])?;
        return Err(ParseError { tool: TOOL, line: n, what: format!("GPU {gpu} has no memory row") });
    }
    Ok(devices)
}
