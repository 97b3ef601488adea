//! Launches, capacity refusals and where CPU-only work ran, on a busy
//! demo fleet: the figures of issue #23 items 6 and 7, measured in the
//! simulator (`canopy::sim`: the engine core itself, in virtual time, with
//! the default fault model's launch refusals, failures, retries and node
//! churn). No processes run; a run takes seconds.
//!
//! The mix: 10,000 workloads, 6,000 of them CPU-only (2 cores, 8 GB, 5–60
//! minutes, arriving every 40 s on average, about what the demo fleet's
//! six 32-core CPU nodes hold at once, so they fill at times) and 4,000 GPU
//! jobs of 1–4 GPUs for 30 minutes to 2 hours over the same span.
//! `--cpu-every S` spaces the CPU-only arrivals `S` seconds apart on
//! average instead (60: the CPU nodes rarely fill).
//!
//! `cargo run --release --example busy_mix -- [--seed N] [--policy canopy|all] [--cpu-every S]`
//!
//! Prints, per policy: placements (each is one launch call, re-sends
//! aside) and attempt rows per workload (total, most for one workload),
//! launches refused for capacity, how many CPU-only workloads ran on a GPU
//! node, and how many CPU-only placements on a GPU node happened while a
//! CPU node fitted, judged as `tests/sim_cpu_work.rs` judges it: in the
//! engine's view of the moment before, ready and out of quarantine before
//! and after, not a node the workload failed on or was refused by, with
//! room after everything else placed on it in that instant. Then the
//! queue wait (submit to first start, in minutes; work that never started
//! counts as waiting to the end of the run) at p50 and p99, for CPU-only
//! and GPU work apart, so that keeping CPU work off GPU nodes is seen with
//! what it costs either kind.

use canopy::engine::core::Core;
use canopy::engine::model::{AttemptState, EventKind, Millis, Record, WorkloadId};
use canopy::fleet::synth::SplitMix64;
use canopy::fleet::{Fleet, Free, NodeIdx, NodeState, load};
use canopy::sim::{self, FaultModel, Format, Input, PlacementPolicy, RecordSink};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write;

const CPU_JOBS: usize = 6_000;
const GPU_JOBS: usize = 4_000;

fn trace(seed: u64, cpu_every: f64) -> String {
    let mut rng = SplitMix64::new(seed);
    let mut rows = Vec::new();
    let mut t = 0.0;
    for i in 0..CPU_JOBS {
        t += -cpu_every * (1.0 - rng.unit()).ln();
        rows.push((t, rng.between(300.0, 3600.0), 0, format!("cpu-{i}")));
    }
    for i in 0..GPU_JOBS {
        let gpus = [1, 1, 1, 2, 4][rng.below(5)];
        rows.push((rng.between(0.0, t), rng.between(1800.0, 2.0 * 3600.0), gpus, format!("gpu-{i}")));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut csv = String::from("submit_s,duration_s,gpus,name\n");
    for (submit, duration, gpus, name) in rows {
        let _ = writeln!(csv, "{submit:.0},{duration:.0},{gpus},{name}");
    }
    csv
}

#[derive(Default)]
struct Counts<'a> {
    fleet: Option<&'a Fleet>,
    cpu_nodes: Vec<NodeIdx>,
    /// Per CPU node at the last settled moment: free capacity, usable.
    before: Vec<(Free, bool)>,
    need: HashMap<WorkloadId, Free>,
    placements: BTreeMap<WorkloadId, u32>,
    rows: BTreeMap<WorkloadId, BTreeSet<u32>>,
    refusals: u64,
    /// CPU-only workloads with an attempt that started on a GPU node.
    cpu_ran_on_gpu: BTreeSet<WorkloadId>,
    cpu_placed_on_gpu: u64,
    /// The same by GPUs per node of the pool.
    cpu_placed_by_gpus: BTreeMap<u32, u64>,
    /// CPU-only workloads that waited for CPU capacity rather than take a
    /// GPU node waiting GPU work could use.
    cpu_waited: BTreeSet<WorkloadId>,
    cpu_placed_on_gpu_with_room: u64,
    /// CPU-only placements on a GPU node in the current instant.
    pending: Vec<WorkloadId>,
    /// What placements took per node in the current instant.
    taken: HashMap<String, Free>,
    /// Nodes that refused a launch for capacity in the current instant.
    refused: BTreeSet<String>,
    /// Nodes each workload's earlier attempts ended on (its exclusions may
    /// hold them).
    tried: HashMap<WorkloadId, BTreeSet<String>>,
    placed: BTreeSet<(u64, u32, i64)>,
    /// When each workload was submitted, and when its first attempt started.
    submitted: HashMap<WorkloadId, Millis>,
    first_start: HashMap<WorkloadId, Millis>,
    /// The last settled moment.
    end: Millis,
}

impl Counts<'_> {
    /// Queue wait (submit to first start) in minutes, p50 and p99, of the
    /// CPU-only (`cpu`) or GPU workloads; those that never started count
    /// as waiting until `end`.
    fn queue_wait(&self, cpu: bool, end: Millis) -> (f64, f64) {
        let mut waits: Vec<f64> = self
            .submitted
            .iter()
            .filter(|(id, _)| self.need.get(id).is_some_and(|n| (n.gpus == 0) == cpu))
            .map(|(id, &sub)| self.first_start.get(id).copied().unwrap_or(end).secs_since(sub) / 60.0)
            .collect();
        waits.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p * waits.len() as f64).ceil() as usize).clamp(1, waits.len().max(1));
            waits.get(rank - 1).copied().unwrap_or(0.0)
        };
        (at(0.50), at(0.99))
    }

    fn gpu_node(&self, name: &str) -> bool {
        let f = self.fleet.expect("set");
        f.node_by_name(name).is_some_and(|n| f.pool(f.node(n).pool).shape.gpus_per_node > 0)
    }
}

impl RecordSink for Counts<'_> {
    fn batch(&mut self, _: Millis, records: &[Record]) {
        for r in records {
            match r {
                Record::Workload(w) => {
                    let r = &w.spec.resources;
                    let need = Free {
                        gpus: r.gpus,
                        cpu_cores: r.cpu_cores,
                        memory_gb: r.memory_gb,
                        disk_gb: r.disk_gb,
                    };
                    self.need.entry(w.id).or_insert(need);
                    self.submitted.entry(w.id).or_insert(w.submitted_at);
                }
                Record::Attempt(a) => {
                    if let Some(t) = a.started_at {
                        self.first_start.entry(a.id.workload).and_modify(|s| *s = (*s).min(t)).or_insert(t);
                    }
                    self.rows.entry(a.id.workload).or_default().insert(a.id.n);
                    let cpu = self.need.get(&a.id.workload).is_some_and(|n| n.gpus == 0);
                    let new = a.state == AttemptState::Placing
                        && self.placed.insert((a.id.workload.0, a.id.n, a.placed_at.0));
                    if new {
                        let need = self.need.get(&a.id.workload).copied().unwrap_or_default();
                        let t = self.taken.entry(a.node.clone()).or_default();
                        t.cpu_cores += need.cpu_cores;
                        t.memory_gb += need.memory_gb;
                        t.disk_gb += need.disk_gb;
                    }
                    if a.rule.as_deref() == Some("canopy.launch-refused") {
                        self.refused.insert(a.node.clone());
                    } else if a.state.is_final() {
                        self.tried.entry(a.id.workload).or_default().insert(a.node.clone());
                    }
                    if cpu && new && self.gpu_node(&a.node) {
                        self.cpu_placed_on_gpu += 1;
                        let f = self.fleet.expect("set");
                        if let Some(n) = f.node_by_name(&a.node) {
                            *self
                                .cpu_placed_by_gpus
                                .entry(f.pool(f.node(n).pool).shape.gpus_per_node)
                                .or_default() += 1;
                        }
                        self.pending.push(a.id.workload);
                    }
                    if cpu && a.started_at.is_some() && self.gpu_node(&a.node) {
                        self.cpu_ran_on_gpu.insert(a.id.workload);
                    }
                    // Before the fix a refusal closed an attempt that never
                    // started as class capacity.
                    if a.state == AttemptState::Failed
                        && a.started_at.is_none()
                        && a.rule.as_deref() == Some("provider.launch-capacity")
                    {
                        self.refusals += 1;
                    }
                }
                Record::Event(e) => {
                    if e.kind == EventKind::Placed {
                        *self.placements.entry(e.workload).or_default() += 1;
                    }
                    if e.kind == EventKind::Unschedulable && e.message.contains("for CPU-only capacity") {
                        self.cpu_waited.insert(e.workload);
                    }
                    if e.kind.as_str() == "refused" {
                        self.refusals += 1;
                    }
                }
                _ => {}
            }
        }
    }

    fn settled(&mut self, at: Millis, _: Option<Millis>, core: &Core) {
        let f = core.fleet();
        let usable = |n: NodeIdx| {
            let node = f.node(n);
            let pool = f.pool(node.pool);
            node.state == NodeState::Ready
                && !core.health().node(&node.name, at).quarantined
                && !core.health().pool(&f.pool_label(node.pool), at).quarantined
                && !core.health().provider(&f.provider(pool.provider).name, at).quarantined
        };
        for w in std::mem::take(&mut self.pending) {
            let need = self.need[&w];
            let tried = self.tried.get(&w);
            let room = self.cpu_nodes.iter().zip(&self.before).any(|(&n, (free, before))| {
                let name = &f.node(n).name;
                let taken = self.taken.get(name).copied().unwrap_or_default();
                *before
                    && usable(n)
                    && !self.refused.contains(name)
                    && !tried.is_some_and(|t| t.contains(name))
                    && free.cpu_cores - taken.cpu_cores + 1e-9 >= need.cpu_cores
                    && free.memory_gb - taken.memory_gb + 1e-9 >= need.memory_gb
                    && free.disk_gb - taken.disk_gb + 1e-9 >= need.disk_gb
            });
            self.cpu_placed_on_gpu_with_room += u64::from(room);
        }
        self.taken.clear();
        self.refused.clear();
        self.before = self.cpu_nodes.iter().map(|&n| (f.node(n).free, usable(n))).collect();
        self.end = self.end.max(at);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seed: u64 = flag("--seed").map_or(Ok(0), |s| s.parse())?;
    let cpu_every: f64 = flag("--cpu-every").map_or(Ok(40.0), |s| s.parse())?;
    let policies = match flag("--policy").as_deref() {
        None | Some("canopy") => vec![PlacementPolicy::HealthAware],
        Some("all") => {
            vec![PlacementPolicy::HealthAware, PlacementPolicy::CheapestFirst, PlacementPolicy::Blocklist]
        }
        Some(other) => return Err(format!("unknown policy {other:?} (canopy or all)").into()),
    };
    let fleet = load::demo()?;
    let text = trace(15 + seed, cpu_every);
    let jobs = sim::trace::parse(Format::Csv, &text, "busy-mix.csv")?;
    let faults = FaultModel::default();
    for policy in policies {
        let input = Input {
            fleet: &fleet,
            jobs: &jobs,
            faults: &faults,
            seed,
            policies: &[policy],
            optimize: Default::default(),
            fleet_name: "demo",
            trace_name: "busy-mix",
            tenancy: None,
        };
        let cpu_nodes: Vec<NodeIdx> = (0..fleet.nodes.len() as u32)
            .map(NodeIdx)
            .filter(|&n| fleet.pool(fleet.node(n).pool).shape.gpus_per_node == 0)
            .collect();
        let mut c = Counts { fleet: Some(&fleet), cpu_nodes, ..Counts::default() };
        let report = sim::simulate(&input, &mut c)?;
        let placements: u64 = c.placements.values().map(|&n| u64::from(n)).sum();
        let most_placements = c.placements.values().max().copied().unwrap_or(0);
        let rows: usize = c.rows.values().map(BTreeSet::len).sum();
        let most_rows = c.rows.values().map(BTreeSet::len).max().unwrap_or(0);
        let p = &report.policies[0];
        let (cpu_wait, gpu_wait) = (c.queue_wait(true, c.end), c.queue_wait(false, c.end));
        let by_gpus: Vec<String> =
            c.cpu_placed_by_gpus.iter().map(|(g, n)| format!("{n} on {g}-GPU")).collect();
        println!(
            "{}: {} workloads ({} CPU-only); {placements} placements (most for one workload {most_placements}), \
             {rows} attempt rows (most {most_rows}), {} launches refused for capacity; \
             {} CPU-only workloads ran on a GPU node; {} CPU-only placements on a GPU node ({}), {} of them while a \
             CPU node fitted; {} CPU-only workloads waited for CPU capacity; {:.1}% completed, queue p99 {:.2} h; queue wait (min) p50/p99: \
             CPU-only {:.1}/{:.1}, GPU {:.1}/{:.1}",
            policy.name(),
            jobs.len(),
            jobs.iter().filter(|j| j.gpus == 0).count(),
            c.refusals,
            c.cpu_ran_on_gpu.len(),
            c.cpu_placed_on_gpu,
            by_gpus.join(", "),
            c.cpu_placed_on_gpu_with_room,
            c.cpu_waited.len(),
            p.completed_pct,
            p.queue_p99_h,
            cpu_wait.0,
            cpu_wait.1,
            gpu_wait.0,
            gpu_wait.1,
        );
    }
    Ok(())
}
