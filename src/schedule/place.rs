//! [`place`]: the top of the scheduler. It chooses the strategy, one node
//! (`single.rs`) or a gang of N nodes in one topology domain (`gang.rs`);
//! both stand on the same shared layer (the filters, the scorer, the
//! explanation) and return the same [`Decision`].

use super::decision::Decision;
use super::gang::place_gang;
use super::policy::Policy;
use super::requirements::Requirements;
use super::single::place_single;
use super::snapshot::Snapshot;

/// Places one workload: every hard filter, then the policy's score, then a
/// deterministic order (CPU-only nodes first for work without GPUs, then
/// score desc, hourly asc, pool label, node name). Gangs (`nodes > 1`)
/// rank sets of nodes the same way; see `gang.rs`.
pub fn place(req: &Requirements, snap: &Snapshot, policy: &Policy) -> Decision {
    if req.nodes > 1 { place_gang(req, snap, policy) } else { place_single(req, snap, policy) }
}
