//! What sort of dstack run a configuration is and how it is kept going:
//! `type` (a task, or a service imported as `kind = "inference"`),
//! `retry` (its `error` event is Canopy's `retry.app_errors`) and
//! `volumes` (one mounted where checkpoints go is `[checkpoint]`).
//!
//! The field-by-field rest of a task is `dstack.rs`'s; the bookkeeping
//! (warnings, where each field came from) is [`super::Cx`]'s.

use super::yaml::{Kind, Map, Node};
use super::{Cx, Source};
use crate::spec::WorkloadKind;

/// Service fields without a counterpart, and why.
pub(super) const SERVICE_DROPPED: &[(&str, &str)] = &[
    ("port", "Canopy opens no port to clients; the workload serves where it runs"),
    ("gateway", "Canopy has no gateways"),
    ("https", "Canopy has no gateways"),
    ("auth", "Canopy has no service endpoint to authorize"),
    ("replicas", "a Canopy workload is one replica; submit several for more"),
    ("scaling", "Canopy does not autoscale"),
    ("model", "Canopy has no OpenAI-compatible model endpoint"),
    ("rate_limits", "Canopy has no service endpoint to rate-limit"),
    ("probes", "Canopy probes no readiness"),
    ("readiness_probe", "Canopy probes no readiness"),
    ("strip_prefix", "Canopy has no gateways"),
];

/// What the configuration's `type` lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RunType {
    Task,
    Service,
}

/// `type: task` or `type: service` (as `kind = "inference"`, with a
/// warning for what a service loses), or an error naming what the file
/// is instead.
pub(super) fn run_type(root: &Map<'_>, cx: &mut Cx<'_>) -> Option<RunType> {
    let Some(n) = root.take("type") else {
        cx.error(root.node.problem(
            "the configuration has no `type`",
            "`canopy import dstack` reads tasks and services: add `type: task` if this is a task",
        ));
        return None;
    };
    let t = cx.ok(n.string("write `type: task`"))?;
    let what = match t.as_str() {
        "task" => return Some(RunType::Task),
        "service" => {
            cx.spec.kind = WorkloadKind::Inference;
            cx.from("kind", n.pos());
            cx.warn(
                n.pos(),
                &n.path,
                "`type: service` becomes a workload of `kind = \"inference\"`: Canopy runs its commands as one \
                 replica until they end, and opens no port, gateway or model endpoint for it (the service's \
                 own fields are dropped below)"
                    .into(),
            );
            return Some(RunType::Service);
        }
        "dev-environment" => "a dstack dev environment",
        "fleet" => "a dstack fleet",
        "volume" => "a dstack volume",
        "gateway" => "a dstack gateway",
        _ => "not a dstack run configuration type",
    };
    cx.error(n.problem(
        format!(
            "`type: {t}` is {what}; `canopy import dstack` imports tasks (`type: task`) and services \
             (`type: service`) only"
        ),
        "import a task configuration; a dev environment's commands can be run as a task by copying them \
         into one",
    ));
    None
}

/// dstack's retry events.
const EVENTS: [&str; 3] = ["no-capacity", "interruption", "error"];

/// `retry: true | false | {on_events, duration}`. `error` becomes
/// `retry.app_errors`; `no-capacity` and `interruption` are what Canopy
/// does by itself (it waits for capacity and retries infrastructure
/// failures elsewhere).
pub(super) fn retry(n: &Node<'_>, cx: &mut Cx<'_>) {
    const HELP: &str = "write `on_events: [no-capacity, interruption, error]` and a `duration`";
    let events: Vec<String> = match n.kind() {
        Kind::Null => return,
        Kind::Bool => {
            if cx.ok(n.boolean(HELP)) == Some(true) {
                EVENTS.iter().map(|e| e.to_string()).collect()
            } else {
                cx.dropped(
                    n.pos(),
                    &n.path,
                    "Canopy retries infrastructure failures elsewhere all the same (set `retry.infra_retries \
                     = 0` in the spec to stop that)",
                );
                return;
            }
        }
        Kind::Map => {
            let Some(m) = cx.ok(n.mapping(HELP)) else { return };
            let events = match m.take("on_events") {
                Some(list) if !list.is_null() => {
                    let mut events = Vec::new();
                    for item in cx.ok(list.list(HELP)).unwrap_or_default() {
                        let Some(e) = cx.ok(item.string(HELP)) else { continue };
                        if EVENTS.contains(&e.as_str()) {
                            events.push(e);
                        } else {
                            cx.error(item.problem(
                                format!("`{}` is `{e}`, which is not a dstack retry event", item.path),
                                "write no-capacity, interruption or error",
                            ));
                        }
                    }
                    if !events.iter().any(|e| e == "interruption") {
                        cx.warn(
                            list.pos(),
                            &list.path,
                            "`retry.on_events` leaves out `interruption`: Canopy retries infrastructure \
                             failures (interruptions included) elsewhere all the same; set \
                             `retry.infra_retries = 0` in the spec to stop that"
                                .into(),
                        );
                    }
                    events
                }
                // dstack: a retry without events retries on all of them.
                _ => EVENTS.iter().map(|e| e.to_string()).collect(),
            };
            cx.leftovers(
                &m,
                Source::Dstack,
                &[("duration", "Canopy bounds retries by count (`retry.max_attempts`), not by time")],
            );
            events
        }
        _ => {
            cx.error(n.wrong_type("true, false or a mapping", HELP));
            return;
        }
    };
    if events.iter().any(|e| e == "error") {
        let r = &mut cx.spec.retry;
        r.app_errors = r.max_attempts.saturating_sub(1).max(1);
        r.max_attempts = r.max_attempts.max(r.app_errors.saturating_add(1));
        let (app_errors, attempts) = (r.app_errors, r.max_attempts);
        cx.from("retry.app_errors", n.pos());
        cx.warn(
            n.pos(),
            &n.path,
            format!(
                "`retry` on `error` becomes `retry.app_errors = {app_errors}`: dstack retries errors until \
                 `duration` runs out, Canopy counts them, so the workload's own errors may use all \
                 {attempts} attempts of `retry.max_attempts`; raise both in the spec for more"
            ),
        );
    }
}

/// `volumes`: network (`name:/path`, `{name, path}`) and instance
/// (`/host:/path`, `{instance_path, path}`) volumes. One mounted where
/// checkpoints go becomes `[checkpoint]`; the rest are dropped.
pub(super) fn volumes(n: &Node<'_>, cx: &mut Cx<'_>) {
    const HELP: &str = "list volumes as `name:/path` or `{name, path}`";
    const DROPPED: &str = "Canopy attaches no volumes; give existing data as `files` (inputs)";
    if n.is_null() {
        return;
    }
    let Some(items) = cx.ok(n.list(HELP)) else { return };
    for item in items {
        let (what, path) = match item.kind() {
            Kind::Map => {
                let Some(m) = cx.ok(item.mapping(HELP)) else { continue };
                let name = m.take("name").and_then(|v| match v.kind() {
                    Kind::List => v.list("").ok().and_then(|l| l.first().and_then(|i| i.string("").ok())),
                    _ => v.string("").ok(),
                });
                let host = m.take("instance_path").and_then(|v| v.string("").ok());
                let path = m.take("path").and_then(|v| v.string("").ok());
                m.take_all();
                let what = match (name, host) {
                    (Some(name), _) => format!("volume `{name}`"),
                    (None, Some(host)) => format!("instance path `{host}`"),
                    (None, None) => "a volume".to_string(),
                };
                (what, path)
            }
            _ => {
                let Some(text) = cx.ok(item.string(HELP)) else { continue };
                match text.split_once(':') {
                    Some((src, path)) if src.starts_with('/') => {
                        (format!("instance path `{src}`"), Some(path.to_string()))
                    }
                    Some((name, path)) => (format!("volume `{name}`"), Some(path.to_string())),
                    None => (format!("volume `{text}`"), None),
                }
            }
        };
        match path.filter(|p| super::checkpoint::is_checkpoint_path(p)) {
            Some(p) => cx.checkpoint(&p, &what, item.pos(), &item.path),
            None => cx.dropped(item.pos(), &item.path, DROPPED),
        }
    }
}
