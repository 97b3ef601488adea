//! Accelerators other than NVIDIA's, found through their vendors' tools:
//! `npu-smi info` (Huawei Ascend) and `xpu_smi` (Kunlunxin), parsed here;
//! `rocm-smi --json` (AMD, and Hygon through the rocm-smi of its DTK),
//! `ixsmi`'s CSV (Iluvatar CoreX), `mthreads-gmi` (Moore Threads) and
//! `mx-smi` (MetaX), parsed in [`super::smi_gpus`]; `amd-smi static
//! --json` (AMD), `hl-smi` (Intel Gaudi), `xpu-smi discovery -j` (Intel
//! data-centre GPUs), `cnmon` (Cambricon) and `efsmi` (Enflame), parsed in
//! [`super::smi_vendors`]. The parsers read what these tools print as
//! published samples show it (`tests/fixtures/accel/`); the table of tools
//! per vendor is [`crate::accel::devices`]. Tools whose output Canopy has
//! no sample of (`hy-smi`) are not run.
//!
//! Parsing is pure and total: unexpected output is a [`ParseError`] that
//! names the tool and the line, never a panic. Running the tools is
//! [`discover`]'s, which logs a failure and offers no accelerator.

pub use super::smi::{Device, ParseError};
use super::smi::{cells, usage_pairs};
pub use super::smi_gpus::{
    parse_ixsmi, parse_mthreads_gmi, parse_mx_smi, parse_rocm_smi, parse_rocm_smi_hygon,
};
use super::smi_vendors::HL_SMI_FIELDS;
pub use super::smi_vendors::{parse_amd_smi, parse_cnmon, parse_efsmi, parse_hl_smi};
use crate::accel::{ComputeCapability, Family, Vendor};
use crate::fleet::Accelerator;
use std::time::Duration;

/// Parses `npu-smi info`: each NPU is a row `<npu> <name> | <health> |
/// …` followed by one row per chip `<chip> [<device>] | <bus-id> |
/// <aicore> <used> / <total> [<hbm used> / <hbm total>]`. Each chip is
/// one device; its memory is the HBM total where the table has that
/// column. The process table that follows is not read.
pub fn parse_npu_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "npu-smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let mut hbm: Option<bool> = None;
    let mut npu_row: Option<(u32, String)> = None;
    let mut devices: Vec<Device> = Vec::new();
    let mut npus: Vec<u32> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.contains("Process id") || line.contains("Process name") {
            break;
        }
        let Some(c) = cells(line) else { continue };
        if c.len() != 3 {
            continue; // the version banner, or a separator
        }
        if c[0].starts_with("NPU") && c[1].starts_with("Health") {
            continue;
        }
        if c[0].starts_with("Chip") && c[1].starts_with("Bus-Id") {
            hbm = Some(c[2].contains("HBM-Usage"));
            continue;
        }
        let Some(hbm) = hbm else {
            return Err(err(n, format!("a table row before the `Chip | Bus-Id` header: {:?}", line.trim())));
        };
        let numbers: Vec<&str> = c[0].split_whitespace().collect();
        let first = numbers.first().and_then(|s| s.parse::<u32>().ok());
        if npu_row.is_none() {
            // Rows alternate: an NPU row `<npu> <name> | <health> | …`,
            // then its chip row.
            let npu = first.ok_or_else(|| err(n, format!("expected `<NPU id> <name>`, found {:?}", c[0])))?;
            let name = numbers[1..].join(" ");
            if name.is_empty() {
                return Err(err(n, format!("NPU {npu} has no name in {:?}", c[0])));
            }
            npu_row = Some((npu, name));
            continue;
        }
        let Some((npu, name)) = npu_row.take() else {
            return Err(err(n, format!("a chip row without its NPU row: {:?}", line.trim())));
        };
        if first.is_none() {
            return Err(err(n, format!("expected `<chip id>` first, found {:?}", c[0])));
        }
        let pairs = usage_pairs(c[2]);
        let total = if hbm { pairs.get(1) } else { pairs.first() }.map(|p| p.1).ok_or_else(|| {
            let want =
                if hbm { "a Memory-Usage and an HBM-Usage `used / total`" } else { "a `used / total`" };
            err(n, format!("expected {want} in {:?}", c[2]))
        })?;
        npus.push(npu);
        devices.push(Device { index: devices.len() as u32, name, memory_mib: total, family: None });
    }
    if hbm.is_none() {
        return Err(err(0, "no device table (no `Chip | Bus-Id` header line)".into()));
    }
    if let Some((npu, _)) = npu_row {
        return Err(err(0, format!("NPU {npu} has no chip row")));
    }
    // A node whose NPUs carry two chips each is an A3 node (the table may
    // end mid-NPU when cut, so one NPU with two chips decides).
    let multi_chip = npus.iter().any(|n| npus.iter().filter(|&x| x == n).count() >= 2);
    for d in &mut devices {
        d.family = ascend_family(&d.name, multi_chip);
    }
    Ok(devices)
}

/// The Ascend family of a chip `npu-smi` names `name`, on a node whose
/// NPUs carry several chips (`multi_chip`) or one. A3 nodes (Ascend 910C)
/// print the bare `Ascend910` with two chips per NPU; A2 nodes print the
/// 910B variant (`910B3`, `910B4-1`).
fn ascend_family(name: &str, multi_chip: bool) -> Option<Family> {
    let up = name.to_ascii_uppercase();
    if up.contains("910B") {
        Some(Family::Ascend910b)
    } else if up.contains("910C") || up == "ASCEND910" && multi_chip {
        Some(Family::Ascend910c)
    } else {
        None
    }
}

/// Parses `xpu_smi`'s DEVICES table: a header row naming the columns
/// (`Model`, `INODE`, `Memory`, …) and one row per device, its memory as
/// `<used> / <total> MB` and its node as `/dev/xpu<N>`.
pub fn parse_xpu_smi(text: &str) -> Result<Vec<Device>, ParseError> {
    const TOOL: &str = "xpu_smi";
    let err = |line, what: String| ParseError { tool: TOOL, line, what };
    let mut header: Option<(usize, usize, Option<usize>, usize)> = None; // (cells, model, inode, memory)
    let mut devices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let Some(c) = cells(line) else { continue };
        let Some((width, model, inode, memory)) = header else {
            let col = |name: &str| c.iter().position(|x| *x == name);
            if let (Some(model), Some(memory)) = (col("Model"), col("Memory")) {
                header = Some((c.len(), model, col("INODE"), memory));
            }
            continue;
        };
        if c.len() != width {
            return Err(err(n, format!("a device row of {} columns under a header of {width}", c.len())));
        }
        let total = usage_pairs(c[memory])
            .first()
            .map(|p| p.1)
            .ok_or_else(|| err(n, format!("expected memory as `used / total MB`, found {:?}", c[memory])))?;
        let index = match inode.map(|k| c[k]) {
            Some(node) => node
                .strip_prefix("/dev/xpu")
                .and_then(|k| k.parse().ok())
                .ok_or_else(|| err(n, format!("expected a device node `/dev/xpu<N>`, found {node:?}")))?,
            None => devices.len() as u32,
        };
        let name = c[model].to_string();
        if name.is_empty() {
            return Err(err(n, "a device row without a model".into()));
        }
        let family = kunlun_family(&name);
        devices.push(Device { index, name, memory_mib: total, family });
    }
    if header.is_none() {
        return Err(err(0, "no DEVICES table (no header row naming `Model` and `Memory`)".into()));
    }
    Ok(devices)
}

/// Kunlunxin generations: R200/R300 are the second, P800 the third; the
/// first (K100/K200) has no family here.
fn kunlun_family(model: &str) -> Option<Family> {
    let up = model.to_ascii_uppercase();
    if up.starts_with('P') && up.contains("800") {
        Some(Family::Kunlun3)
    } else if up.starts_with("R2") || up.starts_with("R3") {
        Some(Family::Kunlun2)
    } else {
        None
    }
}

/// The pool's accelerator and its count from one vendor's devices: the
/// first device with a known family, and every device of its name.
pub fn accelerator(vendor: Vendor, devices: &[Device]) -> Option<(Accelerator, u32)> {
    let Some(first) = devices.iter().find(|d| d.family.is_some()) else {
        if let Some(d) = devices.first() {
            tracing::warn!(device = %d.name, %vendor, "accelerator of no known family; not offered by the local pool");
        }
        return None;
    };
    let count = devices.iter().filter(|d| d.name == first.name).count() as u32;
    if count as usize != devices.len() {
        tracing::warn!(%vendor, "accelerators of different models on this host; the pool offers only the {count} {}", first.name);
    }
    let family = first.family?;
    let model = match vendor {
        Vendor::Huawei if !first.name.starts_with("Ascend") => format!("Ascend{}", first.name),
        // hl-smi names the board (`HL-325L`); the fleet's vocabulary and
        // the throughput table name the generation (`Gaudi3`).
        Vendor::Intel if matches!(family, Family::Gaudi2 | Family::Gaudi3) => {
            let generation = if family == Family::Gaudi2 { "Gaudi2" } else { "Gaudi3" };
            format!("{generation} {}", first.name)
        }
        _ => first.name.clone(),
    };
    Some((
        Accelerator {
            vendor,
            model,
            family,
            compute_capability: ComputeCapability::new(0, 0),
            memory_gb: super::inventory::marketed_gb(first.memory_mib),
            throughput: None,
        },
        count,
    ))
}

/// A tool's output parser.
type Parser = fn(&str) -> Result<Vec<Device>, ParseError>;

/// The tools run, in order: a host's first vendor with devices wins.
const TOOLS: &[(&str, &[&str], Vendor, Parser)] = &[
    ("npu-smi", &["info"], Vendor::Huawei, parse_npu_smi),
    ("cnmon", &[], Vendor::Cambricon, parse_cnmon),
    ("xpu_smi", &[], Vendor::Kunlunxin, parse_xpu_smi),
    ("amd-smi", &["static", "--json"], Vendor::Amd, parse_amd_smi),
    ("rocm-smi", ROCM_SMI_ARGS, Vendor::Amd, parse_rocm_smi),
    ("rocm-smi", ROCM_SMI_ARGS, Vendor::Hygon, parse_rocm_smi_hygon),
    (
        "ixsmi",
        &[
            "--format=csv,noheader",
            "--query-gpu=index,name,memory.total,memory.used,utilization.gpu,temperature.gpu",
        ],
        Vendor::Iluvatar,
        parse_ixsmi,
    ),
    ("mthreads-gmi", &[], Vendor::MooreThreads, parse_mthreads_gmi),
    ("mx-smi", &[], Vendor::Metax, parse_mx_smi),
    ("efsmi", &[], Vendor::Enflame, parse_efsmi),
    ("hl-smi", &["-Q", HL_SMI_FIELDS, "--format", "csv,noheader"], Vendor::Intel, parse_hl_smi),
];

/// AMD's rocm-smi and the one in Hygon's DTK answer the same query; it
/// runs once per host (see [`discover`]).
const ROCM_SMI_ARGS: &[&str] = &["--showproductname", "--showmeminfo", "vram", "--json"];

/// Runs `tool args`; its output, or None (logged) when it fails or hangs.
async fn run_tool(tool: &str, args: &[&str], vendor: Vendor) -> Option<String> {
    let run = tokio::process::Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(10), run).await {
        Ok(Ok(out)) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).into_owned()),
        other => {
            tracing::warn!(
                tool,
                "{tool} is installed but did not answer: {other:?}; no {vendor} accelerators offered"
            );
            None
        }
    }
}

/// Runs each vendor tool present on this host and returns the first
/// accelerator found. A tool that fails or prints what the parser cannot
/// read is logged and skipped.
pub async fn discover() -> Option<(Accelerator, u32)> {
    // Each tool invocation's output (None: it did not answer), so that two
    // vendors read from one tool (rocm-smi) run it once.
    let mut ran: Vec<(&str, &[&str], Option<String>)> = Vec::new();
    for (tool, args, vendor, parse) in TOOLS {
        if super::container::which(tool).is_none() {
            continue;
        }
        let earlier = ran.iter().find(|(t, a, _)| t == tool && a == args).map(|(_, _, out)| out.clone());
        let out = match earlier {
            Some(out) => out,
            None => {
                let out = run_tool(tool, args, *vendor).await;
                ran.push((tool, args, out.clone()));
                out
            }
        };
        let Some(text) = out else { continue };
        match parse(&text) {
            Ok(devices) => {
                if let Some(found) = accelerator(*vendor, &devices) {
                    return Some(found);
                }
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
    if super::container::which("xpu-smi").is_some() {
        match intel_gpus().await {
            Ok(devices) => return accelerator(Vendor::Intel, &devices),
            Err(e) => tracing::warn!("{e}"),
        }
    }
    None
}

/// Intel's data-centre GPUs: `xpu-smi discovery -j` lists them, and
/// `xpu-smi discovery -d <id> -j` of the first of each model says its
/// memory. A tool that does not answer is an empty list (logged).
async fn intel_gpus() -> Result<Vec<Device>, ParseError> {
    use super::smi_vendors::{parse_xpu_smi_device, parse_xpu_smi_list, xpu_smi_detail_ids, xpu_smi_devices};
    let Some(text) = run_tool("xpu-smi", &["discovery", "-j"], Vendor::Intel).await else {
        return Ok(Vec::new());
    };
    let list = parse_xpu_smi_list(&text)?;
    let mut details = Vec::new();
    for id in xpu_smi_detail_ids(&list) {
        let id = id.to_string();
        let Some(text) = run_tool("xpu-smi", &["discovery", "-d", &id, "-j"], Vendor::Intel).await else {
            return Ok(Vec::new());
        };
        details.push(parse_xpu_smi_device(&text)?);
    }
    xpu_smi_devices(&list, &details)
}

#[cfg(test)]
mod tests {
    use super::super::smi_gpus::{amd_family, hygon_family, parse_rocm_smi_cards};
    use super::*;
    use proptest::prelude::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/accel/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn npu_smi_on_an_a2_node_lists_its_910b_chips_with_their_hbm() {
        let d = parse_npu_smi(&fixture("npu-smi-910b4.txt")).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(
            d[1],
            Device {
                index: 1,
                name: "910B4-1".into(),
                memory_mib: 65536.0,
                family: Some(Family::Ascend910b)
            }
        );
        let (a, n) = accelerator(Vendor::Huawei, &d).unwrap();
        assert_eq!(
            (a.model.as_str(), a.family, a.memory_gb, n),
            ("Ascend910B4-1", Family::Ascend910b, 64.0, 2)
        );
        assert_eq!(crate::fleet::throughput::relative(&a.model), Some(2.0));
    }

    #[test]
    fn npu_smi_on_an_a3_node_counts_chips_and_reads_910c() {
        let d = parse_npu_smi(&fixture("npu-smi-a3.txt")).unwrap();
        assert_eq!(d.len(), 3, "{d:?}");
        assert!(d.iter().all(|x| x.family == Some(Family::Ascend910c) && x.memory_mib == 65536.0), "{d:?}");
        assert_eq!(d.iter().map(|x| x.index).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn npu_smi_without_hbm_reads_memory_usage_and_an_unknown_chip_is_not_offered() {
        let d = parse_npu_smi(&fixture("npu-smi-atlas200i-a2.txt")).unwrap();
        assert_eq!(d, [Device { index: 0, name: "xxx".into(), memory_mib: 10810.0, family: None }]);
        assert_eq!(accelerator(Vendor::Huawei, &d), None);
    }

    #[test]
    fn xpu_smi_lists_the_devices_table() {
        let d = parse_xpu_smi(&fixture("xpu_smi-k200.txt")).unwrap();
        assert_eq!(d, [Device { index: 0, name: "K200".into(), memory_mib: 8064.0, family: None }]);
        assert_eq!(kunlun_family("P800"), Some(Family::Kunlun3));
        assert_eq!(kunlun_family("R300"), Some(Family::Kunlun2));
    }

    #[test]
    fn rocm_smi_json_lists_cards_with_their_vram_and_gfx_family() {
        let d = parse_rocm_smi(&fixture("rocm-smi-rx7900xt.json")).unwrap();
        assert_eq!(
            d,
            [Device {
                index: 0,
                name: "Radeon RX 7900 XT".into(),
                memory_mib: 21458059264.0 / 1048576.0,
                family: Some(Family::Rdna3)
            }]
        );
        let (a, n) = accelerator(Vendor::Amd, &d).unwrap();
        assert_eq!(
            (a.model.as_str(), a.family, a.memory_gb, n),
            ("Radeon RX 7900 XT", Family::Rdna3, 20.0, 1)
        );
        assert_eq!(amd_family(Some("gfx942"), "AMD Instinct MI300X"), Some(Family::Cdna3));
        assert_eq!(amd_family(None, "AMD Instinct MI250X/MI250"), Some(Family::Cdna2));
    }

    #[test]
    fn rocm_smi_of_hygon_dtk_lists_dcus_as_hygon_not_amd() {
        let text = fixture("rocm-smi-hygon-k100-ai.json");
        let d = parse_rocm_smi_hygon(&text).unwrap();
        assert_eq!(
            d,
            [Device { index: 0, name: "K100_AI".into(), memory_mib: 65520.0, family: Some(Family::DcuK100) }]
        );
        assert_eq!(parse_rocm_smi(&text).unwrap(), [], "a Hygon DCU is not an AMD GPU");
        let (a, n) = accelerator(Vendor::Hygon, &d).unwrap();
        assert_eq!(
            (a.vendor, a.model.as_str(), a.family, a.memory_gb, n),
            (Vendor::Hygon, "K100_AI", Family::DcuK100, 64.0, 1)
        );
        // The DTK 24.04.3 sample masks its model ("DCU xxxx"): read, not offered.
        let d = parse_rocm_smi_hygon(&fixture("rocm-smi-hygon-dtk24.04.3.json")).unwrap();
        assert_eq!(d, [Device { index: 0, name: "DCU xxxx".into(), memory_mib: 65520.0, family: None }]);
        assert_eq!(accelerator(Vendor::Hygon, &d), None);
        assert_eq!(hygon_family("Z100L"), Some(Family::DcuZ100));
        assert_eq!(parse_rocm_smi_hygon(&fixture("rocm-smi-rx7900xt.json")).unwrap(), []);
    }

    #[test]
    fn ixsmi_csv_lists_iluvatar_gpus_and_the_pool_offers_the_first_known_model() {
        let d = parse_ixsmi(&fixture("ixsmi-mr-v50-v100.csv")).unwrap();
        assert_eq!(
            d,
            [
                Device {
                    index: 0,
                    name: "Iluvatar MR-V50".into(),
                    memory_mib: 16384.0,
                    family: Some(Family::Zhikai)
                },
                Device {
                    index: 1,
                    name: "Iluvatar MR-V100".into(),
                    memory_mib: 32768.0,
                    family: Some(Family::Zhikai)
                },
            ]
        );
        let (a, n) = accelerator(Vendor::Iluvatar, &d).unwrap();
        assert_eq!(
            (a.model.as_str(), a.family, a.memory_gb, n),
            ("Iluvatar MR-V50", Family::Zhikai, 16.0, 1)
        );
        let e = parse_ixsmi(&fixture("ixsmi-mr-v50-v100.csv").replace("32768 MiB", "32 GB")).unwrap_err();
        assert_eq!((e.tool, e.line), ("ixsmi", 2), "{e}");
        assert!(e.to_string().contains("32 GB"), "{e}");
        assert_eq!(parse_ixsmi("").unwrap_err().line, 0);
        assert_eq!(parse_ixsmi("ixsmi: command failed\n").unwrap_err().line, 1);
    }

    #[test]
    fn mthreads_gmi_table_lists_moore_threads_gpus_with_their_memory() {
        let text = fixture("mthreads-gmi-s5000.txt");
        let d = parse_mthreads_gmi(&text).unwrap();
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(
            d[1],
            Device { index: 1, name: "MTT S5000".into(), memory_mib: 81920.0, family: Some(Family::MttS) }
        );
        let (a, n) = accelerator(Vendor::MooreThreads, &d).unwrap();
        assert_eq!((a.model.as_str(), a.family, a.memory_gb, n), ("MTT S5000", Family::MttS, 80.0, 2));
        let e = parse_mthreads_gmi(&text.replace("64889MiB(81920MiB)", "64889MiB")).unwrap_err();
        assert_eq!((e.tool, e.line), ("mthreads-gmi", 13), "{e}");
        let e = parse_mthreads_gmi("mthreads-gmi: driver not loaded\n").unwrap_err();
        assert_eq!(e.line, 0, "{e}");
    }

    #[test]
    fn mx_smi_table_lists_metax_gpus_with_their_memory() {
        let text = fixture("mx-smi-c500.txt");
        let d = parse_mx_smi(&text).unwrap();
        assert_eq!(
            d,
            [
                Device {
                    index: 0,
                    name: "MetaX C500".into(),
                    memory_mib: 65536.0,
                    family: Some(Family::Xiyun)
                },
                Device {
                    index: 1,
                    name: "MetaX C500".into(),
                    memory_mib: 65536.0,
                    family: Some(Family::Xiyun)
                },
            ]
        );
        let (a, n) = accelerator(Vendor::Metax, &d).unwrap();
        assert_eq!((a.model.as_str(), a.family, a.memory_gb, n), ("MetaX C500", Family::Xiyun, 64.0, 2));
        let cut = text.lines().take(17).collect::<Vec<_>>().join("\n");
        let e = parse_mx_smi(&cut).unwrap_err();
        assert_eq!((e.tool, e.line), ("mx-smi", 17), "{e}");
        let e = parse_mx_smi(&text.replacen("826/65536 MiB", "826 MiB      ", 1)).unwrap_err();
        assert_eq!(e.line, 15, "{e}");
        assert_eq!(parse_mx_smi("mx-smi: no device\n").unwrap_err().line, 0);
    }

    #[test]
    fn garbled_rocm_smi_output_names_the_tool_and_line() {
        let e = parse_rocm_smi("WARNING: No JSON data to report\n").unwrap_err();
        assert_eq!((e.tool, e.line), ("rocm-smi", 0));
        let sample = fixture("rocm-smi-rx7900xt.json");
        let e = parse_rocm_smi(&sample.replace("\"21458059264\"", "\"20 GiB\"")).unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.to_string().contains("20 GiB"), "{e}");
        let e = parse_rocm_smi(&sample.replace("\"Card Series\"", "\"Series\"")).unwrap_err();
        assert!(e.to_string().contains("--showproductname") && e.line == 2, "{e}");
        let cut = sample.lines().take(5).collect::<Vec<_>>().join("\n");
        let e = parse_rocm_smi(&cut).unwrap_err();
        assert!(e.to_string().contains("not JSON") && e.line >= 5, "{e}");
    }

    #[test]
    fn garbled_output_is_an_error_naming_the_tool_and_line() {
        let e = parse_npu_smi("command not found\n").unwrap_err();
        assert_eq!((e.tool, e.line), ("npu-smi", 0));
        assert!(e.to_string().contains("no device table"), "{e}");
        let cut = fixture("npu-smi-910b4.txt").lines().take(7).collect::<Vec<_>>().join("\n");
        let e = parse_npu_smi(&cut).unwrap_err();
        assert!(e.to_string().contains("NPU 0 has no chip row"), "{e}");
        let bad = fixture("npu-smi-910b4.txt").replace("3197 / 65536", "3197 of 65536");
        let e = parse_npu_smi(&bad).unwrap_err();
        assert_eq!(e.line, 8, "{e}");
        let e = parse_xpu_smi(&fixture("xpu_smi-k200.txt").replace("/dev/xpu0 ", "/dev/gpu0 ")).unwrap_err();
        assert!(e.to_string().contains("/dev/gpu0") && e.line == 5, "{e}");
        assert!(parse_xpu_smi("").is_err());
    }

    proptest! {
        #[test]
        fn parsers_never_panic_on_garbage(s in "\\PC*") {
            let _ = parse_npu_smi(&s);
            let _ = parse_xpu_smi(&s);
            let _ = parse_rocm_smi_cards(&s);
            let _ = parse_ixsmi(&s);
            let _ = parse_mthreads_gmi(&s);
            let _ = parse_mx_smi(&s);
        }

        #[test]
        fn parsers_never_panic_on_mangled_samples(cut in 0usize..2000, junk in "[|/ 0-9a-zA-Z\n-]{0,40}") {
            for name in ["npu-smi-910b4.txt", "npu-smi-a3.txt", "xpu_smi-k200.txt", "rocm-smi-rx7900xt.json", "rocm-smi-hygon-k100-ai.json", "ixsmi-mr-v50-v100.csv", "mthreads-gmi-s5000.txt", "mx-smi-c500.txt"] {
                let text = fixture(name);
                let at = text.char_indices().map(|(i, _)| i).nth(cut % text.chars().count()).unwrap_or(0);
                let mangled = format!("{}{junk}{}", &text[..at], &text[at..]);
                let _ = parse_npu_smi(&mangled);
                let _ = parse_xpu_smi(&mangled);
                let _ = parse_rocm_smi_cards(&mangled);
                let _ = parse_ixsmi(&mangled);
                let _ = parse_mthreads_gmi(&mangled);
                let _ = parse_mx_smi(&mangled);
            }
        }
    }
}
