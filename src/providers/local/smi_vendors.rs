//! Parsers of the remaining vendors' tools whose output Canopy has a
//! public sample of (`tests/fixtures/accel/`, its README names each
//! source): `amd-smi static --json` (AMD), `hl-smi -Q … -f csv,noheader`
//! (Intel Gaudi), `xpu-smi discovery -j` (Intel Data Center GPUs),
//! `cnmon` (Cambricon) and `efsmi` (Enflame). Each reads the invocation
//! [`super::discover`] runs, as the sample shows it; anything else is a
//! [`ParseError`] naming the tool and the line.

use super::smi::{Device, ParseError, TwoRowTable, index_and_name};
use super::smi_gpus::amd_family;
use crate::accel::Family;
use serde_json::Value;

/// MiB in a byte.
const MIB: f64 = 1024.0 * 1024.0;

/// The 1-based line of the first occurrence of `needle` at or after line
/// `from` (1-based), or `from` when it is not there.
fn line_of(text: &str, from: usize, needle: &str) -> usize {
    text.lines()
        .enumerate()
        .skip(from.saturating_sub(1))
        .find(|(_, l)| l.contains(needle))
        .map_or(from, |(i, _)| i + 1)
}

/// Parses `amd-smi static --json` (ROCm 6.4 and later): `{"gpu_data":
/// [...]}`, one object per GPU with `gpu` (its index), `asic.market_name`,
/// `asic.target_graphics_version` (`gfx90a`) and `vram.size` as `{"value":
/// 65520, "unit": "MB"}` (amd-smi's MB are MiB: 65520 on a 64 GB MI210).
/// Every other key is ignored.
pub fn parse_amd_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "amd-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let value: Value = serde_json::from_str(text).map_err(|e| err(e.line(), format!("not JSON: {e}")))?;
    let gpus = value.get("gpu_data").and_then(Value::as_array).ok_or_else(|| {
        err(1, "expected an object with a `gpu_data` list (was `static --json` given?)".into())
    })?;
    let mut devices = Vec::new();
    let mut at = 1;
    for gpu in gpus {
        let index = gpu
            .get("gpu")
            .and_then(Value::as_u64)
            .and_then(|i| u32::try_from(i).ok())
            .ok_or_else(|| err(line_of(text, at, "\"gpu\""), "a GPU without its `gpu` index".into()))?;
        at = line_of(text, at, &format!("\"gpu\": {index}"));
        let asic = gpu.get("asic");
        let name = asic
            .and_then(|a| a.get("market_name"))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|n| !n.is_empty() && *n != "N/A")
            .ok_or_else(|| err(at, format!("GPU {index} has no `asic.market_name`")))?
            .to_string();
        let size = gpu.get("vram").and_then(|v| v.get("size"));
        let (amount, unit) = (
            size.and_then(|s| s.get("value")).and_then(Value::as_f64),
            size.and_then(|s| s.get("unit")).and_then(Value::as_str),
        );
        let memory_mib = match (amount, unit) {
            (Some(v), Some("MB")) => v,
            (Some(_), Some(other)) => {
                let line = line_of(text, at, "\"size\"");
                return Err(err(line, format!("GPU {index}: `vram.size` in {other:?}, expected MB")));
            }
            _ => {
                return Err(err(
                    at,
                    format!("GPU {index} has no `vram.size` `{{\"value\": N, \"unit\": \"MB\"}}`"),
                ));
            }
        };
        let gfx = asic.and_then(|a| a.get("target_graphics_version")).and_then(Value::as_str);
        let family = amd_family(gfx, &name);
        devices.push(Device { index, name, memory_mib, family });
    }
    Ok(devices)
}

/// The fields Canopy asks `hl-smi -Q` for, in order; [`parse_hl_smi`]
/// reads `index`, `name` and `memory.total`.
pub const HL_SMI_FIELDS: &str = "index,uuid,name,driver_version,memory.total,memory.used,memory.free,\
                                 power.draw,power.max,temperature.aip,utilization.aip";

/// Where `index`, `name` and `memory.total` are in [`HL_SMI_FIELDS`].
const HL_SMI_COLUMNS: (usize, usize, usize) = (0, 2, 4);

/// Parses `hl-smi -Q <HL_SMI_FIELDS> --format csv,noheader` (Intel Gaudi):
/// one line per device, its fields in that order, memory as `<N> MiB`.
pub fn parse_hl_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "hl-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let fields: Vec<&str> = HL_SMI_FIELDS.split(',').collect();
    let (index_at, name_at, memory_at) = HL_SMI_COLUMNS;
    let mut devices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != fields.len() {
            return Err(err(
                n,
                format!(
                    "expected the {} fields `{HL_SMI_FIELDS}`, found {}: {:?}",
                    fields.len(),
                    f.len(),
                    line.trim()
                ),
            ));
        }
        let index = f[index_at]
            .parse::<u32>()
            .map_err(|_| err(n, format!("expected a device index, found {:?}", f[index_at])))?;
        let name = f[name_at];
        if name.is_empty() {
            return Err(err(n, format!("device {index} has no name")));
        }
        let memory_mib =
            f[memory_at].strip_suffix("MiB").and_then(|m| m.trim().parse::<f64>().ok()).ok_or_else(|| {
                err(
                    n,
                    format!("device {index}: expected memory.total as `<N> MiB`, found {:?}", f[memory_at]),
                )
            })?;
        devices.push(Device { index, name: name.to_string(), memory_mib, family: gaudi_family(name) });
    }
    if devices.is_empty() {
        return Err(err(0, "no device lines".into()));
    }
    Ok(devices)
}

/// Gaudi generations by board name: HL-2xx (HL-225) are Gaudi 2, HL-3xx
/// (HL-325L, HL-338) Gaudi 3; the first Gaudi (HL-205) has no family here.
fn gaudi_family(name: &str) -> Option<Family> {
    let model = name.trim().to_ascii_uppercase();
    let digits = model.strip_prefix("HL-")?;
    match digits.get(..2)? {
        "22" => Some(Family::Gaudi2),
        "32" | "33" => Some(Family::Gaudi3),
        _ => None,
    }
}

/// One device of `xpu-smi discovery -j`: its id and name. The list does
/// not carry memory; [`parse_xpu_smi_device`] reads it from `discovery -d
/// <id> -j`.
#[derive(Debug, Clone, PartialEq)]
pub struct XpuListed {
    pub id: u32,
    pub name: String,
}

/// Parses `xpu-smi discovery -j` (Intel's data-centre GPUs): `{"device_list":
/// [{"device_id": 0, "device_name": "Intel(R) Data Center GPU Max 1100",
/// …}, …]}`.
pub fn parse_xpu_smi_list(text: &str) -> Result<Vec<XpuListed>, ParseError> {
    const TOOL: &str = "xpu-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let value: Value = serde_json::from_str(text).map_err(|e| err(e.line(), format!("not JSON: {e}")))?;
    let list = value.get("device_list").and_then(Value::as_array).ok_or_else(|| {
        err(1, "expected an object with a `device_list` (was `discovery -j` given?)".into())
    })?;
    let mut at = 1;
    let mut devices = Vec::new();
    for d in list {
        let id = xpu_id(d)
            .ok_or_else(|| err(line_of(text, at, "\"device_id\""), "a device without `device_id`".into()))?;
        at = line_of(text, at, &format!("\"device_id\": {id}"));
        let name = d
            .get("device_name")
            .and_then(Value::as_str)
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| err(at, format!("device {id} has no `device_name`")))?;
        devices.push(XpuListed { id, name: name.trim().to_string() });
    }
    Ok(devices)
}

fn xpu_id(d: &Value) -> Option<u32> {
    d.get("device_id").and_then(Value::as_u64).and_then(|i| u32::try_from(i).ok())
}

/// Parses `xpu-smi discovery -d <id> -j`: the device's `device_id`,
/// `device_name` and `memory_physical_size_byte` (a string of bytes in the
/// sample; a number is read too). Returns the device, memory in MiB.
pub fn parse_xpu_smi_device(text: &str) -> Result<Device, ParseError> {
    const TOOL: &str = "xpu-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let d: Value = serde_json::from_str(text).map_err(|e| err(e.line(), format!("not JSON: {e}")))?;
    let id = xpu_id(&d).ok_or_else(|| err(1, "no `device_id` (was `discovery -d <id> -j` given?)".into()))?;
    let name = d
        .get("device_name")
        .and_then(Value::as_str)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| err(line_of(text, 1, "\"device_id\""), format!("device {id} has no `device_name`")))?
        .trim()
        .to_string();
    let raw = d.get("memory_physical_size_byte");
    let bytes = raw
        .and_then(|v| v.as_f64().or_else(|| v.as_str().and_then(|s| s.trim().parse::<f64>().ok())))
        .ok_or_else(|| {
            err(
                line_of(text, 1, "\"memory_physical_size_byte\""),
                format!(
                    "device {id}: expected `memory_physical_size_byte` as a number of bytes, found {raw:?}"
                ),
            )
        })?;
    let family = xe_family(&name);
    Ok(Device { index: id, name, memory_mib: bytes / MIB, family })
}

/// The devices of `xpu-smi discovery -j`, each with the memory of the
/// detail (`discovery -d <id> -j`) of the first listed device of its name:
/// devices of one model have one memory size, so Canopy asks once per
/// model. `details` holds those answers; a model without one is an error.
pub fn xpu_smi_devices(list: &[XpuListed], details: &[Device]) -> Result<Vec<Device>, ParseError> {
    list.iter()
        .map(|l| {
            let detail = details.iter().find(|d| d.name == l.name).ok_or_else(|| ParseError {
                tool: "xpu-smi",
                line: 0,
                what: format!("no `discovery -d {} -j` answer for {:?}", l.id, l.name),
            })?;
            Ok(Device {
                index: l.id,
                name: l.name.clone(),
                memory_mib: detail.memory_mib,
                family: detail.family,
            })
        })
        .collect()
}

/// The ids whose detail [`xpu_smi_devices`] needs: the first of each name.
pub fn xpu_smi_detail_ids(list: &[XpuListed]) -> Vec<u32> {
    let mut ids = Vec::new();
    for (i, l) in list.iter().enumerate() {
        if !list[..i].iter().any(|e| e.name == l.name) {
            ids.push(l.id);
        }
    }
    ids
}

/// Intel's Data Center GPU Max series is Xe-HPC; Flex and Arc GPUs have no
/// family here.
fn xe_family(name: &str) -> Option<Family> {
    name.contains("Data Center GPU Max").then_some(Family::XeHpc)
}

/// `<used> MiB/ <total> MiB` (cnmon's Memory-Usage cell): the total.
fn total_after_slash(cell: &str) -> Option<f64> {
    let (_, total) = cell.split_once('/')?;
    total.trim().strip_suffix("MiB")?.trim().parse().ok()
}

/// Parses `cnmon` (Cambricon, no arguments): after the `Card VF Name
/// Firmware | Bus-Id | …` header, each MLU is a row `| <card> <vf> <name>
/// <firmware> | <bus id> | … |` followed by `| <fan> <temp> <power> |
/// <used> MiB/ <total> MiB | … |`. The process table is not read.
pub fn parse_cnmon(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "cnmon";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let table = TwoRowTable {
        tool: TOOL,
        header: |c| c[0].starts_with("Card") && c[0].contains("Name"),
        header_shape: "Card VF Name Firmware | Bus-Id",
        skip: |c| c[0].starts_with("Fan") || c[0].starts_with('='),
        end: |c| c.first().is_some_and(|c| c.starts_with("Processes")),
    };
    let (pairs, cut) = table.pairs(text)?;
    let card_of = |(n, c): &(usize, Vec<&str>)| -> Result<(u32, String), ParseError> {
        let words: Vec<&str> = c[0].split_whitespace().collect();
        let card = words
            .first()
            .and_then(|w| w.parse::<u32>().ok())
            .ok_or_else(|| err(*n, format!("expected `<card> <vf> <name> <firmware>`, found {:?}", c[0])))?;
        // `<card> <vf> <name…> <firmware>`: the name is between.
        if words.len() < 4 {
            return Err(err(
                *n,
                format!("MLU {card}: expected `<card> <vf> <name> <firmware>`, found {:?}", c[0]),
            ));
        }
        Ok((card, words[2..words.len() - 1].join(" ")))
    };
    let mut devices = Vec::new();
    for (first, (n, c)) in &pairs {
        let (card, name) = card_of(first)?;
        let total = total_after_slash(c[1]).ok_or_else(|| {
            err(*n, format!("MLU {card}: expected memory as `<used> MiB/ <total> MiB`, found {:?}", c[1]))
        })?;
        let up = name.to_ascii_uppercase();
        let family = if up.contains("MLU370") {
            Some(Family::Mlu370)
        } else if up.contains("MLU590") {
            Some(Family::Mlu590)
        } else {
            None
        };
        devices.push(Device { index: card, name, memory_mib: total, family });
    }
    if let Some(row) = cut {
        let (card, _) = card_of(&row)?;
        return Err(err(row.0, format!("MLU {card} has no memory row")));
    }
    Ok(devices)
}

/// Parses `efsmi` (Enflame, no arguments): after the `DEV NAME | FW VER |
/// BUS-ID ECC` header, each GCU is a row `| <dev> <name> | <firmware> |
/// <bus id> <ecc> |` followed by `| <temp> <dpm> <power> | <mem>MiB
/// <virt> | <used> <sn> |`.
pub fn parse_efsmi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "efsmi";
    let table = TwoRowTable {
        tool: TOOL,
        header: |c| c[0].starts_with("DEV") && c[0].contains("NAME"),
        header_shape: "DEV NAME | FW VER | BUS-ID",
        skip: |c| c[0].starts_with("TEMP"),
        end: |_| false,
    };
    let (pairs, cut) = table.pairs(text)?;
    let mut devices = Vec::new();
    for ((n, first), (m, c)) in &pairs {
        let (dev, name) = index_and_name(TOOL, *n, "GCU", first[0])?;
        let mem = c[1].split_whitespace().next().unwrap_or_default();
        let total =
            mem.strip_suffix("MiB").and_then(|m| m.parse::<f64>().ok()).ok_or_else(|| ParseError {
                tool: TOOL,
                line: *m,
                what: format!("GCU {dev}: expected memory as `<N>MiB` first in {:?}", c[1]),
            })?;
        devices.push(Device { index: dev, family: enflame_family(&name), name, memory_mib: total });
    }
    if let Some((n, c)) = cut {
        let (dev, _) = index_and_name(TOOL, n, "GCU", c[0])?;
        return Err(ParseError { tool: TOOL, line: n, what: format!("GCU {dev} has no memory row") });
    }
    Ok(devices)
}

/// Enflame's lines: S60 is the inference card, T10/T20/T21 the training
/// cards; efsmi prints them with the maker's name (`Enflame S60`).
fn enflame_family(name: &str) -> Option<Family> {
    let model = name.trim().to_ascii_uppercase();
    let model = model.strip_prefix("ENFLAME ").unwrap_or(&model);
    if model.starts_with("S6") {
        Some(Family::EnflameS)
    } else if model.starts_with("T1") || model.starts_with("T2") {
        Some(Family::EnflameT)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::discover::accelerator;
    use super::*;
    use crate::accel::Vendor;
    use proptest::prelude::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/accel/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// (vendor, model, family, GB, count) of the pool a host's devices make.
    fn pool(vendor: Vendor, d: &[Device]) -> (Vendor, String, Family, f64, u32) {
        let (a, n) = accelerator(vendor, d).expect("an accelerator");
        (a.vendor, a.model, a.family, a.memory_gb, n)
    }

    #[test]
    fn amd_smi_static_json_lists_the_mi210_with_its_vram_and_gfx_family() {
        let text = fixture("amd-smi-static-mi210.json");
        let d = parse_amd_smi(&text).unwrap();
        assert_eq!(
            d,
            [Device {
                index: 0,
                name: "AMD Instinct MI210".into(),
                memory_mib: 65520.0,
                family: Some(Family::Cdna2)
            }]
        );
        assert_eq!(pool(Vendor::Amd, &d), (Vendor::Amd, "AMD Instinct MI210".into(), Family::Cdna2, 64.0, 1));
        // What goes wrong says where.
        let e = parse_amd_smi(&text.replace("\"MB\"", "\"GB\"")).unwrap_err();
        assert_eq!((e.tool, e.line), ("amd-smi", 144), "{e}");
        assert!(e.to_string().contains("\"GB\""), "{e}");
        let e = parse_amd_smi(&text.replacen("\"market_name\"", "\"name\"", 1)).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(parse_amd_smi("[]").unwrap_err().to_string().contains("gpu_data"));
        let cut = text.lines().take(40).collect::<Vec<_>>().join("\n");
        assert!(parse_amd_smi(&cut).unwrap_err().to_string().contains("not JSON"));
    }

    #[test]
    fn hl_smi_csv_lists_gaudi3_boards_as_128_gb_gaudi3() {
        let text = fixture("hl-smi-hl325l.csv");
        let d = parse_hl_smi(&text).unwrap();
        assert_eq!(d.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1]);
        assert!(
            d.iter()
                .all(|x| x.name == "HL-325L" && x.memory_mib == 131072.0 && x.family == Some(Family::Gaudi3)),
            "{d:?}"
        );
        assert_eq!(
            pool(Vendor::Intel, &d),
            (Vendor::Intel, "Gaudi3 HL-325L".into(), Family::Gaudi3, 128.0, 2)
        );
        assert_eq!(crate::fleet::throughput::canonical("Gaudi3 HL-325L"), Some("GAUDI3"));
        assert_eq!(crate::accel::devices::of(Vendor::Intel, Some(Family::Gaudi3)).name, "intel-gaudi");
        assert_eq!(gaudi_family("HL-225"), Some(Family::Gaudi2));
        assert_eq!(gaudi_family("HL-205"), None, "the first Gaudi has no family");
        let e = parse_hl_smi(&text.replacen("131072 MiB", "128 GiB", 1)).unwrap_err();
        assert_eq!((e.tool, e.line), ("hl-smi", 1), "{e}");
        let e = parse_hl_smi(&text.replace(", 0 %", "")).unwrap_err();
        assert!(e.to_string().contains("expected the 11 fields"), "{e}");
        assert_eq!(parse_hl_smi("").unwrap_err().line, 0);
        let fields: Vec<&str> = HL_SMI_FIELDS.split(',').collect();
        let (i, n, m) = HL_SMI_COLUMNS;
        assert_eq!((fields[i], fields[n], fields[m]), ("index", "name", "memory.total"));
    }

    #[test]
    fn xpu_smi_discovery_lists_max_1100s_with_the_memory_of_their_detail() {
        let list = parse_xpu_smi_list(&fixture("xpu-smi-discovery-max1100.json")).unwrap();
        let name = "Intel(R) Data Center GPU Max 1100";
        assert_eq!(list, [XpuListed { id: 0, name: name.into() }, XpuListed { id: 1, name: name.into() }]);
        // One detail per model is asked for.
        assert_eq!(xpu_smi_detail_ids(&list), [0]);
        let detail = parse_xpu_smi_device(&fixture("xpu-smi-discovery-d0-max1100.json")).unwrap();
        assert_eq!(
            detail,
            Device {
                index: 0,
                name: name.into(),
                memory_mib: 51522830336.0 / MIB,
                family: Some(Family::XeHpc)
            }
        );
        let d = xpu_smi_devices(&list, std::slice::from_ref(&detail)).unwrap();
        assert_eq!(d.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(pool(Vendor::Intel, &d), (Vendor::Intel, name.into(), Family::XeHpc, 48.0, 2));
        assert_eq!(crate::accel::devices::of(Vendor::Intel, Some(Family::XeHpc)).name, "intel-gpu");
        let e = xpu_smi_devices(&list, &[]).unwrap_err();
        assert!(e.to_string().contains("discovery -d 0 -j"), "{e}");
        let e = parse_xpu_smi_device(
            &fixture("xpu-smi-discovery-d0-max1100.json").replace("\"51522830336\"", "\"N/A\""),
        )
        .unwrap_err();
        assert_eq!((e.tool, e.line), ("xpu-smi", 22), "{e}");
        assert!(parse_xpu_smi_list("{}").unwrap_err().to_string().contains("device_list"));
    }

    #[test]
    fn cnmon_table_lists_mlu370_x8_cards_with_their_memory() {
        let text = fixture("cnmon-mlu370-x8.txt");
        let d = parse_cnmon(&text).unwrap();
        assert_eq!(
            d,
            [0, 1].map(|index| Device {
                index,
                name: "MLU370-X8".into(),
                memory_mib: 23374.0,
                family: Some(Family::Mlu370)
            })
        );
        // cnmon reports each card with its memory as 23374 MiB: 24 GB.
        assert_eq!(
            pool(Vendor::Cambricon, &d),
            (Vendor::Cambricon, "MLU370-X8".into(), Family::Mlu370, 24.0, 2)
        );
        let e = parse_cnmon(&text.replacen("0 MiB/ 23374 MiB", "0 MiB 23374 MiB ", 1)).unwrap_err();
        assert_eq!((e.tool, e.line), ("cnmon", 8), "{e}");
        let cut = text.lines().take(10).collect::<Vec<_>>().join("\n");
        assert_eq!(parse_cnmon(&cut).unwrap_err().line, 10);
        assert_eq!(parse_cnmon("cnmon: command failed\n").unwrap_err().line, 0);
    }

    #[test]
    fn efsmi_table_lists_s60_gcus_with_their_memory() {
        let text = fixture("efsmi-s60.txt");
        let d = parse_efsmi(&text).unwrap();
        assert_eq!(
            d,
            [0, 1].map(|index| Device {
                index,
                name: "Enflame S60".into(),
                memory_mib: 49120.0,
                family: Some(Family::EnflameS)
            })
        );
        assert_eq!(
            pool(Vendor::Enflame, &d),
            (Vendor::Enflame, "Enflame S60".into(), Family::EnflameS, 48.0, 2)
        );
        assert_eq!(enflame_family("T20"), Some(Family::EnflameT));
        let e = parse_efsmi(&text.replacen("49120MiB", "48G", 1)).unwrap_err();
        assert_eq!((e.tool, e.line), ("efsmi", 14), "{e}");
        let cut = text.lines().take(13).collect::<Vec<_>>().join("\n");
        assert_eq!(parse_efsmi(&cut).unwrap_err().line, 13);
        assert_eq!(parse_efsmi("efsmi: no devices\n").unwrap_err().line, 0);
    }

    const SAMPLES: [&str; 6] = [
        "amd-smi-static-mi210.json",
        "hl-smi-hl325l.csv",
        "xpu-smi-discovery-max1100.json",
        "xpu-smi-discovery-d0-max1100.json",
        "cnmon-mlu370-x8.txt",
        "efsmi-s60.txt",
    ];

    /// Output cut after a device's first row: an error naming the device
    /// and the line, from each tool that prints two rows per device.
    #[test]
    fn two_row_tables_cut_after_a_naming_row_say_which_device_lost_its_memory() {
        type Parse = fn(&str) -> Result<Vec<Device>, ParseError>;
        let cases: [(Parse, &str, &str, &str); 3] = [
            (parse_cnmon, "cnmon-mlu370-x8.txt", "| 1 ", "MLU 1 has no memory row"),
            (parse_efsmi, "efsmi-s60.txt", "| 1 ", "GCU 1 has no memory row"),
            (super::super::smi_gpus::parse_mx_smi, "mx-smi-c500.txt", "| 1 ", "GPU 1 has no memory row"),
        ];
        for (parse, file, row, want) in cases {
            let text = fixture(file);
            let at = text.find(row).unwrap_or_else(|| panic!("{file}: no row {row:?}"));
            let end = at + text[at..].find('\n').unwrap();
            let line = text[..at].lines().count() + 1;
            let e = parse(&text[..end]).expect_err(file);
            assert_eq!((e.what.as_str(), e.line), (want, line), "{file}");
        }
    }

    fn parse_all(s: &str) {
        let _ = parse_amd_smi(s);
        let _ = parse_hl_smi(s);
        let _ = parse_xpu_smi_list(s);
        let _ = parse_xpu_smi_device(s);
        let _ = parse_cnmon(s);
        let _ = parse_efsmi(s);
    }

    proptest! {
        #[test]
        fn parsers_never_panic_on_garbage(s in "\\PC*") {
            parse_all(&s);
        }

        #[test]
        fn parsers_never_panic_on_mangled_samples(cut in 0usize..4000, junk in "[|/ 0-9a-zA-Z\n\":{}\\[\\],-]{0,40}") {
            for name in SAMPLES {
                let text = fixture(name);
                let at = text.char_indices().map(|(i, _)| i).nth(cut % text.chars().count()).unwrap_or(0);
                parse_all(&format!("{}{junk}{}", &text[..at], &text[at..]));
            }
        }
    }
}
