//! The sim provider over the local provider, which really runs the
//! commands: what an engine sees through the `Provider` trait. Waits on
//! real processes are bounded polls; nothing asserts on elapsed time.

use canopy::engine::model::{AttemptId, Millis, WorkloadId};
use canopy::failure::ProviderEnd;
use canopy::providers::local::{ContainerPolicy, LocalConfig, LocalProvider, ShimCommand};
use canopy::providers::sim::{Clock, FaultRates, ManualClock, SimConfig, SimMarket, SimProvider};
use canopy::providers::{AttemptStatus, LaunchError, LaunchRequest, LogStream, Provider};
use canopy::spec::Spec;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Counts the launches that reach the executor.
struct Counting {
    inner: Arc<dyn Provider>,
    launches: AtomicU32,
}

#[async_trait::async_trait]
impl Provider for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn inventory(&self) -> Result<canopy::providers::Inventory, canopy::providers::ProviderError> {
        self.inner.inventory().await
    }
    async fn launch(&self, req: &LaunchRequest) -> Result<canopy::providers::LaunchAck, LaunchError> {
        self.launches.fetch_add(1, Ordering::SeqCst);
        self.inner.launch(req).await
    }
    async fn status(&self, token: &str) -> Result<AttemptStatus, canopy::providers::ProviderError> {
        self.inner.status(token).await
    }
    async fn logs(
        &self,
        token: &str,
        stream: LogStream,
        offset: u64,
        max: usize,
    ) -> Result<canopy::providers::LogChunk, canopy::providers::ProviderError> {
        self.inner.logs(token, stream, offset, max).await
    }
    async fn outputs(
        &self,
        token: &str,
        spec: &Spec,
        dest: &std::path::Path,
    ) -> Result<canopy::providers::Collection, canopy::providers::ProviderError> {
        self.inner.outputs(token, spec, dest).await
    }
    async fn terminate(&self, token: &str) -> Result<(), canopy::providers::ProviderError> {
        self.inner.terminate(token).await
    }
    async fn list_owned(
        &self,
        store_id: &str,
    ) -> Result<Vec<canopy::providers::Owned>, canopy::providers::ProviderError> {
        self.inner.list_owned(store_id).await
    }
}

const T0: Millis = Millis(1_714_678_800_000);
const STORE: &str = "s1";

struct World {
    clock: Arc<ManualClock>,
    exec: Arc<Counting>,
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        let shim = ShimCommand { program: env!("CARGO_BIN_EXE_canopy-shim").into(), args: vec![] };
        let mut cfg = LocalConfig::new(tmp.path().join("attempts"), shim);
        cfg.grace = Duration::from_secs(1);
        cfg.containers = ContainerPolicy::Disabled;
        let exec: Arc<dyn Provider> = Arc::new(LocalProvider::new(cfg));
        World {
            clock: Arc::new(ManualClock::new(T0)),
            exec: Arc::new(Counting { inner: exec, launches: AtomicU32::new(0) }),
            tmp,
        }
    }

    fn provider(&self, name: &str, config: SimConfig) -> SimProvider {
        let market = Arc::new(SimMarket::new(&canopy::fleet::load::demo().unwrap(), config).unwrap());
        let clock: Arc<dyn Clock> = self.clock.clone();
        SimProvider::new(name, market, self.exec.clone(), clock).unwrap()
    }

    fn req(&self, store: &str, w: u64, pool: &str, node: &str, gpus: u32, command: &[&str]) -> LaunchRequest {
        let cmd: Vec<String> = command.iter().map(|s| format!("{s:?}")).collect();
        let text =
            format!("name = \"t\"\n[runtime]\ncommand = [{}]\n[resources]\ngpus = {gpus}\n", cmd.join(", "));
        let spec = canopy::spec::load::parse(&text, "t.toml", canopy::spec::Format::Toml).unwrap().spec;
        let attempt = AttemptId { workload: WorkloadId(w), n: 1 };
        LaunchRequest {
            attempt,
            token: attempt.token(store, ""),
            spec: Arc::new(spec),
            pool: pool.into(),
            node: node.into(),
            nodes: vec![node.into()],
            checkpoint_dir: None,
            secrets: Vec::new(),
            artifact_dir: self.tmp.path().join(format!("w{w}")),
        }
    }
}

/// Polls until the attempt ends (the command runs in real time).
async fn until_ended(p: &dyn Provider, token: &str) -> ProviderEnd {
    for _ in 0..600 {
        if let AttemptStatus::Ended(end) = p.status(token).await.unwrap() {
            return end;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{token} did not end within 30 s");
}

async fn read_all(p: &dyn Provider, token: &str, stream: LogStream, chunk: usize) -> String {
    let (mut offset, mut out) = (0, Vec::new());
    loop {
        let c = p.logs(token, stream, offset, chunk).await.unwrap();
        if c.data.is_empty() {
            return String::from_utf8(out).unwrap();
        }
        assert!(c.data.len() <= chunk);
        out.extend_from_slice(&c.data);
        offset = c.next_offset;
    }
}

#[tokio::test]
async fn a_vm_attempt_boots_then_really_runs_its_command() {
    let w = World::new();
    let p = w.provider("cloud-a", SimConfig::no_faults());
    let r = w.req(
        STORE,
        1,
        "h100x8-ondemand",
        "cloud-a-h100x8-ondemand-00",
        8,
        &["sh", "-c", "echo hello from the sim"],
    );
    let ack = p.launch(&r).await.unwrap();
    assert!(ack.provider_ref.starts_with("i-0") && !ack.adopted, "{ack:?}");
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Pending);
    assert_eq!(read_all(&p, &r.token, LogStream::Stdout, 64).await, "", "nothing runs while it boots");
    w.clock.advance(Duration::from_secs(60));
    assert_eq!(
        p.status(&r.token).await.unwrap(),
        AttemptStatus::Pending,
        "a 4-minute boot is not over after 1"
    );
    assert_eq!(w.exec.launches.load(Ordering::SeqCst), 0);

    w.clock.advance(Duration::from_secs(600));
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Running);
    assert_eq!(until_ended(&p, &r.token).await, ProviderEnd::Exited { code: 0 });
    assert_eq!(read_all(&p, &r.token, LogStream::Stdout, 64).await, "hello from the sim\n");
    assert_eq!(w.exec.launches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_injected_nccl_timeout_stops_the_process_and_signs_its_stderr() {
    let w = World::new();
    let config =
        SimConfig { faults: FaultRates { nccl_timeout: 1.0, ..FaultRates::NONE }, ..SimConfig::no_faults() };
    let window = config.fault_window;
    let p = w.provider("onprem-fra", config);
    let script = "echo step 1 loss 2.31; echo 'NCCL INFO Bootstrap : Using eth0' >&2; sleep 60";
    let r = w.req(STORE, 2, "h100-nvl", "fra-h100-03", 8, &["sh", "-c", script]);
    assert!(p.launch(&r).await.unwrap().provider_ref.starts_with("job "));
    w.clock.advance(Duration::from_secs(3600));
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Running);
    // Let the real process write its first lines.
    for _ in 0..250 {
        if !read_all(&p, &r.token, LogStream::Stderr, 4096).await.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.clock.advance(window);
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Ended(ProviderEnd::Exited { code: 1 }));
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Ended(ProviderEnd::Exited { code: 1 }));

    let stderr = read_all(&p, &r.token, LogStream::Stderr, 1 << 16).await;
    assert!(stderr.starts_with("NCCL INFO Bootstrap : Using eth0\n"), "real stderr first: {stderr}");
    assert!(stderr.contains("Watchdog caught collective operation timeout"), "{stderr}");
    assert!(stderr.ends_with("Fatal Python error: Aborted\n"), "{stderr}");
    assert_eq!(read_all(&p, &r.token, LogStream::Stderr, 7).await, stderr, "same bytes in small chunks");
    assert_eq!(read_all(&p, &r.token, LogStream::Stdout, 4096).await, "step 1 loss 2.31\n");
    // The real process was stopped, not left sleeping.
    match w.exec.status(&r.token).await.unwrap() {
        AttemptStatus::Ended(ProviderEnd::Signaled { .. } | ProviderEnd::Cancelled) => {}
        other => panic!("the executor still has it: {other:?}"),
    }
}

#[tokio::test]
async fn a_process_that_ends_before_its_fault_keeps_its_own_end() {
    let w = World::new();
    let config =
        SimConfig { faults: FaultRates { cuda_oom: 1.0, ..FaultRates::NONE }, ..SimConfig::no_faults() };
    let window = config.fault_window;
    let p = w.provider("market", config);
    let r = w.req(STORE, 10, "rtx4090", "market-rtx4090-03", 1, &["sh", "-c", "echo done; echo warn >&2"]);
    p.launch(&r).await.unwrap();
    w.clock.advance(Duration::from_secs(600));
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Running);
    // Wait (in real time) for the executor to see the end, then let the fault's moment pass.
    for _ in 0..600 {
        if matches!(w.exec.status(&r.token).await.unwrap(), AttemptStatus::Ended(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    w.clock.advance(window);
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Ended(ProviderEnd::Exited { code: 0 }));
    assert_eq!(read_all(&p, &r.token, LogStream::Stderr, 4096).await, "warn\n", "no signature added");
}

#[tokio::test]
async fn the_same_token_is_adopted_and_never_started_twice() {
    let w = World::new();
    let p = w.provider("k8s-b", SimConfig::no_faults());
    let r = w.req(STORE, 3, "a100-80-ew", "k8s-b-a100-02", 1, &["sh", "-c", "echo once"]);
    let first = p.launch(&r).await.unwrap();
    assert!(first.provider_ref.starts_with("ctr-"));
    let again = p.launch(&r).await.unwrap();
    assert_eq!(again.provider_ref, first.provider_ref);
    assert!(again.adopted);
    w.clock.advance(Duration::from_secs(600));
    let (a, b) = tokio::join!(p.status(&r.token), p.status(&r.token));
    assert!(a.is_ok() && b.is_ok());
    until_ended(&p, &r.token).await;
    assert!(p.launch(&r).await.unwrap().adopted);
    assert_eq!(w.exec.launches.load(Ordering::SeqCst), 1);
    assert_eq!(read_all(&p, &r.token, LogStream::Stdout, 64).await, "once\n");
}

#[tokio::test]
async fn a_launch_whose_answer_was_lost_is_adopted_on_retry() {
    let w = World::new();
    let config = SimConfig {
        faults: FaultRates { launch_timeout: 1.0, ..FaultRates::NONE },
        ..SimConfig::no_faults()
    };
    let p = w.provider("market", config);
    let r = w.req(STORE, 4, "rtx4090", "market-rtx4090-00", 1, &["true"]);
    assert_eq!(p.launch(&r).await, Err(LaunchError::Timeout));
    let ack = p.launch(&r).await.unwrap();
    assert!(ack.adopted, "the first launch went through; only its answer was lost");
}

#[tokio::test]
async fn terminate_while_pending_cancels_before_anything_runs() {
    let w = World::new();
    let p = w.provider("ray-iad", SimConfig::no_faults());
    let r = w.req(STORE, 5, "l4", "ray-iad-l4-00", 1, &["sh", "-c", "echo should not run"]);
    p.launch(&r).await.unwrap();
    p.terminate(&r.token).await.unwrap();
    w.clock.advance(Duration::from_secs(3600));
    assert_eq!(p.status(&r.token).await.unwrap(), AttemptStatus::Ended(ProviderEnd::Cancelled));
    assert_eq!(w.exec.launches.load(Ordering::SeqCst), 0);
    assert_eq!(read_all(&p, &r.token, LogStream::Stdout, 64).await, "");
    p.terminate(&r.token).await.unwrap();
    p.terminate("canopy-s1-w999-a1").await.unwrap();
}

#[tokio::test]
async fn list_owned_shows_this_stores_live_attempts() {
    let w = World::new();
    let market =
        Arc::new(SimMarket::new(&canopy::fleet::load::demo().unwrap(), SimConfig::no_faults()).unwrap());
    let clock: Arc<dyn Clock> = w.clock.clone();
    let cloud = SimProvider::new("cloud-a", market.clone(), w.exec.clone(), clock.clone()).unwrap();
    let k8s = SimProvider::new("k8s-b", market.clone(), w.exec.clone(), clock).unwrap();
    let quick = w.req(STORE, 6, "cpu-c7", "cloud-a-cpu-c7-00", 0, &["true"]);
    let slow = w.req(STORE, 7, "cpu-c7", "cloud-a-cpu-c7-01", 0, &["sleep", "30"]);
    let other_store = w.req("s2", 8, "cpu-c7", "cloud-a-cpu-c7-02", 0, &["true"]);
    let other_provider = w.req(STORE, 9, "a100-80-ew", "k8s-b-a100-03", 1, &["true"]);
    for r in [&quick, &slow, &other_store] {
        cloud.launch(r).await.unwrap();
    }
    k8s.launch(&other_provider).await.unwrap();

    let owned = cloud.list_owned(STORE).await.unwrap();
    let tokens: Vec<&str> = owned.iter().map(|o| o.token.as_str()).collect();
    assert_eq!(tokens, [quick.token.as_str(), slow.token.as_str()]);
    assert!(owned.iter().all(|o| !o.running && o.provider_ref.starts_with("i-0")));

    w.clock.advance(Duration::from_secs(3600));
    for r in [&quick, &slow] {
        assert_eq!(cloud.status(&r.token).await.unwrap(), AttemptStatus::Running);
    }
    until_ended(&cloud, &quick.token).await;
    let owned = cloud.list_owned(STORE).await.unwrap();
    assert_eq!(owned.len(), 1, "{owned:?}");
    assert_eq!((owned[0].token.as_str(), owned[0].running), (slow.token.as_str(), true));
    cloud.terminate(&slow.token).await.unwrap();
    until_ended(&cloud, &slow.token).await;
    assert!(cloud.list_owned(STORE).await.unwrap().is_empty());
    assert_eq!(k8s.list_owned(STORE).await.unwrap().len(), 1);
}

#[tokio::test]
async fn inventory_and_unknown_providers() {
    let w = World::new();
    let p = w.provider("market", SimConfig::demo());
    let inv = p.inventory().await.unwrap();
    let names: Vec<&str> = inv.pools.iter().map(|p| p.def.name.as_str()).collect();
    assert_eq!(names, ["rtx4090", "rtx3090"]);
    assert_eq!(inv.pools[0].nodes.len(), 12);
    let market = Arc::new(SimMarket::new(&canopy::fleet::load::demo().unwrap(), SimConfig::demo()).unwrap());
    let clock: Arc<dyn Clock> = w.clock.clone();
    let err = SimProvider::new("nope", market, w.exec.clone(), clock).unwrap_err();
    assert!(err.to_string().contains("onprem-fra"), "{err}");
}
