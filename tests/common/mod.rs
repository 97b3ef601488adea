//! Shared by the engine-core scenario tests (`engine_core`,
//! `sim_policies`, `sim_unblock`): small single-provider GPU fleets, and
//! [`World`], which drives `canopy::engine::core::Core` by hand on a
//! virtual clock, playing the provider's and the shell's side and reading
//! back what the core decided and journalled.
//!
//! Each test file compiles this module into its own crate and uses only
//! part of it; what one of them leaves unused would warn as dead code
//! (and fail `cargo clippy -- -D warnings`), hence the allow.
#![allow(dead_code)]

use canopy::accel::{ComputeCapability, Family, Interconnect, Vendor};
use canopy::engine::core::{Action, Core, CoreConfig, Event, OutputsResult, Reply, Restore};
use canopy::engine::model::*;
use canopy::failure::ProviderEnd;
use canopy::fleet::{Accelerator, Fleet, FleetBuilder, Lifecycle, NodeDef, PoolDef, ProviderKind, Shape};
use canopy::providers::{AttemptStatus, LaunchAck};
use canopy::spec::{Format, Spec, load};
use std::time::Duration;

/// Where every [`World`]'s clock starts (Unix milliseconds).
pub const T0: i64 = 1_700_000_000_000;

/// An on-demand cloud VM pool in eu-west of `gpus_per_node`-GPU nodes:
/// Nvidia Ampere accelerators named `model` with `gpu_memory_gb` each,
/// over PCIe; 16 CPU cores and 64 GB of host memory per GPU, a 500 GB
/// disk, 30 s to start. A test that needs other hosts sets `shape` after.
pub fn gpu_pool(name: &str, model: &str, gpus_per_node: u32, gpu_memory_gb: f64, price: f64) -> PoolDef {
    PoolDef {
        name: name.into(),
        region: "eu-west".into(),
        shape: Shape {
            accelerator: Some(Accelerator {
                vendor: Vendor::Nvidia,
                model: model.into(),
                family: Family::Ampere,
                compute_capability: ComputeCapability::new(8, 0),
                memory_gb: gpu_memory_gb,
                throughput: None,
            }),
            gpus_per_node,
            interconnect: Interconnect::Pcie,
            cpu_cores: 16.0 * f64::from(gpus_per_node),
            memory_gb: 64.0 * f64::from(gpus_per_node),
            disk_gb: 500.0,
            fabric: None,
        },
        price_per_hour: price,
        startup: Duration::from_secs(30),
        capabilities: vec![],
        compliance: vec![],
        reserved: false,
        interruptible: false,
        lifecycle: Lifecycle::Vm,
        lend_limit_gpus: None,
    }
}

/// One cloud provider, "cloud", with `pools` in this order, each holding
/// idle nodes of the given names.
pub fn cloud_fleet(pools: Vec<(PoolDef, Vec<&str>)>) -> Fleet {
    let mut b = FleetBuilder::new();
    b.provider("cloud", ProviderKind::Cloud, None).unwrap();
    for (def, nodes) in pools {
        b.pool(def, nodes.into_iter().map(NodeDef::idle).collect()).unwrap();
    }
    b.build()
}

/// The job every scenario submits: `gpus` GPUs, 4 CPU cores and 16 GB of
/// host memory, with `extra` TOML (top-level keys, or whole tables)
/// before `[runtime]`.
pub fn job_spec(gpus: u32, extra: &str) -> Spec {
    let text = format!(
        "name = \"job\"\n{extra}\n[runtime]\ncommand = [\"train\"]\n[resources]\ngpus = {gpus}\ncpu_cores = 4\nmemory_gb = 16\n"
    );
    load::parse(&text, "job.toml", Format::Toml).expect("valid spec").spec
}

/// A spec parsed from TOML text.
pub fn toml_spec(text: &str, file: &str) -> Spec {
    load::parse(text, file, Format::Toml).expect("valid spec").spec
}

/// The `Submit` the shell sends for `spec`.
pub fn submit_event(spec: &Spec, idempotency_key: Option<&str>) -> Event {
    Event::Submit {
        request: 1,
        spec: Box::new(spec.clone()),
        spec_hash: spec.content_hash(),
        idempotency_key: idempotency_key.map(Into::into),
        by: None,
        tenant: None,
    }
}

/// A core over a fleet, its virtual clock, and every action it has taken.
pub struct World {
    pub core: Core,
    /// The virtual clock, Unix milliseconds.
    pub now: i64,
    pub actions: Vec<Action>,
}

impl World {
    /// A core with the default configuration, at [`T0`].
    pub fn new(fleet: Fleet) -> Self {
        Self::with(fleet, CoreConfig::default())
    }

    pub fn with(fleet: Fleet, config: CoreConfig) -> Self {
        Self { core: Core::new("st0001", fleet, config), now: T0, actions: vec![] }
    }

    /// Hands the core one event at the current time; returns (and keeps)
    /// what it does.
    pub fn send(&mut self, e: Event) -> Vec<Action> {
        let out = self.core.handle(e, Millis(self.now));
        self.actions.extend(out.clone());
        out
    }

    /// Moves the clock on and ticks.
    pub fn advance(&mut self, secs: f64) {
        self.now += (secs * 1000.0) as i64;
        self.send(Event::Tick);
    }

    /// Submits `spec`; the core's reply.
    pub fn submit_spec(&mut self, spec: &Spec, idempotency_key: Option<&str>) -> Reply {
        self.send(submit_event(spec, idempotency_key))
            .into_iter()
            .find_map(|a| if let Action::Reply { reply, .. } = a { Some(reply) } else { None })
            .expect("a reply to the submit")
    }

    /// Submits `spec` for `tenant`, by `by` (a token's name), as the API
    /// hands it on; the new workload.
    pub fn submit_for(&mut self, spec: &Spec, tenant: &str, by: Option<&str>) -> WorkloadId {
        let e = Event::Submit {
            request: 1,
            spec: Box::new(spec.clone()),
            spec_hash: spec.content_hash(),
            idempotency_key: None,
            by: by.map(Into::into),
            tenant: Some(tenant.into()),
        };
        match self
            .send(e)
            .into_iter()
            .find_map(|a| if let Action::Reply { reply, .. } = a { Some(reply) } else { None })
        {
            Some(Reply::Submitted { id, .. }) => id,
            other => panic!("no submit reply: {other:?}"),
        }
    }

    /// Submits [`job_spec`]`(gpus, extra)`; the new workload.
    pub fn submit_job(&mut self, gpus: u32, extra: &str) -> WorkloadId {
        match self.submit_spec(&job_spec(gpus, extra), None) {
            Reply::Submitted { id, .. } => id,
            other => panic!("no submit reply: {other:?}"),
        }
    }

    /// Submits a one-GPU job with `extra` TOML.
    pub fn submit(&mut self, extra: &str) -> WorkloadId {
        self.submit_job(1, extra)
    }

    /// Submits a plain job of `gpus` GPUs.
    pub fn submit_gpus(&mut self, gpus: u32) -> WorkloadId {
        self.submit_job(gpus, "")
    }

    /// Every launch so far, oldest first: (attempt, node).
    pub fn launch_log(&self) -> impl DoubleEndedIterator<Item = (AttemptId, &str)> {
        self.actions.iter().filter_map(|a| match a {
            Action::Launch { attempt, nodes, .. } => {
                Some((*attempt, nodes.first().map_or("", String::as_str)))
            }
            _ => None,
        })
    }

    /// The last launch for this workload, if any: (attempt, node).
    pub fn try_last_launch(&self, id: WorkloadId) -> Option<(AttemptId, String)> {
        self.launch_log().rev().find(|(a, _)| a.workload == id).map(|(a, node)| (a, node.to_string()))
    }

    /// The last launch for this workload: (attempt, node).
    pub fn last_launch(&self, id: WorkloadId) -> (AttemptId, String) {
        self.try_last_launch(id).expect("a launch")
    }

    /// The node of this workload's last launch, if any.
    pub fn launched(&self, id: WorkloadId) -> Option<&str> {
        self.launch_log().rev().find(|(a, _)| a.workload == id).map(|(_, node)| node)
    }

    /// How many launches this workload has had (re-sends included).
    pub fn launches(&self, id: WorkloadId) -> usize {
        self.launch_log().filter(|(a, _)| a.workload == id).count()
    }

    /// The provider accepts the launch.
    pub fn ack(&mut self, a: AttemptId) {
        self.send(Event::LaunchResult {
            attempt: a,
            result: Ok(LaunchAck { provider_ref: "i-1".into(), adopted: false }),
        });
    }

    /// The provider accepts the launch and reports it running.
    pub fn run(&mut self, a: AttemptId) {
        self.ack(a);
        self.send(Event::Status { attempt: a, status: AttemptStatus::Running });
    }

    /// The provider reports an end; the shell collects (outputs only after
    /// a clean exit) and reports back with the log's `tail`.
    pub fn end(&mut self, a: AttemptId, end: ProviderEnd, tail: &[&str]) {
        let out = self.send(Event::Status { attempt: a, status: AttemptStatus::Ended(end.clone()) });
        assert!(
            out.iter().any(|x| matches!(x, Action::Collect { attempt, .. } if *attempt == a)),
            "collect requested"
        );
        let outputs = if end == (ProviderEnd::Exited { code: 0 }) {
            OutputsResult::Collected { count: 0 }
        } else {
            OutputsResult::Skipped
        };
        let log_tail = tail.iter().map(|s| s.to_string()).collect();
        self.send(Event::Collected { attempt: a, end, log_tail, outputs });
    }

    /// The provider confirms a termination the core asked for; the shell
    /// collects it as having ended with `end`, no log, no outputs.
    pub fn confirm_terminated(&mut self, a: AttemptId, end: ProviderEnd) {
        self.send(Event::Terminated { attempt: a, result: Ok(()) });
        self.send(Event::Collected { attempt: a, end, log_tail: vec![], outputs: OutputsResult::Skipped });
    }

    /// Whether the core has asked to stop this attempt.
    pub fn terminated(&self, a: AttemptId) -> bool {
        self.actions.iter().any(|x| matches!(x, Action::Terminate { attempt, .. } if *attempt == a))
    }

    pub fn state(&self, id: WorkloadId) -> WorkloadState {
        self.workload(id).state
    }

    /// Everything journalled so far, oldest first.
    pub fn records(&self) -> impl DoubleEndedIterator<Item = &Record> {
        self.actions.iter().filter_map(|a| if let Action::Record(r) = a { Some(r) } else { None })
    }

    /// What a restarted core reads from the journal after this run: every
    /// workload and attempt as last recorded, every health observation,
    /// and the largest workload id.
    pub fn journal(&self) -> Restore {
        let mut workloads = std::collections::BTreeMap::new();
        let mut attempts = std::collections::BTreeMap::new();
        let mut health = Vec::new();
        for r in self.records() {
            match r {
                Record::Workload(r) => {
                    workloads.insert(r.id, (**r).clone());
                }
                Record::Attempt(r) => {
                    attempts.insert(r.id, (**r).clone());
                }
                Record::Health(h) => health.push(h.clone()),
                _ => {}
            }
        }
        Restore {
            max_id: workloads.keys().map(|id: &WorkloadId| id.0).max().unwrap_or(0),
            workloads: workloads.into_values().collect(),
            attempts: attempts.into_values().collect(),
            health,
            ..Restore::default()
        }
    }

    /// The workload's latest record as the journal would hold it.
    pub fn workload(&self, id: WorkloadId) -> WorkloadRecord {
        let latest = self.records().rev().find_map(|r| match r {
            Record::Workload(w) if w.id == id => Some(w),
            _ => None,
        });
        (**latest.expect("a workload record")).clone()
    }

    /// The attempt's latest record as the journal would hold it.
    pub fn attempt(&self, a: AttemptId) -> AttemptRecord {
        let latest = self.records().rev().find_map(|r| match r {
            Record::Attempt(x) if x.id == a => Some(x),
            _ => None,
        });
        (**latest.expect("an attempt record")).clone()
    }

    /// The messages of this workload's journalled events of `kind`, oldest
    /// first.
    pub fn events(&self, id: WorkloadId, kind: EventKind) -> Vec<String> {
        self.records()
            .filter_map(|r| match r {
                Record::Event(e) if e.workload == id && e.kind == kind => Some(e.message.clone()),
                _ => None,
            })
            .collect()
    }
}
