//! SkyPilot task YAML → a Canopy spec, field by field, after SkyPilot's
//! published task schema (`sky/utils/schemas.py`, `get_task_schema` and
//! `get_resources_schema`) and its YAML reference.
//!
//! This module owns what each SkyPilot field means in Canopy's terms; the
//! bookkeeping (warnings, secrets, inputs, GPU names) is [`super::Cx`]'s.
//! `setup` and `run` become one argv: `bash -c RUN`, or, with a setup,
//! `bash -c 'bash -c "$1" && exec bash -c "$2"' skypilot SETUP RUN`, so each
//! script runs as written in its own bash, and the run only after the setup
//! succeeded, as SkyPilot does. A `workdir` becomes an input, and the
//! scripts start in it.

use super::values::{self, fmt_num};
use super::yaml::{Got, Kind, Map, Node, Pos, Problem};
use super::{Cx, EnvValue, GpuAsk, Source};
use crate::units::Glob;

const HELP_TASK: &str = "see SkyPilot's task YAML reference for the field's form";

/// Top-level fields without a counterpart, and why.
const TOP_DROPPED: &[(&str, &str)] = &[
    ("event_callback", "Canopy reports progress through its events and API, not a callback script"),
    ("pool", "SkyPilot worker pools have none; Canopy places each workload itself"),
    ("config", "SkyPilot's per-task configuration (Docker, Kubernetes, cloud options) does not apply"),
    ("volumes", "Canopy creates no volumes; give existing data as a file mount (an input)"),
    ("volume_mounts", "Canopy mounts no volumes; give existing data as a file mount (an input)"),
    ("inputs", "SkyPilot's experimental size hints are not used; inputs come from `file_mounts`"),
    ("outputs", "SkyPilot's experimental size hints are not used; declare [[outputs]] by path in the spec"),
    ("file_mounts_mapping", "it is internal to SkyPilot"),
    ("managed_secrets", "Canopy secrets are names resolved at launch; list them under `secrets`"),
    ("api_server_access", "Canopy gives workloads no access to its API"),
    ("_metadata", "it is internal to SkyPilot"),
];

/// `resources` fields without a counterpart, and why.
const RES_DROPPED: &[(&str, &str)] = &[
    ("instance_type", "Canopy never names instance types; it places by the resources asked for"),
    ("zone", "Canopy constrains providers and regions, not zones"),
    ("disk_tier", "Canopy does not choose disk tiers"),
    (
        "network_tier",
        "Canopy does not choose network tiers; a gang's network is `resources.fabric` in the spec",
    ),
    ("ports", "Canopy opens no ports to the Internet"),
    ("accelerator_args", "TPU settings have none"),
    ("autostop", "Canopy keeps no idle cluster: a workload ends when its command does"),
    ("any_of", "Canopy places by capability across its whole fleet; candidate resource sets are not kept"),
    ("ordered", "Canopy places by capability and score; an ordered failover list is not kept"),
    ("priority", "SkyPilot's priority scale is not Canopy's; set `priority` (0 to 100) in the spec"),
    ("priority_class", "Kubernetes priority classes have none"),
    ("volumes", "Canopy attaches no volumes"),
    ("local_disk", "Canopy does not choose local disks"),
];

pub(super) fn convert(root: &Map<'_>, cx: &mut Cx<'_>) {
    let name = root.take("name").and_then(|n| {
        let pos = n.pos();
        cx.ok(n.string("give the task a short name")).map(|s| (s, pos, "name".to_string()))
    });
    cx.name(name);
    if let Some(e) = root.take_entry("service") {
        service(&e.value, e.key_pos, cx);
    }
    if let Some(n) = root.take("num_nodes") {
        num_nodes(&n, cx);
    }
    if let Some(n) = root.take("resources")
        && !n.is_null()
        && let Some(m) = cx.ok(n.mapping(HELP_TASK))
    {
        resources(&m, cx);
    }
    if let Some(n) = root.take("envs") {
        envs(&n, cx);
    }
    if let Some(n) = root.take("secrets") {
        secrets(&n, cx);
    }
    let workdir = root.take("workdir").and_then(|n| workdir(&n, cx));
    if let Some(n) = root.take("file_mounts")
        && !n.is_null()
        && let Some(m) = cx.ok(n.mapping("map each remote path to a local path or a bucket URI"))
    {
        file_mounts(&m, cx);
    }
    let setup = root.take("setup").and_then(|n| script(&n, cx));
    match root.take_entry("run") {
        Some(e) if !e.value.is_null() => {
            if let Some(run) = script(&e.value, cx) {
                command(cx, workdir, setup, run);
            }
        }
        e => cx.error(Problem {
            pos: e.map_or(root.node.pos(), |e| e.key_pos),
            path: "run".into(),
            message: "the task has no `run`: a Canopy workload runs a command".into(),
            help: "add `run:` with the commands the task runs".into(),
        }),
    }
    cx.leftovers(root, Source::Skypilot, TOP_DROPPED);
}

/// A SkyServe `service:` section: the task is a model server, imported
/// as `kind = "inference"`; the service's own settings have no
/// counterpart (one warning for the section).
fn service(n: &Node<'_>, at: Pos, cx: &mut Cx<'_>) {
    cx.spec.kind = crate::spec::WorkloadKind::Inference;
    cx.from("kind", at);
    cx.warn(
        at,
        &n.path,
        "`service` (a SkyServe service) becomes a workload of `kind = \"inference\"`: Canopy runs its task \
         as one replica until it ends; the readiness probe, replicas, autoscaling, ports and load balancer \
         have no Canopy counterpart (dropped)"
            .into(),
    );
}

fn num_nodes(n: &Node<'_>, cx: &mut Cx<'_>) {
    let Some(v) = cx.ok(n.integer("write the number of nodes, like 2")) else { return };
    match u32::try_from(v) {
        Ok(v) if v >= 1 => {
            cx.spec.resources.nodes = v;
            cx.from("resources.nodes", n.pos());
        }
        _ => cx.error(n.problem("`num_nodes` must be 1 or more", "write the number of nodes, like 2")),
    }
}

/// The argv running `setup` (if any) then `run`, each as written, in
/// `workdir` if any: the input's variable, else (on a provider that
/// stages no inputs, over a shared file system) its original path.
fn command(
    cx: &mut Cx<'_>,
    workdir: Option<(String, Option<String>)>,
    setup: Option<(String, Pos)>,
    run: (String, Pos),
) {
    let cd = workdir.map(|(var, original)| match original {
        Some(o) => format!("cd \"${{{var}:-{}}}\" && ", in_double_quotes(&o)),
        None => format!("cd \"${var}\" && "),
    });
    let pos = run.1;
    let argv: Vec<String> = match (cd, setup) {
        (None, None) => vec!["bash".into(), "-c".into(), run.0],
        (cd, None) => {
            let driver = format!("{}exec bash -c \"$1\"", cd.unwrap_or_default());
            vec!["bash".into(), "-c".into(), driver, "skypilot".into(), run.0]
        }
        (cd, Some((setup, _))) => {
            let driver = format!("{}bash -c \"$1\" && exec bash -c \"$2\"", cd.unwrap_or_default());
            vec!["bash".into(), "-c".into(), driver, "skypilot".into(), setup, run.0]
        }
    };
    cx.spec.runtime.command = argv;
    cx.from("runtime.command", pos);
}

/// `s` escaped for the inside of a shell's double quotes.
fn in_double_quotes(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn script(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<(String, Pos)> {
    if n.is_null() {
        return None;
    }
    let text = cx.ok(n.string("write the commands as one string; `|` starts a multi-line block"))?;
    Some((text, n.pos()))
}

fn resources(m: &Map<'_>, cx: &mut Cx<'_>) {
    if let Some(n) = m.take("infra") {
        infra(&n, cx);
    }
    if let Some(n) = m.take("cloud")
        && let Some(cloud) = cx.ok(n.string("name a cloud, like aws"))
    {
        provider(cx, &cloud, n.pos());
    }
    if let Some(n) = m.take("region")
        && let Some(region) = cx.ok(n.string("name a region, like us-east-1"))
    {
        region_of(cx, &region, n.pos());
    }
    if let Some(n) = m.take("accelerators")
        && !n.is_null()
        && let Some(ask) = accelerators(&n, cx)
    {
        cx.gpus(ask);
    }
    if let Some(n) = m.take("cpus")
        && let Some(c) = cx.ok(amount(&n, values::skypilot_count, "write vCPUs per node, like 8 or 8+"))
    {
        cx.spec.resources.cpu_cores = c;
        cx.from("resources.cpu_cores", n.pos());
    }
    if let Some(n) = m.take("memory")
        && let Some(gb) = cx.ok(amount(&n, values::skypilot_size, "write GB per node, like 32, 32+ or 64GB"))
    {
        cx.spec.resources.memory_gb = gb;
        cx.from("resources.memory_gb", n.pos());
    }
    let disk = m.take("disk_size").or_else(|| m.take("ephemeral_storage"));
    if let Some(n) = disk
        && let Some(gb) =
            cx.ok(amount(&n, values::skypilot_size, "write the disk size in GB, like 256 or 256GB"))
    {
        // SkyPilot floors the disk size to whole GB.
        cx.spec.resources.disk_gb = gb.floor();
        cx.from("resources.disk_gb", n.pos());
    }
    if let Some(n) = m.take("use_spot")
        && let Some(true) = cx.ok(n.boolean("write true or false"))
    {
        cx.spec.constraints.interruptible = true;
        cx.from("constraints.interruptible", n.pos());
        cx.warn(
            n.pos(),
            &n.path,
            "`resources.use_spot: true` becomes `constraints.interruptible = true`: Canopy may place it \
             on spot capacity, and also on on-demand capacity"
                .into(),
        );
    }
    if let Some(n) = m.take("image_id") {
        image_id(&n, cx);
    }
    if let Some(n) = m.take("max_hourly_cost")
        && let Some(usd) = cx.ok(n.number("write US dollars per hour, like 10.0"))
    {
        cx.spec.constraints.max_hourly_usd = Some(usd);
        cx.from("constraints.max_hourly_usd", n.pos());
    }
    if let Some(n) = m.take("labels")
        && let Some(labels) = cx.ok(n.mapping("write `key: value` lines"))
    {
        for e in labels.take_all() {
            if let Some(v) = cx.ok(e.value.text("write the label's value as a string")) {
                cx.spec.labels.insert(e.key.clone(), v);
                cx.from(&format!("labels.{}", e.key), e.key_pos);
            }
        }
    }
    if let Some(n) = m.take("job_recovery") {
        job_recovery(&n, cx);
    }
    cx.leftovers(m, Source::Skypilot, RES_DROPPED);
}

/// A number, or text in `grammar` (`8+`, `64GB`), as a Canopy minimum.
fn amount(n: &Node<'_>, grammar: fn(&str) -> Option<values::Amount>, help: &str) -> Got<f64> {
    let bad = || n.problem(format!("`{}` is not a size SkyPilot accepts", n.path), help);
    match n.kind() {
        Kind::Int | Kind::Float => {
            let v = n.number(help)?;
            if v > 0.0 { Ok(v) } else { Err(bad()) }
        }
        Kind::Str => grammar(&n.text(help)?).map(|a| a.gb).ok_or_else(bad),
        _ => Err(n.wrong_type("a number or a string like \"8+\"", help)),
    }
}

/// `aws`, `aws/us-east-1`, `aws/us-east-1/us-east-1a`, `*/us-east-1`,
/// `k8s/my-context`.
fn infra(n: &Node<'_>, cx: &mut Cx<'_>) {
    let Some(text) = cx.ok(n.string("write CLOUD[/REGION[/ZONE]], like aws/us-east-1")) else { return };
    let parts: Vec<&str> = text.split('/').collect();
    let cloud = parts[0].to_ascii_lowercase();
    if cloud == "k8s" || cloud == "kubernetes" {
        provider(cx, &cloud, n.pos());
        if parts.len() > 1 {
            cx.dropped_part(
                n.pos(),
                &n.path,
                "The Kubernetes context",
                "it names no Canopy provider; `kubernetes` is kept as the provider",
            );
        }
        return;
    }
    if cloud != "*" && !cloud.is_empty() {
        provider(cx, &cloud, n.pos());
    }
    if let Some(region) = parts.get(1).filter(|r| **r != "*" && !r.is_empty()) {
        region_of(cx, region, n.pos());
    }
    if parts.get(2).is_some_and(|z| *z != "*") {
        cx.dropped_part(n.pos(), &n.path, "The zone", "Canopy constrains providers and regions, not zones");
    }
}

fn provider(cx: &mut Cx<'_>, cloud: &str, pos: Pos) {
    let lower = cloud.to_ascii_lowercase();
    let name = if lower == "k8s" { "kubernetes".to_string() } else { lower };
    let providers = &mut cx.spec.constraints.providers;
    if !providers.iter().any(|g| g.as_str() == name) {
        providers.push(Glob::new(name));
    }
    cx.from("constraints.providers", pos);
}

fn region_of(cx: &mut Cx<'_>, region: &str, pos: Pos) {
    let regions = &mut cx.spec.constraints.regions;
    if !regions.iter().any(|g| g.as_str() == region) {
        regions.push(Glob::new(region));
    }
    cx.from("constraints.regions", pos);
}

/// `A100:8`, `A100`, `{A100: 8}`, `[L4:1, A100:1]`, `{L4:1, A100:1}`.
fn accelerators(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<GpuAsk> {
    const HELP: &str = "write NAME:COUNT, like A100:8, or a list of them";
    let mut asks: Vec<(String, f64, Pos)> = Vec::new();
    match n.kind() {
        Kind::Str => {
            let text = cx.ok(n.string(HELP))?;
            let t = text.trim();
            let inner = t.strip_prefix(['{', '[']).and_then(|s| s.strip_suffix(['}', ']']));
            for one in inner.map_or(vec![t], |i| i.split(',').collect()) {
                let one = one.trim().trim_matches(['\'', '"']);
                asks.push(cx.ok(name_count(n, one))?);
            }
        }
        Kind::List => {
            for item in cx.ok(n.list(HELP))? {
                let one = cx.ok(item.string(HELP))?;
                asks.push(cx.ok(name_count(&item, &one))?);
            }
        }
        Kind::Map => {
            for e in cx.ok(n.mapping(HELP))?.take_all() {
                if e.value.is_null() {
                    asks.push(cx.ok(name_count(&e.value, &e.key))?);
                } else {
                    let count = cx.ok(e.value.number("give the count as a number, like 8"))?;
                    asks.push(cx.ok(checked(&e.value, &e.key, count))?);
                }
            }
        }
        _ => {
            cx.error(n.wrong_type("a string like A100:8, a list or a mapping", HELP));
            return None;
        }
    }
    if asks.is_empty() {
        cx.error(n.problem("`resources.accelerators` names no accelerator", HELP));
        return None;
    }
    let first = asks[0].1;
    if asks.iter().any(|a| a.1 != first) {
        cx.warn(
            n.pos(),
            &n.path,
            format!(
                "`{}` asks for different counts per GPU type: Canopy asks for one count, {} (the first's)",
                n.path,
                fmt_num(first)
            ),
        );
    }
    let count = if first.fract() == 0.0 {
        first
    } else {
        cx.warn(
            n.pos(),
            &n.path,
            format!(
                "`{}` asks for {} of a GPU: Canopy gives whole GPUs, {}",
                n.path,
                fmt_num(first),
                first.ceil()
            ),
        );
        first.ceil()
    };
    Some(GpuAsk {
        names: asks.into_iter().map(|(name, _, pos)| (name, pos)).collect(),
        vendor: None,
        count: count as u32,
        memory: None,
        compute_capability: None,
        pos: n.pos(),
        path: n.path.clone(),
    })
}

/// `A100:8` or `A100` (one).
fn name_count(n: &Node<'_>, one: &str) -> Got<(String, f64, Pos)> {
    match one.rsplit_once(':') {
        None => checked(n, one, 1.0),
        Some((name, count)) => match count.trim().parse::<f64>() {
            Ok(c) => checked(n, name, c),
            Err(_) => Err(n.problem(
                format!("`{}` has `{one}`: the count after `:` must be a number", n.path),
                "write NAME:COUNT, like A100:8",
            )),
        },
    }
}

fn checked(n: &Node<'_>, name: &str, count: f64) -> Got<(String, f64, Pos)> {
    let name = name.trim();
    if name.is_empty() {
        return Err(n.problem(
            format!("`{}` has an empty accelerator name", n.path),
            "write NAME:COUNT, like A100:8",
        ));
    }
    if !(count.is_finite() && count > 0.0 && count <= 1024.0) {
        return Err(n.problem(
            format!("`{}` asks for {} of `{name}`: the count must be more than 0", n.path, fmt_num(count)),
            "write the GPUs per node, like A100:8",
        ));
    }
    Ok((name.to_string(), count, n.pos()))
}

fn image_id(n: &Node<'_>, cx: &mut Cx<'_>) {
    if n.kind() == Kind::Str
        && let Some(text) = cx.ok(n.string(""))
        && let Some(image) = text.strip_prefix("docker:")
    {
        cx.spec.runtime.image = Some(image.trim().to_string());
        cx.from("runtime.image", n.pos());
        return;
    }
    cx.dropped(
        n.pos(),
        &n.path,
        "only `docker:IMAGE` maps (to `runtime.image`); machine images (AMIs, GCP or Azure images) have none",
    );
}

fn job_recovery(n: &Node<'_>, cx: &mut Cx<'_>) {
    const WHY: &str = "Canopy retries infrastructure failures elsewhere by itself (see [retry] in the spec)";
    if n.kind() != Kind::Map {
        cx.dropped(n.pos(), &n.path, WHY);
        return;
    }
    let Some(m) = cx.ok(n.mapping("")) else { return };
    if let Some(r) = m.take("max_restarts_on_errors")
        && let Some(v) = cx.ok(r.integer("write how many times to restart, like 3"))
    {
        match u32::try_from(v) {
            Ok(v) => {
                cx.spec.retry.app_errors = v;
                cx.spec.retry.max_attempts = cx.spec.retry.max_attempts.max(v.saturating_add(1));
                cx.from("retry.app_errors", r.pos());
                cx.from("retry.max_attempts", r.pos());
            }
            Err(_) => {
                cx.error(r.problem("`max_restarts_on_errors` must be 0 or more", "write a count, like 3"))
            }
        }
    }
    cx.leftovers(
        &m,
        Source::Skypilot,
        &[("strategy", WHY), ("recover_on_exit_codes", "Canopy retries by failure class, not exit code")],
    );
}

fn envs(n: &Node<'_>, cx: &mut Cx<'_>) {
    if n.is_null() {
        return;
    }
    let Some(m) = cx.ok(n.mapping("write `NAME: value` lines")) else { return };
    for e in m.take_all() {
        let value = if e.value.is_null() {
            EnvValue::Missing
        } else {
            match cx.ok(e.value.text("write the value as a string")) {
                Some(v) => EnvValue::Text(v),
                None => continue,
            }
        };
        cx.env(&e.key, value, e.key_pos, &e.value.path);
    }
}

/// `secrets:` as a mapping (values never kept) or a list of names.
fn secrets(n: &Node<'_>, cx: &mut Cx<'_>) {
    match n.kind() {
        Kind::Null => {}
        Kind::List => {
            for item in cx.ok(n.list("")).unwrap_or_default() {
                if let Some(name) = cx.ok(item.string("list secrets by name, like HF_TOKEN")) {
                    cx.secret(&name, item.pos());
                }
            }
        }
        Kind::Map => {
            for e in cx.ok(n.mapping("")).map(|m| m.take_all()).unwrap_or_default() {
                if !e.value.is_null() {
                    if let Ok(v) = e.value.text("") {
                        cx.hide(&v);
                    }
                    cx.warn(
                        e.key_pos,
                        &e.value.path,
                        format!(
                            "`{}` has its value in the file: it becomes secret `{}`, resolved when the \
                             workload launches; the value is not carried over",
                            e.value.path, e.key
                        ),
                    );
                }
                cx.secret(&e.key, e.key_pos);
            }
        }
        _ => cx.error(
            n.wrong_type("a mapping of secret names (or a list of them)", "write `HF_TOKEN: null` lines"),
        ),
    }
}

/// `workdir` → an input; returns the input's variable and the original
/// path, for the command to start in.
fn workdir(n: &Node<'_>, cx: &mut Cx<'_>) -> Option<(String, Option<String>)> {
    match n.kind() {
        Kind::Null => None,
        Kind::Str => {
            let dir = cx.ok(n.string(""))?;
            let cwd = cx.ctx.cwd.clone();
            let name = cx.input("workdir", &dir, None, &cwd, (n.pos(), &n.path))?;
            let source = cx.spec.inputs.last().map(|i| i.source.clone()).unwrap_or_default();
            let original = crate::providers::local::plan::file_uri_path(&source)
                .ok()
                .map(|p| p.to_string_lossy().into_owned());
            Some((crate::providers::local::plan::input_var(&name), original))
        }
        _ => {
            cx.dropped(n.pos(), &n.path, "Canopy clones no repositories; clone it at the start of `setup`");
            None
        }
    }
}

fn file_mounts(m: &Map<'_>, cx: &mut Cx<'_>) {
    let cwd = cx.ctx.cwd.clone();
    for e in m.take_all() {
        let remote = e.key.clone();
        let hint = remote.trim_end_matches('/').rsplit('/').next().unwrap_or("mount").to_string();
        let mount = remote.starts_with('/').then(|| remote.clone());
        let at = (e.key_pos, e.value.path.as_str());
        let added = match e.value.kind() {
            Kind::Str => {
                let Some(src) = cx.ok(e.value.string("")) else { continue };
                cx.input(&hint, &src, mount.clone(), &cwd, at)
            }
            Kind::Map => {
                let Some(spec) = cx.ok(e.value.mapping("")) else { continue };
                storage(&spec, cx, &hint, mount.clone(), at)
            }
            _ => {
                cx.error(e.value.wrong_type("a local path, a bucket URI or a storage mapping", HELP_TASK));
                None
            }
        };
        if let Some(name) = added
            && mount.is_none()
        {
            cx.warn(
                e.key_pos,
                &e.value.path,
                format!(
                    "`{remote}` is not an absolute path: Canopy mounts inputs at absolute paths, so the data \
                     is at ${} instead",
                    crate::providers::local::plan::input_var(&name)
                ),
            );
        }
    }
}

/// A storage mapping (`source`, `name`, `store`, `mode`, …) → an input
/// from its source.
fn storage(
    m: &Map<'_>,
    cx: &mut Cx<'_>,
    hint: &str,
    mount: Option<String>,
    at: (Pos, &str),
) -> Option<String> {
    let cwd = cx.ctx.cwd.clone();
    let mode = m.take_entry("mode");
    let mounted = mode.as_ref().and_then(|e| e.value.string("").ok()).is_some_and(|s| {
        let s = s.to_ascii_uppercase();
        s == "MOUNT" || s == "MOUNT_CACHED"
    });
    if mounted && let Some(path) = mount.as_deref().filter(|p| super::checkpoint::is_checkpoint_path(p)) {
        let bucket = bucket_name(m);
        m.take_all();
        cx.checkpoint(path, &format!("bucket `{bucket}`"), at.0, at.1);
        return None;
    }
    let mut added = None;
    let mut whole_dropped = false;
    match m.take("source") {
        Some(s) if s.kind() == Kind::List => {
            let items = cx.ok(s.list("")).unwrap_or_default();
            for (i, item) in items.iter().enumerate() {
                let Some(src) = cx.ok(item.string("give the source as a path or URI")) else { continue };
                if i == 0 {
                    added = cx.input(hint, &src, mount.clone(), &cwd, (item.pos(), &item.path));
                } else {
                    cx.dropped(item.pos(), &item.path, "a Canopy input has one source; the first is kept");
                }
            }
        }
        Some(s) if !s.is_null() => {
            let src = cx.ok(s.string("give the source as a path or URI"))?;
            added = cx.input(hint, &src, mount, &cwd, (s.pos(), &s.path));
        }
        _ => {
            // The whole mount goes, its settings with it: one warning.
            m.take_all();
            whole_dropped = true;
            cx.dropped(
                at.0,
                at.1,
                "without a `source` it creates an empty bucket or volume; Canopy inputs read existing data",
            );
        }
    }
    if let Some(e) = mode.filter(|_| !whole_dropped) {
        cx.dropped(
            e.key_pos,
            &e.value.path,
            "Canopy stages inputs its own way (a copy or a link, by provider)",
        );
    }
    cx.leftovers(
        m,
        Source::Skypilot,
        &[
            ("name", "Canopy reads the source where it is and creates no bucket"),
            ("store", "Canopy reads the source where it is and creates no bucket"),
            ("persistent", "Canopy creates no bucket to keep or delete"),
            ("mount_options", "Canopy stages inputs its own way"),
            ("type", "Canopy stages inputs its own way"),
            ("config", "Canopy creates no volumes"),
        ],
    );
    added
}

/// How a storage mapping names its bucket: `name`, else its (first)
/// `source`, for messages (taking both).
fn bucket_name(m: &Map<'_>) -> String {
    let text = |n: Option<Node<'_>>| {
        n.and_then(|n| match n.kind() {
            Kind::List => n.list("").ok().and_then(|l| l.first().and_then(|i| i.string("").ok())),
            _ => n.string("").ok(),
        })
    };
    let (name, source) = (text(m.take("name")), text(m.take("source")));
    name.or(source).unwrap_or_else(|| "(unnamed)".into())
}
