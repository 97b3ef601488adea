//! [`Snapshot::new`]: indexing a fleet and its health view from scratch.

use super::{
    CACHED_STARTUP_REFERENCE_S, ClassInfo, EMPTY, NO_SWITCH, NodeInfo, PoolInfo, PoolRow, PoolSuccess,
    Snapshot, hazard_per_h, pool_success, startup_score, unready,
};
use crate::fleet::{Fleet, NodeIdx, PoolIdx};
use crate::health::HealthView;
use crate::schedule::bitset::PoolSet;
use crate::schedule::filter::{Filter, num};
use crate::schedule::policy::Policy;
use crate::schedule::requirements::Requirements;
use std::collections::HashMap;

impl Snapshot {
    /// Indexes `fleet` with `health`. Costs O(nodes · log nodes); meant to
    /// be built once per fleet or health change and shared by decisions.
    pub fn new(fleet: &Fleet, health: &HealthView) -> Self {
        let fleet = fleet.clone();
        let n_pools = fleet.pools.len();

        let mut regions: Vec<String> = fleet.pools.iter().map(|p| p.region.clone()).collect();
        regions.sort();
        regions.dedup();
        let mut region_pools = vec![PoolSet::empty(n_pools); regions.len()];
        let mut provider_pools = vec![PoolSet::empty(n_pools); fleet.providers.len()];
        let mut compliance_pools: HashMap<String, PoolSet> = HashMap::new();
        let mut interruptible = PoolSet::empty(n_pools);
        let mut provider_quarantined = PoolSet::empty(n_pools);
        let mut pool_quarantined = PoolSet::empty(n_pools);
        let mut classes: Vec<ClassInfo> = Vec::new();
        // Fleet class id → snapshot classes carrying it. A fleet built by
        // hand may give unequal shapes one class id; those are split here.
        let mut by_fleet_class: HashMap<u32, Vec<u32>> = HashMap::new();

        let labels: Vec<String> = (0..n_pools).map(|i| fleet.pool_label(PoolIdx(i as u32))).collect();
        let label_rank = ranks(&labels);
        let node_names: Vec<String> = fleet.nodes.iter().map(|n| n.name.clone()).collect();
        let node_rank = ranks(&node_names);

        let cached = Requirements::default();
        let cached_policy = Policy { startup_reference_s: CACHED_STARTUP_REFERENCE_S, ..Policy::default() };
        let nodes: Vec<NodeInfo> = fleet
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let h = health.node(&n.name);
                NodeInfo { health: h, name_rank: node_rank[i], quarantined: h.quarantined }
            })
            .collect();

        let mut rows = Vec::with_capacity(n_pools);
        let mut success = Vec::with_capacity(n_pools);
        let mut pools = Vec::with_capacity(n_pools);
        let mut index = Vec::new();
        let mut index_at = Vec::new();
        let mut index_len = Vec::new();
        let mut heads = Vec::new();
        let mut usable_at = Vec::new();
        let (switch_of, pool_switches) = switch_ids(&fleet);
        let mut switch_at = Vec::new();
        let mut switch_count = Vec::new();
        let mut switch_max = Vec::new();
        for (i, pool) in fleet.pools.iter().enumerate() {
            let p = PoolIdx(i as u32);
            let provider = fleet.provider(pool.provider);
            // Always found: `regions` was collected from these very pools.
            let region = regions.binary_search(&pool.region).unwrap_or(0) as u32;
            region_pools[region as usize].insert(i);
            provider_pools[pool.provider.0 as usize].insert(i);
            for tag in &pool.compliance {
                compliance_pools.entry(tag.clone()).or_insert_with(|| PoolSet::empty(n_pools)).insert(i);
            }
            if pool.interruptible {
                interruptible.insert(i);
            }
            let provider_health = health.provider(&provider.name);
            let pool_health = health.pool(&labels[i]);
            if provider_health.quarantined {
                provider_quarantined.insert(i);
            }
            if pool_health.quarantined {
                pool_quarantined.insert(i);
            }

            let same = by_fleet_class.entry(pool.class.0).or_default();
            let found = same.iter().copied().find(|&c| {
                let rep = fleet.pool(classes[c as usize].rep);
                rep.shape == pool.shape && rep.capabilities == pool.capabilities
            });
            let class = found.unwrap_or_else(|| {
                classes.push(ClassInfo { rep: p, pools: PoolSet::empty(n_pools) });
                let c = classes.len() as u32 - 1;
                same.push(c);
                c
            });
            classes[class as usize].pools.insert(i);

            let health = provider_health.score * pool_health.score;
            let pool_succ =
                PoolSuccess::exact(&nodes, pool.nodes.clone(), pool_success(&pool_health, &provider_health));
            success.push(pool_succ);
            // Room for the lists (one per free-GPU threshold); filled below.
            let index_base = index_at.len() as u32;
            for _ in 0..=pool.shape.gpus_per_node {
                index_at.push(index.len() as u32);
                index_len.push(0);
                usable_at.push(index.len() as u32);
                heads.push(EMPTY);
                index.resize(index.len() + pool.nodes.len(), EMPTY);
                switch_at.push(switch_count.len() as u32);
                switch_count.resize(switch_count.len() + pool_switches[i].len(), 0);
                switch_max.push(0);
            }
            rows.push(PoolRow {
                price: pool.price_per_hour,
                startup_s: pool.startup.as_secs_f64(),
                startup_score: startup_score(pool.startup.as_secs_f64(), &cached, &cached_policy),
                health,
                health_bound: pool_succ.health_bound(health),
                success_bound: pool_succ.success_bound(),
                gpu_memory: pool.gpu_memory_gb(),
                held: fleet.pool_nodes(p).iter().map(|n| n.canopy_gpus as u64).sum(),
                limit: pool.lend_limit_gpus.map_or(u64::MAX, u64::from),
                provider: pool.provider.0,
                class,
                region,
                label_rank: label_rank[i],
                index_base,
                gpus_per_node: pool.shape.gpus_per_node,
                reserved: pool.reserved,
                hazard_per_h: hazard_per_h(&pool_health, pool.interruptible),
                speed: pool.shape.accelerator.as_ref().map_or(1.0, crate::fleet::Accelerator::relative_speed),
            });
            pools.push(PoolInfo {
                label: labels[i].clone(),
                accelerator: accelerator_text(&fleet, p),
                health: pool_health,
                provider_health,
                // Set with the lists below.
                unready: Filter::NoNodes,
            });
        }
        let mut provider_lend: Vec<(u64, u64)> =
            fleet.providers.iter().map(|p| (0, p.lend_limit_gpus.map_or(u64::MAX, u64::from))).collect();
        for (row, p) in rows.iter().zip(&fleet.pools) {
            provider_lend[p.provider.0 as usize].0 += row.held;
        }
        let min_gpu_memory =
            rows.iter().map(|r| r.gpu_memory).filter(|&m| m > 0.0).fold(f64::INFINITY, f64::min);
        let pool_by_label = labels.into_iter().enumerate().map(|(i, l)| (l, PoolIdx(i as u32))).collect();
        let node_by_name = node_names.into_iter().enumerate().map(|(i, n)| (n, NodeIdx(i as u32))).collect();
        let limited_pools = (0..n_pools as u32).filter(|&p| rows[p as usize].limit != u64::MAX).collect();
        let limited_providers =
            (0..provider_lend.len() as u32).filter(|&p| provider_lend[p as usize].1 != u64::MAX).collect();
        let mut snap = Self {
            switch_of,
            pool_switches,
            switch_at,
            switch_count,
            switch_max,
            stamp: 0,
            node_stamp: vec![0; n_pools],
            quarantine_stamp: 0,
            limited_pools,
            limited_providers,
            all_pools: PoolSet::full(n_pools),
            fleet,
            rows,
            success,
            pools,
            provider_lend,
            classes,
            nodes,
            regions,
            region_pools,
            provider_pools,
            compliance_pools,
            interruptible,
            provider_quarantined,
            pool_quarantined,
            min_gpu_memory: if min_gpu_memory.is_finite() { min_gpu_memory } else { 0.0 },
            stranding: Default::default(),
            pool_by_label,
            node_by_name,
            index,
            index_at,
            index_len,
            usable_at,
            heads,
        };
        for p in 0..n_pools {
            snap.fill_lists(p);
            snap.pools[p].unready = unready(&snap.fleet, &snap.nodes, p);
        }
        snap
    }
}

/// Dense switch ids: pool by pool, each pool's distinct switch names in
/// sorted order. Returns each node's id ([`NO_SWITCH`] for none) and each
/// pool's range of ids.
fn switch_ids(fleet: &Fleet) -> (Vec<u32>, Vec<std::ops::Range<u32>>) {
    let mut of = vec![NO_SWITCH; fleet.nodes.len()];
    let mut ranges = Vec::with_capacity(fleet.pools.len());
    let mut next = 0u32;
    for pool in &fleet.pools {
        let nodes = &fleet.nodes[pool.nodes.start as usize..pool.nodes.end as usize];
        let mut names: Vec<&str> = nodes.iter().filter_map(|n| n.switch.as_deref()).collect();
        names.sort_unstable();
        names.dedup();
        for (j, n) in nodes.iter().enumerate() {
            if let Some(sw) = n.switch.as_deref()
                && let Ok(k) = names.binary_search(&sw)
            {
                of[pool.nodes.start as usize + j] = next + k as u32;
            }
        }
        ranges.push(next..next + names.len() as u32);
        next += names.len() as u32;
    }
    (of, ranges)
}

/// Rank of each string in sorted order. Labels and node names are unique,
/// so the ranks are too, and they do not depend on insertion order.
fn ranks(names: &[String]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..names.len() as u32).collect();
    order.sort_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
    let mut rank = vec![0u32; names.len()];
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    rank
}

fn accelerator_text(fleet: &Fleet, p: PoolIdx) -> String {
    let s = &fleet.pool(p).shape;
    match &s.accelerator {
        None => "cpu".into(),
        Some(a) => {
            let mem = num(a.memory_gb);
            let mut t = format!("{}× {}", s.gpus_per_node, a.model);
            if !a.model.contains(&format!("{mem}GB")) {
                t.push_str(&format!(" {mem}GB"));
            }
            if s.gpus_per_node > 1 && s.interconnect != crate::accel::Interconnect::Pcie {
                t.push_str(&format!(" {}", s.interconnect));
            }
            t
        }
    }
}
