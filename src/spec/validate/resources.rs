//! Checks on `[resources]`: GPU count against GPU-only settings, memory
//! ranges, accelerator vendor/family/compute-capability consistency and
//! plausible CPU, memory and disk sizes.

use super::Findings;
use crate::accel::{ComputeCapability, Family, Interconnect, Vendor};
use crate::spec::locate::item;
use crate::spec::{AcceleratorReq, Resources};

/// More GPUs than any single node has.
pub const MAX_GPUS: u32 = 64;
/// More memory than any single GPU has, in GB.
pub const MAX_GPU_MEMORY_GB: f64 = 1024.0;
/// Most CPU cores per node.
pub const MAX_CPU_CORES: f64 = 1024.0;
/// Most memory per node, in GB.
pub const MAX_MEMORY_GB: f64 = 16384.0;
/// Most disk per node, in GB.
pub const MAX_DISK_GB: f64 = 1_000_000.0;
/// Longest `accelerator.model`, in bytes.
pub const MAX_MODEL_BYTES: usize = 64;

/// More nodes than one gang is allowed.
pub const MAX_NODES: u32 = 1024;

pub(super) fn check(r: &Resources, f: &mut Findings) {
    gpus(r, f);
    gang(r, f);
    if let Some(acc) = &r.accelerator {
        accelerator(acc, f);
        interconnect_vendor(r, acc, f);
    }
    amount(
        f,
        "resources.cpu_cores",
        r.cpu_cores,
        false,
        MAX_CPU_CORES,
        ("CPU cores", "like 8; fractions such as 0.5 are fine"),
    );
    amount(f, "resources.memory_gb", r.memory_gb, false, MAX_MEMORY_GB, ("GB of memory", "like 32"));
    amount(f, "resources.disk_gb", r.disk_gb, true, MAX_DISK_GB, ("GB of disk", "like 100, or 0 for none"));
}

/// `nodes` and the settings that only matter between nodes.
fn gang(r: &Resources, f: &mut Findings) {
    if r.nodes == 0 {
        f.error(
            "resources.nodes",
            "`resources.nodes` is 0",
            "use 1 for work on one node (the default), or the number of nodes a gang runs on",
        );
    } else if r.nodes > MAX_NODES {
        f.error(
            "resources.nodes",
            format!("`resources.nodes` is {}, more than one gang may have", r.nodes),
            format!("use at most {MAX_NODES}; gpus, cpu_cores and memory_gb are per node"),
        );
    }
    if let Some(g) = r.fabric_gbps
        && (!g.is_finite() || g <= 0.0)
    {
        f.error(
            "resources.fabric_gbps",
            "`resources.fabric_gbps` must be a positive number of Gbit/s",
            "write the least bandwidth per node, like 400",
        );
    }
    if r.nodes == 1 {
        for (field, set) in [("fabric", r.fabric.is_some()), ("fabric_gbps", r.fabric_gbps.is_some())] {
            if set {
                f.warning(
                    &format!("resources.{field}"),
                    format!("`resources.{field}` only matters between the nodes of a gang, and nodes = 1"),
                    "remove it, or set resources.nodes; as written it is ignored",
                );
            }
        }
    }
}

fn gpus(r: &Resources, f: &mut Findings) {
    if r.gpus > MAX_GPUS {
        f.error(
            "resources.gpus",
            format!("`resources.gpus` is {}, more than any single node has", r.gpus),
            format!("gpus counts GPUs on one node: use at most {MAX_GPUS}"),
        );
    }
    if r.gpus == 0 {
        let gpu_only = [
            ("gpu_memory_gb", r.gpu_memory_gb.is_some()),
            ("accelerator", r.accelerator.is_some()),
            ("interconnect", r.interconnect.is_some()),
        ];
        for (field, set) in gpu_only {
            if set {
                f.error(
                    &format!("resources.{field}"),
                    format!("`resources.{field}` is set but `resources.gpus` is 0"),
                    format!("set gpus to the number of GPUs needed, or remove {field} for CPU-only work"),
                );
            }
        }
    }
    if r.gpus == 1 && r.interconnect.is_some() {
        f.warning(
            "resources.interconnect",
            "`resources.interconnect` only matters between GPUs of one node, and gpus = 1",
            "remove interconnect, or raise gpus; as written it only narrows the pools that fit",
        );
    }
    if let Some(range) = &r.gpu_memory_gb {
        let mut ok = true;
        for (bound, value) in [("min", range.min), ("max", range.max)] {
            let path = format!("resources.gpu_memory_gb.{bound}");
            let Some(v) = value else { continue };
            if !v.is_finite() || v < 0.0 {
                ok = false;
                f.error(
                    &path,
                    format!("`{path}` must be a number of GB, 0 or more"),
                    "write GB per GPU, like 24",
                );
            } else if v > MAX_GPU_MEMORY_GB {
                ok = false;
                f.error(
                    &path,
                    format!("`{path}` is {v} GB, more than any GPU has"),
                    "gpu_memory_gb is per GPU, in GB (the largest GPUs have under 300): check the unit",
                );
            }
        }
        match (range.min, range.max) {
            (Some(min), Some(max)) if ok && min > max => f.error(
                "resources.gpu_memory_gb.min",
                format!(
                    "`resources.gpu_memory_gb` has min ({min} GB) greater than max ({max} GB), so no GPU fits"
                ),
                "swap them, or raise max",
            ),
            (None, None) => f.warning(
                "resources.gpu_memory_gb",
                "`resources.gpu_memory_gb` sets no bound",
                "give a minimum like { min = 24 }, or remove it",
            ),
            _ => {}
        }
    }
}

/// The highest compute capability any GPU of an NVIDIA family reports.
fn max_capability(family: Family) -> Option<ComputeCapability> {
    let (major, minor) = match family {
        Family::Pascal => (6, 2),
        Family::Volta => (7, 2),
        Family::Turing => (7, 5),
        Family::Ampere => (8, 7),
        Family::Ada => (8, 9),
        Family::Hopper => (9, 0),
        Family::Blackwell => (12, 1),
        _ => return None,
    };
    Some(ComputeCapability::new(major, minor))
}

fn model(acc: &AcceleratorReq, f: &mut Findings) {
    if let Some(m) = &acc.model
        && (m.trim().is_empty() || m.len() > MAX_MODEL_BYTES || m.chars().any(|c| c.is_control()))
    {
        f.error(
            "resources.accelerator.model",
            "`resources.accelerator.model` must name a model, like \"A100\" or \"H100\"",
            "write the model as vendors name it (matched as a whole word, any case), or remove it to accept any of the families",
        );
    }
}

fn accelerator(acc: &AcceleratorReq, f: &mut Findings) {
    model(acc, f);
    for (i, family) in acc.family.iter().enumerate() {
        let path = item("resources.accelerator.family", i);
        if let Some(vendor) = acc.vendor
            && family.vendor() != vendor
        {
            f.error(
                &path,
                format!("family `{family}` is made by {}, but `vendor` is {vendor}", family.vendor()),
                format!("remove `{family}` from family, or set vendor = \"{}\"", family.vendor()),
            );
        }
        if acc.family[..i].contains(family) {
            f.warning(&path, format!("family `{family}` is listed twice"), "remove the duplicate");
        }
    }
    let Some(cc) = acc.min_compute_capability else {
        return;
    };
    let path = "resources.accelerator.min_compute_capability";
    if acc.vendor.is_some_and(|v| v != Vendor::Nvidia) {
        f.warning(
            path,
            "`min_compute_capability` is an NVIDIA (CUDA) notion, but vendor is not nvidia, so no pool can satisfy it",
            "remove min_compute_capability, or set vendor = \"nvidia\"",
        );
        return;
    }
    let reach: Vec<(Family, ComputeCapability)> =
        acc.family.iter().filter_map(|fam| max_capability(*fam).map(|m| (*fam, m))).collect();
    if !reach.is_empty() && reach.len() == acc.family.len() && reach.iter().all(|(_, m)| *m < cc) {
        let best = reach.iter().map(|(fam, m)| format!("{fam} reaches {m}")).collect::<Vec<_>>().join(", ");
        f.error(
            path,
            format!("no listed family reaches compute capability {cc} ({best})"),
            "lower min_compute_capability, or add a newer family such as \"hopper\"",
        );
    }
}

/// The vendor whose GPUs alone have `link`, if only one vendor's do.
pub(crate) fn link_vendor(link: Interconnect) -> Option<Vendor> {
    match link {
        Interconnect::Nvlink => Some(Vendor::Nvidia),
        Interconnect::Xgmi => Some(Vendor::Amd),
        Interconnect::Hccs => Some(Vendor::Huawei),
        Interconnect::MluLink => Some(Vendor::Cambricon),
        Interconnect::Pcie => None,
    }
}

fn interconnect_vendor(r: &Resources, acc: &AcceleratorReq, f: &mut Findings) {
    let Some(link) = r.interconnect else { return };
    let Some(needs) = link_vendor(link) else { return };
    let vendor = acc.vendor.or_else(|| {
        let first = acc.family.first()?.vendor();
        acc.family.iter().all(|fam| fam.vendor() == first).then_some(first)
    });
    if let Some(vendor) = vendor
        && vendor != needs
    {
        f.error(
            "resources.interconnect",
            format!("interconnect `{link}` exists only on {needs} GPUs, but the accelerator is {vendor}"),
            format!("use interconnect = \"pcie\", or change the accelerator to {needs}"),
        );
    }
}

/// A per-node amount: finite, positive (or zero when `zero_ok`), and not
/// beyond `max`. `words` is the unit and an example, for the help.
fn amount(f: &mut Findings, path: &str, v: f64, zero_ok: bool, max: f64, words: (&str, &str)) {
    let (unit, example) = words;
    let too_small = if zero_ok { v < 0.0 } else { v <= 0.0 };
    if !v.is_finite() || too_small {
        let bound = if zero_ok { "0 or more" } else { "more than 0" };
        f.error(
            path,
            format!("`{path}` must be a number {bound}"),
            format!("give the {unit} per node, {example}"),
        );
    } else if v > max {
        f.error(
            path,
            format!("`{path}` is {v} {unit}, more than any node has"),
            format!("the value is {unit} per node, {example}: check the unit"),
        );
    }
}
