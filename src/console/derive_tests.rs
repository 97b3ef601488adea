//! The derived rows kept current part by part are those derived from
//! nothing, whatever the operator typed, sorted or changed in between.

use super::{Choice, Derived};
use crate::console::fixture::{NOW, model};
use crate::console::model::Model;
use crate::console::msg::{COLUMNS, View};
use crate::engine::model::{Record, WorkloadState};
use std::collections::HashMap;

fn fresh(m: &Model, c: &Choice) -> Derived {
    let mut d = Derived::default();
    d.update(m, c);
    d
}

fn same(kept: &Derived, fresh: &Derived, what: &str) {
    assert_eq!(kept.workloads, fresh.workloads, "workloads after {what}");
    assert_eq!(kept.workload_widths, fresh.workload_widths, "workload widths after {what}");
    assert_eq!(kept.faults, fresh.faults, "faults after {what}");
    assert_eq!(kept.faults_total, fresh.faults_total, "faults total after {what}");
    assert_eq!(kept.fault_widths, fresh.fault_widths, "fault widths after {what}");
    assert_eq!(kept.by_class, fresh.by_class, "by class after {what}");
    assert_eq!(kept.by_fault_node, fresh.by_fault_node, "by fault node after {what}");
    assert_eq!(kept.nodes, fresh.nodes, "nodes after {what}");
    assert_eq!(kept.node_widths, fresh.node_widths, "node widths after {what}");
    assert_eq!(kept.by_node, fresh.by_node, "by node after {what}");
    assert_eq!(kept.audit.len(), fresh.audit.len(), "audit after {what}");
    assert_eq!(kept.overview.counts, fresh.overview.counts, "counts after {what}");
    assert_eq!(kept.overview.broken, fresh.overview.broken, "broken after {what}");
}

#[test]
fn rows_kept_current_match_rows_derived_from_nothing() {
    let mut m = model(crate::fleet::synth::synth_fleet(200, 7), 600);
    let mut c = Choice { filters: HashMap::new(), faults_only: false, sort: COLUMNS[0], sort_desc: true };
    let mut kept = Derived::default();
    kept.update(&m, &c);
    let mut step = 0;
    let check = |m: &Model, c: &Choice, kept: &mut Derived, what: String| {
        kept.update(m, c);
        same(kept, &fresh(m, c), &what);
    };
    // Typed key by key, then erased, then other words.
    let typed = ["state=failed", "state=failed w-1", "train", "tr.*n", "!w-2", "w-1 !w-11", "class=app"];
    for text in typed {
        for end in (1..=text.len()).chain((1..text.len()).rev()) {
            for v in [View::Workloads, View::Triage, View::Nodes, View::Audit] {
                c.filters.insert(v, text[..end].to_string());
            }
            step += 1;
            check(&m, &c, &mut kept, format!("typing {:?} (step {step})", &text[..end]));
            if step % 5 == 0 {
                c.sort = COLUMNS[step % COLUMNS.len()];
                check(&m, &c, &mut kept, format!("sort {:?} (step {step})", c.sort));
            }
            if step % 7 == 0 {
                c.sort_desc = !c.sort_desc;
                check(&m, &c, &mut kept, format!("direction (step {step})"));
            }
            if step % 11 == 0 {
                c.faults_only = !c.faults_only;
                check(&m, &c, &mut kept, format!("faults only (step {step})"));
            }
            if step % 13 == 0 {
                // A workload fails, as the engine tells it.
                let id = *m.workloads.keys().nth(step % 600).unwrap();
                let mut rec = m.workloads[&id].rec.clone();
                rec.state = WorkloadState::Failed;
                rec.updated_at = NOW;
                m.apply(&[Record::Workload(Box::new(rec))]);
                check(&m, &c, &mut kept, format!("a failure (step {step})"));
            }
            if step % 17 == 0 {
                // A fleet status, and a change made outside the model's
                // own methods.
                let s = m.status.clone().unwrap();
                m.set_status(s);
                check(&m, &c, &mut kept, format!("a status (step {step})"));
                m.workloads.values_mut().next().unwrap().rec.name = format!("renamed-{step}");
                m.generation += 1;
                check(&m, &c, &mut kept, format!("a rename (step {step})"));
            }
        }
    }
}
