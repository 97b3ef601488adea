//! The accelerator vocabulary shared by specs and fleets: vendors, families
//! (GPU architectures), compute capability and GPU interconnects.
//!
//! A spec names *families* and *capabilities*, never SKUs; a pool names its
//! concrete model too, for display. Families map to a bit so the scheduler
//! can test "any of these families" with one AND.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    Nvidia,
    Amd,
    Intel,
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Vendor::Nvidia => "nvidia",
            Vendor::Amd => "amd",
            Vendor::Intel => "intel",
        })
    }
}

/// A GPU architecture family. Each belongs to exactly one vendor.
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
}

impl Family {
    pub const ALL: [Family; 12] = [
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
    ];

    pub fn vendor(self) -> Vendor {
        match self {
            Family::Pascal
            | Family::Volta
            | Family::Turing
            | Family::Ampere
            | Family::Ada
            | Family::Hopper
            | Family::Blackwell => Vendor::Nvidia,
            Family::Cdna2 | Family::Cdna3 | Family::Rdna3 => Vendor::Amd,
            Family::Gaudi2 | Family::Gaudi3 => Vendor::Intel,
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
}

impl fmt::Display for Interconnect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Interconnect::Pcie => "pcie",
            Interconnect::Nvlink => "nvlink",
            Interconnect::Xgmi => "xgmi",
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
    fn every_family_has_its_own_bit() {
        let mask = family_mask(&Family::ALL);
        assert_eq!(mask.count_ones() as usize, Family::ALL.len());
    }
}
