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
    /// Empty: the image's own entrypoint and command.
    pub command: &'a [String],
}

/// Looks for podman on `PATH`, then for docker whose `docker info` answers
/// within a few seconds (a docker client without a daemon is not enough).
pub async fn detect() -> Option<ContainerEngine> {
    if let Some(program) = which("podman") {
        return Some(ContainerEngine { kind: EngineKind::Podman, program });
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
        Ok(Ok(s)) if s.success() => Some(ContainerEngine { kind: EngineKind::Docker, program }),
        _ => {
            tracing::debug!("docker client found but `docker info` failed: no usable docker engine");
            None
        }
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

/// `<engine> run --rm --name <token> …`: the argv the supervisor runs.
pub fn run_argv(engine: &ContainerEngine, plan: &RunPlan<'_>) -> Vec<String> {
    let mut a: Vec<String> = vec![
        engine.program.to_string_lossy().into_owned(),
        "run".into(),
        "--rm".into(),
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
    if plan.gpus > 0 {
        match engine.kind {
            EngineKind::Docker => a.extend(["--gpus".into(), "all".into()]),
            EngineKind::Podman => a.extend(["--device".into(), "nvidia.com/gpu=all".into()]),
        }
    }
    a.push(plan.image.into());
    a.extend(plan.command.iter().cloned());
    a
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
        let engine = ContainerEngine { kind: EngineKind::Docker, program: "/usr/bin/docker".into() };
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
            command: &cmd,
        };
        let argv = run_argv(&engine, &plan).join(" ");
        assert_eq!(
            argv,
            "/usr/bin/docker run --rm --name canopy-s-w1-a1 --label canopy.token=canopy-s-w1-a1 \
             -e HF_TOKEN -e CANOPY_ATTEMPT -v /r/t/outputs/outputs:/outputs -w /app --gpus all \
             ghcr.io/acme/train:1 python train.py"
        );
        let podman = ContainerEngine { kind: EngineKind::Podman, program: "/usr/bin/podman".into() };
        assert!(run_argv(&podman, &plan).join(" ").contains("--device nvidia.com/gpu=all"));
    }

    #[test]
    fn stop_gives_at_least_a_second() {
        let a = stop_argv(Path::new("/usr/bin/podman"), "tok", Duration::from_millis(300));
        assert_eq!(a.join(" "), "/usr/bin/podman stop --time 1 tok");
    }
}
