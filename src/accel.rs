//! The accelerator vocabulary shared by specs and fleets: vendors, families
//! (GPU and NPU architectures or product lines), compute capability and the
//! links between the accelerators of one node.
//!
//! Beside NVIDIA, AMD and Intel, the vendors of the accelerators a Chinese
//! operator's fleet holds: Huawei (Ascend NPUs), Cambricon (MLUs), Hygon
//! (DCUs), Kunlunxin (XPUs), Moore Threads, MetaX, Iluvatar CoreX and
//! Enflame. How each is found on a machine and handed to a workload lives
//! in [`devices`]; which of them count as domestic hardware is
//! [`Vendor::is_domestic_cn`].
//!
//! A spec names *families* and *capabilities*, never SKUs; a pool names its
//! concrete model too, for display. Families map to a bit so the scheduler
//! can test "any of these families" with one AND.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

pub mod devices;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Vendor {
    Nvidia,
    Amd,
    Intel,
    /// Huawei Ascend NPUs.
    Huawei,
    /// Cambricon MLUs.
    Cambricon,
    /// Hygon DCUs (ROCm-derived, HIP).
    Hygon,
    /// Kunlunxin (Baidu) XPUs.
    Kunlunxin,
    /// Moore Threads MTT GPUs (MUSA).
    MooreThreads,
    /// MetaX GPUs (MACA).
    Metax,
    /// Iluvatar CoreX GPUs.
    Iluvatar,
    /// Enflame GCUs.
    Enflame,
}

impl Vendor {
    pub const ALL: [Vendor; 11] = [
        Vendor::Nvidia,
        Vendor::Amd,
        Vendor::Intel,
        Vendor::Huawei,
        Vendor::Cambricon,
        Vendor::Hygon,
        Vendor::Kunlunxin,
        Vendor::MooreThreads,
        Vendor::Metax,
        Vendor::Iluvatar,
        Vendor::Enflame,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
            Vendor::Huawei => "huawei",
            Vendor::Cambricon => "cambricon",
            Vendor::Hygon => "hygon",
            Vendor::Kunlunxin => "kunlunxin",
            Vendor::MooreThreads => "moore-threads",
            Vendor::Metax => "metax",
            Vendor::Iluvatar => "iluvatar",
            Vendor::Enflame => "enflame",
        }
    }

    /// Whether the vendor designs its accelerators in mainland China: what
    /// a "domestic hardware" requirement there accepts. A fleet file may
    /// tag a pool [`DOMESTIC_HARDWARE`] only when its accelerator's vendor
    /// is one of these (the fleet loader checks it).
    pub fn is_domestic_cn(self) -> bool {
        !matches!(self, Vendor::Nvidia | Vendor::Amd | Vendor::Intel)
    }

    /// Whether its accelerators take only work that asks for them by
    /// vendor, family or model. Each of these needs its own build of the
    /// frameworks (torch_npu, torch_mlu, torch_musa, …): a spec that names
    /// no accelerator was written for CUDA or ROCm, and sent there it would
    /// fail at its first kernel. So they are opt-in: a spec that names
    /// nothing never lands on them, one that names their vendor, family or
    /// model, or requires [`DOMESTIC_HARDWARE`], may.
    pub fn opt_in(self) -> bool {
        self.is_domestic_cn()
    }
}

/// The compliance tag of capacity built on domestic (mainland Chinese)
/// accelerators only. A spec that requires it (`constraints.compliance =
/// ["domestic-hardware"]`) runs only on pools that carry it.
pub const DOMESTIC_HARDWARE: &str = "domestic-hardware";

/// The compliance tag of capacity whose software stack (driver, runtime,
/// collective library, OS) the operator certified for the work, as
/// government and state-owned customers require. Canopy does not check a
/// stack itself: the fleet file says which pools carry it.
pub const CERTIFIED_STACK: &str = "certified-stack";

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An accelerator family: a GPU architecture, or for vendors that do not
/// publish architecture names, a product generation. Each belongs to
/// exactly one vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
    Blackwell,
    Cdna2,
    Cdna3,
    Rdna3,
    Gaudi2,
    Gaudi3,
    /// Huawei Ascend 910B (Atlas 800T A2, Atlas 900 A2).
    Ascend910b,
    /// Huawei Ascend 910C (Atlas 900 A3 SuperPoD).
    Ascend910c,
    /// Cambricon MLU370 (X4, X8).
    Mlu370,
    /// Cambricon MLU590.
    Mlu590,
    /// Hygon DCU Z100 (Z100, Z100L).
    #[serde(rename = "dcu-z100")]
    DcuZ100,
    /// Hygon DCU K100 (K100, K100-AI).
    #[serde(rename = "dcu-k100")]
    DcuK100,
    /// Kunlunxin second generation (R200, R300).
    Kunlun2,
    /// Kunlunxin third generation (P800).
    Kunlun3,
    /// Moore Threads MTT S-series data-centre GPUs (S3000, S4000).
    #[serde(rename = "mtt-s")]
    MttS,
    /// MetaX Xiyun C-series (C500).
    Xiyun,
    /// Iluvatar CoreX Tiangai (BI-V100, BI-V150).
    Tiangai,
    /// Iluvatar CoreX Zhikai (MR-V50, MR-V100).
    Zhikai,
    /// Enflame CloudBlazer training cards (T10, T20, T21).
    #[serde(rename = "enflame-t")]
    EnflameT,
    /// Enflame CloudBlazer inference cards (S60).
    #[serde(rename = "enflame-s")]
    EnflameS,
    /// Intel Data Center GPU Max (Ponte Vecchio): the Xe-HPC architecture.
    /// Last, so that the families before it keep their bits.
    #[serde(rename = "xe-hpc")]
    XeHpc,
}

impl Family {
    pub const ALL: [Family; 27] = [
        Family::Pascal,
        Family::Volta,
        Family::Turing,
        Family::Ampere,
        Family::Ada,
        Family::Hopper,
        Family::Blackwell,
        Family::Cdna2,
        Family::Cdna3,
        Family::Rdna3,
        Family::Gaudi2,
        Family::Gaudi3,
        Family::Ascend910b,
        Family::Ascend910c,
        Family::Mlu370,
        Family::Mlu590,
        Family::DcuZ100,
        Family::DcuK100,
        Family::Kunlun2,
        Family::Kunlun3,
        Family::MttS,
        Family::Xiyun,
        Family::Tiangai,
        Family::Zhikai,
        Family::EnflameT,
        Family::EnflameS,
        Family::XeHpc,
    ];

    pub const fn vendor(self) -> Vendor {
        match self {
            Family::Pascal
            | Family::Volta
            | Family::Turing
            | Family::Ampere
            | Family::Ada
            | Family::Hopper
            | Family::Blackwell => Vendor::Nvidia,
            Family::Cdna2 | Family::Cdna3 | Family::Rdna3 => Vendor::Amd,
            Family::Gaudi2 | Family::Gaudi3 | Family::XeHpc => Vendor::Intel,
            Family::Ascend910b | Family::Ascend910c => Vendor::Huawei,
            Family::Mlu370 | Family::Mlu590 => Vendor::Cambricon,
            Family::DcuZ100 | Family::DcuK100 => Vendor::Hygon,
            Family::Kunlun2 | Family::Kunlun3 => Vendor::Kunlunxin,
            Family::MttS => Vendor::MooreThreads,
            Family::Xiyun => Vendor::Metax,
            Family::Tiangai | Family::Zhikai => Vendor::Iluvatar,
            Family::EnflameT | Family::EnflameS => Vendor::Enflame,
        }
    }

    /// One bit per family, for set tests in the scheduler.
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Family::Pascal => "pascal",
            Family::Volta => "volta",
            Family::Turing => "turing",
            Family::Ampere => "ampere",
            Family::Ada => "ada",
            Family::Hopper => "hopper",
            Family::Blackwell => "blackwell",
            Family::Cdna2 => "cdna2",
            Family::Cdna3 => "cdna3",
            Family::Rdna3 => "rdna3",
            Family::Gaudi2 => "gaudi2",
            Family::Gaudi3 => "gaudi3",
            Family::XeHpc => "xe-hpc",
            Family::Ascend910b => "ascend910b",
            Family::Ascend910c => "ascend910c",
            Family::Mlu370 => "mlu370",
            Family::Mlu590 => "mlu590",
            Family::DcuZ100 => "dcu-z100",
            Family::DcuK100 => "dcu-k100",
            Family::Kunlun2 => "kunlun2",
            Family::Kunlun3 => "kunlun3",
            Family::MttS => "mtt-s",
            Family::Xiyun => "xiyun",
            Family::Tiangai => "tiangai",
            Family::Zhikai => "zhikai",
            Family::EnflameT => "enflame-t",
            Family::EnflameS => "enflame-s",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of families as a bitmask; empty means "any".
pub fn family_mask(families: &[Family]) -> u32 {
    families.iter().fold(0, |m, f| m | f.bit())
}

/// CUDA-style compute capability, written `"8.0"` or `"9.0"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComputeCapability {
    pub major: u8,
    pub minor: u8,
}

impl ComputeCapability {
    pub const fn new(major: u8, minor: u8) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl std::str::FromStr for ComputeCapability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || format!("invalid compute capability {s:?}; write it as \"MAJOR.MINOR\", for example \"8.0\"");
        let (a, b) = s.trim().split_once('.').ok_or_else(bad)?;
        Ok(Self { major: a.parse().map_err(|_| bad())?, minor: b.parse().map_err(|_| bad())? })
    }
}

impl Serialize for ComputeCapability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for ComputeCapability {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ComputeCapability".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+\\.[0-9]+$",
            "description": "Compute capability as MAJOR.MINOR, e.g. \"8.0\"."
        })
    }
}

/// How the GPUs of one node talk to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Interconnect {
    /// Plain PCIe peer-to-peer (or none).
    Pcie,
    /// NVIDIA NVLink / NVSwitch.
    Nvlink,
    /// AMD Infinity Fabric (xGMI).
    Xgmi,
    /// Huawei Cache Coherence System, between the Ascend NPUs of a node.
    Hccs,
    /// Cambricon MLU-Link, between the MLUs of a node.
    #[serde(rename = "mlu-link")]
    MluLink,
}

impl fmt::Display for Interconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Interconnect::Pcie => "pcie",
            Interconnect::Nvlink => "nvlink",
            Interconnect::Xgmi => "xgmi",
            Interconnect::Hccs => "hccs",
            Interconnect::MluLink => "mlu-link",
        })
    }
}

/// How nodes talk to each other: the network between the nodes of a gang.
/// Ordered by what it can stand in for: InfiniBand serves a request for
/// RoCE (both are RDMA), and any fabric serves a request for Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Fabric {
    /// Plain TCP/IP between nodes.
    Ethernet,
    /// RDMA over Converged Ethernet.
    Roce,
    /// InfiniBand (RDMA).
    Infiniband,
}

impl Fabric {
    /// Whether a node on this fabric serves a request for `wanted`.
    pub fn serves(self, wanted: Fabric) -> bool {
        match wanted {
            Fabric::Ethernet => true,
            Fabric::Roce => matches!(self, Fabric::Roce | Fabric::Infiniband),
            Fabric::Infiniband => self == Fabric::Infiniband,
        }
    }
}

impl fmt::Display for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fabric::Ethernet => "ethernet",
            Fabric::Roce => "roce",
            Fabric::Infiniband => "infiniband",
        })
    }
}

/// Whether a pool's accelerator model (`"A100-SXM4-80GB"`, `"NVIDIA A100 80GB"`)
/// is the model a spec names (`"A100"`): the name appears in it as a whole
/// word, case-insensitively, so `A100` matches `A100-SXM4-80GB` but not
/// `A1000`, and `H100` does not match `GH100X`.
pub fn model_matches(offered: &str, wanted: &str) -> bool {
    let wanted = wanted.trim();
    if wanted.is_empty() {
        return false;
    }
    let offered = offered.to_ascii_lowercase();
    let wanted = wanted.to_ascii_lowercase();
    let bytes = offered.as_bytes();
    offered.match_indices(&wanted).any(|(at, m)| {
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + m.len()).copied();
        let edge = |c: Option<u8>| c.is_none_or(|c| !c.is_ascii_alphanumeric());
        edge(before) && edge(after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_capability_orders_numerically() {
        let a: ComputeCapability = "8.0".parse().unwrap();
        let b: ComputeCapability = "8.9".parse().unwrap();
        let c: ComputeCapability = "10.0".parse().unwrap();
        assert!(a < b && b < c);
        assert!("eight".parse::<ComputeCapability>().is_err());
    }

    #[test]
    fn a_model_matches_as_a_whole_word() {
        assert!(model_matches("A100-SXM4-80GB", "A100"));
        assert!(model_matches("NVIDIA A100 80GB", "a100"));
        assert!(model_matches("A10G", "A10G"));
        assert!(!model_matches("A10G", "A10"));
        assert!(!model_matches("A1000", "A100"));
        assert!(!model_matches("GH100X", "H100"));
        assert!(!model_matches("H100", ""));
    }

    #[test]
    fn infiniband_serves_roce_and_anything_serves_ethernet() {
        assert!(Fabric::Infiniband.serves(Fabric::Roce));
        assert!(Fabric::Roce.serves(Fabric::Ethernet));
        assert!(!Fabric::Roce.serves(Fabric::Infiniband));
        assert!(!Fabric::Ethernet.serves(Fabric::Roce));
    }

    #[test]
    fn names_round_trip_through_serde_and_display() {
        for v in Vendor::ALL {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{v}\""));
        }
        for f in Family::ALL {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{f}\""));
            assert_eq!(serde_json::from_str::<Family>(&json).unwrap(), f);
        }
        assert_eq!(serde_json::to_string(&Interconnect::MluLink).unwrap(), "\"mlu-link\"");
        assert!(Vendor::Huawei.is_domestic_cn() && !Vendor::Nvidia.is_domestic_cn());
    }

    #[test]
    fn every_family_has_its_own_bit() {
        let mask = family_mask(&Family::ALL);
        assert_eq!(mask.count_ones() as usize, Family::ALL.len());
    }
}
