//! What a launch will do, decided before anything is created: the argv the
//! supervisor runs, its environment (without secrets), its working
//! directory, the inputs to stage and the directories to create.
//!
//! Every reason to refuse a launch lives here, so a refused launch leaves
//! no attempt directory behind. This module reads input metadata and the
//! launcher's environment but writes nothing, and never sees secret values
//! except to check that each named secret has one.
//!
//! The workload's environment is, in order (later wins): the variables
//! named in `LocalConfig::inherit_env` from the launcher's environment; the
//! spec's `runtime.env`; Canopy's own `CANOPY_ATTEMPT` (`w-17.2`),
//! `CANOPY_WORKLOAD` (`w-17`), `CANOPY_ATTEMPT_TOKEN` (the attempt's
//! token, as on Slurm and Ray), `CANOPY_ARTIFACTS` (the attempt's artifact
//! store, processes only), `CANOPY_OUTPUT_DIR`, `CANOPY_INPUT_<NAME>` and,
//! with `[checkpoint]`, `CANOPY_CHECKPOINT_DIR` (the workload's checkpoint
//! directory in Canopy's store, mounted at the spec's `path` in
//! containers); then the secrets, added by the launcher at spawn time
//! only; then, for each rank of a gang, its launcher variables, added by
//! the supervisor ([`crate::providers::gang`]).
//!
//! Outputs: a spec output path `P` (absolute) maps to
//! `$CANOPY_OUTPUT_DIR/P`, that is `<attempt>/outputs/P`; its parent
//! directory is created before the workload starts. In a container, `P`'s
//! parent directory is bind-mounted from there, so the workload writes `P`
//! itself. Inputs appear at `$CANOPY_INPUT_<NAME>`; an input's `mount` is
//! honoured in containers only.

use super::LocalConfig;
use super::container::{self, ContainerEngine, Mount, RunPlan};
use super::layout::{AttemptDir, GangRecord, LaunchRecord, now_ms, relative_output, valid_token};
use crate::accel::{Family, Vendor};
use crate::providers::LaunchRequest;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where outputs and inputs appear inside a container.
const CONTAINER_OUTPUTS: &str = "/canopy/outputs";
const CONTAINER_INPUTS: &str = "/canopy/inputs";

#[derive(Debug, Clone)]
pub struct Plan {
    pub argv: Vec<String>,
    /// The supervisor's environment, secrets excluded.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    /// Directories to create, relative to the attempt directory.
    pub dirs: Vec<PathBuf>,
    pub inputs: Vec<StagedInput>,
    pub record: LaunchRecord,
    /// The lease the supervisor keeps the workload under
    /// (`LocalConfig::lease`), passed as `--lease <file>`.
    pub lease: Option<PathBuf>,
}

/// A `file://` input: staged as `inputs/<name>` pointing at `source`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedInput {
    pub name: String,
    pub source: PathBuf,
}

/// The spec's memory in bytes (GB of 10^9 bytes, as the spec's other sizes).
pub fn memory_bytes(spec: &crate::spec::Spec) -> u64 {
    (spec.resources.memory_gb.max(0.0) * 1e9) as u64
}

/// Decides the launch or says why it cannot happen (a `Rejected` message).
pub fn plan(
    cfg: &LocalConfig,
    req: &LaunchRequest,
    dir: &AttemptDir,
    engine: Option<&ContainerEngine>,
    own_cgroup: bool,
    found: Option<(Vendor, Family)>,
    host_env: impl Fn(&str) -> Option<String>,
) -> Result<Plan, String> {
    if !valid_token(&req.token) {
        return Err(format!(
            "token {:?} cannot name an attempt directory; use letters, digits, '-', '_' and '.'",
            req.token
        ));
    }
    let rt = &req.spec.runtime;
    check_secrets(req)?;
    for (k, v) in &rt.env {
        check_env_name(k, "runtime.env")?;
        if v.contains('\0') {
            return Err(format!("runtime.env.{k} contains a NUL byte, which no environment can hold"));
        }
    }
    if rt.command.iter().any(|a| a.contains('\0')) {
        return Err("runtime.command contains a NUL byte, which no argv can hold".into());
    }
    let inputs = stage_inputs(req)?;
    let mut dirs = vec![PathBuf::from("work"), PathBuf::from("inputs"), PathBuf::from("outputs")];
    let mut out_parents = Vec::new();
    let mut names = Vec::new();
    for o in &req.spec.outputs {
        if names.contains(&&o.name) {
            return Err(format!("output name {:?} is used twice; output names must be unique", o.name));
        }
        names.push(&o.name);
        let rel = relative_output(&o.path).map_err(|e| format!("output {:?}: {e}", o.name))?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            dirs.push(Path::new("outputs").join(parent));
            out_parents.push(parent.to_path_buf());
        } else if engine.is_some() {
            return Err(format!(
                "output {:?} at {:?} sits directly under /, which cannot be mounted into a container; \
                 put it in a directory such as /outputs",
                o.name, o.path
            ));
        }
    }
    let mut env: BTreeMap<String, String> =
        cfg.inherit_env.iter().filter_map(|k| host_env(k).map(|v| (k.clone(), v))).collect();
    let mut canopy = BTreeMap::new();
    canopy.insert("CANOPY_ATTEMPT".to_string(), req.attempt.to_string());
    canopy.insert("CANOPY_WORKLOAD".to_string(), req.attempt.workload.to_string());
    // As on Slurm and Ray: the id the provider knows the attempt by, so a
    // workload names its own files and runs the same way everywhere.
    canopy.insert("CANOPY_ATTEMPT_TOKEN".to_string(), req.token.clone());
    if !req.is_gang() {
        // A gang's ranks get theirs from the supervisor, one per rank.
        canopy.extend(crate::providers::gang::one_node_env(&req.node, req.spec.resources.gpus, &req.token));
    }
    let record = LaunchRecord {
        token: req.token.clone(),
        attempt: req.attempt.to_string(),
        pool: req.pool.clone(),
        node: req.node.clone(),
        container_engine: engine.map(|e| e.program.to_string_lossy().into_owned()),
        launched_at_ms: now_ms(),
        outputs: cfg.outputs,
        gang: req.is_gang().then(|| GangRecord {
            nodes: req.nodes.clone(),
            port: crate::providers::gang::rendezvous_port(&req.token),
            gpus_per_node: req.spec.resources.gpus,
        }),
        stop_grace_ms: Some(rt.stop_grace().as_millis() as u64),
    };
    if req.is_gang() && rt.image.is_some() {
        return Err("a multi-node gang in containers cannot run on the local provider yet; \
                    run it as a process (remove runtime.image) or on Slurm or Ray"
            .into());
    }
    if let (Some(ckpt), Some(host_dir)) = (&req.spec.checkpoint, &req.checkpoint_dir) {
        let at = if rt.image.is_some() { ckpt.path.clone() } else { lossless(host_dir)? };
        canopy.insert("CANOPY_CHECKPOINT_DIR".into(), at);
    }
    let (argv, cwd) = match (&rt.image, engine) {
        (None, _) => {
            if rt.command.is_empty() {
                return Err(
                    "runtime.command is empty; give the argv to run, like [\"python\", \"train.py\"]".into(),
                );
            }
            canopy.insert("CANOPY_ARTIFACTS".into(), lossless(&req.artifact_dir)?);
            canopy.insert("CANOPY_OUTPUT_DIR".into(), lossless(&dir.outputs())?);
            for i in &inputs {
                canopy.insert(input_var(&i.name), lossless(&dir.inputs().join(&i.name))?);
            }
            let cwd = match rt.workdir.as_deref() {
                None => dir.work(),
                Some(w) if Path::new(w).is_absolute() => {
                    if !Path::new(w).is_dir() {
                        return Err(format!("runtime.workdir {w:?} is not a directory on this host"));
                    }
                    PathBuf::from(w)
                }
                Some(w) => {
                    let rel = relative_output(&format!("/{w}")).map_err(|_| {
                        format!("runtime.workdir {w:?} must stay inside the attempt's work directory")
                    })?;
                    dirs.push(Path::new("work").join(&rel));
                    dir.work().join(rel)
                }
            };
            (rt.command.clone(), cwd)
        }
        (Some(image), Some(engine)) => {
            canopy.insert("CANOPY_OUTPUT_DIR".into(), CONTAINER_OUTPUTS.into());
            let mut mounts =
                vec![Mount { host: dir.outputs(), container: CONTAINER_OUTPUTS.into(), read_only: false }];
            out_parents.sort();
            out_parents.dedup();
            for p in &out_parents {
                mounts.push(Mount {
                    host: dir.outputs().join(p),
                    container: lossless(&Path::new("/").join(p))?,
                    read_only: false,
                });
            }
            if let (Some(ckpt), Some(host_dir)) = (&req.spec.checkpoint, &req.checkpoint_dir) {
                mounts.push(Mount { host: host_dir.clone(), container: ckpt.path.clone(), read_only: false });
            }
            for (i, spec_input) in inputs.iter().zip(req.spec.inputs.iter()) {
                let at = spec_input.mount.clone().unwrap_or_else(|| format!("{CONTAINER_INPUTS}/{}", i.name));
                canopy.insert(input_var(&i.name), at.clone());
                mounts.push(Mount { host: i.source.clone(), container: at, read_only: true });
            }
            let mut env_names: Vec<String> = rt.env.keys().cloned().collect();
            env_names.extend(canopy.keys().cloned());
            env_names.extend(rt.secrets.iter().cloned());
            env_names.sort();
            env_names.dedup();
            let (accel, device_ids) = container_devices(req, found, &host_env);
            let plan = RunPlan {
                token: &req.token,
                image,
                workdir: rt.workdir.as_deref(),
                env_names,
                mounts,
                gpus: req.spec.resources.gpus,
                accel,
                device_ids,
                memory_bytes: memory_bytes(&req.spec),
                cpus: req.spec.resources.cpu_cores,
                cgroup_parent: own_cgroup.then(|| super::cgroup::parent(&req.token)),
                pull_never: cfg.containers == super::ContainerPolicy::LocalImagesOnly,
                command: &rt.command,
            };
            (container::run_argv(engine, &plan), dir.work())
        }
        (Some(image), None) => {
            return Err(format!(
                "the spec asks for container image {image:?} but there is no container runtime \
                 (podman or docker) on this host; install podman or start the docker engine, or \
                 remove runtime.image to run the command as a plain process"
            ));
        }
    };
    env.extend(rt.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.extend(canopy);
    Ok(Plan { argv, env, cwd, dirs, inputs, record, lease: cfg.lease.clone() })
}

/// Whose devices a container gets and which: the spec's vendor if it names
/// one, else the vendor the host's inventory `found`, else the vendor
/// whose visible-devices variable the launcher has (the SSH host agent
/// sets its vendor's to the attempt's devices), else NVIDIA; the indices
/// from that vendor's variable, else the first `gpus`. The inventory's
/// vendor comes before the variables because MetaX and Iluvatar share
/// NVIDIA's `CUDA_VISIBLE_DEVICES`.
pub(super) fn container_devices(
    req: &LaunchRequest,
    found: Option<(Vendor, Family)>,
    host_env: &impl Fn(&str) -> Option<String>,
) -> (&'static crate::accel::devices::DeviceKind, Vec<u32>) {
    use crate::accel::devices::{self, KINDS};
    let acc = req.spec.resources.accelerator.as_ref();
    let kind = match (acc.and_then(|a| a.vendor), found) {
        (Some(v), _) => devices::of(v, acc.and_then(|a| a.family.first().copied())),
        (None, Some((v, family))) => devices::of(v, Some(family)),
        (None, None) => KINDS.iter().find(|k| host_env(k.visible_env).is_some()).unwrap_or(&KINDS[0]),
    };
    let ids = host_env(kind.visible_env)
        .map(|v| {
            v.trim_start_matches(kind.value_prefix).split(',').filter_map(|i| i.trim().parse().ok()).collect()
        })
        .filter(|ids: &Vec<u32>| !ids.is_empty())
        .unwrap_or_else(|| (0..req.spec.resources.gpus).collect());
    (kind, ids)
}

/// Every secret the spec names must have a value in the request; values
/// must fit in an environment. Messages name secrets, never values.
fn check_secrets(req: &LaunchRequest) -> Result<(), String> {
    let missing: Vec<&str> = req
        .spec
        .runtime
        .secrets
        .iter()
        .filter(|n| !req.secrets.iter().any(|(k, _)| k == *n))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "no value was resolved for secret(s) {}; export them in the environment Canopy runs in",
            missing.join(", ")
        ));
    }
    for (name, value) in &req.secrets {
        check_env_name(name, "runtime.secrets")?;
        if value.expose().contains('\0') {
            return Err(format!("secret {name} contains a NUL byte, which no environment can hold"));
        }
    }
    Ok(())
}

fn check_env_name(name: &str, field: &str) -> Result<(), String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(format!("{field} has a variable named {name:?}; names must be non-empty, without '='"));
    }
    Ok(())
}

fn stage_inputs(req: &LaunchRequest) -> Result<Vec<StagedInput>, String> {
    let mut staged: Vec<StagedInput> = Vec::new();
    for i in &req.spec.inputs {
        if !valid_token(&i.name) {
            return Err(format!(
                "input name {:?} cannot name a file; use letters, digits, '-', '_' and '.'",
                i.name
            ));
        }
        if staged.iter().any(|s| input_var(&s.name) == input_var(&i.name)) {
            return Err(format!(
                "input {:?} clashes with another input's name ({})",
                i.name,
                input_var(&i.name)
            ));
        }
        let source = file_uri_path(&i.source).map_err(|e| format!("input {:?}: {e}", i.name))?;
        if !source.exists() {
            return Err(format!("input {:?}: {} does not exist on this host", i.name, source.display()));
        }
        staged.push(StagedInput { name: i.name.clone(), source });
    }
    Ok(staged)
}

/// `CANOPY_INPUT_<NAME>`: the name upper-cased, other characters as `_`.
pub fn input_var(name: &str) -> String {
    let n: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("CANOPY_INPUT_{n}")
}

/// The local path of a `file://` URI (`file:///abs` or
/// `file://localhost/abs`, percent-escapes decoded).
pub fn file_uri_path(uri: &str) -> Result<PathBuf, String> {
    let Some(rest) = uri.strip_prefix("file://") else {
        let scheme = uri.split_once("://").map_or(uri, |(s, _)| s);
        return Err(format!(
            "source {uri:?} uses a scheme ({scheme}) the local provider cannot fetch; only file:// \
             sources are staged on this host. Download it and use file:///path, or place the \
             workload on a provider that reads {scheme}"
        ));
    };
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(format!("source {uri:?} must be an absolute file URI, like file:///data/train.jsonl"));
    }
    let bytes = percent_decode(path).ok_or_else(|| format!("source {uri:?} has a broken %-escape"))?;
    let path = String::from_utf8(bytes)
        .map_err(|_| format!("source {uri:?} decodes to a path that is not UTF-8"))?;
    Ok(PathBuf::from(path))
}

fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

fn lossless(p: &Path) -> Result<String, String> {
    p.to_str().map(str::to_owned).ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_map_to_paths_and_other_schemes_are_refused() {
        assert_eq!(file_uri_path("file:///data/a%20b.txt").unwrap(), PathBuf::from("/data/a b.txt"));
        assert_eq!(file_uri_path("file://localhost/x").unwrap(), PathBuf::from("/x"));
        assert!(file_uri_path("file://relative/x").unwrap_err().contains("absolute"));
        assert!(file_uri_path("file:///bad%zz").unwrap_err().contains("%-escape"));
        let e = file_uri_path("s3://bucket/key").unwrap_err();
        assert!(e.contains("(s3)") && e.contains("only file://"), "{e}");
    }

    fn request(resources: serde_json::Value) -> LaunchRequest {
        use crate::engine::model::{AttemptId, WorkloadId};
        let spec: crate::spec::Spec = serde_json::from_value(serde_json::json!({
            "name": "npu", "runtime": { "command": ["true"], "image": "img" }, "resources": resources,
        }))
        .unwrap();
        LaunchRequest {
            attempt: AttemptId { workload: WorkloadId(1), n: 1 },
            token: "t".into(),
            spec: std::sync::Arc::new(spec),
            pool: "host".into(),
            node: "here".into(),
            secrets: Vec::new(),
            artifact_dir: "/tmp/a".into(),
            nodes: vec!["here".into()],
            checkpoint_dir: None,
        }
    }

    #[test]
    fn a_container_gets_the_vendor_and_devices_its_launcher_was_given() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        // The SSH host agent set the Ascend variable: those NPUs.
        let req = request(serde_json::json!({ "gpus": 2 }));
        let (kind, ids) = container_devices(&req, None, &env(&[("ASCEND_RT_VISIBLE_DEVICES", "4,5")]));
        assert_eq!((kind.name, ids), ("huawei-ascend", vec![4, 5]));
        // Nothing set: NVIDIA, the first `gpus`.
        let (kind, ids) = container_devices(&req, None, &env(&[]));
        assert_eq!((kind.name, ids), ("nvidia", vec![0, 1]));
        // The spec's vendor wins over a variable the operator left set.
        let req = request(serde_json::json!({ "gpus": 1, "accelerator": { "vendor": "cambricon" } }));
        let (kind, ids) = container_devices(
            &req,
            None,
            &env(&[("CUDA_VISIBLE_DEVICES", "0"), ("MLU_VISIBLE_DEVICES", "3")]),
        );
        assert_eq!((kind.name, ids), ("cambricon", vec![3]));
        // A MetaX host shares NVIDIA's variable: the vendor its inventory
        // found decides, with the devices that variable names.
        let req = request(serde_json::json!({ "gpus": 2 }));
        let metax = Some((Vendor::Metax, Family::Xiyun));
        let (kind, ids) = container_devices(&req, metax, &env(&[("CUDA_VISIBLE_DEVICES", "2,3")]));
        assert_eq!((kind.name, ids), ("metax", vec![2, 3]));
        let iluvatar = Some((Vendor::Iluvatar, Family::Zhikai));
        let (kind, ids) = container_devices(&req, iluvatar, &env(&[]));
        assert_eq!((kind.name, ids), ("iluvatar", vec![0, 1]));
        // The spec's vendor still wins over what the host has.
        let req = request(serde_json::json!({ "gpus": 1, "accelerator": { "vendor": "cambricon" } }));
        assert_eq!(container_devices(&req, metax, &env(&[])).0.name, "cambricon");
    }

    #[test]
    fn input_variables_are_upper_snake() {
        assert_eq!(input_var("train-data.v2"), "CANOPY_INPUT_TRAIN_DATA_V2");
    }
}
