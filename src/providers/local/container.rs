//! Containers on the local host: finding a usable engine (podman, or docker
//! with a reachable daemon) and building the `run` and `stop` command lines.
//!
//! This module owns only argv construction and detection. It never puts an
//! environment *value* on a command line: variables are passed as `-e NAME`
//! so the engine copies them from its own environment, which the
//! supervisor inherits from the launcher.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A container engine found on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerEngine {
    pub kind: EngineKind,
    /// Absolute path of the client program.
    pub program: PathBuf,
    /// The engine manages cgroups itself as directories (`cgroupfs`), so
    /// it accepts Canopy's `--cgroup-parent /canopy/<token>`
    /// ([`super::cgroup`]); under systemd it wants a slice instead.
    pub cgroupfs: bool,
    /// The engine can hold a container to a memory limit
    /// ([`EngineInfo::enforces_memory_limits`]).
    pub memory_limits: bool,
}

impl ContainerEngine {
    /// What the engine offers workloads with `runtime.image`, as the local
    /// pool's capability tags: [`crate::fleet::CONTAINER_TAG`], and
    /// [`crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG`] where it cannot
    /// enforce a memory limit (placement then rules the pool out for image
    /// work: every spec has a memory limit).
    pub fn tags(&self) -> Vec<String> {
        let mut tags = vec![crate::fleet::CONTAINER_TAG.to_string()];
        if !self.memory_limits {
            tags.push(crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG.into());
        }
        tags
    }
}

/// What `<engine> info` says that decides how Canopy may use the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineInfo {
    /// The cgroup manager is `cgroupfs` (not systemd).
    pub cgroupfs: bool,
    /// The engine runs as a non-root user (rootless podman or docker).
    pub rootless: bool,
    /// The host runs the cgroup v2 unified hierarchy.
    pub cgroup_v2: bool,
    /// The memory controller is available to the engine's containers.
    pub memory_controller: bool,
}

/// `podman info --format` for [`EngineInfo::parse`].
const PODMAN_INFO: &str = "{{.Host.CgroupManager}}|{{.Host.Security.Rootless}}|{{.Host.CgroupsVersion}}|{{.Host.CgroupControllers}}";
/// `docker info --format` for [`EngineInfo::parse`] (docker does not list
/// controllers; a rootless docker on cgroup v2 is taken to have memory).
const DOCKER_INFO: &str = "{{.CgroupDriver}}|{{.SecurityOptions}}|{{.CgroupVersion}}|memory";

impl EngineInfo {
    /// From the output of `info --format` with [`PODMAN_INFO`] or
    /// [`DOCKER_INFO`]: `cgroupfs|false|v1|[cpuset cpu memory …]` (podman),
    /// `cgroupfs|[name=seccomp,profile=builtin name=rootless]|2|memory`
    /// (docker).
    pub fn parse(kind: EngineKind, out: &str) -> Self {
        let mut f = out.trim().split('|');
        let (manager, security, version, controllers) =
            (f.next().unwrap_or(""), f.next().unwrap_or(""), f.next().unwrap_or(""), f.next().unwrap_or(""));
        let rootless = match kind {
            EngineKind::Podman => security.trim() == "true",
            EngineKind::Docker => security.contains("name=rootless"),
        };
        Self {
            cgroupfs: manager.trim() == "cgroupfs",
            rootless,
            cgroup_v2: matches!(version.trim(), "v2" | "2"),
            memory_controller: controllers
                .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
                .any(|c| c == "memory"),
        }
    }

    /// Whether the engine can hold a container to a memory limit. A rootful
    /// engine can. A rootless one only on the cgroup v2 unified hierarchy
    /// with the memory controller delegated to its user: on cgroup v1 a
    /// non-root user cannot create or limit memory cgroups at all, and
    /// podman runs the container without the limit (it warns and carries
    /// on), so a spec's `memory_gb` would not be honoured.
    pub fn enforces_memory_limits(&self) -> bool {
        !self.rootless || (self.cgroup_v2 && self.memory_controller)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Podman,
    Docker,
}

/// A bind mount from the host into the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub host: PathBuf,
    pub container: String,
    pub read_only: bool,
}

/// Everything `run_argv` needs.
#[derive(Debug, Clone)]
pub struct RunPlan<'a> {
    pub token: &'a str,
    pub image: &'a str,
    pub workdir: Option<&'a str>,
    /// Names of variables to pass through from the engine's environment.
    pub env_names: Vec<String>,
    pub mounts: Vec<Mount>,
    pub gpus: u32,
    /// Whose accelerators the container gets, and which of them by index
    /// ([`crate::accel::devices::DeviceKind::container_args`]).
    pub accel: &'static crate::accel::devices::DeviceKind,
    pub device_ids: Vec<u32>,
    /// The spec's memory, in bytes: held by Canopy's own cgroup when
    /// `cgroup_parent` is set ([`super::cgroup`]), else by `--memory`.
    pub memory_bytes: u64,
    /// The spec's CPU cores (`--cpus`).
    pub cpus: f64,
    /// Canopy's cgroup for this container, when it could make one.
    pub cgroup_parent: Option<String>,
    /// Only an image already on the host (`--pull=never`).
    pub pull_never: bool,
    /// Empty: the image's own entrypoint and command.
    pub command: &'a [String],
}

/// Looks for podman on `PATH`, then for docker whose `docker info` answers
/// within a few seconds (a docker client without a daemon is not enough).
pub async fn detect() -> Option<ContainerEngine> {
    if let Some(program) = which("podman") {
        return Some(with_info(EngineKind::Podman, program, PODMAN_INFO).await);
    }
    let program = which("docker")?;
    let info = tokio::process::Command::new(&program)
        .arg("info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(Duration::from_secs(5), info).await {
        Ok(Ok(s)) if s.success() => Some(with_info(EngineKind::Docker, program, DOCKER_INFO).await),
        _ => {
            tracing::debug!("docker client found but `docker info` failed: no usable docker engine");
            None
        }
    }
}

/// The engine with what its `info` says. An engine whose `info` does not
/// answer is taken as rootful, on systemd: no `--cgroup-parent`, limits by
/// `--memory`.
async fn with_info(kind: EngineKind, program: PathBuf, format: &str) -> ContainerEngine {
    let info = info(&program, format).await.map(|out| EngineInfo::parse(kind, &out)).unwrap_or_default();
    let memory_limits = info.enforces_memory_limits();
    if !memory_limits {
        tracing::warn!(
            engine = %program.display(),
            "the container engine is rootless on cgroup v1 (or without the memory controller delegated): \
             it cannot hold a container to a memory limit, so image workloads are not placed here \
             (run the engine as root, or use cgroup v2 with the memory controller delegated)"
        );
    }
    ContainerEngine { kind, program, cgroupfs: info.cgroupfs, memory_limits }
}

/// The output of `<engine> info --format <format>`, when it answers.
async fn info(program: &Path, format: &str) -> Option<String> {
    let info = tokio::process::Command::new(program)
        .args(["info", "--format", format])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(10), info).await {
        Ok(Ok(out)) if out.status.success() => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        _ => None,
    }
}

/// The first executable `name` on `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
}

/// `<engine> run --name <token> …`: the argv the supervisor runs. Not
/// `--rm`: the supervisor reads the container's end (an OOM kill, a
/// container that was never created) and then removes it ([`after_exit`]).
pub fn run_argv(engine: &ContainerEngine, plan: &RunPlan<'_>) -> Vec<String> {
    let mut a: Vec<String> = vec![
        engine.program.to_string_lossy().into_owned(),
        "run".into(),
        "--name".into(),
        plan.token.into(),
        "--label".into(),
        format!("canopy.token={}", plan.token),
    ];
    for name in &plan.env_names {
        a.push("-e".into());
        a.push(name.clone());
    }
    for m in &plan.mounts {
        a.push("-v".into());
        let ro = if m.read_only { ":ro" } else { "" };
        a.push(format!("{}:{}{ro}", m.host.display(), m.container));
    }
    if let Some(w) = plan.workdir {
        a.push("-w".into());
        a.push(w.into());
    }
    match &plan.cgroup_parent {
        Some(parent) => a.extend(["--cgroup-parent".into(), parent.clone()]),
        None if plan.memory_bytes > 0 => a.extend(["--memory".into(), plan.memory_bytes.to_string()]),
        None => {}
    }
    if plan.pull_never {
        a.push("--pull=never".into());
    }
    if plan.cpus > 0.0 {
        a.extend(["--cpus".into(), plan.cpus.to_string()]);
    }
    if plan.gpus > 0 {
        a.extend(plan.accel.container_args(&plan.device_ids, engine.kind == EngineKind::Docker));
    }
    a.push(plan.image.into());
    a.extend(plan.command.iter().cloned());
    a
}

/// How a container ended, beyond its exit status: read by the supervisor
/// after the engine's client returned, before the container is removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerEnd {
    /// Killed for memory: the engine says so, or it was SIGKILLed (137)
    /// after hitting the limit of Canopy's cgroup.
    pub oom_killed: bool,
    /// The container was never created (the engine's own error, 125):
    /// the engine's message, e.g. an image that does not exist.
    pub boot_failed: Option<String>,
}

/// Reads the end of the container named `token` (the engine's record, and
/// Canopy's cgroup), then removes the container and the cgroup. `code` is
/// the engine client's exit status; `stderr` the attempt's stderr log,
/// where the engine writes why it could not create the container.
pub fn after_exit(program: &str, token: &str, code: Option<i32>, stderr: &Path) -> ContainerEnd {
    let inspect = std::process::Command::new(program)
        .args(["inspect", "--format", "{{.State.OOMKilled}}", token])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let (exists, engine_oom) = match &inspect {
        Ok(out) if out.status.success() => (true, String::from_utf8_lossy(&out.stdout).trim() == "true"),
        _ => (false, false),
    };
    let limit_hit = super::cgroup::limit_hit(token).unwrap_or(false);
    let oom_killed = engine_oom || (limit_hit && code == Some(128 + sigkill()));
    let boot_failed = (!exists && code == Some(125)).then(|| {
        engine_error(stderr).unwrap_or_else(|| {
            format!("`{program} run` could not create the container (exit 125) and said nothing")
        })
    });
    let _ = std::process::Command::new(program)
        .args(["rm", "--force", token])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    super::cgroup::remove(token);
    ContainerEnd { oom_killed, boot_failed }
}

fn sigkill() -> i32 {
    libc::SIGKILL
}

/// The engine's last `Error:` line in the attempt's stderr (its tail).
fn engine_error(stderr: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 16 * 1024;
    let mut f = std::fs::File::open(stderr).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().rev().find(|l| l.trim_start().starts_with("Error"))?;
    Some(line.trim().chars().take(1000).collect())
}

/// `<engine> stop --time <grace> <token>`: SIGTERM, then SIGKILL after grace.
pub fn stop_argv(program: &Path, token: &str, grace: Duration) -> Vec<String> {
    vec![
        program.to_string_lossy().into_owned(),
        "stop".into(),
        "--time".into(),
        grace.as_secs().max(1).to_string(),
        token.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_argv_passes_env_by_name_and_mounts_outputs() {
        let engine = ContainerEngine {
            kind: EngineKind::Docker,
            program: "/usr/bin/docker".into(),
            cgroupfs: false,
            memory_limits: true,
        };
        let cmd = vec!["python".to_string(), "train.py".into()];
        let plan = RunPlan {
            token: "canopy-s-w1-a1",
            image: "ghcr.io/acme/train:1",
            workdir: Some("/app"),
            env_names: vec!["HF_TOKEN".into(), "CANOPY_ATTEMPT".into()],
            mounts: vec![Mount {
                host: "/r/t/outputs/outputs".into(),
                container: "/outputs".into(),
                read_only: false,
            }],
            gpus: 2,
            accel: crate::accel::devices::of(crate::accel::Vendor::Nvidia, None),
            device_ids: vec![0, 1],
            memory_bytes: 2_000_000_000,
            cpus: 1.5,
            cgroup_parent: None,
            pull_never: false,
            command: &cmd,
        };
        let argv = run_argv(&engine, &plan).join(" ");
        assert_eq!(
            argv,
            "/usr/bin/docker run --name canopy-s-w1-a1 --label canopy.token=canopy-s-w1-a1 \
             -e HF_TOKEN -e CANOPY_ATTEMPT -v /r/t/outputs/outputs:/outputs -w /app \
             --memory 2000000000 --cpus 1.5 --gpus all ghcr.io/acme/train:1 python train.py"
        );
        let podman = ContainerEngine {
            kind: EngineKind::Podman,
            program: "/usr/bin/podman".into(),
            cgroupfs: true,
            memory_limits: true,
        };
        // GPUs by their CDI name.
        assert!(run_argv(&podman, &plan).join(" ").contains("--device nvidia.com/gpu=all"));
        // In Canopy's own cgroup the limit is the cgroup's, not --memory.
        let own = RunPlan { cgroup_parent: Some("/canopy/canopy-s-w1-a1".into()), ..plan };
        let argv = run_argv(&podman, &own).join(" ");
        assert!(argv.contains("--cgroup-parent /canopy/canopy-s-w1-a1 --cpus 1.5"), "{argv}");
        assert!(!argv.contains("--memory"), "{argv}");
        let local = RunPlan { pull_never: true, ..own };
        assert!(run_argv(&podman, &local).join(" ").contains("--pull=never"));
        // Other vendors' devices by their device nodes, the attempt's only.
        let ascend = RunPlan {
            accel: crate::accel::devices::of(crate::accel::Vendor::Huawei, None),
            device_ids: vec![4, 5],
            ..local
        };
        let argv = run_argv(&podman, &ascend).join(" ");
        assert!(
            argv.contains(
                "--device /dev/davinci4 --device /dev/davinci5 --device /dev/davinci_manager \
                 --device /dev/devmm_svm --device /dev/hisi_hdc ghcr.io"
            ),
            "{argv}"
        );
        assert!(!argv.contains("nvidia"), "{argv}");
    }

    /// Each vendor's container gets its own devices: the attempt's device
    /// nodes where the vendor has one per device, its shared nodes, CDI or
    /// its container runtime. The expected arguments are written out here
    /// from `docs/accelerators.md`, not derived from the table under test.
    #[test]
    fn every_vendors_container_gets_its_devices() {
        use crate::accel::{Family, Vendor};
        let podman = ContainerEngine {
            kind: EngineKind::Podman,
            program: "/usr/bin/podman".into(),
            cgroupfs: true,
            memory_limits: true,
        };
        let cmd = vec!["true".to_string()];
        let cases: [(Vendor, Option<Family>, &str); 12] = [
            (Vendor::Nvidia, None, "--device nvidia.com/gpu=all"),
            (Vendor::Amd, None, "--device /dev/kfd --device /dev/dri"),
            (Vendor::Intel, Some(Family::Gaudi3), "--runtime habana -e HABANA_VISIBLE_DEVICES=all"),
            (Vendor::Intel, Some(Family::XeHpc), "--device /dev/dri"),
            (
                Vendor::Huawei,
                None,
                "--device /dev/davinci4 --device /dev/davinci5 --device /dev/davinci_manager \
                 --device /dev/devmm_svm --device /dev/hisi_hdc",
            ),
            (
                Vendor::Cambricon,
                None,
                "--device /dev/cambricon_dev4 --device /dev/cambricon_dev5 --device /dev/cambricon_ctl",
            ),
            (Vendor::Hygon, None, "--device /dev/kfd --device /dev/dri"),
            (Vendor::Kunlunxin, None, "--device /dev/xpu4 --device /dev/xpu5"),
            (Vendor::MooreThreads, None, "--device /dev/dri"),
            (Vendor::Metax, None, "--device /dev/dri"),
            (Vendor::Iluvatar, None, "--device /dev/iluvatar4 --device /dev/iluvatar5"),
            (Vendor::Enflame, None, "--device /dev/gcu4 --device /dev/gcu5"),
        ];
        for (vendor, family, devices) in cases {
            let plan = RunPlan {
                token: "canopy-s-w1-a1",
                image: "img:1",
                workdir: None,
                env_names: vec![],
                mounts: vec![],
                gpus: 2,
                accel: crate::accel::devices::of(vendor, family),
                device_ids: vec![4, 5],
                memory_bytes: 1_000_000_000,
                cpus: 1.0,
                cgroup_parent: None,
                pull_never: false,
                command: &cmd,
            };
            let argv = run_argv(&podman, &plan).join(" ");
            assert!(argv.contains(&format!("--cpus 1 {devices} img:1")), "{vendor} {family:?}: {argv}");
        }
    }

    /// Rootless on cgroup v1 cannot hold a container to a memory limit,
    /// and the local pool then says so in its tags; rootful engines, and
    /// rootless ones on cgroup v2 with memory delegated, can.
    #[test]
    fn a_rootless_engine_on_cgroup_v1_cannot_enforce_memory_limits() {
        let podman = |out: &str| EngineInfo::parse(EngineKind::Podman, out);
        let rootful_v1 = podman("cgroupfs|false|v1|[cpuset cpu cpuacct blkio memory devices freezer pids]\n");
        assert_eq!(
            rootful_v1,
            EngineInfo { cgroupfs: true, rootless: false, cgroup_v2: false, memory_controller: true }
        );
        assert!(rootful_v1.enforces_memory_limits());
        let rootless_v1 = podman("cgroupfs|true|v1|[]");
        assert!(rootless_v1.rootless && !rootless_v1.enforces_memory_limits());
        assert!(podman("systemd|true|v2|[cpu memory pids]").enforces_memory_limits());
        // v2 without the memory controller delegated to the user.
        assert!(!podman("systemd|true|v2|[cpu pids]").enforces_memory_limits());
        let docker = |out: &str| EngineInfo::parse(EngineKind::Docker, out);
        let rootless = docker("cgroupfs|[name=seccomp,profile=builtin name=rootless]|1|memory");
        assert!(rootless.rootless && !rootless.enforces_memory_limits());
        assert!(
            docker("systemd|[name=seccomp,profile=builtin name=rootless]|2|memory").enforces_memory_limits()
        );
        assert!(docker("systemd|[name=seccomp,profile=builtin]|1|memory").enforces_memory_limits());
        // An engine whose info does not answer: as before, rootful.
        assert!(EngineInfo::default().enforces_memory_limits());

        let engine = |memory_limits| ContainerEngine {
            kind: EngineKind::Podman,
            program: "/usr/bin/podman".into(),
            cgroupfs: true,
            memory_limits,
        };
        assert_eq!(engine(true).tags(), [crate::fleet::CONTAINER_TAG]);
        assert_eq!(
            engine(false).tags(),
            [crate::fleet::CONTAINER_TAG, crate::fleet::CONTAINER_MEMORY_UNENFORCED_TAG]
        );
    }

    #[test]
    fn stop_gives_at_least_a_second() {
        let a = stop_argv(Path::new("/usr/bin/podman"), "tok", Duration::from_millis(300));
        assert_eq!(a.join(" "), "/usr/bin/podman stop --time 1 tok");
    }
}
