//! dstack task configuration (`type: task`) → a Canopy spec, field by
//! field, after dstack's configuration models (`TaskConfiguration`,
//! `ProfileParams`, `ResourcesSpec`, `GPUSpec`) and their reference.
//!
//! This module owns what each dstack field means in Canopy's terms; the
//! bookkeeping is [`super::Cx`]'s. `commands` become one argv as dstack
//! runs them: joined with ` && ` (a command ending in `&` wrapped in
//! braces), run by `shell -c` where the shell is `shell`, else `/bin/bash`
//! without an image and `/bin/sh` with one. Other run configuration types
//! (dev environments, fleets, …) are refused by name; a service is
//! imported as `kind = "inference"` (`dstack_run.rs`).

use super::values::{self, Range, fmt_num};
use super::yaml::{Got, Kind, Map, Node, Pos};
use super::{Cx, EnvValue, GpuAsk, Source};
use crate::accel::Vendor;
use crate::units::{Glob, HumanDuration};

const HELP_REF: &str = "see dstack's task configuration reference for the field's form";

/// Task fields without a counterpart, and why.
const DROPPED: &[(&str, &str)] = &[
    ("user", "Canopy runs the workload as the provider's user"),
    ("privileged", "Canopy runs no privileged containers"),
    ("entrypoint", "Canopy runs `commands` (or the spec's command), not an image entrypoint override"),
    ("home_dir", "it has no effect in dstack either"),
    ("registry_auth", "registry credentials belong to the provider's container runtime, not the spec"),
    ("nvcc", "Canopy does not pick base images; name one with `image`"),
    ("single_branch", "Canopy clones no repositories"),
    ("docker", "Canopy runs no Docker-in-Docker"),
    ("repos", "Canopy clones no repositories; clone it in the first command"),
    ("setup", "deprecated in dstack; put the commands in `commands`"),
    ("ports", "Canopy forwards no ports"),
    ("availability_zones", "Canopy constrains providers and regions, not zones"),
    ("instance_types", "Canopy never names instance types; it places by the resources asked for"),
    ("reservation", "Canopy prefers reserved capacity with `preferences.reserved_first` in the spec"),
    ("retry_policy", "Canopy retries infrastructure failures elsewhere by itself (see [retry] in the spec)"),
    ("creation_policy", "Canopy decides where to run; it keeps no instance pool"),
    ("idle_duration", "Canopy keeps no idle instances"),
    ("termination_policy", "Canopy keeps no idle instances"),
    ("termination_idle_time", "Canopy keeps no idle instances"),
    ("utilization_policy", "Canopy does not stop work for low GPU utilization"),
    ("pool_name", "Canopy decides where to run; it has no dstack pools"),
    ("instance_name", "Canopy decides where to run; it has no dstack instances"),
    ("fleets", "Canopy places across its whole fleet; restrict it with `backends` or `regions`"),
    ("tags", "dstack tags are resource tags; Canopy labels are set in the spec"),
    ("schedule", "Canopy runs a workload when submitted; schedule the submission instead"),
    ("startup_order", "Canopy starts a gang's nodes together"),
    ("stop_criteria", "a Canopy gang ends when its launchers end"),
];

pub(super) fn convert(root: &Map<'_>, cx: &mut Cx<'_>) {
    let Some(run_type) = super::dstack_run::run_type(root, cx) else { return };
    let name = root.take("name").and_then(|n| {
        let pos = n.pos();
        cx.ok(n.string("give the run a short name")).map(|s| (s, pos, "name".to_string()))
    });
    cx.name(name);
    let image = root.take("image").and_then(|n| {
        let image = cx.ok(n.string("name a container image, like nvcr.io/nvidia/pytorch:24.07-py3"))?;
        cx.spec.runtime.image = Some(image.clone());
        cx.from("runtime.image", n.pos());
        Some(image)
    });
    if let Some(n) = root.take("python") {
        cx.dropped(
            n.pos(),
            &n.path,
            "Canopy builds no Python environment: the commands run with the Python of the host or of `image`",
        );
    }
    if let Some(n) = root.take("working_dir") {
        working_dir(&n, cx);
    }
    if let Some(n) = root.take("env") {
        env(&n, cx);
    }
    if let Some(n) = root.take("nodes") {
        nodes(&n, cx);
    }
    if let Some(n) = root.take("resources")
        && !n.is_null()
        && let Some(m) = cx.ok(n.mapping(HELP_REF))
    {
        resources(&m, cx);
    }
    if let Some(n) = root.take("spot_policy") {
        spot_policy(&n, cx);
    }
    if let Some(n) = root.take("max_price")
        && let Some(usd) = cx.ok(n.number("write US dollars per hour, like 2.5"))
    {
        cx.spec.constraints.max_hourly_usd = Some(usd);
        cx.from("constraints.max_hourly_usd", n.pos());
    }
    if let Some(n) = root.take("max_duration")
        && let Some(d) = duration(&n, cx)
    {
        cx.spec.constraints.max_runtime = Some(HumanDuration(d));
        cx.from("constraints.max_runtime", n.pos());
    }
    if let Some(n) = root.take("stop_duration")
        && let Some(d) = duration(&n, cx)
    {
        cx.spec.runtime.stop_grace = Some(HumanDuration(d));
        cx.from("runtime.stop_grace", n.pos());
    }
    if let Some(n) = root.take("priority")
        && let Some(p) = cx.ok(n.integer("write a priority from 0 to 100"))
    {
        match u32::try_from(p) {
            Ok(p) => {
                cx.spec.priority = p;
                cx.from("priority", n.pos());
            }
            Err(_) => cx.error(n.problem("`priority` must be 0 to 100", "write a priority from 0 to 100")),
        }
    }
    if let Some(n) = root.take("regions") {
        for (region, pos) in names(&n, cx, "list regions, like [eu-west-1]") {
            if !cx.spec.constraints.regions.iter().any(|g| g.as_str() == region) {
                cx.spec.constraints.regions.push(Glob::new(region));
            }
            cx.from("constraints.regions", pos);
        }
    }
    if let Some(n) = root.take("backends") {
        for (backend, pos) in names(&n, cx, "list backends, like [aws, gcp]") {
            let backend = backend.to_ascii_lowercase();
            if !cx.spec.constraints.providers.iter().any(|g| g.as_str() == backend) {
                cx.spec.constraints.providers.push(Glob::new(backend));
            }
            cx.from("constraints.providers", pos);
        }
    }
    if let Some(n) = root.take("files") {
        files(&n, cx);
    }
    if let Some(n) = root.take("volumes") {
        super::dstack_run::volumes(&n, cx);
    }
    if let Some(n) = root.take("retry") {
        super::dstack_run::retry(&n, cx);
    }
    let shell = root.take("shell").and_then(|n| shell(&n, cx));
    commands(root, cx, shell, image.is_some());
    let mut dropped = DROPPED.to_vec();
    if run_type == super::dstack_run::RunType::Service {
        dropped.extend_from_slice(super::dstack_run::SERVICE_DROPPED);
    }
    cx.leftovers(root, Source::Dstack, &dropped);
}

fn working_dir(n: &Node<'_>, cx: &mut Cx<'_>) {
    let Some(dir) = cx.ok(n.string("write an absolute path, like /workspace")) else { return };
    if dir.starts_with('/') {
        cx.spec.runtime.workdir = Some(dir);
        cx.from("runtime.workdir", n.pos());
    } else {
        cx.dropped(
            n.pos(),
            &n.path,
            "a relative working directory (dstack's pre-0.20 form) has none; write it absolute",
        );
    }
}

fn nodes(n: &Node<'_>, cx: &mut Cx<'_>) {
    let Some(v) = cx.ok(n.integer("write the number of nodes, like 2")) else { return };
    match u32::try_from(v) {
        Ok(v) if v >= 1 => {
            cx.spec.resources.nodes = v;
            cx.from("resources.nodes", n.pos());
        }
        _ => cx.error(n.problem("`nodes` must be 1 or more", "write the number of nodes, like 2")),
    }
}

/// `env` as a list of `NAME=value` / `NAME`, or a mapping.
fn env(n: &Node<'_>, cx: &mut Cx<'_>) {
    const HELP: &str = "write `NAME=value` (or `NAME` alone, for a value given at launch)";
    match n.kind() {
        Kind::Null => {}
        Kind::List => {
            let mut seen: Vec<String> = Vec::new();
            for item in cx.ok(n.list(HELP)).unwrap_or_default() {
                let Some(text) = cx.ok(item.text(HELP)) else { continue };
                let (name, value) = match text.split_once('=') {
                    Some((k, v)) => (k.to_string(), env_value(v)),
                    None => (text.clone(), EnvValue::Missing),
                };
                if !crate::spec::validate::is_env_name(&name) {
                    cx.hide(&text);
                    cx.error(item.problem(
                        format!("`{}` is not `NAME=value` with a valid variable name", item.path),
                        "start the name with a letter or `_` and use letters, digits and `_`, like BATCH_SIZE=64",
                    ));
                    continue;
                }
                if seen.contains(&name) {
                    cx.error(item.problem(
                        format!("`{name}` is listed twice in `env`"),
                        "keep one entry per variable",
                    ));
                    continue;
                }
                seen.push(name.clone());
                cx.env(&name, value, item.pos(), &format!("env.{name}"));
            }
        }
        Kind::Map => {
            for e in cx.ok(n.mapping(HELP)).map(|m| m.take_all()).unwrap_or_default() {
                let value = if e.value.is_null() {
                    EnvValue::Missing
                } else {
                    match cx.ok(e.value.text("write the value as a string")) {
                        Some(v) => env_value(&v),
                        None => continue,
                    }
                };
                cx.env(&e.key, value, e.key_pos, &e.value.path);
            }
        }
        _ => cx.error(n.wrong_type("a list of NAME=value or a mapping", HELP)),
    }
}

/// `${{ secrets.hf_token }}` anywhere in the value makes it a secret.
fn env_value(v: &str) -> EnvValue {
    if let Some(start) = v.find("${{")
        && let Some(len) = v[start..].find("}}")
    {
        let inner = v[start + 3..start + len].trim();
        if let Some(name) = inner.strip_prefix("secrets.") {
            return EnvValue::SecretRef(name.trim().to_string());
        }
    }
    EnvValue::Text(v.to_string())
}

/// A string, or a list of strings.
fn names(n: &Node<'_>, cx: &mut Cx<'_>, help: &str) -> Vec<(String, Pos)> {
    match n.kind() {
        Kind::Null => Vec::new(),
        Kind::Str => cx.ok(n.string(help)).map(|s| vec![(s, n.pos())]).unwrap_or_default(),
        _ => cx
            .ok(n.list(help))
            .unwrap_or_default()
            .iter()
            .filter_map(|item| cx.ok(item.string(help)).map(|s| (s, item.pos())))
            .collect(),
    }
}

fn spot_policy(n: &Node<'_>, cx: &mut Cx<'_>) {
    let Some(p) = cx.ok(n.string("write spot, on-demand or auto")) else { return };
    match p.as_str() {
        "on-demand" => {}
        "auto" => {
            cx.spec.constraints.interruptible = true;
            cx.from("constraints.interruptible", n.pos());
        }
        "spot" => {
            cx.spec.constraints.interruptible = true;
            cx.from("constraints.interruptible", n.pos());
            cx.warn(
                n.pos(),
                &n.path,
                "`spot_policy: spot` becomes `constraints.interruptible = true`: Canopy may place it on spot \
                 capacity, and also on on-demand capacity"
                    .into(),
            );
        }
        other => cx.error(n.problem(
            format!("`spot_policy` is `{other}`, which dstack does not define"),
            "write spot, on-demand or auto",
        )),
    }
}

/// A dstack duration; `off` (or `false`) is none, with nothing to set.
fn duration(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<std::time::Duration> {
    const HELP: &str = "write a duration like 90s, 30m, 2h, 1d or 1w, or off";
    match n.kind() {
        Kind::Null => None,
        Kind::Bool => None,
        Kind::Int | Kind::Str => {
            let text = cx.ok(n.text(HELP))?;
            if text == "off" {
                if n.path == "stop_duration" {
                    cx.dropped(
                        n.pos(),
                        &n.path,
                        "Canopy always bounds a stop; the spec's default grace (30s) applies",
                    );
                }
                return None;
            }
            let d = values::dstack_duration(&text);
            if d.is_none() {
                cx.error(n.problem(format!("`{}` is not a duration dstack accepts", n.path), HELP));
            }
            d.filter(|d| !d.is_zero())
        }
        _ => {
            cx.error(n.wrong_type("a duration", HELP));
            None
        }
    }
}

fn shell(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<String> {
    let s = cx.ok(n.string("write sh, bash or an absolute path"))?;
    if s == "sh" || s == "bash" {
        Some(format!("/bin/{s}"))
    } else if s.starts_with('/') {
        Some(s)
    } else {
        cx.error(
            n.problem(format!("`shell` is `{s}`"), "write sh, bash or an absolute path, like /usr/bin/zsh"),
        );
        None
    }
}

/// `commands` → `[shell, "-c", "c1 && c2 && …"]`.
fn commands(root: &Map<'_>, cx: &mut Cx<'_>, shell: Option<String>, has_image: bool) {
    const HELP: &str = "list the shell commands the task runs, like `- python train.py`";
    let node = root.take("commands");
    let list = match &node {
        Some(n) if !n.is_null() => match cx.ok(n.list(HELP)) {
            Some(l) => l,
            None => return,
        },
        _ => Vec::new(),
    };
    let mut joined: Vec<String> = Vec::new();
    for item in &list {
        let Some(c) = cx.ok(item.string("write each command as one string; quote it if it holds `: `"))
        else {
            continue;
        };
        let c = c.trim().to_string();
        joined.push(if c.ends_with('&') { format!("{{ {c} }}") } else { c });
    }
    if list.is_empty() {
        let (at, message) = match &node {
            Some(n) => (n.clone(), "`commands` is empty"),
            None => (root.node.clone(), "the task has no `commands`"),
        };
        let help = if has_image {
            "Canopy runs a command, not the image's own entrypoint: list the commands, like `- python train.py`"
        } else {
            HELP
        };
        cx.error(at.problem(message, help));
        return;
    }
    if joined.len() != list.len() {
        return;
    }
    let shell = shell.unwrap_or_else(|| if has_image { "/bin/sh".into() } else { "/bin/bash".into() });
    cx.spec.runtime.command = vec![shell, "-c".into(), joined.join(" && ")];
    if let Some(n) = node {
        cx.from("runtime.command", n.pos());
    }
}

/// `files`: `local[:container]` strings or `{local_path, path}` mappings.
fn files(n: &Node<'_>, cx: &mut Cx<'_>) {
    if n.is_null() {
        return;
    }
    let Some(items) = cx.ok(n.list("list files as `local_path:container_path`")) else { return };
    let base = cx.ctx.config_dir.clone();
    for item in items {
        let (local, path) = match item.kind() {
            Kind::Map => {
                let Some(m) = cx.ok(item.mapping("")) else { continue };
                let local = m.take("local_path").and_then(|v| cx.ok(v.string("give the local path")));
                let path = m.take("path").and_then(|v| cx.ok(v.string("give the path in the container")));
                cx.leftovers(&m, Source::Dstack, &[]);
                match local {
                    Some(l) => (l, path),
                    None => {
                        cx.error(
                            item.problem(
                                "a `files` entry has no `local_path`",
                                "give `local_path` and `path`",
                            ),
                        );
                        continue;
                    }
                }
            }
            _ => {
                let Some(text) = cx.ok(item.string("write `local_path:container_path`")) else { continue };
                match text.split_once(':') {
                    Some((l, p)) => (l.to_string(), Some(p.to_string())),
                    None => (text.clone(), None),
                }
            }
        };
        let target = path.clone().unwrap_or_else(|| local.clone());
        // A relative container path is relative to the working directory.
        let mount = if target.starts_with('/') {
            Some(target.clone())
        } else {
            cx.spec
                .runtime
                .workdir
                .as_ref()
                .map(|w| format!("{}/{}", w.trim_end_matches('/'), target.trim_start_matches("./")))
        };
        let hint = target.trim_end_matches('/').rsplit('/').next().unwrap_or("file").to_string();
        if let Some(name) = cx.input(&hint, &local, mount.clone(), &base, (item.pos(), &item.path))
            && mount.is_none()
        {
            cx.warn(
                item.pos(),
                &item.path,
                format!(
                    "`{target}` is relative to a working directory the task does not name: Canopy \
                     mounts inputs at absolute paths, so the file is at ${} instead",
                    crate::providers::local::plan::input_var(&name)
                ),
            );
        }
    }
}

fn resources(m: &Map<'_>, cx: &mut Cx<'_>) {
    if let Some(n) = m.take("cpu") {
        cpu(&n, cx);
    }
    if let Some(n) = m.take("memory")
        && let Some(r) = cx.ok(size_range(&n, "write memory per node, like 32GB or 32GB.."))
    {
        cx.spec.resources.memory_gb = r.min.unwrap_or(cx.spec.resources.memory_gb);
        cx.from("resources.memory_gb", n.pos());
        upper_bound_dropped(cx, &n, r, "GB of memory");
    }
    if let Some(n) = m.take("disk") {
        disk(&n, cx);
    }
    if let Some(n) = m.take("gpu")
        && !n.is_null()
        && let Some(ask) = gpu(&n, cx)
    {
        cx.gpus(ask);
    }
    cx.leftovers(
        m,
        Source::Dstack,
        &[("shm_size", "Canopy does not size /dev/shm; the provider's container runtime does")],
    );
}

/// Canopy asks for minimums: a range's upper end is noted, not kept.
fn upper_bound_dropped(cx: &mut Cx<'_>, n: &Node<'_>, r: Range, unit: &str) {
    if let Some(max) = r.max
        && r.min != r.max
    {
        cx.dropped_part(
            n.pos(),
            &n.path,
            "The upper bound",
            &format!(
                "Canopy asks for at least {}, never at most {} {unit}",
                fmt_num(r.min.unwrap_or(0.0)),
                fmt_num(max)
            ),
        );
    }
}

/// `8`, `4..`, `2..8`, `x86:8..`, `arm:4`, or `{arch, count}` / `{min, max}`.
fn cpu(n: &Node<'_>, cx: &mut Cx<'_>) {
    const HELP: &str = "write CPU cores per node, like 8, 8.. or 4..16";
    let range = match n.kind() {
        Kind::Int => cx.ok(n.integer(HELP)).map(|c| Range { min: Some(c as f64), max: Some(c as f64) }),
        Kind::Str => {
            let Some(text) = cx.ok(n.string(HELP)) else { return };
            let mut count = None;
            for token in text.split(':') {
                let t = token.trim();
                if matches!(t.to_ascii_lowercase().as_str(), "x86" | "arm") {
                    cx.dropped_part(
                        n.pos(),
                        &n.path,
                        "The architecture",
                        "Canopy asks for no CPU architecture",
                    );
                } else {
                    count = values::range(t, values::count);
                }
            }
            if count.is_none() {
                cx.error(n.problem(format!("`{}` is not a CPU count dstack accepts", n.path), HELP));
            }
            count
        }
        Kind::Map => {
            let Some(sub) = cx.ok(n.mapping(HELP)) else { return };
            if let Some(a) = sub.take("arch") {
                cx.dropped(a.pos(), &a.path, "Canopy asks for no CPU architecture");
            }
            let r = match sub.take("count") {
                Some(c) => count_range(&c, cx, HELP),
                None => min_max(&sub, cx, values::count, HELP),
            };
            cx.leftovers(&sub, Source::Dstack, &[]);
            r
        }
        _ => {
            cx.error(n.wrong_type("a count like 8 or 8..", HELP));
            None
        }
    };
    let Some(r) = range else { return };
    if let Some(min) = r.min {
        // 0 or less is the spec's validation's to refuse, at this line.
        cx.spec.resources.cpu_cores = min;
        cx.from("resources.cpu_cores", n.pos());
    }
    upper_bound_dropped(cx, n, r, "cores");
}

fn count_range(n: &Node<'_>, cx: &mut Cx<'_>, help: &str) -> Option<Range> {
    match n.kind() {
        Kind::Int => cx.ok(n.integer(help)).map(|c| Range { min: Some(c as f64), max: Some(c as f64) }),
        Kind::Str => {
            let text = cx.ok(n.string(help))?;
            let r = values::range(&text, values::count);
            if r.is_none() {
                cx.error(n.problem(format!("`{}` is not a count or range like 1..4", n.path), help));
            }
            r
        }
        Kind::Map => {
            let sub = cx.ok(n.mapping(help))?;
            let r = min_max(&sub, cx, values::count, help);
            cx.leftovers(&sub, Source::Dstack, &[]);
            r
        }
        _ => {
            cx.error(n.wrong_type("a count like 2 or a range like 1..4", help));
            None
        }
    }
}

/// `{min: …, max: …}`, each end read by `one`.
fn min_max(m: &Map<'_>, cx: &mut Cx<'_>, one: fn(&str) -> Option<f64>, help: &str) -> Option<Range> {
    let mut end = |key: &str| -> Option<Option<f64>> {
        let Some(v) = m.take(key) else { return Some(None) };
        if v.is_null() {
            return Some(None);
        }
        let text = cx.ok(v.text(help))?;
        match one(&text) {
            Some(x) => Some(Some(x)),
            None => {
                cx.error(v.problem(format!("`{}` is not a value dstack accepts", v.path), help));
                None
            }
        }
    };
    let (min, max) = (end("min")?, end("max")?);
    Some(Range { min, max })
}

/// A memory or disk size, or a range of them, in GB.
fn size_range(n: &Node<'_>, help: &str) -> Got<Range> {
    match n.kind() {
        Kind::Int | Kind::Float => {
            let v = n.number(help)?;
            Ok(Range { min: Some(v), max: Some(v) })
        }
        Kind::Str => values::range(&n.text(help)?, values::size_gb)
            .ok_or_else(|| n.problem(format!("`{}` is not a size dstack accepts", n.path), help)),
        _ => Err(n.wrong_type("a size like 32GB or a range like 24GB..80GB", help)),
    }
}

fn disk(n: &Node<'_>, cx: &mut Cx<'_>) {
    const HELP: &str = "write the disk size, like 200GB or 200GB..";
    let size = if n.kind() == Kind::Map {
        let Some(m) = cx.ok(n.mapping(HELP)) else { return };
        let size = m.take("size");
        cx.leftovers(&m, Source::Dstack, &[]);
        match size {
            Some(s) => s,
            None => {
                cx.error(n.problem("`resources.disk` has no `size`", HELP));
                return;
            }
        }
    } else {
        n.clone()
    };
    let Some(r) = cx.ok(size_range(&size, HELP)) else { return };
    if let Some(min) = r.min {
        cx.spec.resources.disk_gb = min;
        cx.from("resources.disk_gb", size.pos());
    }
    upper_bound_dropped(cx, &size, r, "GB of disk");
}

/// dstack's GPU spec: a count, a string of `:`-separated tokens (vendor,
/// names, memory, count) or a mapping.
fn gpu(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<GpuAsk> {
    const HELP: &str = "write it like H100:8, A100:80GB:2, 24GB..80GB:8 or nvidia:2";
    let mut ask = GpuAsk {
        names: Vec::new(),
        vendor: None,
        count: 1,
        memory: None,
        compute_capability: None,
        pos: n.pos(),
        path: n.path.clone(),
    };
    let mut count = Range { min: Some(1.0), max: Some(1.0) };
    match n.kind() {
        Kind::Int => {
            let c = cx.ok(n.integer(HELP))?;
            if c < 0 {
                cx.error(n.problem("`resources.gpu` must be 0 or more", HELP));
                return None;
            }
            count = Range { min: Some(c as f64), max: Some(c as f64) };
        }
        Kind::Str => {
            let text = cx.ok(n.string(HELP))?.replace(' ', "");
            let mut seen = (false, false, false, false);
            for token in text.split(':') {
                let conflict = |cx: &mut Cx<'_>, what: &str| {
                    cx.error(n.problem(format!("`{}` gives the GPU {what} twice", n.path), HELP));
                };
                if token.is_empty() {
                    cx.error(n.problem(format!("`{}` has an empty part between `:`", n.path), HELP));
                    return None;
                }
                if let Some(v) = vendor(token) {
                    if seen.0 {
                        conflict(cx, "vendor");
                        return None;
                    }
                    seen.0 = true;
                    ask.vendor = v.as_ref().ok().copied();
                    if let Err(name) = v {
                        cx.dropped_part(
                            n.pos(),
                            &n.path,
                            "The vendor",
                            &format!("Canopy has no `{name}` accelerators"),
                        );
                    }
                } else if token.starts_with(|c: char| c.is_ascii_alphabetic()) {
                    if seen.1 {
                        conflict(cx, "name");
                        return None;
                    }
                    seen.1 = true;
                    ask.names = token.split(',').map(|s| (s.to_string(), n.pos())).collect();
                } else if token.contains(|c: char| c.is_ascii_alphabetic()) {
                    if seen.2 {
                        conflict(cx, "memory");
                        return None;
                    }
                    seen.2 = true;
                    match values::range(token, values::size_gb) {
                        Some(r) => ask.memory = Some(r),
                        None => {
                            cx.error(n.problem(
                                format!("`{}` has `{token}`, which is not a GPU memory size", n.path),
                                HELP,
                            ));
                            return None;
                        }
                    }
                } else {
                    if seen.3 {
                        conflict(cx, "count");
                        return None;
                    }
                    seen.3 = true;
                    match values::range(token, values::count) {
                        Some(r) => count = r,
                        None => {
                            cx.error(n.problem(
                                format!("`{}` has `{token}`, which is not a GPU count", n.path),
                                HELP,
                            ));
                            return None;
                        }
                    }
                }
            }
        }
        Kind::Map => {
            let m = cx.ok(n.mapping(HELP))?;
            if let Some(v) = m.take("vendor")
                && let Some(text) = cx.ok(v.string("write nvidia, amd, intel or tpu"))
            {
                match vendor(&text) {
                    Some(Ok(v)) => ask.vendor = Some(v),
                    Some(Err(name)) => {
                        cx.dropped(v.pos(), &v.path, &format!("Canopy has no `{name}` accelerators"))
                    }
                    None => cx.error(
                        v.problem(format!("`{text}` is not a GPU vendor"), "write nvidia, amd, intel or tpu"),
                    ),
                }
            }
            if let Some(v) = m.take("name") {
                ask.names = names(&v, cx, "write a GPU name or a list of them");
            }
            if let Some(v) = m.take("count") {
                count = count_range(&v, cx, HELP)?;
            }
            if let Some(v) = m.take("memory") {
                ask.memory = Some(cx.ok(size_range(&v, "write GPU memory like 80GB or 24GB..80GB"))?);
            }
            if let Some(v) = m.take("compute_capability") {
                ask.compute_capability = cx.ok(super::compute_capability(&v));
            }
            cx.leftovers(
                &m,
                Source::Dstack,
                &[("total_memory", "Canopy asks for memory per GPU; use `memory`")],
            );
        }
        _ => {
            cx.error(n.wrong_type("a count, a string like H100:8, or a mapping", HELP));
            return None;
        }
    }
    let min = count.min.unwrap_or(1.0);
    if count.max != count.min {
        cx.warn(
            n.pos(),
            &n.path,
            format!(
                "`{}` asks for a range of GPU counts: Canopy asks for exactly {} (the least)",
                n.path,
                fmt_num(min)
            ),
        );
    }
    ask.count = min as u32;
    if ask.count == 0 && !ask.names.is_empty() {
        cx.dropped_part(n.pos(), &n.path, "The GPU name", "it asks for 0 GPUs");
    }
    if ask.memory.is_some_and(|m| m.min.is_none() && m.max.is_none()) {
        ask.memory = None;
    }
    Some(ask)
}

/// A vendor token: `Ok` for one Canopy knows, `Err` with the name for
/// one it does not; `None` when the token is no vendor.
fn vendor(token: &str) -> Option<Result<Vendor, String>> {
    match token.to_ascii_lowercase().as_str() {
        "nvidia" => Some(Ok(Vendor::Nvidia)),
        "amd" => Some(Ok(Vendor::Amd)),
        "intel" => Some(Ok(Vendor::Intel)),
        t @ ("google" | "tpu" | "tenstorrent") => Some(Err(t.to_string())),
        _ => None,
    }
}
