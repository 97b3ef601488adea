//! How fast each accelerator model trains, relative to an NVIDIA V100.
//! The scheduler prices GPU work per unit of work with it (a pool's hourly
//! share over its GPUs' relative throughput), and the simulator runs a
//! trace job measured on one model faster or slower on another.
//!
//! Owns the table; no I/O, no clock, no randomness. A fleet file may give a
//! pool's figure itself (`accelerator = { …, throughput = 4.5 }`), for a
//! model the table does not know or a measurement of one's own work.
//!
//! # The table (V100 = 1)
//!
//! One figure per model for mixed-precision training throughput, rounded:
//! real ratios depend on the model trained (Gavel's own matrix spans
//! 1.5–10× between K80 and V100 depending on the job type), so these are
//! typical values for convolutional and transformer training at a batch
//! size that fills the GPU, not a per-job measurement.
//!
//! | model | × V100 | basis |
//! |---|---:|---|
//! | K80 | 0.2 | Gavel (Narayanan et al., OSDI 2020), measured throughput matrix: K80 3–10× slower than V100 |
//! | P100 | 0.5 | Gavel's matrix: P100 1.5–3× slower than V100 |
//! | V100 | 1 | reference |
//! | T4 | 0.45 | Lambda Labs, PyTorch training GPU benchmarks (lambdalabs.com/gpu-benchmarks) |
//! | A10G, A10 | 0.85 | Lambda Labs benchmarks (A10 ≈ RTX A5000 class, just under V100) |
//! | L4 | 0.6 | NVIDIA L4 datasheet (≈ 120 dense FP16 TFLOPS, 300 GB/s): between T4 and A10 |
//! | RTX-3090 | 1.2 | Lambda Labs and AIME (aime.info) deep-learning GPU benchmarks |
//! | RTX-4090 | 1.8 | Lambda Labs and AIME benchmarks (≈ 1.5× RTX 3090) |
//! | A100 | 2.2 | Lambda Labs: A100 ≈ 2.2× V100 in FP16/TF32 PyTorch training |
//! | L40S | 2.0 | CUDO Compute BERT fine-tune (2025): L40S a little under A100 in training |
//! | MI250 | 1.8 | MosaicML/Databricks LLM training on MI250: ≈ 0.8× A100 |
//! | H100 | 4.5 | MLPerf Training v3.0 per-GPU results and Lambda: ≈ 2× A100 |
//! | MI300X | 4.0 | AMD MI300X training results (MLPerf Training v5.0): close to H100 |
//! | H200 | 5.2 | H100's silicon with 141 GB HBM3e at 4.8 TB/s: ≈ 1.15× H100 in training |
//! | B200 | 10 | MLPerf Training v4.1/v5.0 per-GPU results: ≈ 2.2× H100 |
//! | Gaudi3 | 4.0 | Intel Gaudi 3 whitepaper (training throughput vs H100: 0.9–1.0×) |
//! | Gaudi2 | 2.2 | MLPerf Training v3.0 (Intel Habana Gaudi2): ≈ A100 |
//! | MLU370-X8 | 1.2 | Cambricon's launch figures (March 2022): one MLU370-X8 on a par with a 350 W RTX GPU (RTX 3090) on YOLOv3, Transformer, BERT and ResNet101 training; vendor-measured |
//! | Ascend 910B | 2.0 | Huawei positions the 910B against the A100/A800, and iFlytek reported A100-level training after joint tuning (summarised at cnblogs.com/fengjian2016/p/18767859); no independent benchmark, so priced a little under A100 |
//!
//! Accelerators with no public training figure found — Ascend 910C,
//! Cambricon MLU590, Hygon DCU Z100/K100, Kunlunxin R300/P800,
//! Moore Threads MTT S4000, MetaX C500, Iluvatar BI-V150/MR-V100, Enflame
//! T20/S60 — are not in the table: they are priced as a V100 (1), the
//! table's floor for data-centre training cards, so the scheduler prefers
//! capacity whose speed is known until a fleet file gives a measured
//! `throughput` for them.
//!
//! Models are matched by the first entry their name contains, case
//! ignored, longest names first (`A100-SXM4-80GB` is an A100, `L40S` is
//! not an `L4`). A model the table does not know runs at the speed it was
//! measured on: its duration is kept, and the scheduler prices it per hour
//! as if it were a V100 (1).

/// (name part, throughput relative to a V100), longest parts first where
/// one contains another.
const TABLE: &[(&str, f64)] = &[
    ("RTX-4090", 1.8),
    ("RTX 4090", 1.8),
    ("RTX-3090", 1.2),
    ("RTX 3090", 1.2),
    ("GB200", 10.0),
    ("B200", 10.0),
    ("H200", 5.2),
    ("H100", 4.5),
    ("MI300", 4.0),
    ("MI250", 1.8),
    ("A100", 2.2),
    ("A10G", 0.85),
    ("A10", 0.85),
    ("L40S", 2.0),
    ("L4", 0.6),
    ("T4", 0.45),
    ("V100", 1.0),
    ("P100", 0.5),
    ("K80", 0.2),
    ("GAUDI3", 4.0),
    ("GAUDI2", 2.2),
    ("910B", 2.0),
    ("MLU370", 1.2),
];

/// Training throughput of `model` relative to a V100, if the table knows it.
pub fn relative(model: &str) -> Option<f64> {
    entry(model).map(|(_, v)| v)
}

/// The table's name for `model` (`A100-SXM4-80GB` → `A100`), if it knows
/// it: two names with the same entry are the same silicon.
pub fn canonical(model: &str) -> Option<&'static str> {
    entry(model).map(|(k, _)| k)
}

fn entry(model: &str) -> Option<(&'static str, f64)> {
    let m = model.to_ascii_uppercase();
    TABLE.iter().find(|(k, _)| m.contains(k)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_match_by_name_part_longest_first() {
        assert_eq!(relative("A100-SXM4-80GB"), Some(2.2));
        assert_eq!(relative("a10g"), Some(0.85));
        assert_eq!(relative("L40S"), Some(2.0));
        assert_eq!(relative("L4"), Some(0.6));
        assert_eq!(relative("H100-SXM5"), Some(4.5));
        assert_eq!(relative("RTX-4090"), Some(1.8));
        assert_eq!(relative("MI300X"), Some(4.0));
        assert_eq!(relative("GB200"), Some(10.0));
        assert_eq!(relative("gaudi3"), Some(4.0));
        assert_eq!(relative("TPU-v5e"), None);
        assert_eq!(relative("Ascend910B3"), Some(2.0));
        assert_eq!(relative("MLU370-X8"), Some(1.2));
        assert_eq!(relative("MLU590"), None, "no public training figure: priced as a V100");
    }
}
