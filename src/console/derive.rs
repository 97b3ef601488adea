//! Rows derived from the read model for the list views: the workloads
//! table (filtered, faults-only, sorted), the triage list (filtered) and
//! the nodes table, with the widest names in each. Computed once per model
//! change or filter change, never per frame. Pure.

use super::app::{App, ClassGroup, Column, Derived, NameWidths, NodeGroup, View};
use super::filter::Filter;
use super::fit::width;
use super::model::WorkloadRow;
use crate::engine::model::{AuditRecord, Millis};
use crate::failure::FailureClass;
use crate::fleet::Fleet;
use crate::health::NodeFault;
use crate::text::sanitize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

pub fn derive(app: &App) -> Derived {
    let m = &app.model;
    let wf = Filter::parse(app.filter(View::Workloads));
    let mut workloads: Vec<&WorkloadRow> = m
        .workloads
        .values()
        .filter(|w| !app.faults_only || w.is_fault())
        .filter(|w| wf.is_empty() || workload_matches(&wf, w))
        .collect();
    workloads.sort_by(|a, b| {
        let o = compare(app.sort, a, b).then(a.rec.id.cmp(&b.rec.id));
        if app.sort_desc { o.reverse() } else { o }
    });
    let mut faults: Vec<&WorkloadRow> = m.workloads.values().filter(|w| w.is_fault()).collect();
    let faults_total = faults.len();
    let tf = Filter::parse(app.filter(View::Triage));
    faults.retain(|w| tf.is_empty() || fault_matches(&tf, w));
    faults.sort_by(|a, b| {
        let key =
            |w: &WorkloadRow| (w.fault_class().map(|c| c.as_str()), w.last_attempt().map(|a| a.node.clone()));
        key(a).cmp(&key(b)).then(b.rec.id.cmp(&a.rec.id))
    });
    let (nodes, node_widths) = match m.fleet() {
        Some(f) => node_rows(f, &Filter::parse(app.filter(View::Nodes))),
        None => (Vec::new(), NameWidths::default()),
    };
    let history = m.status.as_ref().map(|s| &s.health.faults);
    let (by_class, by_fault_node) = triage_groups(&faults, history, &tf);
    let af = Filter::parse(app.filter(View::Audit));
    let audit = m.audit.iter().rev().filter(|a| af.is_empty() || audit_matches(&af, a)).cloned().collect();
    Derived {
        by_class,
        by_fault_node,
        generation: m.generation,
        workload_widths: widest(&workloads),
        fault_widths: widest(&faults),
        workloads: workloads.iter().map(|w| w.rec.id).collect(),
        faults: faults.iter().map(|w| w.rec.id).collect(),
        faults_total,
        nodes,
        node_widths,
        by_node: m.by_node(),
        audit,
    }
}

/// The widest name, pool and node among workloads (of the last attempt;
/// for a fault, of the failed attempt its row shows).
fn widest(rows: &[&WorkloadRow]) -> NameWidths {
    let mut w = NameWidths::default();
    for r in rows {
        w.name = w.name.max(width(&r.rec.name));
        if let Some(a) = r.last_attempt() {
            w.pool = w.pool.max(width(&a.pool));
            w.node = w.node.max(width(&a.node));
        }
        if let Some(a) = r.attempts.iter().rev().find(|a| a.class.is_some()) {
            w.node = w.node.max(width(&a.node));
        }
    }
    w
}

/// An audit record against the `/` filter: `who=`, `from=`, `action=`,
/// `target=`, `outcome=` (`outcome=denied`), `reason=`, or text over the
/// row as shown (sanitized, as drawn).
fn audit_matches(f: &Filter, a: &AuditRecord) -> bool {
    let who = sanitize(&a.principal);
    let from = sanitize(&a.origin);
    let action = sanitize(&a.action);
    let target = sanitize(a.target.as_deref().unwrap_or(""));
    let outcome = sanitize(&a.outcome);
    let reason = sanitize(a.reason.as_deref().unwrap_or(""));
    let field = |k: &str| -> Option<&str> {
        match k {
            "who" | "principal" => Some(who.as_ref()),
            "from" | "origin" => Some(from.as_ref()),
            "action" => Some(action.as_ref()),
            "target" => Some(target.as_ref()),
            "outcome" => Some(outcome.as_ref()),
            "reason" => Some(reason.as_ref()),
            _ => None,
        }
    };
    f.matches(field, &format!("{who} {from} {action} {target} {outcome} {reason}"))
}

/// A fault against the triage view's `/` filter: the workloads' fields,
/// or text over the row as shown (id, name, class, state, node, pool and
/// the evidence line).
fn fault_matches(f: &Filter, w: &WorkloadRow) -> bool {
    let a = w.attempts.iter().rev().find(|a| a.class.is_some()).or(w.last_attempt());
    let text = format!(
        "{} {} {} {} {} {} {}",
        w.rec.id,
        w.rec.name,
        w.fault_class().map_or("", |c| c.as_str()),
        w.rec.state,
        a.map_or("", |a| a.node.as_str()),
        a.map_or("", |a| a.pool.as_str()),
        a.and_then(|a| a.evidence.as_deref()).unwrap_or(""),
    );
    f.matches(workload_field(w, a), &text)
}

/// A workload's fields for the `/` filter: `state=`, `name=`,
/// `provider=`, `pool=`, `node=` (of attempt `a`), `class=`.
fn workload_field<'a>(
    w: &'a WorkloadRow,
    a: Option<&'a crate::engine::model::AttemptRecord>,
) -> impl Fn(&str) -> Option<&'a str> {
    let class = w.fault_class().map(|c| c.as_str());
    move |k: &str| -> Option<&'a str> {
        match k {
            "state" => Some(w.rec.state.as_str()),
            "name" => Some(w.rec.name.as_str()),
            "provider" => a.map(|a| a.provider.as_str()),
            "pool" => a.map(|a| a.pool.as_str()),
            "node" => a.map(|a| a.node.as_str()),
            "class" => class,
            _ => None,
        }
    }
}

fn workload_matches(f: &Filter, w: &WorkloadRow) -> bool {
    let a = w.last_attempt();
    let text = format!(
        "{} {} {} {} {}",
        w.rec.id,
        w.rec.name,
        w.rec.state,
        a.map_or("", |a| a.pool.as_str()),
        w.fault_class().map_or("", |c| c.as_str())
    );
    f.matches(workload_field(w, a), &text)
}

fn compare(c: Column, a: &WorkloadRow, b: &WorkloadRow) -> Ordering {
    match c {
        Column::Id => a.rec.id.cmp(&b.rec.id),
        Column::Name => a.rec.name.cmp(&b.rec.name),
        Column::State => a.rec.state.as_str().cmp(b.rec.state.as_str()),
        Column::Attempt => a.rec.attempts.cmp(&b.rec.attempts),
        Column::Pool => a.last_attempt().map(|x| &x.pool).cmp(&b.last_attempt().map(|x| &x.pool)),
        Column::Gpus => a.rec.spec.resources.gpus.cmp(&b.rec.spec.resources.gpus),
        // Older first when ascending.
        Column::Age => b.rec.submitted_at.cmp(&a.rec.submitted_at),
        Column::Cost => a.rec.cost_usd.total_cmp(&b.rec.cost_usd),
    }
}

/// The nodes that pass the filter, and their widest name and pool.
fn node_rows(f: &Fleet, filter: &Filter) -> (Vec<u32>, NameWidths) {
    let rows: Vec<u32> = (0..f.nodes.len() as u32)
        .filter(|&i| {
            if filter.is_empty() {
                return true;
            }
            let n = &f.nodes[i as usize];
            let pool = f.pool_label(n.pool);
            let state = n.state.to_string();
            let field = |k: &str| -> Option<&str> {
                match k {
                    "pool" => Some(pool.as_str()),
                    "state" => Some(state.as_str()),
                    "node" | "name" => Some(n.name.as_str()),
                    _ => None,
                }
            };
            filter.matches(field, &format!("{} {} {}", n.name, pool, state))
        })
        .collect();
    let mut pools = vec![false; f.pools.len()];
    let mut w = NameWidths::default();
    for &i in &rows {
        let n = &f.nodes[i as usize];
        w.name = w.name.max(width(&n.name));
        if let Some(seen) = pools.get_mut(n.pool.0 as usize).filter(|s| !**s) {
            *seen = true;
            w.pool = w.pool.max(width(&f.pool_label(n.pool)));
        }
    }
    (rows, w)
}

/// Faults grouped by class and by node, largest group first, so one bad
/// node or one bad image stands out. A node's group counts its recent
/// infrastructure faults from the engine's history (which outlive the
/// work that moved off it, and a restart) and the workloads' own faults
/// that ended there, with the newest and when the oldest clears.
fn triage_groups(
    faults: &[&WorkloadRow],
    history: Option<&HashMap<String, Vec<NodeFault>>>,
    filter: &Filter,
) -> (Vec<ClassGroup>, Vec<NodeGroup>) {
    type Place = (String, String);
    #[derive(Default)]
    struct Tally<'a> {
        count: usize,
        classes: BTreeMap<&'a str, usize>,
        newest: Option<Millis>,
        clears: Option<Millis>,
    }
    let mut by_class: BTreeMap<&str, (usize, BTreeMap<Place, usize>)> = BTreeMap::new();
    let mut by_node: BTreeMap<Place, Tally> = BTreeMap::new();
    for w in faults {
        let class = w.fault_class().map_or("unknown", FailureClass::as_str);
        let a = w.attempts.iter().rev().find(|a| a.class.is_some()).or(w.last_attempt());
        let place = a.map_or(("-".to_string(), String::new()), |a| (a.node.clone(), a.pool.clone()));
        let c = by_class.entry(class).or_default();
        c.0 += 1;
        *c.1.entry(place.clone()).or_default() += 1;
        // A fault the node's history holds (same class, same end) is
        // counted from there.
        let in_history = a.is_some_and(|a| {
            history
                .and_then(|h| h.get(&a.node))
                .is_some_and(|list| list.iter().any(|f| Some(f.class) == a.class && Some(f.at) == a.ended_at))
        });
        if !in_history {
            let n = by_node.entry(place).or_default();
            n.count += 1;
            *n.classes.entry(class).or_default() += 1;
            n.newest = n.newest.max(a.and_then(|a| a.ended_at));
        }
    }
    for (node, list) in history.into_iter().flatten() {
        for f in list {
            let text = format!("{node} {} {}", f.pool, f.class.as_str());
            let field = |k: &str| match k {
                "node" => Some(node.as_str()),
                "pool" => Some(f.pool.as_str()),
                "class" => Some(f.class.as_str()),
                _ => None,
            };
            if !filter.is_empty() && !filter.matches(field, &text) {
                continue;
            }
            let n = by_node.entry((node.clone(), f.pool.clone())).or_default();
            n.count += 1;
            *n.classes.entry(f.class.as_str()).or_default() += 1;
            n.newest = n.newest.max(Some(f.at));
            let clears = f.clears_at();
            n.clears = Some(n.clears.map_or(clears, |c: Millis| c.min(clears)));
        }
    }
    let mut classes: Vec<ClassGroup> = by_class
        .into_iter()
        .map(|(c, (count, places))| {
            // The most; the last by name of equals.
            let top = places.into_iter().max_by_key(|(_, k)| *k).map(|((node, pool), k)| (k, node, pool));
            ClassGroup { class: c.to_string(), count, top }
        })
        .collect();
    classes.sort_by(|a, b| b.count.cmp(&a.count).then(a.class.cmp(&b.class)));
    let mut nodes: Vec<NodeGroup> = by_node
        .into_iter()
        .map(|((node, pool), t)| {
            let cls: Vec<String> = t.classes.iter().map(|(c, k)| format!("{c}:{k}")).collect();
            NodeGroup {
                node,
                pool,
                count: t.count,
                classes: cls.join(" "),
                newest: t.newest,
                clears: t.clears,
            }
        })
        .collect();
    nodes.sort_by(|a, b| b.count.cmp(&a.count).then((&a.node, &a.pool).cmp(&(&b.node, &b.pool))));
    (classes, nodes)
}
