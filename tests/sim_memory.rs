//! The simulator's memory: what a run holds at its peak, per job, counted
//! by a global allocator that keeps the live bytes and their high-water
//! mark. Counts, never timings (issue 24: 100,000 jobs in at most 100 MB).
//!
//! One test in this binary, so no other test's allocations are counted.

use canopy::sim::{self, FaultModel, Input, NoSink, PlacementPolicy, scale};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call goes to `System` unchanged; the counters are atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `alloc` with this layout.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes at the peak of Canopy's policy over the large scenario of `jobs`
/// jobs on `nodes` nodes, beyond what the trace and fleet hold before it.
fn peak_bytes(jobs: usize, nodes: usize) -> usize {
    let (fleet, jobs, _) = scale::synthetic(jobs, nodes, 0).expect("the Gavel trace parses");
    let faults = FaultModel::default();
    let input = Input {
        fleet: &fleet,
        jobs: &jobs,
        faults: &faults,
        seed: 0,
        policies: &[PlacementPolicy::HealthAware],
        optimize: Default::default(),
        fleet_name: "synth",
        trace_name: "gavel tiled",
        tenancy: None,
    };
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let report = sim::simulate(&input, &mut NoSink).expect("the simulation runs");
    let peak = PEAK.load(Ordering::Relaxed);
    assert_eq!(report.policies[0].workloads, jobs.len());
    peak.saturating_sub(before)
}

/// Failed before: every job's spec was built before the run and kept to
/// its end, so a run's peak grew by that per job whatever was in flight
/// (2,573 bytes a job). Specs are now built when their job arrives and
/// the engine core drops each when its workload ends (1,748). Then every
/// arrival queued up front as an event (about 230 bytes a job): arrivals
/// are now read from the trace in order (1,513). Then the report's
/// tallies kept a hash-map entry per workload (the per-tenant one even
/// without tenants): the metrics tally now keeps a packed entry in a
/// vector, the per-tenant one nothing for a workload without a tenant
/// (1,227).
#[test]
fn a_run_holds_little_per_job_at_its_peak() {
    let (jobs, nodes) = (4_000, 400);
    let peak = peak_bytes(jobs, nodes);
    let per_job = peak as f64 / jobs as f64;
    eprintln!("peak {peak} bytes over {jobs} jobs: {per_job:.0} bytes a job");
    assert!(per_job <= BOUND, "{per_job:.0} bytes a job at the peak of {jobs} jobs over {nodes} nodes");
}

/// Bytes a job at the run's peak (debug build, 4,000 jobs over 400
/// nodes): 2,573 with every spec built before the run, 1,748 with specs
/// built on arrival, 1,513 with arrivals no longer queued as events,
/// 1,227 with the tallies' per-workload maps packed or gone.
const BOUND: f64 = 1_400.0;
