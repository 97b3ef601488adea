//! What every launcher of a gang is told: the node-level variables that
//! `torchrun`, DeepSpeed and Accelerate read, and the aliases SkyPilot's
//! and dstack's users' scripts read, so a multi-node script written for
//! any of them runs unchanged.
//!
//! One launcher runs per node (rank = node rank). Per-process ranks
//! (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`) are the launcher's to set:
//! `torchrun --nnodes $NNODES --node_rank $NODE_RANK --nproc_per_node
//! $GPUS_PER_NODE --master_addr $MASTER_ADDR --master_port $MASTER_PORT`.
//! Pure: adapters find the addresses; this only names them.

/// The rendezvous port of an attempt: derived from its token, so every
/// launcher (and a re-sent launch) agrees without talking, and two gangs
/// on one node rarely collide. In 29500..=39499 (torchrun's default is
/// 29500).
pub fn rendezvous_port(token: &str) -> u16 {
    // FNV-1a: stable across builds and platforms, unlike `DefaultHasher`.
    let mut h: u32 = 0x811c_9dc5;
    for b in token.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    29500 + (h % 10_000) as u16
}

/// One gang launcher's place: its rank, the gang's nodes and their
/// addresses (rank order), and the GPUs each node gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rank<'a> {
    pub rank: usize,
    /// Node names, rank order.
    pub nodes: &'a [String],
    /// Addresses the launchers reach each other at, rank order (an IP or
    /// a resolvable host name).
    pub addrs: &'a [String],
    pub gpus_per_node: u32,
    pub port: u16,
}

/// The environment of one launcher. Also set for a one-node workload
/// (rank 0 of 1), so the same script runs either way.
pub fn launcher_env(r: &Rank<'_>) -> Vec<(String, String)> {
    let n = r.nodes.len().max(1);
    let master = r.addrs.first().cloned().unwrap_or_else(|| "127.0.0.1".into());
    let ips = r.addrs.join("\n");
    let hosts = r.addrs.join(",");
    let rank = r.rank.to_string();
    let gpus = r.gpus_per_node.to_string();
    let node_name = r.nodes.get(r.rank).cloned().unwrap_or_default();
    let vars: [(&str, String); 16] = [
        // torchrun / DeepSpeed / Accelerate
        ("MASTER_ADDR", master.clone()),
        ("MASTER_PORT", r.port.to_string()),
        ("NNODES", n.to_string()),
        ("NODE_RANK", rank.clone()),
        ("GPUS_PER_NODE", gpus.clone()),
        // Canopy's own names
        ("CANOPY_NODE_RANK", rank.clone()),
        ("CANOPY_NUM_NODES", n.to_string()),
        ("CANOPY_NODE_NAME", node_name),
        ("CANOPY_NODE_ADDRS", hosts.clone()),
        ("CANOPY_HOSTS", r.nodes.join(",")),
        // SkyPilot
        ("SKYPILOT_NODE_RANK", rank.clone()),
        ("SKYPILOT_NODE_IPS", ips.clone()),
        ("SKYPILOT_NUM_NODES", n.to_string()),
        ("SKYPILOT_NUM_GPUS_PER_NODE", gpus.clone()),
        // dstack
        ("DSTACK_NODE_RANK", rank),
        ("DSTACK_MASTER_NODE_IP", master),
    ];
    let mut env: Vec<(String, String)> = vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
    env.push(("DSTACK_NODES_IPS".into(), ips));
    env.push(("DSTACK_NODES_NUM".into(), n.to_string()));
    env.push(("DSTACK_GPUS_PER_NODE".into(), gpus));
    // dstack's total: every node of a gang has the same GPUs.
    env.push(("DSTACK_GPUS_NUM".into(), (n as u64 * u64::from(r.gpus_per_node)).to_string()));
    env
}

/// The launcher environment of a one-node workload: rank 0 of 1, its own
/// master on loopback, so a script written for a gang (or for SkyPilot or
/// dstack) runs unchanged on one node.
pub fn one_node_env(node: &str, gpus_per_node: u32, token: &str) -> Vec<(String, String)> {
    let nodes = [node.to_string()];
    let addrs = ["127.0.0.1".to_string()];
    launcher_env(&Rank { rank: 0, nodes: &nodes, addrs: &addrs, gpus_per_node, port: rendezvous_port(token) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(env: &'a [(String, String)], k: &str) -> &'a str {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("{k} unset"))
    }

    #[test]
    fn every_rank_agrees_on_the_master_and_knows_its_own_rank() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let addrs = vec!["10.0.0.1".to_string(), "10.0.0.2".to_string()];
        let port = rendezvous_port("canopy-s1-w-7-a1-x");
        for rank in 0..2 {
            let env = launcher_env(&Rank { rank, nodes: &nodes, addrs: &addrs, gpus_per_node: 8, port });
            assert_eq!(get(&env, "MASTER_ADDR"), "10.0.0.1");
            assert_eq!(get(&env, "NODE_RANK"), rank.to_string());
            assert_eq!(get(&env, "SKYPILOT_NODE_RANK"), rank.to_string());
            assert_eq!(get(&env, "DSTACK_NODE_RANK"), rank.to_string());
            assert_eq!(get(&env, "NNODES"), "2");
            assert_eq!(get(&env, "GPUS_PER_NODE"), "8");
            assert_eq!(get(&env, "SKYPILOT_NODE_IPS"), "10.0.0.1\n10.0.0.2");
            assert_eq!(get(&env, "CANOPY_NODE_NAME"), nodes[rank]);
            assert_eq!(get(&env, "DSTACK_GPUS_NUM"), "16", "dstack's total over the gang");
            assert_eq!(get(&env, "DSTACK_NODES_NUM"), "2");
        }
    }

    #[test]
    fn one_node_is_rank_0_of_1_on_loopback() {
        let env = one_node_env("local", 2, "canopy-s1-w-7-a1-x");
        assert_eq!(get(&env, "NNODES"), "1");
        assert_eq!(get(&env, "NODE_RANK"), "0");
        assert_eq!(get(&env, "SKYPILOT_NUM_NODES"), "1");
        assert_eq!(get(&env, "DSTACK_MASTER_NODE_IP"), "127.0.0.1");
        assert_eq!(get(&env, "GPUS_PER_NODE"), "2");
        assert_eq!(get(&env, "DSTACK_GPUS_NUM"), "2");
    }

    #[test]
    fn the_port_is_stable_and_in_range() {
        let a = rendezvous_port("canopy-s1-w-7-a1-x");
        assert_eq!(a, rendezvous_port("canopy-s1-w-7-a1-x"));
        assert!((29500..39500).contains(&a));
        assert_ne!(a, rendezvous_port("canopy-s1-w-7-a2-y"));
    }
}
