//! The workload spec of each trace job, built when the job arrives.
//!
//! Owns how a trace job becomes a [`Spec`] ([`specs`]) and a gang's split
//! over nodes ([`gang_shape`]). A run holds, per job, only the few numbers
//! its spec is made from ([`Shape`], about 32 bytes) and builds the spec
//! itself when the job is submitted ([`Specs::spec`]); the engine core
//! keeps it while the workload lives and drops it when it ends. Built
//! before the run, every job's spec (about 1.3 KB) was alive for the whole
//! run: 127 MB at 100,000 jobs.

use super::faults::{self, FaultModel};
use super::trace::Job;
use super::{CHECKPOINT_ABOVE_S, CHECKPOINT_EVERY_S};
use crate::accel::Family;
use crate::fleet::Fleet;
use crate::spec::{AcceleratorReq, GbRange, Optimize, Spec};
use std::collections::HashMap;

/// What one job's spec is made from besides its trace row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// `expected_runtime`, seconds.
    pub estimate_s: u64,
    /// `resources.nodes` (0 or 1: one node).
    pub nodes: u32,
    /// `resources.gpus`: GPUs per node.
    pub gpus: u32,
    /// Whether it has `[checkpoint]` (every [`CHECKPOINT_EVERY_S`]).
    pub checkpoint: bool,
    /// Its accelerator families, an index into [`Specs`]' distinct lists;
    /// `None`: any.
    families: Option<u32>,
}

impl Shape {
    /// Nodes it runs on, at least one ([`Spec::nodes`]).
    pub fn node_count(&self) -> u32 {
        self.nodes.max(1)
    }

    /// Seconds between its checkpoints; `None` without `[checkpoint]`.
    pub fn checkpoint_every_s(&self) -> Option<f64> {
        self.checkpoint.then_some(CHECKPOINT_EVERY_S as f64)
    }
}

/// Every job's spec, as the few numbers it is made from: [`Specs::spec`]
/// builds one when its job arrives. Equal inputs give equal specs.
#[derive(Debug, Clone, PartialEq)]
pub struct Specs<'a> {
    jobs: &'a [Job],
    base: Spec,
    /// The distinct accelerator family lists the jobs ask for.
    families: Vec<Vec<Family>>,
    /// Per job, in trace order. Public so a test can change what a job
    /// asks for (say, drop its checkpoints) without a trace of its own.
    pub shapes: Vec<Shape>,
}

impl Specs<'_> {
    /// How many jobs.
    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// Job `i`'s shape; `None` past the end.
    pub fn shape(&self, i: usize) -> Option<&Shape> {
        self.shapes.get(i)
    }

    /// Job `i`'s spec, built anew (see [`specs`]); `None` past the end.
    pub fn spec(&self, i: usize) -> Option<Spec> {
        let (j, shape) = (self.jobs.get(i)?, self.shapes.get(i)?);
        let mut s = self.base.clone();
        s.name = sanitize(&j.name);
        s.expected_runtime = Some(crate::units::HumanDuration::from_secs(shape.estimate_s));
        if shape.checkpoint {
            s.checkpoint = Some(crate::spec::Checkpoint {
                path: "/ckpt".into(),
                keep: Default::default(),
                interval: Some(crate::units::HumanDuration::from_secs(CHECKPOINT_EVERY_S)),
                max_gb: None,
            });
        }
        let g = f64::from(shape.gpus);
        s.resources.nodes = shape.nodes;
        s.resources.gpus = shape.gpus;
        s.resources.cpu_cores = if shape.gpus == 0 { 2.0 } else { 4.0 * g };
        s.resources.memory_gb = if shape.gpus == 0 { 8.0 } else { 16.0 * g };
        if let Some(m) = j.gpu_memory_gb {
            s.resources.gpu_memory_gb = Some(GbRange { min: Some(m), max: None });
        }
        if let Some(f) = shape.families.and_then(|f| self.families.get(f as usize)) {
            s.resources.accelerator = Some(AcceleratorReq { family: f.clone(), ..Default::default() });
        }
        Some(s)
    }

    /// Every job's spec at once, in trace order: for tests and small
    /// traces (a run builds each when its job arrives).
    pub fn all(&self) -> Vec<Spec> {
        (0..self.len()).filter_map(|i| self.spec(i)).collect()
    }
}

/// A workload spec per job: its GPUs with 4 cores and 16 GB of host memory
/// per GPU (2 cores and 8 GB without GPUs), interruptible capacity
/// allowed, the default retry policy, `optimize` as given, and the GPU
/// type and memory the trace names. A GPU type must name (part of) an
/// accelerator model in the fleet; the spec then accepts that model's
/// families.
///
/// - **Runtime estimate**: `expected_runtime` is the job's duration times
///   [`faults::estimate_factor`] (seeded; users' estimates are rough and
///   mostly high), never the exact duration.
/// - **Checkpoints**: a job whose estimate exceeds [`CHECKPOINT_ABOVE_S`]
///   gets `[checkpoint]` with `interval` [`CHECKPOINT_EVERY_S`] (as a user
///   would configure it, from what they expect), and the simulator
///   resumes its next attempt from its last checkpoint.
/// - **Gangs**: a job wanting more GPUs than the fleet's largest node gets
///   `resources.nodes` ([`gang_shape`]): the fewest nodes whose equal
///   share of its GPUs fits a pool's node shape, in a pool with that many
///   nodes; `resources.gpus` is then the share per node.
///
/// Refused (before any run) when a job's GPU type names no accelerator in
/// the fleet.
pub fn specs<'a>(
    jobs: &'a [Job],
    fleet: &Fleet,
    optimize: Optimize,
    seed: u64,
    model: &FaultModel,
) -> Result<Specs<'a>, String> {
    let mut base = Spec::new("job", vec!["train".into()]);
    base.constraints.interruptible = true;
    base.preferences.optimize = optimize;
    let mut families_of: HashMap<&str, u32> = HashMap::new();
    let mut families_list: Vec<Vec<Family>> = Vec::new();
    let mut gangs: HashMap<u32, (u32, u32)> = HashMap::new();
    let mut shapes = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        let estimate = (j.duration_s * faults::estimate_factor(seed, i, model)).round().max(1.0);
        let (nodes, gpus) = *gangs.entry(j.gpus).or_insert_with(|| gang_shape(j.gpus, fleet));
        let families = match &j.gpu_type {
            None => None,
            Some(t) => Some(match families_of.get(&**t) {
                Some(&f) => f,
                None => {
                    let f =
                        u32::try_from(families_list.len()).map_err(|_| "too many GPU types".to_string())?;
                    families_list.push(families(fleet, t)?);
                    families_of.insert(t, f);
                    f
                }
            }),
        };
        shapes.push(Shape {
            estimate_s: estimate as u64,
            nodes,
            gpus,
            checkpoint: estimate > CHECKPOINT_ABOVE_S,
            families,
        });
    }
    Ok(Specs { jobs, base, families: families_list, shapes })
}

/// How a job of `gpus` GPUs is split over nodes: `(nodes, GPUs per
/// node)`. One node when some node shape holds them all; otherwise the
/// fewest nodes `n` such that `gpus` divides into `n` equal shares and
/// some pool has at least `n` nodes of at least that many GPUs each (32
/// GPUs over 8-GPU nodes: 4 × 8; 20 GPUs: 4 × 5 over 8-GPU nodes, since
/// no pool has 10-GPU nodes). When no split fits, one node of all of them
/// (the scheduler then says nothing fits).
pub fn gang_shape(gpus: u32, fleet: &Fleet) -> (u32, u32) {
    let pools: Vec<(u32, usize)> = fleet
        .pools
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let idx = crate::fleet::PoolIdx(i as u32);
            (p.shape.gpus_per_node, fleet.pool_nodes(idx).len())
        })
        .filter(|(g, n)| *g > 0 && *n > 0)
        .collect();
    let largest = pools.iter().map(|p| p.0).max().unwrap_or(0);
    if gpus <= largest {
        return (1, gpus);
    }
    (2..=gpus)
        .find(|&n| {
            gpus.is_multiple_of(n) && pools.iter().any(|&(g, count)| g >= gpus / n && count >= n as usize)
        })
        .map_or((1, gpus), |n| (n, gpus / n))
}

fn families(fleet: &Fleet, gpu_type: &str) -> Result<Vec<Family>, String> {
    let want = gpu_type.to_ascii_lowercase();
    let mut out: Vec<Family> = fleet
        .pools
        .iter()
        .filter_map(|p| p.shape.accelerator.as_ref())
        .filter(|a| a.model.to_ascii_lowercase().contains(&want))
        .map(|a| a.family)
        .collect();
    out.sort_by_key(|f| f.to_string());
    out.dedup();
    if out.is_empty() {
        let mut models: Vec<&str> = fleet
            .pools
            .iter()
            .filter_map(|p| p.shape.accelerator.as_ref())
            .map(|a| a.model.as_str())
            .collect();
        models.sort();
        models.dedup();
        return Err(format!(
            "gpu_type {gpu_type:?} matches no accelerator in the fleet ({})",
            models.join(", ")
        ));
    }
    Ok(out)
}

/// Letters, digits, `-`, `_` and `.`; anything else becomes `-`.
fn sanitize(name: &str) -> String {
    let s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '-' }).collect();
    if s.is_empty() { "job".into() } else { s }
}
