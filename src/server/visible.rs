//! What of a stream of records one principal may see, with tenants: the
//! facts the rule in [`authz::sees`] and [`authz::sees_audit`] needs for
//! each record (a workload's tenant and pools, a node's pool), looked up
//! once per workload and remembered for the stream's life.

use super::Served;
use super::auth::Principal;
use super::authz;
use crate::engine::model::{AuditRecord, Batch, Record, WorkloadId};
use crate::tenant::Tenancy;
use std::collections::HashMap;
use std::sync::Arc;

/// A workload's facts: its tenant (a workload from before tenants counts
/// as the default tenant's) and the `(provider, provider/pool)` of each
/// attempt.
type Facts = (Option<String>, Vec<(String, String)>);

/// Facts remembered across batches of one stream.
#[derive(Default)]
pub struct Seen {
    known: HashMap<WorkloadId, Facts>,
}

impl Seen {
    /// Attempts of workloads already known add their pools (a workload's
    /// tenant never changes; one not known yet is read from the journal,
    /// which holds the batch by the time it is sent).
    fn learn(&mut self, r: &Record) {
        if let Record::Attempt(a) = r
            && let Some(f) = self.known.get_mut(&a.id.workload)
        {
            let p = (a.provider.clone(), a.pool.clone());
            if !f.1.contains(&p) {
                f.1.push(p);
            }
        }
    }

    async fn facts(&mut self, st: &Served, id: WorkloadId, tenancy: &Tenancy) -> Option<&Facts> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.known.entry(id) {
            let read = st.read(move |j| Ok(j.workload(id)?.map(|w| (w.tenant, j.attempts(id))))).await;
            let Ok(Some((tenant, Ok(attempts)))) = read else { return None };
            let t = tenant.or_else(|| tenancy.default_tenant.clone());
            slot.insert((t, attempts.into_iter().map(|a| (a.provider, a.pool)).collect()));
        }
        self.known.get(&id)
    }

    async fn sees_workload(&mut self, st: &Served, p: &Principal, id: WorkloadId, tenancy: &Tenancy) -> bool {
        match self.facts(st, id, tenancy).await {
            Some((t, pools)) => authz::sees(p, Some(t), pools),
            None => false,
        }
    }

    /// Whether `p` sees audit record `a` ([`authz::sees_audit`]).
    pub async fn sees_audit(
        &mut self,
        st: &Served,
        p: &Principal,
        a: &AuditRecord,
        tenancy: &Tenancy,
    ) -> bool {
        let target = a.target.as_deref().unwrap_or("");
        let workload = match target.parse::<WorkloadId>() {
            Ok(id) => self.facts(st, id, tenancy).await.cloned(),
            Err(_) => None,
        };
        let node = if workload.is_none() && !target.is_empty() {
            let status = st.fleet_status();
            status.and_then(|s| {
                let f = &s.fleet;
                f.node_by_name(target).map(|i| {
                    let pool = f.node(i).pool;
                    (f.provider_of(pool).name.clone(), f.pool_label(pool))
                })
            })
        } else {
            None
        };
        authz::sees_audit(p, a, workload.as_ref().map(|(t, pools)| (t, pools.as_slice())), node.as_ref())
    }

    /// The batch as `p` may see it: the same sequence number (resuming
    /// works alike for all), without the records it may not see.
    /// `audit`: whether it sees audit records at all.
    pub async fn filter(
        &mut self,
        st: &Served,
        p: &Principal,
        tenancy: &Tenancy,
        audit: bool,
        b: Arc<Batch>,
    ) -> Arc<Batch> {
        let per_record = authz::listing(p, tenancy).is_some();
        if !per_record && (audit || !b.records.iter().any(|r| matches!(r, Record::Audit(_)))) {
            return b;
        }
        for r in &b.records {
            self.learn(r);
        }
        let mut records = Vec::with_capacity(b.records.len());
        for r in &b.records {
            let keep = match r {
                Record::Audit(a) => audit && (!per_record || self.sees_audit(st, p, a, tenancy).await),
                _ if !per_record => true,
                Record::Workload(w) => self.sees_workload(st, p, w.id, tenancy).await,
                Record::Attempt(a) => self.sees_workload(st, p, a.id.workload, tenancy).await,
                Record::Event(e) => self.sees_workload(st, p, e.workload, tenancy).await,
                Record::Delivery(d) => self.sees_workload(st, p, d.workload, tenancy).await,
                Record::Health(_) | Record::NodeIntent { .. } => true,
            };
            if keep {
                records.push(r.clone());
            }
        }
        Arc::new(Batch { seq: b.seq, records })
    }
}
