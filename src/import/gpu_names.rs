//! GPU names as SkyPilot and dstack write them (`A100-80GB`, `H100`,
//! `L40S`, `RTX4090`, `MI300X`) → Canopy's vocabulary: the model a pool's
//! name is matched against ([`crate::accel::model_matches`]), its family
//! and vendor, and the memory per GPU the name implies.
//!
//! A name is looked up without regard to case, spaces, `-` or `_`. The
//! model is written the way pools name it (`"RTX 4090"`, since a pool says
//! `"NVIDIA GeForce RTX 4090"`); a memory variant (`A100-80GB`) keeps the
//! base model and states the memory instead, since `A100-80GB` is no whole
//! word of `A100-SXM4-80GB`. Names not listed are the caller's to keep
//! as given, with a warning.

use crate::accel::{Family, Vendor};

/// What a known GPU name means to Canopy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Known {
    pub model: &'static str,
    pub family: Family,
    /// GB per GPU the name implies (the smaller variant where a name has
    /// two and says nothing).
    pub memory_gb: f64,
}

impl Known {
    pub fn vendor(&self) -> Vendor {
        self.family.vendor()
    }
}

/// (normalised name, model, family, GB per GPU).
const TABLE: &[(&str, &str, Family, f64)] = &[
    // NVIDIA data centre
    ("P4", "P4", Family::Pascal, 8.0),
    ("P40", "P40", Family::Pascal, 24.0),
    ("P100", "P100", Family::Pascal, 16.0),
    ("V100", "V100", Family::Volta, 16.0),
    ("V10032GB", "V100", Family::Volta, 32.0),
    ("T4", "T4", Family::Turing, 16.0),
    ("A10", "A10", Family::Ampere, 24.0),
    ("A10G", "A10G", Family::Ampere, 24.0),
    ("A40", "A40", Family::Ampere, 48.0),
    ("A100", "A100", Family::Ampere, 40.0),
    ("A10040GB", "A100", Family::Ampere, 40.0),
    ("A10080GB", "A100", Family::Ampere, 80.0),
    ("A10080GBSXM", "A100", Family::Ampere, 80.0),
    ("L4", "L4", Family::Ada, 24.0),
    ("L40", "L40", Family::Ada, 48.0),
    ("L40S", "L40S", Family::Ada, 48.0),
    ("H100", "H100", Family::Hopper, 80.0),
    ("H10080GB", "H100", Family::Hopper, 80.0),
    ("H100SXM", "H100", Family::Hopper, 80.0),
    ("H100MEGA", "H100", Family::Hopper, 80.0),
    ("H100NVL", "H100", Family::Hopper, 94.0),
    ("H200", "H200", Family::Hopper, 141.0),
    ("GH200", "GH200", Family::Hopper, 96.0),
    ("B200", "B200", Family::Blackwell, 180.0),
    ("GB200", "GB200", Family::Blackwell, 186.0),
    // NVIDIA workstation and consumer
    ("RTX6000", "RTX 6000", Family::Turing, 24.0),
    ("RTXA4000", "A4000", Family::Ampere, 16.0),
    ("A4000", "A4000", Family::Ampere, 16.0),
    ("RTXA5000", "A5000", Family::Ampere, 24.0),
    ("A5000", "A5000", Family::Ampere, 24.0),
    ("RTXA6000", "A6000", Family::Ampere, 48.0),
    ("A6000", "A6000", Family::Ampere, 48.0),
    ("RTX6000ADA", "RTX 6000 Ada", Family::Ada, 48.0),
    ("RTX3090", "RTX 3090", Family::Ampere, 24.0),
    ("RTX4090", "RTX 4090", Family::Ada, 24.0),
    ("RTX5090", "RTX 5090", Family::Blackwell, 32.0),
    // AMD
    ("MI210", "MI210", Family::Cdna2, 64.0),
    ("MI250", "MI250", Family::Cdna2, 128.0),
    ("MI250X", "MI250X", Family::Cdna2, 128.0),
    ("MI300X", "MI300X", Family::Cdna3, 192.0),
    ("MI325X", "MI325X", Family::Cdna3, 256.0),
    // Intel
    ("GAUDI2", "Gaudi2", Family::Gaudi2, 96.0),
    ("HL225", "Gaudi2", Family::Gaudi2, 96.0),
    ("GAUDI3", "Gaudi3", Family::Gaudi3, 128.0),
];

/// Upper case without spaces, `-` and `_`: `a100-80gb` → `A10080GB`.
fn normalise(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, ' ' | '-' | '_')).map(|c| c.to_ascii_uppercase()).collect()
}

/// Canopy's reading of a GPU name, if it knows the name.
pub fn lookup(name: &str) -> Option<Known> {
    let n = normalise(name);
    TABLE.iter().find(|(k, ..)| *k == n).map(|&(_, model, family, memory_gb)| Known {
        model,
        family,
        memory_gb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accel::model_matches;

    #[test]
    fn names_map_to_models_that_real_pool_names_match() {
        let cases = [
            ("A100-80GB", "A100-SXM4-80GB", 80.0),
            ("a100", "NVIDIA A100-PCIE-40GB", 40.0),
            ("H100", "NVIDIA H100 80GB HBM3", 80.0),
            ("RTX4090", "NVIDIA GeForce RTX 4090", 24.0),
            ("RTXA6000", "NVIDIA RTX A6000", 48.0),
            ("L40S", "NVIDIA L40S", 48.0),
            ("MI300X", "AMD Instinct MI300X", 192.0),
            ("A10G", "NVIDIA A10G", 24.0),
        ];
        for (name, pool, gb) in cases {
            let k = lookup(name).unwrap_or_else(|| panic!("{name} is known"));
            assert!(model_matches(pool, k.model), "{name} → {} should match {pool}", k.model);
            assert_eq!(k.memory_gb, gb, "{name}");
        }
        assert!(!model_matches("NVIDIA A10G", lookup("A10").unwrap().model));
        assert_eq!(lookup("mi300x").unwrap().vendor(), Vendor::Amd);
        assert_eq!(lookup("K80"), None);
        assert_eq!(lookup("tpu-v5p-8"), None);
    }

    #[test]
    fn every_entry_is_normalised_and_listed_once() {
        for (i, (k, ..)) in TABLE.iter().enumerate() {
            assert_eq!(normalise(k), *k);
            assert!(!TABLE[..i].iter().any(|(o, ..)| o == k), "{k} twice");
        }
    }
}
