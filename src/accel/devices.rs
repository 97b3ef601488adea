//! How each vendor's accelerators are found on a machine and handed to a
//! workload: the one table of vendor → discovery tool → visible-devices
//! variable → container devices → collective library. `docs/accelerators.md`
//! prints the same table with its sources; a test keeps the two in step.
//!
//! Owns the table and the launch-side derivations (the variables a launch
//! sets, the engine flags a container gets). Parsing the tools' output is
//! [`crate::providers::local::discover`]'s.

use super::{Family, Vendor};

/// How a container engine gets a vendor's devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerDevices {
    /// A Container Device Interface kind: `--device <kind>=all` (podman;
    /// NVIDIA under docker keeps `--gpus all`).
    Cdi(&'static str),
    /// Device nodes: `each` with `{}` replaced by the device index, for the
    /// devices the attempt gets, and the `shared` control nodes always.
    Nodes { each: Option<&'static str>, shared: &'static [&'static str] },
    /// A vendor container runtime that mounts the devices named in a
    /// variable (`--runtime <runtime> -e <env>=all`).
    Runtime { runtime: &'static str, env: &'static str },
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceKind {
    /// The row's name in the docs: `nvidia`, `intel-gaudi`, `huawei-ascend`.
    pub name: &'static str,
    pub vendor: Vendor,
    /// Programs that list the devices, the first found is used.
    pub tools: &'static [&'static str],
    /// The variable that restricts a process to its devices, set to their
    /// indices joined by commas (after `value_prefix`).
    pub visible_env: &'static str,
    pub value_prefix: &'static str,
    pub container: ContainerDevices,
    /// The collective-communication library its frameworks use.
    pub collective: &'static str,
}

const fn kind(
    name: &'static str,
    vendor: Vendor,
    tools: &'static [&'static str],
    visible_env: &'static str,
    container: ContainerDevices,
    collective: &'static str,
) -> DeviceKind {
    DeviceKind { name, vendor, tools, visible_env, value_prefix: "", container, collective }
}

use ContainerDevices::{Cdi, Nodes, Runtime};

/// The table. Sources for each cell are in `docs/accelerators.md`.
pub const KINDS: &[DeviceKind] = &[
    kind("nvidia", Vendor::Nvidia, &["nvidia-smi"], "CUDA_VISIBLE_DEVICES", Cdi("nvidia.com/gpu"), "NCCL"),
    kind(
        "amd",
        Vendor::Amd,
        &["amd-smi", "rocm-smi"],
        "ROCR_VISIBLE_DEVICES",
        Nodes { each: None, shared: &["/dev/kfd", "/dev/dri"] },
        "RCCL",
    ),
    kind(
        "intel-gaudi",
        Vendor::Intel,
        &["hl-smi"],
        "HABANA_VISIBLE_MODULES",
        Runtime { runtime: "habana", env: "HABANA_VISIBLE_DEVICES" },
        "HCCL (Habana)",
    ),
    DeviceKind {
        name: "intel-gpu",
        vendor: Vendor::Intel,
        tools: &["xpu-smi"],
        visible_env: "ONEAPI_DEVICE_SELECTOR",
        value_prefix: "level_zero:",
        container: Nodes { each: None, shared: &["/dev/dri"] },
        collective: "oneCCL",
    },
    kind(
        "huawei-ascend",
        Vendor::Huawei,
        &["npu-smi"],
        "ASCEND_RT_VISIBLE_DEVICES",
        Nodes {
            each: Some("/dev/davinci{}"),
            shared: &["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"],
        },
        "HCCL",
    ),
    kind(
        "cambricon",
        Vendor::Cambricon,
        &["cnmon"],
        "MLU_VISIBLE_DEVICES",
        Nodes { each: Some("/dev/cambricon_dev{}"), shared: &["/dev/cambricon_ctl"] },
        "CNCL",
    ),
    kind(
        "hygon",
        Vendor::Hygon,
        &["hy-smi", "rocm-smi"],
        "HIP_VISIBLE_DEVICES",
        Nodes { each: None, shared: &["/dev/kfd", "/dev/dri"] },
        "RCCL",
    ),
    kind(
        "kunlunxin",
        Vendor::Kunlunxin,
        &["xpu_smi", "xpu-smi"],
        "XPU_VISIBLE_DEVICES",
        Nodes { each: Some("/dev/xpu{}"), shared: &[] },
        "BKCL",
    ),
    kind(
        "moore-threads",
        Vendor::MooreThreads,
        &["mthreads-gmi"],
        "MUSA_VISIBLE_DEVICES",
        Nodes { each: None, shared: &["/dev/dri"] },
        "MCCL",
    ),
    kind(
        "metax",
        Vendor::Metax,
        &["mx-smi"],
        "CUDA_VISIBLE_DEVICES",
        Nodes { each: None, shared: &["/dev/dri"] },
        "MCCL",
    ),
    kind(
        "iluvatar",
        Vendor::Iluvatar,
        &["ixsmi"],
        "CUDA_VISIBLE_DEVICES",
        Nodes { each: Some("/dev/iluvatar{}"), shared: &[] },
        "IXCCL",
    ),
    kind(
        "enflame",
        Vendor::Enflame,
        &["efsmi"],
        "TOPS_VISIBLE_DEVICES",
        Nodes { each: Some("/dev/gcu{}"), shared: &[] },
        "ECCL",
    ),
];

/// The row for a vendor's accelerators of `family` (Intel's Gaudi and
/// GPUs differ; `None` family means the vendor's main line).
pub fn of(vendor: Vendor, family: Option<Family>) -> &'static DeviceKind {
    let intel_gpu =
        vendor == Vendor::Intel && family.is_some_and(|f| !matches!(f, Family::Gaudi2 | Family::Gaudi3));
    // Every vendor has a row (the table test checks it); NVIDIA's is first.
    KINDS.iter().find(|k| k.vendor == vendor && (k.name == "intel-gpu") == intel_gpu).unwrap_or(&KINDS[0])
}

impl DeviceKind {
    /// The variables a launch sets to give a process devices `ids`.
    pub fn visible(&self, ids: &[u32]) -> (String, String) {
        let list = ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        (self.visible_env.to_string(), format!("{}{list}", self.value_prefix))
    }

    /// Container engine arguments that give a container devices `ids`.
    /// `docker` is whether the engine is docker (NVIDIA's `--gpus`).
    pub fn container_args(&self, ids: &[u32], docker: bool) -> Vec<String> {
        let mut a = Vec::new();
        match self.container {
            Cdi(_) if docker && self.vendor == Vendor::Nvidia => a.extend(["--gpus".into(), "all".into()]),
            Cdi(kind) => a.extend(["--device".into(), format!("{kind}=all")]),
            Nodes { each, shared } => {
                for id in ids {
                    if let Some(each) = each {
                        a.extend(["--device".into(), each.replace("{}", &id.to_string())]);
                    }
                }
                for node in shared {
                    a.extend(["--device".into(), (*node).to_string()]);
                }
            }
            Runtime { runtime, env } => {
                a.extend(["--runtime".into(), runtime.into(), "-e".into(), format!("{env}=all")]);
            }
        }
        a
    }
}

/// Every visible-devices variable in the table, once: what a launcher
/// passes on to its workloads.
pub fn visible_envs() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = KINDS.iter().map(|k| k.visible_env).collect();
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_vendor_has_a_row() {
        for v in Vendor::ALL {
            assert_eq!(of(v, None).vendor, v, "{v}");
        }
        assert_eq!(of(Vendor::Intel, Some(Family::Gaudi3)).name, "intel-gaudi");
        assert_eq!(of(Vendor::Huawei, Some(Family::Ascend910b)).visible_env, "ASCEND_RT_VISIBLE_DEVICES");
    }

    #[test]
    fn docs_print_the_same_table() {
        let doc = include_str!("../../docs/accelerators.md");
        for k in KINDS {
            let tools = k.tools.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ");
            let row = format!("| {} | {} | {tools} | `{}` |", k.name, k.vendor, k.visible_env);
            assert!(doc.contains(&row), "docs/accelerators.md lacks the row starting {row:?}");
        }
    }

    #[test]
    fn launches_name_the_vendors_variable_and_devices() {
        let ascend = of(Vendor::Huawei, None);
        assert_eq!(ascend.visible(&[2, 3]), ("ASCEND_RT_VISIBLE_DEVICES".into(), "2,3".into()));
        assert_eq!(
            ascend.container_args(&[2, 3], false).join(" "),
            "--device /dev/davinci2 --device /dev/davinci3 --device /dev/davinci_manager \
             --device /dev/devmm_svm --device /dev/hisi_hdc"
        );
        let mlu = of(Vendor::Cambricon, None);
        assert_eq!(mlu.visible(&[0]), ("MLU_VISIBLE_DEVICES".into(), "0".into()));
        assert_eq!(
            mlu.container_args(&[1], true).join(" "),
            "--device /dev/cambricon_dev1 --device /dev/cambricon_ctl"
        );
        let nv = of(Vendor::Nvidia, None);
        assert_eq!(nv.container_args(&[0], true).join(" "), "--gpus all");
        assert_eq!(nv.container_args(&[0], false).join(" "), "--device nvidia.com/gpu=all");
        let gaudi = of(Vendor::Intel, Some(Family::Gaudi2));
        assert_eq!(
            gaudi.container_args(&[0], true).join(" "),
            "--runtime habana -e HABANA_VISIBLE_DEVICES=all"
        );
        assert_eq!(of(Vendor::Kunlunxin, None).visible(&[0, 1]).0, "XPU_VISIBLE_DEVICES");
        assert_eq!(of(Vendor::Hygon, None).visible(&[0]).0, "HIP_VISIBLE_DEVICES");
        assert!(visible_envs().contains(&"MLU_VISIBLE_DEVICES"));
    }
}
