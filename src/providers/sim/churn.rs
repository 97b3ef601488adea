//! Capacity churn: other tenants' usage of each node drifts as a seeded,
//! mean-reverting random walk, and nodes occasionally go down and come back.
//!
//! [`step`] is a pure function of (the node's load, its shape, the config,
//! a stream seeded by (seed, node, step number)), so the market's capacity
//! at a given step does not depend on how often anyone looked. Owns only
//! this arithmetic: the market applies steps and decides what a node going
//! down means for attempts on it.

use super::rng::Rng;
use crate::fleet::{Free, NodeState, Shape};
use std::time::Duration;

/// How capacity moves over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChurnConfig {
    /// Time between steps.
    pub step: Duration,
    /// Chance per step that a node's usage by others moves by one unit
    /// (a GPU, or an eighth of the cores on CPU pools).
    pub drift: f64,
    /// Chance per node per hour that a ready node goes down.
    pub down_per_hour: f64,
    /// How long a down node stays down on average.
    pub mean_downtime: Duration,
}

impl ChurnConfig {
    /// A quiet production-like fleet: a node in 500 goes down per hour,
    /// for 20 minutes on average.
    pub const CALIBRATED: ChurnConfig = ChurnConfig {
        step: Duration::from_secs(30),
        drift: 0.2,
        down_per_hour: 0.002,
        mean_downtime: Duration::from_secs(20 * 60),
    };

    /// Visible within minutes on the demo fleet's ~90 nodes: about four
    /// outages an hour, three minutes each.
    pub const DEMO: ChurnConfig = ChurnConfig {
        step: Duration::from_secs(15),
        drift: 0.3,
        down_per_hour: 0.05,
        mean_downtime: Duration::from_secs(3 * 60),
    };

    /// Nothing moves.
    pub const NONE: ChurnConfig = ChurnConfig {
        step: Duration::from_secs(30),
        drift: 0.0,
        down_per_hour: 0.0,
        mean_downtime: Duration::ZERO,
    };

    fn down_chance(&self) -> f64 {
        self.down_per_hour * self.step.as_secs_f64() / 3600.0
    }

    fn up_chance(&self) -> f64 {
        let mean = self.mean_downtime.as_secs_f64();
        if mean <= 0.0 { 1.0 } else { (self.step.as_secs_f64() / mean).min(1.0) }
    }
}

/// One node's state as the market tracks it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLoad {
    pub state: NodeState,
    /// What other tenants use now.
    pub others: Free,
    /// What they used at the start: the walk reverts toward it.
    pub base: Free,
}

/// The node one step later. Only `Ready` and `Down` change: cordoned and
/// draining nodes are an operator's decision and stay as they are.
pub fn step(node: &NodeLoad, shape: &Shape, cfg: &ChurnConfig, rng: &mut Rng) -> NodeLoad {
    let mut next = *node;
    match node.state {
        NodeState::Ready if rng.chance(cfg.down_chance()) => next.state = NodeState::Down,
        NodeState::Down if rng.chance(cfg.up_chance()) => next.state = NodeState::Ready,
        _ => {}
    }
    if !rng.chance(cfg.drift) {
        return next;
    }
    // Mean-reverting walk over "units": GPUs, or eighths of the cores.
    let (cap, cur, base) = if shape.gpus_per_node > 0 {
        (f64::from(shape.gpus_per_node), f64::from(node.others.gpus), f64::from(node.base.gpus))
    } else {
        let unit = shape.cpu_cores / 8.0;
        if unit <= 0.0 {
            return next;
        }
        (8.0, (node.others.cpu_cores / unit).round(), (node.base.cpu_cores / unit).round())
    };
    let p_up = (0.5 - 0.5 * (cur - base) / cap).clamp(0.1, 0.9);
    let units = if rng.chance(p_up) { cur + 1.0 } else { cur - 1.0 }.clamp(0.0, cap);
    let frac = units / cap;
    // Other tenants' CPU, memory and disk follow their GPU share.
    let follow =
        |base_v: f64, whole: f64, base_frac: f64| (base_v + (frac - base_frac) * whole).clamp(0.0, whole);
    let base_frac = base / cap;
    next.others = Free {
        gpus: if shape.gpus_per_node > 0 { units as u32 } else { 0 },
        cpu_cores: follow(node.base.cpu_cores, shape.cpu_cores, base_frac),
        memory_gb: follow(node.base.memory_gb, shape.memory_gb, base_frac),
        disk_gb: node.base.disk_gb,
    };
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accel::Interconnect;

    fn shape(gpus: u32) -> Shape {
        Shape {
            accelerator: None,
            gpus_per_node: gpus,
            interconnect: Interconnect::Pcie,
            cpu_cores: 64.0,
            memory_gb: 512.0,
            disk_gb: 1000.0,
            fabric: None,
        }
    }

    fn walk(gpus: u32, base_gpus: u32, cfg: &ChurnConfig, steps: u64) -> Vec<NodeLoad> {
        let base = Free { gpus: base_gpus, cpu_cores: 8.0 * base_gpus as f64, memory_gb: 0.0, disk_gb: 0.0 };
        let mut n = NodeLoad { state: NodeState::Ready, others: base, base };
        (0..steps)
            .map(|k| {
                n = step(&n, &shape(gpus), cfg, &mut Rng::stream_n(1, "churn", "node-a", k));
                n
            })
            .collect()
    }

    #[test]
    fn usage_drifts_within_the_node_and_reverts_toward_its_start() {
        let cfg = ChurnConfig { drift: 1.0, ..ChurnConfig::NONE };
        let path = walk(8, 2, &cfg, 5_000);
        assert!(path.iter().all(|n| n.others.gpus <= 8));
        assert!(path.iter().all(|n| (0.0..=64.0).contains(&n.others.cpu_cores)));
        let distinct: std::collections::HashSet<u32> = path.iter().map(|n| n.others.gpus).collect();
        assert!(distinct.len() >= 4, "it moves: {distinct:?}");
        let mean = path.iter().map(|n| n.others.gpus as f64).sum::<f64>() / path.len() as f64;
        assert!((mean - 2.0).abs() < 1.0, "reverts toward 2, mean {mean}");
    }

    #[test]
    fn nodes_go_down_and_come_back() {
        let cfg = ChurnConfig { down_per_hour: 6.0, ..ChurnConfig::DEMO };
        let path = walk(4, 0, &cfg, 2_000);
        let down = path.iter().filter(|n| n.state == NodeState::Down).count();
        assert!(down > 0 && down < 2_000, "{down}");
        let flips = path.windows(2).filter(|w| w[0].state != w[1].state).count();
        assert!(flips >= 4, "{flips}");
    }

    #[test]
    fn no_churn_means_nothing_moves_and_cordons_stay() {
        assert!(
            walk(8, 3, &ChurnConfig::NONE, 500)
                .iter()
                .all(|n| n.others.gpus == 3 && n.state == NodeState::Ready)
        );
        let free = Free::default();
        let cordoned = NodeLoad { state: NodeState::Cordoned, others: free, base: free };
        let cfg = ChurnConfig { down_per_hour: 1e6, ..ChurnConfig::DEMO };
        let after = step(&cordoned, &shape(8), &cfg, &mut Rng::stream(1, "c", "n"));
        assert_eq!(after.state, NodeState::Cordoned);
    }

    #[test]
    fn cpu_pools_drift_in_core_units() {
        let cfg = ChurnConfig { drift: 1.0, ..ChurnConfig::NONE };
        let free = Free::default();
        let mut n = NodeLoad { state: NodeState::Ready, others: free, base: free };
        for k in 0..200 {
            n = step(&n, &shape(0), &cfg, &mut Rng::stream_n(2, "churn", "cpu", k));
            assert_eq!(n.others.gpus, 0);
            assert!((n.others.cpu_cores / 8.0).fract() == 0.0 && n.others.cpu_cores <= 64.0);
        }
    }
}
