//! Rows derived from the read model for the list views: the workloads
//! table (filtered, faults-only, sorted), the triage list (filtered) and
//! the nodes table, with the widest names in each. Computed once per model
//! change or filter change, never per frame. Pure.

use super::filter::Filter;
use super::fit::width;
use super::model::{Model, WorkloadRow};
use super::msg::{Column, View};
use crate::engine::model::{AuditRecord, EventRecord, Millis, WorkloadId};
use crate::failure::FailureClass;
use crate::fleet::Fleet;
use crate::health::{HealthView, NodeFault};
use crate::text::sanitize;
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// What the operator chose that the rows depend on: the `/` filter of
/// each list, faults only, and the sort.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub filters: HashMap<View, String>,
    pub faults_only: bool,
    pub sort: Column,
    pub sort_desc: bool,
}

impl Choice {
    fn filter(&self, v: View) -> &str {
        self.filters.get(&v).map_or("", String::as_str)
    }
}

/// Rows derived from the model, recomputed when it or the filter changes.
#[derive(Debug, Default)]
pub struct Derived {
    pub generation: u64,
    pub workloads: Vec<WorkloadId>,
    /// Failed and retrying workloads that pass the triage view's filter.
    pub faults: Vec<WorkloadId>,
    /// Failed and retrying workloads, filter or not.
    pub faults_total: usize,
    pub nodes: Vec<u32>,
    pub by_node: HashMap<String, Vec<WorkloadId>>,
    /// Triage groups by failure class, largest first.
    pub by_class: Vec<ClassGroup>,
    /// Triage groups by node, largest first.
    pub by_fault_node: Vec<NodeGroup>,
    /// Audit records that pass the audit view's filter, newest first.
    pub audit: Vec<AuditRecord>,
    /// The overview's figures and its "broken first" lines.
    pub overview: Overview,
    /// The widest names in each list's rows (all of them, not only those
    /// on screen, so that columns do not move while scrolling).
    pub workload_widths: NameWidths,
    /// Whether any workload held has a tenant: the workloads table then
    /// has a TENANT column (without tenants it looks as it always did).
    pub tenant_column: bool,
    pub fault_widths: NameWidths,
    pub node_widths: NameWidths,
    /// What each part was computed from.
    keys: Keys,
}

/// The widest names in a list, in terminal columns.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NameWidths {
    /// A workload's or a node's name.
    pub name: usize,
    pub pool: usize,
    pub node: usize,
    /// A workload's tenant (0: none has one).
    pub tenant: usize,
}

/// Faults of one failure class, and the node most of them failed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassGroup {
    pub class: String,
    pub count: usize,
    /// (how many, node, pool) where most failed.
    pub top: Option<(usize, String, String)>,
}

/// Faults on one node, by class (`gpu-oom:2 app:1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeGroup {
    pub node: String,
    pub pool: String,
    pub count: usize,
    pub classes: String,
    /// When the newest of its faults happened.
    pub newest: Option<Millis>,
    /// When the oldest fault in the node's history ages out (history
    /// faults only).
    pub clears: Option<Millis>,
}

/// What each part of [`Derived`] was last computed from: a part is
/// computed again only when what it reads changed, so a sort or a filter
/// key recomputes one list, and a fleet status (every second) leaves the
/// workloads alone.
#[derive(Debug, Default)]
struct Keys {
    /// Rows version, filter, faults only: which workloads pass.
    passing: Option<(u64, String, bool)>,
    /// ... and the sort they are in.
    sort: Option<(Column, bool)>,
    /// Rows version, triage filter.
    faults: Option<(u64, String)>,
    /// Rows and status versions, triage filter.
    groups: Option<(u64, u64, String)>,
    /// Status version, nodes filter.
    nodes: Option<(u64, String)>,
    by_node: Option<u64>,
    /// Audit version, audit filter.
    audit: Option<(u64, String)>,
    /// Rows and status versions.
    overview: Option<(u64, u64)>,
}

impl Derived {
    /// Brings the rows up to date with the model and the operator's
    /// choice, recomputing only the parts whose inputs changed.
    pub fn update(&mut self, m: &Model, app: &Choice) {
        let v = m.versions();
        self.generation = m.generation;
        self.update_workloads(m, app, v.rows);
        let tf = app.filter(View::Triage);
        let faults_key = (v.rows, tf.to_string());
        let groups_key = (v.rows, v.status, tf.to_string());
        if self.keys.faults.as_ref() != Some(&faults_key) || self.keys.groups.as_ref() != Some(&groups_key) {
            let tf = Filter::parse(tf);
            let faults: Vec<&WorkloadRow> = if self.keys.faults.as_ref() == Some(&faults_key) {
                self.faults.iter().filter_map(|id| m.workloads.get(id)).collect()
            } else {
                let mut faults: Vec<&WorkloadRow> = m.workloads.values().filter(|w| w.is_fault()).collect();
                self.faults_total = faults.len();
                faults.retain(|w| tf.is_empty() || fault_matches(&tf, w));
                fn key(w: &WorkloadRow) -> (Option<&'static str>, Option<&str>) {
                    (w.fault_class().map(|c| c.as_str()), w.last_attempt().map(|a| a.node.as_str()))
                }
                faults.sort_by(|a, b| key(a).cmp(&key(b)).then(b.rec.id.cmp(&a.rec.id)));
                self.fault_widths = widest(&faults);
                self.faults = faults.iter().map(|w| w.rec.id).collect();
                self.keys.faults = Some(faults_key);
                faults
            };
            let history = m.status.as_ref().map(|s| &s.health.faults);
            (self.by_class, self.by_fault_node) = triage_groups(&faults, history, &tf);
            self.keys.groups = Some(groups_key);
        }
        let nodes_key = (v.status, app.filter(View::Nodes).to_string());
        if self.keys.nodes.as_ref() != Some(&nodes_key) {
            (self.nodes, self.node_widths) = match &m.status {
                Some(s) => node_rows(&s.fleet, &s.health, &Filter::parse(&nodes_key.1)),
                None => (Vec::new(), NameWidths::default()),
            };
            self.keys.nodes = Some(nodes_key);
        }
        if self.keys.by_node != Some(v.rows) {
            self.by_node = m.by_node();
            self.keys.by_node = Some(v.rows);
        }
        let audit_key = (v.audit, app.filter(View::Audit).to_string());
        if self.keys.audit.as_ref() != Some(&audit_key) {
            let af = Filter::parse(&audit_key.1);
            self.audit =
                m.audit.iter().rev().filter(|a| af.is_empty() || audit_matches(&af, a)).cloned().collect();
            self.keys.audit = Some(audit_key);
        }
        if self.keys.overview != Some((v.rows, v.status)) {
            self.overview = overview(m);
            self.keys.overview = Some((v.rows, v.status));
        }
    }

    /// The workloads list: which pass the filter (and faults only), then
    /// their order. A sort change reorders the rows that passed; a filter
    /// that only narrows the last one (a key typed at its end) tests only
    /// the rows that passed it.
    fn update_workloads(&mut self, m: &Model, app: &Choice, rows: u64) {
        let text = app.filter(View::Workloads);
        let passing_key = (rows, text.to_string(), app.faults_only);
        let sort_key = (app.sort, app.sort_desc);
        let same_rows = self.keys.passing.as_ref() == Some(&passing_key);
        if same_rows && self.keys.sort == Some(sort_key) {
            return;
        }
        let mut list: Vec<&WorkloadRow> = if same_rows {
            if self.keys.sort == Some((app.sort, !app.sort_desc)) {
                // The order is total (ids break ties): the other
                // direction is the same rows reversed.
                self.workloads.reverse();
                self.keys.sort = Some(sort_key);
                return;
            }
            self.workloads.iter().filter_map(|id| m.workloads.get(id)).collect()
        } else {
            let wf = Filter::parse(text);
            let narrows = self.keys.passing.as_ref().is_some_and(|(r, old, only)| {
                *r == rows && *only == app.faults_only && Filter::narrows(old, text)
            });
            let from: Vec<&WorkloadRow> = if narrows {
                self.workloads.iter().filter_map(|id| m.workloads.get(id)).collect()
            } else {
                m.workloads.values().filter(|w| !app.faults_only || w.is_fault()).collect()
            };
            let list: Vec<&WorkloadRow> =
                from.into_iter().filter(|w| wf.is_empty() || workload_matches(&wf, w)).collect();
            self.workload_widths = widest(&list);
            self.tenant_column = m.workloads.values().any(|w| w.rec.tenant.is_some());
            self.keys.passing = Some(passing_key);
            if narrows && self.keys.sort == Some(sort_key) {
                // What passed is a part of a list in this order already.
                self.workloads = list.iter().map(|w| w.rec.id).collect();
                return;
            }
            list
        };
        list.sort_unstable_by(|a, b| {
            let o = compare(app.sort, a, b).then(a.rec.id.cmp(&b.rec.id));
            if app.sort_desc { o.reverse() } else { o }
        });
        self.workloads = list.iter().map(|w| w.rec.id).collect();
        self.keys.sort = Some(sort_key);
    }
}

/// The widest name, pool and node among workloads (of the last attempt;
/// for a fault, of the failed attempt its row shows).
fn widest(rows: &[&WorkloadRow]) -> NameWidths {
    let mut w = NameWidths::default();
    for r in rows {
        w.name = w.name.max(width(&r.rec.name));
        w.tenant = w.tenant.max(r.rec.tenant.as_deref().map_or(0, width));
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
/// `provider=`, `pool=`, `node=` (of attempt `a`), `class=`, `tenant=`,
/// and `retry=waiting` for one that failed and waits to run again.
fn workload_field<'a>(
    w: &'a WorkloadRow,
    a: Option<&'a crate::engine::model::AttemptRecord>,
) -> impl Fn(&str) -> Option<&'a str> {
    let class = w.fault_class().map(|c| c.as_str());
    let retry = if w.waiting_to_retry() { "waiting" } else { "no" };
    move |k: &str| -> Option<&'a str> {
        match k {
            "state" => Some(w.rec.state.as_str()),
            "name" => Some(w.rec.name.as_str()),
            "provider" => a.map(|a| a.provider.as_str()),
            "pool" => a.map(|a| a.pool.as_str()),
            "node" => a.map(|a| a.node.as_str()),
            "class" => class,
            "retry" => Some(retry),
            "tenant" => w.rec.tenant.as_deref(),
            _ => None,
        }
    }
}

fn workload_matches(f: &Filter, w: &WorkloadRow) -> bool {
    let a = w.last_attempt();
    let text = if f.reads_text() {
        format!(
            "{} {} {} {} {} {}",
            w.rec.id,
            w.rec.name,
            w.rec.state,
            a.map_or("", |a| a.pool.as_str()),
            w.fault_class().map_or("", |c| c.as_str()),
            w.rec.tenant.as_deref().unwrap_or("")
        )
    } else {
        String::new()
    };
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

/// The nodes that pass the filter, and their widest name and pool. Besides
/// `pool=`, `state=` and `node=`, `health=` is `quarantined`, `probation`
/// or `ok`.
fn node_rows(f: &Fleet, health: &HealthView, filter: &Filter) -> (Vec<u32>, NameWidths) {
    let rows: Vec<u32> = (0..f.nodes.len() as u32)
        .filter(|&i| {
            if filter.is_empty() {
                return true;
            }
            let n = &f.nodes[i as usize];
            let pool = f.pool_label(n.pool);
            let state = n.state.to_string();
            let h = health.node(&n.name);
            let field = |k: &str| -> Option<&str> {
                match k {
                    "pool" => Some(pool.as_str()),
                    "state" => Some(state.as_str()),
                    "health" if h.quarantined => Some("quarantined"),
                    "health" if h.probation => Some("probation"),
                    "health" => Some("ok"),
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

/// A "broken first" line of the overview; Enter opens what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// A provider whose status calls fail: its error.
    Unreachable {
        provider: String,
        error: String,
    },
    /// Quarantined nodes, by name.
    Quarantined(Vec<String>),
    /// Nodes that are down, by name.
    Down(Vec<String>),
    /// Workloads waiting because nothing fits them.
    Blocked(usize),
    Failed(usize),
    /// Workloads that failed and wait to run again.
    Retrying(usize),
}

/// One provider's capacity as the overview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderCapacity {
    pub name: String,
    /// GPUs free on ready nodes.
    pub free: u64,
    pub total: u64,
    /// GPUs Canopy holds there.
    pub mine: u64,
    /// Since when its status calls fail, and the error; `None`: it answers.
    pub unreachable: Option<(Option<crate::engine::model::Millis>, String)>,
}

/// A node among the least healthy.
#[derive(Debug, Clone, PartialEq)]
pub struct WeakNode {
    pub name: String,
    pub score: f64,
    pub quarantined: bool,
    pub state: crate::fleet::NodeState,
}

/// Workloads by state, for the overview.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub running: usize,
    pub queued: usize,
    /// Placing or launching.
    pub starting: usize,
    pub succeeded: usize,
    pub failed: usize,
    /// Failed and neither acknowledged nor retried: what needs an operator.
    pub unresolved: usize,
    pub cancelled: usize,
    pub retrying: usize,
}

/// What the overview answers on one screen: what is broken (first), the
/// capacity per provider, the least healthy nodes and what runs.
#[derive(Debug, Clone, Default)]
pub struct Overview {
    pub broken: Vec<Broken>,
    pub providers: Vec<ProviderCapacity>,
    /// Nodes below full health or quarantined, the lowest score first.
    pub weakest: Vec<WeakNode>,
    /// Running workloads, the newest first.
    pub running: Vec<WorkloadId>,
    pub counts: Counts,
    /// GPUs in the fleet, free on ready nodes, and Canopy's.
    pub gpus: (u64, u64, u64),
}

/// The least healthy nodes the overview keeps (it shows what fits).
const WEAKEST: usize = 20;

/// The overview's figures from the read model.
pub fn overview(m: &Model) -> Overview {
    use crate::engine::model::WorkloadState as S;
    use crate::fleet::{NodeState, PoolIdx};
    let mut o = Overview::default();
    let mut running: Vec<WorkloadId> = Vec::new();
    for w in m.workloads.values() {
        let c = &mut o.counts;
        match w.rec.state {
            S::Running => {
                c.running += 1;
                running.push(w.rec.id);
            }
            S::Queued => c.queued += 1,
            S::Placing | S::Launching => c.starting += 1,
            S::Succeeded => c.succeeded += 1,
            S::Failed => c.failed += 1,
            S::Cancelled => c.cancelled += 1,
        }
        c.retrying += usize::from(w.waiting_to_retry());
        // Failures nobody has acknowledged or retried, whatever their age.
        c.unresolved += usize::from(w.rec.state == S::Failed && w.is_fault());
    }
    running.reverse();
    o.running = running;
    // The console may hold only part of a long history: the engine's
    // counts, when it gave them, are the journal's. Unresolved failures
    // and retries are all held, whatever their age.
    if let Some(e) = &m.counts {
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let c = &mut o.counts;
        c.running = n(e.running);
        c.queued = n(e.queued);
        c.starting = n(e.placing + e.launching);
        c.succeeded = n(e.succeeded);
        c.failed = n(e.failed);
        c.cancelled = n(e.cancelled);
    }
    if let Some(s) = &m.status {
        let f = &s.fleet;
        for (p, e) in &s.unreachable {
            o.broken.push(Broken::Unreachable { provider: p.clone(), error: e.clone() });
        }
        let mut quarantined: Vec<String> =
            s.health.nodes.iter().filter(|(_, h)| h.quarantined).map(|(n, _)| n.clone()).collect();
        quarantined.sort();
        if !quarantined.is_empty() {
            o.broken.push(Broken::Quarantined(quarantined));
        }
        let down: Vec<String> =
            f.nodes.iter().filter(|n| n.state == NodeState::Down).map(|n| n.name.clone()).collect();
        if !down.is_empty() {
            o.broken.push(Broken::Down(down));
        }
        if s.blocked > 0 {
            o.broken.push(Broken::Blocked(s.blocked));
        }
        for (i, p) in f.providers.iter().enumerate() {
            let (mut free, mut total) = (0u64, 0u64);
            for pi in p.pools.clone() {
                let pool = f.pool(PoolIdx(pi));
                let nodes = f.pool_nodes(PoolIdx(pi));
                total += u64::from(pool.shape.gpus_per_node) * nodes.len() as u64;
                free += nodes
                    .iter()
                    .filter(|n| n.state == NodeState::Ready)
                    .map(|n| u64::from(n.free.gpus))
                    .sum::<u64>();
            }
            let mine = u64::from(f.canopy_gpus_in_provider(crate::fleet::ProviderIdx(i as u32)));
            let unreachable =
                s.unreachable.get(&p.name).map(|e| (s.unreachable_since.get(&p.name).copied(), e.clone()));
            o.gpus.0 += total;
            o.gpus.1 += free;
            o.gpus.2 += mine;
            o.providers.push(ProviderCapacity { name: p.name.clone(), free, total, mine, unreachable });
        }
        let mut weakest: Vec<WeakNode> = f
            .nodes
            .iter()
            .filter_map(|n| {
                let h = s.health.nodes.get(&n.name)?;
                (h.score < 1.0 || h.quarantined).then(|| WeakNode {
                    name: n.name.clone(),
                    score: h.score,
                    quarantined: h.quarantined,
                    state: n.state,
                })
            })
            .collect();
        weakest.sort_by(|a, b| a.score.total_cmp(&b.score).then_with(|| a.name.cmp(&b.name)));
        weakest.truncate(WEAKEST);
        o.weakest = weakest;
    }
    if o.counts.unresolved > 0 {
        o.broken.push(Broken::Failed(o.counts.unresolved));
    }
    if o.counts.retrying > 0 {
        o.broken.push(Broken::Retrying(o.counts.retrying));
    }
    o
}

/// The newest `n` events for the overview, newest first, each outcome
/// once: a success is its workload's `succeeded`, not also the `ended` of
/// the attempt that made it (the same moment, the same words).
pub fn overview_events(events: &std::collections::VecDeque<EventRecord>, n: usize) -> Vec<&EventRecord> {
    use crate::engine::model::EventKind;
    let mut succeeded: Vec<(WorkloadId, crate::engine::model::Millis)> = Vec::new();
    let mut out = Vec::with_capacity(n);
    for e in events.iter().rev() {
        if out.len() == n {
            break;
        }
        match e.kind {
            EventKind::Succeeded => succeeded.push((e.workload, e.at)),
            EventKind::Ended if succeeded.contains(&(e.workload, e.at)) => continue,
            _ => {}
        }
        out.push(e);
    }
    out
}

#[cfg(test)]
#[path = "derive_tests.rs"]
mod tests;
