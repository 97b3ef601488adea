//! Work without GPUs stays off GPU nodes while a CPU node fits, over a
//! whole simulator replay: 3,000 CPU-only jobs and 300 GPU jobs on the demo
//! fleet (six 32-core CPU nodes, which the CPU work fills at its peaks),
//! with the default fault model's failures, retries and churn.
//!
//! The check does not trust the scheduler. A sink follows the run: when
//! virtual time moves on it notes each CPU node's free capacity and state
//! from the engine core; when a CPU-only attempt lands on a GPU node it asks
//! whether some CPU node certainly fitted at that moment: ready and out of
//! quarantine before and after the instant, not among the nodes and pools
//! the workload was tried on (which its exclusions may hold), not one that
//! refused a launch for capacity in that instant (its provider says it is
//! full; the engine then counts it as full), and with room for the work
//! even after everything placed on it in that instant. Any such placement
//! fails the test. A placement is an attempt row in state `placing`: one
//! refused for capacity gives its attempt id to the next placement.

use canopy::engine::core::Core;
use canopy::engine::model::{AttemptId, AttemptState, Millis, Record, WorkloadId};
use canopy::fleet::synth::SplitMix64;
use canopy::fleet::{Fleet, Free, NodeIdx, NodeState, load};
use canopy::sim::{self, FaultModel, Format, Input, PlacementPolicy, RecordSink};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

const CPU_JOBS: usize = 3_000;
const GPU_JOBS: usize = 300;
const LAST_RESORT: &str = "; GPU node used as a last resort: no CPU-only node fits";

/// CPU-only jobs arriving every 40 s on average for 5–60 minutes each
/// (about the 48 that fit the CPU nodes at once, so they fill at times),
/// and GPU jobs of 1–8 GPUs over the same span.
fn trace() -> String {
    let mut rng = SplitMix64::new(15);
    let mut rows = Vec::new();
    let mut t = 0.0;
    for i in 0..CPU_JOBS {
        t += -40.0 * (1.0 - rng.unit()).ln();
        rows.push((t, rng.between(300.0, 3600.0), 0, format!("cpu-{i}")));
    }
    for i in 0..GPU_JOBS {
        let gpus = [1, 1, 2, 4, 8][rng.below(5)];
        rows.push((rng.between(0.0, t), rng.between(1800.0, 4.0 * 3600.0), gpus, format!("gpu-{i}")));
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut csv = String::from("submit_s,duration_s,gpus,name\n");
    for (submit, duration, gpus, name) in rows {
        writeln!(csv, "{submit:.0},{duration:.0},{gpus},{name}").unwrap();
    }
    csv
}

/// One CPU-only placement, until the instant it happened in is over.
struct Placed {
    attempt: AttemptId,
    node: String,
    breakdown: String,
}

/// Follows a run; see the module docs.
struct Checker<'a> {
    fleet: &'a Fleet,
    /// The nodes of pools without GPUs.
    cpu_nodes: Vec<NodeIdx>,
    /// Per CPU node, at the last moment virtual time moved on: its free
    /// capacity, and whether it was ready and out of quarantine.
    before: Vec<(Free, bool)>,
    /// What the work asks for, per workload.
    need: HashMap<WorkloadId, Free>,
    /// Every attempt seen: its node and pool, per workload, in order.
    tried: HashMap<WorkloadId, Vec<(u32, String, String)>>,
    /// Placements seen: attempt and when it was placed.
    seen: HashSet<(AttemptId, Millis)>,
    /// Nodes that refused a launch for capacity in the current instant.
    refused: HashSet<String>,
    /// In the current instant: CPU-only placements, and what every
    /// placement took per node.
    now: Vec<Placed>,
    taken: HashMap<String, Free>,
    cpu_placements: usize,
    on_gpu: usize,
    /// CPU-only placements at a moment a CPU node certainly fitted.
    room: usize,
    violations: Vec<String>,
    unexplained: Vec<String>,
}

impl<'a> Checker<'a> {
    fn new(fleet: &'a Fleet) -> Self {
        let cpu_nodes: Vec<NodeIdx> = (0..fleet.nodes.len() as u32)
            .map(NodeIdx)
            .filter(|&n| fleet.pool(fleet.node(n).pool).shape.gpus_per_node == 0)
            .collect();
        Self {
            fleet,
            before: vec![(Free::default(), false); cpu_nodes.len()],
            cpu_nodes,
            need: HashMap::new(),
            tried: HashMap::new(),
            seen: HashSet::new(),
            refused: HashSet::new(),
            now: Vec::new(),
            taken: HashMap::new(),
            cpu_placements: 0,
            on_gpu: 0,
            room: 0,
            violations: Vec::new(),
            unexplained: Vec::new(),
        }
    }

    /// A node's free capacity and whether it takes work, as `core` has it.
    fn state(&self, core: &Core, n: NodeIdx, at: Millis) -> (Free, bool) {
        let f = core.fleet();
        let node = f.node(n);
        let pool = f.pool(node.pool);
        let usable = node.state == NodeState::Ready
            && !core.health().node(&node.name, at).quarantined
            && !core.health().pool(&f.pool_label(node.pool), at).quarantined
            && !core.health().provider(&f.provider(pool.provider).name, at).quarantined;
        (node.free, usable)
    }

    /// A CPU node that certainly fitted `p` when it was placed, if any.
    fn fitting_cpu_node(&self, core: &Core, p: &Placed, at: Millis) -> Option<String> {
        let need = self.need[&p.attempt.workload];
        let tried = &self.tried[&p.attempt.workload];
        self.cpu_nodes.iter().zip(&self.before).find_map(|(&n, &(free, usable))| {
            let node = self.fleet.node(n);
            let label = self.fleet.pool_label(node.pool);
            let excluded =
                tried.iter().any(|(k, nd, pool)| *k < p.attempt.n && (*nd == node.name || *pool == label));
            let taken = self.taken.get(&node.name).copied().unwrap_or_default();
            let room = free.cpu_cores - taken.cpu_cores >= need.cpu_cores
                && free.memory_gb - taken.memory_gb >= need.memory_gb
                && free.disk_gb - taken.disk_gb >= need.disk_gb;
            let refused = self.refused.contains(&node.name);
            (usable && self.state(core, n, at).1 && !excluded && !refused && room).then(|| node.name.clone())
        })
    }
}

impl RecordSink for Checker<'_> {
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
                }
                Record::Attempt(a) if a.rule.as_deref() == Some("canopy.launch-refused") => {
                    self.refused.insert(a.node.clone());
                }
                Record::Attempt(a)
                    if a.state == AttemptState::Placing && self.seen.insert((a.id, a.placed_at)) =>
                {
                    let need = self.need[&a.id.workload];
                    let t = self.taken.entry(a.node.clone()).or_default();
                    t.cpu_cores += need.cpu_cores;
                    t.memory_gb += need.memory_gb;
                    t.disk_gb += need.disk_gb;
                    self.tried.entry(a.id.workload).or_default().push((
                        a.id.n,
                        a.node.clone(),
                        a.pool.clone(),
                    ));
                    if need.gpus == 0 {
                        self.now.push(Placed {
                            attempt: a.id,
                            node: a.node.clone(),
                            breakdown: a.score_breakdown.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
    }

    fn settled(&mut self, at: Millis, _: Option<Millis>, core: &Core) {
        for p in std::mem::take(&mut self.now) {
            self.cpu_placements += 1;
            let fitting = self.fitting_cpu_node(core, &p, at);
            self.room += usize::from(fitting.is_some());
            let node = self.fleet.nodes.iter().find(|n| n.name == p.node).expect("placed on a fleet node");
            if self.fleet.pool(node.pool).shape.gpus_per_node == 0 {
                continue;
            }
            self.on_gpu += 1;
            if let Some(cpu) = fitting {
                self.violations.push(format!("{} on {} at {} while {cpu} fitted", p.attempt, p.node, at.0));
            }
            if !p.breakdown.ends_with(LAST_RESORT) {
                self.unexplained.push(format!("{} on {}: {:?}", p.attempt, p.node, p.breakdown));
            }
        }
        self.taken.clear();
        self.refused.clear();
        self.before = self.cpu_nodes.iter().map(|&n| self.state(core, n, at)).collect();
    }
}

#[test]
fn cpu_only_work_lands_on_a_gpu_node_only_when_no_cpu_node_fits() {
    let fleet = load::demo().expect("demo fleet");
    let text = trace();
    let jobs = sim::trace::parse(Format::Csv, &text, "cpu-mix.csv").expect("trace");
    assert_eq!(jobs.iter().filter(|j| j.gpus == 0).count(), CPU_JOBS);
    let faults = FaultModel::default();
    // Random draws among every feasible pool on purpose (a baseline), so
    // it is not held to the rule.
    for policy in [PlacementPolicy::HealthAware, PlacementPolicy::CheapestFirst, PlacementPolicy::Blocklist] {
        let input = Input {
            fleet: &fleet,
            jobs: &jobs,
            faults: &faults,
            seed: 0,
            policies: &[policy],
            optimize: Default::default(),
            fleet_name: "demo",
            trace_name: "cpu-mix",
            tenancy: None,
        };
        let mut check = Checker::new(&fleet);
        let report = sim::simulate(&input, &mut check).expect("runs");
        let name = policy.name();
        eprintln!(
            "{name}: {} CPU-only placements, {} on GPU nodes, {} while a CPU node fitted; {:.1}% completed, ${:.0}, queue p99 {:.2} h",
            check.cpu_placements,
            check.on_gpu,
            check.room,
            report.policies[0].completed_pct,
            report.policies[0].cost_usd,
            report.policies[0].queue_p99_h,
        );
        assert!(
            check.violations.is_empty(),
            "{name}: {} placements, first: {:?}",
            check.violations.len(),
            &check.violations[..check.violations.len().min(5)]
        );
        assert!(
            check.unexplained.is_empty(),
            "{name}: {:?}",
            &check.unexplained[..check.unexplained.len().min(5)]
        );
        // Not vacuous: every CPU-only job was placed, the check found a
        // CPU node with room most of the time, and the CPU nodes filled
        // often enough that work went to GPU nodes as a last resort.
        assert!(check.cpu_placements >= CPU_JOBS, "{name}: {}", check.cpu_placements);
        assert!(check.room > CPU_JOBS / 2, "{name}: {}", check.room);
        assert!(check.on_gpu > 0, "{name}: the CPU nodes never filled");
    }
}
