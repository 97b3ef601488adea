//! A trace job's duration was measured on one accelerator model; on another
//! it runs that duration times the ratio of their throughputs
//! ([`crate::fleet::throughput`], the table the scheduler prices by too).

use crate::fleet::Accelerator;
use crate::fleet::throughput::relative;

/// The model every trace duration is taken to be measured on unless the
/// trace says otherwise.
pub const REFERENCE: &str = "V100";

/// How much faster a GPU `on` runs a job than `measured_on` did: the job's
/// run time there is its duration divided by this. 1 when either is
/// unknown (the fleet states no throughput and the table does not know
/// the model) and for work without GPUs.
pub fn speedup(measured_on: &str, on: Option<&Accelerator>) -> f64 {
    match (relative(measured_on), on.and_then(Accelerator::known_speed)) {
        (Some(a), Some(b)) if a > 0.0 && b > 0.0 => b / a,
        _ => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(model: &str, throughput: Option<f64>) -> Accelerator {
        Accelerator {
            vendor: crate::accel::Vendor::Nvidia,
            model: model.into(),
            family: crate::accel::Family::Hopper,
            compute_capability: crate::accel::ComputeCapability::new(9, 0),
            memory_gb: 80.0,
            throughput,
        }
    }

    #[test]
    fn run_time_scales_by_the_ratio_to_the_measured_model() {
        assert!((speedup("V100", Some(&gpu("H100-SXM5", None))) - 4.5).abs() < 1e-12);
        assert!((speedup("P100", Some(&gpu("V100", None))) - 2.0).abs() < 1e-12);
        assert_eq!(speedup("V100", Some(&gpu("unknown", None))), 1.0);
        assert_eq!(speedup("unknown", Some(&gpu("A100", None))), 1.0);
        assert_eq!(speedup("V100", None), 1.0);
        // A figure the fleet states wins over the table's.
        assert!((speedup("V100", Some(&gpu("H100-SXM5", Some(3.0)))) - 3.0).abs() < 1e-12);
        assert!((speedup("V100", Some(&gpu("X-9000", Some(7.0)))) - 7.0).abs() < 1e-12);
    }
}
