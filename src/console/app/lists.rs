//! The lists' cursors: each list's cursor is on an item (a workload, a
//! node, an audit record), not a row, and follows it when the rows are
//! derived again; what is under the cursor in each view. Part of the app.

use super::App;
use crate::console::msg::View;
use crate::engine::model::{AuditRecord, Millis, WorkloadId};

/// What a list's cursor is on: the item itself, so that it stays on it
/// when rows move (a state change re-sorts them, new ones arrive above,
/// a filter or a sort changes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Pick {
    Workload(WorkloadId),
    Node(String),
    /// An audit record: when, who, what, of what.
    Audit(Millis, String, String, Option<String>),
}

impl Pick {
    pub(super) fn audit(a: &AuditRecord) -> Self {
        Pick::Audit(a.at, a.principal.clone(), a.action.clone(), a.target.clone())
    }
    pub(super) fn is_audit(&self, a: &AuditRecord) -> bool {
        matches!(self, Pick::Audit(at, who, what, target)
            if *at == a.at && *who == a.principal && *what == a.action && *target == a.target)
    }
}

/// The lists whose cursor follows its item.
pub(super) const LISTS: [View; 4] = [View::Workloads, View::Nodes, View::Triage, View::Audit];

impl App {
    /// After the rows were derived again: the cursor goes to where its
    /// item is now; only when the item is gone (finished, filtered out)
    /// does it stay at its row (or the last), on whatever is there now.
    pub(super) fn follow_pick(&mut self, v: View) {
        let old = self.sel(v);
        let i = match self.picked.get(&v) {
            Some(p) if self.pick_at(v, old).as_ref() == Some(p) => old,
            Some(p) => self.position(v, p).unwrap_or(old),
            None => old,
        };
        self.select(v, i);
    }

    /// Puts a list's cursor on row `i` (or its last row) and remembers the
    /// item there.
    pub(super) fn select(&mut self, v: View, i: usize) {
        let i = i.min(self.list_len(v).saturating_sub(1));
        self.selected.insert(v, i);
        match self.pick_at(v, i) {
            Some(p) => self.picked.insert(v, p),
            None => self.picked.remove(&v),
        };
    }

    /// The item on row `i` of a list.
    pub(super) fn pick_at(&self, v: View, i: usize) -> Option<Pick> {
        match v {
            View::Workloads => self.derived.workloads.get(i).map(|id| Pick::Workload(*id)),
            View::Triage => self.derived.faults.get(i).map(|id| Pick::Workload(*id)),
            View::Nodes => {
                let n = *self.derived.nodes.get(i)?;
                self.model.fleet()?.nodes.get(n as usize).map(|n| Pick::Node(n.name.clone()))
            }
            View::Audit => self.derived.audit.get(i).map(Pick::audit),
            _ => None,
        }
    }

    /// The row an item is on in a list, if it is there.
    pub(super) fn position(&self, v: View, p: &Pick) -> Option<usize> {
        match (v, p) {
            (View::Workloads, Pick::Workload(id)) => self.derived.workloads.iter().position(|x| x == id),
            (View::Triage, Pick::Workload(id)) => self.derived.faults.iter().position(|x| x == id),
            (View::Nodes, Pick::Node(name)) => {
                let f = self.model.fleet()?;
                self.derived
                    .nodes
                    .iter()
                    .position(|&n| f.nodes.get(n as usize).is_some_and(|n| n.name == *name))
            }
            (View::Audit, p) => self.derived.audit.iter().position(|a| p.is_audit(a)),
            _ => None,
        }
    }

    pub(super) fn list_len(&self, v: View) -> usize {
        match v {
            View::Workloads => self.derived.workloads.len(),
            View::Triage => self.derived.faults.len(),
            View::Nodes => self.derived.nodes.len(),
            View::Capacity => self.model.fleet().map_or(0, |f| f.pools.len()),
            View::Audit => self.derived.audit.len(),
            View::Tenants => self.tenants.rows.len(),
            View::Overview => self.derived.overview.broken.len(),
            _ => 0,
        }
    }

    /// The workload under the cursor in the current view.
    pub fn current_workload(&self) -> Option<WorkloadId> {
        match self.view {
            View::Workloads => self.derived.workloads.get(self.sel(View::Workloads)).copied(),
            View::Triage => self.derived.faults.get(self.sel(View::Triage)).copied(),
            View::Detail | View::Logs => self.detail.id,
            View::Spec => self.spec.id,
            View::Events => {
                let rows = self.events.rows(&self.model, self.filter(View::Events));
                rows.get(self.events.sel.min(rows.len().saturating_sub(1))).map(|e| e.workload)
            }
            _ => None,
        }
    }

    /// The node under the cursor (nodes view) or of the current workload.
    pub fn current_node(&self) -> Option<String> {
        if self.view == View::Nodes {
            let i = *self.derived.nodes.get(self.sel(View::Nodes))?;
            return self.model.fleet().map(|f| f.nodes[i as usize].name.clone());
        }
        let w = self.model.workloads.get(&self.current_workload()?)?;
        if self.view == View::Triage {
            // The node the fault happened on, as its row shows.
            let failed = w.attempts.iter().rev().find(|a| a.class.is_some());
            return failed.or(w.last_attempt()).map(|a| a.node.clone());
        }
        w.last_attempt().map(|a| a.node.clone())
    }

    /// From a workload or a fault to its node in the nodes view; Esc
    /// comes back to it.
    pub(super) fn go_to_node(&mut self) {
        let Some(node) = self.current_node() else {
            self.flash_error("no node: nothing selected, or it was never placed".into());
            return;
        };
        let pick = Pick::Node(node.clone());
        if self.position(View::Nodes, &pick).is_none() {
            self.flash_error(format!(
                "{node} is not in the nodes list (a / filter hides it, or it left the fleet)"
            ));
            return;
        }
        self.picked.insert(View::Nodes, pick);
        self.follow_pick(View::Nodes);
        self.go(View::Nodes);
    }
}
