use super::checkpoints::tests::{header, tar_with};
use super::fetch::unpack;
use super::*;
use crate::fleet::NodeState;

#[test]
fn fetched_outputs_hold_only_files_and_directories_inside_the_staging_dir() {
    let t = tempfile::tempdir().unwrap();
    let ok = tar_with(|b| {
        b.append_data(&mut header(tar::EntryType::Directory, 0), "dir", std::io::empty()).unwrap();
        b.append_data(&mut header(tar::EntryType::Regular, 2), "dir/a", &b"hi"[..]).unwrap();
    });
    unpack("h", &ok, t.path(), 1 << 20).unwrap();
    assert_eq!(std::fs::read(t.path().join("dir/a")).unwrap(), b"hi");

    let mut link = header(tar::EntryType::Symlink, 0);
    link.set_link_name("/etc/passwd").unwrap();
    let t2 = tempfile::tempdir().unwrap();
    let links = tar_with(|b| b.append_data(&mut link, "x", std::io::empty()).unwrap());
    let e = unpack("h", &links, t2.path(), 1 << 20).unwrap_err();
    assert!(e.contains("not a file or directory") && e.contains("host h"), "{e}");

    let big = tar_with(|b| {
        b.append_data(&mut header(tar::EntryType::Regular, 4), "big", &b"1234"[..]).unwrap();
    });
    let e = unpack("h", &big, tempfile::tempdir().unwrap().path(), 3).unwrap_err();
    assert!(e.contains("more than the 3 bytes"), "{e}");
}

#[test]
fn a_pool_offers_what_all_its_hosts_have() {
    let s = |cpu: f64, mem: f64| Shape {
        accelerator: None,
        gpus_per_node: 0,
        interconnect: crate::accel::Interconnect::Pcie,
        cpu_cores: cpu,
        memory_gb: mem,
        disk_gb: 10.0,
        fabric: None,
    };
    let p = pool_shape(&[s(8.0, 16.0), s(4.0, 32.0)]);
    assert_eq!((p.cpu_cores, p.memory_gb), (4.0, 16.0));
    assert_eq!(pool_shape(&[]).cpu_cores, 0.0, "no host has answered yet");
}

fn provider_with_gpus(gpus: u32) -> SshProvider {
    let target = Target {
        name: "gpu-a".into(),
        address: "127.0.0.1".into(),
        port: 1,
        user: "u".into(),
        key: "/k".into(),
        known_hosts: "/kh".into(),
    };
    let mut pools = BTreeMap::new();
    pools.insert("lab".to_string(), PoolConfig::default());
    let p = SshProvider::new(SshConfig {
        name: "ssh".into(),
        lease: Duration::from_secs(30),
        binaries: BTreeMap::from([(std::env::consts::ARCH.to_string(), "/bin/true".into())]),
        store: "s".into(),
        control_dir: std::env::temp_dir(),
        connection_idle: Duration::from_secs(60),
        hosts: vec![HostConfig { target, pool: "lab".into(), owner: None }],
        pools,
        grace: Duration::from_secs(5),
        outputs: OutputLimits::default(),
        clock: Arc::new(SystemTime::now),
    });
    let mut shape = pool_shape(&[]);
    shape.gpus_per_node = gpus;
    *p.inner.hosts[0].probe.lock().unwrap() =
        Some(Probe { arch: "x86_64".into(), shape, now_ms: 0, containers: Vec::new() });
    p
}

#[test]
fn each_attempt_gets_gpus_no_live_attempt_holds() {
    let p = provider_with_gpus(4);
    let (i, h) = (&p.inner, &p.inner.hosts[0]);
    assert_eq!(i.pick_gpus(h, "t1", 2).unwrap(), Some(vec![0, 1]));
    assert_eq!(i.pick_gpus(h, "t1", 2).unwrap(), Some(vec![0, 1]), "a retried launch keeps its GPUs");
    assert_eq!(i.pick_gpus(h, "t2", 1).unwrap(), Some(vec![2]));
    assert!(matches!(i.pick_gpus(h, "t3", 2), Err(LaunchError::Capacity(m)) if m.contains("1 of its 4")));
    i.forget(0, "t1");
    assert_eq!(i.pick_gpus(h, "t3", 2).unwrap(), Some(vec![0, 1]));
    assert_eq!(i.pick_gpus(h, "t4", 0).unwrap(), Some(vec![]), "no GPUs: none visible");
    let cpu = provider_with_gpus(0);
    assert_eq!(cpu.inner.pick_gpus(&cpu.inner.hosts[0], "t", 0).unwrap(), None, "a CPU-only host sets none");
    assert!(cpu.inner.pick_gpus(&cpu.inner.hosts[0], "t", 1).is_err());
}

#[test]
fn outside_its_lend_window_a_host_is_cordoned_and_closing_soon_counts() {
    let mut p = provider_with_gpus(0);
    let day = 20_000 * 86_400; // a midnight, UTC
    let at = Arc::new(std::sync::atomic::AtomicU64::new(day + 11 * 3600));
    let clock = at.clone();
    let inner = Arc::get_mut(&mut p.inner).unwrap();
    inner.cfg.clock = Arc::new(move || {
        SystemTime::UNIX_EPOCH + Duration::from_secs(clock.load(std::sync::atomic::Ordering::SeqCst))
    });
    inner.cfg.pools.get_mut("lab").unwrap().windows =
        LendWindows::parse(&["10:00-12:00".to_string()], "UTC").unwrap();
    let (i, h) = (&p.inner, &p.inner.hosts[0]);
    assert_eq!(i.node_state(h), NodeState::Ready);
    assert!(i.window_closing(h, Duration::from_secs(3601)), "closes within the hour");
    at.store(day + 12 * 3600 - 3, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(i.node_state(h), NodeState::Cordoned, "3 s before the end");
    at.store(day + 13 * 3600, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(i.node_state(h), NodeState::Cordoned, "outside the window");
    *h.unreachable.lock().unwrap() = Some("gone".into());
    assert_eq!(i.node_state(h), NodeState::Down, "unreachable beats the window");
}
