//! Launches a provider refuses for lack of capacity (issue #23 items 6
//! and 7), driven by hand on the engine core's test clock: the provider's
//! side is played by [`Provider`], which refuses on nodes that are full
//! whatever the inventory says, and the shell's inventory refreshes are
//! sent every 30 s. What an operator would see: how many launches each
//! node gets, how many attempt rows a workload has, what it waits with,
//! and that it runs once capacity appears.

mod common;

use canopy::engine::core::{Action, Core, CoreConfig, Event, Restore};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Fleet, Free, NodeDef, PoolDef};
use canopy::providers::LaunchError;
use common::{World, cloud_fleet, gpu_pool};
use std::collections::{BTreeMap, BTreeSet};

/// The provider's truth: nodes with no room, whatever its inventory said.
#[derive(Default)]
struct Provider {
    full: BTreeSet<String>,
    /// Launches answered so far (the first ones of [`World::launch_log`]).
    answered: usize,
}

impl Provider {
    /// Answers every launch not answered yet: refused for capacity on a
    /// full node, else accepted and running.
    fn answer(&mut self, w: &mut World) {
        loop {
            let new: Vec<(AttemptId, String)> =
                w.launch_log().skip(self.answered).map(|(a, n)| (a, n.to_string())).collect();
            if new.is_empty() {
                return;
            }
            self.answered += new.len();
            for (a, node) in new {
                if self.full.contains(&node) {
                    let why = format!("node {node} has no GPU free for it");
                    w.send(Event::LaunchResult { attempt: a, result: Err(LaunchError::Capacity(why)) });
                } else {
                    w.run(a);
                }
            }
        }
    }
}

/// Each node's inventory line: what others use on it.
fn report(pools: &[(PoolDef, Vec<(&str, u32)>)]) -> Event {
    let pools = pools
        .iter()
        .map(|(def, nodes)| {
            let nodes = nodes
                .iter()
                .map(|&(name, gpus)| NodeDef {
                    used: Free { gpus, cpu_cores: 0.0, memory_gb: 0.0, disk_gb: 0.0 },
                    ..NodeDef::idle(name)
                })
                .collect();
            (def.clone(), nodes)
        })
        .collect();
    Event::Inventory { provider: "cloud".into(), pools }
}

/// The attempt ids journalled for a workload: its attempt rows.
fn rows(w: &World, id: WorkloadId) -> BTreeSet<AttemptId> {
    w.records()
        .filter_map(|r| match r {
            Record::Attempt(a) if a.id.workload == id => Some(a.id),
            _ => None,
        })
        .collect()
}

fn launches_on(w: &World, id: WorkloadId) -> Vec<String> {
    w.launch_log().filter(|(a, _)| a.workload == id).map(|(_, n)| n.to_string()).collect()
}

/// Two 2-GPU nodes whose GPUs others took since the last inventory, and
/// one 1-GPU node where small work comes and goes all along (releases
/// elsewhere: before the fix, each one sent the refused work back to the
/// full nodes). At most one launch per full node per inventory refresh,
/// one attempt row however many refusals, no health observation, a
/// reason while it waits; placed as soon as the inventory shows room.
#[test]
fn a_node_that_refuses_for_capacity_is_launched_on_at_most_once_per_inventory_refresh() {
    let big = gpu_pool("big", "GPU-80", 2, 80.0, 2.0);
    let small = gpu_pool("small", "GPU-24", 1, 24.0, 1.0);
    let mut w = World::new(cloud_fleet(vec![(big.clone(), vec!["n1", "n2"]), (small.clone(), vec!["m1"])]));
    let mut p = Provider { full: ["n1", "n2"].map(String::from).into(), ..Provider::default() };
    let stale = [(big.clone(), vec![("n1", 0), ("n2", 0)]), (small.clone(), vec![("m1", 0)])];
    w.send(report(&stale));
    let id = w.submit_gpus(2);
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id), ["n1", "n2"], "each node tried once");
    assert!(w.core.is_blocked(id), "nothing else fits: it waits");
    let reason = w.workload(id).reason.unwrap_or_default();
    assert!(reason.contains("launch refused for capacity"), "{reason}");

    // Five minutes: the inventory keeps repeating what it said before the
    // refusals, and 1-GPU work starts and ends on m1 every 10 s.
    let mut per_refresh: Vec<BTreeMap<String, usize>> = Vec::new();
    let mut small_job: Option<AttemptId> = None;
    for s in 1..=300 {
        let before = w.launch_log().count();
        w.advance(1.0);
        if s % 10 == 0 {
            match small_job.take() {
                Some(a) => w.end(a, ProviderEnd::Exited { code: 0 }, &[]),
                None => {
                    let j = w.submit_job(1, "[resources.accelerator]\nmodel = \"GPU-24\"");
                    p.answer(&mut w);
                    small_job = Some(w.last_launch(j).0);
                }
            }
        }
        if s % 30 == 0 {
            w.send(report(&stale));
            per_refresh.push(BTreeMap::new());
        }
        p.answer(&mut w);
        let window = per_refresh.last_mut();
        let new: Vec<(AttemptId, String)> =
            w.launch_log().skip(before).map(|(a, n)| (a, n.to_string())).collect();
        if let Some(window) = window {
            for (_, node) in new.iter().filter(|(a, _)| a.workload == id) {
                *window.entry(node.clone()).or_default() += 1;
            }
        }
    }
    for (k, window) in per_refresh.iter().enumerate() {
        assert!(window.values().all(|&n| n <= 1), "refresh {k}: {window:?}");
    }
    let tried = launches_on(&w, id);
    eprintln!("{} launches in 5 minutes, per refresh: {per_refresh:?}", tried.len());
    // Each node: at 0 s, then after 30, 60 and 120 s of backoff (the
    // inventory repeats itself, so only the backoff lets it ask again).
    assert!(tried.len() <= 8, "launches on stale reports back off: {tried:?}");
    assert_eq!(w.events(id, EventKind::Refused).len(), tried.len());
    assert_eq!(rows(&w, id).len(), 1, "one attempt row for {} refusals", tried.len());
    assert!(
        !w.records().any(|r| matches!(r, Record::Health(h) if h.node.starts_with('n'))),
        "a full node is not a faulty one"
    );
    assert!(w.core.is_blocked(id));

    // The inventory catches up (others hold every GPU): still nothing.
    let before = tried.len();
    w.send(report(&[(big.clone(), vec![("n1", 2), ("n2", 2)]), (small.clone(), vec![("m1", 0)])]));
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id).len(), before);
    // n2 frees up: its inventory says so, and the work is placed there.
    p.full.remove("n2");
    w.advance(30.0);
    w.send(report(&[(big, vec![("n1", 2), ("n2", 0)]), (small, vec![("m1", 0)])]));
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id).last().map(String::as_str), Some("n2"));
    assert_eq!(w.state(id), WorkloadState::Running);
    let (a, _) = w.last_launch(id);
    w.end(a, ProviderEnd::Exited { code: 0 }, &[]);
    assert_eq!(w.state(id), WorkloadState::Succeeded);
    assert_eq!(rows(&w, id).len(), 1);
    assert_eq!(w.workload(id).attempts, 1);
}

/// A release on the node that refused makes what it released usable at
/// once; a release on another node does not send the work back.
#[test]
fn a_release_on_the_node_that_refused_frees_what_it_released() {
    let two = gpu_pool("two", "GPU-80", 2, 80.0, 2.0);
    let one = gpu_pool("one", "GPU-24", 1, 24.0, 9.0);
    let mut w = World::new(cloud_fleet(vec![(two, vec!["n1"]), (one, vec!["m1"])]));
    let mut p = Provider::default();
    // Ours on n1, and something on m1.
    let mine = w.submit_job(1, "[resources.accelerator]\nmodel = \"GPU-80\"");
    let elsewhere = w.submit_job(1, "[resources.accelerator]\nmodel = \"GPU-24\"");
    p.answer(&mut w);
    assert_eq!(launches_on(&w, mine), ["n1"]);
    assert_eq!(launches_on(&w, elsewhere), ["m1"]);
    // Others took n1's other GPU since the last inventory.
    p.full.insert("n1".into());
    let id = w.submit_job(1, "[resources.accelerator]\nmodel = \"GPU-80\"");
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id), ["n1"]);
    assert!(w.core.is_blocked(id));
    w.end(w.last_launch(elsewhere).0, ProviderEnd::Exited { code: 0 }, &[]);
    w.advance(1.0);
    assert_eq!(launches_on(&w, id).len(), 1, "a release on m1 says nothing of n1");
    // Ours on n1 ends: its GPU is free again, at the provider too.
    p.full.remove("n1");
    w.end(w.last_launch(mine).0, ProviderEnd::Exited { code: 0 }, &[]);
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id), ["n1", "n1"]);
    assert_eq!(w.state(id), WorkloadState::Running);
    assert_eq!(rows(&w, id).len(), 1);
}

/// A CPU-only pool of two nodes and a GPU pool: work without GPUs refused
/// on one CPU node goes to the other, not to the GPU node (before: the
/// refusal ruled the whole CPU pool out and the work took the GPU node);
/// only when no CPU node is believed free does it take the GPU node, and
/// its placement says why.
#[test]
fn cpu_work_refused_on_a_cpu_node_takes_another_cpu_node_before_a_gpu_node() {
    let mut cpu = gpu_pool("cpu", "none", 1, 0.0, 0.5);
    cpu.shape.accelerator = None;
    cpu.shape.gpus_per_node = 0;
    cpu.shape.cpu_cores = 32.0;
    cpu.shape.memory_gb = 64.0;
    let gpu = gpu_pool("gpu", "GPU-24", 1, 24.0, 1.0);
    let fleet: Fleet = cloud_fleet(vec![(cpu, vec!["c1", "c2"]), (gpu, vec!["g1"])]);
    let mut w = World::new(fleet);
    let mut p = Provider { full: ["c1".to_string()].into(), ..Provider::default() };
    let id = w.submit_job(0, "");
    p.answer(&mut w);
    assert_eq!(launches_on(&w, id), ["c1", "c2"], "the other CPU node, not g1");
    assert_eq!(w.state(id), WorkloadState::Running);
    // One attempt id, a token per placement: a late status answer about
    // the refused one (the shell polls by token) is told apart.
    let tokens: Vec<(AttemptId, String)> = w
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { attempt, token, .. } if attempt.workload == id => {
                Some((*attempt, token.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_eq!(tokens[0].0, tokens[1].0);
    assert_ne!(tokens[0].1, tokens[1].1);
    assert_eq!(w.core.live_token(tokens[1].0).as_ref(), Some(&tokens[1].1));
    // Both CPU nodes refuse the next one: the GPU node is its last resort.
    p.full.insert("c2".into());
    let next = w.submit_job(0, "");
    p.answer(&mut w);
    let tried = launches_on(&w, next);
    assert_eq!(tried.last().map(String::as_str), Some("g1"), "{tried:?}");
    assert!(tried[..tried.len() - 1].iter().all(|n| n.starts_with('c')), "{tried:?}");
    let a = w.attempt(w.last_launch(next).0);
    assert!(a.score_breakdown.ends_with("no CPU-only node fits"), "{}", a.score_breakdown);
    assert_eq!(rows(&w, id).len(), 1);
    assert_eq!(rows(&w, next).len(), 1);
}

/// When the launch was re-sent after a timeout, another call with the same
/// token may still be accepted: a refusal then closes the attempt as a
/// capacity failure, and the next placement is a new attempt (its id is
/// never given to a placement that might be the one that runs).
#[test]
fn a_refusal_of_a_resent_launch_closes_the_attempt() {
    let p = gpu_pool("p", "GPU-24", 1, 24.0, 1.0);
    let q = gpu_pool("q", "GPU-24", 1, 24.0, 2.0);
    let mut w = World::new(cloud_fleet(vec![(p, vec!["n1"]), (q, vec!["m1"])]));
    let id = w.submit("");
    let (a, _) = w.last_launch(id);
    w.advance(121.0);
    assert_eq!(w.launches(id), 2, "re-sent after the launch timeout");
    w.send(Event::LaunchResult { attempt: a, result: Err(LaunchError::Capacity("none".into())) });
    let (next, node) = w.last_launch(id);
    assert_eq!((next.n, node.as_str()), (2, "m1"));
    assert_eq!(w.attempt(a).state, AttemptState::Failed);
}

/// After a restart, a workload whose launch was refused is queued (its
/// refused row is not a live attempt to re-send) and its next placement
/// takes that row.
#[test]
fn a_restart_after_a_refusal_places_the_workload_again_in_the_same_row() {
    let pool = gpu_pool("p", "GPU-24", 1, 24.0, 1.0);
    let fleet = cloud_fleet(vec![(pool, vec!["n1"])]);
    let mut w = World::new(fleet.clone());
    let mut p = Provider { full: ["n1".to_string()].into(), ..Provider::default() };
    let id = w.submit("");
    p.answer(&mut w);
    assert!(w.core.is_blocked(id));
    let mut workloads = BTreeMap::new();
    let mut attempts = BTreeMap::new();
    for r in w.records() {
        match r {
            Record::Workload(r) => {
                workloads.insert(r.id, (**r).clone());
            }
            Record::Attempt(r) => {
                attempts.insert(r.id, (**r).clone());
            }
            _ => {}
        }
    }
    let mut core = Core::new("st0001", fleet, CoreConfig::default());
    let restore = Restore {
        workloads: workloads.into_values().collect(),
        attempts: attempts.into_values().collect(),
        max_id: 1,
        ..Restore::default()
    };
    let out = core.restore(restore, Millis(w.now + 1000));
    let launched: Vec<AttemptId> = out
        .iter()
        .filter_map(|a| if let Action::Launch { attempt, .. } = a { Some(*attempt) } else { None })
        .collect();
    assert_eq!(launched, [AttemptId { workload: id, n: 1 }], "placed again, in the refused row");
    assert_eq!(core.workload(id).map(|r| r.attempts), Some(1));
}
