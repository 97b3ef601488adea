//! Topology domains: the nodes a gang may be drawn from together, how a
//! node's domain is found, and how a domain is named to people. Shared by
//! gang placement (`gang.rs`), the explanation of a gang that does not fit
//! (`explain.rs`) and the hold for a gang that waits (`hold.rs`).

use super::snapshot::{NO_SWITCH, Snapshot};
use crate::fleet::ProviderKind;
use crate::spec::Topology;

/// A topology domain: the nodes a gang may be drawn from together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum DomainKey {
    /// One switch (ids are unique across the fleet).
    Switch(u32),
    Pool(u32),
    /// One provider, region and shape class.
    Region {
        provider: u32,
        region: u32,
        class: u32,
    },
}

/// The domain node `node` of pool `pool` belongs to under `topology`, if
/// any (a node without a switch has none under `same-switch`).
pub(crate) fn domain_key(snap: &Snapshot, topology: Topology, pool: usize, node: usize) -> Option<DomainKey> {
    match topology {
        Topology::SameSwitch => {
            let sw = snap.switch_of.get(node).copied().unwrap_or(NO_SWITCH);
            (sw != NO_SWITCH).then_some(DomainKey::Switch(sw))
        }
        Topology::SamePool => Some(DomainKey::Pool(pool as u32)),
        Topology::SameRegion => Some(pool_region_key(snap, pool)),
    }
}

/// A pool's `same-region` domain: its provider, region and class, or the
/// pool alone where the provider cannot launch one gang across pools.
pub(crate) fn pool_region_key(snap: &Snapshot, pool: usize) -> DomainKey {
    let row = &snap.rows[pool];
    if spans_pools(snap.fleet().providers[row.provider as usize].kind) {
        DomainKey::Region { provider: row.provider, region: row.region, class: row.class }
    } else {
        DomainKey::Pool(pool as u32)
    }
}

/// Whether a provider of this kind can launch one gang over several pools.
/// Slurm cannot: a job is submitted to one partition (a pool).
pub fn spans_pools(kind: ProviderKind) -> bool {
    kind != ProviderKind::Slurm
}

/// How a domain is named to people: "cloud-a/h100 switch leaf-2",
/// "cloud-a/h100", "cloud-a us-east (8× H100-SXM 80GB nvlink)".
pub(crate) fn domain_label(snap: &Snapshot, key: DomainKey, any_node: usize) -> String {
    let fleet = snap.fleet();
    let node = &fleet.nodes[any_node];
    let pool = node.pool;
    match key {
        DomainKey::Switch(_) => {
            format!("{} switch {}", snap.label(pool), node.switch.as_deref().unwrap_or("?"))
        }
        DomainKey::Pool(_) => snap.label(pool).to_string(),
        DomainKey::Region { .. } => {
            let p = fleet.pool(pool);
            format!("{} {} ({})", fleet.provider(p.provider).name, p.region, snap.accelerator(pool))
        }
    }
}
