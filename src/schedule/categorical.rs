//! [`categorical`]: the categorical and class filters on pool sets, the
//! first stage of every placement (one node or a gang) and of the hold for
//! a gang that waits. One glob match per region or provider, one check per
//! class ([`class_checks`]), set operations for the rest; each pool it
//! removes is recorded with the filter that removed it.

use super::bitset::PoolSet;
use super::check::class_checks;
use super::decision::RuledOut;
use super::filter::Filter;
use super::requirements::Requirements;
use super::snapshot::Snapshot;
use crate::fleet::PoolIdx;
use crate::units::allowed;
use std::ops::ControlFlow;

/// Records pools removed by filter `f`.
fn push(out: &mut Vec<RuledOut>, f: Filter) -> impl FnMut(usize) + '_ {
    move |p| out.push(RuledOut { pool: PoolIdx(p as u32), filter: f })
}

/// The categorical and class filters on pool sets, in [`Filter`] order.
/// Returns the pools that pass; records each removed pool's filter.
pub(crate) fn categorical(req: &Requirements, snap: &Snapshot, out: &mut Vec<RuledOut>) -> PoolSet {
    let fleet = snap.fleet();
    let n = fleet.pools.len();
    let mut rem = snap.all_pools.clone();

    if !req.providers.is_empty() {
        let mut pass = PoolSet::empty(n);
        for (i, provider) in fleet.providers.iter().enumerate() {
            if allowed(&req.providers, &provider.name) {
                pass.union_with(&snap.provider_pools[i]);
            }
        }
        rem.retain_in(&pass, push(out, Filter::Provider));
    }
    if !req.regions.is_empty() {
        let mut pass = PoolSet::empty(n);
        for (i, region) in snap.regions.iter().enumerate() {
            if allowed(&req.regions, region) {
                pass.union_with(&snap.region_pools[i]);
            }
        }
        rem.retain_in(&pass, push(out, Filter::Region));
    }
    let none = PoolSet::empty(n);
    for tag in &req.compliance {
        let pass = snap.compliance_pools.get(tag).unwrap_or(&none);
        rem.retain_in(pass, push(out, Filter::Compliance));
    }
    if !req.interruptible {
        rem.remove_all(&snap.interruptible, push(out, Filter::Interruptible));
    }
    let fleet_pools = &fleet.pools;
    for class in &snap.classes {
        let rep = &fleet_pools[class.rep.0 as usize];
        let mut first = None;
        let _ = class_checks(req, &rep.shape, &rep.capabilities, &mut |f| {
            first = Some(f);
            ControlFlow::Break(())
        });
        if let Some(f) = first {
            rem.remove_all(&class.pools, push(out, f));
        }
    }
    rem.remove_all(&snap.provider_quarantined, push(out, Filter::ProviderQuarantined));
    rem.remove_all(&snap.pool_quarantined, push(out, Filter::PoolQuarantined));
    for label in &req.exclude_pools {
        if let Some(p) = snap.pool_by_label(label)
            && rem.contains(p.0 as usize)
        {
            rem.remove(p.0 as usize);
            out.push(RuledOut { pool: p, filter: Filter::PoolExcluded });
        }
    }
    for label in &req.quota_pools {
        if let Some(p) = snap.pool_by_label(label)
            && rem.contains(p.0 as usize)
        {
            rem.remove(p.0 as usize);
            out.push(RuledOut { pool: p, filter: Filter::Quota });
        }
    }
    rem
}
