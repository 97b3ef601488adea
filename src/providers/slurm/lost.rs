//! Which of an attempt's nodes Slurm lost, and whether that was the
//! node's fault or an admin's maintenance: a pure reading of the attempt's
//! nodes (rank order) against Slurm's node list, for a job Slurm requeued
//! or ended with `NODE_FAIL`. Slurm's requeue names no node (the job is
//! pending again, its node list empty), so without this the engine would
//! blame rank 0.

use super::map::node_state;
use crate::failure::ProviderEnd;
use crate::fleet::NodeState;

/// A node as [`lost_end`] needs it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub state: String,
    pub flags: Vec<String>,
    /// Why it is down or drained, as `scontrol` or slurmctld set it.
    pub reason: String,
}

/// Reasons slurmctld or slurmd set themselves when a node fails; an admin's
/// `scontrol update state=down reason=…` sets anything else.
const FAULT_REASONS: &[&str] = &[
    "not responding",
    "kill task failed",
    "prolog error",
    "epilog error",
    "node unexpectedly rebooted",
    "batch job complete failure",
    "low realmemory",
    "low socket*core*thread count",
    "gres count",
    "nhc",
    "health check",
];

/// How the loss of an attempt's node reads once Slurm's view of its nodes
/// (`nodes`, rank order) is known: the node Slurm lost is named and
/// charged (as a gang rank when there are several), and a node an admin
/// took down or drained — no `NOT_RESPONDING`, a reason slurmctld did not
/// set — is maintenance: the work is moved without charging any node or
/// spending an attempt ([`ProviderEnd::Evicted`]). When no node of the
/// attempt is down, `end` stands.
pub fn lost_end(nodes: &[String], listed: &[NodeView], end: ProviderEnd) -> ProviderEnd {
    let flag = |n: &NodeView, f: &str| n.flags.iter().any(|x| x.eq_ignore_ascii_case(f));
    let gone: Vec<(usize, &NodeView)> = nodes
        .iter()
        .enumerate()
        .filter_map(|(rank, name)| listed.iter().find(|n| &n.name == name).map(|n| (rank, n)))
        .filter(|(_, n)| node_state(&n.state, &n.flags) != NodeState::Ready)
        .collect();
    let fault = |n: &NodeView| {
        let reason = n.reason.to_ascii_lowercase();
        flag(n, "NOT_RESPONDING")
            || n.state.ends_with('*')
            || FAULT_REASONS.iter().any(|r| reason.starts_with(r))
    };
    let reason = |n: &NodeView| if n.reason.is_empty() { "none given".to_string() } else { n.reason.clone() };
    if let Some((rank, n)) = gone.iter().find(|(_, n)| fault(n)) {
        let lost = ProviderEnd::NodeLost {
            message: format!("Slurm lost node {} ({}, reason {})", n.name, n.state, reason(n)),
        };
        return if nodes.len() > 1 {
            ProviderEnd::Rank { rank: *rank as u32, node: n.name.clone(), end: Box::new(lost) }
        } else {
            lost
        };
    }
    if let Some((_, n)) = gone.first() {
        return ProviderEnd::Evicted {
            message: format!(
                "an admin took Slurm node {} out of service ({}, reason {}): maintenance, not the node's fault",
                n.name,
                n.state,
                reason(n)
            ),
            grace_s: None,
        };
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: &str, flags: &[&str], reason: &str) -> NodeView {
        NodeView {
            name: name.into(),
            state: state.into(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            reason: reason.into(),
        }
    }

    fn requeued() -> ProviderEnd {
        ProviderEnd::NodeLost { message: "Slurm requeued the job".into() }
    }

    #[test]
    fn the_node_slurm_lost_is_named_as_its_rank() {
        let gang = ["n2".to_string(), "n1".to_string()];
        let listed = [node("n1", "down", &["NOT_RESPONDING"], "Not responding"), node("n2", "idle", &[], "")];
        match lost_end(&gang, &listed, requeued()) {
            ProviderEnd::Rank { rank, node, end } => {
                assert_eq!((rank, node.as_str()), (1, "n1"), "n1 is rank 1; n2, rank 0, is healthy");
                assert!(matches!(*end, ProviderEnd::NodeLost { ref message } if message.contains("n1")));
            }
            other => panic!("{other:?}"),
        }
        // A slurmd that stopped answering, before slurmctld gave a reason.
        let listed = [node("n1", "idle*", &[], ""), node("n2", "mixed", &[], "")];
        assert!(matches!(lost_end(&gang, &listed, requeued()), ProviderEnd::Rank { rank: 1, .. }));
        // One node: no rank.
        let one = ["n1".to_string()];
        let listed = [node("n1", "down", &[], "Kill task failed")];
        assert!(matches!(lost_end(&one, &listed, requeued()), ProviderEnd::NodeLost { .. }));
    }

    #[test]
    fn an_admins_down_or_drain_is_maintenance() {
        let gang = ["n2".to_string(), "n1".to_string()];
        for (state, flags) in [("down", &[][..]), ("idle", &["DRAIN"][..]), ("down", &["DRAIN"][..])] {
            let listed = [node("n1", state, flags, "replacing a DIMM"), node("n2", "idle", &[], "")];
            match lost_end(&gang, &listed, requeued()) {
                ProviderEnd::Evicted { message, grace_s: None } => {
                    assert!(message.contains("n1") && message.contains("replacing a DIMM"), "{message}");
                }
                other => panic!("{state} {flags:?}: {other:?}"),
            }
        }
        // Nothing of the attempt's is down: what Slurm said stands.
        let listed = [node("n1", "idle", &[], ""), node("n2", "idle", &[], ""), node("n3", "down", &[], "x")];
        assert_eq!(lost_end(&gang, &listed, requeued()), requeued());
    }
}
